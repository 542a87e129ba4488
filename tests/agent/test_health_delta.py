"""The agent's health line sends a GPU's full entry only when it changed (and every few
readings); the other GPUs it read are named in ``same`` (node_agent.run_ticks, HealthDelta).

run_ticks drives a fake sampler with a fake clock, as on a node: every GPU's health is read
once per health interval, and what a reading holds is set by the test.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parents[2] / "console" / "agent" / "node_agent.py"


def load_agent():
    sys.path.insert(0, str(AGENT.parent))
    try:
        spec = importlib.util.spec_from_file_location("node_agent_delta_under_test", AGENT)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(AGENT.parent))


node_agent = load_agent()
FULL_EVERY = node_agent.HealthDelta().full_every


def amd_entry(physical: int, t: float, *, correctable: int = 0, power_acc: int = 0) -> dict:
    """An amdsmi health entry as amd_health.py writes it; the clocks move with t."""
    return {
        "physical": physical,
        "vendor": "amd",
        "source": "amdsmi",
        "results": {
            "amdsmi_get_gpu_total_ecc_count": {
                "correctable_count": correctable,
                "uncorrectable_count": 0,
                "deferred_count": 0,
            },
            "amdsmi_get_pcie_info": {
                "pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 32000},
                "pcie_metric": {"pcie_width": 16, "pcie_speed": 32000, "pcie_bandwidth": int(t * 7) % 5000},
            },
            "amdsmi_get_violation_status": {
                "reference_timestamp": int(t * 1e6),
                "violation_timestamp": int(t * 1e6),
                "acc_counter": int(t * 100),
                "acc_ppt_pwr": power_acc,
                "active_ppt_pwr": False,
            },
            "amdsmi_get_gpu_metrics_info": {"accumulation_counter": int(t * 100), "ppt_residency_acc": power_acc},
        },
        "events": [],
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Sampler:
    """n GPUs; ``state[p]`` is what GPU p's next reading shows (kwargs of amd_entry)."""

    source, simulated = "test", True

    def __init__(self, clock: Clock, n: int = 2) -> None:
        self.clock, self.n = clock, n
        self.state: dict[int, dict] = {p: {} for p in range(n)}
        self.events: dict[int, list] = {}
        self.enumerated = False

    def static(self):
        return [{"index": p, "physical": p} for p in range(self.n)]

    def refresh(self, tick):
        if self.enumerated:
            self.enumerated = False
            return self.static()
        return None

    def sample(self):
        return [{"index": p} for p in range(self.n)]

    def physical_count(self):
        return self.n

    def health(self, physicals):
        out = []
        for p in physicals:
            entry = amd_entry(p, self.clock.now, **self.state[p])
            entry["events"] = self.events.pop(p, [])
            out.append(entry)
        return out


class Control:
    """The console's control lines on the agent's stdin: ``rate`` at the first wait, then none
    (each wait lets the fake clock run to the deadline)."""

    closed = False

    def __init__(self, clock: Clock, rate: dict) -> None:
        self.clock, self.rate = clock, rate

    def wait(self, timeout: float) -> list[dict]:
        self.clock.sleep(timeout)
        rate, self.rate = self.rate, None
        return [rate] if rate else []


def run(sampler: Sampler, clock: Clock, ticks: int, on_tick=None, rate: dict | None = None) -> list[dict]:
    """The lines of `ticks` ticks at 1 s, every GPU read once per 2 s (one GPU a tick); each
    write's lines with the write's time (`at`) and the writes' count (`write`)."""
    out: list[dict] = []
    writes = [0]

    class Writer:
        def write(self, *objs):
            writes[0] += 1
            out.extend(dict(copy.deepcopy(o), at=clock.now, write=writes[0]) for o in objs)
            if on_tick is not None:
                on_tick(sum(1 for o in out if o["kind"] in ("sample", "tick")))

    control = Control(clock, rate) if rate else None
    node_agent.run_ticks(
        sampler, Writer(), 1.0, ticks, clock=clock, sleep=clock.sleep, health_interval=2.0, control=control
    )
    return out


def health(lines: list[dict]) -> list[dict]:
    return [o for o in lines if o["kind"] == "health"]


