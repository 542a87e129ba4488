"""Alert rules and the pure engine that fires and clears them.

A rule (``[[alert]]`` in the profile, console/core/health_profile.py) is a condition
and what to do.  Conditions, parsed here by a small tokenizer (never eval):

    temp_junction_c > 95 for 30s     a GPU metric, compared with a number, held a while
    throttle_pct >= 50 for 5m        a health figure (see HEALTH_METRICS)
    health == fail                   a GPU's health state (ok < warn < fail: >=, > work too)
    node down for 60s                a node's state: up (live), stale, down; != works
    instance failed                  an instance event: started, ready, failed, stopped
    event gpu.xid                    any event kind of the timeline (console/core/events.py)

The engine keeps, per rule and subject (a GPU, a node, an instance), since when the
condition holds; it fires once the duration has passed and clears when the condition
no longer holds.  Repeats are de-duplicated (an active alert does not fire again) and
rate-limited: the same subject does not fire again within ``repeat_after`` seconds of
its last firing, and a rule fires at most ``max_per_hour`` times an hour; what was held
back is counted and said in the next notice.  Delivery (a command, a webhook) is in
console/services/alerts.py.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from console.core.events import INFO, KINDS, WARN, Event
from console.core.health import STATES, HealthReading, HealthVerdict, state_rank
from console.core.model import GpuMetrics

__all__ = [
    "GPU_METRICS",
    "HEALTH_METRICS",
    "AlertEngine",
    "AlertNotice",
    "AlertRule",
    "Condition",
    "ConditionError",
    "gpu_values",
    "MAX_DURATION",
    "parse_condition",
    "parse_duration",
    "notice_for_test",
    "unknown_nodes",
    "webhook_problem",
]

# Numeric fields of a telemetry tick (console/core/model.py GpuMetrics), plus VRAM in percent.
GPU_METRICS = tuple(f.name for f in dataclasses.fields(GpuMetrics) if f.name != "index" and "float" in str(f.type)) + (
    "vram_used_pct",
)
# Figures from the health reading and verdict.
HEALTH_METRICS = (
    "throttle_pct",
    "ecc_correctable",
    "ecc_uncorrectable",
    "ecc_deferred",
    "pages_retired",
    "pages_pending",
    "pages_unreservable",
    "pcie_replay",
)
NODE_STATES = {"up": "live", "live": "live", "stale": "stale", "down": "down"}
INSTANCE_STATES = ("started", "ready", "failed", "stopped")
OPS = ("==", "!=", ">=", "<=", ">", "<")
FIRED, CLEARED, TEST = "fired", "cleared", "test"


class ConditionError(ValueError):
    """A condition that does not parse: the message says what and where."""


# ---------------------------------------------------------------- durations

_DURATION_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)\s*\Z", re.IGNORECASE)
_SCALE = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
# The longest 'for': a condition that must hold longer than a week would in practice never
# fire (a restart forgets it); 999999999d is a typo, said as one, not a rule that is silent.
MAX_DURATION = 7 * 86400.0


def parse_duration(text: str) -> float:
    """'30s', '5m', '1.5h', '2d' -> seconds; ConditionError otherwise (each caller bounds it)."""
    found = _DURATION_RE.match(text)
    if not found:
        raise ConditionError(f"{text.strip()!r} is not a duration (e.g. 30s, 5m, 1h)")
    seconds = float(found.group(1)) * _SCALE[found.group(2).lower()]
    if not math.isfinite(seconds):  # 400 digits of days
        raise ConditionError(f"{text.strip()!r} is too long")
    return seconds


def fmt_duration(seconds: float) -> str:
    for unit, scale in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= scale and seconds % scale == 0:
            return f"{seconds / scale:g}{unit}"
    return f"{seconds:g}s"


# ---------------------------------------------------------------- conditions

_TOKEN_RE = re.compile(
    r"\s*(?:(?P<op>==|!=|>=|<=|>|<|=)|(?P<num>-?\d+(?:\.\d+)?(?:[a-zA-Z]+)?)|(?P<word>[A-Za-z_][A-Za-z0-9_.\-]*))"
)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        found = _TOKEN_RE.match(text, pos)
        if not found or found.end() == pos:
            col = pos + len(text[pos:]) - len(text[pos:].lstrip())
            raise ConditionError(f"unexpected {text[col]!r} at column {col + 1}")
        kind = found.lastgroup or "word"
        out.append((kind, found.group(kind), found.start(kind) + 1))
        pos = found.end()
    return out


@dataclass(frozen=True, slots=True)
class Condition:
    subject: str  # metric | health | node | instance | event
    name: str  # the metric; "health"; "node"; the instance state; the event kind
    op: str = "=="
    value: float | str | None = None
    duration: float = 0.0  # seconds the condition must hold before the alert fires
    text: str = ""

    @property
    def scope(self) -> str:
        """What a subject is: a GPU (metric, health), a node, or an event (fires, never clears)."""
        return {"metric": "gpu", "health": "gpu", "node": "node"}.get(self.subject, "event")

    def holds(self, observed: float | str | None) -> bool:
        if observed is None:
            return False  # N/A is not evidence
        if self.subject == "health":
            a, b = state_rank(str(observed)), state_rank(str(self.value))
        elif self.subject == "node":
            a, b = (0 if observed == self.value else 1), 0
        else:
            if isinstance(observed, str) or isinstance(self.value, str) or self.value is None:
                return False
            a, b = float(observed), float(self.value)  # type: ignore[assignment]
            if math.isnan(a):
                return False
        return {
            "==": a == b,
            "!=": a != b,
            ">": a > b,
            ">=": a >= b,
            "<": a < b,
            "<=": a <= b,
        }[self.op]

    def describe(self) -> str:
        if self.subject in ("instance", "event"):
            return self.text or f"{self.subject} {self.name}"
        value = self.value if not isinstance(self.value, float) else f"{self.value:g}"
        main = f"{self.name} {self.op} {value}" if self.subject != "node" else f"node {self.op} {self.value}"
        if self.subject == "node" and self.op == "==":
            main = f"node {'up' if self.value == 'live' else self.value}"
        return main + (f" for {fmt_duration(self.duration)}" if self.duration else "")


def _did_you_mean(word: str, names: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(names), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_condition(text: str) -> Condition:
    """The condition of a rule; ConditionError naming the word at fault."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("empty condition")
    tokens = _tokens(text)
    duration = 0.0
    # "... for 30s" at the end
    words = list(tokens)
    for i, (kind, value, col) in enumerate(words):
        if kind == "word" and value.lower() == "for":
            rest = words[i + 1 :]
            if len(rest) != 1 or rest[0][0] != "num":
                raise ConditionError(f"'for' at column {col} needs one duration after it (e.g. for 30s)")
            duration = parse_duration(rest[0][1])
            if duration <= 0:
                raise ConditionError("the duration after 'for' must be more than 0")
            if duration > MAX_DURATION:
                raise ConditionError(
                    f"'for {rest[0][1]}' is longer than the longest duration, {fmt_duration(MAX_DURATION)}"
                )
            words = words[:i]
            break
    if not words:
        raise ConditionError("nothing before 'for'")
    head = words[0][1].lower() if words[0][0] == "word" else ""
    clean = " ".join(text.split())
    if head == "health":
        return _health(words, duration, clean)
    if head == "node":
        return _node(words, duration, clean)
    if head in ("instance", "event"):
        if duration:
            raise ConditionError(f"'{head} ...' fires on the event itself; it takes no 'for' duration")
        return _event(head, words, clean)
    return _metric(words, duration, clean)


