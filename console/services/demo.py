"""The demo's lifecycle: what `rocm-console --demo` starts is the console's own.

The demo's nodes are this machine. Everything started for them (node agents, the
instance monitors, the simulated `vllm serve` and benchmark clients) carries the
console's lifeline in its environment (``ROCM_CONSOLE_LIFELINE=<pid>:<start time>``,
see console/agent/lifeline.py) and ends by itself within a second or two once the
console is gone, however it went. On a clean quit the console does not wait for
that: it stops them itself (``stop_bound``). Real nodes never see the variable
(nothing of the console's environment crosses SSH), so their instances outlive the
console as before.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from console.core.errors import ProfileError
from console.core.model import Profile
from console.core.profiles import PROFILES_DIR

if TYPE_CHECKING:  # the results modules load when the history is seeded, not at start-up
    from console.core.results.record import StoredRun
    from console.services.results import ResultStore
    from console.services.store.runs import RunTable

ENV = "ROCM_CONSOLE_LIFELINE"
PROC = Path("/proc")


def _start_time(pid: int) -> str | None:
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def lifeline_token() -> str:
    """This process's lifeline: what a process bound to it watches (console/agent/lifeline.py)."""
    pid = os.getpid()
    return f"{pid}:{_start_time(pid) or ''}"


def claim_lifeline() -> str:
    """Put this process's lifeline into the environment every local child inherits."""
    token = lifeline_token()
    os.environ[ENV] = token
    return token


