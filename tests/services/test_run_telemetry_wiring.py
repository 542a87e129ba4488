"""A run's GPUs recorded from the console's sample stream and stored with its result (issue P).

The real H100 capture (tests/fixtures/hardware/h100-nvml-health-2026-11-26.json: NVML's
energy counter and 1 Hz power over an 80 s bf16 matmul loop at the 700 W cap) is replayed as
the agent's sample frames (GpuMetrics.energy_j / .throttled on the physical GPU's row, the
contract's fields) through the recorder, a FleetTelemetry's stream and the stored record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.core import energy as en
from console.core.bench.run_telemetry import RunTelemetry, summarize
from console.core.model import GpuMetrics, GpuStatic, NodeSpec, TelemetryFrame
from console.core.results.build import run_from_console
from console.core.results.export import export_csv, export_markdown
from console.core.results.record import run_from_dict, run_to_dict
from console.services.fleet import FleetTelemetry
from console.services.results import ResultStore
from console.services.runs.telemetry import RunTelemetryRecorder, attach_fleet
from console.ui.model.bench_view import throttle_spans
from console.ui.model.history_view import columns_for, run_cells, stored_power_chart

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = json.loads((ROOT / "tests/fixtures/hardware/h100-nvml-health-2026-11-26.json").read_text())
SAMPLES = [s for s in CAPTURE["samples"] if s["type"] == "run_sample"]
LOAD = CAPTURE["load_done"]
IN_LOAD = [s for s in SAMPLES if LOAD["t_start"] <= s["t"] <= LOAD["t_end"]]


def frame_of(sample: dict, seq: int, *, counter: bool = True) -> TelemetryFrame:
    """The capture's NVML sample as the agent's frame: energy in J, the throttle flag decided."""
    return TelemetryFrame(
        ts=sample["t"],
        seq=seq,
        gpus=(
            GpuMetrics(
                index=0,
                power_w=sample["power_w"],
                util_pct=sample.get("util_pct"),
                mem_clock_mhz=sample.get("mem_clock_mhz"),
                energy_j=sample["energy_mj"] / 1000.0 if counter else None,
                throttled=en.throttled_from_names(sample.get("clock_event_names")),
            ),
        ),
    )


def result_json(output_tokens: int) -> dict:
    """A serving result as vLLM writes it (only what the energy arithmetic reads matters)."""
    return {
        "date": "20261126-131353",
        "backend": "vllm",
        "model_id": "m",
        "completed": 100,
        "failed": 0,
        "duration": 80.0,
        "total_input_tokens": 6400,
        "total_output_tokens": output_tokens,
        "output_throughput": output_tokens / 80.0,
        "mean_ttft_ms": 10.0,
    }


def test_h100_capture_replayed_through_the_run_recorder_and_the_store(tmp_path):
    recorder = RunTelemetryRecorder("h100", [0])
    for i, s in enumerate(IN_LOAD):
        recorder.feed(frame_of(s, i))
    record = recorder.record()
    assert record is not None and recorder.error is None
    tokens = 2_000_000
    run = run_from_console({"node": "h100"}, result_json(tokens), None, telemetry=record)
    store = ResultStore(tmp_path)
    saved = store.save(run)
    doc = json.loads((tmp_path / f"{saved}.json").read_text())
    back = run_from_dict(doc)
    counter_j = (IN_LOAD[-1]["energy_mj"] - IN_LOAD[0]["energy_mj"]) / 1000.0
    integral_j = en.integrate_power_j(en.samples_from_records(IN_LOAD))
    # energy from the counter, and the 1 Hz power integral agrees within the 5 %
    assert doc["energy"]["energy_source"] == "counter"
    assert doc["energy_j"] == pytest.approx(counter_j, rel=1e-6)
    assert abs(integral_j - doc["energy_j"]) / doc["energy_j"] < 0.05
    # tokens per joule: output tokens over the counter's joules; power: joules over seconds
    assert doc["tokens_per_joule"] == pytest.approx(tokens / counter_j, rel=1e-4)
    seconds = IN_LOAD[-1]["t"] - IN_LOAD[0]["t"]
    assert doc["avg_power_w"] == pytest.approx(counter_j / seconds, rel=1e-3)
    assert doc["energy"]["peak_power_w"] == pytest.approx(max(s["power_w"] for s in IN_LOAD), abs=0.05)  # kept to 0.1 W
    # at the 700 W cap the flags say power-capped for all but the first second
    flagged = [a for a, b in zip(IN_LOAD, IN_LOAD[1:]) if en.throttled_from_names(a["clock_event_names"])]
    expected_pct = 100 * sum(b["t"] - a["t"] for a, b in zip(IN_LOAD, IN_LOAD[1:]) if a in flagged) / seconds
    assert doc["throttled_pct"] == pytest.approx(expected_pct, abs=0.01)
    assert back.tokens_per_joule == doc["tokens_per_joule"] and back.energy == doc["energy"]
    assert RunTelemetry.from_json(back.telemetry).gpus[0].end == pytest.approx(seconds, abs=0.01)
    # the stored run's chart: one power trace, the throttle episode marked
    traces, spans, title = stored_power_chart(back)
    assert len(traces) == 1 and spans and "throttled" in title
    # every export carries the figures
    assert "tokens_per_joule" in export_csv([back]).splitlines()[0]
    assert f"{doc['tokens_per_joule']:.6g}"[:4] in export_csv([back]).splitlines()[1]
    assert "Output tokens per joule" in export_markdown([back])
    cells = run_cells(back)
    assert cells["tpj"] == f"{doc['tokens_per_joule']:.3g}" and cells["thr"] == f"{doc['throttled_pct']:.1f}"
    assert columns_for([back])[-1] == ("cb", "CB")


def test_without_a_counter_energy_is_integrated_power_and_says_so():
    recorder = RunTelemetryRecorder("h100", [0])
    for i, s in enumerate(IN_LOAD):
        recorder.feed(frame_of(s, i, counter=False))
    run = run_from_console(None, result_json(1000), None, telemetry=recorder.record())
    assert run.energy["energy_source"] == en.SOURCE_INTEGRATED
    assert run.energy_j == pytest.approx(en.integrate_power_j(en.samples_from_records(IN_LOAD)), rel=1e-4)


def test_recorder_fed_by_the_fleet_stream_only_takes_its_node_and_stops_on_detach():
    fleet = FleetTelemetry([NodeSpec(name="a", host="localhost"), NodeSpec(name="b", host="localhost")])
    static = (GpuStatic(index=0, physical=0, partition_id=0),)
    recorder = RunTelemetryRecorder("a", [0])
    detach = attach_fleet(fleet, recorder)
    for i, s in enumerate(IN_LOAD[:10]):
        for node in ("a", "b"):
            fleet.ingest(node, frame_of(s, i), static=static, source="test", interval=1.0, sample_at=s["t"])
    detach()
    fleet.ingest("a", frame_of(IN_LOAD[10], 10), static=static, source="test", interval=1.0, sample_at=0)
    assert recorder.frames == 10  # node b's frames and the one after detach are not the run's
    s = summarize(recorder.record())
    assert s.energy_j == pytest.approx((IN_LOAD[9]["energy_mj"] - IN_LOAD[0]["energy_mj"]) / 1000.0, rel=1e-6)


def cpx_frame(t: float, energy_j: float, busy: list[float], *, throttled: bool) -> TelemetryFrame:
    """An MI300X in CPX: 8 logical GPUs; power, energy and the flag on partition 0's row only."""
    rows = [
        GpuMetrics(
            index=i,
            util_pct=busy[i],
            vram_used_mib=1000.0,
            power_w=600.0 if i == 0 else None,
            energy_j=energy_j if i == 0 else None,
            throttled=throttled if i == 0 else None,
        )
        for i in range(8)
    ]
    return TelemetryFrame(ts=t, seq=int(t), gpus=tuple(rows))


