"""A command's one History (console/services/history.py): the store its profile names (`[store]
url`, a team's PostgreSQL), else the SQLite file in the data folder.

    history = command_history(args)              # results, events, store: a profile if one is found
    history = command_history(args, profile)     # bench, baseline, partition: the one they loaded
    runs = require(history).runs                 # a command that needs the history

The first opening catches up with the data folder's files and says so once on stderr
(`rocm-console: store: moved 29 runs, ...`). A store that cannot be opened is a StoreError of
one line naming it and the reason: `require` raises it (the command's usual exit 1); events
still land, in the data folder's events.jsonl (HistoryEvents falls back to it)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from console.core.model import Profile
    from console.services.history import History
    from console.services.results import ResultStore

from console.cli.common import user_config_dir

__all__ = ["command_history", "found_profile", "require", "run_store", "say_store"]


def say_store(line: str) -> None:
    """History's one line (the catch-up with the files), on stderr as every command's notes."""
    from console.core.text import printable

    print(f"rocm-console: {printable(line)}", file=sys.stderr)  # names folders and a url


def found_profile(args: argparse.Namespace) -> Profile | None:
    """The profile a command that needs no nodes reads its `[store] url` from: the given one
    (--profile, --demo: loaded as every command loads it; a bad one is exit 2), else the files
    found in ./profiles and the user's config folder, if any; else None (the SQLite default)."""
    from console.cli.common import load_selected_profile

    if getattr(args, "demo", False):
        return load_selected_profile(args)
    if getattr(args, "profile", None):  # read as every command reads them, less the need for nodes
        from console.core.profiles import discover_profile_paths, load_profile

        return load_profile(discover_profile_paths(args.profile, Path.cwd(), None))
    if not any(_tomls(Path.cwd() / "profiles")) and not any(_tomls(_config_dir())):
        return None  # nothing to read: the profile reader is not even imported (a fresh `results list`)
    from console.core.profiles import discover_profile_paths, load_profile

    paths = discover_profile_paths([], Path.cwd(), user_config_dir())
    return load_profile(paths) if paths else None  # no nodes needed: results are local


def _config_dir() -> Path:
    """user_config_dir() without importing platformdirs on Linux (its rule there: the XDG
    variable, else ~/.config): a fresh `results list` is budgeted (tests/perf/store_scale.py)."""
    if sys.platform.startswith("linux"):
        return Path(os.environ.get("XDG_CONFIG_HOME", "").strip() or Path.home() / ".config") / "rocm-console"
    return user_config_dir()


def _tomls(folder: Path) -> Iterator[Path]:
    try:
        yield from folder.glob("*.toml")
    except OSError:
        return


def command_history(args: argparse.Namespace | None = None, profile: Profile | None = None) -> History:
    """The command's History (not opened yet: it opens on first use)."""
    from console.services.history import History, face_origin

    if profile is None and args is not None:
        profile = found_profile(args)
    return History.of(profile, say=say_store, origin=face_origin("cli"))


def require(history: History) -> History:
    """The history, opened: StoreError (one line naming the store and why) when it cannot be."""
    history.open()
    return history


class _OpenedOnUse:
    """The history's runs, opened at the first call: a benchmark starts even when the store
    cannot be opened, and the recorder names its result, kept on the node, when it cannot be
    stored (StoreError from add/save), as it did with the file store."""

    def __init__(self, history: History) -> None:
        self._history = history

    def __getattr__(self, name: str) -> Any:
        return getattr(self._history.runs, name)


def run_store(history: History) -> ResultStore:
    """The stored runs, for the services that record runs (RunRecorder, FindMaxService, the
    experiment runner, results fetch). RunTable has ResultStore's methods (add, save, get,
    update); the services are still annotated with the file store's class."""
    return cast("ResultStore", _OpenedOnUse(history))
