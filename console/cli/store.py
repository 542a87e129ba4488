"""`rocm-console store dump|load|info`: the history's database (docs/store.md) from scripts.

    rocm-console store dump DIR     every run, baseline, event and node-versions record as files
                                    in the file store's layout (a backup anyone can read), and
                                    the model pulls in pulls.jsonl
    rocm-console store load DIR     build or extend the store from such a folder (a dump, or an
                                    old data folder): same ids, nothing doubled
    rocm-console store info         where it is, its engine and schema, what it holds

The store is the profile's `[store] url` (a team's PostgreSQL) when a profile names one, else
the data folder's store.sqlite3. Every error is one line naming the store or the folder, exit 1
(bad input: exit 2)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.common import EXIT_OK, UsageError, add_actions, add_command_options, guarded

if TYPE_CHECKING:
    from console.services.history import History


def add_parser(sub) -> list[argparse.ArgumentParser]:
    ops = add_actions(sub, "store", help="the history's database: dump it to files, load files into it, info")
    dump = ops.add_parser("dump", help="write every run, baseline, event and model pull as files (an empty or new DIR)")
    dump.add_argument("dir", metavar="DIR", help="a new or empty folder")
    load = ops.add_parser("load", help="store what a dump (or an old data folder) holds: same ids, nothing doubled")
    load.add_argument("dir", metavar="DIR", help="a folder written by `store dump`, or a data folder")
    info = ops.add_parser("info", help="where the store is, its engine, schema version and counts")
    parsers = [dump, load, info]
    add_command_options(parsers)
    return parsers


def _dump(args: argparse.Namespace, history: History) -> int:
    from console.services.store import dump

    folder = Path(args.dir).expanduser()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{args.dir}: not a folder (give a new or empty folder to dump into)")
    try:
        if folder.is_dir() and any(folder.iterdir()):
            raise UsageError(f"{args.dir}: not empty (give a new or empty folder to dump into)")
    except PermissionError as exc:
        raise UsageError(f"{args.dir}: {exc.strerror}") from None
    counts = dump(history.open(), folder)
    if args.json:
        print(json.dumps({"dir": str(folder), **_counts(counts)}))
    else:
        print(counts.line(folder))
    return EXIT_OK


def _load(args: argparse.Namespace, history: History) -> int:
    from console.core.text import printable
    from console.services.store import migrate_file_store

    folder = Path(args.dir).expanduser()
    if not folder.is_dir():
        raise UsageError(f"{args.dir}: no such folder (give a folder written by `rocm-console store dump`)")
    kinds = ("results", "baselines", "node-versions", "events.jsonl", "pulls.jsonl")
    if not any((folder / k).exists() for k in kinds):
        raise UsageError(
            f"{args.dir}: holds no results, baselines, node-versions, events.jsonl or pulls.jsonl (not a dump)"
        )
    store = history.open()
    counts = migrate_file_store(folder, store)
    for line in counts.unreadable:
        print(f"rocm-console: {printable(line)}", file=sys.stderr)  # names a file it read
    if args.json:
        print(json.dumps({"dir": str(folder), "into": store.where, **counts.as_dict()}))
    else:
        print(f"{counts.line()}, from {folder} into {store.where}")
    return EXIT_OK


def _info(args: argparse.Namespace, history: History) -> int:
    store = history.open()
    db = store.db

    def count(table: str) -> int:
        row = db.one(f"SELECT COUNT(*) FROM {table}")  # a fixed table name, never input
        return int(row[0]) if row else 0

    doc = {
        "where": store.where,
        "engine": db.dialect,
        "schema_version": db.schema_version(),
        "runs": count("runs"),
        "events": count("events"),
        "baselines": count("baselines"),
        "node_versions": count("node_versions"),
        "pulls": count("pulls"),
        "migrated_from_files": history.meta("migrated_from_files"),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    print(f"store           {doc['where']}")
    print(f"engine          {doc['engine']} (schema version {doc['schema_version']})")
    print(f"runs            {doc['runs']}")
    print(f"events          {doc['events']}")
    print(f"baselines       {doc['baselines']}")
    print(f"node versions   {doc['node_versions']}")
    print(f"model pulls     {doc['pulls']}")
    print(f"from files      {_migration_text(doc['migrated_from_files'])}")
    return EXIT_OK


def _migration_text(meta: object) -> str:
    if not isinstance(meta, dict):
        return "never (nothing moved in from a data folder's files)"
    at = meta.get("at")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if isinstance(at, (int, float)) else "?"
    moved = ", ".join(f"{meta.get(k, 0)} {k}" for k in ("runs", "baselines", "events", "versions"))
    return f"{when} from {meta.get('data_dir', '?')}: moved {moved}"


def _counts(counts) -> dict:
    return {
        "runs": counts.runs,
        "baselines": counts.baselines,
        "events": counts.events,
        "versions": counts.versions,
        "pulls": counts.pulls,
    }


def run(args: argparse.Namespace) -> int:
    from console.cli.history_arg import command_history
    from console.services.results import StoreError

    action = {"dump": _dump, "load": _load, "info": _info}[args.store_command]
    history: History | None = None

    def act() -> int:
        nonlocal history
        history = command_history(args)
        return action(args, history)

    try:
        return guarded(act, failures=(StoreError,))
    finally:
        if history is not None:
            history.close()
