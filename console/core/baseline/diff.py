"""A node's versions and settings, and what changed between two readings.

The record holds what moves a node's speed or accuracy under its users: ROCm,
the amdgpu driver, GPU firmware, amd-smi (tool and library), vLLM, torch, the
kernel, the GPUs and their partition modes, the node's own `VLLM_*` / `HIP_*` /
`NCCL_*` / ... environment (what the doctor reads), the serve preset's
environment and flags, and the doctor's host settings (NUMA balancing, ...).

`diff_versions` compares two records, one line per difference: "a change is an
event" at every contact, and the check report shows the diff between the
baseline and now. Secrets never enter the record: a name with TOKEN, KEY,
SECRET, PASSWORD (or PASSWD, CREDENTIAL) in it keeps only "<redacted>", so a
changed secret is not seen as a change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.core.serve.argv import looks_secret

__all__ = [
    "ADDED",
    "CHANGED",
    "REDACTED",
    "REMOVED",
    "Change",
    "NodeVersions",
    "change_summary",
    "diff_versions",
    "is_secret_name",
    "serve_flags",
    "versions_from_dict",
    "versions_from_facts",
    "versions_to_dict",
]

ADDED, REMOVED, CHANGED = "added", "removed", "changed"
REDACTED = "<redacted>"
FORMAT = "rocm-console-node-versions/1"

# The single versions, in the order a person reads them, with their labels.
_VERSIONS = (
    ("rocm", "ROCm"),
    ("amdgpu", "amdgpu driver"),
    ("amd_smi", "amd-smi"),
    ("amdsmi", "amdsmi library"),
    ("vllm", "vLLM"),
    ("torch", "torch"),
    ("kernel", "kernel"),
)
# Groups of (name, value) pairs: their label prefix in a diff line.
_GROUPS = (
    ("gpus", "GPUs"),
    ("firmware", "firmware"),
    ("host", "host"),
    ("env", "node env"),
    ("preset_env", "preset env"),
    ("flags", "serve flag"),
)
_HOST_FACTS = ("numa_balancing",)  # doctor facts that are host settings
_SECRET_WORD_RE = re.compile(r"KEYS?$|CREDENTIAL|PASSWD|PASSWORD|SECRET|TOKEN$")

Pairs = tuple[tuple[str, str], ...]


def is_secret_name(name: str) -> bool:
    """HF_TOKEN, OPENAI_API_KEY, SSH_KEY, DB_PASSWORD, AWS_SECRET_ACCESS_KEY,
    GH_CREDENTIALS: yes. TOKENIZERS_PARALLELISM, MAX_TOKENS, KEYBOARD: no (word-wise)."""
    if looks_secret(name):
        return True
    return any(_SECRET_WORD_RE.search(word) for word in re.split(r"[^A-Z0-9]+", name.upper()) if word)


@dataclass(frozen=True, slots=True)
class NodeVersions:
    """One reading of a node's versions and settings; None = not known."""

    node: str
    rocm: str | None = None
    amdgpu: str | None = None
    amd_smi: str | None = None
    amdsmi: str | None = None
    vllm: str | None = None
    torch: str | None = None
    kernel: str | None = None
    gpus: Pairs = ()  # ("models", "8x AMD Instinct MI300X"), ("partition", "SPX/NPS1")
    firmware: Pairs = ()  # ("gpu 0 vbios", "113-M3000100-102"), ...
    host: Pairs = ()  # doctor host settings: ("numa_balancing", "0")
    env: Pairs = ()  # the node's VLLM_* / HIP_* / NCCL_* / ... environment, redacted
    preset_env: Pairs = ()  # the serve preset's env (with the suite's), redacted
    flags: Pairs = ()  # the serve preset's flags (with the suite's --set): ("--max-num-seqs", "1")
    simulated: bool = False
    captured: float | None = field(default=None, compare=False)  # unix time of the reading

    def __post_init__(self) -> None:
        # Whatever the caller passed, a secret's value never stays in the record.
        for name, _ in _GROUPS:
            pairs = getattr(self, name)
            clean = tuple(sorted((str(k), _redact(str(k), v)) for k, v in pairs))
            object.__setattr__(self, name, clean)

    def entries(self) -> tuple[tuple[str, str], ...]:
        """(label, value) of everything known, in reading order: what a diff compares."""
        out: list[tuple[str, str]] = []
        for attr, label in _VERSIONS:
            value = getattr(self, attr)
            if value is not None:
                out.append((label, value))
        for attr, label in _GROUPS:
            out.extend((f"{label} {name}", value) for name, value in getattr(self, attr))
        if self.simulated:
            out.append(("simulated", "yes"))
        return tuple(out)