def _health(words: list[tuple[str, str, int]], duration: float, text: str) -> Condition:
    if len(words) != 3 or words[1][0] != "op" or words[2][0] != "word":
        raise ConditionError("expected 'health OP STATE', e.g. health == fail")
    op = "==" if words[1][1] == "=" else words[1][1]
    state = words[2][1].lower()
    if state not in STATES:
        raise ConditionError(f"unknown health state {words[2][1]!r} (expected one of: {', '.join(STATES)})")
    return Condition("health", "health", op, state, duration, text)


def _node(words: list[tuple[str, str, int]], duration: float, text: str) -> Condition:
    op = "=="
    rest = words[1:]
    if rest and rest[0][0] == "op":
        op = "==" if rest[0][1] == "=" else rest[0][1]
        rest = rest[1:]
        if op not in ("==", "!="):
            raise ConditionError(f"a node state compares with == or !=, not {op}")
    if len(rest) != 1 or rest[0][0] != "word" or rest[0][1].lower() not in NODE_STATES:
        got = f" (got {rest[0][1]!r})" if rest else ""
        raise ConditionError(f"expected 'node STATE' with STATE one of: up, stale, down{got}")
    return Condition("node", "node", op, NODE_STATES[rest[0][1].lower()], duration, text)


def _event(head: str, words: list[tuple[str, str, int]], text: str) -> Condition:
    if len(words) != 2 or words[1][0] != "word":
        example = "instance failed" if head == "instance" else "event gpu.xid"
        raise ConditionError(f"expected '{example}'")
    name = words[1][1].lower()
    if head == "instance":
        if name not in INSTANCE_STATES:
            raise ConditionError(
                f"unknown instance state {words[1][1]!r} (expected one of: {', '.join(INSTANCE_STATES)})"
            )
        return Condition("instance", f"instance.{name}", text=text)
    if name not in KINDS:
        raise ConditionError(f"unknown event kind {words[1][1]!r}{_did_you_mean(name, KINDS)}")
    return Condition("event", name, text=text)


