"""The fleet keeps each GPU's health fresh from the agent's ``same`` (read, unchanged) without a
full entry, and a fault injected into a simulated node shows at the GPU's next reading.

The end-to-end test runs the real agent over the simulated amdsmi (the demo's path): its
own health lines, the demo's fault file written while it runs."""

from __future__ import annotations

import logging
import time

from console.core.health import FAIL, OK, HealthReading, HealthRules
from console.core.model import NodeSpec
from console.services import demo_faults
from console.services.fleet import FleetTelemetry
from tests.helpers import wait_for


def test_a_gpu_said_unchanged_keeps_its_reading_and_verdict_at_the_new_time(caplog):
    fleet = FleetTelemetry([NodeSpec(name="n1", host="localhost", transport="local")])
    fleet.ingest_health("n1", [HealthReading(100.0, 0, "amd", ecc_uncorrectable=1), HealthReading(100.0, 1, "amd")])
    fleet.ingest_health("n1", [], same=((0, 110.0), (1, 105.0)))
    snap = fleet.snapshot("n1")
    sick, well = snap.health_of(0), snap.health_of(1)
    assert (sick.reading.t, well.reading.t) == (110.0, 105.0)  # fresh: as of when they were read
    assert sick.reading.ecc_uncorrectable == 1 and sick.verdict.state == FAIL and well.verdict.state == OK
    assert sick.since == 100.0  # the state began with the reading that showed it
    # a GPU the console has no reading of: one line naming it, nothing else moves
    with caplog.at_level(logging.WARNING):
        fleet.ingest_health("n1", [], same=((1, 120.0), (7, 120.0)))
    assert fleet.health_notes("n1") == ("health of GPU 7 said unchanged before any reading of it: skipped",)
    assert "n1: health of GPU 7 said unchanged before any reading of it: skipped" in caplog.text
    assert fleet.snapshot("n1").health_of(7) is None and fleet.snapshot("n1").health_of(1).reading.t == 120.0
    # one GPU read twice while its notices waited, then a change sent in full: judged in the order read
    fleet.ingest_health("n1", [HealthReading(140.0, 1, "amd", ecc_uncorrectable=2)], same=((1, 135.0), (1, 125.0)))
    assert [r.t for r in fleet.health_readings("n1", 1)] == [100.0, 135.0, 140.0]  # 105..135: a run, its ends
    assert fleet.snapshot("n1").health_of(1).verdict.state == FAIL


async def test_an_injected_fault_shows_at_the_gpus_next_reading_between_unchanged_ones(sim_node):
    node = sim_node("a", count=4)
    fleet = FleetTelemetry([node], interval=0.1)
    fleet.configure_health(HealthRules(interval=0.4))
    await fleet.start()
    try:

        def fresh(physical: int) -> float:
            health = fleet.snapshot("a").health_of(physical)
            return health.reading.t if health is not None and health.reading is not None else 0.0

        def carried_everywhere() -> bool:
            healths = fleet.snapshot("a").gpu_health
            return len(healths) == 4 and all(h.reading is not None and h.reading.carried_from for h in healths)

        # the agent's own health lines: after the first full readings the GPUs are said unchanged
        assert await wait_for(carried_everywhere, timeout=30)
        assert all(h.verdict.state == OK for h in fleet.snapshot("a").gpu_health)
        before = time.time()
        assert await wait_for(lambda: min(fresh(p) for p in range(4)) > before, timeout=5)  # every GPU kept fresh
        written = time.time()
        demo_faults.inject(node, 2, "ecc_uncorrectable")
        assert await wait_for(lambda: fleet.snapshot("a").health_of(2).verdict.state == FAIL, timeout=5)
        sick = fleet.snapshot("a").health_of(2)
        # at its next reading: within one health interval (and a tick) of the write, not the next full resend
        assert sick.since is not None and sick.since - written <= 1.0
        assert sick.reading.carried_from is None and sick.reading.ecc_uncorrectable == 1
        assert all(fleet.snapshot("a").health_of(p).verdict.state == OK for p in (0, 1, 3))
    finally:
        await fleet.stop()