def bound_processes(token: str) -> list[int]:
    """Live processes (other than this one) whose environment carries the lifeline `token`."""
    needle = b"\0" + f"{ENV}={token}".encode() + b"\0"
    me = os.getpid()
    found = []
    try:
        entries = [e for e in os.listdir(PROC) if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        pid = int(entry)
        if pid == me:
            continue
        try:
            environ = (PROC / entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        if needle in b"\0" + environ + b"\0" and _start_time(pid) is not None:
            found.append(pid)
    return found


def stop_bound(token: str, grace: float = 3.0) -> list[int]:
    """SIGTERM every process carrying `token`, SIGKILL what is left after `grace` seconds.

    Only processes with this console's lifeline are signalled, each by its pid (the
    monitors end their instance group on SIGTERM and record its exit). Returns the pids
    that had to be killed."""
    pids = bound_processes(token)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        pids = [p for p in pids if _start_time(p) is not None]
        if not pids:
            return []
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    return pids


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


# ---------------------------------------------------------------- the demo with a profile


def demo_profile(
    explicit: Sequence[str], builtin: Sequence[Path], cwd: Path | None = None
) -> tuple[Profile, str | None]:
    """The demo's simulated nodes with what the user's --profile files add: presets, [keys],
    [health] and [[alert]] (read from the files), and their simulated local nodes.

    Their other nodes (real GPUs, over SSH or on this machine) cannot join a demo: they are left
    out, and so is a [prometheus] table no remaining node reads. Returns the profile and one
    line saying what was left out (None when everything applies). Raises ProfileError."""
    from dataclasses import replace

    from console.core.profiles import demo_profile_path, discover_profile_paths, load_profile

    if not explicit:
        return load_profile([*builtin, demo_profile_path()]), None
    demo = load_profile([demo_profile_path()])
    paths = discover_profile_paths(explicit, cwd or Path.cwd(), None)
    mine = load_profile([*builtin, *paths])  # checked as without --demo: a bad file is its one line
    kept = [n for n in mine.nodes if n.simulate is not None and n.transport == "local"]
    left = [n for n in mine.nodes if n not in kept]
    for node in kept:
        if demo.node(node.name) is not None:
            raise ProfileError(
                node.source, f"nodes.{node.name}", None, None, f"node {node.name!r} is a demo node too: rename it"
            )
    prometheus = mine.prometheus if any(n.telemetry == "prometheus" for n in kept) else None
    profile = replace(mine, nodes=(*demo.nodes, *kept), files=(*demo.files, *mine.files), prometheus=prometheus)
    parts, files = [], []
    if left:
        names = ", ".join(n.name for n in left)
        parts.append(f"node{'s' if len(left) > 1 else ''} {names} (not simulated on this machine)")
        files += [Path(n.source).name for n in left]
    if mine.prometheus is not None and prometheus is None:
        parts.append("[prometheus] (no demo node reads it)")
        files.append(Path(mine.prometheus.source).name)
    if not parts:
        return profile, None
    where = ", ".join(dict.fromkeys(files))
    return profile, f"--demo: left out of {where}: {'; '.join(parts)}; its presets, [keys] and [health] apply"


# ---------------------------------------------------------------- the living fleet


@dataclass(frozen=True)
class DemoInstance:
    """An instance the demo starts by itself, so the instances panel is never empty."""

    node: str
    preset: str
    gpus: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.preset}-g{'-'.join(str(g) for g in self.gpus)}"  # what the start dialog would name it


# GPU 4 of the SPX node and logical GPU 1 of the CPX node carry no simulated load
# (profiles/demo.toml's busy lists), so the starts pass the free-memory check.
DEMO_INSTANCES = (
    DemoInstance("mi300x-spx", "llama-3.1-8b-fp8", (4,)),
    DemoInstance("mi300x-cpx", "llama-3.1-8b-fp8-cpx", (1,)),
)

# The demo's own instances take ports from here, leaving 8000 and up (vLLM's default, and
# the start dialog's first choice) to what the user starts.
DEMO_PORTS_FROM = 8100
DEMO_PORTS_LAST = 8999

# Runs the simulated benchmark client really made against the simulated server
# (scripts in the files' labels and README), and the seeds' published numbers.
SEED_RESULTS_DIR = PROFILES_DIR / "demo-results"
REFERENCE_PATH = PROFILES_DIR / "reference_numbers.toml"
REFERENCE_ROWS = 3  # a handful: the history is a demo, not the reference table


DATA_DIR_ENV = "ROCM_CONSOLE_DATA_DIR"  # console.services.results reads it (not imported at start-up)


# Set beside DATA_DIR_ENV once it names the demo's folder: a second call (the TUI that `web
# --demo` starts, a CLI command's TUI) keeps it instead of nesting demo/demo.
DEMO_DATA_MARK = "ROCM_CONSOLE_DEMO_DATA_DIR"


def demo_data_dir() -> Path:
    """The demo's own data folder: its results never mix with the user's real history."""
    base = os.environ.get(DATA_DIR_ENV)
    if base and base == os.environ.get(DEMO_DATA_MARK):
        return Path(base)
    if base:
        return Path(base).expanduser() / "demo"
    import platformdirs

    return Path(platformdirs.user_data_path("rocm-console")) / "demo"


def use_demo_data_dir() -> Path:
    """Point this process's result store at the demo's folder (ResultStore() reads the variable)."""
    folder = demo_data_dir()
    os.environ[DATA_DIR_ENV] = os.environ[DEMO_DATA_MARK] = str(folder)
    return folder


def use_demo_results() -> Path:
    """`results ... --demo`: the demo's data folder, holding what the demo TUI shows (seeded from
    profiles/demo-results when empty, as the TUI seeds it)."""
    folder = use_demo_data_dir()
    seed_history()
    return folder


def reference_run(row, source: str) -> StoredRun:
    """A published row of the seeds as a history entry, labelled as a reference (never a run)."""
    from dataclasses import replace

    from console.core.results.record import fingerprint_of, new_run_id
    from console.core.results.reference import reference_as_run

    run = reference_as_run(row)
    fp = fingerprint_of(None, run.metrics, run.setup)
    created = time.time()
    return replace(
        run,
        id=new_run_id(created, f"ref-seed{row.seed}", fp),
        created=created,
        origin="import",
        source=f"{source}#{row.id}",
        label=f"reference: seed {row.seed}'s published numbers ({row.gpu}, TP {row.tp}), not run here",
        fingerprint=fp,
    )


def seed_history(store: ResultStore | RunTable | None = None) -> int:
    """Fill an empty demo history: the recorded simulated runs and a few reference rows.

    `store`: where they go, from the face (its History's runs); None: a History of the data
    folder now in use (the demo's own, once use_demo_data_dir has run), opened and closed here.
    Only when the store holds nothing yet (a user who deleted them keeps them deleted
    until the store is empty again). Returns how many runs were stored."""
    if store is None:
        from console.services.history import History
        from console.services.results import StoreError

        history = History()  # no profile url: the demo never writes to a team's store
        try:
            return seed_history(history.runs)
        except StoreError:
            return 0  # the demo opens with its history unavailable (the face says why)
        finally:
            history.close()
    if store.ids():
        return 0
    root = getattr(store, "root", None)
    if root is None:  # a database: its unique fingerprints make two seedings one (Saved.new counts)
        return _seed(store)
    import fcntl

    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / ".demo-seed.lock", "a")  # noqa: SIM115 - closed by the with below
    except OSError:
        return 0  # an unusable store: the demo opens with an empty history
    with lock:
        # Two demos opening at once on an empty history (two browser tabs): one seeds it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        return 0 if store.ids() else _seed(store)


