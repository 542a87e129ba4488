"""Issue Y: the CLI reads and writes its history through the store (`rocm-console results`,
`events`, `baseline`, `store dump|load|info`), as a user runs it (`python -m console ...`): an
old data folder's files are moved in on first use, said in one line once; a store that cannot
be opened is one line naming it (exit 1) while event writes still land; a dump loads into a
new store with nothing lost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from console.core.baseline.report import EXIT_REGRESSED
from console.core.events import Event, partition_event
from console.core.results.build import run_from_console
from console.services.baseline import BaselineStore
from console.services.events import EventLog
from console.services.results import ResultStore
from tests.cli.cli_helpers import StoreEvents, one_line_error, run, stored_runs

ROOT = Path(__file__).resolve().parents[2]
RESULT = json.loads((ROOT / "tests/fixtures/vllm-0.32-cpu/bench_result.json").read_text())
SEEDED_BASELINE = ROOT / "profiles/demo-baselines/mi300x-spx/demo.json"
SMALL_SUITE = """
[suite]
repeats = 3

[serve]
preset = "tiny"

[[point]]
name = "tiny-c4"
preset = "tiny"
concurrency = 4
"""


def _env(tmp_path: Path, data: Path | None = None) -> dict:
    home = tmp_path / "home"
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "ROCM_CONSOLE_DATA_DIR": str(data or tmp_path / "data"),
    }


def _old_files(data: Path, runs: int = 3) -> list[str]:
    """A data folder as the file store left it: runs, a baseline and events (today's classes)."""
    store = ResultStore(data / "results")
    ids = []
    for i in range(runs):
        doc = dict(RESULT, duration=60.0 + i, output_throughput=1000.0 + i)
        ids.append(store.save(run_from_console({"node": "mi300-a"}, doc, created=1_700_000_000.0 + i)))
    baseline = json.loads(SEEDED_BASELINE.read_text())
    path = BaselineStore(data / "baselines").path(baseline["node"], baseline["name"])
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(baseline))
    EventLog(data / "events.jsonl").append(
        [Event(time.time() - 60, "node.down", "mi300-a", severity="fail", message="node down (was live)")]
    )
    return ids


def test_an_old_data_folder_is_moved_in_on_first_use_said_once(tmp_path):
    data = tmp_path / "data"
    ids = _old_files(data)
    first = run("results", "list", "--json", env=_env(tmp_path))
    assert first.returncode == 0, first.stderr
    line = one_line_error(first)
    assert line.startswith("rocm-console: store: moved 3 runs, 1 baselines, 1 events, 0 node-versions records")
    assert f"from {data} into {data / 'store.sqlite3'}" in line and "(the files are left in place)" in line
    assert [r["id"] for r in json.loads(first.stdout)["runs"]] == ids[::-1]  # newest first
    assert sorted(p.name for p in (data / "results").glob("*.json")) == sorted(f"{i}.json" for i in ids)  # kept

    again = run("results", "list", env=_env(tmp_path))
    assert again.returncode == 0 and again.stderr == "", again.stderr  # moved once: silent now
    assert all(i in again.stdout for i in ids)
    events = run("events", "--json", env=_env(tmp_path))
    assert events.stderr == "" and [e["kind"] for e in json.loads(events.stdout)] == ["node.down"]


def test_results_list_pages_newest_first(tmp_path):
    data = tmp_path / "data"
    _old_files(data, runs=7)
    stored = stored_runs_after_open(tmp_path)
    newest = [r.id for r in sorted(stored, key=lambda r: r.created, reverse=True)]
    page = run("results", "list", "--limit", "3", "--json", env=_env(tmp_path))
    assert [r["id"] for r in json.loads(page.stdout)["runs"]] == newest[:3]
    assert one_line_error(page).endswith("the newest 3 runs shown; --limit N shows more, --all every one")
    every = run("results", "list", "--all", "--json", env=_env(tmp_path))
    assert [r["id"] for r in json.loads(every.stdout)["runs"]] == newest and every.stderr == ""
    table = run("results", "list", "--all", env=_env(tmp_path)).stdout.splitlines()
    assert table[0].startswith("ID") and [ln.split()[0] for ln in table[1:]] == newest
    since = run("results", "list", "--node", "mi300-a", "--since", "2023-11-14", "--json", env=_env(tmp_path))
    assert len(json.loads(since.stdout)["runs"]) == 7
    none = run("results", "list", "--preset", "nope", env=_env(tmp_path))
    assert none.stdout.startswith("no stored results match (")
    both = run("results", "list", "--all", "--limit", "2", env=_env(tmp_path))
    assert both.returncode == 2 and one_line_error(both) == "rocm-console: give --limit N or --all, not both"


