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

__all__ = ["command_history", "found_profile", "found_store_url", "require", "run_store", "say_store"]


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
    paths = _found_paths()
    if not paths:
        return None
    from console.core.profiles import load_profile

    return load_profile(paths)  # no nodes needed: results are local


def found_store_url(args: argparse.Namespace) -> str | None:
    """The store a command that needs nothing else of a profile opens (results, store): the
    given profile's (--profile, --demo: loaded whole, as found_profile does), else the `[store]
    url` of the files found, the rest of them unread; else None (the SQLite default)."""
    if getattr(args, "demo", False) or getattr(args, "profile", None):
        profile = found_profile(args)
        return profile.store_url if profile is not None else None
    paths = _found_paths()
    if not paths:
        return None
    from console.core.store.profile_table import store_url_in

    return store_url_in(paths)  # its errors name the file and key, as load_profile's do


def _found_paths() -> list[Path]:
    """The profile files found in ./profiles and the user's config folder; none read. Neither
    the profile reader nor platformdirs is imported for it: a fresh `results list` is budgeted."""
    if not any(_tomls(Path.cwd() / "profiles")) and not any(_tomls(_config_dir())):
        return []
    from console.core.profile_paths import discover_profile_paths

    return discover_profile_paths([], Path.cwd(), _config_dir())


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

    if profile is None and args is not None:  # the command needs only the profile's store
        return History(found_store_url(args), say=say_store, origin=face_origin("cli"))
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
