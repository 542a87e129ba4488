"""`rocm-console web [--port P] [--token-file PATH]`: the same app in a browser, served by
textual-serve on 127.0.0.1, behind a secret (console/services/web_guard.py, docs/web.md).

Each browser tab gets its own console process (`python -m console` with the same profile
options). The server listens on loopback only and lets in only requests that carry the token
printed at start (or its cookie), come from its own origin and name it in their Host header:
an SSH tunnel (`ssh -L 8088:127.0.0.1:8088`) brings it further.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING

from console.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_profile_options, load_selected_profile, say_error

if TYPE_CHECKING:
    from console.core.model import Profile

HOST = "127.0.0.1"  # never another address: the console controls GPU nodes
DEFAULT_PORT = 8088


def add_parser(sub) -> list[argparse.ArgumentParser]:
    web = sub.add_parser("web", help="serve the console to a browser on 127.0.0.1 (textual-serve), behind a token")
    add_profile_options(web)
    web.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    web.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the access token from PATH (one line, at least 16 of A-Z a-z 0-9 . _ ~ -) "
        "instead of making a new one at every start",
    )
    return [web]


def app_command(args: argparse.Namespace) -> str:
    """The command each browser session runs: this console, with the same profile options."""
    argv = [sys.executable, "-m", "console"]
    if getattr(args, "demo", False):
        argv.append("--demo")
    for path in getattr(args, "profile", None) or []:
        argv += ["--profile", path]
    argv += ["--interval", f"{getattr(args, 'interval', 1.0):g}"]
    return shlex.join(argv)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be between 1 and 65535")
    try:
        from textual_serve.server import Server

        from console.services import web_guard
    except ImportError:
        say_error("web: textual-serve is not installed (pip install textual-serve)")
        return EXIT_FAILED
    token_file = getattr(args, "token_file", None)
    if token_file is not None:
        try:
            token = web_guard.read_token_file(token_file)
        except web_guard.TokenFileError as exc:
            raise UsageError(str(exc)) from None
        if web_guard.readable_by_others(token_file):
            say_error(f"web: warning: {token_file} is readable by other users (chmod 600 {shlex.quote(token_file)})")
    else:
        token = web_guard.new_token()
    profile = load_selected_profile(args)  # a bad profile is one line here, not a broken page later
    if not getattr(args, "demo", False):  # each demo session keeps its own store
        open_history(profile)
    guard = web_guard.Guard(token=token, host=HOST, port=args.port)

    class GuardedServer(Server):
        """textual-serve's server with the guard in front of every route (no fork of it)."""

        async def _make_app(self):
            return guard.install(await super()._make_app())

        async def on_startup(self, app) -> None:
            pass  # its banner; the URL is printed once the port is bound (announce)

    def announce(*_: object) -> None:
        # Printed once, after the port is bound; the access log is off, so the token is not
        # written again for every request.
        shown = guard.url(f"<the token in {token_file}>") if token_file is not None else guard.url()
        print(f"rocm-console web: serving on {guard.origin}; open this URL (it holds the access token):", flush=True)
        print(f"    {shown}", flush=True)
        print("Anyone with this URL controls the console. Ctrl+C stops the server.", flush=True)

    server = GuardedServer(app_command(args), host=HOST, port=args.port, title="rocm-console")
    try:
        _serve(server, announce)
    except OSError as exc:  # the port is taken, most often
        say_error(f"web: cannot listen on {HOST}:{args.port}: {exc.strerror or exc}")
        return EXIT_FAILED
    return EXIT_OK


def open_history(profile: Profile) -> None:
    """The store every browser session's console uses, opened once before serving: a first
    start on an old data folder moves its files in now, not in the first session, and a store
    that cannot be opened is said once (each console then starts without its history)."""
    from console.services.history import History, face_origin

    history = History.of(
        profile, say=lambda line: print(f"rocm-console web: {line}", flush=True), origin=face_origin("web")
    )
    try:
        if history.try_open() is None:
            say_error(f"web: warning: history unavailable: {history.problem} (the consoles start without it)")
    finally:
        history.close()


def _serve(server, announce) -> None:
    """textual-serve's Server.serve, with the access log off and the URL printed after binding."""
    import asyncio
    import signal

    from aiohttp import web

    server.initialize_logging()  # its handler: a session's errors reach this terminal
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.request_exit)
    try:
        web.run_app(
            server._make_app(),
            host=server.host,
            port=server.port,
            handle_signals=False,
            loop=loop,
            access_log=None,
            print=announce,
        )
    finally:
        if not loop.is_closed():
            loop.close()
