"""The start-benchmark dialog's fields as text -> a request, or one readable line saying what is wrong.

Pure (no Textual). The preset's own checks (console.core.bench.argv) judge the
overrides, so the dialog and `rocm-console bench run --set` refuse with the same words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from console.core.bench.argv import (
    apply_bench_overrides,
    check_bench_argv,
    sweep_points,
)
from console.core.gpus import gpu_span
from console.core.model import BenchPreset
from console.services.instances import InstanceView
from console.ui.model.bench_view import MAX_SWEEP_POINTS, dataset_text, duration
from console.ui.model.start_form import FormError, parse_pairs, split_pairs

_KEY_RE = re.compile(r"-{0,2}[A-Za-z][A-Za-z0-9_-]*\Z")

__all__ = [
    "LONG_RUN_S",
    "BenchRequest",
    "PastRun",
    "RunEstimate",
    "estimate_run",
    "FormError",
    "check_request",
    "instance_prompt",
    "parse_bench_overrides",
    "parse_concurrency",
    "parse_env",
    "parse_label",
    "points_text",
    "preset_prompt",
]


@dataclass(frozen=True)
class BenchRequest:
    """What the dialog returns: everything BenchScreen needs besides the services."""

    node: str
    instance: InstanceView
    preset: BenchPreset  # as in the profile; overrides are applied by the runner
    points: tuple[int | None, ...]  # one = a run, several = a sweep
    overrides: dict[str, str] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    label: str | None = None

    @property
    def sweep(self) -> bool:
        return len(self.points) > 1


LONG_RUN_S = 120.0  # a run estimated longer than this is said before it starts (issue U2)


@dataclass(frozen=True)
class PastRun:
    """The last stored run of a preset on a node: how long its prompts took."""

    prompts: int
    duration_s: float
    when: str = ""  # its date as shown ('20261126-171037'), for the estimate's source


@dataclass(frozen=True)
class RunEstimate:
    """How long a run (or a sweep) will take, and what the figure comes from."""

    seconds: float
    source: str
    at_least: bool = False  # a floor (the request rate), not a measured pace

    @property
    def long(self) -> bool:
        return self.seconds > LONG_RUN_S

    def text(self) -> str:
        """'≈ 9:31 (the last run here: 40 prompts in 0:15)' / 'at least 8:20 (500 prompts at rate 1/s)'."""
        return f"{'at least' if self.at_least else '≈'} {duration(self.seconds)} ({self.source})"


def estimate_run(effective: BenchPreset, points: Sequence[int | None], past: PastRun | None) -> RunEstimate | None:
    """The run's length: the pace of the last run of this preset on the node (seconds per prompt),
    and never less than the request rate allows (prompts / rate per point); None when neither
    is known (an unlimited rate and no run of it here yet)."""
    count = max(len(points), 1)
    prompts = effective.num_prompts * count
    floor = effective.num_prompts / effective.request_rate * count if effective.request_rate else None
    paced = None
    if past is not None and past.prompts > 0 and past.duration_s > 0:
        paced = past.duration_s / past.prompts * prompts
    if paced is None and floor is None:
        return None
    if past is not None and paced is not None and (floor is None or paced >= floor):
        source = f"the last run of {effective.name} here: {past.prompts} prompts in {duration(past.duration_s)}"
        return RunEstimate(paced, source)
    assert floor is not None and effective.request_rate
    rate = f"{effective.num_prompts} prompts{' each' if count > 1 else ''} at rate {effective.request_rate:g}/s"
    return RunEstimate(floor, rate, at_least=True)


def parse_concurrency(text: str) -> tuple[int, ...] | None:
    """'4' -> (4,), '1,4,16' / '1 4 16' -> a sweep; blank -> None (the preset's)."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if not parts:
        return None
    points = []
    for part in parts:
        if not part.isdigit() or int(part) < 1:
            raise FormError(f"concurrency: {part!r} is not a whole number ≥ 1 (e.g. 8, or 1,4,16 for a sweep)")
        points.append(int(part))
    if len(points) > MAX_SWEEP_POINTS:
        raise FormError(f"concurrency: {len(points)} points; a sweep has at most {MAX_SWEEP_POINTS}")
    return tuple(points)


def parse_bench_overrides(text: str) -> dict[str, str]:
    """'num_prompts=50 request_rate=4' (shell quoting allowed; `key=` unsets an optional key)."""
    return split_pairs(text, "overrides", "num_prompts=50", _bench_key_problem)


def _bench_key_problem(key: str, value: str) -> str | None:
    if _KEY_RE.match(key):
        return None
    return f"{key!r} is not a preset key (e.g. num_prompts, request_rate, input_len)"


def parse_env(text: str) -> dict[str, str]:
    return parse_pairs(text, "env")


def parse_label(text: str) -> str | None:
    text = " ".join(text.split())
    if len(text) > 120:
        raise FormError("label: at most 120 characters")
    return text or None


def check_request(
    preset: BenchPreset, overrides: dict[str, str], concurrency: tuple[int, ...] | None
) -> tuple[BenchPreset, tuple[int | None, ...]]:
    """The preset with the overrides applied and the points to run; FormError with one line."""
    try:
        effective = apply_bench_overrides(preset, overrides)
    except ValueError as exc:
        raise FormError(f"overrides: {_strip_set(str(exc))}") from None
    points: tuple[int | None, ...] = concurrency if concurrency else sweep_points(effective)
    if len(points) > MAX_SWEEP_POINTS:
        raise FormError(f"concurrency: {len(points)} points; a sweep has at most {MAX_SWEEP_POINTS}")
    try:  # what the runner will build: refuse here what it would refuse there
        check_bench_argv(effective, points[0])
    except ValueError as exc:
        raise FormError(_strip_set(str(exc))) from None
    return effective, points


def _strip_set(message: str) -> str:
    return message.removeprefix("--set ")


def points_text(points: Sequence[int | None]) -> str:
    return ",".join(str(p) if p else "∞" for p in points)


def preset_prompt(preset: BenchPreset) -> str:
    """'tiny — random 64/64 · 20 prompts · concurrency 4'."""
    conc = f"concurrency {points_text(preset.max_concurrency)}" if preset.max_concurrency else "no concurrency limit"
    rate = "" if preset.request_rate is None else f" · rate {preset.request_rate:g}/s"
    return f"{preset.name} — {dataset_text(preset)} · {preset.num_prompts} prompts · {conc}{rate}"


def instance_prompt(view: InstanceView) -> str:
    """'b1 on sim-a · GPU 1 · port 18611 — tiny-llama'."""
    model = view.served_models[0] if view.served_models else (view.model or "?")
    gpus = f"GPU{'s' if len(view.gpus) > 1 else ''} {gpu_span(view.gpus, '?')}"
    return f"{view.name} on {view.node} · {gpus} · port {view.port or '?'} — {model}"
