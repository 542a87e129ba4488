"""End a GPU process on the node: SIGTERM, then SIGKILL after a grace period (stdlib, Python >= 3.8).

    python3 node_agent.py process end --pid N [--gpu G] [--grace S] [--allow-foreign] [--amdsmi-path DIR]...

The console names a pid; the agent never trusts it: the pid must be a process the agent's own
telemetry source lists on a GPU (the same list the console shows), on the GPU named when one
is named. A process of another user is refused unless --allow-foreign is given (the node's
profile sets allow_kill_foreign = true), as nvitop does. The answer is one JSON line:

    {"kind": "process_end", "pid", "name", "gpus", "user", "how": "signal"|"simulated",
     "signal": "SIGTERM"|"SIGKILL"|null, "ended": true|false, "seconds"}

or {"kind": "error", "message", "reason": not_gpu|foreign|no_perm|invalid|failed}.

On a simulated node a "sticky" entry of processes.json (the demo's background load) has no
process behind it: ending it removes the entry, and no signal is sent (its made-up pid may
belong to a real process of this machine).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from statefiles import PROCESSES_FILE, SIM_DIR_ENV, pid_alive, process_entries, read_json, write_json

if sys.platform != "win32":  # every node is Linux
    import fcntl
else:  # pragma: no cover
    fcntl = None

DEFAULT_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
KILL_WAIT = 5.0  # seconds a SIGKILLed process may take to go
POLL = 0.05
MAX_TICKS = 80  # samples read at most to see every GPU's process list (round-robin sources)


class ProcessError(Exception):
    """A one-line reason and its class (not_gpu, foreign, no_perm, invalid, failed)."""

    def __init__(self, message, reason="failed"):
        Exception.__init__(self, message)
        self.reason = reason


# ------------------------------------------------------------------ what the agent sees


def gpu_processes(agent, paths):
    """{pid: {"name", "gpus": [logical indices]}} from the telemetry source the agent streams from."""
    sampler, _note = agent.open_sampler(paths)
    seen = {}
    try:
        wanted = set(row["index"] for row in sampler.static())
        read = set()
        # Some sources read a few GPUs' process lists per tick: read until each GPU was listed.
        for tick in range(MAX_TICKS):
            sampler.refresh(tick)
            for gpu in sampler.sample() or ():
                procs = gpu.get("processes")
                if procs is None:
                    continue
                read.add(gpu["index"])
                for proc in procs:
                    entry = seen.setdefault(proc["pid"], {"name": proc.get("name") or "", "gpus": []})
                    if gpu["index"] not in entry["gpus"]:
                        entry["gpus"].append(gpu["index"])
            if wanted <= read:
                break
    finally:
        sampler.close()
    return seen


def caller_uid():
    """The user the console logged in as (under sudo: the one who ran sudo)."""
    uid = os.getuid()
    if uid == 0 and os.environ.get("SUDO_UID", "").isdigit():
        return int(os.environ["SUDO_UID"])
    return uid


def owner_uid(pid):
    """The real uid of process `pid` (None when /proc cannot say)."""
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def user_name(uid):
    if uid is None:
        return None
    try:
        import pwd  # noqa: PLC0415 - POSIX only

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


# ------------------------------------------------------------------ the simulated node


def _sim_path():
    folder = os.environ.get(SIM_DIR_ENV)
    return os.path.join(folder, PROCESSES_FILE) if folder else None


def sticky_entries(pid):
    """The simulated node's sticky entries for `pid` ([] on a real node)."""
    path = _sim_path()
    if path is None:
        return []
    return [
        e
        for e in process_entries(read_json(path, []))
        if isinstance(e, dict) and e.get("sticky") and e.get("pid") == pid
    ]


