"""The instance board (poller lists + worker news) and the start form, without an app."""

from __future__ import annotations

import pytest

from console.core.model import ServePreset
from console.services.instances import InstanceState as S
from console.services.instances import InstanceView
from console.ui.model import instance_board as ib
from console.ui.model.start_form import (
    FormError,
    default_preset,
    free_gpus,
    override_tp,
    parse_gpus,
    parse_name,
    parse_pairs,
    parse_port,
)


def view(name="a", state=S.STARTING, gpus=(0,), pid=100, **kw) -> InstanceView:
    return InstanceView(node="n", name=name, state=state, gpus=gpus, pid=pid, port=8000, **kw)


def test_worker_news_fills_what_the_list_cannot_say():
    board = ib.InstanceBoard(["n"])
    board.set_polled("n", [view(state=S.LOADING)])
    board.progress(view(state=S.LOADING, stage="kv-cache", stage_detail="KV cache 1,000 tokens"))
    [v] = board.views("n")
    assert (v.state, v.stage) == (S.LOADING, "kv-cache")
    # the list's older stage does not win over the worker's later one
    board.set_polled("n", [view(state=S.LOADING, stage="loading-weights")])
    assert board.views("n")[0].stage == "kv-cache"
    board.progress(view(state=S.READY, stage="ready"))
    assert board.views("n")[0].state == S.READY
    # the process ended: the list is right about that
    board.set_polled("n", [view(state=S.FAILED, reason="exited with code 1")])
    assert board.views("n")[0].state == S.FAILED


def test_started_before_the_list_knows_it_and_stopped_reads_stopped():
    board = ib.InstanceBoard(["n"])
    board.set_polled("n", [])
    board.progress(view(name="new"))
    assert [v.name for v in board.views("n")] == ["new"]
    board.set_polled("n", [])  # a list read just before the start: the news stays
    assert [v.name for v in board.views("n")] == ["new"]
    board.set_polled("n", [view(name="new", state=S.READY)])
    board.set_polled("n", [view(name="new", state=S.READY)])
    board.progress(view(name="new", state=S.STOPPING))
    assert board.views("n")[0].state == S.STOPPING
    board.set_polled("n", [view(name="new", state=S.EXITED, exit_signal=2)])
    assert board.views("n")[0].state == S.STOPPED  # we asked for it
    board.set_polled("n", [])  # forgotten on the node (twice missing): gone here too
    assert board.views("n") != []
    board.set_polled("n", [])
    assert board.views("n") == []


def test_restarted_under_the_same_name_drops_old_news():
    board = ib.InstanceBoard(["n"])
    board.progress(view(state=S.FAILED, pid=1, reason="out of GPU memory"))
    board.set_polled("n", [view(state=S.LOADING, pid=2)])
    [v] = board.views("n")
    assert v.state == S.LOADING and v.reason is None


def test_each_gpu_shows_its_active_instance_else_its_latest_failure():
    board = ib.InstanceBoard(["n"])
    board.set_polled(
        "n",
        [
            view("old-fail", S.FAILED, gpus=(0,), started=1.0),
            view("stopped", S.EXITED, gpus=(0,), started=2.0),
            view("fail", S.FAILED, gpus=(1,), started=3.0),
            view("tp2", S.READY, gpus=(2, 3), started=4.0),
            view("foreign", S.UNMANAGED, gpus=(4,)),
        ],
    )
    shown = {gpu: [v.name for v in vs] for gpu, vs in board.on_gpus("n").items()}
    assert shown == {1: ["fail"], 2: ["tp2"], 3: ["tp2"], 4: ["foreign"]}  # GPU 0 ended cleanly last
    assert board.counts("n") == {"ready": 1, "unmanaged": 1}
    assert ib.node_summary(board.counts("n")) == "2 instances: 1 ready, 1 unmanaged"
    assert ib.node_summary({"ready": 2}) == "2 instances ready"
    assert board.busy_gpus("n") == {2, 3, 4}


def test_a_failed_poll_keeps_the_last_list_and_says_why():
    board = ib.InstanceBoard(["n"])
    board.set_polled("n", [view()])
    generation = board.generation["n"]
    assert board.set_polled("n", None, "n: connection refused")
    assert board.errors == {"n": "n: connection refused"} and len(board.views("n")) == 1
    assert board.generation["n"] > generation
    assert not board.set_polled("n", None, "n: connection refused")  # nothing new: no redraw


