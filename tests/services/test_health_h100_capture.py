"""Issue O on real hardware: the agent's own stream from a real H100 held at its power cap
(tests/fixtures/hardware/INDEX.toml, h100-agent-stream-health-2026-11-26), replayed through
the console's fleet service and HealthWatch as it arrived from the node.

What the user sees: the GPU's row turns warn with "power cap" as the reason, the timeline
gets a throttle episode (start during the matmul load, end after it), and the ECC, PCIe and
energy figures are the ones NVML gave."""

from __future__ import annotations

import json
from pathlib import Path

from console.core.health import OK, WARN, HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import NodeSpec
from console.services.events import EventLog
from console.services.fleet import FleetTelemetry, GpuHealthChanged
from console.services.health_watch import HealthWatch
from console.services.transports import TransportPool
from console.transport.replay import ReplayTrace, ReplayTransport
from tests.helpers import wait_for

HARDWARE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"
STREAM = HARDWARE / "h100-agent-stream-health-2026-11-26.jsonl"
LOAD = HARDWARE / "h100-agent-stream-health-2026-11-26.load.json"


async def test_power_capped_h100_turns_warn_and_records_a_throttle_episode(tmp_path):
    trace = ReplayTrace.load(STREAM)
    # the GPU's reading of the trace's last health line (NVML's own clock): every line ingested
    last_read = [json.loads(line) for line in trace.stream if '"kind":"health"' in line][-1]["gpus"][0]["nvml"]["t"]
    node = NodeSpec(name="h100", host="127.0.0.1", transport="local", state_dir=str(tmp_path / "state"))
    fleet = FleetTelemetry([node], TransportPool(lambda n: ReplayTransport(n.name, trace, end="hold")), interval=1.0)
    log = EventLog(tmp_path / "data" / "events.jsonl")
    watch = HealthWatch(fleet, HealthSettings(HealthRules(interval=2.0)), events=log)
    states: list[tuple[str, str]] = []

    def seen(event) -> None:
        if isinstance(event, GpuHealthChanged):
            states.extend((g.verdict.state, g.verdict.reasons) for g in event.gpus if g.physical == 0)

    fleet.subscribe(seen)
    await watch.start()
    await fleet.start()
    try:
        assert await wait_for(lambda: _newest_read(fleet) >= last_read, timeout=30)
        assert await wait_for(lambda: any(e.kind == "gpu.throttle_end" for e in log.read()), timeout=10)
    finally:
        await fleet.stop()
        await watch.stop()

    # the row: ok while idle, warn once the power cap held the clocks for most of a minute
    assert states[0][0] == OK
    warn_reasons = [reasons for state, reasons in states if state == WARN]
    assert warn_reasons and "power cap" in warn_reasons[0]

    events = list(reversed(log.read()))  # oldest first
    starts = [e for e in events if e.kind == "gpu.throttle_start"]
    ends = [e for e in events if e.kind == "gpu.throttle_end"]
    assert all(e.node == "h100" and e.gpu == 0 and "power cap" in e.message for e in starts + ends)
    # one episode per loaded phase, timed by the counters (the load script's own clock agrees
    # within a health interval), not by when the console noticed
    loaded = [p for p in json.loads(LOAD.read_text())["phases"] if p["kind"] != "idle"]
    assert len(starts) == len(ends) == len(loaded) == 2
    for phase, start, end in zip(loaded, starts, ends):
        assert abs(start.time - phase["start"]) < 2.5, (phase["kind"], start)
        assert abs(end.time - phase["end"]) < 2.5, (phase["kind"], end)
    to_warn = next(e for e in events if e.kind == "gpu.health" and e.details.get("to") == WARN)
    assert "power cap" in to_warn.message

    # NVML's own figures, read by the agent and kept by the console
    last = fleet.health_readings("h100", 0)[-1]
    assert (last.ecc_correctable, last.ecc_uncorrectable) == (0, 0)
    assert (last.pcie_gen, last.pcie_gen_max, last.pcie_width, last.pcie_width_max) == (5, 5, 16, 16)
    first = fleet.health_readings("h100", 0)[0]
    assert last.energy_j is not None and first.energy_j is not None
    assert 50_000 < last.energy_j - first.energy_j < 100_000  # ~145 s, 72 W idle to 700 W loaded


def _newest_read(fleet: FleetTelemetry) -> float:
    """When GPU 0's newest reading the fleet holds was taken (0 before any)."""
    history = fleet.health_readings("h100", 0)
    return history[-1].t if history else 0.0
