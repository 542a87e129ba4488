"""Instance supervisor: runs ON the node (stdlib only, Python >= 3.8).

Every instance lives in ``<state_dir>/instances/<name>/``:

    spec.json   what was started (argv, env with secrets redacted, gpus, port, runtime)
    log         stdout + stderr of the process
    pid         the process (its own process group, so a stop reaches every child)
    started     epoch seconds
    exit.json   {"code": int|null, "signal": int|null, "ended": epoch}, written when it ends

``start`` detaches a small monitor (its own session, so it outlives the SSH
session and the console) that starts the command in a new process group,
waits for it and records how it ended. ``stop`` signals the group: SIGINT,
then SIGTERM, then SIGKILL after timeouts, and waits until no member is left.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from statefiles import (  # shipped beside this file
    PROCESSES_FILE,
    SIM_DIR_ENV,
    pid_alive,
    process_entries,
    read_json,
    write_json,
)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SECRET_RE = re.compile(r"TOKEN|SECRET|PASSWORD|API_KEY|APIKEY", re.I)
FOLLOW_POLL = 0.2


class SupervisorError(Exception):
    """A refusal with a one-line reason."""


# ------------------------------------------------------------------ files
# JSON files are written and read with statefiles.py's helpers (shared with the simulators).


def _read_int(path):
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


# "instances" for vllm serve, "runs" for benchmark clients: same supervision,
# separate folders. One agent process serves one command, so a module setting is enough.
GROUP = "instances"


def instances_dir(state_dir):
    return os.path.join(os.path.expanduser(state_dir), GROUP)


def instance_dir(state_dir, name):
    if not NAME_RE.match(name or ""):
        raise SupervisorError("bad instance name %r (letters, digits, . _ -; at most 64)" % name)
    return os.path.join(instances_dir(state_dir), name)


def redact_env(env):
    return {k: ("***" if SECRET_RE.search(k) else v) for k, v in env.items()}


# ------------------------------------------------------------------ processes


def group_alive(pgid):
    """True while any live (non-zombie) process is in the group."""
    if not pgid or pgid <= 0:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    return next(_members(pgid, entries), None) is not None


def _proc_stats(entries):
    """(pid, the fields of /proc/PID/stat after the command name) of each readable process."""
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2:
            yield int(entry), fields


def port_free(port, host="0.0.0.0"):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # As the server binds (uvicorn sets it too): connections of a stopped server
        # left in TIME_WAIT do not make the port busy, only a socket bound to it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        return True
    except OSError as exc:
        return exc.errno != errno.EADDRINUSE
    finally:
        sock.close()


PORT_FILE_ENV = "ROCM_CONSOLE_PORT_FILE"  # where a server that moved to another port writes it
PORT_FILE = "port"
PORT_TRIES = 200  # ports looked at from the chosen one: bounded, and well within a node's range


def _last_port(first):
    return min(first + PORT_TRIES - 1, 65535)


def free_port_from(first, avoid=()):
    """The first port from `first` that nothing here is bound to and no instance of ours was
    given (one starting may not have bound it yet); None when all PORT_TRIES are taken."""
    for port in range(first, _last_port(first) + 1):
        if port not in avoid and port_free(port):
            return port
    return None


def _ports_of_ours(state_dir, name):
    ports = set()
    for rec in list_instances(state_dir):
        if rec["name"] != name and rec["state"] in ("running", "starting"):
            port = rec["spec"].get("port")
            if isinstance(port, int):
                ports.add(port)
    return ports


def _with_port(argv, old, new):
    """argv with the value of its `--port OLD` replaced (vllm serve's, as the console built it)."""
    out = list(argv)
    for i in range(len(out) - 1):
        if out[i] == "--port" and out[i + 1] == str(old):
            out[i + 1] = str(new)
            return out
    raise SupervisorError("port_auto: the command has no --port %d to change" % old)


# ------------------------------------------------------------------ commands


def start(state_dir, spec, agent_path):
    """Start spec["argv"] detached; returns the instance record."""
    name = spec.get("name")
    folder = instance_dir(state_dir, name)
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise SupervisorError("spec.argv must be a non-empty list of strings")
    env = spec.get("env") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise SupervisorError("spec.env must map strings to strings")
    if os.path.exists(folder):
        rec = describe(state_dir, name)
        if rec["state"] == "running":
            raise SupervisorError("instance %s is already running (pid %s)" % (name, rec["pid"]))
        _remove_tree(folder)
    port = spec.get("port")
    if isinstance(port, int) and spec.get("port_auto") is True:
        # A port the console chose (the user named none): taken here meanwhile (another program,
        # another console's instance that has not bound yet), the next free one does as well.
        free = free_port_from(port, _ports_of_ours(state_dir, name))
        if free is None:
            raise SupervisorError("no free port from %d to %d on this node" % (port, _last_port(port)))
        if free != port:
            argv = _with_port(argv, port, free)
            spec = dict(spec, argv=argv, port=free, port_asked=port)
            port = free
        # The simulated vLLM moves on by itself when it loses the port before binding it
        # (console/sim/vllm/server.py) and writes where it listens here (describe reads it).
        env = dict(env)
        env[PORT_FILE_ENV] = os.path.join(folder, PORT_FILE)
    elif isinstance(port, int) and not port_free(port):
        raise SupervisorError(
            "port %d is already in use on this node (by another program): choose another port, "
            "or leave it out and one is picked" % port
        )
    os.makedirs(folder)
    stored = dict(spec)
    stored["env"] = redact_env(env)
    stored.pop("inherit_env", None)
    write_json(os.path.join(folder, "spec.json"), stored)
    # The real environment (secrets included) goes to the monitor through a
    # private file that it deletes at once: never into argv or spec.json.
    env_file = os.path.join(folder, ".env.json")
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(env, fh)
    with open(os.devnull, "rb") as devnull, open(os.path.join(folder, "log"), "ab") as log:
        subprocess.Popen(
            [sys.executable, agent_path, "instance-monitor", "--", folder],
            stdin=devnull,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    # Wait (bounded) for the monitor to report the real pid.
    deadline = time.time() + 10
    while time.time() < deadline:
        if _read_int(os.path.join(folder, "pid")) or os.path.exists(os.path.join(folder, "exit.json")):
            break
        time.sleep(0.02)
    return describe(state_dir, name)


def monitor(folder):
    """The detached parent of one instance: start it, wait, record the exit."""
    spec = read_json(os.path.join(folder, "spec.json"), {})
    env_file = os.path.join(folder, ".env.json")
    extra_env = read_json(env_file, {}) or {}
    try:
        os.unlink(env_file)
    except OSError:
        pass
    env = dict(os.environ)
    env.update(extra_env)
    # The monitor itself must survive the stop signals sent to the instance group.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    log_path = os.path.join(folder, "log")
    try:
        with open(os.devnull, "rb") as devnull, open(log_path, "ab") as log:
            proc = subprocess.Popen(
                spec["argv"],
                stdin=devnull,
                stdout=log,
                stderr=log,
                env=env,
                cwd=spec.get("cwd") or None,
                preexec_fn=_own_group_default_signals,
                close_fds=True,
            )
    except OSError as exc:
        with open(log_path, "a") as log:
            log.write("rocm-console: cannot start %s: %s\n" % (spec["argv"][0], exc.strerror))
        write_json(os.path.join(folder, "exit.json"), {"code": 127, "signal": None, "ended": time.time()})
        return 127
    with open(os.path.join(folder, "started"), "w") as fh:
        fh.write("%.3f" % time.time())
    with open(os.path.join(folder, "pid"), "w") as fh:
        fh.write(str(proc.pid))
    _bind_to_console(proc.pid, env)
    code = proc.wait()
    write_json(
        os.path.join(folder, "exit.json"),
        {
            "code": code if code >= 0 else None,
            "signal": -code if code < 0 else None,
            "ended": time.time(),
        },
    )
    return 0


def _bind_to_console(pgid, env=None):
    """A demo console's instance ends with the console: when the console is gone (lifeline)
    or stops it at quit (SIGTERM to this monitor), the group gets SIGTERM, then SIGKILL, and
    the monitor still records the exit. Without a lifeline (real nodes) nothing changes.
    The lifeline is the monitor's own (a demo's agent inherits it) or the instance's: a
    `baseline check` on a local node binds its instance alone (W2: a killed check left it
    holding the GPU)."""
    import lifeline  # shipped beside this file

    env = os.environ if env is None else env
    if lifeline.parse(env.get(lifeline.ENV)) is None:
        return

    def end_group(*_):
        def escalate():
            for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 0.0)):
                try:
                    os.killpg(pgid, sig)
                except OSError:
                    return
                deadline = time.time() + wait
                while time.time() < deadline and group_alive(pgid):
                    time.sleep(0.1)

        # Off the signal handler: the main thread stays in wait() and records the exit.
        threading.Thread(target=escalate, daemon=True).start()

    signal.signal(signal.SIGTERM, end_group)
    lifeline.watch(end_group, env)


