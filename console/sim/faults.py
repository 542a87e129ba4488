"""Simulated GPU faults: what the simulated amdsmi and NVML report as unwell.

The file ``$ROCM_CONSOLE_SIM_DIR/faults.json`` holds
``{"faults": [{"gpu": <physical index>, "kind": KIND, "count": N, "at": <unix s>, "id": <int>}]}``.
The simulators read it in their health functions (again only when it changes), so a
fault written while the agent runs shows in that GPU's next health reading.  Removing
an entry clears it.  Kinds:

    ecc_uncorrectable, ecc_correctable   the ECC counts grow by ``count``
    page_pending                         ``count`` bad pages wait for retirement
    power_throttle, thermal_throttle     the GPU throttles from ``at`` on (reasons set,
                                         residency counters grow)
    pcie_degraded                        the PCIe link trains down to x8
    xgmi_down (AMD), nvlink_down (NVIDIA) the first ``count`` links are down
    reset (AMD), xid (NVIDIA)            one event, delivered once to a reader opened
                                         before ``at``

Stdlib only, Python >= 3.8: this file is shipped beside the simulated amdsmi (as
``amdsmi/faults.py``) and the simulated pynvml (``faults.py``), and it is the command
``python -m console.sim.faults DIR add GPU KIND [COUNT] | clear [GPU] | list``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

FAULTS_FILE = "faults.json"
FAULT_KINDS = (
    "ecc_uncorrectable",
    "ecc_correctable",
    "page_pending",
    "power_throttle",
    "thermal_throttle",
    "pcie_degraded",
    "xgmi_down",
    "nvlink_down",
    "reset",
    "xid",
)
EVENT_KINDS = ("reset", "xid")
DEFAULT_XID = 79  # "GPU has fallen off the bus": the code a simulated xid fault carries


class FaultError(ValueError):
    """A bad fault: an unknown kind, a GPU index or count that is not a number."""


def faults_path(sim_dir):
    return os.path.join(sim_dir, FAULTS_FILE)


def _valid(entry):
    """The entry normalised, or None when it is not a fault this module knows."""
    if not isinstance(entry, dict) or entry.get("kind") not in FAULT_KINDS:
        return None
    gpu, count = entry.get("gpu"), entry.get("count", 1)
    if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        count = 1
    at = entry.get("at")
    out = dict(entry)
    out.update(gpu=gpu, count=count, at=float(at) if isinstance(at, (int, float)) else 0.0)
    out["id"] = entry.get("id") if isinstance(entry.get("id"), int) else int(out["at"] * 1e6) * 64 + gpu
    return out


def _entries(data):
    faults = data.get("faults") if isinstance(data, dict) else None
    return [e for e in (_valid(x) for x in faults or ()) if e is not None]


def read_faults(sim_dir):
    """The faults in the folder (an unreadable or missing file: none)."""
    try:
        with open(faults_path(sim_dir)) as fh:
            return _entries(json.load(fh))
    except (OSError, ValueError):
        return []


def _write(sim_dir, faults):
    # Atomic: a simulator reading at the same moment sees the old or the new list, never half.
    os.makedirs(sim_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".faults.", dir=sim_dir)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump({"faults": faults}, fh, indent=1)
        os.replace(tmp, faults_path(sim_dir))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def add_fault(sim_dir, gpu, kind, count=1):
    """Add one fault to GPU ``gpu``; returns the entry written."""
    return add_faults(sim_dir, [(gpu, kind, count)])[0]


def add_faults(sim_dir, items):
    """Add faults given as (gpu, kind, count) in one write: a simulator reading meanwhile sees
    all of them or none. Returns the entries written."""
    entries = []
    for gpu, kind, count in items:
        if kind not in FAULT_KINDS:
            raise FaultError("unknown fault kind %r; one of %s" % (kind, ", ".join(FAULT_KINDS)))
        if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
            raise FaultError("GPU must be a physical index >= 0, got %r" % (gpu,))
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise FaultError("count must be a positive integer, got %r" % (count,))
        entries.append({"gpu": gpu, "kind": kind, "count": count, "at": time.time(), "id": time.time_ns()})
    faults = read_faults(sim_dir)
    faults.extend(entries)
    _write(sim_dir, faults)
    return entries


def clear_faults(sim_dir, gpu=None):
    """Remove every fault (or those of one GPU); returns how many were removed."""
    faults = read_faults(sim_dir)
    keep = [] if gpu is None else [f for f in faults if f["gpu"] != gpu]
    if len(keep) != len(faults) or os.path.exists(faults_path(sim_dir)):
        _write(sim_dir, keep)
    return len(faults) - len(keep)


class FaultView(object):
    """The folder's faults for a simulator: re-read only when the file changes (its
    inode, mtime or size), so a health call costs one stat."""

    RECHECK_S = 0.05  # a health call makes several reads: one stat per 50 ms is enough

    def __init__(self, sim_dir):
        self.path = faults_path(sim_dir)
        self._key = None
        self._faults = []
        self._checked = None

    def current(self):
        now = time.monotonic()
        if self._checked is not None and now - self._checked < self.RECHECK_S:
            return self._faults
        self._checked = now
        try:
            st = os.stat(self.path)
        except OSError:
            self._key, self._faults = None, []
            return self._faults
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key != self._key:
            try:
                with open(self.path) as fh:
                    self._faults = _entries(json.load(fh))
            except (OSError, ValueError):
                return self._faults  # half-written by hand: keep the last good list
            self._key = key
        return self._faults

    def of(self, gpu, kind):
        """The entries of one kind on one GPU."""
        return [f for f in self.current() if f["gpu"] == gpu and f["kind"] == kind]

    def count(self, gpu, kind):
        """The summed count of one kind on one GPU (0 when none)."""
        return sum(f["count"] for f in self.of(gpu, kind))

    def since(self, gpu, kind):
        """When the earliest fault of that kind on that GPU began, or None."""
        found = self.of(gpu, kind)
        return min(f["at"] for f in found) if found else None


# ------------------------------------------------------------------ command


_USAGE = "usage: python -m console.sim.faults DIR add GPU KIND [COUNT] | clear [GPU] | list"


def _int(text, what):
    try:
        return int(text)
    except ValueError:
        raise FaultError("%s must be an integer, got %r" % (what, text)) from None


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if len(args) < 2:
            raise FaultError(_USAGE)
        sim_dir, op, rest = args[0], args[1], args[2:]
        if op == "add" and len(rest) in (2, 3):
            count = _int(rest[2], "COUNT") if len(rest) == 3 else 1
            entry = add_fault(sim_dir, _int(rest[0], "GPU"), rest[1], count)
            print(json.dumps(entry))
        elif op == "clear" and len(rest) <= 1:
            gpu = _int(rest[0], "GPU") if rest else None
            print(json.dumps({"cleared": clear_faults(sim_dir, gpu)}))
        elif op == "list" and not rest:
            for entry in read_faults(sim_dir):
                print(json.dumps(entry))
        else:
            raise FaultError(_USAGE)
    except (FaultError, OSError) as exc:
        sys.stderr.write("faults: %s\n" % exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
