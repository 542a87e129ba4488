"""What the GPUs of one run did, at 1 Hz, kept small; and the run's energy from it.

A benchmark keeps the telemetry of the physical GPUs it ran on over the run: a
``Tick`` per GPU per second (utilization, power, the energy counter, gfx and
memory clocks, temperatures, VRAM, whether a throttling reason was set and the
accumulated throttle residency).  ``TelemetryBuilder`` turns that stream into a
``RunTelemetry``: per GPU, columns of points (one tuple per quantity, aligned).

Bounded.  A series holds at most ``MAX_POINTS`` (256) points.  Each point covers
``width`` consecutive sample intervals; when a series would exceed the bound,
neighbouring points are merged pairwise and ``width`` doubles, so once a run
passes 256 samples its series keeps 128-256 points however long it runs: 1 Hz
resolution up to 4 min 16 s, 32 s points for a 2-hour run (225 points: 15.7 KB of JSON per
GPU with every column varying, less where a column holds one value throughout;
``tests/core/bench/test_run_telemetry.py`` measures it).  Throttle
episodes are kept apart at full resolution, at most ``MAX_EPISODES`` (64) per
GPU: beyond that the two episodes with the shortest gap between them become one.

Exact under downsampling.  A point stores sums, not samples: the energy of its
intervals (computed per sample interval by ``console.core.energy.run_energy``:
from the counter's delta, from the trapezoid of the power samples only where the
counter has no delta, reset or missing, and then counted in ``integrated_s``),
the seconds throttled and the seconds whose throttle state was known (each
sample's state holds until the next, as ``energy.throttled_share``), the
residency accrued, and duration-weighted means (util, power, clocks) or maxima
(peak power, temperatures, VRAM).  Merging points adds the sums, so the run's
energy, throttled share and peak power are the same at any ``width``.

Partitions.  A CPX/DPX partition has no power or energy reading of its own: the
physical GPU (its primary partition, in amdsmi's gpu_metrics) reports them for
the whole board.  So per physical GPU the record keeps what was measured (its
energy) and ``share``, the part of it charged to this run, per point.  The rule
(``partition_share``), per sample interval:

- *activity*: the run's partitions' gfx busy % over the sum of all partitions'
  busy % of that GPU (amdsmi ``xcp_stats.gfx_busy_inst``, per partition), when
  every partition's busy % is known and the GPU is not idle (sum >= 1 %);
- *count*: otherwise, the run's partitions over the partitions in use (those
  serving something, given by the caller; all of the GPU's when not given).

Why activity first: a CPX MI300X runs 8 instances, and a benchmark usually drives
one of them while the other seven idle; the count rule would charge that run 1/8
of the board's energy though its partition drew almost all of the dynamic power.
By activity it is charged what the board spent while it was the one working,
idle floor included, which is what the run cost.  When every partition of the GPU
belongs to the run (a group run over all instances), both rules give 1: the
physical GPU's energy.  Busy % is a proxy: a memory-bound partition draws more
per busy % than a compute-bound one; no reading splits the board's power better.

The run's figures (``summarize``): energy (J) summed over its GPUs after the
share, where it came from (``counter``, ``counter+integrated_power``,
``integrated_power``), average power (the run's energy over the seconds it
covers, all its GPUs together), the highest one-GPU power reading, output tokens
per joule, the share of GPU-seconds throttled, and the residency share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.core import energy as en

__all__ = [
    "ACTIVE_FLOOR_PCT",
    "MAX_EPISODES",
    "MAX_POINTS",
    "RESIDENCY_KEYS",
    "Episode",
    "GpuEnergy",
    "GpuSeries",
    "GpuSetup",
    "RunEnergySummary",
    "RunTelemetry",
    "TelemetryBuilder",
    "TelemetryError",
    "Tick",
    "build",
    "partition_share",
    "summarize",
    "summary_to_json",
    "tick_from_record",
]

MAX_POINTS = 256
MAX_EPISODES = 64
SCHEMA = 1
# A GPU whose partitions' busy % sum below this is idle: there is no activity to split.
ACTIVE_FLOOR_PCT = 1.0
# NVML perf-policy residency counters that mean the clocks were held back (docs/nvidia.md).
# The per-reason counters (sw_thermal, hw_thermal, hw_power_brake) overlap these and are
# left out; two policies active at once count twice, so a share is capped at 1.
RESIDENCY_KEYS = ("power", "thermal", "board_limit", "reliability")

SHARE_WHOLE = "whole"  # the run had the whole physical GPU
SHARE_ACTIVITY = "activity"
SHARE_COUNT = "count"
SHARE_MIXED = "activity+count"


class TelemetryError(ValueError):
    """A telemetry record or setup that cannot be used; the message is one line naming the GPU or key."""


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Tick:
    """One physical GPU at one instant (epoch seconds); None = not read."""

    t: float
    power_w: float | None = None
    energy_mj: float | None = None  # the GPU's energy counter
    util_pct: float | None = None  # the run's partitions' busy % (the GPU's when unpartitioned)
    gfx_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temp_c: float | None = None  # junction (AMD hotspot) / GPU (NVIDIA)
    temp_mem_c: float | None = None
    vram_used_mib: float | None = None  # the run's partitions' VRAM
    throttled: bool | None = None
    residency_ns: Mapping[str, float | None] | None = field(default=None, hash=False)  # accumulated, by key
    partition_util: tuple[float | None, ...] = ()  # busy % of every partition of the GPU, by id


@dataclass(frozen=True)
class GpuSetup:
    """What a run used of one physical GPU."""

    gpu: int
    node: str = ""
    partitions: tuple[int, ...] = ()  # the run's partition ids; () = the whole GPU
    partition_count: int = 1  # partitions the GPU is split into (CPX on MI300X: 8)
    in_use: tuple[int, ...] = ()  # partitions serving anything; () = all of them

    def __post_init__(self) -> None:
        where = f"gpu {self.node + ':' if self.node else ''}{self.gpu}"
        if self.partition_count < 1:
            raise TelemetryError(f"telemetry: {where}: partition_count must be >= 1, got {self.partition_count}")
        for p in (*self.partitions, *self.in_use):
            if not 0 <= p < self.partition_count:
                raise TelemetryError(
                    f"telemetry: {where}: partition {p} out of range for {self.partition_count} partitions"
                )

    @property
    def whole(self) -> bool:
        return not self.partitions or len(set(self.partitions)) >= self.partition_count


def partition_share(
    run: Sequence[int], busy: Sequence[float | None], partition_count: int, in_use: Sequence[int] = ()
) -> tuple[float, str]:
    """(share of the physical GPU's energy charged to the run's partitions, rule used).

    Activity when every partition's busy % is known and the GPU is not idle; else the
    run's partitions over those in use (all when ``in_use`` is empty).
    """
    mine = set(run)
    if not mine or len(mine) >= partition_count:
        return 1.0, SHARE_WHOLE
    if len(busy) >= partition_count and all(b is not None for b in busy[:partition_count]):
        values = [max(0.0, float(b or 0.0)) for b in busy[:partition_count]]
        total = sum(values)
        if total >= ACTIVE_FLOOR_PCT:
            return sum(values[p] for p in mine) / total, SHARE_ACTIVITY
    users = (set(in_use) | mine) if in_use else set(range(partition_count))
    return len(mine) / len(users), SHARE_COUNT


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def tick_from_record(record: Mapping[str, Any], partitions: Sequence[int] = ()) -> Tick:
    """A Tick from an agent record: NVML's ``run_sample`` (sm_clock_mhz, temp_gpu_c) or the
    AMD sample names (gfx_clock_mhz, temp_junction_c); ``partition_util`` / ``partition_vram_mib``
    lists, where given, are summed over the run's ``partitions`` for util and VRAM."""
    throttled = record.get("throttled")
    if not isinstance(throttled, bool):
        throttled = en.throttled_from_names(record.get("clock_event_names"))
    busy_raw = record.get("partition_util")
    busy = tuple(_num(v) for v in busy_raw) if isinstance(busy_raw, (list, tuple)) else ()
    util = _num(record.get("util_pct"))
    vram = _num(record.get("vram_used_mib"))
    if partitions and busy:
        mine = [busy[p] for p in partitions if p < len(busy)]
        util = sum(v for v in mine if v is not None) / len(mine) if mine and None not in mine else None
    vram_parts = record.get("partition_vram_mib")
    if partitions and isinstance(vram_parts, (list, tuple)):
        vals = [_num(vram_parts[p]) for p in partitions if p < len(vram_parts)]
        vram = sum(v for v in vals if v is not None) if vals and None not in vals else None
    residency = record.get("residency_ns")
    return Tick(
        t=float(record["t"]),
        power_w=_num(record.get("power_w")),
        energy_mj=_num(record.get("energy_mj")),
        util_pct=util,
        gfx_clock_mhz=_num(record.get("gfx_clock_mhz", record.get("sm_clock_mhz"))),
        mem_clock_mhz=_num(record.get("mem_clock_mhz")),
        temp_c=_num(record.get("temp_junction_c", record.get("temp_gpu_c"))),
        temp_mem_c=_num(record.get("temp_mem_c")),
        vram_used_mib=vram,
        throttled=throttled,
        residency_ns=dict(residency) if isinstance(residency, Mapping) else None,
        partition_util=busy,
    )


