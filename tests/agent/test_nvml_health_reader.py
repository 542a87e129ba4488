"""The NVIDIA health reader (console/agent/nvidia_health.py) over a scripted NVML.

The scripted module has the real pynvml's constants and error classes (a real
``NVMLError_NotSupported`` is what the reader must recognise) and functions that
answer like the GPUs each test describes: a GPU with NVLink, one without, calls
that are not supported, calls that fail once, XID events waiting in the set.
The real H100's answers are replayed in test_nvml_health_capture.py.
"""

from __future__ import annotations

import ast
import collections
import importlib.util
import json
import types
from pathlib import Path

import pytest

real = pytest.importorskip("pynvml")

ROOT = Path(__file__).resolve().parents[2]
HEALTH = ROOT / "console" / "agent" / "nvidia_health.py"


@pytest.fixture(scope="module")
def health():
    spec = importlib.util.spec_from_file_location("nvidia_health_reader", HEALTH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Handle:
    def __init__(self, index):
        self.index = index


def fake_nvml(gpus, events=None, drop=()):
    """A pynvml-shaped module: ``gpus`` is one dict per GPU saying how it answers; ``drop`` removes functions."""
    m = types.ModuleType("pynvml_scripted")
    for name in dir(real):
        if name.startswith(("NVML_", "NVMLError", "nvmlClocks", "nvmlEventType")):
            setattr(m, name, getattr(real, name))
    calls = collections.Counter()
    events = events if events is not None else collections.deque()
    m.calls, m.events = calls, events

    def fn(name):
        def wrap(impl):
            def counted(*args):
                calls[name] += 1
                return impl(*args)

            if name not in drop:
                setattr(m, name, counted)
            return impl

        return wrap

    def spec(h):
        return gpus[h.index]

    def answer(h, key, *default):
        value = spec(h).get(key, *default) if default else spec(h)[key]
        if isinstance(value, Exception):
            raise value
        if callable(value):
            return value()
        return value

    @fn("nvmlInit")
    def _init():
        return None

    @fn("nvmlShutdown")
    def _shutdown():
        return None

    @fn("nvmlDeviceGetCount")
    def _count():
        return len(gpus)

    @fn("nvmlDeviceGetHandleByIndex")
    def _handle(i):
        return Handle(i)

    @fn("nvmlDeviceGetIndex")
    def _index(h):
        return h.index

    @fn("nvmlDeviceGetUUID")
    def _uuid(h):
        return "GPU-%04d" % h.index

    @fn("nvmlDeviceGetEccMode")
    def _ecc_mode(h):
        return [1, 1]

    @fn("nvmlDeviceGetMaxPcieLinkGeneration")
    def _gen_max(h):
        return 5

    @fn("nvmlDeviceGetMaxPcieLinkWidth")
    def _width_max(h):
        return 16

    @fn("nvmlDeviceGetCurrPcieLinkGeneration")
    def _gen(h):
        return answer(h, "pcie", (5, 16))[0]

    @fn("nvmlDeviceGetCurrPcieLinkWidth")
    def _width(h):
        return answer(h, "pcie", (5, 16))[1]

    @fn("nvmlDeviceGetPcieReplayCounter")
    def _replay(h):
        return answer(h, "replay", 0)

    @fn("nvmlDeviceGetTotalEccErrors")
    def _ecc(h, etype, counter):
        return answer(h, "ecc", {}).get((etype, counter), 0)

    @fn("nvmlDeviceGetMemoryErrorCounter")
    def _ecc_loc(h, etype, counter, location):
        if location not in (real.NVML_MEMORY_LOCATION_DRAM, real.NVML_MEMORY_LOCATION_SRAM):
            raise real.NVMLError_NotSupported()
        return answer(h, "ecc_loc", {}).get((etype, location), 0)

    @fn("nvmlDeviceGetRemappedRows")
    def _rows(h):
        return answer(h, "rows", (0, 0, 0, 0))

    @fn("nvmlDeviceGetRetiredPages")
    def _retired(h, cause):
        raise real.NVMLError_NotSupported()

    @fn("nvmlDeviceGetRetiredPagesPendingStatus")
    def _pending(h):
        raise real.NVMLError_NotSupported()

    @fn("nvmlDeviceGetCurrentClocksEventReasons")
    def _reasons(h):
        return answer(h, "reasons", 1)

    @fn("nvmlDeviceGetCurrentClocksThrottleReasons")
    def _throttle(h):
        return answer(h, "reasons", 1)

    @fn("nvmlDeviceGetFieldValues")
    def _fields(h, ids):
        out = []
        for fid in ids:
            value = types.SimpleNamespace(ullVal=fid * 1000, uiVal=fid)
            kind = 1 if fid in (82, 186) else 3  # temperatures and power are unsigned ints in NVML
            out.append(types.SimpleNamespace(nvmlReturn=0, valueType=kind, value=value))
        return out

    @fn("nvmlDeviceGetViolationStatus")
    def _violation(h, policy):
        return types.SimpleNamespace(referenceTime=1, violationTime=(policy + 1) * 5_000_000_000)

    @fn("nvmlDeviceGetNvLinkState")
    def _link_state(h, link):
        links = spec(h).get("links")
        if links is None:
            raise real.NVMLError_NotSupported()
        if link >= len(links):
            raise real.NVMLError_InvalidArgument()
        return links[link]

    @fn("nvmlDeviceGetNvLinkErrorCounter")
    def _link_errors(h, link, counter):
        if counter == real.NVML_NVLINK_ERROR_DL_CRC_DATA:
            raise real.NVMLError_NotSupported()  # not counted on newer links
        return link * 10 + counter

    @fn("nvmlDeviceGetTotalEnergyConsumption")
    def _energy(h):
        return answer(h, "energy", 1_000_000)

    @fn("nvmlDeviceGetUtilizationRates")
    def _util(h):
        return types.SimpleNamespace(gpu=99, memory=40)

    @fn("nvmlDeviceGetPowerUsage")
    def _power(h):
        return 698_500

    @fn("nvmlDeviceGetEnforcedPowerLimit")
    def _cap(h):
        return 700_000

    @fn("nvmlDeviceGetClockInfo")
    def _clock(h, kind):
        return {real.NVML_CLOCK_SM: 1380, real.NVML_CLOCK_MEM: 2619}[kind]

    @fn("nvmlDeviceGetTemperature")
    def _temp(h, sensor):
        return 66

    @fn("nvmlEventSetCreate")
    def _set_create():
        return object()

    @fn("nvmlDeviceRegisterEvents")
    def _register(h, types_, event_set):
        if spec(h).get("no_events"):
            raise real.NVMLError_NotSupported()

    @fn("nvmlEventSetWait")
    def _wait(event_set, timeout):
        assert timeout == 0  # never blocks the agent
        if not events:
            raise real.NVMLError_Timeout()
        index, xid = events.popleft()
        return types.SimpleNamespace(device=Handle(index), eventType=real.nvmlEventTypeXidCriticalError, eventData=xid)

    @fn("nvmlEventSetFree")
    def _free(event_set):
        return None

    return m


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def two_gpus():
    sick = {
        "pcie": (4, 8),  # trained down
        "rows": (3, 1, 1, 0),
        "ecc": {(real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, real.NVML_AGGREGATE_ECC): 2},
        "ecc_loc": {(real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, real.NVML_MEMORY_LOCATION_DRAM): 2},
        "reasons": real.nvmlClocksEventReasonSwPowerCap | real.nvmlClocksEventReasonHwThermalSlowdown,
        "replay": 12,
    }
    healthy = {"links": [1, 1, 0, 1, 1, 1]}  # link 2 down, 6 links
    return [healthy, sick]


def test_one_reading_reads_every_part(health):
    m = fake_nvml(two_gpus())
    reader = health.HealthReader(m, clock=Clock())
    good, sick = reader.read_all()
    assert good["type"] == "health" and (good["gpu"], good["uuid"]) == (0, "GPU-0000")
    assert good["ecc_mode"] == "on" and good["ecc_aggregate_uncorrected"] == 0
    assert good["ecc_aggregate_by_location"] == {
        "dram": {"corrected": 0, "uncorrected": 0},
        "sram": {"corrected": 0, "uncorrected": 0},
    }
    assert good["clock_event_names"] == ["idle"] and good["throttled"] is False
    assert good["pcie_gen"] == good["pcie_gen_max"] == 5 and good["pcie_width"] == 16
    assert good["energy_mj"] == 1_000_000
    assert good["residency_ns"]["power"] == 74_000 and good["residency_ns"]["hw_power_brake"] == 271_000
    # the sick one: as NVML said, nothing smoothed over
    assert sick["ecc_aggregate_uncorrected"] == 2 and sick["ecc_volatile_uncorrected"] == 0
    assert sick["ecc_aggregate_by_location"]["dram"] == {"corrected": 0, "uncorrected": 2}
    assert (sick["remapped_correctable"], sick["remapped_uncorrectable"]) == (3, 1)
    assert (sick["remapped_pending"], sick["remapped_failure"]) == (True, False)
    assert (sick["pcie_gen"], sick["pcie_width"], sick["pcie_gen_max"], sick["pcie_width_max"]) == (4, 8, 5, 16)
    assert sick["pcie_replay"] == 12
    assert sick["clock_event_reasons"] == 0x44
    assert sick["clock_event_names"] == ["sw_power_cap", "hw_thermal"] and sick["throttled"] is True
    # not supported: null, never 0
    for r in (good, sick):
        assert (r["retired_sbe"], r["retired_dbe"], r["retired_pending"]) == (None, None, None)
    assert sick["nvlink"] is None
    assert json.loads(json.dumps(good)) == good  # one JSON record per GPU


def test_a_call_not_supported_is_asked_once_a_failing_one_again(health):
    gpus = two_gpus()
    gpus[0]["energy"] = real.NVMLError_Unknown()
    m = fake_nvml(gpus)
    reader = health.HealthReader(m, clock=Clock())
    first = reader.read_all()
    second = reader.read_all()
    assert m.calls["nvmlDeviceGetRetiredPages"] == 4  # two causes x two GPUs, the first reading only
    assert m.calls["nvmlDeviceGetRetiredPagesPendingStatus"] == 2
    assert m.calls["nvmlDeviceGetMemoryErrorCounter"] == 2 * 16 + 2 * 4  # 8 locations, then DRAM and SRAM
    assert m.calls["nvmlDeviceGetTotalEnergyConsumption"] == 4  # an unknown error is asked again
    assert first[0]["energy_mj"] is None and second[0]["energy_mj"] is None
    assert second[1]["calls"] < first[1]["calls"]
    assert reader.errors["gpu 0: nvmlDeviceGetTotalEnergyConsumption"] == "Unknown Error (NVMLError_Unknown)"
    assert reader.errors["gpu 1: nvmlDeviceGetRetiredPages[0]"] == "Not Supported (NVMLError_NotSupported)"


def test_nvlink_state_every_reading_errors_in_turn(health):
    m = fake_nvml(two_gpus())
    clock = Clock()
    reader = health.HealthReader(m, clock=clock)
    links = reader.read_all()[0]["nvlink"]
    assert [(e["link"], e["active"]) for e in links] == [
        (0, True),
        (1, True),
        (2, False),
        (3, True),
        (4, True),
        (5, True),
    ]
    read = [e["link"] for e in links if e["errors_at"] is not None]
    assert read == [0, 1, 3]  # three active links per reading
    assert links[1]["replay"] == 10 and links[1]["recovery"] == 11 and links[1]["crc_flit"] == 12
    assert links[1]["crc_data"] is None and links[1]["ecc_data"] == 14
    assert links[4]["replay"] is None  # not read yet: null, never 0
    clock.t += 10
    links = reader.read_all()[0]["nvlink"]
    assert {e["link"]: e["errors_at"] for e in links} == {
        0: 1010.0,
        1: 1000.0,
        2: None,
        3: 1000.0,
        4: 1010.0,
        5: 1010.0,
    }
    assert links[5]["replay"] == 50
    # discovery once: 6 links + the one that is not there; then 6 states per reading
    assert m.calls["nvmlDeviceGetNvLinkState"] == 7 + 6 + 6 + 1  # + GPU 1's one NotSupported probe
    assert m.calls["nvmlDeviceGetNvLinkErrorCounter"] == 6 * 4 + 1  # six link reads of 4 counters; crc_data asked once


def test_xid_events_go_to_their_gpu_once_and_the_drain_is_bounded(health):
    m = fake_nvml(two_gpus())
    reader = health.HealthReader(m, clock=Clock())
    m.events.append((1, 79))
    good, sick = reader.read_all()
    assert good["xid_watch"] and good["xid_events"] == []
    assert sick["xid_events"] == [{"xid": 79, "at": 1000.0}]
    assert reader.read_all()[1]["xid_events"] == []
    m.events.extend((0, 13) for _ in range(100))
    assert len(reader.read_all()[0]["xid_events"]) == health.MAX_EVENTS_PER_READ
    assert len(reader.read_all()[0]["xid_events"]) == 100 - health.MAX_EVENTS_PER_READ


def test_events_not_supported_say_so(health):
    gpus = two_gpus()
    gpus[1]["no_events"] = True
    reader = health.HealthReader(fake_nvml(gpus), clock=Clock())
    good, sick = reader.read_all()
    assert good["xid_watch"] is True and sick["xid_watch"] is False and sick["xid_events"] is None


def test_readings_come_at_the_slow_cadence(health):
    clock = Clock()
    reader = health.HealthReader(fake_nvml(two_gpus()), clock=clock)
    assert reader.interval == health.HEALTH_INTERVAL_S == 10.0
    assert len(reader.maybe_read()) == 2
    clock.t += 5
    assert reader.maybe_read() is None
    clock.t += 5
    assert reader.maybe_read() is not None


def test_an_older_pynvml_uses_the_older_calls(health):
    m = fake_nvml(two_gpus(), drop=("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetFieldValues"))
    reader = health.HealthReader(m, clock=Clock())
    _good, sick = reader.read_all()
    assert sick["clock_event_names"] == ["sw_power_cap", "hw_thermal"]
    assert sick["residency_ns"]["power"] == 5_000_000_000 and sick["residency_ns"]["thermal"] == 10_000_000_000
    assert sick["residency_ns"]["hw_power_brake"] is None
    assert m.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2


def test_nvml_that_cannot_start_is_one_line(health):
    m = fake_nvml(two_gpus())

    def mismatch():
        raise real.NVMLError_LibRmVersionMismatch()

    m.nvmlInit = mismatch
    with pytest.raises(health.HealthError) as err:
        health.HealthReader(m)
    assert (
        str(err.value)
        == "NVML init failed: RM has detected an NVML/RM version mismatch. (NVMLError_LibRmVersionMismatch)"
    )
    with pytest.raises(health.HealthError, match=r"nvmlDeviceGetCount\(\) = 0"):
        health.HealthReader(fake_nvml([]))


def test_run_sample_units(health):
    reader = health.HealthReader(fake_nvml(two_gpus()), clock=Clock())
    s = reader.run_sample(reader.gpus[1])
    assert s["type"] == "run_sample" and s["gpu"] == 1 and s["t"] == 1000.0
    assert s["power_w"] == 698.5 and s["power_cap_w"] == 700.0  # mW -> W
    assert s["energy_mj"] == 1_000_000 and s["sm_clock_mhz"] == 1380 and s["mem_clock_mhz"] == 2619
    assert (s["util_pct"], s["mem_util_pct"], s["temp_gpu_c"], s["temp_mem_c"]) == (99, 40, 66, 82)
    assert s["power_instant_w"] == 0.186  # field 186 is mW
    assert s["clock_event_names"] == ["sw_power_cap", "hw_thermal"] and s["throttled"] is True
    assert s["residency_ns"]["power"] == 74_000
    assert s["calls"] == 9


def test_decode_reasons_names_unknown_bits(health):
    assert health.decode_reasons(0) == []
    assert health.decode_reasons(None) is None
    assert health.decode_reasons(0x4 | 0x800 | 0x8000) == ["sw_power_cap", "bit_11", "bit_15"]
    assert health.is_throttled(["sync_boost", "idle"]) is False and health.is_throttled(None) is None


def test_the_script_prints_one_json_line_per_gpu(health, monkeypatch, capsys):
    m = fake_nvml(two_gpus())
    monkeypatch.setitem(__import__("sys").modules, "pynvml", m)
    assert health.main(["--count", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["gpu"] for line in lines] == [0, 1]
    m.nvmlInit = lambda: (_ for _ in ()).throw(real.NVMLError_DriverNotLoaded())
    assert health.main([]) == 3
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line) == {
        "type": "error",
        "message": "NVML init failed: Driver Not Loaded (NVMLError_DriverNotLoaded)",
    }


def test_node_side_rules():
    src = HEALTH.read_text()
    ast.parse(src, feature_version=(3, 8))
    tree = ast.parse(src)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "argparse", "contextlib", "json", "sys", "time", "pynvml"}