def test_partition_run_is_charged_its_activity_share_and_the_record_says_what_was_measured():
    static = tuple(GpuStatic(index=i, physical=0, partition_id=i, compute_partition="CPX") for i in range(8))
    recorder = RunTelemetryRecorder("mi300x", [3], static)
    busy = [0.0, 0.0, 0.0, 90.0, 10.0, 0.0, 0.0, 0.0]  # the run's partition 3 does 90 % of the work
    for t in range(11):
        recorder.feed(cpx_frame(float(t), 1000.0 + 600.0 * t, busy, throttled=t >= 8))
    run = run_from_console(None, result_json(5400), None, telemetry=recorder.record())
    gpu = run.energy["gpus"][0]
    assert gpu["measured_j"] == pytest.approx(6000.0)  # the board's counter over 10 s
    assert gpu["share_method"] == "activity" and gpu["share"] == pytest.approx(0.9)
    assert run.energy_j == pytest.approx(5400.0) and run.tokens_per_joule == pytest.approx(1.0)
    assert run.throttled_pct == pytest.approx(20.0)  # t=8 and t=9 of 10 intervals
    assert gpu["partitions"] == [3] and gpu["partition_count"] == 8


def test_partition_switch_mid_run_keeps_the_newer_layout_and_says_so():
    recorder = RunTelemetryRecorder("n", [0], (GpuStatic(index=0, physical=0, partition_id=0),))
    recorder.feed(frame_of(IN_LOAD[0], 0))
    recorder.set_static(tuple(GpuStatic(index=i, physical=0, partition_id=i) for i in range(2)))
    assert recorder.error and "partitioning changed" in recorder.error


def test_no_frame_means_no_record_never_zero_joules():
    recorder = RunTelemetryRecorder("n", [0])
    assert recorder.record() is None
    run = run_from_console(None, result_json(10), None, telemetry=None)
    assert run.energy is None and run_to_dict(run)["energy_j"] is None and run_to_dict(run)["tokens_per_joule"] is None


def test_throttle_spans_from_live_marks():
    marks = [(0.0, False), (1.0, True), (2.0, True), (3.0, False), (4.0, None), (5.0, True)]
    assert throttle_spans(marks) == [(1.0, 3.0), (5.0, 5.0)]
    assert throttle_spans([]) == []
