"""NVIDIA GPU health through NVML: ECC, remapped rows, retired pages, clock-event
(throttle) reasons and residency, PCIe link, NVLink, energy and XID events.

Shipped beside node_agent.py (stdlib + pynvml from nvidia-ml-py, Python >= 3.8,
never imports ``console``).  ``HealthReader`` reads every physical GPU at a slow
cadence of its own (``interval``, default 10 s) and returns one record per GPU
(field names and units: docs/nvidia.md, "Health and energy").  ``run_sample``
is the 1 Hz reading a benchmark keeps beside its result (power, energy counter,
clocks, utilization, temperatures, throttle reasons and residency).

A value NVML cannot give is ``None`` (``null``), never 0.  Each call is guarded on
its own: a call answering NotSupported (or NoPermission, or missing from this
pynvml / driver) for a GPU is not asked again for that GPU, any other error
leaves that one value null for this reading.  Run as a script it prints the
records as JSON lines: ``python3 nvidia_health.py [--interval S] [--count N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

HEALTH_INTERVAL_S = 10.0
NVLINK_ERROR_LINKS_PER_READ = 3  # links whose error counters one reading refreshes (round robin)
MAX_EVENTS_PER_READ = 64  # XID events drained per reading, so a storm cannot stall the agent
MW_PER_W = 1000.0
READ = object()  # read_gpu's energy_mj when the reader reads the counter itself

# Clock event reasons: (record name, pynvml constant, bit).  The bits are NVML's
# (nvml.h); the contract test holds them against the real constants.  Reasons
# with no Event spelling in pynvml keep the older Throttle name.
CLOCK_EVENT_REASONS = (
    ("idle", "nvmlClocksEventReasonGpuIdle", 0x1),
    ("app_clocks", "nvmlClocksEventReasonApplicationsClocksSetting", 0x2),
    ("sw_power_cap", "nvmlClocksEventReasonSwPowerCap", 0x4),
    ("hw_slowdown", "nvmlClocksEventReasonHwSlowdown", 0x8),
    ("sync_boost", "nvmlClocksEventReasonSyncBoost", 0x10),
    ("sw_thermal", "nvmlClocksEventReasonSwThermalSlowdown", 0x20),
    ("hw_thermal", "nvmlClocksEventReasonHwThermalSlowdown", 0x40),
    ("hw_power_brake", "nvmlClocksEventReasonHwPowerBrakeSlowdown", 0x80),
    ("display_clocks", "nvmlClocksEventReasonDisplayClockSetting", 0x100),
    ("board_limit", "nvmlClocksThrottleReasonBoardLimit", 0x200),
    ("reliability", "nvmlClocksThrottleReasonReliability", 0x400),
)
# The reasons that slow a busy GPU down.  Idle, application/display clock
# settings and sync boost are choices, not a limit the GPU hit.
THROTTLING = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", "board_limit", "reliability")

# Accumulated residency counters (ns) read in one nvmlDeviceGetFieldValues call:
# (record name, pynvml constant, field id).  Ids are literal too: an older pynvml
# lacks the 269-271 names, and the driver answers per field.
RESIDENCY_FIELDS = (
    ("power", "NVML_FI_DEV_PERF_POLICY_POWER", 74),
    ("thermal", "NVML_FI_DEV_PERF_POLICY_THERMAL", 75),
    ("sync_boost", "NVML_FI_DEV_PERF_POLICY_SYNC_BOOST", 76),
    ("board_limit", "NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT", 77),
    ("low_utilization", "NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION", 78),
    ("reliability", "NVML_FI_DEV_PERF_POLICY_RELIABILITY", 79),
    ("sw_thermal", "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN", 269),
    ("hw_thermal", "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN", 270),
    ("hw_power_brake", "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN", 271),
)
# Fields the 1 Hz run sample adds to the same call: (record name, constant, id, scale to the record's unit)
RUN_FIELDS = (
    ("temp_mem_c", "NVML_FI_DEV_MEMORY_TEMP", 82, 1.0),
    ("power_instant_w", "NVML_FI_DEV_POWER_INSTANT", 186, 1.0 / MW_PER_W),
)

# Memory locations whose aggregate ECC counts are asked for; a location the GPU
# does not have answers NotSupported once and is dropped.
ECC_LOCATIONS = (
    ("l1", "NVML_MEMORY_LOCATION_L1_CACHE", 0),
    ("l2", "NVML_MEMORY_LOCATION_L2_CACHE", 1),
    ("dram", "NVML_MEMORY_LOCATION_DRAM", 2),
    ("register_file", "NVML_MEMORY_LOCATION_REGISTER_FILE", 3),
    ("texture", "NVML_MEMORY_LOCATION_TEXTURE_MEMORY", 4),
    ("texture_shm", "NVML_MEMORY_LOCATION_TEXTURE_SHM", 5),
    ("cbu", "NVML_MEMORY_LOCATION_CBU", 6),
    ("sram", "NVML_MEMORY_LOCATION_SRAM", 7),
)
NVLINK_COUNTERS = (
    ("replay", "NVML_NVLINK_ERROR_DL_REPLAY", 0),
    ("recovery", "NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    ("crc_flit", "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    ("crc_data", "NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
    ("ecc_data", "NVML_NVLINK_ERROR_DL_ECC_DATA", 4),
)
# Errors after which a call is not asked again for that GPU.
_NEVER_AGAIN = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")
# Errors that end NVLink discovery: the link (and those after it) does not exist.
_NO_LINK = ("NVMLError_NotSupported", "NVMLError_InvalidArgument", "NVMLError_NotFound")


class HealthError(Exception):
    """NVML cannot be used at all (no library, no driver, no GPU): one line for the node's reason."""


