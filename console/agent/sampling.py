"""What every telemetry source of the agent shares (runs on the node: stdlib, Python >= 3.8).

The agent's two errors, the one value normaliser (``num``) and its helpers, the
assembly of static records (partitions get their physical GPU's identity), the
sample record and the ``Sampler`` interface the tick loop drives. Imported by
node_agent.py, amdsmi_sampler.py, smi_cli.py, and through the agent module by
nvidia.py and doctor.py.
"""

from __future__ import annotations

import json
import math
import os
import re
import select

MAX_CLI_FAILURES = 5  # consecutive failed CLI ticks before the agent gives up (amd-smi, rocm-smi, nvidia-smi)

# "unsupported" markers of the C library that can leak through the wrapper (and a CLI's output)
SENTINELS = frozenset((0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF))
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
        return None if value in SENTINELS else value
    if isinstance(value, float):
        return value if math.isfinite(value) and value not in SENTINELS else None
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
    # the physical GPU's energy counter (J, cumulative) and whether it throttled in the last
    # tick: on its partition 0's row only, null elsewhere and where the source cannot say
    record["energy_j"] = values.get("energy_j")
    record["throttled"] = values.get("throttled")
    return record


class HealthSpread:
    """Which physical GPUs a tick reads health of: round-robin, ``n * tick / interval``
    GPUs per tick on average, so every GPU is read once per ``interval`` and no tick
    reads more than ceil(n * tick / interval) of them (never a burst of all GPUs)."""

    def __init__(self, tick, interval):
        self.rate_per_gpu = float(tick) / float(interval)
        self.n = 0
        self._next = 0
        self._credit = 0.0

    def picks(self, n):
        """The physical indices to read this tick; a new GPU count starts a new round."""
        if n != self.n:
            self.n, self._next = n, 0
            rate = n * self.rate_per_gpu
            self._credit = math.ceil(rate) - rate if rate > 0 else 0.0  # the first tick reads at once
        if n <= 0:
            return []
        self._credit += n * self.rate_per_gpu
        count = min(n, int(self._credit + 1e-9))
        self._credit -= count
        if self._credit > n:  # an interval shorter than a tick: never save up a burst
            self._credit = 0.0
        out = [(self._next + k) % n for k in range(count)]
        self._next = (self._next + count) % n
        return out


# A GPU's health entry goes out in full at least every this many readings (an hour at 10 s): a
# last resort only. Each `same` pair names the full entry it repeats (its "n"), and a console
# that lacks that entry asks for it again ({"kind": "health", "full": [...]}: HealthDelta.apply).
# Every 30th cost the watcher of 1,024 x 8 GPUs ~27 full entries a second, ~1.5 % of a core.
FULL_EVERY = 360
# `same` pairs wait for a sample line (or a full entry) at most this many health intervals: a
# node off screen sends a sample every 30 s to a watcher, so its GPUs' unchanged readings ride
# along with it, not with every tick line (a line each 5 s per node, ~200 a second at 1,024).
HOLD_INTERVALS = 3
MAX_FULL_ASKED = 1024  # GPUs one ask for full entries names, at most (a node has 8, or 64 partitions)
# What of a health entry moves at every reading without saying anything about the GPU's health:
# timestamps, the clocks the residency counters are read against, a bandwidth. Left out when an
# entry is compared with the last one sent (a residency counter itself is compared: it moves
# only while the GPU throttles). (path to a dict, its keys)
HEALTH_VOLATILE = (
    (("results", "amdsmi_get_violation_status"), ("reference_timestamp", "violation_timestamp", "acc_counter")),
    (("results", "amdsmi_get_gpu_metrics_info"), ("accumulation_counter",)),
    (("results", "amdsmi_get_pcie_info", "pcie_metric"), ("pcie_bandwidth",)),
    (("nvml",), ("t", "calls")),
)
CPER_RESULT = "amdsmi_get_gpu_cper_entries"


