#!/usr/bin/env python3
"""rocm-console node agent: GPU telemetry as JSON lines.

Runs on the GPU node (stdlib + amdsmi, Python >= 3.8, no import from the
console package):

    python3 node_agent.py telemetry [--interval 1.0] [--count N] [--amdsmi-path DIR]...
    python3 node_agent.py probe [--amdsmi-path DIR]...
    python3 node_agent.py instance --state-dir DIR start|list|stop NAME|logs NAME|remove NAME
    python3 node_agent.py partition show|set [--gpus all|0,1] [--compute CPX] [--memory NPS4 --reload-driver]
    python3 node_agent.py doctor [--vllm CMD] [--sudo] [--amdsmi-path DIR]...   (doctor.py)

telemetry writes one ``hello`` line, a ``static`` line (again whenever the
GPUs are re-enumerated with different facts), then one ``sample`` line per
tick for every logical GPU.  Sources, in order: the amdsmi Python module
(no process per tick), ``amd-smi ... --json``, ``rocm-smi --json``, then for
NVIDIA GPUs (nvidia.py) NVML through pynvml and ``nvidia-smi --query-gpu``.
When none works it writes an ``error`` line and exits 3.  Missing values are null.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import time

AGENT_VERSION = "1"
MIN_INTERVAL = 0.1
MAX_INTERVAL = 10.0
PARTITION_CHECK_EVERY = 5  # ticks between partition-mode checks (getters can wake the GPU)
CLI_TIMEOUT = 30.0  # amd-smi on a partitioned node can take seconds per call
MAX_CLI_FAILURES = 5  # consecutive failed CLI ticks before the agent gives up

EXIT_OK, EXIT_USAGE, EXIT_NO_SOURCE, EXIT_PARTITION = 0, 2, 3, 4

# "unsupported" markers of the C library that can leak through the wrapper
_SENTINELS = frozenset((0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF))
# One reading as the CLIs print it: "45.0", "(1402Mhz)", "750 W", "12 %", "1.1 GB".
_NUMBER_WITH_UNIT = re.compile(r"^\(?\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%]*)\s*\)?$")
_MIB_PER_UNIT = {
    "B": 1.0 / 2**20,
    "KB": 1.0 / 1024,
    "KIB": 1.0 / 1024,
    "MB": 1.0,
    "MIB": 1.0,
    "GB": 1024.0,
    "GIB": 1024.0,
}
_IDENTITY_FIELDS = ("model", "serial", "vbios", "compute_partition", "memory_partition", "memory_caps")


class AgentError(Exception):
    """A failure that ends the agent with an ``error`` line and exit 3."""


class SourceUnavailable(Exception):
    """This telemetry source does not work here; the next one is tried."""


# ------------------------------------------------------------------ values


def num(value):
    """The one normaliser: a finite number, or None for N/A, sentinels and junk.

    Accepts what the vendor CLIs print for one reading: a bare number, a
    ``{"value": N, "unit": "..."}`` leaf (amd-smi), a numeric string (rocm-smi
    "45.0") or one with its unit and parentheses ("(1402Mhz)", "750 W").
    """
    if isinstance(value, dict):  # amd-smi CLI leaf {"value": N, "unit": "..."}
        value = value.get("value")
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        match = _NUMBER_WITH_UNIT.match(value.strip())
        if match is None:
            return None
        value = float(match.group(1))
    if isinstance(value, int):
        return None if value in _SENTINELS else value
    if isinstance(value, float):
        return value if math.isfinite(value) and value not in _SENTINELS else None
    return None


def text(value):
    """A non-empty string, or None for N/A and empty values."""
    if value is None or isinstance(value, (dict, list)):
        return None
    s = str(value).strip()
    return None if s.upper() in ("", "N/A", "NA", "NONE") else s


def unit_of(value):
    """The unit a reading names: the leaf's "unit", or the suffix of "1.1 GB"."""
    if isinstance(value, dict):
        return value.get("unit")
    if isinstance(value, str):
        match = _NUMBER_WITH_UNIT.match(value.strip())
        if match and match.group(2):
            return match.group(2)
    return None


def mib(value, default_unit="MB"):
    """A size in MiB; amd-smi's 'MB' is 2**20 bytes (it divides by 1024*1024)."""
    n = num(value)
    factor = _MIB_PER_UNIT.get(str(unit_of(value) or default_unit).upper())
    return None if n is None or factor is None else n * factor


def dig(obj, *keys):
    """obj[k1][k2]... or None as soon as a level is missing or not a dict."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def first(*values):
    for value in values:
        if value is not None:
            return value
    return None


def split_bdf(bdf):
    """'0000:0c:00.1' -> ('0000:0c:00', 1): partitions share domain:bus:device."""
    if not bdf or "." not in bdf:
        return None, None
    prefix, _, func = bdf.strip().rpartition(".")
    try:
        return prefix.lower(), int(func, 16)
    except ValueError:
        return prefix.lower(), None


def caps_list(value):
    """Memory partition caps as a list of mode names ('NPS1,NPS4' or a list)."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)):
        return []
    return [t for t in (text(v) for v in value) if t]


# ------------------------------------------------------------ static facts


def assemble_static(raws):
    """Turn per-logical-GPU facts into static records.

    ``raws`` are dicts with index, bdf, partition_hint and the static fields.
    Physical GPUs are numbered by first appearance of their BDF prefix; a
    secondary partition that reports N/A for an identity fact (model, serial,
    partition modes, ...) gets its physical GPU's primary value: those are
    facts of the one device.  Per-partition values (VRAM) are never copied.
    """
    groups = {}
    rows = []
    for raw in raws:
        prefix, func = split_bdf(raw.get("bdf"))
        physical = groups.setdefault(prefix or "#%d" % raw["index"], len(groups))
        hint = num(raw.get("partition_hint"))
        partition_id = int(hint) if hint is not None else (func if func is not None else 0)
        rows.append(
            {
                "index": raw["index"],
                "physical": physical,
                "partition_id": partition_id,
                "bdf": raw.get("bdf"),
                "model": raw.get("model"),
                "serial": raw.get("serial"),
                "vbios": raw.get("vbios"),
                "vram_total_mib": raw.get("vram_total_mib"),
                "compute_partition": raw.get("compute_partition"),
                "memory_partition": raw.get("memory_partition"),
                "memory_caps": raw.get("memory_caps") or [],
            }
        )
    primaries = primaries_of(rows)
    for row in rows:
        primary = primaries[row["physical"]]
        for key in _IDENTITY_FIELDS:
            if not row[key] and primary[key]:
                row[key] = primary[key]
    return rows


def primaries_of(rows):
    """{physical: static row of its partition 0} (the first row if none is 0)."""
    primaries = {}
    for row in rows:
        if row["partition_id"] == 0:
            primaries.setdefault(row["physical"], row)
    for row in rows:
        primaries.setdefault(row["physical"], row)
    return primaries


