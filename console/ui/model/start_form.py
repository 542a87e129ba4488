"""The start dialog's fields as text -> a start request, or one readable line saying what is wrong.

Pure (no Textual). Only the form is checked here (syntax, GPUs that exist); the
serve rules (TP = GPU count, CPX needs TP 1, GPUs and ports free) are the
instance service's, so the dialog and `serve start` refuse with the same words.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Callable, Collection, Iterable, Mapping, Sequence

from console.core.model import GpuStatic, ServePreset
from console.core.models.config import ModelFacts
from console.core.models.fit import FitError, ServeSettings, Verdict, predict
from console.core.models.settings import SETTING_KEYS, settings_from_args, settings_from_pairs
from console.core.text import key_value
from console.services.instances import NAME_RE

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEY_RE = re.compile(r"-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*\Z")
_RANGE_RE = re.compile(r"(\d+)\s*-\s*(\d+)\Z")


class FormError(ValueError):
    """One line for the dialog: which field, what is wrong, what would do."""


@dataclass(frozen=True)
class ReplicaAsk:
    """The replicas field: a group of `replicas` (a number or per-gpu), `per_gpu` on each GPU set."""

    replicas: int | str
    per_gpu: int = 1

    def cli(self) -> str:
        """The same group as `serve start` flags (shown in the preview)."""
        text = f"--replicas {self.replicas}"
        return text + (f" --per-gpu {self.per_gpu}" if self.per_gpu > 1 else "")


@dataclass(frozen=True)
class StartRequest:
    node: str
    preset: str
    gpus: tuple[int, ...] = ()  # empty: the first free GPUs, as many as the preset's TP
    port: int | None = None  # None: the preset's, or the first free from 8000
    name: str | None = None  # None: preset-gGPUS
    overrides: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    tp: int | None = None  # the TP field (None: the preset's)
    replicas: ReplicaAsk | None = None  # a replica group (serve start --replicas)
    nodes: tuple[str, ...] = ()  # the node first; several: a multi-node instance, or the group's nodes


def gpus_text(gpus: Iterable[int]) -> str:
    """'0,1,2,3' (the form the GPUs field takes back)."""
    return ",".join(str(g) for g in gpus)


def parse_gpus(text: str, known: Collection[int] = ()) -> tuple[int, ...]:
    """'0,1' / '0 1' / '0-3' -> GPU indexes; `known` (the node's GPUs) when the node reported them."""
    gpus: list[int] = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        if part.isdigit():
            gpus.append(int(part))
            continue
        m = _RANGE_RE.match(part)
        if m and int(m.group(1)) <= int(m.group(2)):
            gpus.extend(range(int(m.group(1)), int(m.group(2)) + 1))
            continue
        raise FormError(f"GPUs: {part!r} is not a GPU index (e.g. 0,1 or 0-3; blank picks free ones)")
    seen: set[int] = set()
    for gpu in gpus:
        if gpu in seen:
            raise FormError(f"GPUs: GPU {gpu} is given twice")
        seen.add(gpu)
    if known:
        missing = [g for g in gpus if g not in known]
        if missing:
            raise FormError(f"GPUs: no GPU {missing[0]} on this node (it has {_span(known)})")
    return tuple(gpus)


def _span(known: Collection[int]) -> str:
    ordered = sorted(known)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}" if len(ordered) > 1 else f"only {ordered[0]}"
    return gpus_text(ordered)


