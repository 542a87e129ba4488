"""A health line's ``same``: the GPUs the agent read and found unchanged, by physical index
(core/telemetry.py decodes them; core/health.py ``carried`` brings the last reading forward),
and what the history and the throttle share make of readings carried forward."""

from __future__ import annotations

import json
import re

import pytest

from console.core.health import HealthReading, HealthRules, HealthTracker, carried, evaluate, throttle_share
from console.core.telemetry import MAX_HEALTH_GPUS, AgentProtocolError, parse_agent_line
from tests.services.health_lines import amd_entry


def line(ts: float, entries: list, **extra) -> str:
    return json.dumps({"kind": "health", "ts": ts, "interval": 10.0, "gpus": entries, **extra})


def test_same_names_the_gpus_read_and_unchanged_and_when_beside_the_full_entries():
    frame = parse_agent_line(line(100.0, [amd_entry(1)], same=[[0, 97.5], [2, 100]]))
    assert [r.gpu for r in frame.readings] == [1] and frame.same == ((0, 97.5), (2, 100.0)) and frame.notes == ()
    assert frame.ts == 100.0


def test_full_entries_carry_their_number_and_same_items_the_number_of_the_one_they_repeat():
    numbered = [dict(amd_entry(1), n=7), dict(amd_entry(3), n="8"), amd_entry(4)]
    frame = parse_agent_line(line(100.0, numbered, same=[[0, 97.5, 5], [0, 99.0, 5], [2, 98.0, 6], [5, 99.5]]))
    assert [r.gpu for r in frame.readings] == [1, 3, 4]
    assert frame.numbered == ((1, 7),)  # a number that is not one: no number (the entry is kept)
    assert frame.same == ((0, 97.5), (0, 99.0), (2, 98.0), (5, 99.5)) and frame.same_of == ((0, 5), (2, 6))


def test_a_line_of_the_old_shape_has_no_same():
    frame = parse_agent_line(line(100.0, [amd_entry(0), amd_entry(1)]))
    assert [r.gpu for r in frame.readings] == [0, 1] and frame.same == ()


def test_a_bad_item_in_same_is_one_note_naming_it_and_the_rest_is_kept():
    bad = [3, ["3", 99.0], [-1, 99.0], [True, 99.0], [2.0, 99.0], [1, "now"], [1, None], [1, 99.0, 0.5]]
    frame = parse_agent_line(line(100.0, [amd_entry(1)], same=[[0, 99.0], *bad]))
    assert frame.same == ((0, 99.0),) and [r.gpu for r in frame.readings] == [1]
    assert frame.notes == (
        "health: same[1] skipped: not [GPU index, read time]: 3",
        "health: same[2] skipped: not [GPU index, read time]: ['3', 99.0]",
        "health: same[3] skipped: not [GPU index, read time]: [-1, 99.0]",
        "health: same[4] skipped: not [GPU index, read time]: [True, 99.0]",
        "health: same[5] skipped: not [GPU index, read time]: [2.0, 99.0]",
        "health: same[6] skipped: not [GPU index, read time]: [1, 'now']",
        "health: same[7] skipped: not [GPU index, read time]: [1, None]",
        "health: same[8] skipped: not [GPU index, read time]: [1, 99.0, 0.5]",
    )


@pytest.mark.parametrize(
    ("same", "words"),
    [
        ({"0": 1}, "same is not a list"),
        ("0,1", "same is not a list"),
        ([[0, 1.0]] * MAX_HEALTH_GPUS, f"{MAX_HEALTH_GPUS + 1} GPUs read (at most {MAX_HEALTH_GPUS})"),
    ],
)
def test_a_same_that_is_not_a_bounded_list_is_a_protocol_error(same, words):
    with pytest.raises(AgentProtocolError, match=re.escape(words)):
        parse_agent_line(line(100.0, [amd_entry(0)], same=same))


def test_a_carried_reading_is_the_last_one_at_the_new_time_without_its_news():
    frame = parse_agent_line(line(100.0, [amd_entry(0, uncorrectable=2)]))
    first = frame.readings[0]
    later = carried(first, 110.0)
    assert later.t == 110.0 and later.gpu == 0 and later.ecc_uncorrectable == 2 and later.carried_from == 100.0
    assert later.faults == () and later.cper_records is None
    # carried again: still the values (and the counters' clock) of the reading at 100
    assert carried(later, 120.0).carried_from == 100.0


def reading(t: float, power: float, clock: float | None, **kw) -> HealthReading:
    """A GPU whose residency counter for power throttling is `power` (clock: its counters' clock)."""
    return HealthReading(
        t, 0, "amd", ecc_correctable=0, residency=(("power", power),), residency_clock=clock, throttle_reasons=(), **kw
    )


def test_a_run_of_unchanged_readings_is_kept_as_its_two_ends_and_judged_the_same():
    tracker = HealthTracker(HealthRules())
    tracker.add(reading(0.0, 0.0, 0.0))
    for k in range(1, 360):  # an hour of readings every 10 s, all unchanged (5 carried, then a full one)
        if k % 6:
            tracker.add(carried(tracker.last, 10.0 * k))
        else:
            tracker.add(reading(10.0 * k, 0.0, 1000.0 * k))
        assert tracker.verdict == evaluate(tracker.readings, HealthRules())  # judged as in full
    assert len(tracker.readings) == 2 and tracker.last.t == 3590.0
    assert tracker.verdict.state == "ok" and tracker.verdict.throttle_share == 0.0


def test_throttling_that_begins_after_carried_readings_is_counted_in_its_own_interval():
    """The counters grow between a carried reading (the clock of the full one it carries) and
    the next full one: the growth belongs to that last interval, not spread since the full one."""
    history = [
        reading(0.0, 0.0, 0.0),  # the clock runs 100 a second
        carried(reading(0.0, 0.0, 0.0), 10.0),
        carried(reading(0.0, 0.0, 0.0), 20.0),
        carried(reading(0.0, 0.0, 0.0), 30.0),
        reading(40.0, 1000.0, 4000.0),  # throttled all of the last 10 s: 1000 of the clock's 4000
    ]
    share, reason = throttle_share(history, 10.0)
    assert reason == "power" and share == pytest.approx(1.0)
    share_minute, _ = throttle_share(history, 60.0)
    assert share_minute == pytest.approx(10.0 / 60.0)  # the window's other 30 s were carried: not throttled


def test_a_gpu_said_unchanged_after_a_warning_is_judged_in_full_as_its_window_moves():
    """A throttled minute, then readings that say nothing moved: the share falls as the window
    moves past the throttled time, and the warning ends when it is under the threshold."""
    tracker = HealthTracker(HealthRules(throttle_window=60.0, throttle_share=0.25))
    tracker.add(reading(0.0, 0.0, 0.0))
    tracker.add(reading(10.0, 1000.0, 1000.0))  # throttled all of those 10 s
    tracker.add(reading(20.0, 2000.0, 2000.0))
    tracker.add(reading(30.0, 3000.0, 3000.0))
    assert tracker.verdict.state == "warn"
    states = []
    for k in range(4, 12):
        tracker.add(carried(tracker.last, 10.0 * k))
        assert tracker.verdict == evaluate(tracker.readings, tracker.rules)
        states.append(tracker.verdict.state)
    assert states[0] == "warn" and states[-1] == "ok"