def _own_group_default_signals():
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def describe(state_dir, name):
    folder = instance_dir(state_dir, name)
    spec = read_json(os.path.join(folder, "spec.json"), {}) or {}
    pid = _read_int(os.path.join(folder, "pid"))
    exit_info = read_json(os.path.join(folder, "exit.json"))
    started = None
    try:
        with open(os.path.join(folder, "started")) as fh:
            started = float(fh.read().strip())
    except (OSError, ValueError):
        pass
    if exit_info is not None:
        state = "exited"
    elif pid and pid_alive(pid):
        state = "running"
    elif pid:
        state = "exited"  # the monitor died too (e.g. SIGKILL of the host): exit unknown
        exit_info = {"code": None, "signal": None, "ended": None}
    else:
        state = "starting"
    try:
        log_size = os.path.getsize(os.path.join(folder, "log"))
    except OSError:
        log_size = 0
    moved = _read_int(os.path.join(folder, PORT_FILE))
    if moved and isinstance(spec.get("port"), int) and moved != spec["port"]:
        # the server found its port taken as it bound, and moved on (PORT_FILE_ENV)
        spec = dict(spec, port=moved, port_asked=spec.get("port_asked", spec["port"]))
    return {
        "kind": "instance",
        "name": name,
        "state": state,
        "pid": pid,
        "started": started,
        "exit_code": exit_info.get("code") if exit_info else None,
        "exit_signal": exit_info.get("signal") if exit_info else None,
        "ended": exit_info.get("ended") if exit_info else None,
        "log_size": log_size,
        "spec": spec,
    }