def _metric(words: list[tuple[str, str, int]], duration: float, text: str) -> Condition:
    names = GPU_METRICS + HEALTH_METRICS
    first = words[0]
    if first[0] != "word":
        raise ConditionError(f"expected a metric, health, node, instance or event at column {first[2]}")
    name = first[1]
    if name not in names:
        hint = _did_you_mean(name, names) or f" (metrics: {', '.join(names)}; or health, node, instance, event)"
        raise ConditionError(f"unknown metric {name!r}{hint}")
    if len(words) != 3 or words[1][0] != "op" or words[2][0] != "num":
        raise ConditionError(f"expected '{name} OP NUMBER', e.g. {name} > 90")
    op = "==" if words[1][1] == "=" else words[1][1]
    try:
        number = float(words[2][1])
    except ValueError:
        raise ConditionError(f"{words[2][1]!r} is not a number (a duration goes after 'for')") from None
    return Condition("metric", name, op, number, duration, text)


# ---------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class AlertRule:
    name: str
    condition: Condition
    command: tuple[str, ...] = ()  # argv, run without a shell; the alert as JSON on stdin
    timeout: float = 10.0  # seconds the command (or one webhook attempt) may take
    webhook: str | None = None  # URL to POST the alert to
    webhook_env: str | None = None  # or the environment variable that holds the URL (it is a secret)
    token_env: str | None = None  # environment variable with a bearer token for the webhook
    nodes: tuple[str, ...] = ()  # only these nodes (empty: all)
    severity: str = WARN  # of the fired event: info | warn | fail
    repeat_after: float = 300.0  # the same subject fires again at the earliest this much later
    max_per_hour: int = 20  # firings of this rule an hour, all subjects together
    source: str = ""  # file the rule came from
    line: int | None = None

    @property
    def actions(self) -> tuple[str, ...]:
        out = []
        if self.command:
            out.append("command")
        if self.webhook or self.webhook_env:
            out.append("webhook")
        return tuple(out)

    def applies_to(self, node: str | None) -> bool:
        return not self.nodes or node in self.nodes


@dataclass(frozen=True)
class AlertNotice:
    """One alert that fired, cleared, or was fired as a test: what actions receive."""

    rule: AlertRule
    state: str  # fired | cleared | test
    time: float
    node: str | None = None
    gpu: int | None = None
    instance: str | None = None
    value: float | str | None = None
    since: float | None = None  # when the condition began to hold
    suppressed: int = 0  # firings held back by the rate limits since the last notice

    @property
    def subject(self) -> str:
        parts = []
        if self.node:
            parts.append(self.node)
        if self.gpu is not None:
            parts.append(f"GPU {self.gpu}")
        if self.instance:
            parts.append(f"instance {self.instance}")
        return " ".join(parts) or "fleet"

    @property
    def text(self) -> str:
        """One line for a chat channel (Slack and Mattermost read ``text``)."""
        cond = self.rule.condition.describe()
        shown = self.value if not isinstance(self.value, float) else f"{self.value:g}"
        if self.state == TEST:
            return f"[rocm-console] TEST {self.rule.name}: a test of this alert's actions (condition: {cond})"
        if self.state == CLEARED:
            held = f", held {fmt_duration(round(self.time - self.since))}" if self.since is not None else ""
            return f"[rocm-console] CLEARED {self.rule.name}: {self.subject} ({cond}{held})"
        now = f" (now {shown})" if self.value is not None and self.rule.condition.subject == "metric" else ""
        extra = f"; {self.suppressed} more held back by the rate limit" if self.suppressed else ""
        return f"[rocm-console] FIRED {self.rule.name}: {self.subject}: {cond}{now}{extra}"

    def payload(self) -> dict[str, Any]:
        """The JSON a command reads on stdin and a webhook receives."""
        return {
            "text": self.text,
            "alert": self.rule.name,
            "state": self.state,
            "severity": self.rule.severity if self.state != CLEARED else INFO,
            "condition": self.rule.condition.text,
            "time": round(self.time, 3),
            "node": self.node,
            "gpu": self.gpu,
            "instance": self.instance,
            "value": self.value,
            "since": round(self.since, 3) if self.since is not None else None,
            "suppressed": self.suppressed,
        }

    def event(self) -> Event:
        kind = "alert.cleared" if self.state == CLEARED else "alert.fired"
        severity = INFO if self.state in (CLEARED, TEST) else self.rule.severity
        details: dict[str, Any] = {"rule": self.rule.name, "condition": self.rule.condition.text}
        if self.value is not None:
            details["value"] = self.value
        if self.suppressed:
            details["suppressed"] = self.suppressed
        if self.state == TEST:
            details["test"] = True
        message = self.text.removeprefix("[rocm-console] ")
        return Event(self.time, kind, self.node, self.gpu, self.instance, severity, message, details)


