"""What every command group shares: profile and node selection, KEY=VALUE pairs, exit codes and
the one-line error a user sees for bad input (exit 2) or a failure (exit 1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from console.core.model import NodeSpec, Profile
from console.core.profiles import PROFILES_DIR, demo_profile_path, discover_profile_paths, load_profile
from console.core.text import printable

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_PARTIAL = EXIT_FAILED  # `status`: some node did not answer
# Serve presets taken from AMD's guides, always available.
PRESETS_PATH = PROFILES_DIR / "presets.toml"


class UsageError(Exception):
    """Bad input from the user: one line on stderr, exit 2."""


def add_profile_options(parser: argparse.ArgumentParser, *, suppress: bool = True) -> None:
    """--profile and --demo; on subcommands (suppress) they do not overwrite the top-level values."""
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--profile",
        action="append",
        metavar="FILE",
        default=default,
        help="profile TOML file (repeatable); default: ./profiles/*.toml, then the user config dir",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="use the simulated demo nodes (no GPU, no SSH)",
    )


def user_config_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_path("rocm-console"))


def load_selected_profile(args: argparse.Namespace) -> Profile:
    builtin = [PRESETS_PATH] if PRESETS_PATH.exists() else []
    if args.demo:
        return load_profile([*builtin, demo_profile_path()])
    paths = discover_profile_paths(args.profile or [], Path.cwd(), user_config_dir())
    profile = load_profile([*builtin, *paths])
    if not profile.nodes:
        searched = ", ".join(str(p) for p in paths) or "./profiles/*.toml, " + str(user_config_dir())
        raise UsageError(f"no nodes defined (searched {searched}); pass --profile FILE or try --demo")
    return profile


def _known(profile: Profile) -> str:
    return ", ".join(n.name for n in profile.nodes) or "none"


def select_nodes(profile: Profile, names: Sequence[str] | None) -> list[NodeSpec]:
    """The named nodes (each once), or every node when none is named."""
    if not names:
        return list(profile.nodes)
    known = {n.name: n for n in profile.nodes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown node {unknown[0]!r} (known: {_known(profile)})")
    return [known[n] for n in dict.fromkeys(names)]


def pick_node(profile: Profile, name: str | None) -> NodeSpec:
    """The one node a command acts on: the named one, or the profile's only node."""
    if name:
        node = profile.node(name)
        if node is None:
            raise UsageError(f"unknown node {name!r} (known: {_known(profile)})")
        return node
    if len(profile.nodes) != 1:
        raise UsageError(
            f"--node is needed: the profile has {len(profile.nodes)} nodes ({', '.join(n.name for n in profile.nodes)})"
        )
    return profile.nodes[0]


def parse_pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    """`--set KEY=VALUE` (repeated) as a dict; the last value of a key wins."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def say_error(message: object) -> None:
    print(f"rocm-console: {printable(message)}", file=sys.stderr)  # often quotes a node or a file


def guarded(action: Callable[[], int], failures: tuple[type[BaseException], ...] = ()) -> int:
    """Run one command: bad input is exit 2 and an expected failure exit 1, each one line on stderr."""
    try:
        return action()
    except UsageError as exc:
        say_error(exc)
        return EXIT_BAD_INPUT
    except failures as exc:
        say_error(exc)
        return EXIT_FAILED
