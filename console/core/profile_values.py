"""The value checks of profile keys: each takes a TOML value and returns it checked (or
raises Invalid with what was expected). console/core/profiles.py builds its tables from them;
apart so that the loader stays about tables, files and merging."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from console.core import bounds
from console.core.serve.rules import parse_vllm_range
from console.core.toml_source import Invalid, describe

# Flags that carry secrets on a vllm command line.
SECRET_FLAGS = ("--hf-token", "--api-key")
SECRET_MSG = "secrets do not belong in profiles; export it in the environment"
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")


Check = Callable[[object], object]


def expected_error(what: str, value: object) -> Invalid:
    return Invalid(f"expected {what}, got {describe(value)}")


def is_int(value: object) -> bool:
    return type(value) is int  # bool is an int subclass; TOML true is not 1


def is_number(value: object) -> bool:
    return is_int(value) or type(value) is float


def as_text(value: object) -> str:
    """A non-empty, single-line string (it may end up on a command line)."""
    if not isinstance(value, str):
        raise expected_error("a string", value)
    if not value.strip():
        raise Invalid("must not be empty")
    if any(c in value for c in "\n\r\0"):
        raise Invalid("must be a single line")
    return value


def token(value: object) -> str:
    """A non-empty string without spaces (host names, users, images)."""
    text = as_text(value)
    if any(c.isspace() for c in text):
        raise Invalid(f"must not contain spaces, got {describe(text)}")
    return text


def token_matching(value: object, pattern: re.Pattern[str], expected: str) -> str:
    """A token the pattern matches in full; `expected` names what it must be."""
    text = token(value)
    if not pattern.match(text):
        raise Invalid(f"expected {expected}, got {describe(text)}")
    return text


def boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise expected_error("true or false", value)
    return value


def integer(value: object) -> int:
    if not is_int(value):
        raise expected_error("an integer", value)
    return value  # type: ignore[return-value]


def int_range(low: int, high: int | None = None) -> Callable[[object], int]:
    def check(value: object) -> int:
        number = integer(value)
        if number < low or (high is not None and number > high):
            bounds = f"{low}..{high}" if high is not None else f">= {low}"
            raise Invalid(f"must be {bounds}, got {number}")
        return number

    return check


port = int_range(1, 65535)


def int_up_to(low: int, high: int) -> Callable[[object], int]:
    """An integer >= low with a documented upper bound (console/core/bounds.py), each said apart."""
    at_least = int_range(low)

    def check(value: object) -> int:
        number = at_least(value)
        if number > high:
            raise Invalid(f"must be at most {high}, got {number}")
        return number

    return check


def as_number(value: object) -> float:
    if not is_number(value):
        raise expected_error("a number", value)
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise Invalid(f"must be a finite number, got {value}")
    return number


def positive(value: object) -> float:
    number = as_number(value)
    if number <= 0:
        raise Invalid(f"must be > 0, got {value}")
    return number


def range_ratio(value: object) -> float:
    number = as_number(value)
    if not 0 <= number < 1:  # vLLM's random dataset asserts 0 <= ratio < 1
        raise Invalid(f"must be >= 0 and < 1, got {value}")
    return number


def choice(*choices: str) -> Check:
    """One of choices, matched without regard to case, stored as spelled here."""
    by_fold = {c.casefold(): c for c in choices}

    def check(value: object) -> str:
        if not isinstance(value, str):
            raise expected_error("a string", value)
        if value.casefold() not in by_fold:
            raise Invalid(f"must be one of: {', '.join(choices)} (got {describe(value)})")
        return by_fold[value.casefold()]

    return check


def string_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise expected_error("an array of strings", value)
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise Invalid(f"item {i}: expected a string, got {describe(item)}")
    return tuple(value)


def arg_list(value: object) -> tuple[str, ...]:
    args = string_list(value)
    for arg in args:
        if flag(arg) in SECRET_FLAGS:
            raise Invalid(f"{arg.split('=', 1)[0]}: {SECRET_MSG}")
    return args


def flag(arg: str) -> str:
    """'--tensor_parallel_size=8' -> '--tensor-parallel-size' (vLLM accepts both)."""
    name = arg.split("=", 1)[0]
    return name[:2] + name[2:].replace("_", "-") if name.startswith("--") else name


def looks_secret(name: str) -> bool:
    """HF_TOKEN, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, OPENAI_API_KEY...

    Word-wise so TOKENIZERS_PARALLELISM or MAX_TOKENS stay allowed.
    """
    words = re.split(r"[_\-.]+", name.upper())
    if any(w.endswith("TOKEN") or "SECRET" in w or "PASSW" in w for w in words):
        return True
    return name.upper().replace("-", "_").endswith(("API_KEY", "APIKEY"))


def env(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise expected_error('a table of NAME = "value"', value)
    pairs = []
    for name, item in value.items():
        if looks_secret(name):
            raise Invalid(SECRET_MSG, (name,))
        if not ENV_NAME_RE.match(name):
            raise Invalid("not a valid environment variable name", (name,))
        if not isinstance(item, str):
            hint = f'; write "{item}"' if is_number(item) else ""
            raise Invalid(f"expected a string, got {describe(item)}{hint}", (name,))
        pairs.append((name, item))
    return tuple(pairs)


def env_by_vllm(value: object) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """{ "<0.12" = { VLLM_USE_TRITON_FLASH_ATTN = "0" } }: env only the vLLM releases in a range know."""
    if not isinstance(value, dict):
        raise expected_error('a table of "<0.12" = { NAME = "value" }', value)
    out = []
    for spec, table in value.items():
        try:
            parse_vllm_range(spec)
        except ValueError as exc:
            raise Invalid(str(exc), (spec,)) from None
        try:
            pairs = env(table)
        except Invalid as exc:
            raise Invalid(exc.message, (spec, *exc.key)) from None
        out.append((spec, pairs))
    return tuple(out)


BIND_ADDRESSES = ("127.0.0.1", "0.0.0.0")


def bind_address(value: object) -> str:
    """Where vLLM listens on the node: 127.0.0.1 (the node only; the console and its benchmark
    clients reach it there, through SSH) or 0.0.0.0 (every address). Another address would leave
    the console's own health checks and clients, which dial 127.0.0.1 on the node, outside."""
    text = token(value)
    if text not in BIND_ADDRESSES:
        raise Invalid(
            f"expected 127.0.0.1 (the node only, reached through SSH) or 0.0.0.0 (every address), got {describe(text)}"
        )
    return text


