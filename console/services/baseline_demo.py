"""The demo's baseline: a seeded baseline of mi300x-spx (profiles/demo-baselines/, saved on
the simulated node with profiles/suites/demo.toml) and that node's simulated ROCm bumped
since, so a newcomer sees the whole path: the change mark on the node's header, a
`node.changed` event, and `baseline check demo --demo --node mi300x-spx` naming the new
ROCm in its diff."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from console.core.baseline.diff import versions_from_dict
from console.core.model import Profile
from console.core.profiles import PROFILES_DIR
from console.services.node_versions import VersionsBook, data_dir

__all__ = ["DEMO_NODE", "DEMO_ROCM", "SEED_BASELINES_DIR", "prepare_demo", "seed_baselines"]

SEED_BASELINES_DIR = PROFILES_DIR / "demo-baselines"
DEMO_NODE = "mi300x-spx"
DEMO_ROCM = "7.1.0-21"  # the seeded baseline was saved on the simulated 7.0.2-56


def seed_baselines(root: Path | None = None) -> int:
    """Copy the shipped baselines into the demo's data folder where missing; how many.
    (Light: the TUI's demo calls this before its first frame.)"""
    root = root if root is not None else data_dir() / "baselines"  # BaselineStore's root
    copied = 0
    for path in sorted(SEED_BASELINES_DIR.glob("*/*.json")):
        target = root / path.parent.name / path.name
        if target.exists():
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        except OSError:
            break  # an unwritable data folder: the demo goes on without its baseline
        copied += 1
    return copied


def prepare_demo(profile: Profile, book: VersionsBook | None = None, *, fresh: bool = True) -> str | None:
    """Seed the baselines, record the demo node's versions as they were when its baseline was
    saved (fresh: the TUI's start; the CLI only seeds and upgrades), and upgrade its
    simulated ROCm: its next contact is a change. Returns a line
    saying what was done, None when the demo profile has no such node."""
    from console.services.demo_faults import DemoFaultError, sim_dir
    from console.sim.host import upgrade_rocm

    seed_baselines()
    node = profile.node(DEMO_NODE)
    if node is None:
        return None
    book = book or VersionsBook()
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
