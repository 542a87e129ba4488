"""`rocm-console models pulls` lists the pulls the history keeps (the store), newest first, one
line each, filtered by --node / --since / --limit; bad input is one line naming it (exit 2); a
store that cannot be opened is one line naming it (exit 1). `store info | dump | load` carry the
pulls: a dump loaded into a new data folder lists the same pulls.
(A pull started through `models pull` leaving its row: tests/cli/test_models_pull.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from console.core.store.pulls import PullRecord, pull_id
from tests.cli.cli_helpers import one_line_error, run

NOW = time.time()
DAY = 86400.0


@pytest.fixture
def lab(tmp_path) -> dict:
    """Two simulated nodes (they hold no pulls of their own), and the command's environment."""
    profile = tmp_path / "lab.toml"
    profile.write_text(
        f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8 }}

[nodes.sim2]
transport = "local"
state_dir = "{tmp_path / "state2"}"
simulate = {{ gpu = "MI300X", count = 8 }}
"""
    )
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    return {"profile": str(profile), "env": env, "data": tmp_path / "data"}


def _pull(node: str, model: str, age_days: float, state: str = "ok", **more) -> PullRecord:
    started = NOW - age_days * DAY
    fields: dict = dict(bytes=9_100_000_000, total_bytes=9_100_000_000, files=5, origin="cli@lab")
    fields["ended"] = started + 125 if state != "running" else None
    fields.update(more)
    return PullRecord(pull_id(node, model, started), node, model, started, state, **fields)


PULLS = [
    _pull("sim", "org/newest", 0.5),
    _pull("sim2", "org/other-node", 1, state="failed", bytes=1_000, message="gated model (request access)"),
    _pull("sim", "org/three-days", 3, state="cancelled", bytes=4_550_000_000, message="stopped at 4.5 GB"),
    _pull("sim", "org/old", 10),
]


def _seed(data: Path, pulls=PULLS) -> None:
    from console.services.store import open_store

    with open_store(data / "store.sqlite3") as store:
        for p in pulls:
            store.pulls.record(p)


def pulls(lab, *args: str, env: dict | None = None):
    return run("models", "pulls", "--profile", lab["profile"], *args, env=env or lab["env"])


def test_models_pulls_lists_the_history_newest_first_one_line_each(lab):
    _seed(lab["data"])
    shown = pulls(lab)
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["STARTED", "NODE", "MODEL", "STATE", "BYTES", "TOOK", "FROM"]
    assert [r.split()[2:5] for r in rows] == [
        ["sim", "org/newest", "ok"],
        ["sim2", "org/other-node", "failed"],
        ["sim", "org/three-days", "cancelled"],
        ["sim", "org/old", "ok"],
    ]
    assert rows[0].split()[5:] == ["9.1", "GB", "2", "min", "05", "s", "cli@lab"]
    assert rows[1].endswith("cli@lab  gated model (request access)")
    assert "4.5 GB of 9.1 GB" in rows[2] and rows[2].endswith("stopped at 4.5 GB")

    week = pulls(lab, "--node", "sim", "--since", "7d")
    assert [r.split()[3] for r in week.stdout.splitlines()[1:]] == ["org/newest", "org/three-days"]
    one = pulls(lab, "--limit", "1", "--json")
    assert one.returncode == 0 and one.stderr == "rocm-console: the newest 1 pulls shown; --limit N shows more\n"
    [doc] = json.loads(one.stdout)["pulls"]
    assert doc == PULLS[0].to_dict()
    none = pulls(lab, "--node", "sim2", "--since", "1h")
    assert none.returncode == 0 and none.stdout.startswith("no pulls match (")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--since", "soon"], "rocm-console: --since 'soon': expected a duration (30s, 15m, 1h, 7d), a date"),
        (["--limit", "0"], "rocm-console models pulls: argument --limit: '0': expected a whole number >= 1"),
        (["--limit", "many"], "rocm-console models pulls: argument --limit: 'many': expected a whole number"),
        (["--node", "nope"], "rocm-console: "),
    ],
)
def test_bad_input_is_one_line_naming_it(lab, args, line):
    proc = pulls(lab, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    got = one_line_error(proc)
    assert got.startswith(line), got
    if args[0] == "--node":
        assert "nope" in got


def test_a_store_that_cannot_be_opened_is_one_line_naming_it(lab):
    (lab["data"] / "store.sqlite3").mkdir(parents=True)  # a folder where the store's file would be
    proc = pulls(lab)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert one_line_error(proc) == (
        f"rocm-console: cannot open the store {lab['data'] / 'store.sqlite3'}: it is not a file "
        "(the nodes' pulls now shown, not the history)"
    )


def test_store_info_dump_and_load_carry_the_pulls(lab, tmp_path):
    _seed(lab["data"])
    info = run("store", "info", "--json", env=lab["env"])
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["pulls"] == 4
    text = run("store", "info", env=lab["env"])
    assert "model pulls     4\n" in text.stdout

    dump = tmp_path / "dump"
    dumped = run("store", "dump", str(dump), env=lab["env"])
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout == f"wrote 0 runs, 0 baselines, 0 events, 0 node-versions records, 4 pulls to {dump}\n"
    new_env = dict(lab["env"], ROCM_CONSOLE_DATA_DIR=str(tmp_path / "new-data"))
    loaded = run("store", "load", str(dump), env=new_env)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.startswith("moved 0 runs, 0 baselines, 0 events, 0 node-versions records, 4 pulls, from ")
    again = run("store", "load", str(dump), env=new_env)
    assert again.stdout.startswith("moved 0 runs, 0 baselines, 0 events, 0 node-versions records (4 already in")
    before = json.loads(pulls(lab, "--json").stdout)["pulls"]
    after = json.loads(pulls(lab, "--json", env=new_env).stdout)["pulls"]
    assert after == before and len(after) == 4
