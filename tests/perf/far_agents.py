"""The far end of fleet_scale.py's SSH rows: every node's agent, in a process of its own.

    python tests/perf/far_agents.py TRACE INTERVAL SEED CONTROL_FD FD[,FD...] [--health delta|full|none]
        [--health-interval 10] [--health-change 0.0]

Started by fleet_scale.py (never by hand): each FD is the write end of one node's pipe, in
node order; the console reads the other end as it reads an agent's stdout. Each node sends
at 1/INTERVAL, at its own seeded phase in the second, the recorded samples of TRACE with
fresh timestamps, and honours the console's rate control as the agent does (the agent's own
SendRate: off screen a full sample every N ticks and a `tick` line every K between; back on screen
the newest sample at once). The console writes its control lines to CONTROL_FD's pipe as
"NODE_INDEX LINE". The process ends when that pipe closes (the console went away).

Health lines, as the agent sends them (--health, default delta): each node reads its 8 GPUs'
health spread over its ticks, every GPU once per --health-interval (the agent's own
HealthSpread), in the same write as the tick's sample or tick line. An entry is what the agent's
own health code (amd_health.py) reads from the simulated amdsmi (MI300X), captured once at
start by running the agent: a GPU's first reading (with its firmware and energy counter), then
its steady one, with the timestamps and the residency counters' clock moving as on a node.
--health-change: the share of GPUs (seeded) that throttle at their power cap, so their
residency counters grow at every reading: their entries change. delta: the agent's own
HealthDelta picks full entries and `same`, at the agent's own full-resend cadence, and holds
the `same` items for the node's next sample line or full entry (at most HOLD_INTERVALS health
intervals), and takes the console's asks for a full entry again, as the agent does; full: every entry in full, a line at every tick that read some (the agent before
`same`); none: no health lines.

Kept out of the console's process so that what fleet_scale.py measures there is the
console's own work: reading the lines from pipes, parsing, history, screen.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from console.agent.sampling import HOLD_INTERVALS, HealthDelta, HealthSpread, SendRate  # noqa: E402

GPUS = 8  # physical GPUs per node (MI300X)
CLOCK_HZ = 100  # the simulated amdsmi's residency clock (acc_counter, accumulation_counter)
VIOLATION = "amdsmi_get_violation_status"
METRICS = "amdsmi_get_gpu_metrics_info"


def captured_entries() -> tuple[list[dict], list[dict]]:
    """(first, steady) health entry of each of the 8 GPUs, from the agent itself over the
    simulated amdsmi: its first tick reads every GPU's first reading, its second the steady one."""
    with tempfile.TemporaryDirectory(prefix="far-agents-health-") as state:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
        env.update(
            PATH="/nonexistent",  # the library, not a CLI
            ROCM_CONSOLE_SIM_DIR=state,
            ROCM_CONSOLE_SIM_SPEC=json.dumps({"gpu": "MI300X", "count": GPUS}),
        )
        argv = [sys.executable, str(ROOT / "console" / "agent" / "node_agent.py"), "telemetry"]
        argv += ["--count", "2", "--interval", "0.1", "--health-interval", "0.1"]
        argv += ["--amdsmi-path", str(ROOT / "console" / "sim")]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    ticks = [json.loads(x)["gpus"] for x in out.splitlines() if x.startswith('{"kind":"health"')]
    first, steady = (sorted(t, key=lambda g: g["physical"]) for t in ticks[:2])
    assert len(first) == len(steady) == GPUS and "amdsmi_get_fw_info" in first[0]["results"], "no health captured"
    return first, steady


def reading(template: dict, now: float, throttled_s: float) -> dict:
    """One reading of a GPU: the captured entry with its timestamps and clocks at `now` and
    `throttled_s` seconds of power-cap residency. Copied along the paths that change only."""
    results = dict(template["results"])
    clock = int(now * CLOCK_HZ)
    acc = int(throttled_s * CLOCK_HZ)
    if VIOLATION in results:
        v = dict(results[VIOLATION])
        v["reference_timestamp"] = v["violation_timestamp"] = int(now * 1e6)
        v["acc_counter"] = clock
        if throttled_s:
            v.update(acc_ppt_pwr=acc, active_ppt_pwr=True, per_ppt_pwr=50)
        results[VIOLATION] = v
    if METRICS in results:
        m = dict(results[METRICS])
        m["accumulation_counter"] = clock
        if throttled_s:
            m["ppt_residency_acc"] = acc
        results[METRICS] = m
    return {**template, "results": results}


