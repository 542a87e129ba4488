"""processes.json: the simulated node's record of which process holds which GPU's memory."""

import json
import os
import sys
import time

if sys.platform != "win32":  # every node is Linux; fcntl is POSIX-only
    import fcntl
else:  # pragma: no cover
    fcntl = None


def _pid_alive(pid):
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # an unreaped zombie still answers kill(0)
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class GpuRegistry:
    """This process's entries in the simulated node's processes.json."""

    def __init__(self, folder, gpus):
        self.folder = folder or None
        self.path = os.path.join(folder, "processes.json") if folder else None
        self.gpus = list(gpus)
        self.pid = os.getpid()
        self.started = time.time()
        self.active = False

    def _read(self):
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return []

    @staticmethod
    def _entries(data):
        entries = data.get("processes", []) if isinstance(data, dict) else data
        return entries if isinstance(entries, list) else []

    def _update(self, mine):
        if not self.path:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(self.path + ".lock", "a") as lock:
                if fcntl is not None:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                data = self._read()
                entries = [
                    e for e in self._entries(data) if not (isinstance(e, dict) and e.get("pid") == self.pid)
                ] + mine
                if isinstance(data, dict):
                    data = dict(data)
                    data["processes"] = entries
                else:
                    data = entries
                tmp = "%s.%d.tmp" % (self.path, self.pid)
                with open(tmp, "w") as f:
                    json.dump(data, f, indent=1, sort_keys=True)
                os.replace(tmp, self.path)
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
        for e in self._entries(self._read()):
            if not isinstance(e, dict) or e.get("pid") == self.pid:
                continue
            if not (e.get("sticky") or _pid_alive(e.get("pid"))):
                continue
            gpus = e.get("gpus", e.get("gpu"))
            for g in gpus if isinstance(gpus, list) else [gpus]:
                if g in used:
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
    folder = os.environ.get("ROCM_CONSOLE_SIM_DIR")
    try:
        with open(os.path.join(folder or "", "nvml-uuids.json")) as f:
            index = json.load(f).get(uuid)
    except (OSError, ValueError, AttributeError):
        return None
    return index if isinstance(index, int) else None