def variable_name(value: object) -> str:
    """The name of an environment variable (that holds a secret), never the secret itself."""
    return token_matching(value, ENV_NAME_RE, "the name of an environment variable (e.g. VLLM_API_KEY)")


def request_rate(value: object) -> float | None:
    """Requests per second; "inf" (or TOML inf) = all at once, stored as None."""
    if isinstance(value, str) and value.strip().casefold() == "inf":
        return None
    if type(value) is float and math.isinf(value) and value > 0:
        return None
    if isinstance(value, str):
        raise Invalid(f'expected a number or "inf", got {describe(value)}')
    return positive_up_to(bounds.REQUEST_RATE)(value)


def positive_up_to(high: float) -> Callable[[object], float]:
    def check(value: object) -> float:
        number = positive(value)
        if number > high:
            raise Invalid(f"must be at most {high:g}, got {value}")
        return number

    return check


def concurrency(value: object) -> tuple[int, ...]:
    """One limit, or a list of them for a sweep."""
    check = int_up_to(1, bounds.CONCURRENCY)
    if not isinstance(value, list):
        if not is_int(value):
            raise expected_error("an integer or an array of integers", value)
        return (check(value),)
    if not value:
        raise Invalid("must list at least one value")
    out = []
    for i, item in enumerate(value, 1):
        try:
            out.append(check(item))
        except Invalid as exc:
            raise Invalid(f"item {i}: {exc.message}") from None
    return tuple(out)


def percentile_metrics(value: object) -> str:
    text = token(value)
    bad = [m for m in text.split(",") if m not in PERCENTILE_METRICS]
    if bad:
        raise Invalid(f"unknown metric {bad[0]!r} (comma-separated, from: {', '.join(PERCENTILE_METRICS)})")
    return text


def metric_percentiles(value: object) -> str:
    text = token(value)
    for part in text.split(","):
        try:
            number = float(part)
        except ValueError:
            number = math.nan
        if not 0 < number <= 100:
            raise Invalid(f"expected comma-separated percentiles in (0, 100], got {part!r}")
    return text
