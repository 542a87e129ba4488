"""A partition switch made from the CLI lands on the fleet's timeline (the data dir's
store), as one made in the TUI does: `rocm-console events` shows it."""

from __future__ import annotations

import json
import socket

from tests.cli.cli_helpers import run


def test_partition_set_is_an_event(tmp_path):
    state = tmp_path / "state"
    profile = tmp_path / "lab.toml"
    profile.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{state}"
simulate = {{ gpu = "MI300X", count = 2, compute_partition = "SPX", seed = 5 }}
""")
    env = {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    done = run("partition", "set", "--profile", str(profile), "--node", "sim", "--gpus", "1", "--compute", "CPX",
               "--yes", env=env, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = run("events", "--profile", str(profile), "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    events = doc["events"] if isinstance(doc, dict) else doc
    [switch] = [e for e in events if e["kind"] == "partition.switched"]
    assert switch["node"] == "sim" and switch["message"] == "partition switched to CPX on GPUs 1"
    assert switch["origin"] == f"cli@{socket.gethostname()}"  # the team's timeline says who wrote it