def listening_ports(state_dir, name):
    """The TCP ports the instance's process group listens on, read from /proc; None when that
    cannot be told here (no /proc, a member's sockets not readable, a container's server, which
    runs outside the group). A server answering /health on the instance's port is ours only if
    the port is in this list: another server (another demo, a program that took the port) may
    answer there while ours is still starting or has moved to the next free port."""
    folder = instance_dir(state_dir, name)
    spec = read_json(os.path.join(folder, "spec.json"), {}) or {}
    pgid = _read_int(os.path.join(folder, "pid"))
    if not pgid or spec.get("container") or not os.path.isdir("/proc/self/fd"):
        return None
    inodes = set()
    for pid in _group_members(pgid):
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except FileNotFoundError:
            continue  # ended meanwhile
        except OSError:
            return None  # another user's process: its sockets cannot be seen
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def _group_members(pgid):
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    return list(_members(pgid, entries))


def _members(pgid, entries):
    """The live (non-zombie) processes of group `pgid` among the /proc `entries`."""
    group = str(pgid)
    return (pid for pid, fields in _proc_stats(entries) if fields[2] == group and fields[0] != "Z")


def list_instances(state_dir):
    root = instances_dir(state_dir)
    try:
        names = sorted(n for n in os.listdir(root) if NAME_RE.match(n))
    except OSError:
        names = []
    return [describe(state_dir, n) for n in names if os.path.isfile(os.path.join(root, n, "spec.json"))]