def stored_runs_after_open(tmp_path: Path) -> list:
    assert run("results", "list", env=_env(tmp_path)).returncode == 0  # the first use moves the files in
    return stored_runs(tmp_path / "data")


@pytest.mark.parametrize("broken", ["a folder", "not a database"])
def test_a_store_that_cannot_be_opened_is_one_line_and_events_still_land(tmp_path, profile, broken):
    data = tmp_path / "data"
    db = data / "store.sqlite3"
    if broken == "a folder":
        db.mkdir(parents=True)
    else:
        data.mkdir()
        db.write_bytes(b"this is not a database\n" * 100)
    for argv in (("results", "list"), ("results", "show", "abc"), ("events",), ("store", "info")):
        proc = run(*argv, env=_env(tmp_path))
        assert proc.returncode == 1 and proc.stdout == "", (argv, proc.stderr)
        line = one_line_error(proc)
        assert line.startswith(f"rocm-console: cannot open the store {db}: "), line
    baseline = run("baseline", "list", "--profile", str(profile), env=_env(tmp_path))
    assert baseline.returncode == 1 and one_line_error(baseline).startswith(f"rocm-console: cannot open the store {db}")

    # a partition switch only writes an event: it still works, and the event is kept in the file
    switch = run("partition", "set", "--profile", str(profile), "--node", "sim", "--gpus", "1", "--compute", "CPX",
                 "--yes", env=_env(tmp_path), timeout=180)  # fmt: skip
    assert switch.returncode == 0, switch.stderr
    [kept] = EventLog(data / "events.jsonl").read(kind="partition")
    assert kept.message == "partition switched to CPX on GPUs 1"

    # the store mended: its first opening moves the kept event in
    if db.is_dir():
        db.rmdir()
    else:
        db.unlink()
    shown = run("events", "--kind", "partition", "--json", env=_env(tmp_path))
    assert shown.returncode == 0 and "moved 0 runs, 0 baselines, 1 events" in one_line_error(shown)
    assert [e["message"] for e in json.loads(shown.stdout)] == [kept.message]


def test_store_dump_then_load_into_a_new_data_folder(tmp_path):
    old = tmp_path / "data"
    ids = _old_files(old)
    StoreEvents(old).append(partition_event(time.time(), "mi300-a", [0], "CPX", None))
    info = run("store", "info", "--json", env=_env(tmp_path))
    assert info.returncode == 0, info.stderr
    doc = json.loads(info.stdout)
    assert (doc["runs"], doc["events"], doc["baselines"], doc["engine"]) == (3, 2, 1, "sqlite")
    assert doc["where"] == str(old / "store.sqlite3") and doc["migrated_from_files"]["runs"] == 3

    dump = tmp_path / "dump"
    dumped = run("store", "dump", str(dump), env=_env(tmp_path))
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout == f"wrote 3 runs, 1 baselines, 2 events, 0 node-versions records to {dump}\n"
    again = run("store", "dump", str(dump), env=_env(tmp_path))
    assert again.returncode == 2 and one_line_error(again) == f"rocm-console: {dump}: not empty (give a new or empty folder to dump into)"  # fmt: skip

    new = tmp_path / "new-data"
    loaded = run("store", "load", str(dump), env=_env(tmp_path, new))
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.startswith("moved 3 runs, 1 baselines, 2 events, 0 node-versions records, from ")
    reloaded = run("store", "load", str(dump), env=_env(tmp_path, new))
    assert reloaded.stdout.startswith("moved 0 runs, 0 baselines, 0 events")  # nothing doubled
    assert reloaded.stdout.count("already in the store") == 1

    listed = json.loads(run("results", "list", "--json", env=_env(tmp_path, new)).stdout)["runs"]
    assert sorted(r["id"] for r in listed) == sorted(ids)
    before = {r["id"]: r for r in json.loads(run("results", "list", "--json", env=_env(tmp_path)).stdout)["runs"]}
    assert {r["id"]: r for r in listed} == before  # every listed field as it was
    kinds = [e["kind"] for e in json.loads(run("events", "--json", env=_env(tmp_path, new)).stdout)]
    assert sorted(kinds) == ["node.down", "partition.switched"]
    shown = json.loads(run("results", "show", ids[0], "--json", env=_env(tmp_path, new)).stdout)
    assert shown == json.loads(run("results", "show", ids[0], "--json", env=_env(tmp_path)).stdout)

    missing = run("store", "load", str(tmp_path / "nowhere"), env=_env(tmp_path, new))
    assert missing.returncode == 2 and "no such folder" in one_line_error(missing)