def readings(lines: list[dict], physical: int) -> list[str]:
    """'full' or 'same' for each reading of one GPU, in the order sent."""
    out = []
    for line in health(lines):
        out += ["same" for item in line.get("same", []) if item[0] == physical]
        if any(g["physical"] == physical for g in line["gpus"]):
            out.append("full")
    return out


def test_an_unchanged_gpu_is_named_in_same_and_sent_in_full_every_few_readings():
    clock = Clock()
    lines = run(Sampler(clock), clock, 2 * (2 * FULL_EVERY + 1))
    # each GPU read once every 2 s: its first reading in full, then `same`, in full again every FULL_EVERY
    expected = (["full"] + ["same"] * (FULL_EVERY - 1)) * 2 + ["full"]
    assert readings(lines, 0) == expected and readings(lines, 1) == expected
    # a line whose GPUs are all unchanged still says they were read (exact freshness), and no `same` when none
    assert any(line["gpus"] == [] and line["same"] for line in health(lines))
    # each pair says when its GPU was read: here at the line's own tick (every tick writes a sample)
    assert all(t == line["ts"] for line in health(lines) for _p, t, _n in line.get("same", []))
    assert all("same" not in line for line in health(lines) if line["gpus"])


def test_a_change_goes_in_full_at_its_reading_and_the_clocks_alone_are_no_change():
    clock = Clock()
    sampler = Sampler(clock)

    def on_tick(tick: int) -> None:
        if tick == 5:  # between two readings of GPU 0 (read on ticks 0, 2, 4, ...)
            sampler.state[0] = {"correctable": 1}
        if tick == 9:
            sampler.state[1] = {"power_acc": 40}  # a residency counter moved: the GPU throttled

    lines = run(sampler, clock, 14, on_tick)
    assert readings(lines, 0) == ["full", "same", "same", "full", "same", "same", "same"]
    changed = next(g for line in health(lines)[1:] for g in line["gpus"] if g["physical"] == 0)
    assert changed["results"]["amdsmi_get_gpu_total_ecc_count"]["correctable_count"] == 1
    assert readings(lines, 1) == ["full", "same", "same", "same", "full", "same", "same"]


def test_events_always_go_in_full_even_when_the_same_ones_come_again():
    clock = Clock()
    sampler = Sampler(clock)
    reset = [{"event": "GPU_PRE_RESET", "message": "reset"}]

    def on_tick(tick: int) -> None:
        if tick in (3, 5):
            sampler.events[1] = list(reset)

    lines = run(sampler, clock, 10, on_tick)
    full = [g for line in health(lines) for g in line["gpus"] if g["physical"] == 1]
    assert [g["events"] for g in full] == [[], reset, reset, []]  # then the entry without them, once
    assert readings(lines, 1) == ["full", "full", "full", "full", "same"]


def test_a_new_enumeration_and_a_new_agent_start_with_full_entries():
    clock = Clock()
    sampler = Sampler(clock)

    def on_tick(tick: int) -> None:
        if tick == 6:
            sampler.enumerated = True

    lines = run(sampler, clock, 10, on_tick)
    assert readings(lines, 0) == ["full", "same", "same", "full", "same"]
    # a second agent (the console reconnected): its first readings in full, whatever came before
    again = run(sampler, clock, 2)
    assert readings(again, 0) == ["full"] and readings(again, 1) == ["full"]