# ---------------------------------------------------------------- the record


@dataclass(frozen=True)
class Episode:
    """A stretch of throttling, seconds since the run's start."""

    start: float
    end: float


# Columns of a series and how a point of merged intervals is made from them.
MEAN_COLUMNS = ("util_pct", "power_w", "gfx_clock_mhz", "mem_clock_mhz")  # duration-weighted
MAX_COLUMNS = ("power_max_w", "temp_c", "temp_mem_c", "vram_used_mib")
SUM_COLUMNS = ("energy_j", "energy_s", "integrated_s", "run_energy_j", "throttled_s", "throttle_known_s", "residency_s")
COLUMNS = ("t", *MEAN_COLUMNS, *MAX_COLUMNS, *SUM_COLUMNS)
# Rounding kept in the record (and so in its JSON): decimals per column.
_DECIMALS = {
    "t": 3,
    "util_pct": 1,
    "power_w": 1,
    "gfx_clock_mhz": 0,
    "mem_clock_mhz": 0,
    "power_max_w": 1,
    "temp_c": 1,
    "temp_mem_c": 1,
    "vram_used_mib": 0,
    "energy_j": 2,
    "energy_s": 3,
    "integrated_s": 3,
    "run_energy_j": 2,
    "throttled_s": 3,
    "throttle_known_s": 3,
    "residency_s": 3,
}