def foreign_vllm(state_dir):
    """`vllm serve` processes on this node that no instance of ours started."""
    ours = set()
    for rec in list_instances(state_dir):
        if rec["pid"]:
            ours.add(rec["pid"])
    found = []
    sim_dir = os.environ.get(SIM_DIR_ENV) or None  # a simulated node (the demo, the tests)
    procs = _process_table()
    children = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    for pid, (ppid, pgid, args) in sorted(procs.items()):
        if pid in ours or pgid in ours or not _is_vllm_serve(args):
            continue
        # Skip a vllm serve whose parent is one too (a wrapper re-exec), report the top one.
        if ppid in procs and _is_vllm_serve(procs[ppid][2]):
            continue
        # GPU memory is held by the engine/worker children, not the API server:
        # report the whole tree so the console can match it to GPU processes.
        tree, todo = [], [pid]
        while todo and len(tree) < 4096:
            p = todo.pop()
            tree.append(p)
            todo.extend(children.get(p, ()))
        if sim_dir is not None and not _on_simulated_node(sim_dir, tree):
            continue
        found.append({"kind": "foreign", "pid": pid, "pids": sorted(tree), "argv": args})
    return found


def _on_simulated_node(sim_dir, tree):
    """A simulated node shares the host's process table with the other simulated nodes and with
    whatever else runs here (a real vLLM of another program): a `vllm serve` is on this node only
    when it holds one of its simulated GPUs (processes.json) or was started with its folder."""
    holders = set()
    for entry in process_entries(read_json(os.path.join(sim_dir, PROCESSES_FILE), [])):
        if isinstance(entry, dict) and isinstance(entry.get("pid"), int):
            holders.add(entry["pid"])
    if holders.intersection(tree):
        return True
    marker = ("%s=%s" % (SIM_DIR_ENV, sim_dir)).encode()
    for pid in tree:
        try:
            with open("/proc/%d/environ" % pid, "rb") as fh:
                if marker in fh.read().split(b"\0"):
                    return True
        except OSError:
            continue
    return False


def _process_table():
    """{pid: (ppid, pgid, argv)} of every readable process."""
    table = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                args = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
            with open("/proc/%d/stat" % pid) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            table[pid] = (int(fields[1]), int(fields[2]), args)
        except (OSError, ValueError, IndexError):
            continue
    return table


def _is_vllm_serve(args):
    for i, arg in enumerate(args[:-1]):
        if os.path.basename(arg) in ("vllm", "vllm.py") and args[i + 1] == "serve":
            return True
    return "vllm.entrypoints.openai.api_server" in args


def stop(state_dir, name, int_timeout=30.0, term_timeout=10.0):
    """SIGINT the group, then SIGTERM, then SIGKILL; returns the record and how it ended."""
    rec = describe(state_dir, name)
    if rec["state"] != "running":
        rec["stopped_by"] = None
        return rec
    pgid = rec["pid"]
    spec = rec["spec"]
    if spec.get("runtime") == "docker" and spec.get("container"):
        subprocess.run(
            ["docker", "stop", "-t", str(int(int_timeout)), spec["container"]],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=int_timeout + 30,
        )
    used = None
    for sig, wait in ((signal.SIGINT, int_timeout), (signal.SIGTERM, term_timeout), (signal.SIGKILL, 10.0)):
        if not group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        used = signal.Signals(sig).name
        deadline = time.time() + wait
        while time.time() < deadline and group_alive(pgid):
            time.sleep(0.1)
    if spec.get("stop_sweep"):
        used = _sweep(spec["stop_sweep"]) or used
    # Give the monitor a moment to record the exit status.
    deadline = time.time() + 5
    folder = instance_dir(state_dir, name)
    while time.time() < deadline and not os.path.exists(os.path.join(folder, "exit.json")):
        time.sleep(0.05)
    rec = describe(state_dir, name)
    rec["stopped_by"] = used
    return rec


