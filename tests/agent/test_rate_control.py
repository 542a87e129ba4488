"""The agent's rate control: the console asks an off-screen node's agent for a full sample every
N ticks only ({"kind": "rate", "every": N} on its stdin); the other ticks write a `tick` line, and
health lines flow as before. An agent started with no console writing to it streams as always."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sim.simulators import copy_amdsmi

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"

pytestmark = pytest.mark.timeout(120)


def _agent_module():
    sys.path.insert(0, str(AGENT.parent))
    try:
        import node_agent
    finally:
        sys.path.remove(str(AGENT.parent))
    return node_agent


class Sampler:
    source, simulated = "test", True

    def static(self):
        return []

    def refresh(self, tick):
        return None

    def sample(self):
        return [{"index": 0}]

    def physical_count(self):
        return 2

    def health(self, physicals):
        return [{"physical": p} for p in physicals]


class Control:
    """Control lines handed to the tick loop before given ticks (what ControlReader reads from
    stdin), on a simulated clock that moves only while the loop waits."""

    def __init__(self, at: dict[int, list[dict]]):
        self.at, self.calls, self.closed, self.now = at, 0, False, 0.0

    def wait(self, timeout):
        self.calls += 1
        lines = self.at.pop(self.calls, [])
        self.now += 0.0 if lines else timeout  # a line wakes the loop before its deadline
        return lines

    def sleep(self, seconds):
        self.now += seconds


def test_every_n_ticks_a_sample_ticks_between_health_untouched_and_back_at_once():
    node_agent = _agent_module()
    out: list[dict] = []

    class Writer:
        def write(self, *objs):
            out.extend(objs)

    # wait() calls: one before each tick from tick 1 on, two where a line woke the loop
    control = Control({2: [{"kind": "rate", "every": 3}], 10: [{"kind": "rate", "every": 1}]})
    node_agent.run_ticks(
        Sampler(), Writer(), 1.0, 12, clock=lambda: control.now, sleep=control.sleep,
        health_interval=1.0, control=control,
    )  # fmt: skip
    kinds = [(o["kind"], o.get("seq")) for o in out if o["kind"] != "health"]
    # `every 3` read before tick 2: ticks between samples write `tick` lines; `every 1` read
    # before tick 9: the newest, kept-back sample (tick 8) goes out at once, then every tick
    assert kinds == [("static", None), ("sample", 0), ("sample", 1), ("tick", 2), ("tick", 3), ("sample", 4),
                     ("tick", 5), ("tick", 6), ("sample", 7), ("tick", 8), ("sample", 8), ("sample", 9),
                     ("sample", 10), ("sample", 11)]  # fmt: skip
    # health: both GPUs read every tick, whatever the rate; those read unchanged ride with the
    # next sample (a tick line does not take them), each reading sent once
    health = [(i, o) for i, o in enumerate(out) if o["kind"] == "health"]
    assert all(o["gpus"] or out[i - 1]["kind"] == "sample" for i, o in health)
    assert all(out[i - 1]["kind"] != "tick" for i, o in health if not o["gpus"])
    sent = [(g["physical"], o["ts"]) for _i, o in health for g in o["gpus"]] + [
        (p, t) for _i, o in health for p, t, _n in o.get("same", [])
    ]
    assert len(sent) == len(set(sent)) == 2 * 12  # the last sample (tick 11) takes every one left
    ticks = [o for o in out if o["kind"] == "tick"]
    assert all(isinstance(o["ts"], float) and isinstance(o["seq"], int) for o in ticks)


def test_a_ticks_sample_and_health_reach_the_console_in_one_write():
    # One wake-up per node and tick on the console's side (a thousand nodes over SSH, or one
    # console left open all day), not one per line.
    node_agent = _agent_module()

    class Stream:
        def __init__(self):
            self.writes: list[str] = []

        def write(self, text):
            self.writes.append(text)

        def flush(self):
            pass

    stream = Stream()
    clock = Control({})
    node_agent.run_ticks(
        Sampler(), node_agent.JsonLineWriter(stream), 1.0, 4, clock=lambda: clock.now, sleep=clock.sleep,
        health_interval=1.0,
    )  # fmt: skip
    per_write = [[json.loads(line)["kind"] for line in text.splitlines()] for text in stream.writes]
    assert per_write == [["static"]] + [["sample", "health"]] * 4


def test_off_screen_ticks_every_kth_tick_between_samples_and_older_consoles_get_one_each_tick():
    rate = _agent_module().SendRate()
    assert rate.apply({"kind": "rate", "every": 10, "tick": 2}) is False
    kinds = [rate.line() for _ in range(20)]
    # a sample every 10 ticks; between them a tick line every second tick, nothing on the others
    assert kinds == ([None, "tick"] * 4 + [None, "sample"]) * 2, kinds
    assert rate.apply({"kind": "rate", "every": 5}) is False  # no "tick" key (an older console): 1
    assert [rate.line() for _ in range(5)] == ["tick"] * 4 + ["sample"]


def test_bad_rate_lines_are_ignored():
    rate = _agent_module().SendRate()
    for bad in ({"kind": "rate", "every": 0}, {"kind": "rate", "every": "5"}, {"kind": "rate", "every": True},
                {"kind": "rate"}, {"kind": "other", "every": 5}, {"kind": "rate", "every": 10**6},
                {"kind": "rate", "every": 5, "tick": 0}, {"kind": "rate", "every": 5, "tick": 6},
                {"kind": "rate", "every": 5, "tick": "2"}, {"kind": "rate", "every": 5, "tick": True}):  # fmt: skip
        rate.apply(bad)
        assert rate.every == 1 and rate.tick_every == 1


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
    env["PATH"] = "/nonexistent"
    env["ROCM_CONSOLE_SIM_DIR"] = str(state)
    env["ROCM_CONSOLE_SIM_SPEC"] = json.dumps({"gpu": "MI300X", "count": 2})
    return env


def _read_until(proc, enough, seconds: float = 20.0) -> list[dict]:
    """Lines from the agent until `enough(lines)` holds (or `seconds` pass): counted in lines,
    not in time, because a loaded machine runs the agent's 0.1-s ticks late (CI: 9 in 2 s)."""
    out, end = [], time.monotonic() + seconds
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    while time.monotonic() < end and not enough(out):
        try:
            chunk = os.read(proc.stdout.fileno(), 65536)
        except BlockingIOError:
            chunk = None
        if chunk:
            buf += chunk
            *lines, buf = buf.split(b"\n")
            out += [json.loads(line) for line in lines]
        else:
            time.sleep(0.02)
    return out


