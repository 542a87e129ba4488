"""The GPU detail's health section: every counter of a GPU's health readings with its
rate and since when, as rows of text.  Pure (no Textual), tested without the UI.

Rates come from the tracker's bounded history (oldest first): a counter's growth per
hour over the history's span, a throttle residency's share of its span, energy as the
average power.  "Since" is how long the value has been what it is now: the age of the
first reading of the newest run of equal values ("≥ 2h" when the whole history holds it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from console.core.health import FAIL, THROTTLE_LABELS, WARN, HealthReading
from console.core.model import GpuHealth
from console.ui.model.format import age
from console.ui.model.health_view import GLYPHS

__all__ = ["HealthRow", "health_rows", "health_title"]


@dataclass(frozen=True, slots=True)
class HealthRow:
    label: str
    value: str
    rate: str = ""
    since: str = ""
    level: str = ""  # "" | warn | fail: how the row is drawn


def health_title(health: GpuHealth | None, now: float) -> str:
    """'Health ▲ warn for 4m10s: throttled (power cap) 40% of last 60 s'."""
    if health is None:
        return "Health: no reading yet (the agent reads each GPU every [health] interval)"
    verdict = health.verdict
    text = f"Health {GLYPHS.get(verdict.state, '?')} {verdict.state}"
    if health.since is not None:
        text += f" for {age(now - health.since)}"
    if verdict.reasons:
        text += f": {verdict.reasons}"
    return text


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _per_hour(points: list[tuple[float, float]]) -> str:
    if len(points) < 2:
        return ""
    (t0, v0), (t1, v1) = points[0], points[-1]
    if t1 - t0 < 1:
        return ""
    if v1 < v0:
        return "reset"  # a driver reload restarted the counter
    rate = (v1 - v0) / (t1 - t0) * 3600
    return "0/h" if rate == 0 else f"+{rate:,.1f}/h" if rate < 100 else f"+{rate:,.0f}/h"


def _since(points: Sequence[tuple[float, object]], now: float) -> str:
    if not points:
        return ""
    current = points[-1][1]
    start = len(points) - 1
    while start > 0 and points[start - 1][1] == current:
        start -= 1
    when = age(now - points[start][0])
    return f"≥ {when}" if start == 0 else when


Getter = Callable[[HealthReading], "float | None"]


def _series(history: Sequence[HealthReading], get: Getter) -> list[tuple[float, float]]:
    out = []
    for reading in history:
        value = get(reading)
        if value is not None:
            out.append((reading.t, float(value)))
    return out


def _counter(
    label: str, history: Sequence[HealthReading], get: Getter, now: float, bad: str = "", growing: bool = False
) -> HealthRow:
    """A counter row: value now, growth per hour, since; drawn at `bad` when above zero
    (`growing`: only when it grew within the history, as the correctable-ECC rule)."""
    points = _series(history, get)
    if not points:
        return HealthRow(label, "N/A")
    value = points[-1][1]
    hit = value > points[0][1] if growing else value > 0
    since = "" if value == 0 and points[0][1] == 0 else _since(points, now)  # a clean zero needs no age
    return HealthRow(label, _num(value), _per_hour(points), since, bad if hit else "")


def health_rows(health: GpuHealth | None, history: Sequence[HealthReading], now: float) -> list[HealthRow]:
    """Every counter the GPU's readings carry, worst-looking first within each group."""
    if not history and health is not None and health.reading is not None:
        history = (health.reading,)
    if not history:
        return []
    cur = history[-1]
    rows = [
        _counter("ECC uncorrectable", history, lambda r: r.ecc_uncorrectable, now, FAIL),
        _counter("ECC correctable", history, lambda r: r.ecc_correctable, now, WARN, growing=True),
        _counter("ECC deferred", history, lambda r: r.ecc_deferred, now, WARN),
    ]
    rows += _ecc_block_rows(cur)
    rows += [
        _counter("Pages retired", history, lambda r: r.pages_retired, now),
        _counter("Pages pending", history, lambda r: r.pages_pending, now, FAIL),
        _counter("Pages unreservable", history, lambda r: r.pages_unreservable, now, FAIL),
    ]
    rows.append(_throttle_row(health, history, now))
    rows += _residency_rows(history, now)
    rows += _pcie_rows(history, now)
    rows += _link_rows(history, now)
    rows.append(_fault_row(history, now))
    cper = _cper_row(history, now)
    if cper is not None:
        rows.append(cper)
    rows.append(_energy_row(history, now))
    firmware = getattr(cur, "firmware", None)  # static: the last one the agent sent
    if firmware:
        rows.append(HealthRow("Firmware", " · ".join(f"{name} {version}" for name, version in firmware)))
    return rows


def _ecc_block_rows(cur: HealthReading) -> list[HealthRow]:
    rows = []
    for block in cur.ecc_blocks or ():
        parts = [
            f"{word} {value}"
            for word, value in (("ce", block.correctable), ("ue", block.uncorrectable), ("de", block.deferred))
            if value is not None
        ]
        level = FAIL if block.uncorrectable else WARN if block.deferred else ""  # correctable: judged by growth
        rows.append(HealthRow(f"  ECC {block.block}", " ".join(parts) or "N/A", level=level))
    return rows


