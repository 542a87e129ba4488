"""A finished benchmark whose result the store cannot take: one line that says why, where the
result stays on the node and how to store it later; `results fetch RUN` then stores it, once.

The store is made unwritable the ways a root user meets it (tests run as root, so a chmod
would not stop them): the data dir is a file, the data dir lies under a file, the disk is full
(a tiny tmpfs, when this machine lets the test mount one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.cli_helpers import run
from tests.helpers import free_port

FETCH_RE = re.compile(r"store it later with `rocm-console results fetch (\S+) --node sim`")


@pytest.fixture
def lab(tmp_path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}
""")
    return path


def _env(tmp_path: Path, data: Path) -> dict:
    return {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(data)}


def _not_stored_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _stored_runs(tmp_path: Path, data: Path) -> list[dict]:
    listed = run("results", "list", "--json", env=_env(tmp_path, data))
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["runs"]


@pytest.fixture
def instance(lab, tmp_path):
    start = run(
        "serve",
        "start",
        "--profile",
        str(lab),
        "--preset",
        "tiny",
        "--gpus",
        "2",
        "--port",
        str(free_port()),
        "--name",
        "b",
        "--wait",
        "--timeout",
        "60",
        env=_env(tmp_path, tmp_path / "data"),
    )
    assert start.returncode == 0, start.stderr
    yield "b"
    run("serve", "stop", "b", "--profile", str(lab), env=_env(tmp_path, tmp_path / "data"))


@pytest.mark.parametrize("broken", ["a file", "under a file"])
def test_serving_result_the_store_cannot_take_stays_on_the_node_and_fetch_stores_it(lab, tmp_path, instance, broken):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder\n")
    data = blocker if broken == "a file" else blocker / "data"
    bench = run(
        "bench", "run", "--profile", str(lab), "--instance", instance, "--preset", "tiny", "--label", "kept",
        env=_env(tmp_path, data),
    )  # fmt: skip
    assert bench.returncode == 1  # the run was fine, storing it was not: never exit 0
    assert ": ok" in bench.stdout and "stored as" not in bench.stdout
    line = _not_stored_line(bench)
    assert f"not stored (cannot open the store {data / 'store.sqlite3'}: " in line
    run_name = FETCH_RE.search(line).group(1)
    place = str(tmp_path / "state" / "runs" / run_name / "result.json")
    assert f"the result stays on sim at {place}" in line
    assert json.loads(Path(place).read_text())["completed"] == 20  # really there, as the client wrote it

    good = tmp_path / "good-data"
    fetch = run("results", "fetch", run_name, "--profile", str(lab), env=_env(tmp_path, good))
    assert fetch.returncode == 0, fetch.stderr
    run_id = re.fullmatch(rf"{run_name}: stored as (\S+)\n", fetch.stdout).group(1)
    [stored] = _stored_runs(tmp_path, good)
    assert stored["id"] == run_id and stored["completed"] == 20
    shown = json.loads(run("results", "show", run_id, "--json", env=_env(tmp_path, good)).stdout)
    # the run as the console built it at the end of the benchmark: label, context, live summary
    assert shown["label"] == "kept" and shown["context"]["instance"] == instance
    assert shown["context"]["gpu_model"] == "AMD Instinct MI300X" and shown["live"]["samples"] > 0

    again = run("results", "fetch", run_name, "--profile", str(lab), env=_env(tmp_path, good))
    assert again.returncode == 0 and again.stdout == f"{run_name}: already stored as {run_id}\n"
    assert len(_stored_runs(tmp_path, good)) == 1


