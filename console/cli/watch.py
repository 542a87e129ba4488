"""`rocm-console watch [--profile FILE | --demo]`: the fleet watched with no screen (docs/watch.md).

The loop is console/services/watcher.py; this face parses, sets up stderr (one line per
notable thing: journald reads it) and, with --install-systemd, writes the unit that keeps it
running."""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_profile_options,
    load_selected_profile,
)

if TYPE_CHECKING:
    from console.core.model import Profile
    from console.services.history import History

UNIT_NAME = "rocm-console-watch.service"


def add_parser(sub) -> list[argparse.ArgumentParser]:
    watch = sub.add_parser(
        "watch",
        help="watch the fleet with no screen: health, events and alerts around the clock (docs/watch.md)",
    )
    add_profile_options(watch)
    watch.add_argument(
        "--install-systemd",
        action="store_true",
        help=f"write a systemd unit ({UNIT_NAME}) that runs this watch, and print how to enable it",
    )
    watch.add_argument(
        "--user", action="store_true", help="with --install-systemd: a user service (~/.config/systemd/user)"
    )
    watch.add_argument("--output", metavar="PATH", help="with --install-systemd: write the unit here instead")
    watch.add_argument("--force", action="store_true", help="with --install-systemd: replace a different unit")
    watch.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus /metrics on this port (docs/watch.md, 'Prometheus')",
    )
    watch.add_argument(
        "--metrics-address",
        metavar="ADDR",
        help="with --metrics-port: the address to listen on (default 127.0.0.1)",
    )
    return [watch]


def run(args: argparse.Namespace) -> int:
    if not args.install_systemd and (args.user or args.output or args.force):
        raise UsageError("--user, --output and --force go with --install-systemd")
    port = getattr(args, "metrics_port", None)
    if getattr(args, "metrics_address", None) and port is None:
        raise UsageError("--metrics-address goes with --metrics-port")
    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"--metrics-port {port}: not a port (1-65535)")
    if args.install_systemd:
        return install_systemd(args)
    return watch(args)


# ---------------------------------------------------------------- the watch


def _setup_logging() -> None:
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("rocm-console watch: %(message)s"))
    root = logging.getLogger("console")
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    root.propagate = False
    for name in ("console.watch", "console.alerts", "console.health"):
        logging.getLogger(name).setLevel(logging.INFO)


def _profile_files(args: argparse.Namespace) -> list[str]:
    """The profile files this watch reads, absolute (what the heartbeat and a unit name)."""
    from console.cli.common import user_config_dir
    from console.core.profiles import discover_profile_paths

    if args.demo and not args.profile:
        return []
    paths = discover_profile_paths(args.profile or [], Path.cwd(), None if args.demo else user_config_dir())
    return [str(Path(p).resolve()) for p in paths]


def _history(profile: Profile) -> History:
    """The watcher's store, opened now: its migration line, or why it cannot be opened (then
    the events go to the data folder's file until it can, and the watch goes on), on stderr."""
    from console.services.events import EVENTS_FILE
    from console.services.history import History, face_origin

    def say(line: str) -> None:
        print(f"rocm-console watch: {line}", file=sys.stderr, flush=True)

    history = History.of(profile, say=say, origin=face_origin("watch"))
    if history.try_open() is None:
        say(f"{history.problem}; events go to {history.data_dir / EVENTS_FILE} until it can be opened")
    return history


def watch(args: argparse.Namespace) -> int:
    profile = load_selected_profile(args)
    files = _profile_files(args)
    import asyncio

    from console.core.health_profile import health_settings
    from console.services import demo as demo_life

    settings = health_settings(profile)
    from console.core.alerts import unknown_nodes

    for line in unknown_nodes(settings.alerts, [n.name for n in profile.nodes]):
        print(f"rocm-console: warning: {line}", file=sys.stderr)
    # Every local process this watch starts (the agents of local and simulated nodes) carries
    # its lifeline and ends by itself if the watch is killed; a clean end stops them at once.
    token = demo_life.claim_lifeline()
    if args.demo:
        demo_life.use_private_state()  # the demo's nodes keep their state in this watch's own folder
    _setup_logging()
    from console.services.watcher import Watcher, WatcherBusy, install_signals

    history = _history(profile)
    watcher = Watcher(profile, settings, history=history, profile_files=(["--demo"] if args.demo else []) + files)
    try:
        watcher.lock()
    except WatcherBusy as exc:
        print(f"rocm-console: {exc}", file=sys.stderr)
        history.close()
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"rocm-console: {watcher.folder}: cannot lock: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        history.close()
        return EXIT_FAILED

    async def main() -> None:
        install_signals(watcher)
        await watcher.run()

    try:
        if args.metrics_port is not None:
            address = args.metrics_address or "127.0.0.1"
            try:
                watcher.serve_metrics(args.metrics_port, address)
            except (OSError, ValueError) as exc:  # in use, an address not of this host, a bad name
                why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                print(
                    f"rocm-console: --metrics-port: cannot listen on {address}:{args.metrics_port}: {why}",
                    file=sys.stderr,
                )
                return EXIT_BAD_INPUT
            print(f"rocm-console watch: metrics on http://{address}:{args.metrics_port}/metrics", file=sys.stderr)
        asyncio.run(main())
    finally:
        history.close()
        demo_life.stop_bound(token)
        if args.demo:
            demo_life.remove_private_state()  # after its processes: they write there until they end
    return EXIT_OK