def _throttle_row(health: GpuHealth | None, history: Sequence[HealthReading], now: float) -> HealthRow:
    cur = history[-1]
    reasons = cur.throttle_reasons
    if reasons is None:
        value = "N/A"
    elif reasons:
        value = ", ".join(THROTTLE_LABELS.get(r, r) for r in reasons)
    else:
        value = "idle" if cur.idle else "none"
    verdict = health.verdict if health is not None else None
    rate = ""
    level = ""
    if verdict is not None and verdict.throttle_share is not None:
        rate = f"{verdict.throttle_share * 100:.0f}% of 1 min"
        if any(f.rule == "throttle" for f in verdict.findings):
            level = WARN
    # since: how long the current reasons have held
    points = [(r.t, r.throttle_reasons) for r in history if r.throttle_reasons is not None]
    return HealthRow("Throttle now", value, rate, _since(points, now), level)


def _residency_rows(history: Sequence[HealthReading], now: float) -> list[HealthRow]:
    cur = history[-1]
    first = history[0]
    rows = []
    for name, value in cur.residency or ():
        before = first.residency_of(name) if first is not cur else None
        rate = ""
        if before is not None and value >= before:
            if cur.residency_clock is not None and first.residency_clock is not None:
                base = cur.residency_clock - first.residency_clock
            else:
                base = cur.t - first.t
            if base > 0:
                rate = f"{min(1.0, (value - before) / base) * 100:.0f}% of {age(cur.t - first.t)}"
        label = THROTTLE_LABELS.get(name, name)
        points = [(r.t, r.residency_of(name)) for r in history if r.residency_of(name) is not None]
        rows.append(HealthRow(f"  {label} time", _num(value), rate, _since(points, now)))
    return rows


def _link_text(gen: int | None, width: int | None) -> str:
    parts = [f"gen {gen}" if gen is not None else "gen ?", f"x{width}" if width is not None else "x?"]
    return " ".join(parts)


def _pcie_rows(history: Sequence[HealthReading], now: float) -> list[HealthRow]:
    cur = history[-1]
    if cur.pcie_gen is None and cur.pcie_width is None:
        link = HealthRow("PCIe link", "N/A")
    else:
        narrow = cur.pcie_width is not None and cur.pcie_width_max is not None and cur.pcie_width < cur.pcie_width_max
        slow = cur.pcie_gen is not None and cur.pcie_gen_max is not None and cur.pcie_gen < cur.pcie_gen_max
        value = _link_text(cur.pcie_gen, cur.pcie_width)
        note = f"max {_link_text(cur.pcie_gen_max, cur.pcie_width_max)}"
        if slow and not narrow and cur.idle:
            note += " (idle: slower is normal)"
        points = [(r.t, (r.pcie_gen, r.pcie_width)) for r in history]
        link = HealthRow(
            "PCIe link", value, note, _since(points, now), WARN if narrow or (slow and not cur.idle) else ""
        )
    return [
        link,
        _counter("  PCIe replays", history, lambda r: r.pcie_replay, now, WARN, growing=True),
        _counter("  PCIe recoveries", history, lambda r: r.pcie_recovery, now, WARN, growing=True),
    ]


def _link_rows(history: Sequence[HealthReading], now: float) -> list[HealthRow]:
    cur = history[-1]
    if cur.links is None:
        return []
    kind = {"xgmi": "XGMI", "nvlink": "NVLink"}.get(cur.link_kind or "", "Links")
    down = [link.link for link in cur.links if link.up is False]
    up = sum(1 for link in cur.links if link.up)
    value = f"{up} up" + (f", down: {', '.join(map(str, down))}" if down else "")
    points = _series(history, lambda r: float(sum(1 for link in r.links or () if link.up is False)))
    rows = [HealthRow(f"{kind} links", value, "", _since(points, now), WARN if down else "")]

    def errors(r: HealthReading) -> float | None:
        counts = [link.errors for link in r.links or () if link.errors is not None]
        return float(sum(counts)) if counts else None

    rows.append(_counter(f"  {kind} errors", history, errors, now, WARN, growing=True))
    return rows


def _fault_row(history: Sequence[HealthReading], now: float) -> HealthRow:
    seen = {(f.t, f.kind, f.code): f for r in history for f in r.faults}
    if not seen:
        return HealthRow("Resets / faults", "none")
    faults = sorted(seen.values(), key=lambda f: f.t)
    last = faults[-1]
    span = history[-1].t - history[0].t
    rate = f"{len(faults)} in {age(span)}" if len(faults) > 1 and span > 0 else ""
    return HealthRow("Resets / faults", last.describe(), rate, f"{age(now - last.t)} ago", WARN)


def _cper_row(history: Sequence[HealthReading], now: float) -> HealthRow | None:
    """AMD CPER records the history's readings brought (each reading carries the new ones
    only); no row where none of them read CPER (NVIDIA, older amdsmi, a CLI fallback)."""
    read = [r for r in history if r.cper_records is not None]
    if not read:
        return None
    got = [(r.t, rec) for r in read for rec in r.cper_records or ()]
    if not got:
        return HealthRow("CPER records", "none")
    t, (severity, notify) = got[-1]
    level = FAIL if any(rec[0] == "fatal" for _, rec in got) else WARN
    text = f"{len(got)} (last {severity.replace('_', ' ')}, {notify})"
    return HealthRow("CPER records", text, "", f"{age(now - t)} ago", level)


def _energy_row(history: Sequence[HealthReading], now: float) -> HealthRow:
    points = _series(history, lambda r: r.energy_j)
    if not points:
        return HealthRow("Energy", "N/A")
    value = points[-1][1]
    text = f"{value / 3.6e6:,.2f} kWh" if value >= 3.6e5 else f"{value:,.0f} J"
    rate = ""
    (t0, v0), (t1, v1) = points[0], points[-1]
    if t1 - t0 >= 1 and v1 >= v0:
        rate = f"{(v1 - v0) / (t1 - t0):,.0f} W avg"
    return HealthRow("Energy", text, rate)