def test_badge_words():
    assert ib.state_word(view(state=S.LOADING, stage="graph-capture")) == "graph capture"
    assert ib.state_word(view(state=S.LOADING)) == "loading"
    assert ib.short_detail(view(state=S.FAILED, reason="out of GPU memory: HIP out of memory")) == "out of GPU memory"
    assert ib.detail(view(state=S.FAILED, reason="out of GPU memory: HIP out of memory")).endswith("HIP out of memory")
    assert ib.level(view(state=S.UNMANAGED)) == "unmanaged"


def test_form_fields():
    assert parse_gpus("0,1") == (0, 1) and parse_gpus("0-3") == (0, 1, 2, 3) and parse_gpus(" 4 5 ") == (4, 5)
    assert parse_gpus("") == ()
    with pytest.raises(FormError, match="GPU 1 is given twice"):
        parse_gpus("1,1")
    with pytest.raises(FormError, match=r"no GPU 9 on this node \(it has 0-7\)"):
        parse_gpus("9", range(8))
    assert parse_port("") is None and parse_port("8100") == 8100
    with pytest.raises(FormError, match="port: '70000' is not a port number"):
        parse_port("70000")
    assert parse_name(" ") is None
    with pytest.raises(FormError, match="name: 'a b'"):
        parse_name("a b")
    assert parse_pairs("max_model_len=4096 gpu_memory_utilization=0.9", "overrides") == {
        "max_model_len": "4096",
        "gpu_memory_utilization": "0.9",
    }
    assert parse_pairs("A='x y'", "env") == {"A": "x y"}
    with pytest.raises(FormError, match="env: '1A' is not an environment variable name"):
        parse_pairs("1A=2", "env")
    with pytest.raises(FormError, match="overrides: enforce_eager has no value"):
        parse_pairs("enforce_eager=", "overrides")
    with pytest.raises(FormError, match="No closing quotation"):
        parse_pairs("a='b", "overrides")


def test_tp_presets_and_free_gpus():
    tiny, big = ServePreset("tiny", "m", tp=1), ServePreset("big", "m", tp=8)
    assert override_tp(big, {"tp": "2"}) == 2 and override_tp(big, {"tensor-parallel-size": "4"}) == 4
    assert override_tp(big, {}) == 8
    with pytest.raises(FormError):
        override_tp(big, {"tp": "two"})
    assert default_preset([tiny, big], 8) == "big" and default_preset([tiny, big], 3) == "tiny"
    assert default_preset([tiny, big], 1, last="big") == "big"
    assert free_gpus(range(8), {0, 1}, 2) == (2, 3) and free_gpus(range(2), {0}, 2) is None


def test_names_stay_distinguishable_at_80_columns():
    """Issue U: instances of one preset differ in their last part: a cut keeps it (middle ellipsis),
    and the table fits 80 columns (the uptime and port go before a name is cut to nothing)."""
    from console.ui.model.instance_board import distinct_cuts, middle_cut
    from console.ui.screens.instances import fit_table

    names = [f"llama-3.1-8b-instruct-fp8-kv-cpx-g{i}" for i in (0, 1, 12, 13)] + ["qwen2.5-72b-instruct-tp8"]
    cut = distinct_cuts(names, 16)
    assert len(set(cut)) == len(names) and all(len(c) <= 16 for c in cut)
    assert cut[2].endswith("g12") and cut[3].endswith("g13") and "…" in cut[2]
    assert middle_cut("short", 16) == "short"
    rows = [
        ("mi300x-cpx", n, "● ready", "vLLM 0.9.1 ready after a long start", str(i), "8000", "1h02m", "amd/Llama-3.1-8B")
        for i, n in enumerate(names)
    ]
    columns, fitted = fit_table(rows, 80)
    assert columns[:4] == ("Node", "Name", "State", "Stage / reason") and "GPUs" in columns
    assert sum(max(len(c), *(len(r[i]) for r in fitted)) + 2 for i, c in enumerate(columns)) + 2 <= 80
    shown = [r[1] for r in fitted]
    assert len(set(shown)) == len(names)
    wide_columns, _ = fit_table(rows, 160)
    assert wide_columns == ("Node", "Name", "State", "Stage / reason", "GPUs", "Port", "Up", "Model")