def _redact(name: str, value: object) -> str:
    return REDACTED if is_secret_name(name) else str(value)


# ---------------------------------------------------------------- building


def serve_flags(args: Sequence[str]) -> Pairs:
    """`--max-num-seqs 1 --enforce-eager --dtype=float32` -> flag/value pairs
    (a bare flag is "true"); values of secret flags are redacted."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        item = str(args[i])
        if not item.startswith("-") or _is_number(item):
            out.append((f"arg {len(out) + 1}", item))  # a positional: keep it, by position
            i += 1
            continue
        if "=" in item:
            flag, value = item.split("=", 1)
            i += 1
        elif i + 1 < len(args) and not (str(args[i + 1]).startswith("-") and not _is_number(str(args[i + 1]))):
            flag, value = item, str(args[i + 1])
            i += 2
        else:
            flag, value = item, "true"
            i += 1
        flag = "--" + flag.lstrip("-").replace("_", "-") if flag.startswith("--") else flag
        out.append((flag, _redact(flag, value)))
    return tuple(out)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _text(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    text = " ".join(str(value).split())
    return text or None


def _gpu_summary(gpus: object) -> Pairs:
    """Doctor's facts["gpus"] ([{physical, model, compute_partition, memory_partition}])
    -> ("models", "8x MI300X"), ("partition", "SPX/NPS1"); mixed values are listed."""
    if not isinstance(gpus, list) or not gpus:
        return ()
    models: dict[str, int] = {}
    modes: dict[str, int] = {}
    for gpu in gpus:
        if not isinstance(gpu, Mapping):
            continue
        model = _text(gpu.get("model")) or "unknown model"
        models[model] = models.get(model, 0) + 1
        mode = f"{gpu.get('compute_partition') or '?'}/{gpu.get('memory_partition') or '?'}"
        modes[mode] = modes.get(mode, 0) + 1
    out = [("models", ", ".join(f"{n}x {m}" for m, n in sorted(models.items())))]
    if set(modes) != {"?/?"}:
        text = next(iter(modes)) if len(modes) == 1 else ", ".join(f"{n}x {m}" for m, n in sorted(modes.items()))
        out.append(("partition", text))
    return tuple(out)


def _firmware(static_gpus: Iterable[Mapping[str, Any]]) -> Pairs:
    """Telemetry's static rows -> ("gpu N vbios", version), once per physical GPU.
    Rows may carry a `firmware` mapping too (name -> version), kept as "gpu N NAME"."""
    out: dict[str, str] = {}
    for row in static_gpus:
        if not isinstance(row, Mapping):
            continue
        index = row.get("physical", row.get("index"))
        label = f"gpu {index}" if index is not None else "gpu ?"
        vbios = _text(row.get("vbios"))
        if vbios:
            out.setdefault(f"{label} vbios", vbios)
        blocks = row.get("firmware")
        if isinstance(blocks, Mapping):
            for name, version in blocks.items():
                text = _text(version)
                if text:
                    out.setdefault(f"{label} {name}", text)
    return tuple(out.items())


def versions_from_facts(
    node: str,
    facts: Mapping[str, Any],
    *,
    static_gpus: Iterable[Mapping[str, Any]] = (),
    torch: str | None = None,
    preset_env: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    preset_args: Sequence[str] = (),
    captured: float | None = None,
) -> NodeVersions:
    """The record from the doctor's facts (console/agent/doctor.py: rocm, amdgpu,
    amd_smi, amdsmi, vllm, kernel, gpus, numa_balancing, env, simulated), the
    telemetry's static rows (firmware), torch's version when known, and the serve
    preset's env and argv (with the suite's overrides applied)."""
    env = facts.get("env")
    pairs = preset_env.items() if isinstance(preset_env, Mapping) else preset_env
    host = [(name, _text(facts.get(name)) or "unknown") for name in _HOST_FACTS if name in facts]
    return NodeVersions(
        node=node,
        rocm=_text(facts.get("rocm")),
        amdgpu=_text(facts.get("amdgpu")),
        amd_smi=_text(facts.get("amd_smi")),
        amdsmi=_text(facts.get("amdsmi")),
        vllm=_text(facts.get("vllm")),
        torch=_text(torch),
        kernel=_text(facts.get("kernel")),
        gpus=_gpu_summary(facts.get("gpus")),
        firmware=_firmware(static_gpus),
        host=tuple(host),
        env=tuple((str(k), str(v)) for k, v in env.items()) if isinstance(env, Mapping) else (),
        preset_env=tuple((str(k), str(v)) for k, v in pairs),
        flags=serve_flags(preset_args),
        simulated=bool(facts.get("simulated")),
        captured=captured,
    )


# ---------------------------------------------------------------- storing


def versions_to_dict(v: NodeVersions) -> dict[str, Any]:
    out: dict[str, Any] = {"format": FORMAT, "node": v.node}
    for attr, _ in _VERSIONS:
        out[attr] = getattr(v, attr)
    for attr, _ in _GROUPS:
        out[attr] = dict(getattr(v, attr))
    out["simulated"] = v.simulated
    out["captured"] = v.captured
    return out


def versions_from_dict(data: Mapping[str, Any]) -> NodeVersions:
    """The inverse of versions_to_dict; raises ValueError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a versions record is a JSON object, not {type(data).__name__}")  # noqa: TRY004
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise ValueError(f"not a node versions record (format {fmt!r})")
    node = data.get("node")
    if not isinstance(node, str) or not node:
        raise ValueError("versions record without 'node'")
    values: dict[str, Any] = {}
    for attr, _ in _VERSIONS:
        raw = data.get(attr)
        if raw is not None and not isinstance(raw, str):
            raise ValueError(f"versions record '{attr}' is not a string")
        values[attr] = raw
    for attr, _ in _GROUPS:
        raw = data.get(attr) or {}
        if not isinstance(raw, Mapping):
            raise ValueError(f"versions record '{attr}' is not an object")
        values[attr] = tuple((str(k), str(val)) for k, val in raw.items())
    captured = data.get("captured")
    if captured is not None and (isinstance(captured, bool) or not isinstance(captured, (int, float))):
        raise ValueError("versions record 'captured' is not a number")
    return NodeVersions(node=node, simulated=bool(data.get("simulated")), captured=captured, **values)