def _without(obj, path, keys):
    """``obj`` with ``keys`` removed from the dict at ``path`` (copies along the path only)."""
    if not isinstance(obj, dict):
        return obj
    if not path:
        return dict((k, v) for k, v in obj.items() if k not in keys)
    inner = obj.get(path[0])
    if not isinstance(inner, dict):
        return obj
    out = dict(obj)
    out[path[0]] = _without(inner, path[1:], keys)
    return out


def _steady(entry):
    """What of a health entry is compared between two readings of a GPU."""
    for path, keys in HEALTH_VOLATILE:
        entry = _without(entry, path, keys)
    results = entry.get("results")
    if isinstance(results, dict) and CPER_RESULT in results and not results[CPER_RESULT]:
        entry = _without(entry, ("results",), (CPER_RESULT,))  # read, nothing new: as not read
    return entry


def _news(entry):
    """The entry carries something that happened (events, CPER records): always sent in full."""
    results = entry.get("results")
    nvml = entry.get("nvml")
    return bool(
        entry.get("events")
        or (isinstance(results, dict) and results.get(CPER_RESULT))
        or (isinstance(nvml, dict) and nvml.get("xid_events"))
    )


class HealthDelta:
    """The health lines of the tick loop: which GPUs read get their full entry (``gpus``) and
    which are only said to be read and unchanged (``same``: [physical, read time, n] items).
    A GPU's entry goes in full when it differs from the last one sent for that GPU
    (HEALTH_VOLATILE left out of the comparison), when it carries events or CPER records, on
    its first reading, at least every ``full_every`` readings, and when the console asks
    (``apply``).  Each full entry carries ``n``, this agent's count of full entries; a ``same``
    item repeats the ``n`` of the entry it says is unchanged, so a console that lacks that one
    (a line it could not read) knows and asks again instead of carrying an older reading.  The
    console carries its last reading of a ``same`` GPU forward to the item's time.  A line with
    full entries goes out at the tick that read them (a change is never held); ``same`` items
    wait for the next sample line the agent writes (``writing``) or ``max_hold`` seconds: a
    node off screen wakes the console for them once per sample, not once per GPU read.  A new
    agent (a reconnect) or a new enumeration (``reset``) starts with full entries."""

    def __init__(self, full_every=FULL_EVERY, max_hold=0.0):
        self.full_every = max(1, int(full_every))
        self.max_hold = max_hold
        self._sent = {}  # physical -> [the compared part of the last entry sent, readings since, its n]
        self._held = []  # [physical, read time, n] of the GPUs read unchanged, not yet sent
        self._n = 0  # full entries sent

    def reset(self):
        self._sent = {}

    def apply(self, message):
        """A console's ``{"kind": "health", "full": [physical, ...]}``: those GPUs' next entries
        go in full (it lacks the one their ``same`` items name).  True when it was one."""
        if not isinstance(message, dict) or message.get("kind") != "health":
            return False
        gpus = message.get("full")
        if not isinstance(gpus, list):
            return False
        for physical in gpus[:MAX_FULL_ASKED]:
            if isinstance(physical, int) and not isinstance(physical, bool):
                self._sent.pop(physical, None)
        return True

    def line(self, ts, interval, entries, writing):
        """The health line to write at ``ts`` after a tick that read ``entries`` (None: none
        now); ``writing``: the tick writes a sample line anyway."""
        full, same = self.split(entries) if entries else ([], [])
        self._held.extend([physical, ts, n] for physical, n in same)
        if not full and not (self._held and (writing or ts - self._held[0][1] >= self.max_hold)):
            return None
        out = {"kind": "health", "ts": ts, "interval": interval, "gpus": full}
        if self._held:
            out["same"], self._held = self._held, []
        return out

    def split(self, entries):
        """(entries to send in full, numbered; [physical, n] of the others)."""
        full, same = [], []
        for entry in entries:
            physical = entry.get("physical") if isinstance(entry, dict) else None
            if not isinstance(physical, int) or isinstance(physical, bool):
                full.append(entry)  # not ours to judge: the console names what is wrong with it
                continue
            steady = _steady(entry)
            last = self._sent.get(physical)
            if last is not None and last[1] + 1 < self.full_every and last[0] == steady and not _news(entry):
                last[1] += 1
                same.append((physical, last[2]))
            else:
                self._n += 1
                self._sent[physical] = [steady, 0, self._n]
                entry = dict(entry)
                entry["n"] = self._n
                full.append(entry)
        return full, same