# ---------------------------------------------------------------- the systemd unit


def _exec_argv() -> list[str]:
    """This rocm-console, absolute: the script on the line, else the one on PATH, else python -m."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "rocm-console" and script.exists():
        return [str(script.resolve())]
    found = shutil.which("rocm-console")
    if found:
        return [str(Path(found).resolve())]
    return [str(Path(sys.executable).resolve()), "-m", "console"]


def _systemd_word(word: str) -> str:
    """One ExecStart word as systemd reads it: quoted when needed, % doubled."""
    word = word.replace("%", "%%")
    if word and not any(c in word for c in " \t\"'\\;$"):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_text(argv: list[str], *, user: bool, env_file: str, run_as: str | None) -> str:
    lines = [
        "[Unit]",
        "Description=rocm-console watch: the GPU fleet's health, events and alerts",
        "Documentation=https://github.com/rocm-console/rocm-console/blob/main/docs/watch.md",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={' '.join(_systemd_word(w) for w in argv)}",
        "# Secrets (webhook URLs, tokens, SSH agent) as KEY=VALUE lines, mode 0600; '-': optional",
        f"EnvironmentFile=-{env_file}",
        "Restart=on-failure",
        "RestartSec=10",
        # SIGTERM first: the watcher ends its agents and writes its last states
        "KillSignal=SIGTERM",
        "TimeoutStopSec=30",
    ]
    if run_as:
        lines.append(f"User={run_as}")
    lines += ["", "[Install]", f"WantedBy={'default.target' if user else 'multi-user.target'}", ""]
    return "\n".join(lines)


def install_systemd(args: argparse.Namespace) -> int:
    load_selected_profile(args)  # a profile that does not load is refused now, not at 3 am
    argv = [*_exec_argv(), "watch"]
    if args.demo:
        argv.append("--demo")
    for path in _profile_files(args):
        argv += ["--profile", path]
    if args.metrics_port is not None:  # the service serves what this command line asked for
        argv += ["--metrics-port", str(args.metrics_port)]
        if args.metrics_address:
            argv += ["--metrics-address", args.metrics_address]
    if args.user:
        default = Path.home() / ".config" / "systemd" / "user" / UNIT_NAME
        env_file = "%h/.config/rocm-console/watch.env"
        run_as = None
    else:
        default = Path("/etc/systemd/system") / UNIT_NAME
        env_file = "/etc/rocm-console/watch.env"
        # the user whose SSH keys and data folder the watch uses, not root
        run_as = os.environ.get("SUDO_USER") or getpass.getuser()
    target = Path(args.output).expanduser() if args.output else default
    text = unit_text(argv, user=args.user, env_file=env_file, run_as=run_as)
    try:
        existing = target.read_text(encoding="utf-8") if target.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        print(
            f"rocm-console: {target}: cannot read: {getattr(exc, 'strerror', None) or type(exc).__name__}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if existing is not None and existing != text and not args.force:
        print(f"rocm-console: {target} exists and differs from this watch's unit: --force replaces it", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        hint = " (run it with sudo, or pass --user)" if not args.user and not args.output else ""
        print(f"rocm-console: {target}: cannot write: {exc.strerror or type(exc).__name__}{hint}", file=sys.stderr)
        return EXIT_FAILED
    scope = ["--user"] if args.user else []
    print(f"wrote {target}")
    print("enable and start it with:")
    print("  " + shlex.join(["systemctl", *scope, "daemon-reload"]))
    print("  " + shlex.join(["systemctl", *scope, "enable", "--now", UNIT_NAME]))
    return EXIT_OK