def decode_reasons(mask):
    """Clock event reason bitmask -> names in bit order; a bit NVML adds later reads 'bit_N'."""
    if mask is None:
        return None
    names = []
    known = 0
    for name, _const, bit in CLOCK_EVENT_REASONS:
        known |= bit
        if mask & bit:
            names.append(name)
    rest = mask & ~known
    n = 0
    while rest:
        if rest & 1:
            names.append("bit_%d" % n)
        rest >>= 1
        n += 1
    return names


def is_throttled(names):
    """True when a reason that limits a busy GPU is set; None when the reasons are unknown."""
    if names is None:
        return None
    return any(name in THROTTLING for name in names)


def _field_number(fv):
    """The number in one nvmlDeviceGetFieldValues entry, None when NVML could not read it."""
    if getattr(fv, "nvmlReturn", 1) != 0:
        return None
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        getattr(fv, "valueType", None)
    )
    return getattr(getattr(fv, "value", None), attr, None) if attr else None


def _text(value):
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return None if value is None else (str(value).strip().rstrip("\x00") or None)


def _error_text(exc):
    return "%s (%s)" % (str(exc) or "no message", type(exc).__name__)


class HealthReader:
    """Health of every physical GPU of a node through one pynvml module.

    Cost per GPU and reading (a healthy H100 without NVLink: about 16 calls, so
    1.6 calls/s at the 10 s default): ECC totals 4, ECC by location 2 per
    location the GPU has, remapped rows 1, retired pages 3 (NotSupported on
    GPUs that remap rows, then never asked again), clock event reasons 1,
    residency 1 (one field-values call), PCIe 3 (the maximum link is read once),
    energy 1, NVLink: the state of every link plus the error counters of at
    most ``NVLINK_ERROR_LINKS_PER_READ`` links (round robin).  XID events: one
    non-blocking drain of one event set per reading for all GPUs.
    """

    def __init__(self, module, interval=HEALTH_INTERVAL_S, clock=time.time):
        self.m = module
        self.interval = float(interval)
        self.clock = clock
        self.gpus = []
        self.errors = {}  # "gpu N: call(args)" -> last error text, for the capture and doctor
        self._skip = set()  # (gpu index, call key) that will not answer
        self._next_due = None
        self._events = None
        self._calls = 0
        self._pending = {}  # gpu index (None: unnamed) -> XID events drained but not yet sent
        try:
            with contextlib.redirect_stdout(sys.stderr):
                module.nvmlInit()
        except Exception as exc:
            raise HealthError("NVML init failed: %s" % _error_text(exc)) from None
        try:
            count = module.nvmlDeviceGetCount()
            for index in range(count):
                self.gpus.append(self._open_gpu(index))
        except Exception as exc:
            self.close()
            raise HealthError("NVML cannot read the GPUs: %s" % _error_text(exc)) from None
        if not self.gpus:
            self.close()
            raise HealthError("NVML found no NVIDIA GPU on this node (nvmlDeviceGetCount() = 0)")
        self._open_events()

    # -- calls

    def _is(self, exc, names):
        for name in names:
            cls = getattr(self.m, name, None)
            if isinstance(cls, type) and isinstance(exc, cls):
                return True
        return False

    def _const(self, name, default):
        value = getattr(self.m, name, None)
        return default if value is None else value

    def _read(self, gpu, name, *args, **kw):
        """One NVML call for one GPU; None when it fails.  ``key`` names the call in the skip set."""
        key = kw.get("key") or (name,)
        if (gpu["index"], key) in self._skip:
            return None
        fn = getattr(self.m, name, None)
        if fn is None:
            self._skip.add((gpu["index"], key))
            self.errors["gpu %d: %s" % (gpu["index"], name)] = "not in this pynvml"
            return None
        self._calls += 1
        try:
            return fn(gpu["handle"], *args)
        except Exception as exc:
            if self._is(exc, _NEVER_AGAIN):
                self._skip.add((gpu["index"], key))
            self.errors["gpu %d: %s%s" % (gpu["index"], name, list(args) if args else "")] = _error_text(exc)
            return None

    def _open_gpu(self, index):
        handle = self.m.nvmlDeviceGetHandleByIndex(index)
        gpu = {"index": index, "handle": handle, "uuid": None, "links": None, "link_next": 0, "link_errors": {}}
        gpu["uuid"] = _text(self._read(gpu, "nvmlDeviceGetUUID"))
        mode = self._read(gpu, "nvmlDeviceGetEccMode")
        gpu["ecc_mode"] = {0: "off", 1: "on"}.get(mode[0]) if mode else None
        # The maximum link the GPU and slot can train to does not change while the driver runs.
        gpu["pcie_gen_max"] = self._read(gpu, "nvmlDeviceGetMaxPcieLinkGeneration")
        gpu["pcie_width_max"] = self._read(gpu, "nvmlDeviceGetMaxPcieLinkWidth")
        return gpu

    def _open_events(self):
        """One event set for XID critical errors of every GPU; None where NVML cannot watch them."""
        try:
            self._events = self.m.nvmlEventSetCreate()
        except Exception as exc:
            self.errors["nvmlEventSetCreate"] = _error_text(exc)
            self._events = None
            return
        xid = self._const("nvmlEventTypeXidCriticalError", 0x8)
        for gpu in self.gpus:
            gpu["xid_watch"] = False
            try:
                self.m.nvmlDeviceRegisterEvents(gpu["handle"], xid, self._events)
                gpu["xid_watch"] = True
            except Exception as exc:
                self.errors["gpu %d: nvmlDeviceRegisterEvents" % gpu["index"]] = _error_text(exc)

    def close(self):
        if self._events is not None:
            with contextlib.suppress(Exception):
                self.m.nvmlEventSetFree(self._events)
            self._events = None
        with contextlib.suppress(Exception):
            self.m.nvmlShutdown()

    # -- cadence

    def due(self, now=None):
        now = self.clock() if now is None else now
        return self._next_due is None or now >= self._next_due

    def maybe_read(self, now=None):
        """The records when a reading is due (every ``interval`` seconds), else None."""
        now = self.clock() if now is None else now
        if not self.due(now):
            return None
        return self.read_all(now)

    # -- one reading

    def read_all(self, now=None):
        now = self.clock() if now is None else now
        self._next_due = now + self.interval
        events = self._drain_events(now)
        records = []
        for gpu in self.gpus:
            self._calls = 0
            record = self._read_gpu(gpu, now)
            record["xid_events"] = events.get(gpu["index"], []) if gpu.get("xid_watch") else None
            record["calls"] = self._calls
            records.append(record)
        if events.get(None) and records:
            # An event whose GPU NVML could not name is kept on the first record, never dropped.
            records[0]["xid_events"] = (records[0]["xid_events"] or []) + events[None]
        return records

    def read_gpu(self, index, now=None, energy_mj=READ):
        """One GPU's record, for an agent that spreads its GPUs over ticks: the XID events
        waiting for any GPU are drained and each kept until its own GPU's reading.  An
        ``energy_mj`` given is the sampler's figure (nvml_energy.py): the counter is not read again."""
        now = self.clock() if now is None else now
        for key, events in self._drain_events(now).items():
            self._pending.setdefault(key, []).extend(events)
        gpu = self.gpus[index]
        self._calls = 0
        record = self._read_gpu(gpu, now, energy_mj)
        events = self._pending.pop(index, [])
        if index == 0:
            events += self._pending.pop(None, [])  # an event NVML could not place: on GPU 0, never dropped
        record["xid_events"] = events if gpu.get("xid_watch") else None
        record["calls"] = self._calls
        return record

    def _read_gpu(self, gpu, now, energy_mj=READ):
        r = {"type": "health", "gpu": gpu["index"], "uuid": gpu["uuid"], "t": round(now, 3)}
        r.update(self._ecc(gpu))
        r.update(self._pages(gpu))
        mask = self._reasons(gpu)
        names = decode_reasons(mask)
        r["clock_event_reasons"] = mask
        r["clock_event_names"] = names
        r["throttled"] = is_throttled(names)
        r["residency_ns"] = self._residency(gpu)[0] or self._violations(gpu)
        r["pcie_gen"] = self._read(gpu, "nvmlDeviceGetCurrPcieLinkGeneration")
        r["pcie_gen_max"] = gpu["pcie_gen_max"]
        r["pcie_width"] = self._read(gpu, "nvmlDeviceGetCurrPcieLinkWidth")
        r["pcie_width_max"] = gpu["pcie_width_max"]
        r["pcie_replay"] = self._read(gpu, "nvmlDeviceGetPcieReplayCounter")
        r["nvlink"] = self._nvlink(gpu, now)
        if energy_mj is READ:
            energy_mj = self._read(gpu, "nvmlDeviceGetTotalEnergyConsumption")
        r["energy_mj"] = energy_mj
        r["xid_watch"] = bool(gpu.get("xid_watch"))
        return r

    def _ecc(self, gpu):
        corrected = self._const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        uncorrected = self._const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile = self._const("NVML_VOLATILE_ECC", 0)
        aggregate = self._const("NVML_AGGREGATE_ECC", 1)
        out = {"ecc_mode": gpu["ecc_mode"]}
        for label, counter in (("volatile", volatile), ("aggregate", aggregate)):
            for kind, etype in (("corrected", corrected), ("uncorrected", uncorrected)):
                out["ecc_%s_%s" % (label, kind)] = self._read(
                    gpu, "nvmlDeviceGetTotalEccErrors", etype, counter, key=("ecc", etype, counter)
                )
        locations = {}
        for name, const, default in ECC_LOCATIONS:
            loc = self._const(const, default)
            counts = {}
            for kind, etype in (("corrected", corrected), ("uncorrected", uncorrected)):
                counts[kind] = self._read(
                    gpu, "nvmlDeviceGetMemoryErrorCounter", etype, aggregate, loc, key=("ecc_loc", etype, loc)
                )
            if counts["corrected"] is not None or counts["uncorrected"] is not None:
                locations[name] = counts
        out["ecc_aggregate_by_location"] = locations or None
        return out

    def _pages(self, gpu):
        rows = self._read(gpu, "nvmlDeviceGetRemappedRows")
        out = {
            "remapped_correctable": rows[0] if rows else None,
            "remapped_uncorrectable": rows[1] if rows else None,
            "remapped_pending": bool(rows[2]) if rows else None,
            "remapped_failure": bool(rows[3]) if rows else None,
        }
        for name, const, default in (
            ("retired_sbe", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
            ("retired_dbe", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1),
        ):
            cause = self._const(const, default)
            pages = self._read(gpu, "nvmlDeviceGetRetiredPages", cause, key=("retired", cause))
            out[name] = len(pages) if pages is not None else None
        pending = self._read(gpu, "nvmlDeviceGetRetiredPagesPendingStatus")
        out["retired_pending"] = bool(pending) if pending is not None else None
        return out

    def _reasons(self, gpu):
        """The clock event reasons bitmask; the older throttle-reasons call where the newer one is missing."""
        key = ("reasons_new",)
        if (gpu["index"], key) not in self._skip:
            mask = self._read(gpu, "nvmlDeviceGetCurrentClocksEventReasons", key=key)
            if mask is not None or (gpu["index"], key) not in self._skip:
                return mask
        return self._read(gpu, "nvmlDeviceGetCurrentClocksThrottleReasons")

    def _residency(self, gpu, extra=()):
        """({name: ns or None}, [extra values]) from one field-values call; ({}, ...) as None where it fails."""
        ids = [self._const(const, fid) for _name, const, fid in RESIDENCY_FIELDS]
        ids += [self._const(const, fid) for _name, const, fid, _scale in extra]
        values = self._read(gpu, "nvmlDeviceGetFieldValues", ids, key=("fields", len(extra)))
        if values is None:
            return None, [None] * len(extra)
        numbers = [_field_number(fv) for fv in values]
        residency = {name: numbers[i] for i, (name, _c, _f) in enumerate(RESIDENCY_FIELDS)}
        rest = numbers[len(RESIDENCY_FIELDS) :]
        return (residency if any(v is not None for v in residency.values()) else None), rest

    def _violations(self, gpu):
        """Power and thermal residency (ns) through the older per-policy call, where field values give none."""
        out = {name: None for name, _c, _f in RESIDENCY_FIELDS}
        for name, const, default in (
            ("power", "NVML_PERF_POLICY_POWER", 0),
            ("thermal", "NVML_PERF_POLICY_THERMAL", 1),
        ):
            policy = self._const(const, default)
            value = self._read(gpu, "nvmlDeviceGetViolationStatus", policy, key=("violation", policy))
            out[name] = getattr(value, "violationTime", None)
        return out if any(v is not None for v in out.values()) else None

    def _nvlink(self, gpu, now):
        """[{link, active, replay, recovery, crc_flit, crc_data, ecc_data, errors_at}], None without NVLink."""
        if gpu["links"] is None:
            gpu["links"] = self._discover_links(gpu)
        if not gpu["links"]:
            return None
        out = []
        active = []
        for link in gpu["links"]:
            state = self._read(gpu, "nvmlDeviceGetNvLinkState", link, key=("nvlink_state", link))
            entry = {"link": link, "active": None if state is None else bool(state)}
            if state:
                active.append(link)
            out.append(entry)
        # Error counters of a few active links per reading, in turn: bounded cost on 18-link GPUs.
        if active:
            start = gpu["link_next"] % len(active)
            for k in range(min(NVLINK_ERROR_LINKS_PER_READ, len(active))):
                link = active[(start + k) % len(active)]
                counts = {}
                for name, const, default in NVLINK_COUNTERS:
                    counter = self._const(const, default)
                    counts[name] = self._read(
                        gpu, "nvmlDeviceGetNvLinkErrorCounter", link, counter, key=("nvlink_err", counter)
                    )
                counts["errors_at"] = round(now, 3)
                gpu["link_errors"][link] = counts
            gpu["link_next"] = start + NVLINK_ERROR_LINKS_PER_READ
        for entry in out:
            last = gpu["link_errors"].get(entry["link"])
            for name, _c, _d in NVLINK_COUNTERS:
                entry[name] = last[name] if last else None
            entry["errors_at"] = last["errors_at"] if last else None
        return out

    def _discover_links(self, gpu):
        """Link numbers NVML answers for, in order; [] when the GPU has no NVLink (asked once)."""
        links = []
        fn = getattr(self.m, "nvmlDeviceGetNvLinkState", None)
        if fn is None:
            return links
        for link in range(int(self._const("NVML_NVLINK_MAX_LINKS", 36))):
            self._calls += 1
            try:
                fn(gpu["handle"], link)
            except Exception as exc:
                if self._is(exc, _NO_LINK):
                    if not links:
                        self.errors["gpu %d: nvmlDeviceGetNvLinkState[0]" % gpu["index"]] = _error_text(exc)
                    break
            links.append(link)
        return links

    def _drain_events(self, now):
        """{gpu index or None: [{xid, at}]} of the XID events waiting; never blocks (0 ms timeout)."""
        out = {}
        if self._events is None:
            return out
        xid = self._const("nvmlEventTypeXidCriticalError", 0x8)
        for _ in range(MAX_EVENTS_PER_READ):
            try:
                data = self.m.nvmlEventSetWait(self._events, 0)
            except Exception as exc:
                if not self._is(exc, ("NVMLError_Timeout",)):
                    self.errors["nvmlEventSetWait"] = _error_text(exc)
                break
            if not (getattr(data, "eventType", 0) & xid):
                continue
            try:
                index = self.m.nvmlDeviceGetIndex(data.device)
            except Exception:
                index = None
            out.setdefault(index, []).append({"xid": int(data.eventData), "at": round(now, 3)})
        return out

    # -- the 1 Hz run sample

    def run_sample(self, gpu, now=None):
        """Power, energy, clocks, utilization, temperatures, reasons and residency of one GPU, now.

        About 9 calls: what a benchmark keeps at 1 Hz over its run (issue P).
        nvmlDeviceGetPowerUsage is a 1 s average on Ampere and later; the
        field NVML_FI_DEV_POWER_INSTANT (where given) is the instant value.
        """
        now = self.clock() if now is None else now
        self._calls = 0
        s = {"type": "run_sample", "gpu": gpu["index"], "t": round(now, 3)}
        util = self._read(gpu, "nvmlDeviceGetUtilizationRates")
        s["util_pct"] = getattr(util, "gpu", None)
        s["mem_util_pct"] = getattr(util, "memory", None)
        power = self._read(gpu, "nvmlDeviceGetPowerUsage")
        s["power_w"] = power / MW_PER_W if power is not None else None
        cap = self._read(gpu, "nvmlDeviceGetEnforcedPowerLimit")
        s["power_cap_w"] = cap / MW_PER_W if cap is not None else None
        s["energy_mj"] = self._read(gpu, "nvmlDeviceGetTotalEnergyConsumption")
        s["sm_clock_mhz"] = self._read(
            gpu, "nvmlDeviceGetClockInfo", self._const("NVML_CLOCK_SM", 1), key=("clock", "sm")
        )
        s["mem_clock_mhz"] = self._read(
            gpu, "nvmlDeviceGetClockInfo", self._const("NVML_CLOCK_MEM", 2), key=("clock", "mem")
        )
        s["temp_gpu_c"] = self._read(gpu, "nvmlDeviceGetTemperature", self._const("NVML_TEMPERATURE_GPU", 0))
        mask = self._reasons(gpu)
        s["clock_event_reasons"] = mask
        s["clock_event_names"] = decode_reasons(mask)
        s["throttled"] = is_throttled(s["clock_event_names"])
        residency, extra = self._residency(gpu, RUN_FIELDS)
        s["residency_ns"] = residency
        for (name, _c, _f, scale), value in zip(RUN_FIELDS, extra):
            s[name] = value * scale if value is not None else None
        s["calls"] = self._calls
        return s


def main(argv=None):
    parser = argparse.ArgumentParser(description="NVIDIA GPU health through NVML, one JSON line per GPU")
    parser.add_argument("--interval", type=float, default=HEALTH_INTERVAL_S)
    parser.add_argument("--count", type=int, default=1, help="readings to print (bounded)")
    args = parser.parse_args(argv)
    try:
        import pynvml  # noqa: PLC0415
    except ImportError as exc:
        print(json.dumps({"type": "error", "message": "pynvml not installed (%s)" % exc}), flush=True)
        return 3
    try:
        reader = HealthReader(pynvml, interval=args.interval)
    except HealthError as exc:
        print(json.dumps({"type": "error", "message": str(exc)}), flush=True)
        return 3
    try:
        for n in range(max(1, args.count)):
            for record in reader.read_all():
                print(json.dumps(record, sort_keys=True), flush=True)
            if n + 1 < args.count:
                time.sleep(args.interval)
    finally:
        reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
