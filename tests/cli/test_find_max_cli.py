"""`rocm-console bench find-max` as a user runs it on the simulated node: progress lines, the
answer, every point and the answer in `results`; each bad input one line naming it, exit 2;
a search that cannot run, exit 1."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_helpers import one_line_error, run
from tests.helpers import free_port


@pytest.fixture
def instance(profile, tmp_path):
    """A ready simulated instance `fm` on the profile's node; stopped afterwards."""
    start = run(
        "serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "3",
        "--port", str(free_port()), "--name", "fm", "--wait", "--timeout", "60",
    )  # fmt: skip
    assert start.returncode == 0, start.stderr
    yield "fm"
    run("serve", "stop", "fm", "--profile", str(profile))


def find_max(profile, tmp_path, *args: str, timeout: float = 120):
    env = {"ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    return run("bench", "find-max", "--profile", str(profile), "--preset", "tiny", *args, env=env, timeout=timeout)


@pytest.mark.timeout(240)
def test_find_max_prints_progress_and_the_answer_and_stores_every_point(profile, tmp_path, instance):
    env = {"ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    text = find_max(
        profile, tmp_path, "--instance", "fm", "--budget", "p99_ttft_ms=60000", "--max", "4", "--prompts", "5"
    )
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "find-max " in out and "concurrency from 1" in out and "p99 TTFT ≤ 60 s" in out
    for load in (1, 2, 4):
        assert f"point {[1, 2, 4].index(load) + 1}: concurrency {load}\n" in out
        assert f"  concurrency {load}: meets (meets the budget)" in out
    assert "bracket: meets concurrency 4, breaks none" in out
    assert "answer (never_broke): the budget held up to the maximum concurrency 4" in out
    assert "tokens/J    " in out  # measured when a point lasts a few of the agent's samples, else unknown
    assert "  workload    cached " in out  # issue B2: the prefix cache's share of the answer's prompts
    stored_id = out.split("stored as")[-1].split()[0]
    # issue U2: each point and the answer are on the events timeline
    shown_events = run("events", "--kind", "findmax", "--json", env=env)
    assert shown_events.returncode == 0, shown_events.stderr
    timeline = json.loads(shown_events.stdout)
    kinds = sorted(e["kind"] for e in timeline)
    assert kinds == ["findmax.answer"] + ["findmax.point"] * 3, timeline
    assert any(e["message"].endswith(f"stored as {stored_id}") for e in timeline)

    doc = json.loads(
        find_max(profile, tmp_path, "--instance", "fm", "--budget", "p99_ttft_ms=60000", "--max", "2", "--json").stdout
    )
    assert doc["status"] == "never_broke" and doc["load"] == 2 and doc["dimension"] == "concurrency"
    assert [p["load"] for p in doc["points"]] == [1, 2] and len(doc["point_ids"]) == 2
    assert doc["figures"]["output_throughput"] > 0
    assert doc["tokens_per_joule"] > 0  # the points' GPU energy is recorded (20 prompts: a few samples each)
    assert doc["budget"] == {"name": "p99_ttft_ms=60000", "limits": {"p99_ttft_ms": 60000.0}}

    listed = json.loads(run("results", "list", "--json", env=env).stdout)["runs"]
    answer_run = next(r for r in listed if r["id"] == doc["id"])
    assert answer_run["model"] == "tiny-llama"  # the point's model, not '-'
    ids = {r["id"] for r in listed}
    assert len(listed) == 3 + 1 + 2 + 1  # every point, and each answer
    assert stored_id in ids and doc["id"] in ids and set(doc["point_ids"]) <= ids
    shown = json.loads(run("results", "show", doc["id"], "--json", env=env).stdout)
    assert shown["context"]["run_kind"] == "find_max" and shown["context"]["find_max_points"] == doc["point_ids"]
    assert shown["result"]["points"][1]["run_ids"] == [doc["point_ids"][1]]
    # a named budget: the shipped experiments' [[budget]] tables
    named = find_max(profile, tmp_path, "--instance", "fm", "--budget", "interactive", "--max", "1", "--json")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["budget"]["limits"] == {"p99_ttft_ms": 2000.0, "p99_itl_ms": 50.0}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--budget", "p99_ttft_ms=2000"], "--instance NAME or --group NAME"),
        (["--instance", "fm", "--group", "g", "--budget", "p99_ttft_ms=2000"], "--instance NAME or --group NAME"),
        (["--instance", "fm", "--budget", "p99_tfft_ms=2000"], "budget key 'p99_tfft_ms'"),
        (["--instance", "fm", "--budget", "p99_ttft_ms=-5"], "budget key 'p99_ttft_ms'"),
        (["--instance", "fm", "--budget", "p99_ttft_ms"], "budget 'p99_ttft_ms': no budget of that name"),
        (["--instance", "fm", "--budget", "fast", "--budgets", "/nowhere/x.toml"], "--budgets: /nowhere/x.toml"),
        (["--instance", "fm", "--budget", "p99_ttft_ms=9", "--start", "1.5"], "--start: a concurrency is a whole"),
        (
            ["--instance", "fm", "--budget", "p99_ttft_ms=9", "--start", "8", "--max", "4"],
            "--max: expected a load >= start",
        ),
        (["--instance", "fm", "--budget", "p99_ttft_ms=9", "--tolerance", "2"], "--tolerance"),
        (["--instance", "fm", "--budget", "p99_ttft_ms=9", "--by", "speed"], "--by"),
        (["--instance", "fm", "--budget", "p99_ttft_ms=9", "--prompts", "0"], "--prompts"),
        (["--instance", "fm", "--budget", "p99_ttft_ms=9", "--set", "nonsense=1"], "nonsense"),
        (["--instance", "nope", "--budget", "p99_ttft_ms=9"], "no instance named nope"),
        (["--group", "nope", "--budget", "p99_ttft_ms=9"], "no group named nope"),
    ],
)
def test_bad_input_is_one_line_naming_it_exit_2(profile, tmp_path, args, named):
    proc = find_max(profile, tmp_path, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert named in one_line_error(proc)
    assert not (tmp_path / "data" / "results").exists() or not list((tmp_path / "data" / "results").iterdir())


def test_unknown_preset_is_exit_2(profile, tmp_path):
    proc = run(
        "bench",
        "find-max",
        "--profile",
        str(profile),
        "--preset",
        "nope",
        "--instance",
        "fm",
        "--budget",
        "p99_ttft_ms=9",
    )
    assert proc.returncode == 2 and "unknown bench preset 'nope'" in one_line_error(proc)


@pytest.mark.timeout(120)
def test_a_search_that_cannot_run_is_exit_1(profile, tmp_path, instance):
    # every point's client fails before it writes a result (its dataset file is not there)
    proc = find_max(
        profile, tmp_path, "--instance", "fm", "--budget", "p99_ttft_ms=9", "--max", "2",
        "--set", "dataset=sharegpt", "--set", "dataset_path=/nowhere/nope.json",
        "--set", "input_len=", "--set", "output_len=",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = one_line_error(proc)
    assert line.startswith("rocm-console: find-max at concurrency 1: ") and "nope.json" in line


@pytest.mark.timeout(240)
def test_find_max_over_a_replica_group(profile, tmp_path):
    env = {"ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    p = ["--profile", str(profile)]
    start = run("serve", "start", "--preset", "tiny", "--replicas", "2", "--wait", "--timeout", "60", *p)
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        done = find_max(
            profile, tmp_path, "--group", "tiny-x2", "--budget", "p99_ttft_ms=60000", "--max", "4", "--json"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        doc = json.loads(done.stdout)
        # a group's concurrency is split over its replicas: the search starts at 2
        assert doc["target"] == "group tiny-x2" and [p["load"] for p in doc["points"]] == [2, 4]
        assert doc["status"] == "never_broke" and doc["load"] == 4
        merged = [json.loads(run("results", "show", rid, "--json", env=env).stdout) for rid in doc["point_ids"]]
        assert [len(m["context"]["replica_runs"]) for m in merged] == [2, 2]  # each point: the group's merged result
        assert [m["setup"]["max_concurrency"] for m in merged] == [2, 4]
    finally:
        run("serve", "stop", "--group", "tiny-x2", *p)
