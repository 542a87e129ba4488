"""The profile's ``[health]`` table and ``[[alert]]`` rules -> frozen records.

    [health]
    interval = 10                 # seconds between the agent's health readings
    throttle_window = 60          # seconds ("60s", "1m" work too)
    throttle_share = 0.25         # warn above this share of the window spent throttled
    ecc_window = "1h"             # correctable ECC growth is counted over this
    ecc_correctable = 1           # growth that warns
    fault_window = "24h"          # a reset or XID keeps its severity this long
    pcie_gen = true               # false: judge the PCIe width only
    [health.severity]             # per rule: "fail", "warn" or "off"
    throttle = "off"

    [[alert]]
    name = "gpu-hot"
    when = "temp_junction_c > 95 for 30s"
    command = ["/usr/local/bin/page-oncall", "--team", "gpu"]   # argv; the alert as JSON on stdin
    webhook_env = "GPU_ALERTS_WEBHOOK"                         # or webhook = "https://..."
    token_env = "GPU_ALERTS_TOKEN"                             # bearer token, from the environment

console/core/profiles.py hands these two tables of each file to ``check_section``
while it loads a profile, so a mistake stops the load with the same one-line
``file:line: [table] key 'k': message`` as any other; ``health_settings(profile)``
reads them back from the profile's files and merges them: later files override
[health] keys, ``[[alert]]`` rules add up, a rule name may be used once.
"""

from __future__ import annotations

import difflib
import math
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from console.core.alerts import AlertRule, ConditionError, fmt_duration, parse_condition, parse_duration
from console.core.bounded_file import TOML_FILE_LIMIT, read_bounded
from console.core.errors import ProfileError
from console.core.events import SEVERITIES
from console.core.health import FAIL, OFF, RULES, WARN, HealthRules
from console.core.toml_source import describe

__all__ = ["SECTIONS", "HealthSettings", "check_section", "health_settings", "parse_health_tables"]

SECTIONS = ("health", "alert")
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+\Z")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SECRET_MSG = "secrets do not belong in profiles; export it in the environment and name the variable in {hint}"


@dataclass(frozen=True, slots=True)
class HealthSettings:
    rules: HealthRules = HealthRules()
    alerts: tuple[AlertRule, ...] = ()

    def alert(self, name: str) -> AlertRule | None:
        return next((a for a in self.alerts if a.name == name), None)


class _Invalid(Exception):
    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key


# ---------------------------------------------------------------- value checks


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid(f"expected a number, got {describe(value)}")
    return float(value)


def _seconds(low: float, high: float) -> Callable[[object], float]:
    """A duration: a number of seconds or a string such as "30s", "5m", "1h", "1d"."""

    def check(value: object) -> float:
        if isinstance(value, str):
            try:
                seconds = parse_duration(value)
            except ConditionError as exc:
                raise _Invalid(str(exc)) from None
        else:
            try:
                seconds = _number(value)
            except _Invalid:
                raise _Invalid(f'expected seconds or a duration such as "30s", "1h"; got {describe(value)}') from None
        if not low <= seconds <= high:
            raise _Invalid(f"must be between {fmt_duration(low)} and {fmt_duration(high)}, got {fmt_duration(seconds)}")
        return seconds

    return check


def _share(value: object) -> float:
    number = _number(value)
    if not 0 <= number < 1:
        raise _Invalid(f"must be >= 0 and < 1 (a share: 0.25 is 25 %), got {value}")
    return number


def _int_at_least(low: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(f"expected an integer, got {describe(value)}")
        if value < low:
            raise _Invalid(f"must be >= {low}, got {value}")
        return value

    return check


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"expected true or false, got {describe(value)}")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected a string, got {describe(value)}")
    if not value.strip():
        raise _Invalid("must not be empty")
    if any(c in value for c in "\n\r\0"):
        raise _Invalid("must be a single line")
    return value


