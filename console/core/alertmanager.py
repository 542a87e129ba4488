"""Alertmanager's side of an alert, pure: the profile's ``[alertmanager]`` table and the JSON of
Alertmanager's v2 API (``POST /api/v2/alerts``, a list of alerts) built from an alert notice.
Posting, re-sending and retrying are console/services/alertmanager.py.

Labels are what Alertmanager de-duplicates on, so they say only what the rule and its subject
are (alertname, node, gpu, instance, severity), never who posts (no host, no pid): two watchers
of one profile (HA) and any console post the same alert, and the receiver hears of it once.
A resolved alert carries the same labels as its firing (the rule's severity, not "info"), or
Alertmanager would take it for another alert and never resolve the first.
"""

from __future__ import annotations

import datetime
import math
import re
import urllib.parse
from typing import Any

from console.core.alerts import CLEARED, FIRED, AlertNotice
from console.core.model import AlertmanagerSpec
from console.core.toml_source import TomlContext, describe

__all__ = [
    "ALERTMANAGER_KEYS",
    "API_PATH",
    "DEFAULT_RESEND_S",
    "EVENT_HOLD_S",
    "MAX_RESEND_S",
    "alert_key",
    "alert_labels",
    "alertmanager_table",
    "am_alert",
    "notice_alert",
    "rfc3339",
    "url_problem",
]

ALERTMANAGER_KEYS = ("url", "token_env", "resend_interval", "timeout")
API_PATH = "/api/v2/alerts"
# Prometheus re-sends an active alert every minute; an alert posted without endsAt ends by
# itself after Alertmanager's resolve_timeout (5 m by default), so re-sending must come sooner.
DEFAULT_RESEND_S = 60.0
MAX_RESEND_S = 240.0
EVENT_HOLD_S = 300.0  # an event alert (it never clears) is posted once, ending this long after
MAX_TIMEOUT_S = 60.0
# The rules' severities in the words Alertmanager routes usually match (severity="critical").
SEVERITY = {"info": "info", "warn": "warning", "fail": "critical"}
GENERATOR_URL = "https://github.com/rocm-console/rocm-console/blob/main/docs/health.md#alerts"
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# ---------------------------------------------------------------- the profile's table


def url_problem(url: str) -> str | None:
    """What is wrong with an Alertmanager URL (None: nothing), in one phrase."""
    if not url.strip() or any(c.isspace() or not c.isprintable() for c in url):
        return "expected the Alertmanager's URL, e.g. http://alertmanager:9093"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected an http:// or https:// URL, e.g. http://alertmanager:9093"
    if parts.username is not None or parts.password is not None:
        return "credentials in the URL: secrets do not belong in profiles (token_env names the variable of a token)"
    if parts.query or parts.fragment:
        return "expected the Alertmanager's base URL, without ?query or #fragment"
    if port == 0:
        return "port 0 in the URL"
    return None


def _seconds(value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected a number of seconds, got {describe(value)}")
    if not low <= value <= high:
        raise ValueError(f"expected {low:g} to {high:g} seconds, got {value}")
    return float(value)


def alertmanager_table(ctx: TomlContext, body: dict, earlier: AlertmanagerSpec | None) -> AlertmanagerSpec:
    """The ``[alertmanager]`` table of one file; ProfileError naming the file, the table and
    the key at fault (credentials in the url, an unknown key, a second table elsewhere)."""
    table = ("alertmanager",)
    for key in body:
        if key not in ALERTMANAGER_KEYS:
            hint = " (a token belongs in the environment: token_env names the variable)" if "token" in key else ""
            raise ctx.error(table, (key,), f"unknown key (known: {', '.join(ALERTMANAGER_KEYS)}){hint}")
    url = body.get("url")
    if not isinstance(url, str):
        what = "missing required key" if url is None else f"expected a string, got {describe(url)}"
        raise ctx.error(table, ("url",), f"{what} (the Alertmanager, e.g. http://alertmanager:9093)")
    problem = url_problem(url)
    if problem:
        raise ctx.error(table, ("url",), problem)
    token_env = body.get("token_env")
    if token_env is not None and not (isinstance(token_env, str) and _ENV_RE.match(token_env)):
        raise ctx.error(
            table, ("token_env",), f"expected the name of an environment variable, got {describe(token_env)}"
        )
    values: dict[str, Any] = {}
    for key, low, high in (("resend_interval", 1.0, MAX_RESEND_S), ("timeout", 0.1, MAX_TIMEOUT_S)):
        if key in body:
            try:
                values[key] = _seconds(body[key], low, high)
            except ValueError as exc:
                hint = " (below Alertmanager's resolve_timeout, 5 m by default)" if key == "resend_interval" else ""
                raise ctx.error(table, (key,), f"{exc}{hint}") from None
    if earlier is not None:
        raise ctx.error(table, (), f"[alertmanager] is also defined in {earlier.source}")
    return AlertmanagerSpec(url=url.rstrip("/"), token_env=token_env, source=ctx.file, **values)


# ---------------------------------------------------------------- the API's JSON


def rfc3339(when: float) -> str:
    stamp = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alert_labels(rule: str, node: str | None, gpu: int | None, instance: str | None, severity: str) -> dict[str, str]:
    """The label set of one alert: only what the rule and its subject say (absent: no label)."""
    labels = {"alertname": rule, "severity": SEVERITY.get(severity, severity)}
    if node:
        labels["node"] = node
    if gpu is not None:
        labels["gpu"] = str(gpu)
    if instance:
        labels["instance"] = instance
    return labels


def alert_key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """What Alertmanager tells alerts apart by: the label set."""
    return tuple(sorted(labels.items()))


def am_alert(
    labels: dict[str, str],
    summary: str,
    description: str,
    starts: float,
    ends: float | None = None,
    generator_url: str = GENERATOR_URL,
) -> dict[str, Any]:
    """One alert of the v2 API. Without ``ends`` Alertmanager keeps it open until its
    resolve_timeout passes with no re-send."""
    alert: dict[str, Any] = {
        "labels": labels,
        "annotations": {"summary": summary, "description": description},
        "startsAt": rfc3339(starts),
        "generatorURL": generator_url,
    }
    if ends is not None:
        alert["endsAt"] = rfc3339(max(ends, starts))
    return alert


def notice_alert(notice: AlertNotice) -> dict[str, Any] | None:
    """The alert to post for a notice (None for a test notice: `alerts test` runs actions only).
    Fired: open (re-sent while active); cleared: endsAt = when it cleared; an event rule's
    firing never clears, so it ends by itself EVENT_HOLD_S after."""
    if notice.state not in (FIRED, CLEARED):
        return None
    rule = notice.rule
    labels = alert_labels(rule.name, notice.node, notice.gpu, notice.instance, rule.severity)
    summary = notice.text.removeprefix("[rocm-console] ")
    description = f"{rule.name} on {notice.subject}: {rule.condition.text or rule.condition.describe()}"
    starts = notice.since if notice.since is not None else notice.time
    if notice.state == CLEARED:
        return am_alert(labels, summary, description, starts, notice.time)
    if rule.condition.scope == "event":
        return am_alert(labels, summary, description, notice.time, notice.time + EVENT_HOLD_S)
    return am_alert(labels, summary, description, starts)
