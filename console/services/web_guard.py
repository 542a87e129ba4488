"""The gate in front of `rocm-console web`: a secret per server start, its cookie, and the
Origin and Host checks (docs/web.md says what this protects and what it does not).

textual-serve serves the page and the WebSocket that drives a console process, and has no
login of its own; the console stops instances and switches partitions. The `Guard` wraps
textual-serve's aiohttp application with one middleware instead of changing textual-serve:

* every request (page, static file, download, WebSocket) needs the token, in the query
  (`?token=…`, the URL printed at start) or in the cookie a first visit with it sets
  (HttpOnly, SameSite=Strict); without it: 403;
* a request whose `Host` is not the bound address:port is refused (DNS rebinding: a name
  of the attacker's resolving to 127.0.0.1 makes the browser send that name);
* a request that carries an `Origin` (every WebSocket a browser opens, every cross-origin
  fetch) must come from the server's own origin: a page of another port on 127.0.0.1 is
  the same *site*, so the browser sends it the cookie; only the Origin tells it apart.
"""

from __future__ import annotations

import hmac
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from console.core.bounded_file import TOKEN_FILE_LIMIT, FileLimitError, read_bounded

TOKEN_BYTES = 32  # secrets.token_urlsafe: 43 characters
MIN_TOKEN_LENGTH = 16  # a token file's; shorter is guessable
# URL- and cookie-safe as is: the token goes into the printed URL and the cookie unquoted.
TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")

# Every answer: never inside another page's frame (a click-jacking page on another local
# port is the same site, so the cookie would go along), never the URL in a Referer.
SAFE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


class TokenFileError(ValueError):
    """A --token-file that cannot give a token: the message is the one line the user sees."""


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def read_token_file(path: str | Path) -> str:
    """The token in `path`: one line, URL-safe characters, at least MIN_TOKEN_LENGTH of them."""
    where = f"--token-file {path}"
    try:
        data = read_bounded(path, TOKEN_FILE_LIMIT, "token file")  # a FIFO or a device: one line
    except FileNotFoundError:
        raise TokenFileError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise TokenFileError(f"{where}: is a directory, not a file") from None
    except PermissionError:
        raise TokenFileError(f"{where}: cannot read it (permission denied)") from None
    except FileLimitError as exc:
        raise TokenFileError(f"{where}: {exc.reason}") from None
    except OSError as exc:
        raise TokenFileError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenFileError(f"{where}: not UTF-8 text") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise TokenFileError(f"{where}: is empty (write the token on its one line)")
    if len(lines) > 1:
        raise TokenFileError(f"{where}: holds {len(lines)} lines; the token is one line")
    token = lines[0]
    if not TOKEN_CHARS.fullmatch(token):
        raise TokenFileError(f"{where}: the token may hold only letters, digits and . _ ~ -")
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenFileError(f"{where}: the token has {len(token)} characters; at least {MIN_TOKEN_LENGTH} are needed")
    return token


def readable_by_others(path: str | Path) -> bool:
    try:
        return bool(Path(path).stat().st_mode & (stat.S_IRGRP | stat.S_IROTH))
    except OSError:
        return False


@dataclass(frozen=True)
class Guard:
    """The checks for one server: its token and the address:port it is bound to."""

    token: str
    host: str
    port: int

    @property
    def authority(self) -> str:
        return self.host if self.port == 80 else f"{self.host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"http://{self.authority}"

    @property
    def cookie(self) -> str:
        # Browsers keep cookies per host, not per port: two servers (two ports) need two names,
        # or the second one's cookie would replace the first one's.
        return f"rocm-console-token-{self.port}"

    def url(self, token: str | None = None) -> str:
        """The URL to open: the token in the query (`token` shown instead, e.g. a placeholder)."""
        return f"{self.origin}/?token={self.token if token is None else token}"

    def token_ok(self, value: str | None) -> bool:
        # Bytes: compare_digest refuses non-ASCII str, and a header may hold anything.
        return value is not None and hmac.compare_digest(
            value.encode("utf-8", "surrogateescape"), self.token.encode("utf-8")
        )

    def refusal(self, request: web.Request) -> str | None:
        """Why `request` is refused (one line), or None when it may pass."""
        if request.headers.get("Host") != self.authority:
            return f"the Host header is not {self.authority} (open the URL rocm-console web printed)"
        origin = request.headers.get("Origin")
        if origin is not None and origin != self.origin:
            return f"a page of another origin may not use this console (only {self.origin})"
        if not (self.token_ok(request.query.get("token")) or self.token_ok(request.cookies.get(self.cookie))):
            return f"no valid token: open the URL rocm-console web printed ({self.origin}/?token=…)"
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler) -> web.StreamResponse:
        reason = self.refusal(request)
        if reason is not None:
            return web.Response(status=403, text=f"403 Forbidden: {reason}\n")
        if (
            request.method == "GET"
            and "token" in request.query
            and self.token_ok(request.query.get("token"))
            and request.headers.get("Upgrade", "").lower() != "websocket"
        ):
            # The first visit: the token goes into the cookie, and out of the address bar (and
            # so out of the history and of anything the page loads).
            rest = [(k, v) for k, v in request.query.items() if k != "token"]
            found = web.Response(
                status=302, headers={"Location": str(request.rel_url.with_query(rest)), "Cache-Control": "no-store"}
            )
            found.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict", path="/")
            return found
        return await handler(request)

    async def _safe_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        for name, value in SAFE_HEADERS.items():
            response.headers.setdefault(name, value)

    def install(self, app: web.Application) -> web.Application:
        """Put the checks in front of every route of `app` (before it starts)."""
        app.middlewares.insert(0, self.middleware)
        app.on_response_prepare.append(self._safe_headers)
        return app
