"""Is the GPU well?  One vendor-neutral health reading per physical GPU, and the rules
that turn a reading and its recent history into ok / warn / fail with the reasons in
one line.

The rules live here and only here (docs/health.md).  Defaults:

- fail: an uncorrectable ECC error (since the driver loaded), a bad page pending
  retirement, a bad page that could not be reserved (NVIDIA: a row remap failure);
- warn: a correctable ECC count that grew within ``ecc_window``, throttling for
  more than ``throttle_share`` of the last ``throttle_window`` seconds, a PCIe link
  trained below its maximum, an XGMI / NVLink link down, a GPU reset or XID within
  ``fault_window``, deferred ECC errors.

Each rule's severity can be changed (or the rule turned off) in the profile's
``[health.severity]`` table; the numbers in ``[health]`` (console/core/health_profile.py).

Readings come from the agent, through console/core/health_readings.py (``from_nvml``,
``from_amdsmi``: the vendors' records mapped to the neutral reading).  Rates and shares
are computed here from the counters, never on the node.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FAIL",
    "OK",
    "RULES",
    "STATES",
    "UNKNOWN",
    "WARN",
    "EccBlock",
    "Finding",
    "GpuFault",
    "HealthReading",
    "HealthRules",
    "HealthTracker",
    "HealthVerdict",
    "LinkHealth",
    "carried",
    "evaluate",
    "interval_throttle",
    "state_rank",
    "throttle_share",
]

OK, WARN, FAIL, UNKNOWN = "ok", "warn", "fail", "unknown"
STATES = (OK, WARN, FAIL)
OFF = "off"
_RANK = {UNKNOWN: -1, OK: 0, WARN: 1, FAIL: 2}

# Rule names (the keys of [health.severity]) and their default severities.
RULES: dict[str, str] = {
    "ecc_uncorrectable": FAIL,
    "pages_pending": FAIL,
    "pages_unreservable": FAIL,
    "ecc_correctable": WARN,
    "ecc_deferred": WARN,
    "throttle": WARN,
    "pcie_degraded": WARN,
    "link_down": WARN,
    "fault": WARN,
}

# Neutral throttle reasons -> the words a user reads.  NVML and amdsmi names map onto
# these (below); a reason either vendor adds later shows under its own name.
THROTTLE_LABELS = {
    "power": "power cap",
    "thermal": "thermal",
    "sw_thermal": "SW thermal",
    "hw_thermal": "HW thermal",
    "hw_slowdown": "HW slowdown",
    "power_brake": "power brake",
    "board_limit": "board limit",
    "reliability": "reliability",
    "prochot": "PROCHOT",
    "socket_thermal": "socket thermal",
    "vr_thermal": "VR thermal",
    "hbm_thermal": "HBM thermal",
}

FAULT_LABELS = {"reset": "GPU reset", "xid": "XID", "vm_fault": "VM fault", "ring_hang": "ring hang"}


def state_rank(state: str | None) -> int:
    """ok < warn < fail; unknown (or None) below ok."""
    return _RANK.get(state or UNKNOWN, -1)


# ---------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class LinkHealth:
    """One XGMI or NVLink link: up (None = unknown), and its error counters summed."""

    link: int
    up: bool | None
    errors: int | None = None


@dataclass(frozen=True, slots=True)
class EccBlock:
    """ECC counts of one block (AMD: UMC, GFX, ...) or memory location (NVIDIA: dram, sram, ...).

    Shown in a GPU's detail; the rules read the totals."""

    block: str
    correctable: int | None = None
    uncorrectable: int | None = None
    deferred: int | None = None


@dataclass(frozen=True, slots=True)
class GpuFault:
    """A reset, XID or fault event the driver reported since the previous reading."""

    kind: str  # reset | xid | vm_fault | ring_hang
    t: float
    code: int | None = None  # the XID number
    message: str = ""

    def describe(self) -> str:
        label = FAULT_LABELS.get(self.kind, self.kind)
        return f"{label} {self.code}" if self.code is not None else label