def test_off_screen_the_unchanged_gpus_wait_for_the_next_sample_and_a_change_goes_at_once():
    """The console asked for a sample every 10 ticks and a tick line every 5: the GPUs read
    unchanged ride with the samples (one wake-up of the console a sample, not one a tick
    line), each with its read time and the number of the full entry it repeats; a change is
    written at the tick that read it."""
    clock = Clock()
    sampler = Sampler(clock)

    def on_tick(written: int) -> None:
        if written == 3:  # the sample of tick 0, the tick lines of ticks 5 and 10
            sampler.state[1] = {"correctable": 4}

    lines = run(sampler, clock, 21, on_tick, rate={"kind": "rate", "every": 10, "tick": 5})
    writes: dict[int, list[dict]] = {}
    for line in lines:
        writes.setdefault(line["write"], []).append(line)
    for batch in writes.values():
        kinds = [o["kind"] for o in batch]
        if kinds != ["static"] and "health" in kinds and not any(o["gpus"] for o in health(batch)):
            assert kinds[0] == "sample"  # `same` only: never a write of its own, nor with a tick line
    full_n = {(o["at"], g["physical"]): g["n"] for o in health(lines) for g in o["gpus"]}
    assert sorted(full_n.values()) == list(range(1, len(full_n) + 1))  # numbered in order, once each
    change = next(o for o in health(lines) for g in o["gpus"] if g["physical"] == 1 and o["at"] > 1010)
    assert change["gpus"][0]["results"]["amdsmi_get_gpu_total_ecc_count"]["correctable_count"] == 4
    assert change["at"] == 1011.0  # tick 11 read GPU 1 (odd ticks): written then, between two tick lines
    [held] = [o for o in health(lines) if o["at"] == 1010.0]  # with the sample of tick 10
    assert [p for p, _t, _n in held["same"]] == [0, 1, 0, 1, 0, 1, 0, 1, 0]  # read on ticks 2 to 10
    # each names the full entry it repeats: GPU 0's of tick 0, GPU 1's of tick 1
    assert {(p, n) for p, _t, n in held["same"]} == {(0, full_n[1000.0, 0]), (1, full_n[1001.0, 1])}
    times = [t for _p, t, _n in held["same"]]
    assert times == sorted(times) and times[0] < times[-1] <= held["ts"]  # each its own read time
    [after] = [o for o in health(lines) if o["at"] == 1020.0]
    assert {(p, n) for p, _t, n in after["same"]} == {(0, full_n[1000.0, 0]), (1, change["gpus"][0]["n"])}
    # every reading is sent, once: one GPU a tick
    assert sum(len(o["gpus"]) + len(o.get("same", ())) for o in health(lines)) == 21


def test_unchanged_gpus_wait_for_a_sample_or_the_longest_hold():
    delta = node_agent.HealthDelta(max_hold=30.0)
    assert [g["physical"] for g in delta.line(100.0, 10.0, [amd_entry(0, 100.0)], False)["gpus"]] == [0]
    assert delta.line(110.0, 10.0, [amd_entry(0, 110.0)], False) is None  # unchanged: held
    assert delta.line(120.0, 10.0, [amd_entry(0, 120.0)], False) is None
    line = delta.line(140.0, 10.0, [amd_entry(0, 140.0)], False)  # the oldest waited 30 s: out
    assert line["gpus"] == [] and line["same"] == [[0, 110.0, 1], [0, 120.0, 1], [0, 140.0, 1]]
    assert delta.line(141.0, 10.0, None, True) is None  # nothing held: no empty line
    assert delta.line(150.0, 10.0, [amd_entry(0, 150.0)], False) is None
    assert delta.line(151.0, 10.0, None, True)["same"] == [[0, 150.0, 1]]  # a sample takes them along


def test_a_console_that_lacks_a_full_entry_asks_and_gets_it_at_the_next_reading():
    delta = node_agent.HealthDelta()
    first = delta.line(100.0, 10.0, [amd_entry(0, 100.0), amd_entry(1, 100.0)], True)
    assert [(g["physical"], g["n"]) for g in first["gpus"]] == [(0, 1), (1, 2)]
    assert delta.line(110.0, 10.0, [amd_entry(0, 110.0), amd_entry(1, 110.0)], True)["same"] == [
        [0, 110.0, 1],
        [1, 110.0, 2],
    ]
    # not an ask: ignored, nothing changes
    for other in ({"kind": "rate", "every": 2}, {"kind": "health"}, {"kind": "health", "full": "0"}, [1]):
        assert delta.apply(other) is False
    assert delta.apply({"kind": "health", "full": [1, True, "0", 7]}) is True
    again = delta.line(120.0, 10.0, [amd_entry(0, 120.0), amd_entry(1, 120.0)], True)
    assert [(g["physical"], g["n"]) for g in again["gpus"]] == [(1, 3)] and again["same"] == [[0, 120.0, 1]]
    assert delta.line(130.0, 10.0, [amd_entry(1, 130.0)], True)["same"] == [[1, 130.0, 3]]
