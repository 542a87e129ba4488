"""Speculative decoding over a run, from the server's own /metrics (issue B2).

vLLM V1 counts drafts on an instance that runs with `--speculative-config` (n-gram, EAGLE, a
draft model): `vllm:spec_decode_num_drafts`, `vllm:spec_decode_num_draft_tokens` and
`vllm:spec_decode_num_accepted_tokens` (counters, exposed with `_total`; one series per engine).
The console scrapes /metrics just before and just after every serving run; the deltas give the
run's draft acceptance rate (accepted / draft tokens, %) and its mean acceptance length
(1 + accepted / drafts: the tokens one decoding step yields, the bonus token included), as
`vllm bench serve` 0.32 computes them. They are stored under the result keys that client
writes, so a run from any client (or an older vLLM's) carries them too. Pure, stdlib.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SpecDecodeWindow", "spec_decode_window", "with_spec_decode"]

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


@dataclass(frozen=True, slots=True)
class SpecDecodeWindow:
    drafts: float
    draft_tokens: float
    accepted: float

    @property
    def acceptance_rate_pct(self) -> float | None:
        return 100.0 * self.accepted / self.draft_tokens if self.draft_tokens > 0 else None

    @property
    def acceptance_length(self) -> float | None:
        return 1.0 + self.accepted / self.drafts if self.drafts > 0 else None

    def result_keys(self) -> dict[str, Any]:
        """The keys `vllm bench serve` 0.32 writes into its result JSON for these counts."""
        return {
            "spec_decode_acceptance_rate": self.acceptance_rate_pct,
            "spec_decode_acceptance_length": self.acceptance_length,
            "spec_decode_num_drafts": int(self.drafts),
            "spec_decode_draft_tokens": int(self.draft_tokens),
            "spec_decode_accepted_tokens": int(self.accepted),
        }


def _total(samples: list, name: str) -> float | None:
    values = [v for n, _labels, v in samples if n == name]
    return sum(values) if values else None


def spec_decode_window(before: Iterable | None, after: Iterable) -> SpecDecodeWindow | None:
    """The counters' deltas between two parsed scrapes ((name, labels, value) samples; before
    None: counted from the server's start). None when the server has no such counters (no
    speculative decoding) or drafted nothing over the run. A counter lower after than before:
    the server restarted, the after values count from zero."""
    names = (DRAFTS, DRAFT_TOKENS, ACCEPTED)
    samples = list(after)
    now = [_total(samples, n) for n in names]
    values = [v for v in now if v is not None]
    if len(values) < len(names):
        return None
    sample = list(before) if before is not None else []
    then = [v for v in (_total(sample, n) for n in names) if v is not None]
    if len(then) == len(names) and all(t <= v for t, v in zip(then, values)):
        values = [v - t for v, t in zip(values, then)]
    window = SpecDecodeWindow(*values)
    return window if window.drafts > 0 else None


def with_spec_decode(result: Any, window: SpecDecodeWindow | None) -> Any:
    """A client's result JSON with the server's speculative-decoding figures where the client
    gave none (`spec_decode_source` says whose they are); unchanged otherwise."""
    if window is None or not isinstance(result, Mapping):
        return result
    if result.get("spec_decode_acceptance_rate") is not None:
        return {**result, "spec_decode_source": "client"}
    return {**result, **window.result_keys(), "spec_decode_source": "server /metrics"}