@dataclass(frozen=True, slots=True)
class HealthReading:
    """One physical GPU's health at one instant.  None = the device cannot say (never 0)."""

    t: float  # unix seconds
    gpu: int  # physical GPU index on the node
    vendor: str = ""  # amd | nvidia
    # ECC counts since the driver loaded (NVML volatile; amdsmi total)
    ecc_correctable: int | None = None
    ecc_uncorrectable: int | None = None
    ecc_deferred: int | None = None  # AMD: uncorrectable errors deferred to consumption
    # per block (AMD, since the driver loaded) or memory location (NVIDIA: aggregate, the GPU's life)
    ecc_blocks: tuple[EccBlock, ...] | None = None
    # bad pages: retired (reserved / remapped rows), pending retirement, unreservable
    pages_retired: int | None = None
    pages_pending: int | None = None
    pages_unreservable: int | None = None
    # throttling: the current reasons (neutral names, () = none) and whether the GPU says it is idle
    throttle_reasons: tuple[str, ...] | None = None
    idle: bool | None = None
    # accumulated throttle residency per neutral reason, in units of residency_clock;
    # residency_clock None means the counts are seconds and the wall clock is the base
    residency: tuple[tuple[str, float], ...] | None = None
    residency_clock: float | None = None
    # PCIe link now and at most (generation, lanes), and its error counters
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    pcie_replay: int | None = None
    pcie_recovery: int | None = None
    # XGMI / NVLink
    link_kind: str | None = None  # xgmi | nvlink
    links: tuple[LinkHealth, ...] | None = None
    faults: tuple[GpuFault, ...] = ()
    energy_j: float | None = None
    # firmware (block, version), static: the agent sends it on a GPU's first reading only, so a
    # tracker carries the last one it saw forward (HealthTracker.add); None = not sent
    firmware: tuple[tuple[str, str], ...] | None = None
    # AMD CPER records logged since the previous read, (severity, notify type) each: () = read,
    # none new; None = not read this time (the agent reads them every few readings) or no such call
    cper_records: tuple[tuple[str, str], ...] | None = None
    # The agent said the GPU was read at t and nothing changed (its health line's ``same``): the
    # values are those of the full reading taken at this time (its counters, their clock too)
    carried_from: float | None = None

    def residency_of(self, reason: str) -> float | None:
        for name, value in self.residency or ():
            if name == reason:
                return value
        return None


@dataclass(frozen=True, slots=True)
class HealthRules:
    """The numbers behind the rules; the profile's [health] table sets them."""

    interval: float = 10.0  # seconds between the agent's health readings
    throttle_window: float = 60.0  # seconds: "the last minute"
    throttle_share: float = 0.25  # warn above this share of the window spent throttled
    ecc_window: float = 3600.0  # seconds over which correctable ECC growth is counted
    ecc_correctable: int = 1  # growth within ecc_window that warns
    fault_window: float = 86400.0  # a reset or XID keeps its severity this long
    pcie_gen: bool = True  # also check the PCIe generation (false: the width only)
    severity: tuple[tuple[str, str], ...] = ()  # overrides of RULES: (rule, ok|warn|fail|off)

    def severity_of(self, rule: str) -> str:
        for name, value in self.severity:
            if name == rule:
                return value
        return RULES[rule]

    @property
    def history_s(self) -> float:
        """How far back a tracker must keep readings."""
        return max(self.throttle_window, self.ecc_window)


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: str  # warn | fail
    text: str


@dataclass(frozen=True, slots=True)
class HealthVerdict:
    state: str  # ok | warn | fail | unknown
    findings: tuple[Finding, ...] = ()
    t: float | None = None
    throttle_share: float | None = None  # 0..1 over the window, None when unknown
    throttle_reason: str | None = None  # neutral name of the main reason

    @property
    def reasons(self) -> str:
        """The findings in one line, the worst first ('' when ok)."""
        return "; ".join(f.text for f in self.findings)

    def line(self) -> str:
        return f"{self.state}: {self.reasons}" if self.findings else self.state


# ---------------------------------------------------------------- rules