class NodeHealth:
    """One node's health reader: which GPUs a tick reads (HealthSpread), their entries, and
    which go in full (HealthDelta, or all of them)."""

    def __init__(self, interval: float, health_interval: float, mode: str, throttling: list[bool], captured) -> None:
        self.spread = HealthSpread(interval, health_interval)
        self.delta = HealthDelta(max_hold=HOLD_INTERVALS * health_interval) if mode == "delta" else None
        self.health_interval = health_interval
        self.throttling = throttling
        self.first, self.steady = captured
        self.read_before = [False] * GPUS
        self.throttled_s = [0.0] * GPUS
        self.last_at = [0.0] * GPUS

    def held(self, now: float) -> str | None:
        """The GPUs read unchanged and not yet sent, as the agent writes them with a sample."""
        line = self.delta.line(now, self.health_interval, None, True) if self.delta is not None else None
        return json.dumps(line, separators=(",", ":")) + "\n" if line is not None else None

    def line(self, now: float, writing: bool) -> str | None:
        """This tick's health line (None: none now); ``writing``: the tick writes a sample anyway."""
        picks = self.spread.picks(GPUS)
        entries = []
        for p in picks:
            if self.throttling[p] and self.last_at[p]:
                self.throttled_s[p] += (now - self.last_at[p]) / 2  # at its power cap half the time
            self.last_at[p] = now
            template = self.steady[p] if self.read_before[p] else self.first[p]
            self.read_before[p] = True
            entries.append(reading(template, now, self.throttled_s[p]))
        if self.delta is not None:
            line = self.delta.line(now, self.health_interval, entries or None, writing)
        else:
            line = {"kind": "health", "ts": now, "interval": self.health_interval, "gpus": entries} if entries else None
        return json.dumps(line, separators=(",", ":")) + "\n" if line is not None else None


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("trace", "interval", "seed", "control_fd", "fds"):
        parser.add_argument(name)
    parser.add_argument("--health", choices=("delta", "full", "none"), default="delta")
    parser.add_argument("--health-interval", type=float, default=10.0)
    parser.add_argument("--health-change", type=float, default=0.0)
    args = parser.parse_args()
    trace, interval, seed, control_fd, fds = (
        args.trace,
        float(args.interval),
        int(args.seed),
        int(args.control_fd),
        args.fds,
    )
    outs = [int(fd) for fd in fds.split(",")]
    readers: list[NodeHealth | None] = [None] * len(outs)
    if args.health != "none":
        captured = captured_entries()
        pick = random.Random(seed + 1)
        for i in range(len(outs)):
            throttling = [pick.random() < args.health_change for _ in range(GPUS)]
            readers[i] = NodeHealth(interval, args.health_interval, args.health, throttling, captured)
    samples = [
        json.dumps(json.loads(line)["gpus"], separators=(",", ":"))
        for line in Path(trace).read_text().splitlines()
        if line.strip() and json.loads(line).get("kind") == "sample"
    ]
    rng = random.Random(seed)
    rates = [SendRate() for _ in outs]
    seqs = [0] * len(outs)
    start = time.monotonic()
    due = [(start + rng.uniform(0, interval), i) for i in range(len(outs))]
    heapq.heapify(due)
    pending = b""
    poller = select.poll()  # not select(): the fds of a thousand pipes are past its 1,024
    poller.register(control_fd, select.POLLIN)

    def send(i: int, kind: str | None, seq: int, health: str | None = None) -> None:
        line = health or ""  # the agent writes a tick's lines in one write: sample (or tick), health
        if kind == "sample":
            gpus = samples[seq % len(samples)]
            line = f'{{"kind":"sample","ts":{time.time()!r},"seq":{seq},"gpus":{gpus}}}\n' + line
        elif kind == "tick":
            line = f'{{"kind":"tick","ts":{time.time()!r},"seq":{seq}}}\n' + line
        if not line:
            return
        try:
            os.write(outs[i], line.encode())
        except BrokenPipeError:
            pass

    while True:
        timeout = max(0.0, due[0][0] - time.monotonic())
        if poller.poll(timeout * 1000):
            data = os.read(control_fd, 65536)
            if not data:
                return 0  # the console is gone
            pending += data
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                index, _, body = raw.partition(b" ")
                i = int(index)
                message = json.loads(body)
                node_health = readers[i]
                if node_health is not None and node_health.delta is not None:
                    node_health.delta.apply(message)  # the console lacks a GPU's last full entry
                if rates[i].apply(message):  # back on screen: the newest sample now
                    rates[i].sent()
                    held = readers[i].held(time.time()) if readers[i] is not None else None
                    send(i, "sample", max(0, seqs[i] - 1), held)
            continue
        now = time.monotonic()
        while due[0][0] <= now:
            at, i = heapq.heappop(due)
            reader, kind = readers[i], rates[i].line()
            send(i, kind, seqs[i], reader.line(time.time(), kind == "sample") if reader is not None else None)
            seqs[i] += 1
            at += interval
            if at <= now:  # missed ticks are skipped, as the agent does
                at += ((now - at) // interval + 1) * interval
            heapq.heappush(due, (at, i))


if __name__ == "__main__":
    raise SystemExit(main())