def unknown_nodes(rules: Sequence[AlertRule], known: Sequence[str]) -> list[str]:
    """One line per rule whose `nodes` names a node the profile does not have: that name
    never matches, so the rule would be silent for it (a typo, or a node left out). A profile
    with no nodes at all (a file of [[alert]] rules alone, for `alerts test`) is not judged."""
    out: list[str] = []
    if not known:
        return out
    for rule in rules:
        missing = [n for n in rule.nodes if n not in known]
        if missing:
            names = ", ".join(repr(n) for n in missing)
            have = ", ".join(known)
            where = f"{rule.source}:{rule.line}: " if rule.source and rule.line else ""
            out.append(
                f"{where}[[alert]] rule {rule.name!r}: nodes {names} not in the profile (nodes: {have}); "
                "the rule never fires for it"
            )
    return out


def webhook_problem(url: str | None) -> str | None:
    """What is wrong with a webhook URL (None: nothing), in words that never quote it:
    a URL from the environment is a secret. A user or password in it is refused, as in
    the profile: httpx would send it as Basic auth in place of the rule's Bearer token."""
    import urllib.parse

    if not url or not url.strip():
        return "is empty"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "holds a URL with spaces or control characters"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:  # '[::1' (an unclosed bracket), a port out of range or not a number
        return f"holds no valid URL ({str(exc).lower() or 'unreadable'})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "holds no http(s) URL"
    if parts.username is not None or parts.password is not None:
        return "holds a user or password in the URL: give the token in token_env instead"
    if port == 0:
        return "holds a URL with port 0"
    return None


def notice_for_test(rule: AlertRule, now: float) -> AlertNotice:
    """The notice `rocm-console alerts test` sends through a rule's actions."""
    return AlertNotice(rule, TEST, now)


def gpu_values(
    metrics: GpuMetrics | None = None,
    reading: HealthReading | None = None,
    verdict: HealthVerdict | None = None,
) -> dict[str, float | None]:
    """The numbers a metric condition can name, for one GPU (None where unknown)."""
    out: dict[str, float | None] = dict.fromkeys(GPU_METRICS + HEALTH_METRICS)
    if metrics is not None:
        for name in GPU_METRICS:
            if hasattr(metrics, name):
                out[name] = getattr(metrics, name)
        if metrics.vram_used_mib is not None and metrics.vram_total_mib:
            out["vram_used_pct"] = 100.0 * metrics.vram_used_mib / metrics.vram_total_mib
    if reading is not None:
        for name in HEALTH_METRICS:
            if hasattr(reading, name):
                value = getattr(reading, name)
                out[name] = float(value) if value is not None else None
    if verdict is not None and verdict.throttle_share is not None:
        out["throttle_pct"] = 100.0 * verdict.throttle_share
    return out


# ---------------------------------------------------------------- engine


@dataclass
class _Track:
    since: float | None = None  # when the condition began to hold (None: it does not)
    active: bool = False
    silent: bool = False  # fired while rate-limited: its clear is silent too
    value: float | str | None = None
    last_fired: float | None = None


