"""Installing it: the README's first command on a machine with Python and nothing else, and
the wheel (not the source tree) carrying the shipped data.

* The README's quick-start line, read from README.md, runs as written (its last step, the
  interactive demo, swapped for `rocm-console --version` and `rocm-console status --demo`,
  which run the demo's nodes and exit) in a copy of the checkout, with a PATH that holds
  this Python as `python3` and nothing of this environment's: a `pipx` there fails the test if
  the line calls it. The dependencies come from the package index pip is configured with;
  the test is skipped, not failed, when no index can be reached.
* The wheel: built as pip does (build isolation: setuptools from PyPI, or the local one
  when offline), installed into a fresh venv and run from a folder outside the source tree:
  `rocm-console --help`, the presets, the demo profile, the reference numbers and the demo's
  recorded results all load from the installed copy (<venv>/share/rocm-console/profiles).
  That venv sees this interpreter's packages (--system-site-packages) so the dependencies
  need no download; the package itself is the wheel's copy (checked by its path).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.core.profiles import load_profile

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CHECK = r"""
import json, sys
import console
from console.cli.common import PRESETS_PATH
from console.core.profiles import PROFILES_DIR, demo_profile_path, load_profile
from console.core.results.reference import load_reference_numbers
from console.services import demo
from console.services.results import ResultStore

profile = load_profile([PRESETS_PATH, demo_profile_path()])
store = ResultStore(sys.argv[1])
print(json.dumps({
    "package": console.__file__,
    "profiles": str(PROFILES_DIR),
    "serve_presets": len(profile.serve_presets),
    "bench_presets": len(profile.bench_presets),
    "nodes": [n.name for n in profile.nodes],
    "references": len(load_reference_numbers(PROFILES_DIR / "reference_numbers.toml")),
    "seeded": demo.seed_history(store),
}))
"""


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=240, **kw)


def copy_source(src: Path) -> None:
    """What a wheel is built from (setuptools writes build/ and *.egg-info beside it)."""
    # The git symlinks stay links, as in a checkout (the wheel must carry real files for them).
    src.mkdir()
    for name in ("console", "profiles"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)


def readme_first_command() -> str:
    """The first line of the README's quick start, its comment left out."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Quick start\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return re.sub(r"\s+#\s.*$", "", block.splitlines()[0]).strip()


# What pip says when no package index answers (this machine offline), not a fault of the line.
OFFLINE = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
)


def test_the_readmes_first_command_works_with_python_alone(tmp_path):
    line = readme_first_command()
    install, _, demo = line.rpartition(" && ")
    assert demo == "rocm-console --demo", f"the README's first command should end by starting the demo: {line!r}"
    src, bin_dir, home = tmp_path / "checkout", tmp_path / "bin", tmp_path / "home"
    copy_source(src)
    bin_dir.mkdir()
    home.mkdir()
    # This Python as the machine's python3, and a pipx that only reports being called.
    (bin_dir / "python3").symlink_to(Path(getattr(sys, "_base_executable", sys.executable)).resolve())
    called = tmp_path / "pipx-was-called"
    (bin_dir / "pipx").write_text(f"#!/bin/sh\necho called > {called}\nexit 127\n")
    (bin_dir / "pipx").chmod(0o755)
    keep = ("LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
    env = {k: v for k, v in os.environ.items() if k in keep or k.startswith("PIP_")}
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}:/usr/bin:/bin",
        # The wheels pip fetched before stay usable (a cache only), and an unreachable index
        # fails in seconds rather than after pip's minutes of retries.
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"),
        PIP_RETRIES="1",
        PIP_DEFAULT_TIMEOUT="30",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    # The interactive demo is swapped for what runs the demo's nodes and exits.
    script = f"{install} && rocm-console --version && rocm-console status --demo"
    done = subprocess.run(["/bin/sh", "-c", script], cwd=src, env=env, capture_output=True, text=True, timeout=280)
    installed = (src / ".venv" / "bin" / "rocm-console").exists()
    if done.returncode != 0 and not installed and any(sign in done.stderr for sign in OFFLINE):
        pytest.skip("no package index reachable for the install: " + done.stderr.strip().splitlines()[-1][:200])
    assert not called.exists(), "the README's first command called pipx"
    assert done.returncode == 0, f"{script!r} failed:\n{done.stdout[-1500:]}\n{done.stderr[-2500:]}"
    assert re.search(r"^rocm-console \d", done.stdout, re.M), done.stdout[-500:]
    nodes = [n.name for n in load_profile([ROOT / "profiles" / "demo.toml"]).nodes]
    assert all(name in done.stdout for name in nodes), done.stdout[-2000:]
    assert "Traceback" not in done.stderr
    assert installed  # in the checkout's own environment, not taken from this one


def test_an_installed_wheel_finds_its_presets_and_demo_data(tmp_path):
    wheels, venv, outside, src = tmp_path / "wheels", tmp_path / "venv", tmp_path / "elsewhere", tmp_path / "src"
    outside.mkdir()
    copy_source(src)
    built = run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)])
    if built.returncode != 0:  # no PyPI for the isolated build: the local setuptools
        built = run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(wheels),
                str(src),
            ]
        )
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = list(wheels.glob("rocm_console-*.whl"))
    assert run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)]).returncode == 0
    py = venv / "bin" / "python"
    installed = run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ROCM_CONSOLE_DATA_DIR")}
    helped = run([str(venv / "bin" / "rocm-console"), "--help"], cwd=outside, env=env)
    assert helped.returncode == 0 and "web" in helped.stdout and "status" in helped.stdout, helped.stderr
    checked = run([str(py), "-c", CHECK, str(tmp_path / "results")], cwd=outside, env=env)
    assert checked.returncode == 0, checked.stderr[-2000:]
    facts = json.loads(checked.stdout)
    assert facts["package"].startswith(str(venv)), facts  # the wheel's copy, not the checkout
    assert facts["profiles"] == str(venv / "share" / "rocm-console" / "profiles")
    assert facts["serve_presets"] >= 5 and facts["bench_presets"] >= 3
    assert facts["nodes"] == [n.name for n in load_profile([ROOT / "profiles" / "demo.toml"]).nodes]
    assert facts["references"] >= 10 and facts["seeded"] >= 5
    # One file serves several places (git symlinks in the checkout): the wheel has a real copy in each.
    pkg = Path(facts["package"]).parent
    for shared, places in (
        ("agent/lifeline.py", ("sim/vllm/lifeline.py",)),
        ("agent/statefiles.py", ("sim/statefiles.py", "sim/amdsmi/statefiles.py", "sim/vllm/statefiles.py")),
    ):
        for place in places:
            assert not (pkg / place).is_symlink() and (pkg / place).read_bytes() == (pkg / shared).read_bytes(), place
    # The installed agent reads the installed simulated amdsmi (a package with its own statefiles.py).
    sim_env = dict(env, ROCM_CONSOLE_SIM_DIR=str(tmp_path / "sim-state"), ROCM_CONSOLE_SIM_SPEC='{"count": 2}')
    argv = [str(py), "-S", str(pkg / "agent"), "telemetry", "--count", "1", "--amdsmi-path", str(pkg / "sim")]
    told = run(argv, cwd=outside, env=sim_env)
    assert told.returncode == 0, told.stderr[-2000:]
    hello = json.loads(told.stdout.splitlines()[0])
    assert hello["source"] == "amdsmi" and hello["simulated"] is True, hello
