"""The demo's baseline: a seeded baseline of mi300x-spx (profiles/demo-baselines/, saved on
the simulated node with profiles/suites/demo.toml) and that node's simulated ROCm bumped
since, so a newcomer sees the whole path: the change mark on the node's header, a
`node.changed` event, and `baseline check demo --demo --node mi300x-spx` naming the new
ROCm in its diff."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from console.core.baseline.diff import versions_from_dict
from console.core.model import Profile
from console.core.profiles import PROFILES_DIR
from console.services.node_versions import VersionsBook, data_dir

if TYPE_CHECKING:
    from console.services.store.baselines import BaselineTable

__all__ = ["DEMO_NODE", "DEMO_ROCM", "SEED_BASELINES_DIR", "prepare_demo", "seed_baselines"]

SEED_BASELINES_DIR = PROFILES_DIR / "demo-baselines"
DEMO_NODE = "mi300x-spx"
DEMO_ROCM = "7.1.0-21"  # the seeded baseline was saved on the simulated 7.0.2-56


def seed_baselines(target: Path | BaselineTable | None = None) -> int:
    """Put the shipped baselines where missing; how many. `target`: the face's store of
    baselines (its History's), or a folder of baseline files (BaselineStore's root); None: the
    data folder's `baselines` folder (the next opening of its store moves them in).
    (Light: the TUI's demo calls this before its first frame.)"""
    if target is not None and not isinstance(target, Path):
        return _seed_table(target)
    root = target if target is not None else data_dir() / "baselines"  # BaselineStore's root
    copied = 0
    for path in sorted(SEED_BASELINES_DIR.glob("*/*.json")):
        dest = root / path.parent.name / path.name
        if dest.exists():
            continue
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        except OSError:
            break  # an unwritable data folder: the demo goes on without its baseline
        copied += 1
    return copied


def _seed_table(table: BaselineTable) -> int:
    from console.services.results import StoreError

    added = 0
    for path in sorted(SEED_BASELINES_DIR.glob("*/*.json")):
        try:
            added += table.put_doc(json.loads(path.read_text(encoding="utf-8")), replace=False)
        except (OSError, ValueError):
            continue  # a broken shipped file: the demo goes on without it
        except StoreError:
            break  # an unwritable store: the demo goes on without its baseline
    return added


def prepare_demo(
    profile: Profile,
    book: VersionsBook | None = None,
    *,
    fresh: bool = True,
    baselines: Path | BaselineTable | None = None,
) -> str | None:
    """Seed the baselines, record the demo node's versions as they were when its baseline was
    saved (fresh: the TUI's start; the CLI only seeds and upgrades), and upgrade its
    simulated ROCm: its next contact is a change. Returns a line
    saying what was done, None when the demo profile has no such node.

    `book` and `baselines`: what the face writes to (its History's versions_book() and
    baselines); None: a History of the data folder now in use (the demo's own), opened and
    closed here, or that folder's files when its store cannot be opened."""
    if book is None or baselines is None:
        from console.services.history import History
        from console.services.results import StoreError

        history = History()  # no profile url: the demo never writes to a team's store
        try:
            if history.try_open() is not None:
                baselines = baselines if baselines is not None else history.baselines
                book = book if book is not None else history.versions_book()
            return _prepare(profile, book if book is not None else VersionsBook(), baselines, fresh)
        except StoreError:
            return _prepare(profile, VersionsBook(), None, fresh)
        finally:
            history.close()
    return _prepare(profile, book, baselines, fresh)


def _prepare(profile: Profile, book: VersionsBook, baselines: Path | BaselineTable | None, fresh: bool) -> str | None:
    from console.services.demo_faults import DemoFaultError, sim_dir
    from console.sim.host import upgrade_rocm

    seed_baselines(baselines)
    node = profile.node(DEMO_NODE)
    if node is None:
        return None
    seeded = SEED_BASELINES_DIR / DEMO_NODE / "demo.json"
    try:
        raw = json.loads(seeded.read_text(encoding="utf-8"))["versions"]
        before = versions_from_dict(raw)
        folder = sim_dir(node)
        upgrade_rocm(str(folder), DEMO_ROCM)
    except (OSError, ValueError, KeyError, TypeError, DemoFaultError):
        return None
    # Only a data dir's first demo start records the node as it was: its next reading shows
    # the upgrade once; a later start keeps what the demo recorded (no second node.changed).
    if fresh and book.last(DEMO_NODE) is None:
        book.observe(before)  # what the node was: its next reading shows the upgrade
    return f"{DEMO_NODE}: simulated ROCm upgraded {before.rocm} -> {DEMO_ROCM} since its baseline 'demo'"