def _sweep(marker, wait=5.0):
    """After the group is gone: end what still names marker on its command line.

    A multi-node instance's Ray (services/multinode.py) can leave processes of
    its own temp dir outside the group; this ends exactly those, by pid.
    Returns the last signal used, or None when nothing was left.
    """
    used = None
    me = os.getpid()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [pid for pid, (_, _, args) in _process_table().items() if pid != me and _names(args, marker)]
        if not pids:
            return used
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue
            used = signal.Signals(sig).name
        deadline = time.time() + wait
        while time.time() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.1)
    return used


def _names(args, marker):
    """marker as a whole path in args ("/t/x-1" matches "--temp-dir=/t/x-1" and "/t/x-1/…", not "/t/x-10")."""
    marker = marker.rstrip("/")
    return any(a.endswith(marker) or (marker + "/") in a for a in args)


def logs(state_dir, name, out, offset=0, follow=False, lines=None, max_seconds=None, split_cr=False):
    """Write the log from a byte offset (or its last N lines); follow until the instance ends.

    split_cr turns tqdm's carriage-return redraws into line ends, and bytes that
    are not UTF-8 into "?" one for one (same byte count, so offsets stay valid:
    the console counts the bytes of the text it decodes): a line-based reader then
    sees progress live, and after a reconnect resumes exactly where it stopped.
    """
    if split_cr:
        splitter = _CrSplitter(out)
        try:
            return logs(state_dir, name, splitter, offset, follow, lines, max_seconds)
        finally:
            splitter.finish()
    folder = instance_dir(state_dir, name)
    path = os.path.join(folder, "log")
    if not os.path.isdir(folder):
        raise SupervisorError("no instance named %s" % name)
    if lines is not None:
        offset = _offset_of_last_lines(path, lines)
    started = time.time()
    with open(path, "rb") as fh:
        fh.seek(offset)
        while True:
            chunk = fh.read(65536)
            if chunk:
                out.write(chunk)
                out.flush()
                continue
            if not follow:
                return
            if describe(state_dir, name)["state"] == "exited":
                rest = fh.read()
                if rest:
                    out.write(rest)
                    out.flush()
                return
            if max_seconds is not None and time.time() - started > max_seconds:
                return
            time.sleep(FOLLOW_POLL)


def _same_length(error):
    return "?" * (error.end - error.start), error.end


codecs.register_error("rocm-console-same-length", _same_length)


class _CrSplitter:
    def __init__(self, out):
        self.out = out
        # incremental: a character cut between two reads is not taken for bad bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")("rocm-console-same-length")

    def write(self, data):
        self.out.write(self._utf8.decode(data).encode("utf-8").replace(b"\r", b"\n"))

    def flush(self):
        self.out.flush()

    def finish(self):
        rest = self._utf8.decode(b"", final=True)  # a cut character at the very end
        if rest:
            self.out.write(rest.encode("utf-8"))
            self.out.flush()


def _offset_of_last_lines(path, n):
    try:
        size = os.path.getsize(path)
    except OSError:
        return 0
    with open(path, "rb") as fh:
        block = min(size, max(65536, n * 512))
        fh.seek(size - block)
        data = fh.read()
    cut = len(data)
    for _ in range(n + (1 if data.endswith(b"\n") else 0)):
        cut = data.rfind(b"\n", 0, cut)
        if cut < 0:
            return size - block
    return size - block + cut + 1


def _remove_tree(folder):
    for root, dirs, files in os.walk(folder, topdown=False):
        for f in files:
            os.unlink(os.path.join(root, f))
        for d in dirs:
            os.rmdir(os.path.join(root, d))
    os.rmdir(folder)


def remove(state_dir, name):
    rec = describe(state_dir, name)
    if rec["state"] == "running":
        raise SupervisorError("instance %s is running; stop it first" % name)
    _remove_tree(instance_dir(state_dir, name))
    return {"kind": "removed", "name": name}
