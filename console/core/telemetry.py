"""Parse the node agent's JSON lines into records.

The agent (console/agent/node_agent.py) writes one JSON object per line with a
``kind``: hello, static, sample, tick (a sample kept back at the console's request),
health, probe or error. Anything else is a protocol
error: a line the console cannot trust is reported, never half-used.

A ``health`` line is the one exception to "never half-used": it carries one entry
per physical GPU read on that tick, and an entry the console cannot read (not an
object, no integer ``physical``, an unknown vendor, a ``results`` or ``nvml`` that
is not an object) is skipped with a one-line note naming the GPU (``HealthFrame.notes``),
so that one bad GPU cannot take a node's whole telemetry stream down. A line whose
own fields (ts, interval, gpus, same) are wrong is a protocol error like any other. A GPU
the agent read and found unchanged is only named in ``same`` ([physical index, read time]):
the decoder validates the pairs (a bad one is a note) and the service that keeps the GPU's
last reading carries it forward to that time (core/health.py ``carried``). Lines are
decoded within limits (console/core/node_json.py), and every text field is made
printable (console/core/text.py) before it can reach a screen.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from console.core.health import GpuFault, HealthReading
from console.core.health_readings import from_amdsmi, from_nvml
from console.core.model import (
    AgentFailure,
    AgentHello,
    GpuMetrics,
    GpuProcess,
    GpuStatic,
    HealthFrame,
    ProbeInfo,
    StaticInfo,
    TelemetryFrame,
)
from console.core.node_json import NodeJsonError, loads_object
from console.core.text import clip, printable


@dataclasses.dataclass(frozen=True, slots=True)
class AgentTick:
    """A tick whose sample the agent kept back (the console asked it for fewer): alive, on time."""

    ts: float
    seq: int


AgentMessage = AgentHello | StaticInfo | TelemetryFrame | HealthFrame | ProbeInfo | AgentFailure | AgentTick
MAX_HEALTH_GPUS = 256  # entries in one health line: more is not a node's physical GPUs


class AgentProtocolError(ValueError):
    """A line from the agent that is not valid protocol."""


def parse_agent_line(line: str) -> AgentMessage:
    text = line.strip()
    if not text:
        raise AgentProtocolError("empty line")
    try:
        obj = loads_object(text)
    except NodeJsonError as exc:
        raise AgentProtocolError(str(exc)) from None
    kind = obj.get("kind")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise AgentProtocolError(f"unknown kind {printable(clip(repr(kind), 80))}")
    try:
        return parser(obj)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise AgentProtocolError(f"bad {kind} line: {printable(clip(str(exc), 120))}") from None


def _text(value: Any) -> str:
    """A text field as it may be shown: controls and escapes made visible."""
    return printable(value if isinstance(value, str) else str(value))


def _num(value: Any) -> float | None:
    """A metric value: a finite number or None (the device said N/A)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    raise ValueError(f"expected a number or null, got {value!r}")


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected a string or null, got {clip(repr(value), 40)}")
    return printable(value)


def _opt_bool(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"expected true, false or null, got {clip(repr(value), 40)}")


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {clip(repr(value), 40)}")
    return value


VENDOR_LABELS = {"nvidia": "NVIDIA"}  # a hello without "vendor" comes from an AMD source


def is_nvidia_source(source: str | None) -> bool:
    """The node's telemetry comes from NVML or nvidia-smi (its hello named the vendor)."""
    return bool(source) and str(source).startswith(VENDOR_LABELS["nvidia"] + " ")


def amd_only_reason(source: str | None) -> str | None:
    """Why partition switching does not apply to a node, or None: it is AMD-only."""
    if not is_nvidia_source(source):
        return None
    return f"partition switching is AMD-only: this is an NVIDIA node ({source}); MIG is set up with `nvidia-smi mig`"


def _hello(obj: dict) -> AgentHello:
    vendor = VENDOR_LABELS.get(str(obj.get("vendor") or "").lower())
    return AgentHello(
        source=(f"{vendor} " if vendor else "")
        + _text(obj["source"])
        + (" (simulated)" if obj.get("simulated") else ""),
        hostname=_text(obj.get("hostname") or ""),
        interval=float(obj.get("interval") or 1.0),
        note=_opt_str(obj.get("note")),
        agent_version=_text(obj.get("agent_version") or ""),
        control=tuple(str(c) for c in obj.get("control") or () if isinstance(c, str)),
    )