def _seed(store: ResultStore | RunTable) -> int:
    from console.core.results.record import run_from_dict
    from console.core.results.reference import load_reference_numbers
    from console.services.results import StoreError

    runs = []
    for path in sorted(SEED_RESULTS_DIR.glob("*.json")):
        try:
            runs.append(run_from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue  # a broken shipped file must not keep the demo from opening
    try:
        rows = [r for r in load_reference_numbers(REFERENCE_PATH) if r.kind == "serving"]
    except (OSError, ProfileError):
        rows = []
    runs += [reference_run(r, REFERENCE_PATH.name) for r in rows[:REFERENCE_ROWS]]
    saved = 0
    for run in runs:
        try:
            saved += store.add(run).new
        except (OSError, StoreError):
            break  # a full or unwritable store: the demo opens with what is there
    return saved


_HANDED_OUT: dict[int, float] = {}  # port -> when: a server given it may not have bound it yet
_HANDED_OUT_FOR = 120.0  # seconds; a vLLM start binds its port well within this


def free_local_port(first: int = 8000, last: int = 8999, *, start: int | None = None) -> int | None:
    """The first port from `first` (or from `start`, going round to `first` after `last`) that
    nothing on this machine is bound to and that was not handed out a moment ago (the demo's
    nodes share this machine and start side by side, so each node's own list of ports is not
    enough)."""
    import socket

    now = time.monotonic()
    for port, when in list(_HANDED_OUT.items()):
        if now - when > _HANDED_OUT_FOR:
            del _HANDED_OUT[port]
    begin = start if start is not None and first <= start <= last else first
    for port in [*range(begin, last + 1), *range(first, begin)]:
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                # The wildcard address, as the supervisor checks: a server listening on any
                # address of this machine makes the port busy (a probe only, never listened on).
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
        _HANDED_OUT[port] = now
        return port
    return None


def demo_instance_port() -> int | None:
    """A free port for one of the demo's own instances, searched from a random point of
    DEMO_PORTS_FROM..DEMO_PORTS_LAST: two demos that start at once (two browser tabs, a demo
    beside a test) probe ports at the same moment, each knowing only its own hand-outs; from
    the same first port both would take the same one, and one instance would fail to bind."""
    return free_local_port(DEMO_PORTS_FROM, DEMO_PORTS_LAST, start=random.randint(DEMO_PORTS_FROM, DEMO_PORTS_LAST))


# ---------------------------------------------------------------- the demo's own state

# What the demo's simulated nodes keep (instances, benchmark runs, simulated GPUs and their
# partitions) lives in a folder of the demo process's own, named by this variable
# (services/agent_bundle.py reads it); the agent bundle itself stays in the shared place.
STATE_ENV = "ROCM_CONSOLE_DEMO_STATE"
_STATE_PREFIX = "rocm-console-demo-"  # then <pid>-<start time>-<random>: whose it is
_private_state: Path | None = None


def use_private_state() -> Path | None:
    """This demo process's own state folder (made once per process, mode 0700 in the temp dir).

    Two demos on one machine (two `web --demo` tabs, a `--demo` TUI beside a test, two users)
    share neither instances nor simulated GPUs: same-named instances do not collide, one demo's
    quit never ends what another shows. The folder goes when the demo ends
    (remove_private_state); one left by a killed demo is removed by the next demo's start.
    None when the temp dir takes no folder: the demo then keeps its state under HOME, as a
    single demo always could."""
    global _private_state
    if _private_state is None:
        _remove_stale_states()
        pid = os.getpid()
        try:
            _private_state = Path(tempfile.mkdtemp(prefix=f"{_STATE_PREFIX}{pid}-{_start_time(pid) or 0}-"))
        except OSError:
            return None
        import atexit

        atexit.register(remove_private_state)
    os.environ[STATE_ENV] = str(_private_state)
    return _private_state


def remove_private_state() -> None:
    """Remove this process's state folder (once its processes are stopped: stop_bound)."""
    global _private_state
    folder, _private_state = _private_state, None
    if folder is not None:
        if os.environ.get(STATE_ENV) == str(folder):
            del os.environ[STATE_ENV]
        shutil.rmtree(folder, ignore_errors=True)


def _remove_stale_states() -> None:
    """State folders of this user's demos that ended without removing theirs (SIGKILL, a
    closed terminal): the console that made one is gone and so is everything it started."""
    root = tempfile.gettempdir()
    try:
        entries = [e for e in os.scandir(root) if e.name.startswith(_STATE_PREFIX)]
    except OSError:
        return
    for entry in entries:
        pid_text, _, rest = entry.name[len(_STATE_PREFIX) :].partition("-")
        started = rest.partition("-")[0]
        if not pid_text.isdigit() or _start_time(int(pid_text)) == started:
            continue  # not one of ours, or its demo still runs
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue  # another user's, or not a folder made here
        if bound_processes(f"{pid_text}:{started}"):
            continue  # its processes are still ending (within a second or two: lifeline)
        shutil.rmtree(entry.path, ignore_errors=True)