# ------------------------------------------------------------------ rate control

MAX_EVERY = 600  # ticks between two full samples, at most
CONTROL_LINE = 4096  # bytes of one control line kept (longer: ignored)


class ControlReader:
    """Control lines the console writes to the agent's stdin, one JSON object a line, read
    between ticks (``wait`` replaces the tick loop's sleep).  Stdin at EOF, /dev/null or
    unreadable: the reader closes and the loop sleeps as before, so an agent started by a
    console that sends nothing (or from a terminal) streams as it always did."""

    def __init__(self, fd=0):
        self.fd = fd
        self.closed = False
        self._buf = b""

    def wait(self, timeout):
        """Wait up to ``timeout`` seconds for control lines; the objects read ([] on timeout)."""
        if self.closed:
            return []
        try:
            ready = select.select([self.fd], [], [], max(0.0, timeout))[0]
            data = os.read(self.fd, 65536) if ready else None
        except (OSError, ValueError):
            self.closed = True
            return []
        if data is None:
            return []
        if not data:
            self.closed = True
            return []
        lines = (self._buf + data).split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) > CONTROL_LINE:
            self._buf = b""
        out = []
        for line in lines:
            try:
                obj = json.loads(line.decode("utf-8", "replace")) if len(line) <= CONTROL_LINE else None
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


class SendRate:
    """What each tick writes.  The console asks nodes it does not show to send a full
    sample every ``every`` ticks and, between them, a ``tick`` line (the agent is alive and
    on time) every ``tick`` ticks ({"kind": "rate", "every": N, "tick": K}; K is 1 when
    left out, as older consoles send it); health lines are written as always.  Asked back
    to every tick, the newest sample goes out at once (the node just came on screen)."""

    def __init__(self):
        self.every = 1
        self.tick_every = 1
        self._quiet = 0  # ticks since the last full sample

    def apply(self, message):
        """True when the newest sample should be written now."""
        if message.get("kind") != "rate":
            return False
        every, tick = message.get("every"), message.get("tick", 1)
        if isinstance(every, bool) or not isinstance(every, int) or not 1 <= every <= MAX_EVERY:
            return False
        if isinstance(tick, bool) or not isinstance(tick, int) or not 1 <= tick <= every:
            return False
        sooner = every < self.every and self._quiet > 0
        self.every, self.tick_every = every, tick
        return sooner

    def line(self):
        """The kind of line this tick writes: "sample", "tick" or None (called once per tick)."""
        if self._quiet + 1 >= self.every:
            self._quiet = 0
            return "sample"
        self._quiet += 1
        return "tick" if self._quiet % self.tick_every == 0 else None

    def sent(self):
        self._quiet = 0


# ------------------------------------------------------------------ samplers


class Sampler:
    """A telemetry source.  The tick loop calls, in order:

    ``static()`` once, then every tick ``refresh(tick)`` (returns new static
    records after a re-enumeration, else None) and ``sample()`` (the tick's
    records, or None when this tick's data could not be read); ``close()``.
    With health on, after a tick's sample ``health(physicals)`` for the GPUs
    HealthSpread picks among ``physical_count()``: the ``health`` line's ``gpus``
    entries (None: this source reads no health).
    """

    source = ""
    simulated = False

    def static(self):
        raise NotImplementedError

    def refresh(self, tick):
        return None

    def sample(self):
        raise NotImplementedError

    def physical_count(self):
        return 0

    def health(self, physicals):
        return None

    def close(self):
        pass


def describe(exc):
    return "%s: %s" % (type(exc).__name__, exc)
