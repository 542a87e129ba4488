"""The demo's GuideLLM (console/sim/vllm/guidellm_sim.py): the argv the console builds for
GuideLLM runs against the simulated server, conversations of several turns each carrying their
history (which the server finds in its prefix cache), and its log lines and report read by the
parser held against the real GuideLLM 0.8.1 output, with no key the real report lacks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from console.core.bench.clients import client_of_argv, guidellm
from console.core.bench.clients.argv import outside_argv
from console.core.bench.prefix_cache import prefix_cache_window
from console.core.profiles import load_profile
from tests.sim.test_sim_vllm_bench import MODEL, _metrics, finished, procs, server  # noqa: F401 (fixtures)

PRESETS = Path(__file__).resolve().parents[2] / "profiles" / "presets.toml"
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / "guidellm-0.8.1" / "multi-turn" / "result.json"


def _keys(obj, prefix=""):
    """Every key path of a report (lists: their items' keys), e.g. benchmarks.metrics.turns.turn_index."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + k)
            out |= _keys(v, prefix + k + ".")
    elif isinstance(obj, list):
        for item in obj:
            out |= _keys(item, prefix)
    return out


def test_the_multi_turn_preset_runs_on_the_simulator(procs, server, tmp_path):  # noqa: F811
    srv = server()
    presets = {p.name: p for p in load_profile([PRESETS]).bench_presets}
    preset = presets["multi-turn-chat"]
    preset = dataclasses.replace(
        preset, input_len=64, output_len=8, num_prompts=9, max_concurrency=(2,), seed=3, turns=3
    )
    argv = outside_argv(
        preset, client_cmd=("python3", "/sim/vllm", "guidellm"), base_url=srv.url, model=MODEL,
        result_dir=str(tmp_path), max_concurrency=2,
    )  # fmt: skip
    assert client_of_argv(argv) == ("guidellm", 9)  # the console reads it as GuideLLM's run
    before = _metrics(srv.url)
    rc, out, err = finished(procs(*argv[2:], name="guidellm"))
    assert rc == 0, err[-2000:]
    window = prefix_cache_window(before, _metrics(srv.url))
    seen = [guidellm.progress(line) for line in err.splitlines()]
    assert [p[0] for p in seen if p is not None][-1] == 9  # the live panel's last count
    report = json.loads((tmp_path / "result.json").read_text())
    (result,) = guidellm.results(report)
    assert result["completed"] == 9 and result["failed"] == 0 and result["turns"] == 3
    assert result["max_concurrency"] == 2 and result["mean_ttft_ms"] > 0 and len(result["ttfts"]) == 9
    # each conversation's turns carry its history: longer prompts, found in the prefix cache
    requests = report["benchmarks"][0]["requests"]["successful"]
    by_turn = {t: [r["prompt_tokens"] for r in requests if r["info"]["turn_index"] == t] for t in range(3)}
    assert min(by_turn[1]) > max(by_turn[0]) and min(by_turn[2]) > max(by_turn[1])
    assert window is not None and window.hit_pct >= 30
    # nothing in the report the real GuideLLM 0.8.1 report does not have
    assert _keys(report) - _keys(json.loads(REAL.read_text())) == set()


def test_a_bad_option_is_clicks_one_line(procs):  # noqa: F811
    rc, out, err = finished(procs("guidellm", "run", "--bogus", "1", name="bad"))
    assert rc == 2 and err.strip().endswith("Error: No such option: --bogus")