def _choice(*choices: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise _Invalid(f"must be one of: {', '.join(choices)} (got {describe(value)})")
        return value.lower()

    return check


def _looks_secret(name: str) -> bool:
    words = re.split(r"[_\-.]+", name.upper())
    if name.endswith("_env"):
        return False
    return any(w.endswith("TOKEN") or "SECRET" in w or "PASSW" in w for w in words) or name.upper().endswith(
        ("API_KEY", "APIKEY")
    )


def _unknown(key: str, known: Sequence[str], what: str = "key") -> str:
    message = f"unknown {what} (expected one of: {', '.join(known)})"
    close = difflib.get_close_matches(key, list(known), n=1)
    return f"{message}; did you mean '{close[0]}'?" if close else message


def _check_fields(data: Mapping[str, object], fields: Mapping[str, Callable[[object], object]], hint: str) -> dict:
    out = {}
    for key, value in data.items():
        check = fields.get(key)
        if check is None:
            raise _Invalid(_SECRET_MSG.format(hint=hint) if _looks_secret(key) else _unknown(key, list(fields)), key)
        try:
            out[key] = check(value)
        except _Invalid as exc:
            raise _Invalid(exc.message, key) from None
    return out


# ---------------------------------------------------------------- [health]

_HEALTH_FIELDS: dict[str, Callable[[object], object]] = {
    "interval": _seconds(1, 3600),
    "throttle_window": _seconds(10, 3600),
    "throttle_share": _share,
    "ecc_window": _seconds(60, 30 * 86400),
    "ecc_correctable": _int_at_least(1),
    "fault_window": _seconds(0, 30 * 86400),
    "pcie_gen": _boolean,
}
_SEVERITY_VALUES = (FAIL, WARN, OFF)


def _health_values(body: Mapping[str, object]) -> tuple[dict, dict[str, str]]:
    """(the [health] numbers, the [health.severity] overrides); _Invalid with a dotted key."""
    plain = {k: v for k, v in body.items() if k != "severity"}
    values = _check_fields(plain, _HEALTH_FIELDS, "the environment")
    severity: dict[str, str] = {}
    if "severity" in body:
        table = body["severity"]
        if not isinstance(table, dict):
            raise _Invalid(f'expected a table of rule = "fail" | "warn" | "off", got {describe(table)}', "severity")
        for rule, value in table.items():
            if rule not in RULES:
                raise _Invalid(_unknown(rule, list(RULES), "rule"), f"severity.{rule}")
            try:
                severity[rule] = _choice(*_SEVERITY_VALUES)(value)
            except _Invalid as exc:
                raise _Invalid(exc.message, f"severity.{rule}") from None
    return values, severity


# ---------------------------------------------------------------- [[alert]]


def _url(value: object) -> str:
    text = _text(value).strip()
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _Invalid(f"expected an http:// or https:// URL, got {describe(text)}")
    if parts.password is not None or parts.username is not None:
        raise _Invalid("a user or password in the URL: " + _SECRET_MSG.format(hint="token_env"))
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise _Invalid(f"bad port in {describe(text)}") from None
    return text


def _env_name(value: object) -> str:
    text = _text(value)
    if not _ENV_NAME_RE.match(text):
        raise _Invalid(f"expected the name of an environment variable, got {describe(text)}")
    return text


def _argv(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise _Invalid(
            f'expected an array of strings (argv, run without a shell), e.g. ["{value.split()[0] if value.split() else "cmd"}", "--flag"]'
        )
    if not isinstance(value, list) or not value:
        raise _Invalid(f"expected a non-empty array of strings (argv), got {describe(value)}")
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise _Invalid(f"item {i}: expected a string, got {describe(item)}")
        if "\0" in item:
            raise _Invalid(f"item {i}: contains a NUL byte")
    if not value[0].strip():
        raise _Invalid("item 1 (the program) must not be empty")
    return tuple(value)


def _node_names(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Invalid(f"expected an array of node names, got {describe(value)}")
    for i, item in enumerate(value, 1):
        if not isinstance(item, str) or not _NAME_RE.match(item):
            raise _Invalid(f"item {i}: {describe(item)} is not a node name")
    return tuple(value)


def _condition(value: object):
    text = _text(value)
    try:
        return parse_condition(text)
    except ConditionError as exc:
        raise _Invalid(f"{exc} (in {text!r})") from None


def _name(value: object) -> str:
    text = _text(value)
    if not _NAME_RE.match(text):
        raise _Invalid(f"{describe(text)} is not a rule name (letters, digits, '_', '.', '-')")
    return text


_ALERT_FIELDS: dict[str, Callable[[object], object]] = {
    "name": _name,
    "when": _condition,
    "command": _argv,
    "timeout": _seconds(0.1, 600),
    "webhook": _url,
    "webhook_env": _env_name,
    "token_env": _env_name,
    "nodes": _node_names,
    "severity": _choice(*SEVERITIES),
    "repeat_after": _seconds(0, 7 * 86400),
    "max_per_hour": _int_at_least(1),
}


def _alert(body: Mapping[str, object], file: str, line: int | None) -> AlertRule:
    values = _check_fields(body, _ALERT_FIELDS, "token_env or webhook_env")
    if "name" not in values:
        raise _Invalid('missing required key (every rule has a name, e.g. name = "gpu-hot")', "name")
    if "when" not in values:
        raise _Invalid('missing required key (the condition, e.g. when = "health == fail")', "when")
    if "webhook" in values and "webhook_env" in values:
        raise _Invalid("give webhook or webhook_env, not both", "webhook_env")
    if "token_env" in values and not ("webhook" in values or "webhook_env" in values):
        raise _Invalid("token_env is sent to a webhook; this rule has none", "token_env")
    condition = values.pop("when")
    return AlertRule(condition=condition, source=file, line=line, **values)


# ---------------------------------------------------------------- lines


_HEADER_RE = re.compile(r"\s*(\[\[?)\s*([^\]]*?)\s*\]\]?\s*(?:#.*)?$")
_KEY_RE = re.compile(r"""\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in re.findall(r"""\s*("[^"]*"|'[^']*'|[^.]+)""", dotted))


class _Lines:
    """Where [health] keys and each [[alert]] rule's keys are in a file (best effort)."""

    def __init__(self, text: str) -> None:
        self.keys: dict[tuple, int] = {}  # ("health", key...) / ("alert", n, key) -> line
        self.alerts: list[int] = []  # line of each [[alert]] header
        table: tuple = ()
        open_string: str | None = None
        for lineno, line in enumerate(text.split("\n"), 1):
            if open_string:
                if line.count(open_string) % 2:
                    open_string = None
                continue
            header = _HEADER_RE.match(line) if line.lstrip().startswith("[") else None
            if header:
                parts = _parts(header.group(2))
                if header.group(1) == "[[" and parts == ("alert",):
                    self.alerts.append(lineno)
                    table = ("alert", len(self.alerts))
                else:
                    table = parts
                self.keys.setdefault(table, lineno)
                continue
            found = _KEY_RE.match(line)
            if found:
                self.keys.setdefault((*table, *_parts(found.group(1))), lineno)
                rest = line[found.end() :]
                open_string = next((d for d in ('"""', "'''") if rest.count(d) % 2), None)

    def find(self, *path: object) -> int | None:
        for n in range(len(path), 0, -1):
            if path[:n] in self.keys:
                return self.keys[path[:n]]
        if path and path[0] == "alert":
            return self.keys.get(("alert",))  # alert = [{...}] inline
        return None


# ---------------------------------------------------------------- entry points


def _alert_label(body: object, n: int) -> str:
    name = body.get("name") if isinstance(body, dict) else None
    return f"rule {name!r}" if isinstance(name, str) and name.strip() else f"rule {n}"


def parse_health_tables(
    file: str, text: str, data: Mapping[str, object]
) -> tuple[dict, dict[str, str], list[AlertRule]]:
    """The [health] values, its severity overrides and the [[alert]] rules of one file.

    Raises ProfileError naming the file, the line, the table, the key and the rule."""
    lines = _Lines(text)
    values: dict = {}
    severity: dict[str, str] = {}
    alerts: list[AlertRule] = []
    if "health" in data:
        body = data["health"]
        if not isinstance(body, dict):
            raise ProfileError(file, None, "health", lines.find("health"), f"expected a table, got {describe(body)}")
        try:
            values, severity = _health_values(body)
        except _Invalid as exc:
            key = exc.key or ""
            path = tuple(key.split(".")) if key else ()
            table = "health.severity" if key.startswith("severity.") else "health"
            shown = key.split(".", 1)[1] if key.startswith("severity.") else (key or None)
            raise ProfileError(file, table, shown, lines.find("health", *path), exc.message) from None
    if "alert" in data:
        rules = data["alert"]
        if isinstance(rules, dict):
            raise ProfileError(
                file, "alert", None, lines.find("alert"), "write each rule as [[alert]] (an array of tables)"
            )
        if not isinstance(rules, list):
            raise ProfileError(
                file, None, "alert", lines.find("alert"), f"expected [[alert]] tables, got {describe(rules)}"
            )
        seen: dict[str, int | None] = {}
        for n, body in enumerate(rules, 1):
            header = lines.alerts[n - 1] if n <= len(lines.alerts) else lines.find("alert")
            label = _alert_label(body, n)
            if not isinstance(body, dict):
                raise ProfileError(file, "[alert]", None, header, f"{label}: expected a table, got {describe(body)}")
            try:
                rule = _alert(body, file, header)
            except _Invalid as exc:
                line = lines.find("alert", n, exc.key) if exc.key else header
                raise ProfileError(file, "[alert]", exc.key, line, f"{label}: {exc.message}") from None
            if rule.name in seen:
                raise ProfileError(
                    file,
                    "[alert]",
                    "name",
                    lines.find("alert", n, "name"),
                    f"rule {rule.name!r} is also defined at line {seen[rule.name]}",
                )
            seen[rule.name] = header
            alerts.append(rule)
    return values, severity, alerts


def check_section(file: str, text: str, section: str, value: object) -> None:
    """profiles.py's hook: check one of SECTIONS of one file (ProfileError when wrong)."""
    parse_health_tables(file, text, {section: value})


def _read(path: Path) -> tuple[str, dict]:
    try:
        text = read_bounded(path, TOML_FILE_LIMIT, "profile").decode("utf-8").removeprefix("\ufeff")
        return text, tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(str(path), None, None, None, f"cannot read the file again: {exc}") from None


def health_settings(profile_or_files: object) -> HealthSettings:
    """The [health] rules and [[alert]] rules of a loaded Profile (or of a list of files)."""
    files = getattr(profile_or_files, "files", profile_or_files)
    if not isinstance(files, (list, tuple)):
        raise TypeError("expected a Profile or a sequence of files")
    values: dict = {}
    severity: dict[str, str] = {}
    alerts: list[AlertRule] = []
    where: dict[str, str] = {}
    for file in files:
        text, data = _read(Path(file))
        if "health" not in data and "alert" not in data:
            continue
        file_values, file_severity, file_alerts = parse_health_tables(str(file), text, data)
        values.update(file_values)  # a later file overrides
        severity.update(file_severity)
        for rule in file_alerts:
            if rule.name in where:
                raise ProfileError(
                    str(file), "[alert]", "name", rule.line, f"rule {rule.name!r} is also defined in {where[rule.name]}"
                )
            where[rule.name] = str(file)
            alerts.append(rule)
    rules = replace(HealthRules(), **values, severity=tuple(severity.items()))
    return HealthSettings(rules, tuple(alerts))
