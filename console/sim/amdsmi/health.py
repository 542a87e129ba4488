"""Health: ECC counts, bad pages, PCIe link, violation (throttle) status, XGMI links,
firmware and event notification, healthy by default.

The faults written to ``faults.json`` (faults.py, shipped beside this module) make a
physical GPU unwell; every partition of that GPU reports it, like the real library
does for the one device.  Shapes and key names are amdsmi 7.0.2's
(tests/agent/test_amdsmi_contract.py holds them to the real package).
"""

import os
import time

from .enums import AmdSmiEvtNotificationType, AmdSmiFwBlock, AmdSmiGpuBlock, Status
from .errors import AmdSmiLibraryException, AmdSmiParameterException
from .faults import FaultView
from .library import LIB, checked, require_init
from .statefiles import SIM_DIR_ENV, sim_now

XGMI_LINKS = 8  # MI300X: 7 links to its peers and one unused (the library lists 8 slots)
PCIE_MAX_WIDTH, PCIE_MAX_SPEED = 16, 32000  # x16, Gen5 (MT/s)
TICKS_PER_S = 100  # the violation accumulators count 100 Hz samples (like gpu_metrics' accumulation_counter)
PAGE_SIZE = 4096

_VIEW = {}  # type: dict  # sim dir -> FaultView: one per folder and process


def faults():
    """The FaultView of this node's folder (re-read only when faults.json changes): the
    folder the library was initialised with (a process may hold several private copies of
    this package, one per node: the simulated exporter), else the environment's."""
    state = LIB.state_file
    folder = os.path.dirname(state.path) if state is not None else os.environ.get(SIM_DIR_ENV) or ""
    view = _VIEW.get(folder)
    if view is None:
        view = _VIEW[folder] = FaultView(folder)
    return view


def residency_ticks(phys, kind, t):
    """Accumulated throttle samples of one kind since its fault began (0 when healthy)."""
    since = faults().since(phys, kind)
    return 0 if since is None else int(max(0.0, t - since) * TICKS_PER_S)


def _counts(phys):
    """(correctable, uncorrectable): a page pending retirement came from an uncorrectable error."""
    view = faults()
    return view.count(phys, "ecc_correctable"), view.count(phys, "ecc_uncorrectable") + view.count(phys, "page_pending")


