"""A simulated `ray` CLI for the demo's simulated nodes, and vLLM's side of a Ray cluster.

Run as `python3 <base>/sim/vllm ray start|status|--version` (the simulated vllm
folder's `ray` command), it keeps a cluster as files: each `ray start --block`
writes <registry>/<head address>/<pid>.json and removes it when it ends, so
`ray status` counts the members whose process is alive. The registry is one
folder per user on this machine (the demo's nodes all run here).

`ray_cluster_nodes()` is what the simulated `vllm serve --distributed-executor-backend
ray` uses: it asks a `ray status` (ROCM_CONSOLE_RAY names the command, so the
simulator can span a real Ray cluster too) how many nodes are up.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from .statefiles import pid_alive, read_json

RAY_VERSION = "2.60.0"
ENV_RAY = "ROCM_CONSOLE_RAY"  # the `ray` command the simulated vllm asks


def _registry(address):
    root = os.path.join(tempfile.gettempdir(), "rocm-console-sim-ray-%d" % os.getuid())
    return os.path.join(root, re.sub(r"[^A-Za-z0-9_.-]", "_", address))


def _stamp(level, where, text):
    now = time.time()
    ms = int((now - int(now)) * 1000)
    return "%s,%03d\t%s %s -- %s" % (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)), ms, level, where, text)


def _say(level, where, text, err=False):
    stream = sys.stderr if err else sys.stdout
    stream.write(_stamp(level, where, text) + "\n")
    stream.flush()


def _members(folder):
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        rec = read_json(os.path.join(folder, name))
        if rec is None:
            continue
        if pid_alive(int(rec.get("pid") or 0)):
            out.append(rec)
        else:  # a member killed outright (SIGKILL) left its file: drop it
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
    return out


def _opt(argv, name, default=None):
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def _start(argv):
    head = "--head" in argv
    ip = _opt(argv, "--node-ip-address", "127.0.0.1")
    if head:
        address = "%s:%s" % (ip, _opt(argv, "--port", "6379"))
    else:
        address = _opt(argv, "--address")
        if not address:
            sys.stderr.write("ray start: --address is needed without --head\n")
            return 2
    folder = _registry(address)
    head_up = any(m.get("head") for m in _members(folder))
    if head and head_up:
        _say("ERROR", "scripts.py:1001", "Ray is already running at %s" % address, err=True)
        return 1
    if not head and not head_up:
        _say("INFO", "scripts.py:1219", "Local node IP: %s" % ip)
        sys.stderr.write(
            "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to "
            "by setting `--address` flag or `RAY_ADDRESS` environment variable.\n"
        )
        return 1
    try:
        num_gpus = int(_opt(argv, "--num-gpus", "0"))
    except ValueError:
        num_gpus = 0
    os.makedirs(folder, exist_ok=True)
    node_id = "%056x" % (abs(hash((address, ip, os.getpid(), time.time()))) % (16**56))
    path = os.path.join(folder, "%d.json" % os.getpid())
    with open(path, "w") as fh:
        json.dump({"pid": os.getpid(), "node_id": node_id, "ip": ip, "gpus": num_gpus, "head": head}, fh)
    _say("INFO", "scripts.py:1043", "Local node IP: %s" % ip)
    _say("SUCC", "scripts.py:1085", "Ray runtime started.")
    if head:
        _say("INFO", "scripts.py:1095", "  ray start --address='%s'" % address)
    _say("INFO", "scripts.py:1266", "This command will now block forever until terminated by a signal.")
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        while not stop:
            time.sleep(0.3)
            if not head and not any(m.get("head") for m in _members(folder)):
                # what a real worker prints when its GCS goes away
                _say(
                    "ERROR",
                    "scripts.py:1312",
                    "Some Ray subprocesses exited unexpectedly: raylet [exit code=1] (GCS at %s is gone)" % address,
                    err=True,
                )
                return 1
    finally:
        try:
            os.unlink(path)
            os.rmdir(folder)  # the last member out leaves no empty folder behind
        except OSError:
            pass
    return 0


def _status(argv):
    address = _opt(argv, "--address") or os.environ.get("RAY_ADDRESS")
    if not address:
        sys.stderr.write("ConnectionError: Could not find any running Ray instance.\n")
        return 1
    members = _members(_registry(address))
    if not any(m.get("head") for m in members):
        sys.stderr.write("ConnectionError: Could not find any running Ray instance at %s.\n" % address)
        return 1
    lines = [
        "======== Autoscaler status: %s ========" % time.strftime("%Y-%m-%d %H:%M:%S"),
        "Node status",
        "-" * 63,
        "Active:",
    ]
    lines += [" 1 node_%s" % m["node_id"] for m in members]
    lines += ["Pending:", " (no pending nodes)", "Recent failures:", " (no failures)", "", "Resources", "-" * 63]
    lines += ["Total Usage:", " 0.0/%d.0 GPU" % sum(int(m.get("gpus") or 0) for m in members)]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write("Usage: ray [OPTIONS] COMMAND [ARGS]... (rocm-console simulator: start, status, --version)\n")
        return 0 if argv else 2
    if argv[0] == "--version":
        sys.stdout.write("ray, version %s (simulated)\n" % RAY_VERSION)
        return 0
    if argv[0] == "start":
        return _start(argv[1:])
    if argv[0] == "status":
        return _status(argv[1:])
    sys.stderr.write("Usage: ray [OPTIONS] COMMAND [ARGS]...\nError: No such command '%s'.\n" % argv[0])
    return 2


# ---------------------------------------------------------------- vLLM's side


def ray_cluster_nodes(address, timeout=60.0):
    """(active nodes, None) from `ray status --address`, or (0, the error line)."""
    ray = shlex.split(os.environ.get(ENV_RAY) or "ray")
    try:
        proc = subprocess.run(
            ray + ["status", "--address", address],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 0, "ConnectionError: ray status --address %s: %s" % (address, exc)
    text = proc.stdout.decode("utf-8", "replace")
    active, section = 0, None
    for line in text.splitlines():
        head = line.strip()
        if head.endswith(":") and not line.startswith(" "):
            section = head
            continue
        m = re.match(r"^\s+(\d+)\s+node_", line)
        if m and section == "Active:":
            active += int(m.group(1))
    if proc.returncode != 0 or active == 0:
        err = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        return 0, (err[-1] if err else "ConnectionError: Could not find any running Ray instance.")
    return active, None


async def connect(sim):
    """`--distributed-executor-backend ray`: join the cluster at RAY_ADDRESS, as vLLM does.

    Returns the number of nodes, or None after logging vLLM's own error lines.
    """
    import asyncio

    address = os.environ.get("RAY_ADDRESS")
    L = sim.log
    if not address:
        L.raw(
            "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by "
            "setting `--address` flag or `RAY_ADDRESS` environment variable.",
            err=True,
        )
        return None
    L("engine", "INFO", "ray_utils.py:553", "Connecting to existing Ray cluster at address: %s." % address)
    loop = asyncio.get_event_loop()
    nodes, error = await loop.run_in_executor(None, ray_cluster_nodes, address)
    if error:
        L.raw(error, err=True)
        return None
    L("engine", "INFO", "ray_utils.py:571", "Ray cluster at %s: %d nodes" % (address, nodes))
    return nodes


async def watch(sim, nodes, every=2.0):
    """While serving: a node that leaves the cluster kills the engine, with Ray's error line."""
    import asyncio

    address = os.environ.get("RAY_ADDRESS")
    loop = asyncio.get_event_loop()
    while True:
        await asyncio.sleep(every)
        now, error = await loop.run_in_executor(None, ray_cluster_nodes, address, 20.0)
        if now >= nodes:
            continue
        sim.log.raw(
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. "
            "(a Ray node left the cluster at %s: %d of %d nodes are up)" % (address, now, nodes),
            err=True,
        )
        sim.exit_code = 1
        sim.stop_event.set()
        return
