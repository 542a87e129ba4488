"""Checks before starting an instance, and version warnings for its flags and env.

Each `check_*` returns None when all is well, else a one-line refusal that names
the thing at fault. `version_warnings` never refuses: it lists what the node's
vLLM will ignore or reject (reference/vllm-formats.md §3 and §5).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "PORT_RANGE",
    "check_cpx_tp",
    "check_gpus_free",
    "check_port",
    "check_tp",
    "choose_port",
    "env_for_vllm",
    "parse_version",
    "parse_vllm_range",
    "version_warnings",
]

PORT_RANGE = (1, 65535)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def check_tp(preset_tp: int, gpus: Sequence[int]) -> str | None:
    """TP equals the number of GPUs given: "TP 8 needs 8 GPUs, 2 given"."""
    if isinstance(preset_tp, bool) or not isinstance(preset_tp, int) or preset_tp < 1:
        return f"TP {preset_tp} is not valid: it must be 1 or more"
    seen: set[int] = set()
    for gpu in gpus:
        if gpu in seen:
            return f"GPU {gpu} is selected twice"
        seen.add(gpu)
    if preset_tp != len(gpus):
        return f"TP {preset_tp} needs {_plural(preset_tp, 'GPU')}, {len(gpus)} given"
    return None


def check_cpx_tp(
    tp: int, compute_partitions_of_selected: Mapping[int, str | None] | Sequence[str | None]
) -> str | None:
    """In CPX mode only TP 1 runs (seeds 000/001: "ONLY tp=1 is supported in CPX mode").

    Give a mapping GPU index -> compute partition to have the GPU named; a plain
    sequence of partitions works too.
    """
    if tp == 1:
        return None
    if isinstance(compute_partitions_of_selected, Mapping):
        for gpu, mode in compute_partitions_of_selected.items():
            if (mode or "").upper() == "CPX":
                return f"GPU {gpu} is in CPX mode, where only TP 1 runs (TP {tp} asked)"
        return None
    if any((mode or "").upper() == "CPX" for mode in compute_partitions_of_selected):
        return f"the selected GPUs are in CPX mode, where only TP 1 runs (TP {tp} asked)"
    return None


def check_gpus_free(gpus: Sequence[int], busy: Mapping[int, str]) -> str | None:
    """ "GPU 3 already serves instance llama-a" (GPUs grouped per instance)."""
    taken: dict[str, list[int]] = {}
    for gpu in gpus:
        if gpu in busy:
            taken.setdefault(busy[gpu], []).append(gpu)
    if not taken:
        return None
    parts = []
    for instance, held in taken.items():
        if len(held) == 1:
            parts.append(f"GPU {held[0]} already serves instance {instance}")
        else:
            parts.append(f"GPUs {', '.join(map(str, held))} already serve instance {instance}")
    return "; ".join(parts)


def check_port(port: int, used_ports: Collection[int] | Mapping[int, str]) -> str | None:
    """Port in range and not taken; a mapping port -> instance names the holder."""
    low, high = PORT_RANGE
    if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= high:
        return f"port {port} is out of range ({low}-{high})"
    if port in used_ports:
        if isinstance(used_ports, Mapping) and used_ports[port]:
            return f"port {port} is already used by instance {used_ports[port]}"
        return f"port {port} is already in use"
    return None


def choose_port(used: Collection[int], start: int = 8000) -> int:
    """The first free port from start (vLLM's default 8000) upwards."""
    low, high = PORT_RANGE
    for port in range(max(start, low), high + 1):
        if port not in used:
            return port
    raise ValueError(f"no free port from {start} to {high}")


# ---------------------------------------------------------------- versions

Version = tuple[int, int, int]
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str | None) -> Version | None:
    """'0.9.1+rocm' -> (0, 9, 1); '0.12.0rc1' -> (0, 12, 0); 'v0.33' -> (0, 33, 0)."""
    if not text:
        return None
    found = _VERSION_RE.search(text)
    if not found:
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)


_RANGE_CLAUSE_RE = re.compile(r"\s*(<=|>=|==|<|>)\s*v?(\d+)\.(\d+)(?:\.(\d+))?\s*\Z")
_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
}


def parse_vllm_range(text: str) -> tuple[tuple[str, Version], ...]:
    """'>=0.9.1,<0.12' -> (('>=', (0, 9, 1)), ('<', (0, 12, 0))): every clause must hold.
    ValueError naming the clause that is not `<`, `<=`, `>`, `>=` or `==` and a version."""
    clauses = []
    for part in text.split(","):
        found = _RANGE_CLAUSE_RE.match(part)
        if not found:
            raise ValueError(
                f"vLLM version range {text!r}: {part.strip()!r} is not a comparison like '<0.12' or '>=0.9.1'"
            )
        op, major, minor, patch = found.groups()
        clauses.append((op, (int(major), int(minor), int(patch or 0))))
    return tuple(clauses)