def remove_sticky(pid):
    """Drop `pid`'s sticky entries from processes.json, under the lock its other writers take."""
    path = _sim_path()
    with open(path + ".lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        data = read_json(path, [])
        entries = [
            e for e in process_entries(data) if not (isinstance(e, dict) and e.get("sticky") and e.get("pid") == pid)
        ]
        if isinstance(data, dict):
            data = dict(data)
            data["processes"] = entries
        else:
            data = entries
        write_json(path, data, indent=1)


# ------------------------------------------------------------------ signals


def _pin(pid):
    """A pidfd for `pid` (Linux >= 5.3, Python >= 3.9): signals then reach this process even if
    the pid is reused meanwhile. None where unavailable or already gone."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


def _signal(pid, pidfd, sig):
    sender = getattr(signal, "pidfd_send_signal", None)
    if pidfd is not None and sender is not None:
        sender(pidfd, sig)
    else:
        os.kill(pid, sig)


def _wait_gone(pid, seconds, clock=time.monotonic):
    deadline = clock() + max(0.0, seconds)
    while pid_alive(pid):
        if clock() >= deadline:
            return False
        time.sleep(POLL)
    return True


def end(agent, paths, pid, gpu=None, grace=DEFAULT_GRACE, allow_foreign=False):
    """End GPU process `pid` (see the module's doc); the process_end record, or ProcessError."""
    if pid <= 1 or pid in (os.getpid(), os.getppid()):
        raise ProcessError("pid %d is not a process the console may end" % pid, "invalid")
    if not 0 <= grace <= 600:
        raise ProcessError("--grace %g: expected 0 to 600 seconds" % grace, "invalid")
    pidfd = _pin(pid)  # before the check: what is checked is what gets the signal
    try:
        return _end(agent, paths, pid, pidfd, gpu, grace, allow_foreign)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _end(agent, paths, pid, pidfd, gpu, grace, allow_foreign):
    seen = gpu_processes(agent, paths)
    proc = seen.get(pid)
    if proc is None:
        raise ProcessError(
            "pid %d is not a GPU process on this node (the agent sees %d: %s)"
            % (pid, len(seen), ", ".join(str(p) for p in sorted(seen)[:8]) or "none"),
            "not_gpu",
        )
    gpus = sorted(proc["gpus"])
    if gpu is not None and gpu not in gpus:
        raise ProcessError(
            "pid %d is not on GPU %d (it uses GPU %s)" % (pid, gpu, ", ".join(map(str, gpus))), "not_gpu"
        )
    record = {"kind": "process_end", "pid": pid, "name": proc["name"], "gpus": gpus}
    started = time.monotonic()
    if sticky_entries(pid):
        remove_sticky(pid)
        record.update(user=None, how="simulated", signal=None, ended=True, seconds=0.0)
        return record
    owner = owner_uid(pid)
    me = caller_uid()
    record["user"] = user_name(owner)
    if owner is not None and owner != me and not allow_foreign:
        raise ProcessError(
            "pid %d (%s) belongs to user %s, not %s: set allow_kill_foreign = true for the node "
            "in the profile to end other users' processes" % (pid, proc["name"], record["user"], user_name(me)),
            "foreign",
        )
    sent = None
    try:
        _signal(pid, pidfd, signal.SIGTERM)
        sent = "SIGTERM"
        if not _wait_gone(pid, grace):
            _signal(pid, pidfd, signal.SIGKILL)
            sent = "SIGKILL"
            _wait_gone(pid, KILL_WAIT)
    except ProcessLookupError:
        pass  # it ended on its own meanwhile
    except PermissionError:
        raise ProcessError(
            "pid %d (%s, user %s): no permission to signal it: ending another user's process needs root "
            "(sudo = true for the node in the profile)" % (pid, proc["name"], record["user"]),
            "no_perm",
        ) from None
    ended = not pid_alive(pid)
    record.update(how="signal", signal=sent, ended=ended, seconds=round(time.monotonic() - started, 2))
    return record


def run(agent, args, writer):
    """The `process` mode: one JSON line; exit 0 when ended, 5 otherwise."""
    try:
        if args.op != "end":
            raise ProcessError("unknown process operation %r" % args.op, "invalid")
        record = end(agent, args.amdsmi_path, args.pid, args.gpu, args.grace, args.allow_foreign)
    except ProcessError as exc:
        writer.write({"kind": "error", "message": str(exc), "reason": exc.reason})
        return 5
    except agent.AgentError as exc:  # no telemetry source: nothing can be checked
        writer.write({"kind": "error", "message": "cannot list GPU processes: %s" % exc, "reason": "failed"})
        return 5
    writer.write(record)
    return 0 if record["ended"] else 5


def add_parser(modes, parser_class, add_amdsmi_path):
    """The `process` sub-command of the agent's parser."""
    proc = modes.add_parser("process", help="end a GPU process (SIGTERM, then SIGKILL)")
    ops = proc.add_subparsers(dest="op", parser_class=parser_class)
    ops.required = True
    sub = ops.add_parser("end")
    sub.add_argument("--pid", type=int, required=True)
    sub.add_argument("--gpu", type=int, default=None, help="the logical GPU the process must be on")
    sub.add_argument("--grace", type=float, default=DEFAULT_GRACE, help="seconds from SIGTERM to SIGKILL")
    sub.add_argument("--allow-foreign", action="store_true", help="the node allows ending other users' processes")
    add_amdsmi_path(sub)