def _tick(obj: dict) -> AgentTick:
    return AgentTick(ts=float(obj["ts"]), seq=int(obj.get("seq") or 0))


def _static_gpu(g: dict) -> GpuStatic:
    return GpuStatic(
        index=_int(g["index"]),
        physical=_int(g["physical"]),
        partition_id=_int(g.get("partition_id") or 0),
        bdf=_opt_str(g.get("bdf")),
        model=_opt_str(g.get("model")),
        serial=_opt_str(g.get("serial")),
        vbios=_opt_str(g.get("vbios")),
        vram_total_mib=_num(g.get("vram_total_mib")),
        compute_partition=_opt_str(g.get("compute_partition")),
        memory_partition=_opt_str(g.get("memory_partition")),
        memory_caps=tuple(_text(c) for c in g.get("memory_caps") or ()),
        uuid=_opt_str(g.get("uuid")),
        mig_mode=_opt_str(g.get("mig_mode")),
    )


def _static(obj: dict) -> StaticInfo:
    return StaticInfo(ts=float(obj["ts"]), gpus=tuple(_static_gpu(g) for g in obj["gpus"]))


def _process(p: dict) -> GpuProcess:
    return GpuProcess(pid=_int(p["pid"]), name=_text(p.get("name") or "?"), vram_mib=_num(p.get("vram_mib")))


# The per-tick numbers of a sample's GPU entry, in the order _metrics unpacks them.
_METRIC_KEYS = (
    "util_pct",
    "umc_pct",
    "vram_used_mib",
    "vram_total_mib",
    "power_w",
    "power_cap_w",
    "temp_junction_c",
    "temp_mem_c",
    "gfx_clock_mhz",
    "mem_clock_mhz",
)


def _nums(g: dict, keys: tuple[str, ...]) -> list[float | None]:
    """_num of each key's value. Every GPU of every sample comes through here (the decoding
    most of an idle console's work): plain floats are checked inline, the rest by _num."""
    out: list[float | None] = []
    for key in keys:
        v = g.get(key)
        if type(v) is float:
            out.append(v if v - v == 0 else None)  # inf - inf and nan - nan are nan: not finite
        else:
            out.append(_num(v))
    return out


def _metrics(g: dict) -> GpuMetrics:
    if not isinstance(g, dict):
        raise ValueError(f"a GPU entry is not an object: {clip(repr(g), 40)}")
    util, umc, used, total, power, cap, tj, tmem, gfx, mclk = _nums(g, _METRIC_KEYS)
    processes = g.get("processes")
    return GpuMetrics(
        index=_int(g["index"]),
        util_pct=util,
        umc_pct=umc,
        vram_used_mib=used,
        vram_total_mib=total,
        power_w=power,
        power_cap_w=cap,
        temp_junction_c=tj,
        temp_mem_c=tmem,
        gfx_clock_mhz=gfx,
        mem_clock_mhz=mclk,
        processes=tuple(_process(p) for p in processes) if processes else (),
        energy_j=_num(g.get("energy_j")),
        throttled=_opt_bool(g.get("throttled")),
    )


def _sample(obj: dict) -> TelemetryFrame:
    return TelemetryFrame(ts=float(obj["ts"]), seq=_int(obj["seq"]), gpus=tuple(_metrics(g) for g in obj["gpus"]))


