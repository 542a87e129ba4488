"""`pipx install .` (a wheel, not the source tree): the shipped data travels with it.

Builds the wheel as pip/pipx does (build isolation: setuptools from PyPI, or the local one
when offline), installs it into a fresh venv and runs it from a folder outside the source
tree: `rocm-console --help`, the presets, the demo profile, the reference numbers and the
demo's recorded results all load from the installed copy (<venv>/share/rocm-console/profiles).
The venv sees this interpreter's packages (--system-site-packages) so the dependencies need
no download; the package itself is the wheel's copy (checked by its path).
"""

from __future__ import annotations

import json
import os
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


def test_an_installed_wheel_finds_its_presets_and_demo_data(tmp_path):
    wheels, venv, outside, src = tmp_path / "wheels", tmp_path / "venv", tmp_path / "elsewhere", tmp_path / "src"
    outside.mkdir()
    # A copy of what the wheel is built from: setuptools writes build/ and *.egg-info beside it.
    # The git symlinks stay links, as in a checkout (the wheel must carry real files for them).
    src.mkdir()
    for name in ("console", "profiles"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
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
