"""The profile's `[store]` table (docs/store.md): `url`, the team's PostgreSQL. Read by
console/core/profiles.py; kept here so that the rule of the url lives beside the store's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from console.core.store.target import check_store_url
from console.core.toml_source import TomlContext, describe, parse_toml, read_text

__all__ = ["STORE_KEYS", "store_url", "store_url_in"]

STORE_KEYS = ("url",)


def store_url(ctx: TomlContext, body: dict, earlier: tuple[str, str] | None) -> tuple[str, str]:
    """(the url, this file); ProfileError naming the file, [store] and the key at fault (a
    password in the url, another scheme, an unknown key, a second [store] in another file)."""
    for key in body:
        if key not in STORE_KEYS:
            hint = " (a password belongs in PGPASSWORD or ~/.pgpass)" if "pass" in key.lower() else ""
            raise ctx.error(("store",), (key,), f"unknown key (known: {', '.join(STORE_KEYS)}){hint}")
    value = body.get("url")
    if not isinstance(value, str):
        what = "missing required key" if value is None else f"expected a string, got {describe(value)}"
        raise ctx.error(("store",), ("url",), f"{what} (postgresql://user@host:port/database)")
    try:
        url = check_store_url(value)
    except ValueError as exc:
        raise ctx.error(("store",), ("url",), str(exc)) from None
    if earlier is not None:
        raise ctx.error(("store",), (), f"[store] is also defined in {earlier[1]}")
    return url, ctx.file


def store_url_in(paths: Sequence[Path]) -> str | None:
    """The `[store] url` of these profile files, the rest of them unread: what a command that
    needs only the store (results, store) takes from a profile, without loading the profile
    model (~40 ms of a fresh `results list`). ProfileError as load_profile gives it: the file,
    [store] and the key at fault, or the line of a file that is not TOML."""
    found: tuple[str, str] | None = None
    for path in paths:
        ctx = TomlContext(str(path), read_text(path, str(path)))
        body = parse_toml(ctx).get("store")
        if body is None:
            continue
        if not isinstance(body, dict):
            raise ctx.error(("store",), (), f"expected a table, got {describe(body)}")
        found = store_url(ctx, body, found)
    return found[0] if found else None
