"""AMD GPU health through the amdsmi library: one physical GPU's reading at a time.

Shipped beside node_agent.py (stdlib + amdsmi, Python >= 3.8); amdsmi_sampler.py
drives it.  A reading is the ``results`` of the amdsmi calls keyed by their real
function names, made JSON-safe (enums -> their name, bytes -> str), and the events
the GPU's event reader delivered since the last reading: the shape the console's
core/health_readings.py ``from_amdsmi`` maps (docs/hardware.md, "Health").

Cost per GPU and reading (the agent's budget is 3.5 calls per physical GPU per second
with health on, 3 of them the samples'): total ECC, PCIe, violation status, XGMI links
(4 calls); the bad pages on the first reading, when the total ECC count changed (a
page is retired after an error) and every PAGES_EVERY readings; the per-block ECC
counts (one call per block) on the first reading and when the total changed; the
energy counter (for its resolution) and the firmware on the first reading after an
enumeration; the CPER records (amdsmi_get_gpu_cper_entries, where the installed amdsmi has
it: ROCm 6.4 / amdsmi 25.x and later) on the first reading, when the ECC total moved and every CPER_EVERY readings, only
the records after the cursor the previous call returned; one non-blocking event read per round over the GPUs (the library's read
returns every GPU's events: each waits for its own GPU's reading).  A call that answers
NOT_SUPPORTED is not asked again for that GPU until the next enumeration; any other
failure leaves that result out of this reading only.
"""

from __future__ import annotations

import enum

NOT_SUPPORTED = 2  # amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED
EVENTS = ("VMFAULT", "GPU_PRE_RESET", "GPU_POST_RESET")  # AmdSmiEvtNotificationType members watched
EVENT_ENUM = ("AmdSmiEvtNotificationType", EVENTS)  # (the contract test checks the members by this pair)
MAX_EVENTS_PER_READ = 32
PAGES_EVERY = 6  # readings between two bad-page reads while the ECC total stays (1 min at 10 s)
# gpu_metrics keys a health reading carries (the residency accumulators and their clock)
METRICS_HEALTH_KEYS = (
    "accumulation_counter",
    "ppt_residency_acc",
    "socket_thm_residency_acc",
    "vr_thm_residency_acc",
    "hbm_thm_residency_acc",
    "prochot_residency_acc",
)
_SKIP_BLOCKS = ("INVALID", "RESERVED", "FIRST", "LAST")
CPER_FUNCTION = "amdsmi_get_gpu_cper_entries"
CPER_EVERY = 12  # readings between two CPER reads while the ECC total stays (2 min at 10 s)
# severity_mask: one bit per amdsmi_cper_sev_t (NON_FATAL_UNCORRECTED 0, FATAL 1, NON_FATAL_CORRECTED 2)
CPER_SEVERITY_MASK = (1 << 0) | (1 << 1) | (1 << 2)
# The library allocates (and zeroes) a buffer of this size per call; its default is 4 MiB. A
# CPER record is a few kB and a call returns at most 20: records past the buffer come next time.
CPER_BUFFER = 256 * 1024
# The entry keys a health reading carries (the raw record bytes, cper_data, are left out).
CPER_KEYS = ("error_severity", "notify_type", "timestamp", "record_id")