def _fmt_span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def interval_throttle(prev: HealthReading | None, cur: HealthReading) -> tuple[float, str | None] | None:
    """Share (0..1) of the interval prev..cur spent throttled and its main reason.

    From the residency counters where both readings have them (exact), else from the
    current reasons (the state at cur held over the interval).  None when unknown."""
    if prev is not None:
        counted = _residency_share(prev, cur)
        if counted is not None:
            return counted
    if cur.throttle_reasons is None:
        return None
    if cur.throttle_reasons:
        return 1.0, cur.throttle_reasons[0]
    return 0.0, None


def _residency_share(a: HealthReading, b: HealthReading) -> tuple[float, str | None] | None:
    if a.residency is None or b.residency is None:
        return None
    if b.carried_from is not None and b.residency == a.residency:
        return 0.0, None  # the agent compared the counters: none moved since a
    if b.residency_clock is not None and a.residency_clock is not None:
        base = b.residency_clock - a.residency_clock
    elif b.residency_clock is None and a.residency_clock is None:
        base = b.t - a.t
    else:
        return None
    if base <= 0:
        return None
    # a carries the counters (and their clock) of the reading at a.carried_from, unchanged up to
    # a.t: what grew over the clock's span grew within a.t..b.t (the clock runs with the wall's)
    stretch = 1.0
    if a.carried_from is not None and a.residency_clock is not None and b.t > a.t:
        stretch = max(1.0, (b.t - a.carried_from) / (b.t - a.t))
    best, reason = 0.0, None
    for name, value in b.residency:
        before = a.residency_of(name)
        if before is None:
            continue
        delta = value - before
        if delta < 0:
            return None  # the counters were reset (driver reload): not a share
        # Reasons overlap (power and thermal at once), so the largest one is the share.
        share = min(1.0, delta / base * stretch)
        if share > best:
            best, reason = share, name
    return best, reason


def throttle_share(history: Sequence[HealthReading], window: float) -> tuple[float, str | None] | None:
    """Share (0..1) of the last ``window`` seconds before the newest reading spent throttled.

    Time the history does not cover counts as not throttled, so a GPU that has been
    watched for 20 s, all of them throttled, is a third of the last minute."""
    if not history:
        return None
    end = history[-1].t
    start = end - window
    throttled = known = 0.0
    by_reason: dict[str, float] = {}
    # Only the intervals that end inside the window: found from the newest end (a throttling
    # GPU's history spans the ECC window, an hour of readings; the throttle window a minute).
    first = len(history) - 1
    while first > 0 and history[first - 1].t > start:
        first -= 1
    readings = [history[i] for i in range(max(0, first - 1), len(history))]
    for prev, cur in zip(readings, readings[1:]):
        if cur.t <= start or cur.t <= prev.t:
            continue
        part = interval_throttle(prev, cur)
        if part is None:
            continue
        share, reason = part
        span = cur.t - max(prev.t, start)
        # Within an interval the window covers in part, the throttled time is taken as spread evenly.
        seconds = share * span
        known += span
        throttled += seconds
        if reason is not None and seconds > 0:
            by_reason[reason] = by_reason.get(reason, 0.0) + seconds
    if known <= 0:
        if history[-1].throttle_reasons is None:
            return None
        return 0.0, None
    main = max(by_reason, key=lambda r: by_reason[r]) if by_reason else None
    return min(1.0, throttled / window), main


def _ecc_growth(history: Sequence[HealthReading], attr: str, window: float) -> int | None:
    """Sum of the increments of a counter within the window (a counter reset restarts it)."""
    if not history:
        return None
    start = history[-1].t - window
    growth, last, seen = 0, None, False
    for reading in history:
        value = getattr(reading, attr)
        if value is None:
            continue
        if last is not None and reading.t > start and value > last:
            growth += value - last
        last, seen = value, True
    return growth if seen else None


def _fmt_link(gen: int | None, width: int | None) -> str:
    parts = []
    if gen is not None:
        parts.append(f"gen {gen}")
    if width is not None:
        parts.append(f"x{width}")
    return " ".join(parts)


