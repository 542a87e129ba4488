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


def run(sampler: Sampler, clock: Clock, ticks: int, on_tick=None) -> list[dict]:
    """The health lines of `ticks` ticks at 1 s, every GPU read once per 2 s (one GPU a tick)."""
    out: list[dict] = []

    class Writer:
        def write(self, *objs):
            out.extend(copy.deepcopy(objs))
            if on_tick is not None:
                on_tick(sum(1 for o in out if o["kind"] == "sample"))

    node_agent.run_ticks(sampler, Writer(), 1.0, ticks, clock=clock, sleep=clock.sleep, health_interval=2.0)
    return [o for o in out if o["kind"] == "health"]


def readings(lines: list[dict], physical: int) -> list[str]:
    """'full' or 'same' for each reading of one GPU, in order."""
    out = []
    for line in lines:
        if any(g["physical"] == physical for g in line["gpus"]):
            out.append("full")
        if physical in line.get("same", []):
            out.append("same")
    return out


def test_an_unchanged_gpu_is_named_in_same_and_sent_in_full_every_few_readings():
    clock = Clock()
    lines = run(Sampler(clock), clock, 2 * (2 * FULL_EVERY + 1))
    # each GPU read once every 2 s: its first reading in full, then `same`, in full again every FULL_EVERY
    expected = (["full"] + ["same"] * (FULL_EVERY - 1)) * 2 + ["full"]
    assert readings(lines, 0) == expected and readings(lines, 1) == expected
    # a line whose GPUs are all unchanged still says they were read (exact freshness), and no `same` when none
    assert any(line["gpus"] == [] and line["same"] for line in lines)
    assert all("same" not in line for line in lines if line["gpus"])


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
    changed = next(g for line in lines[1:] for g in line["gpus"] if g["physical"] == 0)
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
    full = [g for line in lines for g in line["gpus"] if g["physical"] == 1]
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