def parse_port(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise FormError(f"port: {text!r} is not a port number (1-65535; blank picks a free one)")
    return int(text)


def parse_name(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    if not NAME_RE.match(text):
        raise FormError(f"name: {text!r} is not a valid name (letters, digits, . _ -, at most 64)")
    return text


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """'max_model_len=4096 gpu_memory_utilization=0.9' (shell quoting allowed) -> a dict."""
    if what == "overrides":
        return split_pairs(text, what, "max_model_len=4096", _serve_override_problem)
    return split_pairs(text, what, "VLLM_USE_V1=1", _env_problem if what == "env" else None)


def split_pairs(
    text: str, what: str, example: str, problem: Callable[[str, str], str | None] | None = None
) -> dict[str, str]:
    """KEY=VALUE words (shell quoting allowed) -> a dict; FormError "what: ..." for a word
    that is not KEY=VALUE or whose key/value `problem` names a fault in."""
    try:
        items = shlex.split(text)
    except ValueError as exc:
        raise FormError(f"{what}: {exc}") from None
    out: dict[str, str] = {}
    for item in items:
        pair = key_value(item)
        if pair is None:
            raise FormError(f"{what}: {item!r} is not KEY=VALUE (e.g. {example})")
        fault = problem(*pair) if problem is not None else None
        if fault is not None:
            raise FormError(f"{what}: {fault}")
        out[pair[0]] = pair[1]
    return out


def _env_problem(key: str, value: str) -> str | None:
    return None if _ENV_NAME_RE.match(key) else f"{key!r} is not an environment variable name"


def _serve_override_problem(key: str, value: str) -> str | None:
    if not _KEY_RE.match(key):
        return f"{key!r} is not a vLLM flag name (e.g. max_model_len=4096)"
    if value == "":
        return f"{key} has no value (use {key}=false to drop the flag)"
    return None


TP_KEYS = ("tp", "tensor_parallel_size")


def tp_in_overrides(overrides: Mapping[str, str]) -> str | None:
    """The override that names the tensor-parallel size (tp=, tensor_parallel_size=), if any."""
    return next((k for k in overrides if k.lstrip("-").replace("-", "_") in TP_KEYS), None)


def refuse_tp_override(overrides: Mapping[str, str]) -> None:
    """The TP field sets the size: an override naming it would fight the field (FormError)."""
    key = tp_in_overrides(overrides)
    if key is not None:
        raise FormError(f"overrides: {key}={overrides[key]}: the TP field sets the tensor-parallel size")


def override_tp(preset: ServePreset, overrides: dict[str, str]) -> int:
    """The TP a start will use: the preset's, unless overridden (tp=2, tensor_parallel_size=2)."""
    key = tp_in_overrides(overrides)
    if key is not None:
        value = overrides[key]
        if not value.strip().isdigit() or int(value) < 1:
            raise FormError(f"overrides: {key}={value!r}: the tensor-parallel size is a whole number ≥ 1")
        return int(value)
    return preset.tp


def tp_choices(gpu_count: int, *, heads: int | None = None, cpx: bool = False) -> tuple[int, ...]:
    """The tensor-parallel sizes `gpu_count` GPUs allow: the powers of two that divide the count
    (each TP group takes the same share: replicas fill the GPUs evenly), and the count itself;
    only those dividing the model's attention heads when config.json is known (vLLM refuses the
    rest); only 1 on CPX partitions (the serve rules: a CPX partition runs TP 1)."""
    if gpu_count < 1:
        return (1,)
    if cpx:
        return (1,)
    sizes = {t for t in range(1, gpu_count + 1) if gpu_count % t == 0 and (t & (t - 1) == 0 or t == gpu_count)}
    if heads:
        sizes = {t for t in sizes if heads % t == 0} or {1}
    return tuple(sorted(sizes))


def default_tp(preset_tp: int, choices: Sequence[int], gpu_count: int) -> int:
    """The TP the field starts with: the preset's when the GPUs allow it, else one instance over
    every marked GPU when that is allowed, else the largest size allowed."""
    if preset_tp in choices:
        return preset_tp
    if gpu_count in choices:
        return gpu_count
    return max(choices)


_PER_GPU_RE = re.compile(r"(?:(\d+)\s*[,;]?\s+)?(?:(\d+)\s*(?:x\s*)?)?per[\s_-]*gpu\Z", re.IGNORECASE)


def parse_replicas_field(text: str) -> ReplicaAsk | None:
    """'' -> one instance (None); '4' -> 4 replicas; 'per GPU' -> one per free GPU (TP group);
    '2 per GPU' -> two on each; '4, 2 per GPU' -> 4 replicas packed two per GPU (CLI:
    --replicas 4 --per-gpu 2). The number's limits are the CLI's (core/replicas.parse_replicas)."""
    from console.core.replicas import PER_GPU, ReplicaPlanError, parse_replicas

    text = text.strip()
    if not text:
        return None
    m = _PER_GPU_RE.match(text)
    try:
        if m:
            count, per = m.group(1), m.group(2)
            if per is None:  # one number before "per GPU": how many share each GPU
                count, per = None, count
            per_gpu = int(per) if per else 1
            if per_gpu < 1:
                raise FormError(f"replicas: {text!r}: at least 1 per GPU")
            return ReplicaAsk(parse_replicas(count) if count else PER_GPU, per_gpu)
        return ReplicaAsk(parse_replicas(text))
    except ReplicaPlanError as exc:
        raise FormError(
            f"replicas: {str(exc).replace('--replicas ', '')} (e.g. 4 · per GPU · 2 per GPU · 4, 2 per GPU)"
        ) from None


def free_gpus(indexes: Iterable[int], busy: Collection[int], count: int) -> tuple[int, ...] | None:
    """The first `count` GPUs not busy, or None if there are not enough."""
    free = [g for g in sorted(indexes) if g not in busy]
    return tuple(free[:count]) if len(free) >= count else None


def size_text(n: int) -> str:
    """'16.1 GB' (decimal units, as the hub and `models list` give sizes)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def model_mark(model: str, held: Mapping[str, bool], sizes: Mapping[str, int]) -> str:
    """What the preset list adds after a preset, once the node's models are known: ' · on the
    node', ' · partly on the node', or ' · not on the node, 141.1 GB' (the size when any node
    holds it)."""
    if held.get(model):
        return " · on the node"
    size = sizes.get(model)
    where = "partly on the node" if model in held else "not on the node"
    return f" · {where}" + (f", {size_text(size)}" if size else "")


def preset_prompt(preset: ServePreset) -> str:
    """What the preset list shows: 'tiny — tiny-llama · TP 1'."""
    extra = " · docker" if preset.runtime == "docker" else ""
    return f"{preset.name} — {preset.model} · TP {preset.tp}{extra}"


def default_preset(
    presets: Sequence[ServePreset], gpu_count: int, last: str | None = None, partition: str | None = None
) -> str | None:
    """The last one used if any, else the first whose TP fits the selected GPUs (one named
    for their partition mode first, e.g. '...-cpx' on CPX GPUs), else the first."""
    names = [p.name for p in presets]
    if last in names:
        return last
    fitting = [p for p in presets if gpu_count and p.tp == gpu_count]
    mode = (partition or "").lower()
    for p in fitting:
        if mode and mode != "spx" and mode in p.name.lower().replace("_", "-").split("-"):
            return p.name
    if fitting:
        return fitting[0].name
    return names[0] if names else None


# ---------------------------------------------------------------- will it fit (issue Q)


def fit_text(
    facts: ModelFacts | None,
    static: Sequence[GpuStatic],
    gpus: Sequence[int],
    preset: ServePreset,
    overrides: Mapping[str, str],
) -> tuple[str, str] | None:
    """(state, line) for the preview: the fit on the chosen GPUs, from the same planner as
    `serve plan` (state "ok", "warn" when only a shorter max_model_len fits, "fail" when it does
    not fit); None when there is nothing to say (no model facts, no GPUs, memory unknown)."""
    if facts is None or not gpus:
        return None
    mib = [g.vram_total_mib for g in static if g.index in gpus and g.vram_total_mib]
    if len(mib) != len(gpus):
        return None
    try:
        settings = settings_from_args(preset.args, ServeSettings(tp=preset.tp))
        known = {k: v for k, v in overrides.items() if k.lstrip("-").replace("-", "_") in SETTING_KEYS}
        settings = settings_from_pairs(known, replace(settings, tp=len(gpus)), what="overrides")
        settings = replace(settings, tp=len(gpus))
        pred = predict(facts, int(min(mib) * 1024 * 1024), settings)
    except (FitError, ValueError) as exc:
        return "warn", f"fit: {exc}"
    kv = pred.kv
    where = f"{min(mib) / 1024:.1f} GiB/GPU x {len(gpus)}"
    if pred.verdict in (Verdict.WEIGHTS_TOO_BIG, Verdict.NO_KV_ROOM):
        return "fail", f"does not fit ({where}): {pred.line()}"
    state = "warn" if pred.verdict == Verdict.FITS_SHORTER else "ok"
    return state, f"fits ({where}): KV cache {kv.tokens:,} tokens, max len {pred.largest_max_model_len:,}"