def gpu_metrics(index, **values):
    """A sample record with every key present (missing ones null)."""
    record = {"index": index}
    for key in (
        "util_pct",
        "umc_pct",
        "vram_used_mib",
        "vram_total_mib",
        "power_w",
        "power_cap_w",
        "temp_junction_c",
        "temp_mem_c",
        "gfx_clock_mhz",
        "mem_clock_mhz",
    ):
        record[key] = values.get(key)
    record["processes"] = values.get("processes")
    return record


# ------------------------------------------------------------------ samplers


class Sampler:
    """A telemetry source.  The tick loop calls, in order:

    ``static()`` once, then every tick ``refresh(tick)`` (returns new static
    records after a re-enumeration, else None) and ``sample()`` (the tick's
    records, or None when this tick's data could not be read); ``close()``.
    """

    source = ""
    simulated = False

    def static(self):
        raise NotImplementedError

    def refresh(self, tick):
        return None

    def sample(self):
        raise NotImplementedError

    def close(self):
        pass


# The amdsmi path's values.  The C library marks "unsupported" with the all-ones
# value of a field's width; the 7.0.2 wrapper turns only some of those into "N/A"
# (e.g. power_info only 0xFFFF, though the header says UINT32_MAX), so the agent
# checks the width of each field itself, and only that width: 65535 MB of VRAM in
# a uint32 field is a real reading.


