"""`--demo --profile FILE`: the demo's nodes with what the file adds, what cannot apply said once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from console.cli.common import PRESETS_PATH
from console.core.errors import ProfileError
from console.core.health_profile import health_settings
from console.core.profiles import demo_profile_path, load_profile
from console.services.demo import demo_profile

ROOT = Path(__file__).resolve().parents[2]
DEMO_NODES = [n.name for n in load_profile([demo_profile_path()]).nodes]

MINE = """
[keys]
help = "f1"

[health]
throttle_share = 0.5

[serve.my-preset]
model = "facebook/opt-125m"

[nodes.gpu-a]
host = "gpu-a.lab"

[nodes.gpu-b]
host = "gpu-b.lab"
telemetry = "prometheus"

[prometheus]
url = "http://prom.lab:9090"

[nodes.my-sim]
transport = "local"
simulate = { gpu = "MI325X", count = 8, seed = 9 }
"""


def test_the_profile_applies_on_top_of_the_demo_and_what_cannot_is_one_line(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text(MINE)
    profile, note = demo_profile([str(path)], [PRESETS_PATH])
    # the demo's simulated nodes, and the file's own simulated local node; never its real ones
    assert [n.name for n in profile.nodes] == [*DEMO_NODES, "my-sim"]
    assert profile.prometheus is None
    assert dict(profile.keys) == {"help": "f1"}
    assert "my-preset" in {p.name for p in profile.serve_presets}
    assert "llama-3.1-8b-fp8" in {p.name for p in profile.serve_presets}  # the shipped presets stay
    assert health_settings(profile).rules.throttle_share == 0.5
    assert note == (
        "--demo: left out of lab.toml: nodes gpu-a, gpu-b (not simulated on this machine); "
        "[prometheus] (no demo node reads it); its presets, [keys] and [health] apply"
    )


def test_a_profile_that_fits_says_nothing_and_a_clash_names_file_and_node(tmp_path):
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\nquit = "ctrl+q"\n')
    profile, note = demo_profile([str(keys)], [PRESETS_PATH])
    assert note is None and dict(profile.keys) == {"quit": "ctrl+q"}
    clash = tmp_path / "clash.toml"
    clash.write_text('[nodes.h100]\ntransport = "local"\nsimulate = { gpu = "H100", count = 8 }\n')
    with pytest.raises(ProfileError) as err:
        demo_profile([str(clash)], [PRESETS_PATH])
    assert str(err.value) == f"{clash}: [nodes.h100]: node 'h100' is a demo node too: rename it"


def test_cli_with_demo_and_profile_says_what_it_left_out_on_one_line(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text(MINE)
    proc = subprocess.run(
        [sys.executable, "-m", "console", "events", "--demo", "--profile", str(path), "--node", "gpu-a"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "rocm-console: --demo: left out of lab.toml: nodes gpu-a, gpu-b (not simulated on this machine); "
        "[prometheus] (no demo node reads it); its presets, [keys] and [health] apply",
        "rocm-console: --node 'gpu-a': no such node in the profile or the event log "
        "(known: h100, mi300x-cpx, mi300x-spx, mi355x, my-sim)",
    ]