def test_results_delete_removes_the_run_and_its_old_file(tmp_path):
    data = tmp_path / "data"
    ids = _old_files(data)
    gone = run("results", "delete", ids[0], env=_env(tmp_path))
    assert gone.returncode == 0 and gone.stdout == f"deleted {ids[0]}\n"
    assert not (data / "results" / f"{ids[0]}.json").exists()  # else the next catch-up brings it back
    listed = json.loads(run("results", "list", "--json", env=_env(tmp_path)).stdout)["runs"]
    assert sorted(r["id"] for r in listed) == sorted(ids[1:])


def test_baseline_save_then_check_through_the_store(tmp_path, profile):
    suite = tmp_path / "small.toml"
    suite.write_text(SMALL_SUITE)
    env = _env(tmp_path)
    saved = run("baseline", "save", "mine", "--profile", str(profile), "--node", "sim", "--suite", str(suite),
                "--json", env=env, timeout=300)  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["saved"] == f"{tmp_path / 'data' / 'store.sqlite3'} (baseline mine of sim)"
    assert not (tmp_path / "data" / "baselines").exists()  # in the store, not in files
    listed = json.loads(run("baseline", "list", "--profile", str(profile), "--json", env=env).stdout)["baselines"]
    assert [(b["node"], b["name"]) for b in listed] == [("sim", "mine")]
    checked = run("baseline", "check", "mine", "--profile", str(profile), "--node", "sim", "--json", env=env,
                  timeout=300)  # fmt: skip
    assert checked.returncode in (0, EXIT_REGRESSED), checked.stderr  # a verdict (the sim's noise decides which)
    report = json.loads(checked.stdout)
    assert (report["baseline"], report["node"]) == ("mine", "sim") and report["exit_code"] == checked.returncode
    removed = run("baseline", "rm", "mine", "--profile", str(profile), "--node", "sim", env=env)
    assert removed.returncode == 0 and removed.stdout == "baseline mine of sim removed\n"
    absent = run("baseline", "rm", "mine", "--profile", str(profile), "--node", "sim", env=env)
    assert (
        absent.returncode == 2 and one_line_error(absent) == "rocm-console: sim: no baseline named mine (stored: none)"
    )


def test_the_profiles_store_url_is_the_one_every_command_opens(tmp_path):
    """A profile naming a team's PostgreSQL (here one nobody listens on), given or found in
    ./profiles: the commands open that store, not the data folder's file, and say so in one line."""
    url = "postgresql://console@127.0.0.1:9/rocm"
    team = tmp_path / "work" / "profiles" / "team.toml"
    team.parent.mkdir(parents=True)
    team.write_text(f'[store]\nurl = "{url}"\n')  # a profile with only [store] will do
    env = {**_env(tmp_path), "PYTHONPATH": str(ROOT)}
    for argv, cwd in (
        (("results", "list", "--profile", str(team)), ROOT),
        (("events", "--profile", str(team)), ROOT),
        (("results", "list"), tmp_path / "work"),  # found in ./profiles
        (("store", "info"), tmp_path / "work"),
    ):
        proc = run(*argv, env=env, cwd=cwd)
        assert proc.returncode == 1, (argv, proc.stdout, proc.stderr)
        assert one_line_error(proc).startswith(f"rocm-console: cannot open the store {url}: "), argv
    assert not (tmp_path / "data" / "store.sqlite3").exists()  # never the file beside it


def test_commands_that_read_runs_take_only_the_found_profiles_store_table(tmp_path):
    """`results` and `events` (without --node) read only `[store]` of the profiles they find: a
    node table the profile reader refuses does not stop them listing runs; a bad `[store]` is one
    line naming the file and key, exit 2; `events --node` still checks the name in the profile."""
    work = tmp_path / "work"
    (work / "profiles").mkdir(parents=True)
    (work / "profiles" / "lab.toml").write_text('[nodes.a]\nhost = "a"\ngpus = "all"\n')
    env = {**_env(tmp_path), "PYTHONPATH": str(ROOT)}
    for argv in (("results", "list"), ("events",)):
        proc = run(*argv, env=env, cwd=work)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (argv, proc.stdout, proc.stderr)
    proc = run("events", "--node", "a", env=env, cwd=work)
    assert proc.returncode == 2 and "lab.toml" in one_line_error(proc)  # the whole profile: the node is at fault
    team = work / "profiles" / "team.toml"
    team.write_text('[store]\npassword = "s3cret"\n')
    proc = run("results", "list", env=env, cwd=work)
    line = one_line_error(proc)
    assert proc.returncode == 2 and line.startswith(f"rocm-console: {team}:2: [store] key 'password': "), line
    assert "s3cret" not in line
