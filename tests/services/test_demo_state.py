"""Each demo's own state (console/services/demo.py): a private folder per demo process that the
agents of its simulated nodes use (services/agent_bundle.py), removed at the end or, when a
killed demo left it, at the next demo's start; ports for the demo's instances that two demos
starting at once do not both take; one seeding of an empty history when two demos open at once.

The two-demos-at-once run of the real app is tests/integration/test_demo_lifeline.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from console.core.profiles import demo_profile_path, load_profile
from console.services import agent_bundle, demo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """A temp dir and HOME of the test's own; the process's private state reset around it."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(demo.STATE_ENV, raising=False)
    (tmp_path / "tmp").mkdir()
    (tmp_path / "home").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    demo.remove_private_state()
    yield tmp_path
    demo.remove_private_state()
    tempfile.tempdir = None


def test_a_demos_nodes_keep_their_state_in_its_own_folder_and_the_bundle_stays_shared(own_tmp):
    nodes = load_profile([demo_profile_path()]).nodes
    before = [agent_bundle.install_local_agent(n) for n in nodes]
    folder = demo.use_private_state()
    assert folder.parent == own_tmp / "tmp" and folder.name.startswith(f"rocm-console-demo-{os.getpid()}-")
    assert oct(folder.stat().st_mode & 0o777) == "0o700"  # other users see nothing of it
    assert demo.use_private_state() == folder  # one per process
    after = [agent_bundle.install_local_agent(n) for n in nodes]
    for node, old, new in zip(nodes, before, after):
        assert new.state_dir == f"{folder}/{node.name}"  # instances, runs, simulated GPUs
        assert dict(new.env)["ROCM_CONSOLE_SIM_DIR"] == f"{folder}/{node.name}/sim/{node.name}"
        assert new.agent_path == old.agent_path and new.agent_path.startswith(str(own_tmp / "home"))
    demo.remove_private_state()
    assert not folder.exists() and demo.STATE_ENV not in os.environ
    # A console that is not a demo (no folder made) keeps the shared place.
    assert agent_bundle.install_local_agent(nodes[0]).state_dir == before[0].state_dir


def test_a_real_local_node_never_moves_into_the_demos_folder(own_tmp):
    from dataclasses import replace

    node = load_profile([demo_profile_path()]).nodes[0]
    demo.use_private_state()
    for other in (replace(node, simulate=None), replace(node, state_dir="/srv/rc")):
        assert not agent_bundle.install_local_agent(other).state_dir.startswith(str(own_tmp / "tmp"))


def test_a_folder_left_by_a_killed_demo_goes_at_the_next_start_and_a_live_ones_stays(own_tmp):
    # A demo that was killed: a process that has ended (its pid and start time no longer match).
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = own_tmp / "tmp" / f"rocm-console-demo-{gone.pid}-1-abc"
    (stale / "mi300x-spx" / "instances").mkdir(parents=True)
    # A demo that runs: this very process (its real start time).
    live = own_tmp / "tmp" / f"rocm-console-demo-{os.getpid()}-{demo._start_time(os.getpid())}-def"
    live.mkdir()
    unrelated = own_tmp / "tmp" / "rocm-console-demo-notes"
    unrelated.mkdir()
    folder = demo.use_private_state()
    assert not stale.exists()
    assert live.exists() and unrelated.exists() and folder.exists()


def test_demo_instance_ports_start_from_random_points_and_go_round():
    starts = {demo.demo_instance_port() for _ in range(12)}
    assert len(starts) > 3  # two demos starting at once rarely probe the same port first
    assert all(p is not None and demo.DEMO_PORTS_FROM <= p <= demo.DEMO_PORTS_LAST for p in starts)
    # From `start`, round to `first` after `last`: on three ports nothing on this machine holds,
    # below the kernel's ephemeral range (a busy CI machine's outgoing connections use those)
    first = next(p for p in range(20100, 29990, 3) if all(_free(q) for q in (p, p + 1, p + 2)))
    last = first + 2
    assert demo.free_local_port(first, last, start=last) == last
    assert demo.free_local_port(first, last, start=last) == first  # handed out a moment ago: skipped
    assert demo.free_local_port(first, last, start=last) == first + 1
    assert demo.free_local_port(first, last, start=last) is None  # all three handed out


def _free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return port not in demo._HANDED_OUT


SEED = r"""
import json, sys, time
from console.services import demo
from console.services.results import ResultStore
go = float(sys.argv[2])
while time.time() < go:
    time.sleep(0.001)
print(demo.seed_history(ResultStore(sys.argv[1])))
"""


def test_two_demos_opening_at_once_seed_an_empty_history_once(tmp_path):
    import time

    store = tmp_path / "results"
    go = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SEED, str(store), str(go)],
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    counts = sorted(int(p.communicate(timeout=60)[0]) for p in procs)
    assert counts[:2] == [0, 0] and counts[2] >= 5  # one seeded, the others found it seeded
    from console.services.results import ResultStore

    alone = demo.seed_history(ResultStore(tmp_path / "alone"))
    stored = [json.loads(p.read_text()) for p in store.glob("*.json")]
    assert len(stored) == counts[2] == alone  # no run twice


def test_a_temp_dir_that_takes_no_folder_leaves_the_demo_on_the_shared_state(own_tmp, monkeypatch):
    def full(**_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    assert demo.use_private_state() is None and demo.STATE_ENV not in os.environ
    node = load_profile([demo_profile_path()]).nodes[0]
    assert agent_bundle.install_local_agent(node).state_dir.startswith(str(own_tmp / "home"))