def amdsmi_get_gpu_total_ecc_count(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_total_ecc_count")
    correctable, uncorrectable = _counts(h.phys)
    return {"correctable_count": correctable, "uncorrectable_count": uncorrectable, "deferred_count": 0}


def amdsmi_get_gpu_ecc_count(processor_handle, block):
    h = checked(processor_handle, "amdsmi_get_gpu_ecc_count")
    if not isinstance(block, AmdSmiGpuBlock):
        raise AmdSmiParameterException(block, AmdSmiGpuBlock)
    if block not in (AmdSmiGpuBlock.UMC, AmdSmiGpuBlock.SDMA, AmdSmiGpuBlock.GFX, AmdSmiGpuBlock.MMHUB):
        raise AmdSmiLibraryException(Status.NOT_SUPPORTED)  # blocks without RAS on this part
    correctable, uncorrectable = _counts(h.phys) if block == AmdSmiGpuBlock.UMC else (0, 0)  # HBM errors: UMC
    return {"correctable_count": correctable, "uncorrectable_count": uncorrectable, "deferred_count": 0}


def amdsmi_get_gpu_bad_page_info(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_bad_page_info")
    pending = faults().count(h.phys, "page_pending")
    # status 1 = AmdSmiMemoryPageStatus.PENDING; the addresses are made up but stable
    return [
        {"value": i, "page_address": 0x7F000000 + (h.phys << 20) + i * PAGE_SIZE, "page_size": PAGE_SIZE, "status": 1}
        for i in range(pending)
    ]


def amdsmi_get_pcie_info(processor_handle):
    h = checked(processor_handle, "amdsmi_get_pcie_info")
    degraded = bool(faults().of(h.phys, "pcie_degraded"))
    return {
        "pcie_static": {
            "max_pcie_width": PCIE_MAX_WIDTH,
            "max_pcie_speed": PCIE_MAX_SPEED,
            "pcie_interface_version": 5,
            "slot_type": "OAM",
        },
        "pcie_metric": {
            "pcie_width": 8 if degraded else PCIE_MAX_WIDTH,
            "pcie_speed": PCIE_MAX_SPEED,
            "pcie_bandwidth": (8 if degraded else PCIE_MAX_WIDTH) * 3938,  # Mb/s at Gen5
            "pcie_replay_count": 0,
            "pcie_l0_to_recovery_count": 0,
            "pcie_replay_roll_over_count": 0,
            "pcie_nak_sent_count": 0,
            "pcie_nak_received_count": 0,
            "pcie_lc_perf_other_end_recovery_count": 0,
        },
    }


def amdsmi_get_violation_status(processor_handle):
    h = checked(processor_handle, "amdsmi_get_violation_status")
    t = sim_now()
    ticks = int(t * TICKS_PER_S)
    power = residency_ticks(h.phys, "power_throttle", t)
    thermal = residency_ticks(h.phys, "thermal_throttle", t)
    out = {
        "reference_timestamp": int(t * 1e6),
        "violation_timestamp": int(t * 1e6),
        "acc_counter": ticks,
        "acc_prochot_thrm": 0,
        "acc_ppt_pwr": power,
        "acc_socket_thrm": thermal,
        "acc_vr_thrm": 0,
        "acc_hbm_thrm": 0,
        "acc_gfx_clk_below_host_limit": power + thermal,
        "per_prochot_thrm": 0,
        "per_ppt_pwr": 100 if power else 0,
        "per_socket_thrm": 100 if thermal else 0,
        "per_vr_thrm": 0,
        "per_hbm_thrm": 0,
        "per_gfx_clk_below_host_limit": 100 if power or thermal else 0,
        "active_prochot_thrm": False,
        "active_ppt_pwr": bool(faults().of(h.phys, "power_throttle")),
        "active_socket_thrm": bool(faults().of(h.phys, "thermal_throttle")),
        "active_vr_thrm": False,
        "active_hbm_thrm": False,
        "active_gfx_clk_below_host_limit": bool(power or thermal),
    }
    # the per-XCP arrays of the real call: 8 XCPs x 8 XCCs, unused ones "N/A"
    for key in (
        "acc_gfx_clk_below_host_limit_pwr",
        "acc_gfx_clk_below_host_limit_thm",
        "acc_gfx_clk_below_host_limit_total",
        "acc_low_utilization",
        "per_gfx_clk_below_host_limit_pwr",
        "per_gfx_clk_below_host_limit_thm",
        "per_gfx_clk_below_host_limit_total",
        "per_low_utilization",
        "active_gfx_clk_below_host_limit_pwr",
        "active_gfx_clk_below_host_limit_thm",
        "active_gfx_clk_below_host_limit_total",
        "active_low_utilization",
    ):
        out[key] = [["N/A"] * 8 for _ in range(8)]
    return out


def amdsmi_get_gpu_xgmi_link_status(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_xgmi_link_status")
    down = faults().count(h.phys, "xgmi_down")
    status = ["D" if i < down else "U" for i in range(XGMI_LINKS - 1)] + ["X"]
    return {"status": status, "total_links": XGMI_LINKS}


# amdsmi_cper_sev_t names as amdsmi_get_gpu_cper_entries writes them (lower case, no prefix)
CPER_UNCORRECTED = "non_fatal_uncorrected"


def amdsmi_get_gpu_cper_entries(processor_handle, severity_mask, buffer_size=4 * 1048576, cursor=0):
    """One CPER record per uncorrectable ECC fault of the GPU (none when healthy); the
    entries after ``cursor``, and the cursor to pass next time."""
    h = checked(processor_handle, "amdsmi_get_gpu_cper_entries")
    records = faults().of(h.phys, "ecc_uncorrectable")
    entries = {}
    raw = []
    if severity_mask & (1 << 0):  # NON_FATAL_UNCORRECTED selected
        for i, fault in enumerate(records[cursor:]):
            at = time.gmtime(fault["at"])
            entries[i] = {
                "error_severity": CPER_UNCORRECTED,
                "notify_type": "MCE",
                "timestamp": time.strftime("%Y/%m/%d %H:%M:%S", at),
                "signature": b"CPER",
                "revision": 256,
                "signature_end": "0xffffffff",
                "sec_cnt": 1,
                "record_length": 336,
                "platform_id": b"0x1002:0x74A1",
                "creator_id": b"amdgpu",
                "record_id": "{}:{}".format(h.phys, fault["id"]).encode(),
                "flags": 0,
                "persistence_info": 0,
            }
            raw.append({"bytes": [0] * 16, "size": 336})
    return entries, len(records), raw, int(Status.SUCCESS)


_FIRMWARE = (
    (AmdSmiFwBlock.AMDSMI_FW_ID_SMU, "85.115.0"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_CP_MEC1, "177"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_RLC, "17"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_SDMA0, "19"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_VCN, "0X0110101B"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_PSP_SOSDRV, "00.36.02.59"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_TA_RAS, "1B.36.02.14"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_TA_XGMI, "20.00.00.11"),
    (AmdSmiFwBlock.AMDSMI_FW_ID_PM, "00.85.115.00"),
)


def amdsmi_get_fw_info(processor_handle):
    checked(processor_handle, "amdsmi_get_fw_info")
    return {"fw_list": [{"fw_name": block, "fw_version": version} for block, version in _FIRMWARE]}


class AmdSmiEventReader:
    """Event notification of one GPU: ``read`` returns the events of every GPU a reader
    watches (the real C call is global), each a dict with its processor handle.  A
    ``reset`` fault written after the reader opened is delivered once, as a pre-reset
    and a post-reset event."""

    def __init__(self, processor_handle, event_types):
        h = checked(processor_handle, "AmdSmiEventReader")
        for event_type in event_types:
            if not isinstance(event_type, AmdSmiEvtNotificationType):
                raise AmdSmiParameterException(event_type, AmdSmiEvtNotificationType)
        self.processor_handle = h
        self._types = set(event_types)
        _OPENED.setdefault(h.phys, time.time())  # faults.json's "at" is wall-clock time
        _READERS.append(self)

    def read(self, timestamp, num_elem=10):
        require_init()
        out = []
        for reader in list(_READERS):
            out.extend(reader._pending())
        return out[:num_elem]

    def _pending(self):
        h = self.processor_handle
        if h._session != LIB.session:
            return []
        out = []
        for entry in faults().of(h.phys, "reset"):
            key = (h.phys, entry["id"])
            if key in _DELIVERED or entry["at"] < _OPENED.get(h.phys, 0.0):
                continue
            _DELIVERED.add(key)
            for kind in (AmdSmiEvtNotificationType.GPU_PRE_RESET, AmdSmiEvtNotificationType.GPU_POST_RESET):
                if kind in self._types:
                    out.append({"processor_handle": h, "event": kind.name, "message": "simulated GPU reset"})
        return out

    def stop(self):
        if self in _READERS:
            _READERS.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.stop()


_READERS = []  # type: list  # open readers of this process
_DELIVERED = set()  # type: set  # (physical GPU, fault id) already delivered
_OPENED = {}  # type: dict  # physical GPU -> when its first reader opened: older resets are not news