class AlertEngine:
    """Fires and clears the rules over what it is shown; pure (the caller passes the time)."""

    def __init__(self, rules: Sequence[AlertRule]) -> None:
        self.rules = tuple(rules)
        self._tracks: dict[tuple[str, tuple], _Track] = {}
        self._fired: dict[str, deque[float]] = {r.name: deque() for r in self.rules}
        self._held: dict[str, int] = {r.name: 0 for r in self.rules}
        # the tracks tick() may fire (holding, not fired): a fleet has thousands, few of them pending
        self._pending: set[tuple[str, tuple]] = set()

    def observe_gpu(
        self, now: float, node: str, gpu: int, values: Mapping[str, float | None], health: str | None = None
    ) -> list[AlertNotice]:
        out = []
        for rule in self.rules:
            cond = rule.condition
            if cond.scope != "gpu" or not rule.applies_to(node):
                continue
            observed = health if cond.subject == "health" else values.get(cond.name)
            out += self._step(rule, (node, gpu), now, cond.holds(observed), observed, node=node, gpu=gpu)
        return out

    def observe_node(self, now: float, node: str, state: str) -> list[AlertNotice]:
        out = []
        for rule in self.rules:
            if rule.condition.scope != "node" or not rule.applies_to(node):
                continue
            if state == "connecting":
                continue  # not known yet: neither holds nor clears
            out += self._step(rule, (node,), now, rule.condition.holds(state), state, node=node)
        return out

    def observe_event(self, event: Event) -> list[AlertNotice]:
        out = []
        for rule in self.rules:
            cond = rule.condition
            if cond.scope != "event" or cond.name != event.kind or not rule.applies_to(event.node):
                continue
            key = (rule.name, (event.node, event.gpu, event.instance))
            track = self._tracks.setdefault(key, _Track())
            notice = self._fire(rule, track, event.time, event.time, event.message or None)
            if notice is not None:
                out.append(dataclasses.replace(notice, node=event.node, gpu=event.gpu, instance=event.instance))
            track.active = False  # an event alert has nothing to clear
        return out

    def tick(self, now: float) -> list[AlertNotice]:
        """Fire what has now held long enough without a new observation."""
        out = []
        by_name = {r.name: r for r in self.rules}
        for key in list(self._pending):
            name, subject = key
            track, rule = self._tracks[key], by_name[name]
            if track.since is None or track.active or rule.condition.scope == "event":
                self._pending.discard(key)
                continue
            if now - track.since >= rule.condition.duration:
                self._pending.discard(key)
                out += self._emit_fire(rule, track, now, subject)
        return out

    def active(self) -> list[tuple[str, tuple]]:
        """(rule, subject) of the alerts now fired and not cleared."""
        return [key for key, t in self._tracks.items() if t.active and not t.silent]

    # -- internals

    def _step(
        self, rule: AlertRule, subject: tuple, now: float, holds: bool, value: float | str | None, **where: Any
    ) -> list[AlertNotice]:
        key = (rule.name, subject)
        track = self._tracks.setdefault(key, _Track())
        track.value = value
        if holds:
            if track.since is None:
                track.since = now
            if not track.active and now - track.since >= rule.condition.duration:
                return self._emit_fire(rule, track, now, subject)
            if not track.active:
                self._pending.add(key)
            return []
        since, track.since = track.since, None
        if not track.active:
            return []
        track.active = False
        if track.silent:
            track.silent = False
            return []
        return [AlertNotice(rule, CLEARED, now, value=value, since=since, **where)]

    def _emit_fire(self, rule: AlertRule, track: _Track, now: float, subject: tuple) -> list[AlertNotice]:
        notice = self._fire(rule, track, now, track.since, track.value)
        if notice is None:
            return []
        where: dict[str, Any] = {"node": subject[0]}
        if len(subject) > 1:
            where["gpu"] = subject[1]
        return [dataclasses.replace(notice, **where)]

    def _fire(
        self, rule: AlertRule, track: _Track, now: float, since: float | None, value: float | str | None
    ) -> AlertNotice | None:
        track.active = True
        fired = self._fired[rule.name]
        while fired and now - fired[0] >= 3600:
            fired.popleft()
        recent = track.last_fired is not None and now - track.last_fired < rule.repeat_after
        if recent or len(fired) >= rule.max_per_hour:
            track.silent = True
            self._held[rule.name] += 1
            return None
        track.silent = False
        track.last_fired = now
        fired.append(now)
        held, self._held[rule.name] = self._held[rule.name], 0
        return AlertNotice(rule, FIRED, now, value=value, since=since, suppressed=held)
