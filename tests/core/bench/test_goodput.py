"""Issue B2: goodput against an SLO from a result's per-request figures, the same rule as vLLM's."""

from __future__ import annotations

import pytest

from console.core.bench.goodput import Slo, goodput_json, goodput_of, slo_of
from console.core.bench.result import normalize_result
from console.core.model import BenchPreset


def detailed(**extra) -> dict:
    # four requests: fast; slow first token; slow decode (TPOT 30 ms, one 90 ms stall); failed
    return {
        "duration": 2.0,
        "completed": 3,
        "failed": 1,
        "request_goodput": None,
        "ttfts": [0.05, 0.40, 0.05, 0.0],
        "latencies": [0.35, 0.70, 0.95, 0.0],
        "output_lens": [11, 11, 31, 0],
        "itls": [[0.03] * 10, [0.03] * 10, [0.03] * 28 + [0.09, 0.0], []],
        "errors": ["", "", "", "Connection reset"],
        **extra,
    }


def test_goodput_counts_requests_within_every_limit():
    result = normalize_result(detailed())
    g = goodput_of(result, Slo(ttft_ms=200))
    assert (g.good, g.total) == (2, 4)  # the slow first token and the failed one are not good
    assert g.goodput_pct == pytest.approx(50.0) and g.good_rps == pytest.approx(1.0)
    g = goodput_of(result, Slo(ttft_ms=200, tpot_ms=31))  # TPOT (0.95-0.05)/30 = 30 ms: within
    assert g.good == 2
    g = goodput_of(result, Slo(ttft_ms=200, itl_ms=50))  # the 90 ms stall breaks the ITL limit
    assert g.good == 1 and g.goodput_pct == pytest.approx(25.0)
    g = goodput_of(result, Slo(e2e_ms=800))
    assert g.good == 2 and g.source == "per-request"


def test_without_per_request_figures_the_clients_own_goodput_is_used():
    plain = {k: v for k, v in detailed(request_goodput=1.5).items() if k not in ("ttfts", "itls", "output_lens")}
    g = goodput_of(normalize_result(plain), Slo(ttft_ms=200))
    assert g.source == "client" and g.good_rps == 1.5 and g.goodput_pct == pytest.approx(75.0)
    assert goodput_of(normalize_result(plain), Slo(itl_ms=50)) is None  # vLLM has no ITL goodput
    assert goodput_of(normalize_result(detailed()), None) is None


def test_slo_from_a_preset_and_vllm_flags():
    preset = BenchPreset(name="p", slo_ttft_ms=200, slo_itl_ms=50, slo_e2e_ms=1500.5)
    slo = slo_of(preset)
    assert slo == Slo(ttft_ms=200, itl_ms=50, e2e_ms=1500.5)
    assert slo.vllm_goodput() == ["ttft:200", "e2el:1500.5"]
    assert slo_of(BenchPreset(name="q")) is None
    stored = goodput_json(slo, goodput_of(normalize_result(detailed()), slo))
    assert stored["slo"] == {"ttft_ms": 200.0, "itl_ms": 50.0, "e2el_ms": 1500.5}
    assert stored["goodput_pct"] == pytest.approx(25.0)


def test_an_slo_run_asks_the_client_for_per_request_figures_and_its_goodput():
    from console.core.bench.argv import apply_bench_overrides, build_bench_argv

    def argv(preset):
        return build_bench_argv(
            preset, client_cmd=("vllm",), base_url="http://127.0.0.1:8000", model="m",
            result_dir="/r", result_filename="r.json", max_concurrency=4,
        )  # fmt: skip

    plain = BenchPreset(name="p", input_len=64, output_len=16)
    assert "--save-detailed" not in argv(plain) and "--goodput" not in argv(plain)
    slo = apply_bench_overrides(plain, {"slo_ttft_ms": "200", "slo-itl-ms": "50", "slo_e2e_ms": "2000"})
    out = argv(slo)
    assert "--save-detailed" in out
    i = out.index("--goodput")
    assert out[i + 1 : i + 3] == ("ttft:200", "e2el:2000")  # itl is the console's own: not vLLM's
    with pytest.raises(ValueError, match="slo_ttft_ms=0: must be > 0"):
        apply_bench_overrides(plain, {"slo_ttft_ms": "0"})
    with pytest.raises(ValueError, match="extra argument --goodput"):
        argv(BenchPreset(name="p", extra_args=("--goodput", "ttft:1")))


def test_a_groups_goodput_counts_every_clients_requests():
    """A replica group: good requests over all requests of every client (not a mean of the
    clients' shares), per second of the longest client; unknown when any client's is."""
    from console.core.bench.goodput import Goodput, combined_goodput

    a = Goodput(good=9, total=10, goodput_pct=90.0, good_rps=3.0, source="per-request")
    b = Goodput(good=10, total=30, goodput_pct=33.3, good_rps=2.0, source="per-request")
    both = combined_goodput([a, b], duration=5.0)
    assert both is not None and (both.good, both.total) == (19, 40)
    assert both.goodput_pct == pytest.approx(47.5) and both.good_rps == pytest.approx(3.8)
    rate_only = Goodput(good=None, total=10, goodput_pct=50.0, good_rps=1.0, source="client")
    assert combined_goodput([a, rate_only], 5.0) is None and combined_goodput([a, None], 5.0) is None
