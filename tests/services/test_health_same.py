"""The fleet keeps each GPU's health fresh from the agent's ``same`` (read, unchanged) without a
full entry, and a fault injected into a simulated node shows at the GPU's next reading.

The end-to-end test runs the real agent over the simulated amdsmi (the demo's path): its
own health lines, the demo's fault file written while it runs."""

from __future__ import annotations

import logging
import time

from console.core.health import FAIL, OK, HealthReading, HealthRules
from console.core.model import AgentHello, NodeSpec
from console.services import demo_faults
from console.services.fleet import FleetTelemetry
from console.transport.base import StreamControl
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
    said = "health of GPU 7 said unchanged since a reading this console lacks: skipped until its next full reading"
    assert fleet.health_notes("n1") == (said,)
    assert f"n1: {said}" in caplog.text
    assert fleet.snapshot("n1").health_of(7) is None and fleet.snapshot("n1").health_of(1).reading.t == 120.0
    # one GPU read twice while its notices waited, then a change sent in full: judged in the order read
    fleet.ingest_health("n1", [HealthReading(140.0, 1, "amd", ecc_uncorrectable=2)], same=((1, 135.0), (1, 125.0)))
    assert [r.t for r in fleet.health_readings("n1", 1)] == [100.0, 135.0, 140.0]  # 105..135: a run, its ends
    assert fleet.snapshot("n1").health_of(1).verdict.state == FAIL


async def test_an_injected_fault_shows_at_the_gpus_next_reading_between_unchanged_ones(sim_node):
    node = sim_node("a", count=4)
    fleet = await _started(node)
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


def test_a_gpu_said_unchanged_since_a_full_entry_the_console_lacks_is_asked_for_again(caplog):
    now = [1000.0]
    fleet = FleetTelemetry([NodeSpec(name="n1", host="localhost", transport="local")], clock=lambda: now[0])
    sent: list[bytes] = []
    control = StreamControl()
    control.bind(sent.append)
    fleet._tracks["n1"].control, fleet._tracks["n1"].asks_health = control, True  # as a hello listing "health"
    fleet.ingest_health(
        "n1", [HealthReading(100.0, 0, "amd"), HealthReading(100.0, 1, "amd")], numbered=((0, 1), (1, 2))
    )
    # GPU 1 changed in entry 3, a line this console could not read: its `same` items name 3
    with caplog.at_level(logging.WARNING):
        fleet.ingest_health("n1", [], same=((0, 110.0), (1, 110.0)), same_of=((0, 1), (1, 3)))
    snap = fleet.snapshot("n1")
    assert snap.health_of(0).reading.t == 110.0 and snap.health_of(1).reading.t == 100.0  # not carried forward
    assert sent == [b'{"kind":"health","full":[1]}\n']
    said = "health of GPU 1 said unchanged since a reading this console lacks: asked for again"
    assert fleet.health_notes("n1") == (said,) and f"n1: {said}" in caplog.text
    fleet.ingest_health("n1", [], same=((1, 120.0),), same_of=((1, 3),))
    assert len(sent) == 1  # asked once a minute at most (an entry it cannot read is not asked for at every line)
    now[0] += 61
    fleet.ingest_health("n1", [], same=((1, 130.0),), same_of=((1, 3),))
    assert sent[1:] == [b'{"kind":"health","full":[1]}\n']
    # the agent sends it in full (entry 4); the items after it name 4 and carry it forward
    fleet.ingest_health("n1", [HealthReading(140.0, 1, "amd", ecc_uncorrectable=1)], numbered=((1, 4),))
    fleet.ingest_health("n1", [], same=((1, 150.0),), same_of=((1, 4),))
    assert fleet.snapshot("n1").health_of(1).reading.t == 150.0
    assert fleet.snapshot("n1").health_of(1).verdict.state == FAIL and fleet.health_notes("n1") == ()
    # a new agent (a reconnect) is asked at once: the minute counted for the one before it
    fleet._apply(fleet._tracks["n1"], AgentHello("amdsmi", "n1", 1.0, control=("rate", "health")))
    fleet.ingest_health("n1", [], same=((1, 160.0),), same_of=((1, 1),))
    assert sent[2:] == [b'{"kind":"health","full":[1]}\n']


def test_a_quiet_gpu_read_three_times_before_a_sample_is_carried_once_to_its_newest_reading():
    fleet = FleetTelemetry([NodeSpec(name="n1", host="localhost", transport="local")])
    fleet.ingest_health("n1", [HealthReading(100.0, 0, "amd", throttle_reasons=())])
    fleet.ingest_health("n1", [HealthReading(110.0, 0, "amd", throttle_reasons=())])  # equal readings: quiet
    assert fleet.detector.quiet("n1", 0)
    tracker = fleet.detector.tracker("n1", 0)
    assert tracker is not None
    carried: list[float] = []
    original = tracker.carry

    def spy(t: float):
        carried.append(t)
        return original(t)

    tracker.carry = spy  # type: ignore[method-assign]
    fleet.ingest_health("n1", [], same=((0, 130.0), (0, 120.0), (0, 140.0)))
    assert carried == [140.0] and fleet.snapshot("n1").health_of(0).reading.t == 140.0
    assert [r.t for r in fleet.health_readings("n1", 0)] == [100.0, 140.0]
    # a sick GPU is not quiet: each reading is judged in the order read
    fleet.ingest_health("n1", [HealthReading(150.0, 0, "amd", throttle_reasons=(), ecc_uncorrectable=1)])
    assert not fleet.detector.quiet("n1", 0)
    carried.clear()
    fleet.ingest_health("n1", [], same=((0, 170.0), (0, 160.0)))
    assert carried == [160.0, 170.0]


async def test_a_real_agent_sends_a_gpus_entry_in_full_again_when_the_console_asks(sim_node):
    fleet = await _started(sim_node("a", count=2))
    try:
        track = fleet._tracks["a"]

        def carried(physical: int) -> bool:
            health = fleet.snapshot("a").health_of(physical)
            return health is not None and health.reading is not None and health.reading.carried_from is not None

        assert await wait_for(lambda: carried(0) and carried(1), timeout=30)
        assert track.asks_health  # the agent's hello lists "health" among the control lines it reads
        n_before = dict(track.health_n)
        asked = time.time()
        assert fleet._ask_full(track, [1])
        # its next reading comes in full, numbered anew; GPU 0 stays carried
        assert await wait_for(lambda: track.health_n.get(1, 0) > n_before[1], timeout=5)
        assert track.health_n[0] == n_before[0]
        assert fleet.snapshot("a").health_of(1).reading.t >= asked - 0.1
    finally:
        await fleet.stop()


async def _started(node: NodeSpec) -> FleetTelemetry:
    """A fleet streaming from one simulated node: a tick every 0.1 s, health every 0.4 s."""
    fleet = FleetTelemetry([node], interval=0.1)
    fleet.configure_health(HealthRules(interval=0.4))
    await fleet.start()
    return fleet