def env_for_vllm(
    env: Sequence[tuple[str, str]],
    env_by_vllm: Sequence[tuple[str, Sequence[tuple[str, str]]]],
    vllm_version: str | None,
) -> tuple[tuple[str, str], ...]:
    """A preset's environment for the node's vLLM: `env`, then each `env_by_vllm` table whose
    range holds the version (later tables win on the same name). With the version unknown every
    table applies: the seed's command as written (version_warnings says nothing without one)."""
    version = parse_version(vllm_version)
    out = dict(env)
    for spec, pairs in env_by_vllm:
        clauses = parse_vllm_range(spec)
        if version is None or all(_COMPARE[op](version, bound) for op, bound in clauses):
            out.update(dict(pairs))
    return tuple(out.items())


@dataclass(frozen=True, slots=True)
class _Span:
    """Where a name is known to be absent, from the versions the reference checked.

    absent_upto: newest checked version without it (it came later);
    absent_from: oldest checked version without it again (it went away).
    Versions between two checked ones are not judged.
    """

    name: str
    absent_upto: Version | None = None
    first_seen: str = ""
    absent_from: Version | None = None
    last_seen: str = ""
    early_hint: str = ""  # said when the version is too old for it
    late_hint: str = ""  # said when it is gone


def _spans(names: str, **kw) -> list[_Span]:
    return [_Span(name, **kw) for name in names.split()]


# reference/vllm-formats.md §5 (checked: 0.6.3 0.8.5 0.9.1 0.9.2 0.10.2 0.11 0.12 0.33).
_ENV_SPANS: tuple[_Span, ...] = (
    *_spans(
        "VLLM_ROCM_USE_AITER VLLM_ROCM_USE_AITER_MOE VLLM_ROCM_USE_AITER_RMSNORM"
        " VLLM_ROCM_USE_AITER_LINEAR VLLM_ROCM_USE_AITER_MLA VLLM_ROCM_USE_SKINNY_GEMM"
        " VLLM_ROCM_FP8_PADDING VLLM_ROCM_MOE_PADDING",
        absent_upto=(0, 6, 3),
        first_seen="0.8.5",
    ),
    _Span("VLLM_ROCM_USE_AITER_MHA", absent_upto=(0, 9, 1), first_seen="0.9.2"),
    *_spans(
        "VLLM_ROCM_USE_AITER_PAGED_ATTN VLLM_ROCM_CUSTOM_PAGED_ATTN",
        absent_upto=(0, 6, 3),
        first_seen="0.8.5",
        absent_from=(0, 33, 0),
        last_seen="0.12",
    ),
    _Span(
        "VLLM_USE_AITER_UNIFIED_ATTENTION",
        absent_upto=(0, 9, 2),
        first_seen="0.10.2",
        absent_from=(0, 12, 0),
        last_seen="0.11",
        late_hint="renamed VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION in 0.12",
    ),
    _Span(
        "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION",
        absent_upto=(0, 11, 0),
        first_seen="0.12",
        early_hint="0.10.2-0.11 call it VLLM_USE_AITER_UNIFIED_ATTENTION",
    ),
    _Span("VLLM_ROCM_USE_AITER_FP8BMM", absent_upto=(0, 9, 2), first_seen="0.10.2"),
    _Span("VLLM_ROCM_USE_AITER_TRITON_ROPE", absent_upto=(0, 11, 0), first_seen="0.12"),
    _Span("VLLM_USE_TRITON_FLASH_ATTN", absent_from=(0, 12, 0), last_seen="0.11"),
    _Span(
        "VLLM_V1_USE_PREFILL_DECODE_ATTENTION",
        absent_upto=(0, 8, 5),
        first_seen="0.9.1",
        absent_from=(0, 33, 0),
        last_seen="0.12",
    ),
    *_spans(
        "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16"
        " VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB",
        absent_upto=(0, 9, 1),
        first_seen="0.9.2",
    ),
    *_spans(
        "VLLM_RPC_TIMEOUT VLLM_ENGINE_ITERATION_TIMEOUT_S VLLM_ATTENTION_BACKEND",
        absent_from=(0, 33, 0),
        last_seen="0.12",
    ),
    _Span(
        "VLLM_USE_V1",
        absent_upto=(0, 6, 3),
        first_seen="0.8.5",
        absent_from=(0, 12, 0),
        last_seen="0.11",
        late_hint="V1 is the only engine from 0.11",
    ),
    _Span("VLLM_ENGINE_READY_TIMEOUT_S", absent_upto=(0, 12, 0), first_seen="0.33"),
    *_spans(
        "VLLM_USE_ROCM_CUSTOM_PAGED_ATTN VLLM_ROCM_PREFER_TORCH VLLM_ROCM_PREFER_TRITON",
        absent_from=(0, 8, 5),
        last_seen="0.6.3+rocm (a fork-only variable)",
    ),
)
_ENV_BY_NAME = {span.name: span for span in _ENV_SPANS}