def _clock(t: float) -> str:
    return time.strftime("%H:%M", time.localtime(t))


def evaluate(
    history: Sequence[HealthReading],
    rules: HealthRules = HealthRules(),
    faults: Iterable[GpuFault] = (),
) -> HealthVerdict:
    """The verdict on the newest reading of ``history`` (oldest first, one GPU).

    ``faults``: resets and XIDs seen within ``rules.fault_window`` (a tracker keeps
    them longer than the readings); the newest reading's own faults count too."""
    if not history:
        return HealthVerdict(UNKNOWN)
    cur = history[-1]
    found: list[Finding] = []

    def add(rule: str, text: str) -> None:
        severity = rules.severity_of(rule)
        if severity in (WARN, FAIL):
            found.append(Finding(rule, severity, text))

    if cur.ecc_uncorrectable:
        add("ecc_uncorrectable", _plural(cur.ecc_uncorrectable, "uncorrectable ECC error"))
    if cur.pages_pending:
        add("pages_pending", f"{_plural(cur.pages_pending, 'bad page')} pending retirement")
    if cur.pages_unreservable:
        add("pages_unreservable", f"{_plural(cur.pages_unreservable, 'bad page')} unreservable")
    if cur.ecc_deferred:
        add("ecc_deferred", _plural(cur.ecc_deferred, "deferred ECC error"))
    growth = _ecc_growth(history, "ecc_correctable", rules.ecc_window)
    if growth and growth >= rules.ecc_correctable:
        add("ecc_correctable", f"correctable ECC +{growth} in last {_fmt_span(rules.ecc_window)}")
    share = throttle_share(history, rules.throttle_window)
    if share is not None and share[0] > rules.throttle_share:
        label = THROTTLE_LABELS.get(share[1] or "", share[1] or "unknown reason")
        add("throttle", f"throttled ({label}) {share[0] * 100:.0f}% of last {rules.throttle_window:g} s")
    pcie = _pcie_finding(cur, rules)
    if pcie:
        add("pcie_degraded", pcie)
    down = [link.link for link in cur.links or () if link.up is False]
    if down:
        kind = {"xgmi": "XGMI", "nvlink": "NVLink"}.get(cur.link_kind or "", "link")
        add("link_down", f"{kind} link{'s' if len(down) > 1 else ''} {', '.join(map(str, down))} down")
    recent = sorted(
        {(f.t, f.kind, f.code): f for f in (*faults, *cur.faults) if cur.t - f.t <= rules.fault_window}.values(),
        key=lambda f: f.t,
    )
    if recent:
        last = recent[-1]
        more = f" ({len(recent)} in last {_fmt_span(rules.fault_window)})" if len(recent) > 1 else ""
        add("fault", f"{last.describe()} at {_clock(last.t)}{more}")
    found.sort(key=lambda f: -_RANK[f.severity])
    state = found[0].severity if found else OK
    return HealthVerdict(
        state,
        tuple(found),
        cur.t,
        share[0] if share else None,
        share[1] if share else None,
    )


def _pcie_finding(cur: HealthReading, rules: HealthRules) -> str | None:
    narrow = cur.pcie_width is not None and cur.pcie_width_max is not None and cur.pcie_width < cur.pcie_width_max
    # A link slows down when the GPU idles (PCIe power management): judge the
    # generation only while the GPU does not say it is idle.
    slow = (
        rules.pcie_gen
        and cur.idle is not True
        and cur.pcie_gen is not None
        and cur.pcie_gen_max is not None
        and cur.pcie_gen < cur.pcie_gen_max
    )
    if not (narrow or slow):
        return None
    now = _fmt_link(cur.pcie_gen, cur.pcie_width)
    most = _fmt_link(cur.pcie_gen_max, cur.pcie_width_max)
    return f"PCIe {now} (max {most})"


