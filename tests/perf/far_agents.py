"""The far end of fleet_scale.py's SSH rows: every node's agent, in a process of its own.

    python tests/perf/far_agents.py TRACE INTERVAL SEED CONTROL_FD FD[,FD...]

Started by fleet_scale.py (never by hand): each FD is the write end of one node's pipe, in
node order; the console reads the other end as it reads an agent's stdout. Each node sends
at 1/INTERVAL, at its own seeded phase in the second, the recorded samples of TRACE with
fresh timestamps, and honours the console's rate control as the agent does (the agent's own
SendRate: off screen a full sample every N ticks and a `tick` line every K between; back on screen
the newest sample at once). The console writes its control lines to CONTROL_FD's pipe as
"NODE_INDEX LINE". The process ends when that pipe closes (the console went away).

Kept out of the console's process so that what fleet_scale.py measures there is the
console's own work: reading the lines from pipes, parsing, history, screen.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import select
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from console.agent.sampling import SendRate  # noqa: E402


def main() -> int:
    trace, interval, seed, control_fd, fds = (
        sys.argv[1],
        float(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
        sys.argv[5],
    )
    outs = [int(fd) for fd in fds.split(",")]
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

    def send(i: int, kind: str | None, seq: int) -> None:
        if kind is None:
            return
        if kind == "sample":
            gpus = samples[seq % len(samples)]
            line = f'{{"kind":"sample","ts":{time.time()!r},"seq":{seq},"gpus":{gpus}}}\n'
        else:
            line = f'{{"kind":"tick","ts":{time.time()!r},"seq":{seq}}}\n'
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
                if rates[i].apply(json.loads(body)):  # back on screen: the newest sample now
                    rates[i].sent()
                    send(i, "sample", max(0, seqs[i] - 1))
            continue
        now = time.monotonic()
        while due[0][0] <= now:
            at, i = heapq.heappop(due)
            send(i, rates[i].line(), seqs[i])
            seqs[i] += 1
            at += interval
            if at <= now:  # missed ticks are skipped, as the agent does
                at += ((now - at) // interval + 1) * interval
            heapq.heappush(due, (at, i))


if __name__ == "__main__":
    raise SystemExit(main())
