"""The profile's `[store]` table (docs/store.md): `url`, the team's PostgreSQL. Read by
console/core/profiles.py; kept here so that the rule of the url lives beside the store's."""

from __future__ import annotations

from console.core.store.target import check_store_url
from console.core.toml_source import TomlContext, describe

__all__ = ["STORE_KEYS", "store_url"]

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
