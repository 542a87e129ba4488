"""Issue B2: the prefix-cache hit share of a run from two /metrics scrapes, and the cold warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.bench.prefix_cache import (
    COLD_HIT_WARN_PCT,
    cold_warning,
    is_cold,
    prefix_cache_json,
    prefix_cache_window,
    warning_of,
)
from console.services.live_metrics import scrape_samples

SAMPLE = Path("/work/shared/samples/vllm-0.32-cpu/metrics_during_load.txt")


def scrape(queries: float, hits: float, prefix: str = "vllm:prefix_cache") -> list:
    text = (
        f"# TYPE {prefix}_queries counter\n"
        f'{prefix}_queries_total{{engine="0",model_name="m"}} {queries}\n'
        f'{prefix}_queries_created{{engine="0",model_name="m"}} 1.7e9\n'
        f"# TYPE {prefix}_hits counter\n"
        f'{prefix}_hits_total{{engine="0",model_name="m"}} {hits}\n'
    )
    return scrape_samples(text)


def test_hit_share_is_the_delta_of_hits_over_the_delta_of_queries():
    # before the run the server had served 1000 tokens, 900 of them cached (an earlier warm run):
    # over this run 400 tokens were queried and 20 found, so 5 %, not the lifetime 73 %
    window = prefix_cache_window(scrape(1000, 900), scrape(1400, 920))
    assert window is not None
    assert window.queries == 400 and window.hits == 20
    assert window.hit_pct == pytest.approx(5.0)


def test_old_vllm_counter_names_are_read():
    window = prefix_cache_window(scrape(0, 0, "vllm:gpu_prefix_cache"), scrape(200, 150, "vllm:gpu_prefix_cache"))
    assert window is not None and window.hit_pct == pytest.approx(75.0)
    assert window.metric == "vllm:gpu_prefix_cache_queries"


def test_a_restarted_server_counts_from_zero_and_no_counters_is_none():
    window = prefix_cache_window(scrape(5000, 100), scrape(300, 150))  # counters went down: a restart
    assert window is not None and window.hit_pct == pytest.approx(50.0)
    assert prefix_cache_window(None, scrape_samples("# TYPE x counter\nx_total 1\n")) is None
    assert prefix_cache_window(scrape(10, 0), scrape(10, 0)).hit_pct is None  # nothing queried


@pytest.mark.skipif(not SAMPLE.exists(), reason="the shared vLLM 0.32 captures are not here")
def test_the_real_vllm_032_capture_is_read():
    window = prefix_cache_window(None, scrape_samples(SAMPLE.read_text()))
    assert window is not None and window.queries == 13234.0 and window.hit_pct == 0.0


def test_warning_rule():
    assert is_cold("random", None) and not is_cold("sharegpt", None) and not is_cold("prefix_repetition", None)
    assert is_cold("prefix_repetition", True) and not is_cold("random", False)
    assert cold_warning(COLD_HIT_WARN_PCT, True) is None  # at the threshold: not yet
    assert cold_warning(62.4, False) is None  # warm by design
    assert cold_warning(None, True) is None
    assert cold_warning(62.4, True) == (
        "62 % of prompt tokens came from the prefix cache: TTFT and throughput are not cold figures"
    )
    stored = prefix_cache_json(prefix_cache_window(scrape(0, 0), scrape(100, 80)), cold=True)
    assert stored["hit_pct"] == pytest.approx(80.0) and stored["warning"].startswith("80 % of prompt")
    assert warning_of(stored) == stored["warning"]
    assert warning_of({"hit_pct": "x", "cold": True}) is None and warning_of(None) is None
    assert warning_of({"hit_pct": float("nan"), "cold": True}) is None


# ---------------------------------------------------------------- a cold start's fallbacks


def _plan(ok=False, client="vllm-bench", dataset="sharegpt", versions=("0.32.0",), extra=()):
    from console.core.bench.prefix_cache import cold_start_plan

    said = "the server emptied its prefix cache" if ok else "the server has no /reset_prefix_cache"
    return cold_start_plan(
        reset=(ok, said), client=client, dataset=dataset, extra_args=extra, versions=versions, seed=77, salt="s4lt"
    )


def test_a_refused_reset_salts_every_request_where_vllm_can():
    """vLLM 0.11+ with its own client: a fresh cache_salt on every request (any dataset, the
    prompts and seed unchanged); the note says why the reset was not done and what was."""
    assert _plan(ok=True).done == "reset" and _plan(ok=True).extra_args is None
    salted = _plan()
    assert salted.done == "salt" and salted.seed is None
    assert salted.extra_args == ("--extra-body", '{"cache_salt":"s4lt"}')
    assert "no /reset_prefix_cache" in salted.note and "cache_salt" in salted.note
    # a body the preset already sends keeps its keys, the salt added
    merged = _plan(extra=("--ignore-eos", "--extra-body", '{"top_k": 5}'))
    assert merged.extra_args == ("--ignore-eos", "--extra-body", '{"top_k":5,"cache_salt":"s4lt"}')


def test_without_a_salt_random_prompts_get_a_fresh_seed_and_others_nothing():
    """An old vLLM, the legacy script or an outside client cannot salt: random prompts get a
    fresh seed (a fresh prefix per request); a dataset of fixed texts gets nothing, and says so
    rather than claim a cold start a new seed would not give."""
    for kwargs in (
        {"versions": ("0.10.2",)},
        {"versions": (None,)},
        {"client": "aiperf"},
        {"client": "benchmark_serving"},
    ):
        random_run = _plan(dataset="random", **kwargs)
        assert (random_run.done, random_run.seed, random_run.extra_args) == ("fresh-seed", 77, None), kwargs
        fixed = _plan(dataset="sharegpt", **kwargs)
        assert fixed.done == "none" and fixed.seed is None and fixed.extra_args is None
        assert "sharegpt prompts" in fixed.note and "not cold" in fixed.note
    # one replica of a group on an old vLLM: no salt for the group
    assert _plan(versions=("0.32.0", "0.9.1")).done == "none"
    # a preset's own --extra-body that is not a JSON object is left alone
    assert _plan(extra=("--extra-body", "[1]")).done == "none"


def test_a_groups_windows_add_up_and_an_unknown_replica_leaves_it_unknown():
    from console.core.bench.prefix_cache import combined_window

    a = prefix_cache_window(scrape(0, 0), scrape(100, 90))
    b = prefix_cache_window(scrape(0, 0), scrape(300, 10))
    both = combined_window([a, b])
    assert both is not None and (both.queries, both.hits) == (400, 100) and both.hit_pct == pytest.approx(25.0)
    assert combined_window([a, None]) is None and combined_window([]) is None