def test_fetch_rebuilds_a_run_no_console_kept(lab, tmp_path, instance):
    """A run another console started (or one whose console was closed): the node's record and
    result file are enough; fetching it twice stores it once."""
    bench = run(
        "bench", "run", "--profile", str(lab), "--instance", instance, "--preset", "tiny", "--no-store",
        env=_env(tmp_path, tmp_path / "data"),
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    run_name = re.search(r"started (\S+) on sim", bench.stdout).group(1)
    assert not (tmp_path / "state" / "runs" / run_name / "console-run.json").exists()
    fetched = run("results", "fetch", run_name, "--profile", str(lab), "--json", env=_env(tmp_path, tmp_path / "d2"))
    assert fetched.returncode == 0, fetched.stderr
    [doc] = json.loads(fetched.stdout)["runs"]
    assert doc["new"] is True and doc["metrics"]["completed"] == 20
    assert doc["context"]["instance"] == instance and doc["context"]["bench_preset"] == "tiny"
    assert doc["setup"]["max_concurrency"] == 4
    again = run("results", "fetch", run_name, "--profile", str(lab), "--json", env=_env(tmp_path, tmp_path / "d2"))
    assert json.loads(again.stdout)["runs"][0]["new"] is False
    assert len(_stored_runs(tmp_path, tmp_path / "d2")) == 1


def test_offline_result_not_stored_then_fetched(lab, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    common = ["--profile", str(lab), "--gpus", "4", "--set", "model=/m/tiny-llama"]
    bench = run("bench", "latency", *common, env=_env(tmp_path, blocker / "data"))
    assert bench.returncode == 1 and "avg latency" in bench.stdout
    line = _not_stored_line(bench)
    run_name = FETCH_RE.search(line).group(1)
    assert (tmp_path / "state" / "runs" / run_name / "result.json").is_file()
    fetch = run("results", "fetch", run_name, "--profile", str(lab), "--json", env=_env(tmp_path, tmp_path / "ok"))
    assert fetch.returncode == 0, fetch.stderr
    [doc] = json.loads(fetch.stdout)["runs"]
    assert doc["context"]["run_kind"] == "latency" and doc["metrics"]["latency_s"] > 0


def test_fetch_refuses_what_it_cannot_store(lab, tmp_path, instance):
    env = _env(tmp_path, tmp_path / "data")
    unknown = run("results", "fetch", "no-such-run", "--profile", str(lab), env=env)
    assert unknown.returncode == 1
    assert _not_stored_line(unknown) == "rocm-console: sim: no benchmark run named no-such-run (bench runs lists them)"
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    bench = run(
        "bench", "run", "--profile", str(lab), "--instance", instance, "--preset", "tiny", env=_env(tmp_path, blocker)
    )
    run_name = FETCH_RE.search(_not_stored_line(bench)).group(1)
    still = run("results", "fetch", run_name, "--profile", str(lab), env=_env(tmp_path, blocker))
    assert still.returncode == 1
    assert _not_stored_line(still).startswith(f"rocm-console: cannot open the store {blocker / 'store.sqlite3'}: ")
    assert (tmp_path / "state" / "runs" / run_name / "result.json").is_file()  # nothing lost on the way


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs, filled up: the store's folder on a full disk."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        (mnt / "data" / "results").mkdir(parents=True)
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            for _ in range(1024):  # bounded: 4 MiB, far more than the 256 KiB there are
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass  # full
        finally:
            os.close(fd)
        yield mnt / "data"
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_disk_full_keeps_the_result_on_the_node(lab, tmp_path, instance, full_disk):
    bench = run(
        "bench", "run", "--profile", str(lab), "--instance", instance, "--preset", "tiny",
        env=_env(tmp_path, full_disk),
    )  # fmt: skip
    assert bench.returncode == 1
    line = _not_stored_line(bench)
    assert f"not stored (cannot open the store {full_disk / 'store.sqlite3'}: " in line
    run_name = FETCH_RE.search(line).group(1)
    assert not [p for p in (full_disk / "results").iterdir() if p.name.startswith(".tmp-")]  # no half file left
    fetch = run("results", "fetch", run_name, "--profile", str(lab), env=_env(tmp_path, tmp_path / "roomy"))
    assert fetch.returncode == 0 and "stored as" in fetch.stdout
