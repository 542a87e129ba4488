"""What every command group shares: profile and node selection, KEY=VALUE pairs, exit codes and
the one-line error a user sees for bad input (exit 2) or a failure (exit 1)."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable, Sequence

from console.core.text import key_value, printable

if TYPE_CHECKING:  # the records' module is loaded by the profile reader, where a command needs it
    from console.core.model import NodeSpec, Profile

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_PARTIAL = EXIT_FAILED  # `status`: some node did not answer


def __getattr__(name: str) -> Any:
    """PRESETS_PATH (the serve presets taken from AMD's guides, always available), found on
    first use: the profile reader (TOML, checks) is imported only by commands that read a
    profile, not by `results list` over the store (its fresh process is budgeted)."""
    if name == "PRESETS_PATH":
        return presets_path()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def presets_path() -> Path:
    from console.core.profiles import PROFILES_DIR

    return PROFILES_DIR / "presets.toml"


class UsageError(Exception):
    """Bad input from the user: one line on stderr, exit 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with the console's promise for bad input: one line on stderr, exit 2.

    Subparsers inherit the class (add_subparsers uses the parent's type), so every
    command's missing argument or bad value reads `rocm-console serve stop: ...`."""

    def error(self, message: str):
        text = " ".join(message.split())
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {text} (see {self.prog} --help)\n")


def _number_arg(kind: type, what: str, low: float | None, high: float | None, strict: bool) -> Callable[[str], Any]:
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}")
        if low is not None and (value <= low if strict else value < low):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}")
        return value

    parse.__name__ = what  # argparse names the type in some messages
    return parse


# argparse `type=` checks for numeric options: a bad value is one line naming the option.
port_arg = _number_arg(int, "a port number 1-65535", 1, 65535, strict=False)
positive_int = _number_arg(int, "a whole number >= 1", 1, None, strict=False)
non_negative_int = _number_arg(int, "a whole number >= 0", 0, None, strict=False)
positive_seconds = _number_arg(float, "a number of seconds > 0", 0, None, strict=True)


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


def add_actions(sub: Any, name: str, help: str) -> Any:
    """A command group, `rocm-console NAME ACTION ...`: its parser and its required actions
    (args.NAME_command names the one given)."""
    group = sub.add_parser(name, help=help)
    ops = group.add_subparsers(dest=f"{name}_command", metavar="ACTION")
    ops.required = True
    return ops


def add_command_options(parsers: Iterable[argparse.ArgumentParser], *, json_help: str = "print JSON") -> None:
    """What every command of a group takes: --json and the profile options."""
    for p in parsers:
        p.add_argument("--json", action="store_true", help=json_help)
        add_profile_options(p)


def user_config_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_path("rocm-console"))


def load_selected_profile(args: argparse.Namespace, notes: list[str] | None = None) -> Profile:
    """The profile a command runs on. With --demo: the demo's nodes plus what --profile files add
    (services/demo.py), what cannot apply said in one line: on stderr, or into `notes` (the TUI's)."""
    from console.core.profiles import demo_profile_path, discover_profile_paths, load_profile

    presets = presets_path()
    builtin = [presets] if presets.exists() else []
    if args.demo:
        if not args.profile:
            return load_profile([*builtin, demo_profile_path()])
        from console.services.demo import demo_profile

        profile, note = demo_profile(args.profile, builtin)
        if note and notes is not None:
            notes.append(note)
        elif note:
            print(f"rocm-console: {note}", file=sys.stderr)
        return profile
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


_SET_KEY_RE = re.compile(r"-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*\Z")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_pairs(items: Sequence[str], flag: str, *, env: bool | None = None) -> dict[str, str]:
    """`--set KEY=VALUE` (repeated) as a dict.

    A key given twice is refused, not "the last wins": `--set max_model_len=1 --set
    max-model-len=2` names one flag twice (dashes, underscores and leading `--` are one
    spelling). `--env` (env=True, the default for that flag) takes environment variable
    names, compared exactly. Values are checked by the command that reads them."""
    env = flag == "--env" if env is None else env
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for item in items:
        pair = key_value(item)
        if pair is None:
            raise UsageError(f"{flag} {item!r}: expected KEY=VALUE")
        key, value = pair
        if env:
            if not _ENV_NAME_RE.match(key):
                raise UsageError(f"{flag} {key}: not an environment variable name (letters, digits and _)")
            norm = key
        else:
            if not _SET_KEY_RE.match(key):
                raise UsageError(f"{flag} {key!r}: not a key name (letters, digits, _ and -)")
            norm = key.lstrip("-").replace("-", "_")
        if norm in seen:
            also = "" if seen[norm] == key else f" (also as {seen[norm]})"
            raise UsageError(f"{flag} {key}: given twice{also}; give each key once")
        seen[norm] = key
        out[key] = value
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


def run_command(
    args: argparse.Namespace,
    action: Callable[[argparse.Namespace, Profile], Coroutine[Any, Any, int]],
    failures: tuple[type[BaseException], ...] = (),
) -> int:
    """One command of a group, the way every group runs one: the selected profile, then the
    action on it (a coroutine), guarded: bad input exit 2, an expected failure exit 1."""
    import asyncio

    profile = load_selected_profile(args)
    return guarded(lambda: asyncio.run(action(args, profile)), failures)
