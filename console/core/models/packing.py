"""Several instances on one GPU: allowed while their --gpu-memory-utilization values add up.

The seed tuning guide packs small models this way (two 8B instances at 0.45 each on GPU 0).
vLLM takes `gpu_memory_utilization` as a share of the whole GPU for its own process, so the
shares of the instances on one GPU must sum to at most a limit (0.95 by default: the rest is
the HIP contexts' and RCCL's memory outside those shares). An instance that sets no
utilization takes vLLM's default 0.9: it holds the GPU alone, and nothing joins it.

`packing_refusal` is pure: the instances on each GPU now, and the new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["DEFAULT_MAX_SUM", "PackingError", "gpu_sums", "packing_refusal"]

DEFAULT_MAX_SUM = 0.95
_EPS = 1e-9  # 0.45 + 0.5 must count as 0.95, not 0.9500000000000001

# (instance name, its --gpu-memory-utilization; None: not set, the GPU is its alone)
Placement = tuple[str, float | None]


class PackingError(ValueError):
    """A utilization or limit out of range. One line."""


def _share(value: float | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise PackingError(f"{what}: gpu_memory_utilization {value!r} must be above 0 and at most 1")
    return float(value)


def _fmt(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.1f}"


def gpu_sums(on_gpus: Mapping[int, Sequence[Placement]]) -> dict[int, float | None]:
    """GPU -> the sum of its instances' shares (None when one holds it alone)."""
    sums: dict[int, float | None] = {}
    for gpu, placed in on_gpus.items():
        shares = [_share(util, f"instance {name} on GPU {gpu}") for name, util in placed]
        sums[gpu] = None if any(s is None for s in shares) else sum(s for s in shares if s is not None)
    return sums


def packing_refusal(
    on_gpus: Mapping[int, Sequence[Placement]],
    gpus: Sequence[int],
    name: str,
    utilization: float | None,
    *,
    max_sum: float = DEFAULT_MAX_SUM,
) -> str | None:
    """Why instance `name` (utilization None = not set) cannot join `gpus`, in one line; None if it can.

    `on_gpus` maps each GPU to the instances already there. One reason per GPU that refuses,
    joined with "; " (a TP instance spans several GPUs).
    """
    limit = _share(max_sum, "the packing limit")
    share = _share(utilization, f"instance {name}")
    assert limit is not None  # max_sum is a number (None is not a limit)
    reasons = []
    for gpu in gpus:
        placed = list(on_gpus.get(gpu, ()))
        if not placed:
            continue
        there = ", ".join(
            f"{n} ({_fmt(u)})" if u is not None else f"{n} (no --gpu-memory-utilization)" for n, u in placed
        )
        alone = [n for n, u in placed if u is None]
        if alone:
            reasons.append(
                f"GPU {gpu} is held by {', '.join(alone)}, which sets no --gpu-memory-utilization (vLLM's 0.9):"
                f" it cannot be shared"
            )
            continue
        if share is None:
            reasons.append(
                f"GPU {gpu} already serves {there}: set --gpu-memory-utilization for {name} to share it"
                f" (the sum must stay ≤ {_fmt(limit)})"
            )
            continue
        current = sum(_share(u, f"instance {n} on GPU {gpu}") or 0.0 for n, u in placed)
        total = current + share
        if total > limit + _EPS:
            reasons.append(
                f"GPU {gpu}: gpu_memory_utilization would sum to {_fmt(total)} > {_fmt(limit)}"
                f" ({name} {_fmt(share)} + {there} already there)"
            )
    return "; ".join(reasons) or None