class HealthTracker:
    """One GPU's recent readings, bounded by age and count, and its verdict on each new one."""

    def __init__(self, rules: HealthRules = HealthRules(), *, max_readings: int = 4096, max_faults: int = 64):
        self.rules = rules
        self._readings: deque[HealthReading] = deque(maxlen=max_readings)
        self._faults: deque[GpuFault] = deque(maxlen=max_faults)
        self.verdict = HealthVerdict(UNKNOWN)
        self._in_run = False  # readings[-1] and readings[-2] share their values (_same_values)

    @property
    def readings(self) -> tuple[HealthReading, ...]:
        return tuple(self._readings)

    @property
    def last(self) -> HealthReading | None:
        return self._readings[-1] if self._readings else None

    def add(self, reading: HealthReading) -> HealthVerdict:
        readings = self._readings
        if readings and reading.t < readings[-1].t:
            return self.verdict  # out of order (a replayed line): the history only moves forward
        if reading.firmware is None and readings and readings[-1].firmware is not None:
            reading = _with(reading, firmware=readings[-1].firmware)
        same = bool(readings) and _same_values(reading, readings[-1])
        if same and len(readings) >= 2 and _same_values(readings[-1], readings[-2]):
            # The middle of a run of equal readings says nothing its two ends do not (no rule, no
            # chart): the run is kept as its first and newest readings, so a healthy GPU read
            # every 10 s for an hour is a few readings, not 360. The newest shares the run's values.
            middle = readings.pop()
            reading = _rebased(middle, reading)
        readings.append(reading)
        # readings[-1] and [-2] share their values: the next carried reading may take its fast path
        self._in_run = same
        self._faults.extend(reading.faults)
        horizon = reading.t - self.rules.history_s
        # Keep one reading at or before the horizon: the base of the window's first interval.
        while len(self._readings) > 2 and self._readings[1].t <= horizon:
            self._readings.popleft()
        if not same:
            self._thin(reading.t - self.rules.throttle_window)
        while self._faults and reading.t - self._faults[0].t > self.rules.fault_window:
            self._faults.popleft()
        v = self.verdict
        if (
            same
            and reading.carried_from is not None
            and v.state == OK
            and not v.findings
            and v.throttle_share == 0.0
            and (reading.residency is not None or reading.throttle_reasons == ())
        ):
            # A well GPU read again unchanged (most readings of a fleet): no rule can move, its
            # new interval counts as not throttled, the windows only let old news go.
            self.verdict = HealthVerdict(OK, (), reading.t, 0.0, None)
        else:
            self.verdict = evaluate(self._readings, self.rules, self._faults)
        return self.verdict

    def _thin(self, start: float) -> None:
        """Drop the middle of a throttling stretch once it left the throttle window (``start``):
        a GPU at its power cap differs at every reading (its residency counters), so an hour of
        them (the ECC window) is 360 readings. Past the window no rule reads the counters; a
        reading is kept where anything else moved (ECC, pages, PCIe, links, firmware), where it
        carries news, where a run of equal readings begins and where the counters stopped."""
        readings = self._readings
        base = len(readings) - 1  # the newest reading at or before start: the window's base
        while base > 0 and readings[base].t > start:
            base -= 1
        for i in range(base - 1, max(0, base - 4), -1):
            x, before, after = readings[i], readings[i - 1], readings[i + 1]
            if (
                _calm_equal(before, x)
                and _calm_equal(x, after)
                and not _same_values(x, after)
                and not (x.residency != before.residency and x.residency == after.residency)
            ):
                del readings[i]  # (kept: where the counters stopped, the "since" of the detail's rows)

    def steady(self) -> bool:
        """carry() takes its fast path: a well GPU in a run of equal readings (so carrying it to
        t1 and then t2 leaves it as carrying it to t2 alone)."""
        readings = self._readings
        if not self._in_run or not readings:
            return False
        last = readings[-1]
        v = self.verdict
        return not (
            last.faults
            or last.cper_records is not None
            or v.state != OK
            or v.findings
            or v.throttle_share != 0.0
            or (last.residency is None and last.throttle_reasons != ())
        )

    def carry(self, t: float) -> HealthReading | None:
        """add(carried(self.last, t)) where that provably moves nothing but the run's newest
        reading and the verdict's time (a well GPU said unchanged, in a run of equal readings:
        most readings of a fleet); returns the reading added, None where add() must judge."""
        readings = self._readings
        if not self.steady() or t < readings[-1].t:
            return None
        last = readings[-1]
        # add() would pop the run's middle and append this one as is (_rebased: carried, no CPER)
        reading = _carry(last, t, last.carried_from if last.carried_from is not None else last.t)
        readings[-1] = reading
        horizon = t - self.rules.history_s
        while len(readings) > 2 and readings[1].t <= horizon:
            readings.popleft()
        faults = self._faults
        while faults and t - faults[0].t > self.rules.fault_window:
            faults.popleft()
        self.verdict = HealthVerdict(OK, (), t, 0.0, None)
        return reading


