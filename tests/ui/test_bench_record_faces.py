"""One path from a run's outcome to a record (services/runs/outcome.py), whichever face ran it.

The same cancelled run and the same unstorable run, once from the CLI (`bench run`, in this
process so that the cancel can be staged the same way) and once from the TUI's benchmark
screen (App.run_test), against one simulated node and instance: both faces store the same
record (status "cancelled", never ok, never lost), and both keep a result the store cannot
take on the node, whole (label, live summary, context), where `results fetch` brings it back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path

import pytest

from console.cli import entry
from console.core.profiles import load_profile
from console.core.results.record import run_to_dict
from console.services.history import History
from console.services.runs import serving
from console.ui.results_store import HistoryRuns
from console.ui.screens.bench import BenchScreen

from .conftest import screen_text, wait_for
from .test_bench_ui import BenchHost

PRESETS = Path(__file__).resolve().parents[2] / "profiles" / "presets.toml"
PROFILE = load_profile([PRESETS])
BENCH_TINY = next(p for p in PROFILE.bench_presets if p.name == "tiny")
FETCH_RE = re.compile(r"store it later with `rocm-console results fetch (\S+) --node bench-n`")
PER_RUN_CONTEXT = {"client_argv"}  # names the run's own folder


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.fixture
def node(sim_node, tmp_path):
    return sim_node("bench-n", seed=7, state_dir=str(tmp_path / "state"))


@pytest.fixture
def lab(tmp_path) -> Path:
    """The same node, as the CLI reads it from a profile."""
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.bench-n]
transport = "local"
host = "localhost"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", memory_partition = "NPS1", seed = 7 }}
""")
    return path


@pytest.fixture
def cancelled_after_result(monkeypatch):
    """The cancel lands after the client wrote its result (SIGINT at the last request): the run
    is collected as cancelled with a (partial) result, from either face."""
    real = serving.BenchRunner.run

    async def run(self, *args, **kwargs):
        outcome = await real(self, *args, **kwargs)
        return dataclasses.replace(outcome, cancelled=True)

    monkeypatch.setattr(serving.BenchRunner, "run", run)


async def _cli(monkeypatch, data: Path, *argv: str) -> int:
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(data))
    return await asyncio.to_thread(entry.main, list(argv))


async def _cli_bench(monkeypatch, lab: Path, data: Path) -> int:
    return await _cli(
        monkeypatch, data, "bench", "run", "--profile", str(lab), "--instance", "tiny-b", "--preset", "tiny",
        "--concurrency", "2", "--label", "same",
    )  # fmt: skip


async def _tui_bench(monkeypatch, node, view, pool, data: Path) -> BenchScreen:
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(data))
    host = BenchHost()
    screen = BenchScreen(
        None,
        node,
        view,
        BENCH_TINY,
        runner=serving.BenchRunner(pool),
        store=HistoryRuns(History()),
        points=[2],
        label="same",
    )  # the console's store: its History's runs (ui/results_store.py result_store)
    async with host.run_test(size=(120, 36)) as pilot:
        host.push_screen(screen)
        assert await wait_for(pilot, lambda: screen.session.ended, timeout=90)
        cur = screen.session.current
        assert await wait_for(pilot, lambda: cur.stored_id is not None or cur.store_error is not None, timeout=30)
        screen.draw_now()
        await pilot.pause()
        screen.shown = screen_text(host)  # type: ignore[attr-defined]
    return screen


def _same_record(a: dict, b: dict) -> None:
    """The same fields; the same values apart from ids, times and what was measured."""
    assert set(a) == set(b)
    assert (a["label"], a["origin"]) == (b["label"], b["origin"])
    assert {k: v for k, v in a["setup"].items() if k != "date"} == {k: v for k, v in b["setup"].items() if k != "date"}
    ctx_a, ctx_b = a["context"], b["context"]
    assert set(ctx_a) == set(ctx_b)
    assert {k: v for k, v in ctx_a.items() if k not in PER_RUN_CONTEXT} == {
        k: v for k, v in ctx_b.items() if k not in PER_RUN_CONTEXT
    }
    assert set(a["metrics"]) == set(b["metrics"]) and set(a["live"] or {}) == set(b["live"] or {})


def _only(data: Path) -> dict:
    [run] = History(data_dir=data).runs.list()
    return run_to_dict(run)


async def test_a_cancelled_run_with_a_result_is_stored_as_cancelled_from_both_faces(
    monkeypatch, capsys, tmp_path, lab, node, served, cancelled_after_result
):
    view, pool = served
    assert await _cli_bench(monkeypatch, lab, tmp_path / "cli") == 1  # cancelled: not an ok exit
    assert "stored as" in capsys.readouterr().out
    screen = await _tui_bench(monkeypatch, node, view, pool, tmp_path / "tui")
    assert screen.session.current.stored_id in screen.shown  # stored, and the screen says so

    cli, tui = _only(tmp_path / "cli"), _only(tmp_path / "tui")
    _same_record(cli, tui)
    for doc in (cli, tui):  # kept, never as ok
        assert doc["context"]["status"] == "cancelled" and doc["label"] == "same"
        assert doc["context"]["gpu_model"] == "AMD Instinct MI300X" and doc["context"]["instance"] == "tiny-b"
    # what `results list` says of both: a failed run, because it was cancelled
    for data in ("cli", "tui"):
        capsys.readouterr()
        assert await _cli(monkeypatch, tmp_path / data, "results", "list", "--json") == 0
        [row] = json.loads(capsys.readouterr().out)["runs"]
        assert (row["status"], row["failure"]) == ("failed", "cancelled")


async def test_a_result_the_store_cannot_take_is_kept_on_the_node_from_both_faces(
    monkeypatch, capsys, tmp_path, lab, node, served
):
    view, pool = served
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder\n")  # the data dir is a file: the store refuses every run

    assert await _cli_bench(monkeypatch, lab, blocker) == 1
    err = capsys.readouterr().err
    cli_run = FETCH_RE.search(err).group(1)
    assert "not stored (cannot open the store" in err

    screen = await _tui_bench(monkeypatch, node, view, pool, blocker)
    tui_run = screen.outcomes[0].run
    cur = screen.session.current
    assert cur.stored_id is None and f"cannot open the store {blocker}" in cur.store_error
    assert f"results fetch {tui_run} --node bench-n" in cur.store_error  # where it stays, how to fetch it
    assert "not stored" in screen.shown

    fetched = {}
    for face, run in (("cli", cli_run), ("tui", tui_run)):
        assert (tmp_path / "state" / "runs" / run / "console-run.json").is_file()  # kept beside the result
        good = tmp_path / f"fetched-{face}"
        capsys.readouterr()
        assert await _cli(monkeypatch, good, "results", "fetch", run, "--profile", str(lab)) == 0
        assert f"{run}: stored as" in capsys.readouterr().out
        fetched[face] = _only(good)
    _same_record(fetched["cli"], fetched["tui"])
    for doc in fetched.values():  # back whole: label, live summary, context, status
        assert doc["label"] == "same" and doc["live"]["samples"] > 0
        assert doc["context"]["status"] == "ok" and doc["context"]["gpu_model"] == "AMD Instinct MI300X"
        assert "fetched_from" not in doc["context"]  # the run as the console built it, not rebuilt