def _health_reading(entry: object, ts: float) -> HealthReading:
    """One GPU entry of a health line; ValueError naming what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError("entry is not an object")
    physical = entry.get("physical")
    if isinstance(physical, bool) or not isinstance(physical, int) or physical < 0:
        raise ValueError(f"physical is not a GPU index: {clip(repr(physical), 40)}")
    vendor = entry.get("vendor")
    if vendor == "nvidia" or entry.get("source") == "nvml":
        record = entry.get("nvml")
        if not isinstance(record, dict):
            raise ValueError(f"GPU {physical}: nvml is not an object")
        reading = from_nvml(record)
        # the entry's index is the one the console knows the GPU by; the record's time when it has one
        reading = dataclasses.replace(reading, gpu=physical, t=reading.t or ts)
    elif vendor in ("amd", None):
        results = entry.get("results")
        if not isinstance(results, dict):
            raise ValueError(f"GPU {physical}: results is not an object")
        events = entry.get("events") or []
        if not isinstance(events, list):
            raise ValueError(f"GPU {physical}: events is not a list")
        reading = from_amdsmi(physical, ts, results, [e for e in events if isinstance(e, dict)])
    else:
        raise ValueError(f"GPU {physical}: unknown vendor {clip(repr(vendor), 40)}")
    # Text that reaches a screen: made printable and bounded (it comes from the node).
    faults = tuple(
        GpuFault(f.kind if f.kind.isidentifier() else "fault", f.t, f.code, printable(clip(f.message, 200)))
        for f in reading.faults
    )
    firmware = reading.firmware
    if firmware is not None:
        firmware = tuple((printable(clip(n, 40)), printable(clip(v, 60))) for n, v in firmware[:64])
    return dataclasses.replace(reading, faults=faults, firmware=firmware)


def _same_item(item: Any) -> tuple[int, float, int | None] | None:
    """One ``same`` item, [physical, read time] or [physical, read time, n]: None when it is not one."""
    if type(item) is not list or not 2 <= len(item) <= 3:
        return None
    physical, t = item[0], item[1]
    if type(physical) is not int or physical < 0 or type(t) not in (float, int) or not math.isfinite(t):
        return None  # bool is no index (type, not isinstance)
    n = item[2] if len(item) == 3 else None
    if n is not None and type(n) is not int:
        return None
    return physical, float(t), n


def _health(obj: dict) -> HealthFrame:
    ts = float(obj["ts"])
    if not math.isfinite(ts):
        raise ValueError("ts is not a finite number")
    interval = _num(obj.get("interval"))
    gpus = obj["gpus"]
    if not isinstance(gpus, list):
        raise ValueError("gpus is not a list")
    if len(gpus) > MAX_HEALTH_GPUS:
        raise ValueError(f"{len(gpus)} GPU entries (at most {MAX_HEALTH_GPUS})")
    same = obj.get("same", ())
    if not isinstance(same, (list, tuple)):
        raise ValueError("same is not a list")
    if len(gpus) + len(same) > MAX_HEALTH_GPUS:
        raise ValueError(f"{len(gpus) + len(same)} GPUs read (at most {MAX_HEALTH_GPUS})")
    readings: list[HealthReading] = []
    numbered: list[tuple[int, int]] = []
    notes: list[str] = []
    for n, entry in enumerate(gpus):
        try:
            reading = _health_reading(entry, ts)
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            physical = entry.get("physical") if isinstance(entry, dict) else None
            who = f"GPU {physical}" if isinstance(physical, int) and not isinstance(physical, bool) else f"entry {n}"
            notes.append(f"health of {who} skipped: {printable(clip(str(exc), 120))}")
            continue
        readings.append(reading)
        number = entry.get("n")
        if type(number) is int:
            numbered.append((reading.gpu, number))
    unchanged: list[tuple[int, float]] = []
    same_of: dict[int, int] = {}
    for n, item in enumerate(same):
        triple = _same_item(item)
        if triple is None:
            notes.append(f"health: same[{n}] skipped: not [GPU index, read time]: {printable(clip(repr(item), 60))}")
            continue
        physical, t, number = triple
        unchanged.append((physical, t))
        if number is not None:
            same_of[physical] = number
    return HealthFrame(
        ts=ts,
        interval=interval or 0.0,
        readings=tuple(readings),
        notes=tuple(notes),
        same=tuple(unchanged),
        numbered=tuple(numbered),
        same_of=tuple(same_of.items()),
    )


def _probe(obj: dict) -> ProbeInfo:
    def s(key: str) -> str | None:
        v = obj.get(key)
        return None if v is None else _text(str(v).strip())

    return ProbeInfo(
        hostname=s("hostname"),
        python=s("python"),
        rocm=s("rocm"),
        amdsmi=s("amdsmi"),
        vllm=s("vllm"),
        numa_balancing=s("numa_balancing"),
        source=s("source"),
        uid=obj["uid"] if isinstance(obj.get("uid"), int) and not isinstance(obj.get("uid"), bool) else None,
    )


def _error(obj: dict) -> AgentFailure:
    return AgentFailure(message=_text(obj.get("message") or "agent failed without a message"))


_PARSERS: dict[str, Callable[[dict], AgentMessage]] = {
    "hello": _hello,
    "static": _static,
    "sample": _sample,
    "tick": _tick,
    "health": _health,
    "probe": _probe,
    "error": _error,
}