def carried(reading: HealthReading, t: float) -> HealthReading:
    """A GPU's last reading carried forward to ``t``: the agent read the GPU then and said
    nothing changed (its health line's ``same``).  The news it brought (faults, CPER records)
    is not brought again; its counters keep the clock of the full reading they come from."""
    start = reading.carried_from if reading.carried_from is not None else reading.t
    return _carry(reading, t, start)


_FIELDS = tuple(f.name for f in dataclasses.fields(HealthReading))
_set = object.__setattr__
# carried() runs for most GPUs of every health line (~800 a second at 1,024 nodes): plain
# attribute reads and sets, unrolled, are ~2x cheaper than _with's getattr per field.
_CARRIED = {"t": "t", "faults": "()", "cper_records": "None", "carried_from": "start"}
_carry_ns: dict[str, Any] = {"_new": object.__new__, "HealthReading": HealthReading, "_set": _set}
exec(  # noqa: S102 - built from the dataclass's own field names, nothing from outside
    "def _carry(r, t, start):\n    new = _new(HealthReading)\n"
    + "".join(f"    _set(new, {name!r}, {_CARRIED.get(name, 'r.' + name)})\n" for name in _FIELDS)
    + "    return new\n",
    _carry_ns,
)
_carry: Any = _carry_ns["_carry"]


def _with(reading: HealthReading, **changes: Any) -> HealthReading:
    """dataclasses.replace for the readings of every GPU's every health line: a third of its
    cost (the dataclass has no __post_init__ to skip)."""
    new = object.__new__(HealthReading)
    for name in _FIELDS:
        _set(new, name, changes[name] if name in changes else getattr(reading, name))
    return new


def _fields_but(*left_out: str) -> operator.attrgetter:
    return operator.attrgetter(*(f.name for f in dataclasses.fields(HealthReading) if f.name not in left_out))


# what two readings of a run of equal ones share (all but the time, the residency counters'
# clock, carried_from, the news: faults and CPER records are compared apart)
_SHARED_BUT = ("t", "residency_clock", "carried_from", "faults", "cper_records")
_VALUES = _fields_but(*_SHARED_BUT)
# what a thinned reading shares with its neighbours: that, less the throttle counters and
# reasons, the idle flag and the energy counter
_CALM = _fields_but(*_SHARED_BUT, "residency", "throttle_reasons", "idle", "energy_j")


def _calm_equal(a: HealthReading, b: HealthReading) -> bool:
    return not (a.faults or b.faults or a.cper_records or b.cper_records) and _CALM(a) == _CALM(b)


def _same_values(a: HealthReading, b: HealthReading) -> bool:
    return not (a.faults or b.faults or a.cper_records or b.cper_records) and _VALUES(a) == _VALUES(b)


def _rebased(old: HealthReading, new: HealthReading) -> HealthReading:
    """``new`` (equal values) on ``old``'s objects: one copy of a GPU's values in its history.
    A CPER read that found nothing stays said (the detail's CPER row)."""
    cper = () if old.cper_records is not None or new.cper_records is not None else None
    if new.carried_from is not None and new.cper_records is cper:
        return new  # carried: its values are the run's objects already
    return _with(old, t=new.t, residency_clock=new.residency_clock, carried_from=new.carried_from, cper_records=cper)
