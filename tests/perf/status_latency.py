"""Wall time of `status` for 3 simulated nodes: local transport and over a real sshd.

    python tests/perf/status_latency.py [--repeat 5]

Each repetition samples three nodes in parallel through the same code path as
`rocm-console status` (services.status.collect_status, probe included). The SSH
case starts a throw-away OpenSSH sshd on 127.0.0.1 (tests/integration/sshd.py)
and opens a fresh connection per repetition, as a CLI call does. Prints one JSON
object; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from console.core.model import NodeSpec, SimulateSpec  # noqa: E402
from console.services.status import collect_status  # noqa: E402


def three_nodes(base: NodeSpec, state: Path) -> list[NodeSpec]:
    specs = [("spx", "SPX", 1), ("cpx", "CPX", 2), ("spx2", "SPX", 3)]
    return [
        replace(
            base,
            name=name,
            state_dir=str(state),
            simulate=SimulateSpec(gpu="MI300X", count=8, compute_partition=mode, seed=seed),
        )
        for name, mode, seed in specs
    ]


def measure(nodes: list[NodeSpec], repeat: int) -> dict:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        snaps = asyncio.run(collect_status(nodes, timeout=60))
        times.append(time.perf_counter() - t0)
        bad = [s.error for s in snaps if s.error]
        if bad:
            return {"error": bad[0]}
    return {
        "first_s": round(times[0], 3),  # includes the agent upload
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "gpus": sum(len(s.static) for s in snaps),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    out: dict = {
        "script": "status_latency",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "repeat": args.repeat,
    }
    with tempfile.TemporaryDirectory() as tmp:
        local = NodeSpec(name="x", host="localhost", transport="local")
        out["local_3_nodes"] = measure(three_nodes(local, Path(tmp) / "local"), args.repeat)
        from tests.integration.sshd import SSHD, SshServer

        if not os.path.exists(SSHD):
            out["ssh_3_nodes"] = {"error": f"{SSHD} not installed"}
        else:
            server = SshServer.create(Path(tmp) / "sshd")
            server.start()
            try:
                base = server.node_spec(python="/usr/bin/python3")
                out["ssh_3_nodes"] = measure(three_nodes(base, Path(tmp) / "ssh"), args.repeat)
            finally:
                server.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
