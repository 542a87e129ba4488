"""processes.json: the simulated node's record of which process holds which GPU's memory."""

import os
import sys
import time

from .constants import ENV_DIR
from .statefiles import PROCESSES_FILE, gpu_processes, process_entries, read_json, write_json

if sys.platform != "win32":  # every node is Linux; fcntl is POSIX-only
    import fcntl
else:  # pragma: no cover
    fcntl = None


class GpuRegistry:
    """This process's entries in the simulated node's processes.json."""

    def __init__(self, folder, gpus):
        self.folder = folder or None
        self.path = os.path.join(folder, PROCESSES_FILE) if folder else None
        self.gpus = list(gpus)
        self.pid = os.getpid()
        self.started = time.time()
        self.active = False

    def _update(self, mine):
        if not self.path:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(self.path + ".lock", "a") as lock:
                if fcntl is not None:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                data = read_json(self.path, [])
                entries = [
                    e for e in process_entries(data) if not (isinstance(e, dict) and e.get("pid") == self.pid)
                ] + mine
                if isinstance(data, dict):
                    data = dict(data)
                    data["processes"] = entries
                else:
                    data = entries
                write_json(self.path, data, indent=1)
        except OSError:
            pass

    def register(self, vram_bytes):
        if not self.path:
            return
        self.active = True
        self._update(
            [
                {"pid": self.pid, "name": "python3", "gpu": g, "vram_bytes": int(vram_bytes), "started": self.started}
                for g in self.gpus
            ]
        )

    def unregister(self):
        if self.active:
            self.active = False
            self._update([])

    def used_by_others(self):
        """VRAM bytes that other live (or sticky) simulated processes hold on our GPUs."""
        used = dict.fromkeys(self.gpus, 0)
        if not self.path:
            return used
        for g, e in gpu_processes(read_json(self.path, [])):
            if g in used and e.get("pid") != self.pid:
                used[g] += int(e.get("vram_bytes", 0) or 0)
        return used


def visible_gpus(count):
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        raw = os.environ.get("HIP_VISIBLE_DEVICES")
    if raw is None:
        return list(range(count))
    out = []
    for part in raw.split(","):
        part = part.strip()
        if part.isdigit():
            out.append(int(part))
        elif part.startswith("MIG-"):  # a MIG instance by UUID: the simulated NVML's map says which GPU
            index = _mig_index(part)
            if index is not None:
                out.append(index)
    return out[:count]


def _mig_index(uuid):
    uuids = read_json(os.path.join(os.environ.get(ENV_DIR) or "", "nvml-uuids.json"))
    index = uuids.get(uuid) if isinstance(uuids, dict) else None
    return index if isinstance(index, int) else None
