"""The demo's simulated nodes make their user root (`simulate = { ..., root = true }`), so the
demo's partition switches work for a person who is not root on this machine: the probe says
uid 0 and the simulated amdsmi lets the switch through. Without it, the real user counts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to run as nobody"
)


@pytest.fixture
def tmp_path():
    """A folder nobody can reach (pytest's own tmp root is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="sim-root-", dir="/tmp"))
    os.chmod(folder, 0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def as_nobody(tmp_path, spec: dict, *argv: str) -> dict:
    state = tmp_path / "sim"
    state.mkdir(exist_ok=True)
    os.chmod(state, 0o777)
    env = {
        "PATH": "/usr/bin:/bin",
        "ROCM_CONSOLE_SIM_DIR": str(state),
        "ROCM_CONSOLE_SIM_SPEC": json.dumps(spec),
        "HOME": str(state),
    }
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-S", str(AGENT), *argv]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("root, uid", [(True, 0), (None, 65534)])
def test_probe_uid_follows_the_simulated_root(tmp_path, root, uid):
    spec = {"gpu": "MI300X", "count": 2, "compute_partition": "CPX", "root": root, "switch_seconds": 0}
    probe = as_nobody(tmp_path, spec, "probe", "--amdsmi-path", str(ROOT / "console" / "sim"))
    assert probe["uid"] == uid


def test_a_simulated_root_node_switches_for_a_user_who_is_not_root(tmp_path):
    spec = {"gpu": "MI300X", "count": 2, "compute_partition": "CPX", "root": True, "switch_seconds": 0}
    sim = ["--amdsmi-path", str(ROOT / "console" / "sim")]
    done = as_nobody(tmp_path, spec, "partition", "set", "--gpus", "0", "--compute", "SPX", *sim)
    assert done.get("kind") != "error", done
    spec["root"] = None  # the user running it: nobody is refused as on a real node
    (tmp_path / "sim" / "state.json").unlink()
    refused = as_nobody(tmp_path, spec, "partition", "set", "--gpus", "0", "--compute", "SPX", *sim)
    assert refused["kind"] == "error" and refused.get("reason") == "no_perm", refused