# ---------------------------------------------------------------- the diff


@dataclass(frozen=True, slots=True)
class Change:
    kind: str  # added | removed | changed
    key: str  # the label: "ROCm", "node env VLLM_ROCM_USE_AITER", "serve flag --max-num-seqs"
    before: str | None
    after: str | None

    def line(self) -> str:
        """One line: `ROCm: 6.4.1 -> 7.0.2`, `added node env X = 1`, `removed serve flag --y (was 8)`."""
        if self.kind == CHANGED:
            return f"{self.key}: {self.before} -> {self.after}"
        if self.kind == ADDED:
            return f"added {self.key} = {self.after}"
        return f"removed {self.key} (was {self.before})"


def diff_versions(before: NodeVersions, after: NodeVersions) -> tuple[Change, ...]:
    """What differs from before to after, in reading order (after's, then what
    only before had). The node's name and the time of the reading do not count."""
    old = dict(before.entries())
    new = dict(after.entries())
    out: list[Change] = []
    for key, value in new.items():
        if key not in old:
            out.append(Change(ADDED, key, None, value))
        elif old[key] != value:
            out.append(Change(CHANGED, key, old[key], value))
    out.extend(Change(REMOVED, key, value, None) for key, value in old.items() if key not in new)
    return tuple(out)


def change_summary(changes: Sequence[Change], limit: int = 3) -> str:
    """One line for an event or a node header: the first few changes and how many more."""
    if not changes:
        return "no change"
    shown = "; ".join(c.line() for c in changes[:limit])
    more = len(changes) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