def json_safe(value):
    """A library result as JSON can carry it: enums by name, bytes as text, handles and
    other objects left out (None)."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    if isinstance(value, dict):
        return dict((str(k), json_safe(v)) for k, v in value.items() if k != "processor_handle")
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return None


def _scalars(result):
    """A dict result without its list values: amdsmi_get_violation_status has 12 per-XCP
    8x8 arrays the console does not read (they would make the line ~10 kB per GPU)."""
    if not isinstance(result, dict):
        return result
    return dict((k, v) for k, v in result.items() if not isinstance(v, (list, tuple)))


def _status_of(exc):
    try:
        return exc.get_error_code()
    except Exception:
        return None


def _key(handle):
    """What identifies a handle in an event: the real handle is a ctypes pointer (its value)."""
    return getattr(handle, "value", None) or id(handle)


class AmdHealth:
    """Health readings of the physical GPUs of one amdsmi enumeration."""

    def __init__(self, module):
        self.m = module
        self.gpus = []
        self._readers = []
        self._pending = {}  # physical -> events read but not yet sent
        self._cper_at = {}

    def enumerate(self, primaries):
        """A new enumeration: ``primaries`` is the primary handle of each physical GPU, in order."""
        self.close()
        self.gpus = [
            {
                "physical": i,
                "handle": h,
                "first": True,
                "skip": set(),
                "total": None,
                "blocks": None,
                "reader": None,
                "pages": None,
                "pages_age": 0,
            }
            for i, h in enumerate(primaries)
        ]
        self._pending = {}
        # physical -> [readings since the last CPER read, the cursor that read returned]
        self._cper_at = dict((i, [CPER_EVERY, 0]) for i in range(len(self.gpus)))
        self._since_drain = None  # readings since the last event read (None: never read)
        for gpu in self.gpus:
            gpu["reader"] = self._open_reader(gpu["handle"])

    def _open_reader(self, handle):
        """An event reader on one GPU, or None where the library or driver has none (not an error)."""
        try:
            cls = self.m.AmdSmiEventReader
            types = [getattr(self.m.AmdSmiEvtNotificationType, name) for name in EVENT_ENUM[1]]
            reader = cls(handle, types)
        except Exception:
            return None
        self._readers.append(reader)
        return reader

    def close(self):
        for reader in self._readers:
            try:
                reader.stop()
            except Exception:
                pass
        self._readers = []

    def _call(self, name, gpu, *args):
        """One amdsmi call for one GPU; None when it fails (NOT_SUPPORTED: never asked again)."""
        key = (name,) + tuple(str(a) for a in args)
        if key in gpu["skip"]:
            return None
        try:
            return getattr(self.m, name)(gpu["handle"], *args)
        except Exception as exc:
            if _status_of(exc) == NOT_SUPPORTED or isinstance(exc, AttributeError):
                gpu["skip"].add(key)
            return None

    def _drain_events(self):
        """Read every GPU's waiting events once (the library's read is global) into _pending."""
        reader = next((r for r in self._readers if r is not None), None)
        if reader is None:
            return
        try:
            events = reader.read(0, MAX_EVENTS_PER_READ)  # 0 ms: never blocks
        except Exception:
            return
        by_key = dict((_key(g["handle"]), g["physical"]) for g in self.gpus)
        for event in events or ():
            if not isinstance(event, dict):
                continue
            physical = by_key.get(_key(event.get("processor_handle")))
            if physical is None:
                physical = 0  # a handle the library did not give us back: kept, never dropped
            self._pending.setdefault(physical, []).append(
                {"event": json_safe(event.get("event")), "message": json_safe(event.get("message")) or ""}
            )

    def read(self, physical, metrics_raw=None):
        """One GPU's health entry (the contract's ``gpus`` item).  ``metrics_raw`` is the
        gpu_metrics table the sampler read this tick: its residency keys ride along free."""
        gpu = self.gpus[physical]
        if self._since_drain is None or self._since_drain + 1 >= len(self.gpus):
            self._drain_events()
            self._since_drain = 0
        else:
            self._since_drain += 1
        results = {}
        total = self._call("amdsmi_get_gpu_total_ecc_count", gpu)
        if total is not None:
            results["amdsmi_get_gpu_total_ecc_count"] = json_safe(total)
        changed = gpu["blocks"] is None or (total is not None and json_safe(total) != gpu["total"])
        if changed:
            gpu["blocks"] = self._blocks(gpu)
            gpu["total"] = json_safe(total)
        if gpu["blocks"]:
            results["amdsmi_get_gpu_ecc_count"] = gpu["blocks"]
        gpu["pages_age"] += 1
        if changed or gpu["pages"] is None or gpu["pages_age"] >= PAGES_EVERY:
            pages = self._call("amdsmi_get_gpu_bad_page_info", gpu)
            gpu["pages"], gpu["pages_age"] = (json_safe(pages) if pages is not None else None), 0
        if gpu["pages"] is not None:
            results["amdsmi_get_gpu_bad_page_info"] = gpu["pages"]  # the last read: unchanged since
        for name in (
            "amdsmi_get_pcie_info",
            "amdsmi_get_violation_status",
            "amdsmi_get_gpu_xgmi_link_status",
        ):
            value = self._call(name, gpu)
            if value is not None:
                results[name] = json_safe(_scalars(value) if name == "amdsmi_get_violation_status" else value)
        if isinstance(metrics_raw, dict):
            kept = dict((k, json_safe(metrics_raw.get(k))) for k in METRICS_HEALTH_KEYS if k in metrics_raw)
            if kept:
                results["amdsmi_get_gpu_metrics_info"] = kept
        cper = self._cper(gpu, changed)
        if cper is not None:
            results[CPER_FUNCTION] = cper
        if gpu["first"]:
            for name in ("amdsmi_get_energy_count", "amdsmi_get_fw_info"):
                value = self._call(name, gpu)
                if value is not None:
                    results[name] = json_safe(value)
            gpu["first"] = False
        return {
            "physical": physical,
            "vendor": "amd",
            "source": "amdsmi",
            "results": results,
            "events": self._pending.pop(physical, []),
        }

    def _cper(self, gpu, ecc_changed=False):
        """The CPER records logged since the last read ({index: entry}, {} when none): when the
        ECC total moved (an error logs a record) and every CPER_EVERY readings; None when not
        read this time or the library has no such call."""
        if not hasattr(self.m, "amdsmi_get_gpu_cper_entries"):  # amdsmi before ROCm 6.4
            return None
        at = self._cper_at[gpu["physical"]]
        at[0] += 1
        if at[0] < CPER_EVERY and not ecc_changed:
            return None
        at[0] = 0
        got = self._call("amdsmi_get_gpu_cper_entries", gpu, CPER_SEVERITY_MASK, CPER_BUFFER, at[1])
        # (entries, cursor, raw records, status): the cursor says where the next read starts
        if not isinstance(got, tuple) or len(got) < 2 or not isinstance(got[0], dict):
            return None
        if isinstance(got[1], int) and not isinstance(got[1], bool):
            at[1] = got[1]
        out = {}
        for index, entry in got[0].items():
            if isinstance(entry, dict):
                out[str(index)] = dict((k, json_safe(entry.get(k))) for k in CPER_KEYS if k in entry)
        return out

    def _blocks(self, gpu):
        """{block name: counts} of every RAS block that answers; {} when none does."""
        out = {}
        for block in self.m.AmdSmiGpuBlock:
            if block.name in _SKIP_BLOCKS:
                continue
            counts = self._call("amdsmi_get_gpu_ecc_count", gpu, block)
            if isinstance(counts, dict):
                out[block.name] = json_safe(counts)
        return out