def _count(lines: list[dict], *kinds: str) -> int:
    return sum(o["kind"] in kinds for o in lines)


def test_the_real_agent_reads_rate_lines_on_stdin_and_streams_as_before_without_them(tmp_path):
    module_dir, state = copy_amdsmi(tmp_path / "sim"), tmp_path / "state"
    argv = [sys.executable, str(AGENT), "telemetry", "--interval", "0.1", "--health-interval", "0.2"]
    argv += ["--amdsmi-path", str(module_dir)]
    # stdin /dev/null (what every console before this one gave it): every tick a sample
    plain = subprocess.Popen(argv, env=_env(state), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    piped = subprocess.Popen(argv, env=_env(state), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        lines = _read_until(plain, lambda got: _count(got, "sample", "tick") >= 8)
        assert lines[0]["kind"] == "hello" and lines[0]["control"] == ["rate", "health"]
        assert _count(lines, "sample") >= 8 and not _count(lines, "tick")
        assert piped.stdin is not None
        piped.stdin.write(b'{"kind":"rate","every":5}\n')
        piped.stdin.flush()
        # the line is read between two ticks: what was sent until then is skipped
        _read_until(piped, lambda got: _count(got, "tick") >= 1)
        # 20 ticks in a row after it: one in five is a sample, the rest are ticks
        quiet = _read_until(piped, lambda got: _count(got, "sample", "tick") >= 20)
        samples, ticks = _count(quiet, "sample"), _count(quiet, "tick")
        assert samples + ticks >= 20 and 3 <= samples <= 5, (samples, ticks)
        # health keeps its own pace (each GPU every 0.2 s): the readings found unchanged ride
        # with the samples, never with a tick line
        health = [o for o in quiet if o["kind"] == "health"]
        assert sum(len(o["gpus"]) + len(o.get("same", ())) for o in health) >= 10
        assert all(
            quiet[i - 1]["kind"] == "sample" for i, o in enumerate(quiet) if o["kind"] == "health" and not o["gpus"]
        )
        # a tick line only every second tick between samples (a big fleet's off-screen nodes)
        piped.stdin.write(b'{"kind":"rate","every":4,"tick":2}\n')
        piped.stdin.flush()
        _read_until(piped, lambda got: _count(got, "sample", "tick") >= 2)  # lines before it was read
        spaced = [o for o in _read_until(piped, lambda got: _count(got, "sample", "tick") >= 8)
                  if o["kind"] in ("sample", "tick")]  # fmt: skip
        steps = {b["seq"] - a["seq"] for a, b in zip(spaced, spaced[1:])}
        kinds = [(o["kind"], o["seq"]) for o in spaced]
        assert steps == {2} and {o["kind"] for o in spaced} == {"sample", "tick"}, kinds
        piped.stdin.write(b'{"kind":"rate","every":1}\n')
        piped.stdin.flush()
        # from the next tick on every tick is a sample again
        back = _read_until(piped, lambda got: _count(got, "sample", "tick") >= 10)
        assert _count(back, "sample") >= 8, [o["kind"] for o in back]
    finally:
        for proc in (plain, piped):
            proc.kill()
            proc.wait()
