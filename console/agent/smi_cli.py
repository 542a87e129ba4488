"""The vendor CLIs as telemetry sources, when the amdsmi module does not load: ``amd-smi
... --json``, then ``rocm-smi ... --json``; their output parsed across releases.

Runs on the node (stdlib, Python >= 3.8); shipped beside node_agent.py, which imports
it only when the amdsmi module is unavailable and a CLI is on PATH: an AMD node with
the library, and an NVIDIA node, never load it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from sampling import (
    MAX_CLI_FAILURES,
    SENTINELS,
    AgentError,
    Sampler,
    SourceUnavailable,
    assemble_static,
    caps_list,
    describe,
    first,
    gpu_metrics,
    mib,
    num,
    primaries_of,
    text,
    unit_of,
)

PARTITION_CHECK_EVERY = 5  # ticks between partition-mode checks (getters can wake the GPU)
CLI_TIMEOUT = 30.0  # amd-smi on a partitioned node can take seconds per call


def run_json(argv, timeout=CLI_TIMEOUT):
    """Run a vendor CLI and parse its JSON; raises SourceUnavailable on failure."""
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
    if isinstance(value, int) and not isinstance(value, bool) and value in SENTINELS:
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


# ``amd-smi metric --json``'s health sections (amd-smi's own names) -> the amdsmi result
# keys the console reads (core/health_readings.py from_amdsmi): the CLI prints the library's values
# under its own names, so the same reading goes into the same shape.  What the CLI does
# not print stays absent.
CLI_ECC_TOTALS = (
    ("total_correctable_count", "correctable_count"),
    ("total_uncorrectable_count", "uncorrectable_count"),
    ("total_deferred_count", "deferred_count"),
)
CLI_ECC_BLOCK_KEYS = ("correctable_count", "uncorrectable_count", "deferred_count")
CLI_PCIE_METRIC = (
    ("width", "pcie_width"),
    ("replay_count", "pcie_replay_count"),
    ("l0_to_recovery_count", "pcie_l0_to_recovery_count"),
    ("replay_roll_over_count", "pcie_replay_roll_over_count"),
    ("nak_sent_count", "pcie_nak_sent_count"),
    ("nak_received_count", "pcie_nak_received_count"),
)
_JOULES_PER_UNIT = {"J": 1.0, "kJ": 1e3, "MJ": 1e6, "mJ": 1e-3, "uJ": 1e-6, "\u00b5J": 1e-6}


def _count(value):
    n = num(value)
    return int(n) if n is not None and n >= 0 else None


def _mts(value):
    """A PCIe rate the CLI prints in GT/s ({"value": 32, "unit": "GT/s"}) as the library's MT/s."""
    n = num(value)
    unit = (unit_of(value) or "GT/s").upper()
    if n is None or unit not in ("GT/S", "MT/S"):
        return None
    return int(round(n * 1000)) if unit == "GT/S" else int(n)


def amd_cli_energy_j(record):
    """energy.total_energy_consumption in J, by the unit the CLI names; None without a known unit."""
    value = lookup(record, ("energy", "total_energy_consumption"))
    n = num(value)
    factor = _JOULES_PER_UNIT.get(str(unit_of(value) or ""))
    return n * factor if n is not None and factor is not None else None


def amd_cli_health(record, bus=None):
    """The amdsmi-shaped ``results`` of one GPU from its ``amd-smi metric --json`` record
    (sections ecc, ecc_blocks, pcie) and its ``amd-smi static --json`` ``bus`` (the
    maximum link); keys the CLI did not print, or printed as N/A, are left out."""
    results = {}
    ecc = record.get("ecc") if isinstance(record, dict) else None
    if isinstance(ecc, dict):
        totals = dict((ours, _count(ecc.get(cli))) for cli, ours in CLI_ECC_TOTALS)
        totals = dict((k, v) for k, v in totals.items() if v is not None)
        if totals:
            results["amdsmi_get_gpu_total_ecc_count"] = totals
    blocks = record.get("ecc_blocks") if isinstance(record, dict) else None
    if isinstance(blocks, dict):
        out = {}
        for name, counts in blocks.items():
            if isinstance(counts, dict):
                kept = dict((k, _count(counts.get(k))) for k in CLI_ECC_BLOCK_KEYS)
                kept = dict((k, v) for k, v in kept.items() if v is not None)
                if kept:
                    out[str(name)] = kept
        if out:
            results["amdsmi_get_gpu_ecc_count"] = out
    pcie = record.get("pcie") if isinstance(record, dict) else None
    metric = {}
    if isinstance(pcie, dict):
        metric = dict((ours, _count(pcie.get(cli))) for cli, ours in CLI_PCIE_METRIC)
        metric["pcie_speed"] = _mts(pcie.get("speed"))
        metric = dict((k, v) for k, v in metric.items() if v is not None)
    static = {}
    if isinstance(bus, dict):
        static = {
            "max_pcie_width": _count(bus.get("max_pcie_width")),
            "max_pcie_speed": _mts(bus.get("max_pcie_speed")),
        }
        static = dict((k, v) for k, v in static.items() if v is not None)
    if metric or static:
        results["amdsmi_get_pcie_info"] = dict(
            (k, v) for k, v in (("pcie_static", static), ("pcie_metric", metric)) if v
        )
    return results


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
        self._bus = {}  # gpu index -> static's "bus" (the maximum PCIe link)
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
        self._bus = dict((i, g.get("bus")) for i, g in static.items() if isinstance(g.get("bus"), dict))
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

    @property
    def _partition0(self):
        return dict((r["index"], r["partition_id"] == 0) for r in self.rows)

    def physical_count(self):
        return len(set(r["physical"] for r in self.rows)) if self.doc is not None else 0

    def health(self, physicals):
        """Health from the tick's own ``metric --json`` document (no extra process): the
        sections ecc, ecc_blocks and pcie of each physical GPU's primary record."""
        records = dict((int(first(num(g.get("gpu")), pos)), g) for pos, g in enumerate(gpu_list(self.doc)))
        primaries = primaries_of(self.rows)
        out = []
        for physical in physicals:
            row = primaries.get(physical)
            if row is None:
                continue
            results = amd_cli_health(records.get(row["index"], {}), self._bus.get(row["index"]))
            out.append({"physical": physical, "vendor": "amd", "source": "amd-smi", "results": results, "events": []})
        return out

    def sample(self):
        if self.doc is None:
            return None
        records = {}
        out = []
        part0 = self._partition0
        for pos, g in enumerate(gpu_list(self.doc)):
            index = int(first(num(g.get("gpu")), pos))
            records[index] = g
            values = amd_metric_values(g, self.warn)
            values["power_cap_w"] = first(self._caps_w.get(index), values["power_cap_w"])
            if part0.get(index, True):  # a physical GPU's counter: on its partition 0 only
                values["energy_j"] = amd_cli_energy_j(g)  # throttled: the CLI prints no residency counters
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