def reading(value, bits):
    """An amdsmi number, or None for "N/A", non-numbers and the field's all-ones sentinel."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None if value == (1 << bits) - 1 else value


def percent(value, bits):
    """An activity in %: the wrapper maps >100 to "N/A" for some fields, not for all."""
    value = reading(value, bits)
    return value if value is not None and 0 <= value <= 100 else None


def busy_mean(per_xcc):
    """One partition's gfx busy %: the mean over its XCCs.  Unused XCC slots are
    "N/A" (or UINT32_MAX, > 100, where the wrapper left them): skipped."""
    if not isinstance(per_xcc, (list, tuple)):
        return None
    values = [x for x in per_xcc if isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 100]
    return sum(values) / float(len(values)) if values else None


class AmdsmiSampler(Sampler):
    """The amdsmi Python module: library calls only, no process per tick.

    Per tick and physical GPU at most 3 library calls (docs/hardware.md, "Sampling
    cost"), in every partition mode:

    - one ``amdsmi_get_gpu_metrics_info`` of its primary partition: power,
      temperatures, clocks, memory activity, the gfx busy % of every partition
      (``xcp_stats.gfx_busy_inst``) and the partition count (a compute-mode switch
      shows there at once);
    - one VRAM read: the lane visits the node's logical GPUs round-robin, as many
      per tick as there are physical GPUs, so a partition's VRAM is at most
      (partitions per GPU) ticks old;
    - one slow-lane read: process lists round-robin the same way, except for one
      slot per tick (every other tick on a one-GPU node) that checks a
      slow-changing fact: a GPU's memory mode, its power cap, its compute mode
      when gpu_metrics has no partition count.

    Static facts (identity, partition modes, every partition's VRAM and processes
    once) are read at start and after a re-enumeration only.
    """

    source = "amdsmi"

    def __init__(self, module):
        self.m = module
        self.simulated = bool(getattr(module, "__simulated__", False))
        self.handles = []
        self.rows = []
        self._gpus = []  # one dict per physical GPU, in physical order
        self._vram = {}  # logical index -> (used MiB, total MiB), last read
        self._procs = {}  # logical index -> process list (None: unknown), last read
        self._vram_next = self._procs_next = self._check_next = 0
        self._check_slot = False
        try:
            with contextlib.redirect_stdout(sys.stderr):
                module.amdsmi_init()
        except Exception as exc:
            raise AgentError("amdsmi_init failed (%s)" % describe(exc)) from None
        self._enumerate()

    def _api(self, name, *args):
        """One amdsmi call: ``name`` with ``args``.  A failure (AmdSmiLibraryException,
        a function this release lacks, ...) means 'unknown' for the fields it feeds."""
        try:
            return getattr(self.m, name)(*args)
        except Exception:
            return None

    # -- enumeration: start and partition changes only

    def _enumerate(self):
        try:
            self.handles = list(self.m.amdsmi_get_processor_handles())
        except Exception as exc:
            raise AgentError("amdsmi_get_processor_handles failed (%s)" % describe(exc)) from None
        raws = [self._raw_static(i, h) for i, h in enumerate(self.handles)]
        self.rows = assemble_static(raws)
        self._vram = dict((raw["index"], raw["vram"]) for raw in raws)
        self._procs = dict((i, self._processes(h)) for i, h in enumerate(self.handles))
        primaries = primaries_of(self.rows)
        self._gpus = []
        for physical in sorted(primaries):
            row = primaries[physical]
            primary = self.handles[row["index"]]
            self._gpus.append(
                {
                    "primary_index": row["index"],
                    "primary": primary,
                    "partitions": sum(1 for r in self.rows if r["physical"] == physical),
                    # the partition count gpu_metrics should report; a change means a switch
                    "baseline": sum(1 for r in self.rows if r["physical"] == physical),
                    "modes": (row["compute_partition"], row["memory_partition"]),
                    "power_cap_w": self._power_cap(primary),
                    "metrics": None,
                }
            )
        self._vram_next = self._procs_next = self._check_next = 0

    def _raw_static(self, index, h):
        asic = self._api("amdsmi_get_gpu_asic_info", h)
        board = self._api("amdsmi_get_gpu_board_info", h)
        vbios = self._api("amdsmi_get_gpu_vbios_info", h)
        kfd = self._api("amdsmi_get_gpu_kfd_info", h)
        config = self._api("amdsmi_get_gpu_memory_partition_config", h)
        vram = self._vram_usage(h)
        return {
            "index": index,
            "bdf": text(self._api("amdsmi_get_gpu_device_bdf", h)),
            "partition_hint": reading(dig(kfd, "current_partition_id"), 32),
            "model": text(dig(asic, "market_name")),
            "serial": first(text(dig(asic, "asic_serial")), text(dig(board, "product_serial"))),
            "vbios": text(dig(vbios, "version")),
            "vram_total_mib": vram[1],
            "vram": vram,
            "compute_partition": text(self._api("amdsmi_get_gpu_compute_partition", h)),
            "memory_partition": text(self._api("amdsmi_get_gpu_memory_partition", h)),
            "memory_caps": caps_list(dig(config, "partition_caps")),
        }

    def _reinit(self):
        # After a partition change every handle is invalid (reference §4).
        self._api("amdsmi_shut_down")
        try:
            with contextlib.redirect_stdout(sys.stderr):
                self.m.amdsmi_init()
        except Exception as exc:
            raise AgentError("amdsmi_init failed after a GPU change (%s)" % describe(exc)) from None
        self._enumerate()
        self._read_all_metrics()
        # The count the driver reports now is the new baseline: one that never
        # matches the enumeration (DRM's 64-node limit hides a CPX partition)
        # re-enumerates once, not at every tick.
        for gpu in self._gpus:
            count = (gpu["metrics"] or {}).get("partitions")
            if count is not None:
                gpu["baseline"] = count
        return self.rows

    # -- the reads of a tick

    def _physical_metrics(self, h, partitions):
        """One gpu_metrics read of a primary partition: the physical GPU's values
        and the gfx busy % of its first ``partitions`` partitions."""
        raw = self._api("amdsmi_get_gpu_metrics_info", h)
        if not isinstance(raw, dict):
            return None
        gfxclks = [reading(v, 16) for v in raw.get("current_gfxclks") or ()]
        xcps = raw.get("xcp_stats.gfx_busy_inst")  # per partition, per XCC
        return {
            "partitions": reading(raw.get("num_partition"), 16),
            "util_pct": percent(raw.get("average_gfx_activity"), 16),
            "umc_pct": percent(raw.get("average_umc_activity"), 16),
            # MI300 and later report current power only, older GPUs the average (W)
            "power_w": first(
                reading(raw.get("current_socket_power"), 16), reading(raw.get("average_socket_power"), 16)
            ),
            "temp_junction_c": reading(raw.get("temperature_hotspot"), 16),
            "temp_mem_c": reading(raw.get("temperature_mem"), 16),
            # MI300 (gpu_metrics >= 1.4) has per-XCC clocks; current_gfxclk is XCC 0's
            "gfx_clock_mhz": first(
                reading(raw.get("current_gfxclk"), 16),
                first(*gfxclks),
                reading(raw.get("average_gfxclk_frequency"), 16),
            ),
            "mem_clock_mhz": first(
                reading(raw.get("current_uclk"), 16), reading(raw.get("average_uclk_frequency"), 16)
            ),
            "xcp_busy": [busy_mean(x) for x in xcps[:partitions]] if isinstance(xcps, list) else [],
        }

    def _vram_usage(self, h):
        """(used MiB, total MiB) of one logical GPU; amdsmi's MB are 2**20 bytes."""
        usage = self._api("amdsmi_get_gpu_vram_usage", h)
        return reading(dig(usage, "vram_used"), 32), reading(dig(usage, "vram_total"), 32)

    def _power_cap(self, h):
        """The settable power cap in W (amdsmi reports it in µW; 0 means unread)."""
        cap = reading(dig(self._api("amdsmi_get_power_cap_info", h), "power_cap"), 64)
        return cap / 1e6 if cap else None

    def _processes(self, h):
        items = self._api("amdsmi_get_gpu_process_list", h)
        if not isinstance(items, list):
            return None
        out = []
        for item in items:
            if not isinstance(item, dict):
                continue
            pid = reading(item.get("pid"), 32)
            if pid is None:
                continue
            used = first(reading(dig(item, "memory_usage", "vram_mem"), 64), reading(item.get("mem"), 64))
            out.append(
                {
                    "pid": int(pid),
                    "name": text(item.get("name")) or "",
                    "vram_mib": None if used is None else used / 2.0**20,
                }
            )
        return out

    def _read_all_metrics(self):
        """gpu_metrics of every physical GPU; True when a partition count changed."""
        changed = False
        for gpu in self._gpus:
            gpu["metrics"] = metrics = self._physical_metrics(gpu["primary"], gpu["partitions"])
            count = metrics["partitions"] if metrics else None
            changed = changed or (count is not None and count != gpu["baseline"])
        return changed

    def _check(self):
        """One slow-changing fact, round-robin over (memory mode, power cap, compute
        mode) of each GPU; the compute mode only where gpu_metrics lacks num_partition
        (older driver).  True when a mode changed: the GPUs must be enumerated again."""
        tasks = 3 * len(self._gpus)
        for _ in range(tasks):
            k = self._check_next % tasks
            self._check_next = k + 1
            gpu, task = self._gpus[k // 3], k % 3
            if task == 0:
                mode = text(self._api("amdsmi_get_gpu_memory_partition", gpu["primary"]))
                return None not in (mode, gpu["modes"][1]) and mode != gpu["modes"][1]
            if task == 1:
                gpu["power_cap_w"] = self._power_cap(gpu["primary"])
                return False
            if gpu["metrics"] is None or gpu["metrics"]["partitions"] is None:
                mode = text(self._api("amdsmi_get_gpu_compute_partition", gpu["primary"]))
                return None not in (mode, gpu["modes"][0]) and mode != gpu["modes"][0]
        return False

    # -- Sampler

    def static(self):
        return self.rows

    def refresh(self, tick):
        if self._read_all_metrics():
            return self._reinit()
        # one slot per tick for a check; a one-GPU node gives it every other tick
        self._check_slot = tick > 0 and (len(self._gpus) > 1 or tick % 2 == 0)
        if self._check_slot and self._check():
            return self._reinit()
        return None

    def sample(self):
        n = len(self.handles)
        for _ in range(min(len(self._gpus), n)):
            i = self._vram_next % n
            self._vram_next = i + 1
            self._vram[i] = self._vram_usage(self.handles[i])
        for _ in range(min(len(self._gpus) - (1 if self._check_slot else 0), n)):
            i = self._procs_next % n
            self._procs_next = i + 1
            self._procs[i] = self._processes(self.handles[i])
        gpus = []
        for row in self.rows:
            gpu = self._gpus[row["physical"]]
            metrics = gpu["metrics"] or {}
            busy = metrics.get("xcp_busy") or []
            own = busy[row["partition_id"]] if row["partition_id"] < len(busy) else None
            # an unpartitioned GPU: the GPU use amd-smi shows; a partition: its XCCs' busy %
            util = first(metrics.get("util_pct"), own) if gpu["partitions"] == 1 else own
            used, total = self._vram.get(row["index"], (None, None))
            values = {
                "util_pct": util,
                "vram_used_mib": used,
                "vram_total_mib": total,
                "processes": self._procs.get(row["index"]),
            }
            if row["index"] == gpu["primary_index"]:  # the physical GPU's values, shown once
                values.update(
                    (k, metrics.get(k))
                    for k in ("umc_pct", "power_w", "temp_junction_c", "temp_mem_c", "gfx_clock_mhz", "mem_clock_mhz")
                )
                values["power_cap_w"] = gpu["power_cap_w"]
            gpus.append(gpu_metrics(row["index"], **values))
        return gpus

    def close(self):
        self._api("amdsmi_shut_down")


def _which(name):
    import shutil  # imported when a CLI is looked for, not at every start

    return shutil.which(name)


def run_json(argv, timeout=CLI_TIMEOUT):
    """Run a vendor CLI and parse its JSON; raises SourceUnavailable on failure."""
    import subprocess  # only the CLI fallbacks need it: the library path starts faster without

    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
            encoding="utf-8",
            errors="replace",
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SourceUnavailable("%s: %s" % (os.path.basename(argv[0]), describe(exc))) from None
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:]
        raise SourceUnavailable(
            "%s exited %d%s" % (os.path.basename(argv[0]), proc.returncode, ": " + last[0] if last else "")
        )
    return parse_json_output(proc.stdout, argv[0])


def parse_json_output(out, what="command"):
    """The JSON document in a CLI's stdout.

    Text printed before it is skipped: amd-smi prints a "Permission needed ..."
    banner (with its own brackets and braces in prose) on stdout when the user
    is outside the render group, rocm-smi prints WARNING lines. Every position
    where a line starts with ``{`` or ``[`` is tried, first the earliest.
    """
    decoder = json.JSONDecoder()
    for match in _JSON_START.finditer(out):
        try:
            return decoder.raw_decode(out, match.start(1))[0]
        except ValueError:
            continue
    raise SourceUnavailable("%s printed no JSON" % os.path.basename(what))


_JSON_START = re.compile(r"(?:^|\n)[ \t]*([\[{])")


def gpu_list(doc, key="gpu_data"):
    """amd-smi >= 26 wraps per-GPU lists in an object, older releases print the list."""
    if isinstance(doc, dict):
        doc = doc.get(key)
    return [g for g in doc if isinstance(g, dict)] if isinstance(doc, list) else []


_MISSING = object()


def lookup(record, path):
    """The value at ``path`` (a tuple of keys), _MISSING when a level is absent or
    N/A, or a BadShape naming the level ("usage") whose shape is unknown."""
    obj = record
    for depth, key in enumerate(path):
        if not isinstance(obj, dict):
            if obj is None or (isinstance(obj, str) and text(obj) is None):
                return _MISSING  # "usage": "N/A" - the tool said it cannot read it
            return BadShape(".".join(path[:depth]), obj)
        if key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


class BadShape(object):
    """A value that is present but has a shape this agent cannot read."""

    def __init__(self, field, value):
        self.field = field
        self.value = value


def is_na(value):
    """The tool's own 'not available' (None, "N/A", {"value": "N/A", ...})."""
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    if isinstance(value, int) and not isinstance(value, bool) and value in _SENTINELS:
        return True  # the library's "unsupported" marker printed as a number
    return value is None or (isinstance(value, str) and text(value) is None)


class ShapeWarnings(object):
    """One stderr line per field whose value has a shape no parser here knows.

    The field's reading is null; the warning names the field and what was
    there, once per agent run, however many ticks repeat it.
    """

    def __init__(self, where, stream=None):
        self.where = where
        self.stream = stream
        self.seen = set()

    def __call__(self, field, value):
        if field in self.seen:
            return
        self.seen.add(field)
        shown = json.dumps(value, default=str)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        (self.stream or sys.stderr).write(
            "node_agent: warning: %s: cannot read %s (got %s); reporting it as null\n" % (self.where, field, shown)
        )


def pick(record, paths, parse=num, warn=None):
    """The first readable value among ``paths`` of ``record``, or None.

    Missing keys and N/A are a plain None (the tool did not report it); a value
    that is there but unreadable is None plus one warning naming the field.
    """
    for path in paths:
        raw = lookup(record, path)
        if raw is _MISSING:
            continue
        if isinstance(raw, BadShape):
            if warn is not None:
                warn(raw.field, raw.value)
            continue
        if is_na(raw):
            continue
        value = parse(raw)
        if value is not None:
            return value
        if warn is not None:
            warn(".".join(path), raw)
    return None


def mib_mb(value):
    return mib(value, "MB")


def mib_bytes(value):
    return mib(value, "B")


def bus_id(value):
    """A PCI address as the rest of the agent keys it: lower case."""
    s = text(value)
    return s.lower() if s else None


# amd-smi field paths, newest spelling first. Renames in ROCm/amdsmi's CLI history:
# metric power socket_power (6.1+) / current_power, average_power and power_limit
# (6.0, amdsmi_commands.py before Feb 2024) / average_socket_power (2023); clock
# gfx_0..7 and mem_0 (6.1.1+) / "gfx" and "MEM" (before); static vbios (6.x) / ifwi
# (7.x); static limit ppt0.socket_power_limit (7.x) / flat socket_power (6.x).
AMD_METRIC_FIELDS = (
    ("util_pct", (("usage", "gfx_activity"),), num),
    ("umc_pct", (("usage", "umc_activity"),), num),
    ("vram_used_mib", (("mem_usage", "used_vram"),), mib_mb),
    ("vram_total_mib", (("mem_usage", "total_vram"),), mib_mb),
    (
        "power_w",
        (
            ("power", "socket_power"),
            ("power", "current_power"),
            ("power", "average_power"),
            ("power", "current_socket_power"),
            ("power", "average_socket_power"),
        ),
        num,
    ),
    ("power_cap_w", (("power", "power_limit"),), num),  # 6.0 only; later releases: static limit
    ("temp_junction_c", (("temperature", "hotspot"),), num),
    ("temp_mem_c", (("temperature", "mem"), ("temperature", "vram")), num),
    ("gfx_clock_mhz", (("clock", "gfx_0", "clk"), ("clock", "gfx", "clk")), num),
    ("mem_clock_mhz", (("clock", "mem_0", "clk"), ("clock", "MEM", "clk"), ("clock", "mem", "clk")), num),
)
AMD_STATIC_FIELDS = (
    ("bdf", (("bus", "bdf"), ("bdf",)), bus_id),
    ("partition_hint", (("partition", "partition_id"),), num),
    # market_name is N/A without render-group access; the board name is not
    ("model", (("asic", "market_name"), ("board", "product_name")), text),
    ("serial", (("asic", "asic_serial"), ("board", "product_serial")), text),
    ("vbios", (("ifwi", "version"), ("vbios", "version")), text),
    ("vram_total_mib", (("vram", "size"),), mib_mb),
    ("compute_partition", (("partition", "compute_partition"),), text),
    ("memory_partition", (("partition", "memory_partition"),), text),
    ("power_cap_w", (("limit", "ppt0", "socket_power_limit"), ("limit", "socket_power"), ("limit", "power_cap")), num),
)


def amd_static_facts(record, warn=None):
    """What the agent reads from one GPU record of ``amd-smi static --json``."""
    return dict((name, pick(record, paths, parse, warn)) for name, paths, parse in AMD_STATIC_FIELDS)


def amd_metric_values(record, warn=None):
    """The sample fields of one GPU record of ``amd-smi metric --json``."""
    usage = record.get("usage")
    if not isinstance(usage, (dict, list)) and not is_na(usage) and num(usage) is not None:
        record = dict(record, usage={"gfx_activity": usage})  # some releases print one "42 %"
    return dict((name, pick(record, paths, parse, warn)) for name, paths, parse in AMD_METRIC_FIELDS)


def xcp_busy(record, partition_id):
    """Mean gfx busy % of one partition's XCCs from a primary's per-XCP table
    (usage.gfx_busy_inst.xcp_N, amd-smi >= 6.4), or None."""
    table = lookup(record, ("usage", "gfx_busy_inst"))
    if not isinstance(table, dict):
        return None
    cells = table.get("xcp_%d" % partition_id)
    if not isinstance(cells, list):
        return None
    busy = [v for v in (num(c) for c in cells) if v is not None]
    return sum(busy) / len(busy) if busy else None


def amd_processes(doc, warn=None):
    """{gpu index: [{"pid", "name", "vram_mib"}]} from ``amd-smi process --json``.

    Shapes: a list (or {"gpu_data": [...]}) of {"gpu", "process_list"}; each item
    {"process_info": {...}}; an idle GPU says "No running processes detected"
    instead of a list or of a process_info. VRAM is memory_usage.vram_mem
    (6.2.1+) or the single mem_usage of 6.2.0, in the unit it names.
    """
    out = {}
    for pos, entry in enumerate(gpu_list(doc)):
        index = num(entry.get("gpu"))
        index = int(index) if index is not None else pos
        procs = out.setdefault(index, [])
        items = entry.get("process_list")
        if not isinstance(items, list):
            if items is not None and not isinstance(items, str) and warn is not None:
                warn("process_list", items)
            continue
        for item in items:
            info = item.get("process_info", item) if isinstance(item, dict) else item
            if not isinstance(info, dict):
                continue  # the idle placeholder string
            pid = num(info.get("pid"))
            if pid is None:
                continue
            procs.append(
                {
                    "pid": int(pid),
                    "name": text(info.get("name")) or "",
                    "vram_mib": pick(info, (("memory_usage", "vram_mem"), ("mem_usage",), ("mem",)), mib_bytes, warn),
                }
            )
    return out


class CliSampler(Sampler):
    """Shared tick logic of the CLI fallbacks: one command per tick."""

    def __init__(self):
        self.warn = ShapeWarnings(self.source)
        self.doc = self._read_metrics()  # fails fast: then the next source is tried
        if not self._count(self.doc):
            raise SourceUnavailable("%s listed no GPU (%s)" % (self.source, shape_of(self.doc)))
        self.rows = self._read_static()
        self._failures = 0

    def _read_metrics(self):
        raise NotImplementedError

    def _read_static(self):
        raise NotImplementedError

    def _partition_changed(self, tick):
        return False

    def _count(self, doc):
        raise NotImplementedError

    def _each_tick(self, tick):
        """Extra reads on some ticks (processes); tick 0 included."""

    def static(self):
        return self.rows

    def refresh(self, tick):
        if tick == 0:
            self._each_tick(tick)
            return None  # __init__ already read this tick's document
        try:
            self.doc = self._read_metrics()
            self._failures = 0
        except SourceUnavailable as exc:
            self.doc = None
            self._failures += 1
            sys.stderr.write("node_agent: %s\n" % exc)
            if self._failures >= MAX_CLI_FAILURES:
                raise AgentError("%s failed %d times in a row (%s)" % (self.source, self._failures, exc)) from None
            return None
        self._each_tick(tick)
        if self._count(self.doc) != len(self.rows) or self._partition_changed(tick):
            self.rows = self._read_static()
            return self.rows
        return None


def shape_of(doc):
    """What a CLI printed instead of a GPU list, for the one-line reason."""
    if isinstance(doc, list) or (isinstance(doc, dict) and isinstance(doc.get("gpu_data"), list)):
        return "an empty GPU list"
    if isinstance(doc, dict):
        return "unknown output shape: an object with keys %s" % ", ".join(sorted(str(k) for k in doc)[:6])
    return "unknown output shape: a JSON %s" % type(doc).__name__


class AmdSmiCliSampler(CliSampler):
    """``amd-smi metric --json`` per tick; ``static --json`` once per enumeration;
    ``partition --json`` then and every PARTITION_CHECK_EVERY ticks; ``process
    --json`` every PARTITION_CHECK_EVERY ticks (processes between are the last read)."""

    source = "amd-smi"

    def __init__(self, exe):
        self.exe = exe
        self._procs = None
        self._procs_failed = False
        self._caps_w = {}
        self._modes = {}
        super().__init__()

    def _read_metrics(self):
        return run_json([self.exe, "metric", "--json"])

    def _count(self, doc):
        return len(gpu_list(doc))

    def _read_partitions(self):
        """{gpu index: (compute, memory, caps)} from ``amd-smi partition --json``."""
        try:
            # --current --memory: the accelerator table needs root and is not used
            doc = run_json([self.exe, "partition", "--current", "--memory", "--json"])
        except SourceUnavailable:
            return {}  # older amd-smi has no partition command; static may carry it
        return amd_partitions(doc)

    def _each_tick(self, tick):
        if tick % PARTITION_CHECK_EVERY:
            return
        try:
            self._procs = amd_processes(run_json([self.exe, "process", "--json"]), self.warn)
        except SourceUnavailable as exc:
            if not self._procs_failed:  # said once; asked again every few ticks
                sys.stderr.write("node_agent: %s; processes reported as null\n" % exc)
            self._procs_failed = True
            self._procs = None  # unknown, not "no processes"

    def _read_static(self):
        try:
            static = dict(
                (int(first(num(g.get("gpu")), pos)), g)
                for pos, g in enumerate(gpu_list(run_json([self.exe, "static", "--json"])))
            )
        except SourceUnavailable as exc:
            sys.stderr.write("node_agent: %s\n" % exc)
            static = {}
        parts = self._read_partitions()
        self._modes = parts
        raws = []
        self._caps_w = {}
        for pos, metric in enumerate(gpu_list(self.doc)):
            index = int(first(num(metric.get("gpu")), pos))
            facts = amd_static_facts(static.get(index, {}), self.warn)
            part = parts.get(index, (None, None, []))
            self._caps_w[index] = facts["power_cap_w"]
            raws.append(
                {
                    "index": index,
                    "bdf": facts["bdf"],
                    "partition_hint": facts["partition_hint"],
                    "model": facts["model"],
                    "serial": facts["serial"],
                    "vbios": facts["vbios"],
                    "vram_total_mib": first(
                        facts["vram_total_mib"], pick(metric, (("mem_usage", "total_vram"),), mib_mb)
                    ),
                    "compute_partition": first(part[0], facts["compute_partition"]),
                    "memory_partition": first(part[1], facts["memory_partition"]),
                    "memory_caps": part[2],
                }
            )
        return assemble_static(raws)

    def _partition_changed(self, tick):
        if tick % PARTITION_CHECK_EVERY or not self._modes:
            return False
        return self._read_partitions() != self._modes

    def sample(self):
        if self.doc is None:
            return None
        records = {}
        out = []
        for pos, g in enumerate(gpu_list(self.doc)):
            index = int(first(num(g.get("gpu")), pos))
            records[index] = g
            values = amd_metric_values(g, self.warn)
            values["power_cap_w"] = first(self._caps_w.get(index), values["power_cap_w"])
            procs = self._procs.get(index, []) if self._procs is not None else None
            out.append(gpu_metrics(index, processes=procs, **values))
        self._fill_partition_util(out, records)
        return out

    def _fill_partition_util(self, gpus, records):
        """A partitioned GPU's primary carries usage.gfx_busy_inst.xcp_N for every
        partition; secondaries print usage N/A and the primary's gfx_activity is
        the whole card. Each partition's load is the mean of its own XCCs."""
        by_index = dict((g["index"], g) for g in gpus)
        groups = {}
        for row in self.rows:
            groups.setdefault(row["physical"], []).append(row)
        for rows in groups.values():
            if len(rows) < 2:
                continue
            primary = next((r for r in rows if r["partition_id"] == 0), None)
            record = records.get(primary["index"]) if primary else None
            if record is None:
                continue
            for row in rows:
                busy = xcp_busy(record, row["partition_id"])
                if busy is not None and row["index"] in by_index:
                    by_index[row["index"]]["util_pct"] = busy


def amd_partitions(doc):
    """{gpu index: (compute, memory, caps)} from ``amd-smi partition --json``
    (>= 26: {"current_partition": [...], "memory_partition": [...]})."""
    out = {}
    if not isinstance(doc, dict):
        return out
    for entry in gpu_list(doc, "current_partition"):
        i = num(first(entry.get("gpu_id"), entry.get("gpu")))
        if i is not None:
            out[int(i)] = [mode_name(entry.get("accelerator_type")), mode_name(entry.get("memory")), []]
    for entry in gpu_list(doc, "memory_partition"):
        i = num(first(entry.get("gpu_id"), entry.get("gpu")))
        if i is not None:
            row = out.setdefault(int(i), [None, None, []])
            row[1] = row[1] or mode_name(entry.get("current_memory_partition"))
            row[2] = [mode_name(c) for c in caps_list(entry.get("memory_partition_caps"))]
    return dict((i, tuple(v)) for i, v in out.items())


def mode_name(value):
    """'SPX', 'NPS1' - the accelerator table marks the current profile 'SPX*'."""
    s = text(value)
    return s.rstrip("*").strip().upper() or None if s else None


ROCM_SMI_TICK_ARGS = (
    "--showuse",
    "--showmemuse",
    "--showpower",
    "--showtemp",
    "--showclocks",
    "--showmeminfo",
    "vram",
    "--showcomputepartition",
    "--showmemorypartition",
    "--json",
)
ROCM_SMI_STATIC_ARGS = ("--showbus", "--showproductname", "--showserial", "--showvbios", "--showmaxpower", "--json")


def ci_get(record, *names):
    """rocm-smi keys change case between releases ('Card series'/'Card Series')."""
    lowered = dict((k.lower(), v) for k, v in record.items())
    return first(*(lowered.get(n.lower()) for n in names))


def rocm_cards(doc):
    """[(index, record)] of a rocm-smi document {"card0": {...}, "system": {...}}."""
    cards = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key.startswith("card") and key[4:].isdigit() and isinstance(value, dict):
                cards.append((int(key[4:]), value))
    return sorted(cards, key=lambda c: c[0])


# rocm-smi keys per field, newest spelling first (matched case-insensitively).
ROCM_METRIC_FIELDS = (
    ("util_pct", ("GPU use (%)",), num),
    # 6.1+: read/write activity; before, "GPU memory use (%)" was the same
    # mem_busy_percent (VRAM allocated is "GPU Memory Allocated (VRAM%)")
    ("umc_pct", ("GPU Memory Read/Write Activity (%)", "GPU memory use (%)"), num),
    ("vram_used_mib", ("VRAM Total Used Memory (B)",), mib_bytes),
    ("vram_total_mib", ("VRAM Total Memory (B)",), mib_bytes),
    ("power_w", ("Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)"), num),
    ("power_cap_w", ("Max Graphics Package Power (W)",), num),
    ("temp_junction_c", ("Temperature (Sensor junction) (C)",), num),
    (
        "temp_mem_c",
        ("Temperature (Sensor memory) (C)", "Temperature (Sensor mem) (C)", "Temperature (Sensor HBM 0) (C)"),
        num,
    ),
    ("gfx_clock_mhz", ("sclk clock speed:",), num),
    ("mem_clock_mhz", ("mclk clock speed:",), num),
)


def rocm_value(card, names, parse, warn):
    raw = ci_get(card, *names)
    if raw is None or is_na(raw):
        return None
    value = parse(raw)
    if value is None and warn is not None:
        warn(repr(next(n for n in names if ci_get(card, n) is not None)), raw)
    return value


def rocm_metric_values(card, warn=None, static=None):
    values = dict((name, rocm_value(card, names, parse, warn)) for name, names, parse in ROCM_METRIC_FIELDS)
    if values["power_cap_w"] is None and static:  # --showmaxpower is asked once, with the static facts
        values["power_cap_w"] = rocm_value(static, ("Max Graphics Package Power (W)",), num, warn)
    return values


class RocmSmiCliSampler(CliSampler):
    """``rocm-smi ... --json`` per tick (string values, VRAM in bytes).

    Processes stay null: rocm-smi's JSON lists PIDs under "system" with a GPU
    count but not which GPUs (--showpidgpus has no JSON form)."""

    source = "rocm-smi"

    def __init__(self, exe):
        self.exe = exe
        self._static = {}
        super().__init__()

    def _read_metrics(self):
        return run_json([self.exe] + list(ROCM_SMI_TICK_ARGS))

    def _count(self, doc):
        return len(rocm_cards(doc))

    def _modes_of(self, doc):
        return [
            (mode_name(ci_get(c, "Compute Partition")), mode_name(ci_get(c, "Memory Partition")))
            for _, c in rocm_cards(doc)
        ]

    def _read_static(self):
        try:
            static = dict(rocm_cards(run_json([self.exe] + list(ROCM_SMI_STATIC_ARGS))))
        except SourceUnavailable as exc:
            sys.stderr.write("node_agent: %s\n" % exc)
            static = {}
        self._static = static
        self._modes = self._modes_of(self.doc)
        raws = []
        for index, card in rocm_cards(self.doc):
            st = static.get(index, {})
            raws.append(
                {
                    "index": index,
                    "bdf": bus_id(ci_get(st, "PCI Bus")),
                    "model": text(ci_get(st, "Card Series", "Device Name", "Card Model")),
                    "serial": text(ci_get(st, "Serial Number")),
                    "vbios": text(ci_get(st, "VBIOS version")),
                    "vram_total_mib": rocm_value(card, ("VRAM Total Memory (B)",), mib_bytes, self.warn),
                    "compute_partition": mode_name(ci_get(card, "Compute Partition")),
                    "memory_partition": mode_name(ci_get(card, "Memory Partition")),
                }
            )
        return assemble_static(raws)

    def _partition_changed(self, tick):
        return self._modes_of(self.doc) != self._modes  # free: in every tick's output

    def sample(self):
        if self.doc is None:
            return None
        return [
            gpu_metrics(index, **rocm_metric_values(c, self.warn, self._static.get(index)))
            for index, c in rocm_cards(self.doc)
        ]


# ------------------------------------------------------------ source choice


def describe(exc):
    return "%s: %s" % (type(exc).__name__, exc)


def load_amdsmi(paths):
    """(module, None) or (None, one-line reason).

    The real module prints to stdout and raises KeyError (not ImportError)
    when libamd_smi.so is missing, so stdout is redirected and any exception
    is caught.
    """
    for path in reversed(paths or ()):
        sys.path.insert(0, path)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import amdsmi  # noqa: PLC0415 - optional, found at run time
    except Exception as exc:
        return None, describe(exc)
    return amdsmi, None


def open_nvidia(paths, reasons):
    """(sampler, note) from NVML or nvidia-smi (nvidia.py, shipped beside this file), or None."""
    try:
        import nvidia  # noqa: PLC0415 - shipped beside this file
    except ImportError as exc:
        reasons.append("nvidia.py missing beside the agent (%s)" % exc)
        return None
    return nvidia.open_nvidia(sys.modules[__name__], paths, reasons)


def open_sampler(paths):
    """(sampler, note): the first source that works; AgentError when none does.

    amdsmi, amd-smi, rocm-smi, then NVIDIA's pynvml and nvidia-smi: an AMD
    node never pays for the NVIDIA probes, an NVIDIA node pays one failed
    import and two PATH lookups once."""
    module, why = load_amdsmi(paths)
    if module is not None:
        try:
            return AmdsmiSampler(module), None  # init failure is final for the AMD CLIs: same library
        except AgentError:
            found = open_nvidia(paths, []) if nvidia_present(paths) else None
            if found is None:
                raise
            return found
    reasons = ["amdsmi module unavailable (%s)" % why]
    fallbacks = (
        ("amd-smi", AmdSmiCliSampler, "amd-smi metric --json"),
        ("rocm-smi", RocmSmiCliSampler, "rocm-smi --json"),
    )
    for name, cls, how in fallbacks:
        exe = _which(name)
        if exe is None:
            reasons.append("%s not found" % name)
            continue
        try:
            sampler = cls(exe)
        except SourceUnavailable as exc:
            reasons.append("%s failed (%s)" % (name, exc))
            continue
        return sampler, "%s; using %s" % ("; ".join(reasons), how)
    found = open_nvidia(paths, reasons)
    if found is not None:
        return found
    raise AgentError("no telemetry source: " + "; ".join(reasons))


def nvidia_present(paths):
    """An NVIDIA stack is on this node: its driver is loaded, nvidia-smi is on PATH,
    or a pynvml module sits in an --amdsmi-path folder (the simulated node)."""
    if os.path.isdir("/proc/driver/nvidia") or _which("nvidia-smi"):
        return True
    return any(os.path.exists(os.path.join(path, "pynvml.py")) for path in paths or ())


# ------------------------------------------------------------------ output


class JsonLineWriter:
    """One compact JSON object per line, flushed so the console sees it at once."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, obj):
        self.stream.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.stream.flush()

    def silence(self):
        """After EPIPE: point the stream at /dev/null so exit-time flushes stay quiet."""
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
        except (OSError, ValueError):  # io.UnsupportedOperation is both
            pass


def claim_stdout():
    """A private stream on the real stdout; fd 1 then points at stderr.

    Vendor code (Python prints, or C code writing to fd 1) can then never put
    a non-JSON line into the stream the console parses.
    """
    sys.stdout.flush()
    try:
        fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        return sys.stdout
    return open(fd, "w", encoding="utf-8", newline="\n")


# ------------------------------------------------------------------ tick loop


def next_deadline(deadline, interval, now):
    """The next tick time on the fixed grid; missed ticks are skipped, not burst."""
    deadline += interval
    if deadline <= now:
        deadline += (math.floor((now - deadline) / interval) + 1) * interval
    return deadline


def run_ticks(sampler, writer, interval, count, clock=time.monotonic, sleep=time.sleep):
    """Write static once (and on change), then one sample per tick."""
    static = sampler.static()
    writer.write({"kind": "static", "ts": time.time(), "gpus": static})
    deadline = clock()
    tick = 0
    while count is None or tick < count:
        if tick:
            sleep(max(0.0, deadline - clock()))
        changed = sampler.refresh(tick)
        if changed is not None and changed != static:
            static = changed
            writer.write({"kind": "static", "ts": time.time(), "gpus": static})
        gpus = sampler.sample()
        if gpus is not None:  # a CLI tick that failed is skipped: the console marks it stale
            writer.write({"kind": "sample", "ts": time.time(), "seq": tick, "gpus": gpus})
        deadline = next_deadline(deadline, interval, clock())
        tick += 1


def telemetry(args, writer):
    sampler = None
    try:
        sampler, note = open_sampler(args.amdsmi_path)
        hello = {
            "kind": "hello",
            "agent_version": AGENT_VERSION,
            "source": sampler.source,
            "simulated": sampler.simulated,
            "note": note,
            "hostname": os.uname().nodename,
            "interval": args.interval,
            "pid": os.getpid(),
        }
        if getattr(sampler, "vendor", None):  # NVIDIA samplers say so; no key means AMD
            hello["vendor"] = sampler.vendor
        writer.write(hello)
        run_ticks(sampler, writer, args.interval, args.count)
    except AgentError as exc:
        writer.write({"kind": "error", "message": str(exc)})
        return EXIT_NO_SOURCE
    finally:
        if sampler is not None:
            sampler.close()
    return EXIT_OK


# ------------------------------------------------------------------ probe


def read_text(path):
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def rocm_version():
    roots = [os.environ.get("ROCM_PATH"), "/opt/rocm"]
    for root in roots:
        if root:
            found = read_text(os.path.join(root, ".info", "version"))
            if found:
                return found
    return None


def dist_version(name):
    """An installed distribution's version without spawning a process."""
    try:
        from importlib import metadata  # Python >= 3.8

        return metadata.version(name)
    except Exception:
        return None


def probe(args):
    module, _ = load_amdsmi(args.amdsmi_path)
    if module is not None:
        source = "amdsmi"
    else:
        source = next((n for n in ("amd-smi", "rocm-smi") if _which(n)), None)
        if source is None and nvidia_present(args.amdsmi_path):
            source = "nvidia-smi" if _which("nvidia-smi") else "nvml"
    version = getattr(module, "__version__", None) if module is not None else None
    return {
        "kind": "probe",
        "hostname": os.uname().nodename,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "rocm": rocm_version(),
        "amdsmi": None if version is None else str(version),
        # A simulated node has no vllm distribution: its simulator says which it imitates.
        "vllm": dist_version("vllm") or (getattr(module, "SIM_VLLM_VERSION", None) if module is not None else None),
        "numa_balancing": read_text("/proc/sys/kernel/numa_balancing"),
        "source": source,
        "uid": os.geteuid(),
    }


# ------------------------------------------------------------------ main


class JsonArgumentParser(argparse.ArgumentParser):
    """Usage errors become an ``error`` line (exit 2): the console reads stdout only."""

    writer = None

    def error(self, message):
        if JsonArgumentParser.writer is not None:
            JsonArgumentParser.writer.write({"kind": "error", "message": message})
        self.exit(EXIT_USAGE, "%s: error: %s\n" % (self.prog, message))


def interval_arg(value):
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds, got %r" % value) from None
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:  # also rejects nan
        raise argparse.ArgumentTypeError(
            "must be between %g and %g seconds, got %s" % (MIN_INTERVAL, MAX_INTERVAL, value)
        )
    return seconds


def count_arg(value):
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError("must be a positive integer, got %r" % value)
    return n


MODES = ("telemetry", "probe", "instance", "partition", "doctor", "instance-monitor")


def build_parser(only=None):
    """The agent's parser; with `only` (a mode named on the command line) just that mode's
    part: argparse costs ~1 ms per sub-parser, and the console starts the agent often."""

    def want(mode):
        return only is None or only == mode

    parser = JsonArgumentParser(prog="node_agent.py", description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", parser_class=JsonArgumentParser)
    modes.required = True
    if want("telemetry"):
        tel = modes.add_parser("telemetry", help="stream GPU telemetry as JSON lines")
        tel.add_argument("--interval", type=interval_arg, default=1.0, help="seconds (0.1-10)")
        tel.add_argument("--count", type=count_arg, default=None, help="ticks, then exit 0")
        _add_amdsmi_path(tel)
    if want("probe"):
        _add_amdsmi_path(modes.add_parser("probe", help="print one JSON line about this node"))
    if want("instance"):
        inst = modes.add_parser("instance", help="start/list/stop/logs of supervised instances")
        inst.add_argument("--state-dir", required=True)
        inst.add_argument(
            "--group",
            choices=("instances", "runs"),
            default="instances",
            help="instances (vllm serve) or runs (benchmark clients)",
        )
        ops = inst.add_subparsers(dest="op", parser_class=JsonArgumentParser)
        ops.required = True
        ops.add_parser("start", help="spec JSON on stdin")
        ops.add_parser("list")
        for op in ("stop", "logs", "remove"):
            sub = ops.add_parser(op)
            sub.add_argument("name")
            if op == "stop":
                sub.add_argument("--int-timeout", type=float, default=30.0)
                sub.add_argument("--term-timeout", type=float, default=10.0)
            if op == "logs":
                sub.add_argument("--offset", type=int, default=0)
                sub.add_argument("--lines", type=int, default=None)
                sub.add_argument("--follow", action="store_true")
                sub.add_argument("--max-seconds", type=float, default=None)
                sub.add_argument("--split-cr", action="store_true", help="turn \\r redraws into line ends")
    if want("partition"):
        part = modes.add_parser("partition", help="show or set compute/memory partition modes")
        part_ops = part.add_subparsers(dest="op", parser_class=JsonArgumentParser)
        part_ops.required = True
        _add_amdsmi_path(part_ops.add_parser("show"))
        part_set = part_ops.add_parser("set")
        part_set.add_argument("--gpus", default="all", help="physical GPUs: all or 0,1,...")
        part_set.add_argument("--compute", type=str.upper, default=None)
        part_set.add_argument("--memory", type=str.upper, default=None)
        part_set.add_argument(
            "--reload-driver", action="store_true", help="confirm the amdgpu driver reload a memory switch needs"
        )
        _add_amdsmi_path(part_set)
    if want("doctor"):
        doc = modes.add_parser("doctor", help="check this node for rocm-console (one JSON line)")
        doc.add_argument("--amdsmi-path", action="append", default=[], metavar="DIR")
        doc.add_argument("--vllm", default="vllm", help="how vllm is run on this node (a command line)")
        doc.add_argument("--sudo", action="store_true", help="the console runs partition switches through sudo -n")
        doc.add_argument("--sysroot", default="/", help="read /proc, /sys, /dev, /opt below this folder")
    if want("instance-monitor"):
        mon = modes.add_parser("instance-monitor", help=argparse.SUPPRESS)
        mon.add_argument("folder")
    return parser


def _add_amdsmi_path(sub):
    sub.add_argument(
        "--amdsmi-path",
        action="append",
        default=[],
        metavar="DIR",
        help="put DIR first on sys.path before importing amdsmi",
    )


def partition(args, writer):
    """Partition show/set; failures are an error line with a reason class, exit 4."""
    import partitions  # shipped beside this file

    try:
        if args.op == "show":
            writer.write(partitions.show(load_amdsmi, args.amdsmi_path))
            return EXIT_OK
        physical = None
        if args.gpus != "all":
            try:
                physical = sorted({int(x) for x in args.gpus.split(",") if x.strip()})
            except ValueError:
                raise partitions.PartitionError("--gpus %r: expected all or 0,1,..." % args.gpus, "invalid")
        if args.compute is None and args.memory is None:
            raise partitions.PartitionError("nothing to set: give --compute and/or --memory", "invalid")
        writer.write(
            partitions.set_modes(load_amdsmi, args.amdsmi_path, physical, args.compute, args.memory, args.reload_driver)
        )
        return EXIT_OK
    except partitions.PartitionError as exc:
        writer.write({"kind": "error", "message": str(exc), "reason": exc.kind})
        return EXIT_PARTITION


def instance(args, writer):
    """Supervisor commands; one JSON line per record (logs: the raw log bytes)."""
    import supervisor  # shipped beside this file

    supervisor.GROUP = args.group
    try:
        if args.op == "start":
            spec = json.loads(sys.stdin.read() or "{}")
            if not isinstance(spec, dict):
                raise supervisor.SupervisorError("the spec on stdin must be a JSON object")
            writer.write(supervisor.start(args.state_dir, spec, os.path.abspath(__file__)))
        elif args.op == "list":
            foreign = supervisor.foreign_vllm(args.state_dir) if args.group == "instances" else []
            for rec in supervisor.list_instances(args.state_dir) + foreign:
                writer.write(rec)
        elif args.op == "stop":
            writer.write(supervisor.stop(args.state_dir, args.name, args.int_timeout, args.term_timeout))
        elif args.op == "remove":
            writer.write(supervisor.remove(args.state_dir, args.name))
        elif args.op == "logs":
            supervisor.logs(
                args.state_dir,
                args.name,
                writer.stream.buffer,
                offset=args.offset,
                follow=args.follow,
                lines=args.lines,
                max_seconds=args.max_seconds,
                split_cr=args.split_cr,
            )
    except (supervisor.SupervisorError, ValueError) as exc:
        writer.write({"kind": "error", "message": str(exc)})
        return EXIT_USAGE
    return EXIT_OK


def main(argv=None):
    writer = JsonLineWriter(claim_stdout())
    JsonArgumentParser.writer = writer
    try:
        line = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(line[0] if line and line[0] in MODES else None).parse_args(line)
        if args.mode != "instance-monitor":  # the monitor stops its instance first (supervisor)
            import lifeline  # shipped beside this file

            lifeline.watch(lambda: os._exit(EXIT_OK))  # a demo console that is gone reads nothing more
        if args.mode == "probe":
            writer.write(probe(args))
            return EXIT_OK
        if args.mode == "instance":
            return instance(args, writer)
        if args.mode == "partition":
            return partition(args, writer)
        if args.mode == "doctor":
            import doctor  # shipped beside this file

            writer.write(doctor.run(sys.modules[__name__], args))
            return EXIT_OK
        if args.mode == "instance-monitor":
            import supervisor

            return supervisor.monitor(args.folder)
        return telemetry(args, writer)
    except BrokenPipeError:  # the console went away: nothing left to report to
        writer.silence()
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
