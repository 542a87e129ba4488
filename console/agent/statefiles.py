"""State files and the processes they name, for the agent's supervisor and the simulators.

Runs on the node (stdlib only, Python >= 3.8). One file serves every place that needs it,
as lifeline.py does: the agent imports it from its own folder (supervisor.py), the simulated
amdsmi and vllm packages import their copy relatively (console/sim/amdsmi/statefiles.py and
console/sim/vllm/statefiles.py), and the simulated pynvml imports the one beside it
(console/sim/statefiles.py). Those three are git symlinks to this file; the agent bundle and
the wheel carry a real copy in each place, and a test keeps them equal.

The module holds no state: private copies of a simulator (the DME exporter loads one per
node) may share it.

processes.json, the simulated node's record of which process holds which GPU's memory:
a list of {"pid", "name", "gpu" (logical index) or "gpus": [...], "vram_bytes",
"sticky"?, "started"?}, or {"processes": [...]}. An entry counts while its pid is alive,
or always when "sticky" (the demo's background load, which has no process).
"""

import json
import os
import time

SIM_DIR_ENV = "ROCM_CONSOLE_SIM_DIR"  # the simulated node's state folder
SIM_SPEC_ENV = "ROCM_CONSOLE_SIM_SPEC"  # JSON the simulators build a fresh node from
SIM_TIME_ENV = "ROCM_CONSOLE_SIM_TIME"  # freezes the simulators' clock (screenshots)
PROCESSES_FILE = "processes.json"


# ------------------------------------------------------------------ files


def write_json(path, data, indent=None):
    """Write atomically (a temporary file beside it, then a rename): a reader never sees half a file."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=indent, sort_keys=True)
    os.replace(tmp, path)


def read_json(path, default=None):
    """The file's JSON value; `default` when it is missing or not JSON."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


class JsonFile(object):
    """A JSON file re-read only when it changes (the simulators' telemetry reads it very often)."""

    def __init__(self, path):
        self.path = path
        self._key = None
        self._data = None

    def read(self, default=None):
        try:
            st = os.stat(self.path)
        except OSError:
            self._key, self._data = None, None
            return default
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key != self._key:
            try:
                with open(self.path) as fh:
                    self._data = json.load(fh)
            except (OSError, ValueError):
                return default
            self._key = key
        return self._data


# ------------------------------------------------------------------ processes


def pid_alive(pid):
    """True while process `pid` runs; an unreaped zombie has ended. Never signals a group (pid <= 0)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    except OSError:
        return False
    try:  # a zombie still answers kill(0)
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# ------------------------------------------------------------------ the simulated node


def sim_now():
    """The simulators' clock: SIM_TIME_ENV freezes it, for deterministic screenshots."""
    frozen = os.environ.get(SIM_TIME_ENV)
    if frozen:
        try:
            return float(frozen)
        except ValueError:
            pass
    return time.time()


def sim_spec():
    """SIM_SPEC_ENV's object ({} when unset); ValueError saying what is wrong with it."""
    try:
        spec = json.loads(os.environ.get(SIM_SPEC_ENV) or "{}")
    except ValueError as exc:
        raise ValueError("bad %s: %s" % (SIM_SPEC_ENV, exc)) from exc
    if not isinstance(spec, dict):
        raise ValueError(SIM_SPEC_ENV + " must be an object")
    return spec


def process_entries(data):
    """The entries of processes.json's content (a list, or {"processes": [...]}); [] for anything else."""
    entries = data.get("processes", []) if isinstance(data, dict) else data
    return entries if isinstance(entries, list) else []


def gpu_processes(data):
    """(logical GPU index, entry) for every live or sticky entry of processes.json's content."""
    out = []
    for entry in process_entries(data):
        if not isinstance(entry, dict) or not (entry.get("sticky") or pid_alive(entry.get("pid"))):
            continue
        gpus = entry.get("gpus", entry.get("gpu"))
        for gpu in gpus if isinstance(gpus, list) else [gpus]:
            if isinstance(gpu, int):
                out.append((gpu, entry))
    return out


def busy_workloads(spec, first_pid, sizes_gib):
    """Sticky entries for the logical GPUs the spec lists in "busy" (the demo's load): made-up
    pids from `first_pid` on, VRAM sizes taken from `sizes_gib` in turn."""
    out = []
    for n, gpu in enumerate(spec.get("busy") or ()):
        if isinstance(gpu, int) and not isinstance(gpu, bool) and gpu >= 0:
            out.append(
                {
                    "pid": first_pid + 17 * n,
                    "name": "python3 (sim workload)",
                    "gpu": gpu,
                    "vram_bytes": sizes_gib[n % len(sizes_gib)] * 2**30,
                    "sticky": True,
                }
            )
    return out