# §3: "--num-scheduler-steps exists through 0.9.x; --async-scheduling appears in 0.10".
_FLAG_SPANS: tuple[_Span, ...] = (
    _Span(
        "--num-scheduler-steps",
        absent_from=(0, 10, 0),
        last_seen="0.9.x",
        late_hint="--async-scheduling replaces it",
    ),
    _Span("--async-scheduling", absent_upto=(0, 9, 2), first_seen="0.10"),
)
_FLAG_BY_NAME = {span.name: span for span in _FLAG_SPANS}

_QUICK_REDUCE_MODES = ("FP", "INT8", "INT6", "INT4", "INT3", "NONE")
_TRUE = ("1", "true", "yes", "on")


def _flag_name(arg: str) -> str | None:
    if not arg.startswith("--"):
        return None
    name = arg.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-")


def _span_warning(span: _Span, kind: str, version: Version, shown: str) -> tuple[str, str] | None:
    """(warning, hint) when the version lies where the name is known to be absent."""
    if span.absent_upto is not None and version <= span.absent_upto:
        text = f"{kind} {span.name} is not in vLLM {shown} (first in {span.first_seen})"
        return text, span.early_hint
    if span.absent_from is not None and version >= span.absent_from:
        text = f"{kind} {span.name} is gone in vLLM {shown} (last in {span.last_seen})"
        return text, span.late_hint
    return None


def _with_hint(text: str, hint: str) -> str:
    return f"{text}; {hint}" if hint else text


def version_warnings(
    vllm_version: str | None, args: Sequence[str], env: Mapping[str, str] | Sequence[tuple[str, str]]
) -> list[str]:
    """What the node's vLLM ignores or rejects among the preset's flags and env.

    Version-independent warnings (an AITER feature flag without the master switch,
    a bad Quick Reduce mode) are given even when the version is unknown.
    """
    env_map = dict(env.items()) if isinstance(env, Mapping) else dict(env)
    version = parse_version(vllm_version)
    shown = vllm_version or ""
    warnings: list[str] = []

    if version is not None:
        for name in env_map:
            span = _ENV_BY_NAME.get(name)
            found = span and _span_warning(span, "env", version, shown)
            if found:
                text, hint = found
                if version >= (0, 33, 0) and name.startswith("VLLM_"):
                    text += ": it has no effect and vLLM logs 'Unknown vLLM environment variable'"
                else:
                    text += ": it has no effect"
                warnings.append(_with_hint(text, hint))
        seen: set[str] = set()
        for arg in args:
            flag = _flag_name(arg)
            if flag is None or flag in seen:
                continue
            seen.add(flag)
            span = _FLAG_BY_NAME.get(flag)
            found = span and _span_warning(span, "flag", version, shown)
            if found:
                text, hint = found
                warnings.append(_with_hint(text + ": vLLM stops with 'unrecognized arguments'", hint))
            if flag == "--disable-log-requests" and version >= (0, 10, 2):
                warnings.append(
                    "flag --disable-log-requests is deprecated since vLLM 0.10 and removed in"
                    " newer releases (request logging is off by default): drop it"
                )

    aiter_on = env_map.get("VLLM_ROCM_USE_AITER", "").strip().lower() in _TRUE
    for name, value in env_map.items():
        if name.startswith("VLLM_ROCM_USE_AITER_") and value.strip().lower() in _TRUE and not aiter_on:
            warnings.append(f"env {name}={value} has no effect without VLLM_ROCM_USE_AITER=1")
    mode = env_map.get("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION")
    if mode is not None and mode.strip().upper() not in _QUICK_REDUCE_MODES:
        warnings.append(
            f"env VLLM_ROCM_QUICK_REDUCE_QUANTIZATION={mode}: expected one of " + ", ".join(_QUICK_REDUCE_MODES)
        )
    return warnings
