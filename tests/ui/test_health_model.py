"""GPU health on screen, without the app: the row mark, the node summary, the filter words,
the detail's counter rows, the start dialog's warnings, the events screen's model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from console.core.events import Event
from console.core.health import GpuFault, HealthVerdict
from console.core.model import GpuHealth, GpuMetrics, GpuStatic, NodeHealth, NodeSnapshot, NodeSpec, SimulateSpec
from console.ui.model import health_view as hv
from console.ui.model.events_view import EventBuffer, EventFilter, events_around, failure_lines
from console.ui.model.health_rows import health_rows, health_title
from console.ui.model.rows import RowFilter, build_rows
from tests.ui.scenes.health import T0, gpu_health, history


def _snapshot(node: str = "mi300x-spx", partitions: int = 1, physical: int = 8) -> NodeSnapshot:
    static = tuple(
        GpuStatic(index=p * partitions + k, physical=p, partition_id=k, model="AMD Instinct MI300X")
        for p in range(physical)
        for k in range(partitions)
    )
    snap = NodeSnapshot(name=node, health=NodeHealth.LIVE, static=static)
    return replace(snap, gpu_health=tuple(gpu_health(node, p) for p in range(physical)))


def test_row_mark_reads_without_colour():
    assert hv.mark(gpu_health("mi300x-spx", 0)) == hv.Mark("✓ ok", "ok")
    assert hv.mark(gpu_health("mi300x-spx", 2)) == hv.Mark("▲ warn", "warn")
    assert hv.mark(gpu_health("mi300x-spx", 5)) == hv.Mark("✖ fail", "fail")
    assert hv.mark(GpuHealth(0, HealthVerdict("unknown"))).text == "? unk"
    assert hv.mark(None).state == ""  # no reading yet: no verdict invented


def test_node_summary_counts_warn_and_fail():
    assert hv.node_summary(_snapshot()) == ("health 2 warn · 1 fail", "fail")
    assert hv.node_summary(_snapshot("mi355x")) == ("health 1 warn", "warn")
    well = replace(_snapshot(), gpu_health=(gpu_health("mi300x-spx", 0),))
    assert hv.node_summary(well) == ("health ok", "ok")
    assert hv.node_summary(replace(well, gpu_health=())) == ("", "")


def _gpus(rows) -> list[int]:
    return [r.gpu for r in rows if r.gpu is not None]


def test_filter_words_pick_sick_throttled_and_ecc_gpus():
    snap = _snapshot()
    assert _gpus(build_rows([snap], RowFilter("sick"))) == [2, 5, 6]
    assert _gpus(build_rows([snap], RowFilter("warn"))) == [2, 6]
    assert _gpus(build_rows([snap], RowFilter("fail"))) == [5]
    assert _gpus(build_rows([snap], RowFilter("throttled"))) == [2]
    # every GPU of the scenes counted 2 correctable errors once; GPU 5 also has uncorrectable ones
    assert 5 in _gpus(build_rows([snap], RowFilter("ecc")))
    # the sample's own throttled flag counts too (between two health readings)
    metrics = GpuMetrics(index=7, throttled=True)
    assert hv.word_matches("throttled", snap, snap.static[7], metrics)
    # words combine with the others: a node name
    assert _gpus(build_rows([snap, _snapshot("mi355x")], RowFilter("sick mi355x"))) == [1]


def test_partition_rows_show_their_physical_gpus_state():
    snap = _snapshot("mi300x-cpx", partitions=8)
    sick = _gpus(build_rows([snap], RowFilter("sick")))
    assert sick == list(range(24, 32))  # physical GPU 3's eight partitions
    assert hv.gpu_health(snap, 27) is not None and hv.gpu_health(snap, 27).physical == 3


def test_detail_rows_show_every_counter_with_rate_and_since():
    health = gpu_health("mi300x-spx", 5)
    rows = {r.label.strip(): r for r in health_rows(health, history("mi300x-spx", 5), T0)}
    ue = rows["ECC uncorrectable"]
    assert ue.value == "2" and ue.level == "fail" and ue.rate.startswith("+") and ue.rate.endswith("/h")
    assert ue.since == "1m00s"  # the errors came a minute ago
    assert rows["Pages pending"].value == "1" and rows["Pages pending"].level == "fail"
    assert rows["ECC UMC"].value == "ce 2 ue 2 de 0"
    for label in ("Pages retired", "Pages unreservable", "Throttle now", "PCIe link", "PCIe replays", "XGMI links"):
        assert label in rows, label
    assert rows["Energy"].rate == "650 W avg"
    assert "fail for 1m00s" in health_title(health, T0)


def test_detail_rows_throttle_pcie_links_faults():
    throttled = {r.label.strip(): r for r in health_rows(gpu_health("mi300x-spx", 2), history("mi300x-spx", 2), T0)}
    assert throttled["Throttle now"].value == "power cap"
    assert throttled["Throttle now"].rate == "60% of 1 min" and throttled["Throttle now"].level == "warn"
    pcie = {r.label.strip(): r for r in health_rows(gpu_health("mi300x-spx", 6), history("mi300x-spx", 6), T0)}
    assert pcie["PCIe link"].value == "gen 5 x8" and pcie["PCIe link"].level == "warn"
    assert pcie["PCIe link"].rate == "max gen 5 x16"
    links = {r.label.strip(): r for r in health_rows(gpu_health("mi300x-cpx", 3), history("mi300x-cpx", 3), T0)}
    assert links["XGMI links"].value == "6 up, down: 3" and links["XGMI links"].level == "warn"
    assert links["Resets / faults"].value == "GPU reset"


def test_detail_rows_without_history_use_the_last_reading_and_firmware():
    health = gpu_health("mi300x-spx", 0)
    assert health_rows(None, (), T0) == []
    reading = health.reading
    assert reading is not None
    if "firmware" in getattr(type(reading), "__dataclass_fields__", {}):
        health = replace(health, reading=replace(reading, firmware=(("SMU", "85.120.0"),)))
        labels = {r.label: r.value for r in health_rows(health, (), T0)}
        assert labels["Firmware"] == "SMU 85.120.0"
    rows = health_rows(health, (), T0)
    assert rows and all("/h" not in r.rate for r in rows)  # one reading: no rate per hour


def test_start_warnings_name_warn_and_refuse_fail():
    snap = _snapshot()
    lines = hv.start_warnings(snap, (2, 5, 0))
    assert [state for state, _ in lines] == ["fail", "warn"]
    assert "GPU 5 ✖ fail: 2 uncorrectable ECC errors" in lines[0][1]
    assert "refused unless forced" in lines[0][1]
    assert "refused" not in lines[1][1] and "power cap" in lines[1][1]
    assert hv.start_warnings(snap, (0, 1)) == []


def _ev(t: float, kind: str, node="n1", gpu=None, sev="info", msg="", inst=None) -> Event:
    return Event(t, kind, node, gpu, inst, sev, msg)


def test_event_filter_words():
    events = [
        _ev(1, "node.up", msg="n1 is live"),
        _ev(2, "gpu.ecc", gpu=3, sev="fail", msg="GPU 3: uncorrectable ECC +1"),
        _ev(3, "gpu.throttle_start", node="n2", gpu=1, sev="warn", msg="power cap"),
        _ev(4, "instance.failed", sev="fail", inst="tiny-g0", msg="tiny-g0 failed"),
    ]
    buf = EventBuffer()
    buf.load(events)
    assert [e.time for e in buf.view(EventFilter(""))] == [4, 3, 2, 1]  # newest first
    assert [e.time for e in buf.view(EventFilter("kind:gpu"))] == [3, 2]
    assert [e.time for e in buf.view(EventFilter("node:n1 fail"))] == [4, 2]
    assert [e.time for e in buf.view(EventFilter("warn"))] == [4, 3, 2]  # warn or worse
    assert [e.time for e in buf.view(EventFilter("gpu:1"))] == [3]
    assert [e.time for e in buf.view(EventFilter("tiny"))] == [4]
    assert EventFilter("kind:bogus").error is not None
    assert EventFilter("gpu:x").error == "gpu:x: a GPU is a number"


def test_event_buffer_is_bounded_and_adds_newest_first():
    buf = EventBuffer(limit=3)
    buf.load([_ev(t, "node.up") for t in range(10)])
    assert [e.time for e in buf.view(EventFilter())] == [9, 8, 7]
    gen = buf.generation
    assert buf.add([_ev(10, "node.down"), _ev(11, "node.up")]) == 2
    assert [e.time for e in buf.view(EventFilter())] == [11, 10, 9]
    assert buf.generation > gen and len(buf) == 3


def test_events_around_a_failure():
    events = [
        _ev(1000, "gpu.reset", gpu=1, sev="warn", msg="GPU 1: GPU reset"),
        _ev(1010, "gpu.ecc", gpu=2, sev="fail", msg="GPU 2: other GPU"),
        _ev(100, "gpu.reset", gpu=1, msg="long before"),
        _ev(1001, "gpu.xid", node="n2", gpu=1, msg="another node"),
        _ev(1020, "instance.failed", gpu=1, inst="svc", sev="fail", msg="svc failed"),
    ]
    assert [e.message for e in events_around(events, "n1", [1], 1020)] == ["GPU 1: GPU reset"]
    lines = failure_lines(events, "n1", "svc", [1], fallback=0.0)
    assert len(lines) == 1 and "gpu.reset: GPU 1: GPU reset" in lines[0]
    assert failure_lines(events, "n1", "other", [1], fallback=5000.0) == []  # no failure near: nothing


def test_demo_fault_written_where_the_simulator_reads(tmp_path, monkeypatch):
    faults = pytest.importorskip("console.sim.faults")
    from console.services import demo_faults

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ROCM_CONSOLE_DEMO_STATE", raising=False)
    node = NodeSpec(name="sim-a", host="localhost", transport="local", simulate=SimulateSpec("MI300X", 8))
    line = demo_faults.inject(node, 3, "ecc_uncorrectable")
    assert "sim-a GPU 3: ecc_uncorrectable injected" in line
    folder = demo_faults.sim_dir(node)
    assert str(folder).startswith(str(tmp_path)) and folder.name == "sim-a"
    assert [(f["gpu"], f["kind"]) for f in faults.read_faults(str(folder))] == [(3, "ecc_uncorrectable")]
    with pytest.raises(demo_faults.DemoFaultError, match="sim-a: no physical GPU 9"):
        demo_faults.inject(node, 9, "ecc_uncorrectable")
    with pytest.raises(demo_faults.DemoFaultError, match="unknown here"):
        demo_faults.inject(node, 0, "nvlink_down")  # an NVIDIA fault on an AMD node
    remote = NodeSpec(name="real", host="10.0.0.1", transport="ssh")
    with pytest.raises(demo_faults.DemoFaultError, match="real: not a simulated node"):
        demo_faults.inject(remote, 0, "reset")
    assert demo_faults.clear(node) == "sim-a: 1 simulated fault cleared"
    assert faults.read_faults(str(folder)) == []


def test_fault_row_counts_faults_over_history():
    base = history("mi300x-spx", 0)
    faulty = tuple(replace(r, faults=(GpuFault("xid", r.t - 1, 79),)) if i in (3, 9) else r for i, r in enumerate(base))
    rows = {r.label: r for r in health_rows(gpu_health("mi300x-spx", 0), faulty, T0)}
    assert rows["Resets / faults"].value == "XID 79" and rows["Resets / faults"].rate == "2 in 2m00s"


def test_detail_cper_row_counts_the_records_of_the_history():
    health = gpu_health("mi300x-spx", 0)
    past = history("mi300x-spx", 0)
    assert "CPER records" not in {r.label for r in health_rows(health, past, T0)}  # never read: no row
    read = [replace(r, cper_records=()) for r in past]
    assert {r.label: r.value for r in health_rows(health, read, T0)}["CPER records"] == "none"
    read[-1] = replace(read[-1], cper_records=(("non_fatal_uncorrected", "MCE"),))
    row = {r.label: r for r in health_rows(health, read, T0)}["CPER records"]
    assert row.value == "1 (last non fatal uncorrected, MCE)" and row.level == "warn"
    read[0] = replace(read[0], cper_records=(("fatal", "MCE"),))
    row = {r.label: r for r in health_rows(health, read, T0)}["CPER records"]
    assert row.value.startswith("2 ") and row.level == "fail"
