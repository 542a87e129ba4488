"""A GPU's health as the fleet table shows it: the mark of a row, a node's summary, the
filter words (`sick`, `warn`, `fail`, `throttled`, `ecc`).

Pure (no Textual).  The verdicts come from the fleet (NodeSnapshot.gpu_health, one per
physical GPU); a partition row shows its physical GPU's state.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.core.health import FAIL, OK, UNKNOWN, WARN
from console.core.model import GpuHealth, GpuMetrics, GpuStatic, NodeSnapshot

__all__ = [
    "FAIL",
    "FILTER_WORDS",
    "GLYPHS",
    "OK",
    "UNKNOWN",
    "WARN",
    "Mark",
    "gpu_health",
    "has_ecc",
    "health_of",
    "is_throttled",
    "mark",
    "node_summary",
    "physical_of",
    "start_warnings",
    "word_matches",
]

# Glyph and word per state: the glyph reads without colour (a monochrome terminal, a
# screenshot in print), the word says it for those who do not know the glyphs.
GLYPHS = {OK: "✓", WARN: "▲", FAIL: "✖", UNKNOWN: "?"}
NO_HEALTH = "–"  # no health reading yet (an agent without health, or before the first one)

# The filter words this module answers; RowFilter asks it for these.
FILTER_WORDS = ("sick", "warn", "fail", "throttled", "ecc")


@dataclass(frozen=True, slots=True)
class Mark:
    """What a GPU row's health cell shows: text, and the state (style) to draw it in."""

    text: str
    state: str  # ok | warn | fail | unknown | "" (no reading)


def physical_of(snapshot: NodeSnapshot, logical: int) -> int:
    """The physical GPU of a logical index (itself when the node's static facts do not say)."""
    for static in snapshot.static:
        if static.index == logical:
            return static.physical
    return logical


def health_of(snapshot: NodeSnapshot, physical: int) -> GpuHealth | None:
    for health in snapshot.gpu_health:
        if health.physical == physical:
            return health
    return None


def gpu_health(snapshot: NodeSnapshot, logical: int) -> GpuHealth | None:
    """The health of a logical GPU: its physical GPU's."""
    return health_of(snapshot, physical_of(snapshot, logical))


def mark(health: GpuHealth | None, width: int = 6) -> Mark:
    """'✓ ok', '▲ warn', '✖ fail', '? unk'; the glyph alone when the cell is narrow."""
    if health is None:
        return Mark(NO_HEALTH, "")
    state = health.verdict.state
    glyph = GLYPHS.get(state, "?")
    word = "unk" if state == UNKNOWN else state
    return Mark(f"{glyph} {word}" if width >= 6 else glyph, state)


def node_summary(snapshot: NodeSnapshot) -> tuple[str, str]:
    """'2 warn · 1 fail' and the worst state; ('health ok', ok) when every GPU is well;
    ('', '') before the first health reading."""
    if not snapshot.gpu_health:
        return "", ""
    counts = {FAIL: 0, WARN: 0, UNKNOWN: 0}
    for health in snapshot.gpu_health:
        state = health.verdict.state
        if state in counts:
            counts[state] += 1
    parts = [f"{counts[s]} {s}" for s in (WARN, FAIL) if counts[s]]
    if counts[UNKNOWN]:
        parts.append(f"{counts[UNKNOWN]} unknown")
    if not parts:
        return "health ok", OK
    worst = FAIL if counts[FAIL] else WARN if counts[WARN] else UNKNOWN
    return "health " + " · ".join(parts), worst


def is_throttled(health: GpuHealth | None, metrics: GpuMetrics | None) -> bool:
    """Throttled now (the sample's flag, the reading's reasons) or over the rule's window."""
    if metrics is not None and metrics.throttled:
        return True
    if health is None:
        return False
    if any(f.rule == "throttle" for f in health.verdict.findings):
        return True
    reading = health.reading
    return bool(reading is not None and reading.throttle_reasons)


def has_ecc(health: GpuHealth | None) -> bool:
    """Any ECC error counted (correctable, uncorrectable, deferred) or a bad page pending."""
    if health is None:
        return False
    if any(f.rule.startswith("ecc_") or f.rule.startswith("pages_") for f in health.verdict.findings):
        return True
    reading = health.reading
    if reading is None:
        return False
    counts = (reading.ecc_correctable, reading.ecc_uncorrectable, reading.ecc_deferred, reading.pages_pending)
    return any(c for c in counts)


def word_matches(word: str, snapshot: NodeSnapshot, static: GpuStatic | None, metrics: GpuMetrics | None) -> bool:
    """One of FILTER_WORDS against a GPU row (a node header matches none)."""
    if static is None and metrics is None:
        return False
    if static is not None:
        health = health_of(snapshot, static.physical)
    else:
        health = gpu_health(snapshot, metrics.index if metrics is not None else -1)
    state = health.verdict.state if health is not None else ""
    if word == "sick":
        return state in (WARN, FAIL)
    if word in (WARN, FAIL):
        return state == word
    if word == "throttled":
        return is_throttled(health, metrics)
    if word == "ecc":
        return has_ecc(health)
    return False


def start_warnings(snapshot: NodeSnapshot, gpus: tuple[int, ...] | list[int]) -> list[tuple[str, str]]:
    """(state, line) for each chosen GPU in warn or fail, worst first: what the start dialog says.

    A fail GPU is refused by the serve preflight unless the start is forced."""
    out: list[tuple[int, str, str]] = []
    seen: set[int] = set()
    for logical in gpus:
        physical = physical_of(snapshot, logical)
        health = health_of(snapshot, physical)
        if physical in seen or health is None or health.verdict.state not in (WARN, FAIL):
            continue
        seen.add(physical)
        verdict = health.verdict
        where = f"GPU {logical}" if physical == logical else f"GPU {logical} (physical {physical})"
        line = f"{where} {GLYPHS[verdict.state]} {verdict.state}: {verdict.reasons}"
        if verdict.state == FAIL:
            line += " — the start will be refused unless forced (serve start --force)"
        out.append((0 if verdict.state == FAIL else 1, verdict.state, line))
    return [(state, line) for _, state, line in sorted(out, key=lambda item: item[0])]
