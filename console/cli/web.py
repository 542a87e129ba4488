"""`rocm-console web [--port P]`: the same app in a browser, served by textual-serve on 127.0.0.1.

Each browser tab gets its own console process (`python -m console` with the same profile
options); the server listens on loopback only: an SSH tunnel (`ssh -L 8088:127.0.0.1:8088`)
or a reverse proxy with its own authentication brings it further.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from console.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_profile_options, load_selected_profile, say_error

HOST = "127.0.0.1"  # never another address: the console controls GPU nodes
DEFAULT_PORT = 8088


def add_parser(sub) -> list[argparse.ArgumentParser]:
    web = sub.add_parser("web", help="serve the console to a browser on 127.0.0.1 (textual-serve)")
    add_profile_options(web)
    web.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
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
    load_selected_profile(args)  # a bad profile is one line here, not a broken page later
    try:
        from textual_serve.server import Server
    except ImportError:
        say_error("web: textual-serve is not installed (pip install textual-serve)")
        return EXIT_FAILED
    server = Server(app_command(args), host=HOST, port=args.port, title="rocm-console")
    try:
        server.serve()
    except OSError as exc:  # the port is taken, most often
        say_error(f"web: cannot listen on {HOST}:{args.port}: {exc.strerror or exc}")
        return EXIT_FAILED
    return EXIT_OK