@dataclass(frozen=True)
class GpuSeries:
    """One physical GPU over the run: aligned columns, one value per point.

    ``t`` is the point's start (seconds since the run's start); a point lasts until
    the next one's ``t`` (the last until ``end``).  ``energy_j`` is what the GPU
    used (all its partitions), ``run_energy_j`` the part charged to the run;
    ``energy_s`` the seconds ``energy_j`` covers, ``integrated_s`` those of them
    from integrated power.
    """

    gpu: int
    node: str
    partitions: tuple[int, ...]
    partition_count: int
    share_method: str  # SHARE_*: how run_energy_j was split off energy_j
    width: int  # sample intervals per point
    end: float
    counter_resets: int
    columns: Mapping[str, tuple[float | None, ...]] = field(hash=False)
    episodes: tuple[Episode, ...] = ()

    def column(self, name: str) -> tuple[float | None, ...]:
        return self.columns[name]

    def __len__(self) -> int:
        return len(self.columns["t"])

    @property
    def label(self) -> str:
        return f"{self.node}:{self.gpu}" if self.node else str(self.gpu)


@dataclass(frozen=True)
class RunTelemetry:
    start: float  # epoch seconds: the first sample of any GPU
    gpus: tuple[GpuSeries, ...]
    max_points: int = MAX_POINTS

    def episodes(self) -> tuple[Episode, ...]:
        """Throttle episodes of any of the run's GPUs, overlapping ones merged (for charts)."""
        spans = sorted((e.start, e.end) for g in self.gpus for e in g.episodes)
        out: list[list[float]] = []
        for s, e in spans:
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return tuple(Episode(s, e) for s, e in out)

    # -- JSON

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "start": self.start,
            "max_points": self.max_points,
            "gpus": [
                {
                    "gpu": g.gpu,
                    "node": g.node,
                    "partitions": list(g.partitions),
                    "partition_count": g.partition_count,
                    "share_method": g.share_method,
                    "width": g.width,
                    "end": g.end,
                    "counter_resets": g.counter_resets,
                    "columns": {
                        name: {"same_as": "energy_j"}
                        if name == "run_energy_j" and g.columns[name] == g.columns["energy_j"]
                        else _pack(g.columns[name])
                        for name in COLUMNS
                    },
                    "episodes": [[e.start, e.end] for e in g.episodes],
                }
                for g in self.gpus
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> RunTelemetry:
        """The record back from ``to_json``; TelemetryError (one line, naming the GPU and key) otherwise."""
        if not isinstance(data, Mapping):
            raise TelemetryError("telemetry: expected a JSON object")
        if data.get("schema") != SCHEMA:
            raise TelemetryError(f"telemetry: key 'schema': expected {SCHEMA}, got {data.get('schema')!r}")
        start = _need_number(data, "start", "telemetry")
        gpus_raw = data.get("gpus")
        if not isinstance(gpus_raw, list):
            raise TelemetryError("telemetry: key 'gpus': expected a list")
        gpus = []
        for i, g in enumerate(gpus_raw):
            where = f"telemetry: gpus[{i}]"
            if not isinstance(g, Mapping):
                raise TelemetryError(f"{where}: expected an object")
            cols_raw = g.get("columns")
            if not isinstance(cols_raw, Mapping):
                raise TelemetryError(f"{where}: key 'columns': expected an object")
            cols: dict[str, tuple[float | None, ...]] = {}
            n = len(cols_raw["t"]) if isinstance(cols_raw.get("t"), list) else None
            if n is None:
                raise TelemetryError(f"{where}: column 't' missing")
            for name in COLUMNS:
                values = cols_raw.get(name)
                if isinstance(values, Mapping) and set(values) == {"all"}:
                    values = [values["all"]] * n  # a column with one value throughout
                elif name == "run_energy_j" and values == {"same_as": "energy_j"}:
                    cols[name] = cols["energy_j"]  # the whole GPU's energy is the run's
                    continue
                if not isinstance(values, list):
                    raise TelemetryError(f"{where}: column '{name}' missing")
                if len(values) != n:
                    raise TelemetryError(f"{where}: column '{name}' has {len(values)} values, expected {n}")
                for v in values:
                    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                        raise TelemetryError(f"{where}: column '{name}': {v!r} is not a number")
                cols[name] = tuple(None if v is None else float(v) for v in values)
            if any(v is None for v in cols["t"]):
                raise TelemetryError(f"{where}: column 't' has a null")
            episodes = []
            for ep in g.get("episodes") or []:
                if not (isinstance(ep, list) and len(ep) == 2 and all(_is_num(x) for x in ep)):
                    raise TelemetryError(f"{where}: key 'episodes': {ep!r} is not [start, end]")
                episodes.append(Episode(float(ep[0]), float(ep[1])))
            parts = g.get("partitions") or []
            if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
                raise TelemetryError(f"{where}: key 'partitions': expected a list of partition ids")
            gpus.append(
                GpuSeries(
                    gpu=int(_need_number(g, "gpu", where)),
                    node=str(g.get("node") or ""),
                    partitions=tuple(parts),
                    partition_count=int(_need_number(g, "partition_count", where)),
                    share_method=str(g.get("share_method") or SHARE_WHOLE),
                    width=int(_need_number(g, "width", where)),
                    end=_need_number(g, "end", where),
                    counter_resets=int(_need_number(g, "counter_resets", where)),
                    columns=cols,
                    episodes=tuple(episodes),
                )
            )
        return cls(start=start, gpus=tuple(gpus), max_points=int(data.get("max_points") or MAX_POINTS))


def _pack(values: Sequence[float | None]) -> Any:
    """A column for JSON: ``{"all": v}`` when one value fills it (VRAM null on NVIDIA, no
    integrated seconds), integral numbers without ".0"."""
    if len(values) > 1 and all(v == values[0] for v in values):
        return {"all": _compact(values[0])}
    return [_compact(v) for v in values]


def _compact(v: float | None) -> float | int | None:
    return int(v) if v is not None and v.is_integer() and abs(v) < 2**53 else v


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _need_number(obj: Mapping[str, Any], key: str, where: str) -> float:
    v = obj.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise TelemetryError(f"{where}: key '{key}': expected a number, got {v!r}")
    return float(v)


# ---------------------------------------------------------------- building


class _Point:
    """Sums of the sample intervals of one point (merged exactly when folding)."""

    __slots__ = ("t", "dur", "n", "wsum", "wdt", "max", "sums", "resid_known")

    def __init__(self, t: float) -> None:
        self.t = t
        self.dur = 0.0
        self.n = 0  # sample intervals
        self.wsum = dict.fromkeys(MEAN_COLUMNS, 0.0)
        self.wdt = dict.fromkeys(MEAN_COLUMNS, 0.0)
        self.max: dict[str, float | None] = dict.fromkeys(MAX_COLUMNS)
        self.sums = dict.fromkeys(SUM_COLUMNS, 0.0)
        self.resid_known = False

    def _peak(self, name: str, *values: float | None) -> None:
        for v in values:
            if v is not None and (self.max[name] is None or v > self.max[name]):  # type: ignore[operator]
                self.max[name] = v

    def add(self, a: Tick, b: Tick, e: en.RunEnergy, share: float, resid_s: float | None) -> None:
        dt = b.t - a.t
        self.dur += dt
        self.n += 1
        for name, v in (
            ("util_pct", a.util_pct),
            ("power_w", a.power_w),
            ("gfx_clock_mhz", a.gfx_clock_mhz),
            ("mem_clock_mhz", a.mem_clock_mhz),
        ):
            if v is not None:
                self.wsum[name] += v * dt
                self.wdt[name] += dt
        self._peak("power_max_w", a.power_w, b.power_w)
        self._peak("temp_c", a.temp_c, b.temp_c)
        self._peak("temp_mem_c", a.temp_mem_c, b.temp_mem_c)
        self._peak("vram_used_mib", a.vram_used_mib, b.vram_used_mib)
        if e.joules is not None:
            self.sums["energy_j"] += e.joules
            self.sums["run_energy_j"] += e.joules * share
        self.sums["energy_s"] += e.duration_s
        self.sums["integrated_s"] += e.integrated_s
        if a.throttled is not None:
            self.sums["throttle_known_s"] += dt
            if a.throttled:
                self.sums["throttled_s"] += dt
        if resid_s is not None:
            self.sums["residency_s"] += resid_s
            self.resid_known = True

    def merge(self, other: _Point) -> None:
        self.dur += other.dur
        self.n += other.n
        for name in MEAN_COLUMNS:
            self.wsum[name] += other.wsum[name]
            self.wdt[name] += other.wdt[name]
        for name in MAX_COLUMNS:
            self._peak(name, other.max[name])
        for name in SUM_COLUMNS:
            self.sums[name] += other.sums[name]
        self.resid_known = self.resid_known or other.resid_known

    def values(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {"t": self.t}
        for name in MEAN_COLUMNS:
            out[name] = self.wsum[name] / self.wdt[name] if self.wdt[name] > 0 else None
        out.update(self.max)
        for name in SUM_COLUMNS:
            out[name] = self.sums[name]
        if self.sums["energy_s"] <= 0:
            out["energy_j"] = out["run_energy_j"] = None  # no energy known: not 0 J
        if not self.resid_known:
            out["residency_s"] = None
        return out


def _residency_s(a: Tick, b: Tick) -> float | None:
    """Throttle residency accrued from a to b (s); None where no counter was read at both ends or one went back."""
    if a.residency_ns is None or b.residency_ns is None:
        return None
    total, known = 0.0, False
    for key in RESIDENCY_KEYS:
        x, y = _num(a.residency_ns.get(key)), _num(b.residency_ns.get(key))
        if x is None or y is None:
            continue
        if y < x:
            return None  # the driver reloaded: the counters restarted
        total += y - x
        known = True
    return total / 1e9 if known else None


class _Series:
    def __init__(self, setup: GpuSetup, max_points: int, wrap_mj: float | None) -> None:
        self.setup = setup
        self.max_points = max_points
        self.wrap_mj = wrap_mj
        self.width = 1
        self.points: list[_Point] = []
        self.open: _Point | None = None
        self.prev: Tick | None = None
        self.first_t: float | None = None
        self.resets = 0
        self.dropped = 0
        self.methods: set[str] = set()
        self.episodes: list[list[float]] = []

    def add(self, tick: Tick) -> None:
        prev = self.prev
        if prev is not None and tick.t <= prev.t:
            self.dropped += 1  # repeated or out of order: never counted twice
            return
        if prev is None:
            self.first_t = tick.t
            self.prev = tick
            return
        energy = en.run_energy(
            [
                en.PowerSample(prev.t, prev.power_w, prev.energy_mj),
                en.PowerSample(tick.t, tick.power_w, tick.energy_mj),
            ],
            wrap_mj=self.wrap_mj,
        )
        self.resets += energy.counter_resets
        s = self.setup
        if s.whole:
            share, method = 1.0, SHARE_WHOLE
        else:
            share, method = partition_share(s.partitions, prev.partition_util, s.partition_count, s.in_use)
        self.methods.add(method)
        if self.open is None:
            self.open = _Point(prev.t)
        self.open.add(prev, tick, energy, share, _residency_s(prev, tick))
        if prev.throttled:
            self._throttled(prev.t, tick.t)
        self.prev = tick
        if self.open.n >= self.width:
            self.points.append(self.open)
            self.open = None
            if len(self.points) >= self.max_points:
                self._fold()

    def _fold(self) -> None:
        """Merge neighbours pairwise: half the points, twice the width."""
        merged = []
        for i in range(0, len(self.points) - 1, 2):
            p = self.points[i]
            p.merge(self.points[i + 1])
            merged.append(p)
        if len(self.points) % 2:
            merged.append(self.points[-1])
        self.points = merged
        self.width *= 2

    def _throttled(self, start: float, end: float) -> None:
        if self.episodes and self.episodes[-1][1] >= start:
            self.episodes[-1][1] = end
            return
        self.episodes.append([start, end])
        if len(self.episodes) > MAX_EPISODES:
            # merge across the shortest gap: a flapping cap reads as one long episode
            gaps = [self.episodes[i + 1][0] - self.episodes[i][1] for i in range(len(self.episodes) - 1)]
            i = gaps.index(min(gaps))
            self.episodes[i][1] = self.episodes[i + 1][1]
            del self.episodes[i + 1]

    def series(self, start: float) -> GpuSeries:
        points = list(self.points)
        if self.open is not None:
            points.append(self.open)
        rows = [p.values() for p in points]
        cols: dict[str, tuple[float | None, ...]] = {}
        for name in COLUMNS:
            digits = _DECIMALS[name]
            vals = []
            for r in rows:
                v = r[name]
                if v is not None and name == "t":
                    v -= start
                vals.append(None if v is None else round(v, digits))
            cols[name] = tuple(vals)
        if self.setup.whole:
            method = SHARE_WHOLE
        else:
            m = self.methods - {SHARE_WHOLE}
            method = m.pop() if len(m) == 1 else (SHARE_MIXED if m else SHARE_COUNT)
        end = (self.prev.t if self.prev is not None else start) - start
        return GpuSeries(
            gpu=self.setup.gpu,
            node=self.setup.node,
            partitions=tuple(self.setup.partitions),
            partition_count=self.setup.partition_count,
            share_method=method,
            width=self.width,
            end=round(end, 3),
            counter_resets=self.resets,
            columns=cols,
            episodes=tuple(Episode(round(s - start, 3), round(e - start, 3)) for s, e in self.episodes),
        )


class TelemetryBuilder:
    """Feed ticks as they come (per GPU in time order; a repeated or older tick is dropped);
    ``record()`` any time gives the record so far.  Memory stays bounded by ``max_points``."""

    def __init__(self, gpus: Iterable[GpuSetup], *, max_points: int = MAX_POINTS, wrap_mj: float | None = None):
        if max_points < 2 or max_points % 2:
            raise TelemetryError(f"telemetry: max_points must be an even number >= 2, got {max_points}")
        self.max_points = max_points
        self._series: dict[tuple[str, int], _Series] = {}
        for setup in gpus:
            key = (setup.node, setup.gpu)
            if key in self._series:
                raise TelemetryError(f"telemetry: gpu {setup.node + ':' if setup.node else ''}{setup.gpu} given twice")
            self._series[key] = _Series(setup, max_points, wrap_mj)
        if not self._series:
            raise TelemetryError("telemetry: no GPU given")

    def add(self, gpu: int, tick: Tick, node: str = "") -> None:
        series = self._series.get((node, gpu))
        if series is None:
            raise TelemetryError(f"telemetry: gpu {node + ':' if node else ''}{gpu} is not one of the run's GPUs")
        series.add(tick)

    @property
    def dropped(self) -> int:
        return sum(s.dropped for s in self._series.values())

    def record(self) -> RunTelemetry:
        firsts = [s.first_t for s in self._series.values() if s.first_t is not None]
        start = min(firsts) if firsts else 0.0
        return RunTelemetry(
            start=start,
            gpus=tuple(s.series(start) for s in self._series.values()),
            max_points=self.max_points,
        )


def build(
    ticks: Mapping[int, Iterable[Tick]] | Iterable[tuple[GpuSetup, Iterable[Tick]]],
    *,
    max_points: int = MAX_POINTS,
    wrap_mj: float | None = None,
) -> RunTelemetry:
    """A record from whole series: ``{gpu: ticks}`` (whole GPUs on one node) or ``[(setup, ticks)]``."""
    pairs: list[tuple[GpuSetup, Iterable[Tick]]]
    if isinstance(ticks, Mapping):
        pairs = [(GpuSetup(gpu), series) for gpu, series in ticks.items()]
    else:
        pairs = list(ticks)
    builder = TelemetryBuilder([s for s, _ in pairs], max_points=max_points, wrap_mj=wrap_mj)
    for setup, series in pairs:
        for tick in sorted(series, key=lambda k: k.t):
            builder.add(setup.gpu, tick, setup.node)
    return builder.record()


# ---------------------------------------------------------------- the run's figures


@dataclass(frozen=True)
class GpuEnergy:
    """One physical GPU of the run: what was measured and what the run is charged."""

    gpu: int
    node: str
    partitions: tuple[int, ...]
    partition_count: int
    share_method: str
    measured_j: float | None  # the physical GPU's energy over the covered seconds
    run_j: float | None  # the part charged to the run
    share: float | None  # run_j / measured_j
    energy_s: float
    integrated_s: float
    avg_power_w: float | None  # the physical GPU's
    peak_power_w: float | None
    throttled_pct: float | None
    residency_pct: float | None


@dataclass(frozen=True)
class RunEnergySummary:
    energy_j: float | None  # the run's energy, all its GPUs, after partition shares
    source: str  # energy.SOURCE_*
    integrated_s: float  # GPU-seconds whose energy is integrated power
    gap_s: float  # GPU-seconds with no energy at all
    duration_s: float  # the longest GPU span
    avg_power_w: float | None  # the run's draw: sum over its GPUs of run_j / seconds covered
    peak_gpu_power_w: float | None  # the highest reading of any one of its GPUs
    output_tokens: float | None
    tokens_per_joule: float | None
    throttled_pct: float | None  # of the GPU-seconds whose state was known, 0-100
    residency_pct: float | None  # from the residency counters, 0-100
    counter_resets: int
    gpus: tuple[GpuEnergy, ...]

    def as_fields(self) -> dict[str, Any]:
        """The keys a run's --json output and stored record carry (issue P)."""
        return {
            "energy_j": self.energy_j,
            "energy_source": self.source,
            "avg_power_w": self.avg_power_w,
            "peak_power_w": self.peak_gpu_power_w,
            "tokens_per_joule": self.tokens_per_joule,
            "throttled_pct": self.throttled_pct,
        }


def _sum(values: Iterable[float | None]) -> float:
    return sum(v for v in values if v is not None)


def _gpu_energy(g: GpuSeries) -> GpuEnergy:
    c = g.columns
    energy_s = _sum(c["energy_s"])
    integrated_s = _sum(c["integrated_s"])
    known = [v for v in c["energy_j"] if v is not None]
    measured = sum(known) if known else None
    run_j = _sum(c["run_energy_j"]) if known else None
    peaks = [v for v in c["power_max_w"] if v is not None]
    throttle_known = _sum(c["throttle_known_s"])
    throttled = _sum(c["throttled_s"])
    spans = _durations(g)
    resid_s = resid_dt = 0.0
    for r, d in zip(c["residency_s"], spans):
        if r is not None:
            resid_s += r
            resid_dt += d
    return GpuEnergy(
        gpu=g.gpu,
        node=g.node,
        partitions=g.partitions,
        partition_count=g.partition_count,
        share_method=g.share_method,
        measured_j=measured,
        run_j=run_j,
        share=(run_j / measured) if measured and run_j is not None else (1.0 if measured == 0 else None),
        energy_s=energy_s,
        integrated_s=integrated_s,
        avg_power_w=measured / energy_s if measured is not None and energy_s > 0 else None,
        peak_power_w=max(peaks) if peaks else None,
        throttled_pct=100.0 * throttled / throttle_known if throttle_known > 0 else None,
        residency_pct=100.0 * min(1.0, resid_s / resid_dt) if resid_dt > 0 else None,
    )


def _durations(g: GpuSeries) -> list[float]:
    t = [float(v) for v in g.columns["t"] if v is not None]
    return [b - a for a, b in zip(t, [*t[1:], g.end])]


def summarize(record: RunTelemetry, output_tokens: float | None = None) -> RunEnergySummary:
    """The run's energy, power, tokens per joule and throttling from its record."""
    gpus = tuple(_gpu_energy(g) for g in record.gpus)
    run_js = [g.run_j for g in gpus if g.run_j is not None]
    energy = sum(run_js) if run_js else None
    integrated = sum(g.integrated_s for g in gpus)
    covered = sum(g.energy_s for g in gpus)
    if not covered:
        source = en.SOURCE_NONE
    elif integrated <= 0:
        source = en.SOURCE_COUNTER
    elif integrated >= covered - 1e-6:
        source = en.SOURCE_INTEGRATED
    else:
        source = en.SOURCE_MIXED
    spans = [sum(_durations(g)) for g in record.gpus]
    draws = [g.run_j / g.energy_s for g in gpus if g.run_j is not None and g.energy_s > 0]
    peaks = [g.peak_power_w for g in gpus if g.peak_power_w is not None]
    known = sum(_sum(g.columns["throttle_known_s"]) for g in record.gpus)
    throttled = sum(_sum(g.columns["throttled_s"]) for g in record.gpus)
    resid = [(g.residency_pct, span) for g, span in zip(gpus, spans) if g.residency_pct is not None]
    resid_w = sum(s for _, s in resid)
    return RunEnergySummary(
        energy_j=energy,
        source=source,
        integrated_s=integrated,
        gap_s=max(0.0, sum(spans) - covered),
        duration_s=max(spans) if spans else 0.0,
        avg_power_w=sum(draws) if draws else None,
        peak_gpu_power_w=max(peaks) if peaks else None,
        output_tokens=output_tokens,
        tokens_per_joule=en.per_joule(output_tokens, energy),
        throttled_pct=100.0 * throttled / known if known > 0 else None,
        residency_pct=sum(p * s for p, s in resid) / resid_w if resid_w > 0 else None,
        counter_resets=sum(g.counter_resets for g in record.gpus),
        gpus=gpus,
    )


def summary_to_json(summary: RunEnergySummary) -> dict[str, Any]:
    """What a stored run keeps as ``energy``: the headline keys, where they came from, and per
    physical GPU what was measured and what the run was charged (docs/energy.md)."""

    def r(v: float | None, digits: int = 3) -> float | None:
        return None if v is None else round(v, digits)

    return {
        **{k: (float(f"{v:.6g}") if isinstance(v, float) else v) for k, v in summary.as_fields().items()},
        "output_tokens": summary.output_tokens,
        "duration_s": r(summary.duration_s),
        "integrated_s": r(summary.integrated_s),
        "gap_s": r(summary.gap_s),
        "residency_pct": r(summary.residency_pct),
        "counter_resets": summary.counter_resets,
        "gpus": [
            {
                "gpu": g.gpu,
                "node": g.node,
                "partitions": list(g.partitions),
                "partition_count": g.partition_count,
                "share_method": g.share_method,
                "measured_j": r(g.measured_j),
                "run_j": r(g.run_j),
                "share": r(g.share, 4),
                "energy_s": r(g.energy_s),
                "integrated_s": r(g.integrated_s),
                "avg_power_w": r(g.avg_power_w),
                "peak_power_w": r(g.peak_power_w),
                "throttled_pct": r(g.throttled_pct),
                "residency_pct": r(g.residency_pct),
            }
            for g in summary.gpus
        ],
    }
