"""The agent's health lines (telemetry --health-interval) over the simulated amdsmi and NVML.

The agent runs as on a node (a process, the simulators as uploaded: real files, no
links); faults are written into faults.json while it runs, as the demo and the
console's e2e do, and each reading is mapped by the console's own
core/health_readings.py ``from_amdsmi`` / ``from_nvml`` so the test sees what a user would.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console.core.health import HealthRules, evaluate
from console.core.health_readings import from_amdsmi, from_nvml
from console.sim import faults
from tests.sim.simulators import copy_amdsmi, copy_pynvml

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"

pytestmark = pytest.mark.timeout(120)


def env_for(state: Path, spec: dict) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
    env["PATH"] = "/nonexistent"  # no amd-smi / rocm-smi / nvidia-smi: the library or nothing
    env["ROCM_CONSOLE_SIM_DIR"] = str(state)
    env["ROCM_CONSOLE_SIM_SPEC"] = json.dumps(spec)
    return env


@pytest.fixture
def amd(tmp_path):
    return copy_amdsmi(tmp_path / "sim"), tmp_path / "state"


@pytest.fixture
def nvidia(tmp_path):
    return copy_pynvml(tmp_path / "nvsim"), tmp_path / "state"


class Agent:
    """The agent streaming in the background; lines kept with the time they arrived."""

    def __init__(self, module_dir: Path, state: Path, spec: dict, *args: str):
        argv = [sys.executable, str(AGENT), "telemetry", *args, "--amdsmi-path", str(module_dir)]
        self.proc = subprocess.Popen(
            argv, env=env_for(state, spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[tuple[float, dict]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.time(), json.loads(line)))

    def health_after(self, t: float) -> list[dict]:
        """Every full health entry of a line written after unix time t."""
        return [g for at, o in list(self.lines) if o["kind"] == "health" and o["ts"] > t for g in o["gpus"]]

    def readings_of(self, physical: int, t: float) -> list[dict | None]:
        """One GPU's readings in lines written after unix time t, in order: its full entry, or
        None where the line said it was read unchanged (`same`)."""
        out: list[dict | None] = []
        for _at, o in list(self.lines):
            if o["kind"] != "health" or o["ts"] <= t:
                continue
            out.extend(g for g in o["gpus"] if g["physical"] == physical)
            out.extend(None for item in o.get("same", ()) if item[0] == physical)
        return out

    def readings_after(self, t: float) -> int:
        """GPU readings of the lines written after unix time t: full entries and `same` ones."""
        return sum(
            len(o["gpus"]) + len(o.get("same", ()))
            for at, o in list(self.lines)
            if o["kind"] == "health" and o["ts"] > t
        )

    def wait(self, predicate, timeout: float = 30.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its Popen
        self.proc.wait(timeout=30)
        self.reader.join(timeout=30)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def run(module_dir: Path, state: Path, spec: dict, *args: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, str(AGENT), "telemetry", *args, "--amdsmi-path", str(module_dir)],
        env=env_for(state, spec),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


# ------------------------------------------------------------------ AMD


def test_health_lines_spread_every_gpu_once_per_interval_and_a_healthy_node_is_ok(amd):
    module_dir, state = amd
    lines = run(module_dir, state, {"gpu": "MI300X", "count": 8}, "--count", "15", "--interval", "0.1",
                "--health-interval", "0.5")  # fmt: skip
    health = [o for o in lines if o["kind"] == "health"]
    assert health and all(o["interval"] == 0.5 for o in health)
    # each health line comes right after its tick's sample line
    for i, o in enumerate(lines):
        if o["kind"] == "health":
            assert lines[i - 1]["kind"] == "sample"
    per_tick = [sorted([g["physical"] for g in o["gpus"]] + [item[0] for item in o.get("same", [])]) for o in health]
    assert max(len(p) for p in per_tick) <= math.ceil(8 * 0.1 / 0.5)  # never a burst of all GPUs
    order = [p for tick in per_tick for p in tick]
    assert order[:24] == list(range(8)) * 3  # round-robin: every GPU once per 5 ticks (0.5 s)
    # the first two rounds in full (the second has no firmware: it differs), the third unchanged: `same`
    assert [g["physical"] for o in health for g in o["gpus"]][:16] == list(range(8)) * 2
    assert [item[0] for o in health for item in o.get("same", [])][:8] == list(range(8))
    first = {}
    for entry in (g for o in health for g in o["gpus"]):
        assert (entry["vendor"], entry["source"]) == ("amd", "amdsmi")
        results = entry["results"]
        # firmware and the energy counter (its resolution) only on a GPU's first reading after the
        # agent enumerated; the bad pages then, when the ECC total changed, and every PAGES_EVERY readings
        is_first = entry["physical"] not in first
        assert ("amdsmi_get_fw_info" in results) == ("amdsmi_get_energy_count" in results) == is_first
        assert "amdsmi_get_gpu_bad_page_info" in results  # the last read is sent with every reading
        first.setdefault(entry["physical"], results)
        reading = from_amdsmi(entry["physical"], 0.0, results, entry["events"])
        assert evaluate([reading]).state == "ok", evaluate([reading]).line()
        assert (reading.pcie_width, reading.pcie_width_max, reading.pcie_gen) == (16, 16, 5)
        assert reading.ecc_uncorrectable == 0 and reading.pages_pending == 0
        assert reading.links and all(link.up for link in reading.links)
        assert reading.energy_j is None or reading.energy_j > 0
    fw = first[0]["amdsmi_get_fw_info"]["fw_list"]
    assert {"fw_name": "AMDSMI_FW_ID_SMU", "fw_version": "85.115.0"} in fw  # enum -> its name
    assert set(first[0]["amdsmi_get_gpu_ecc_count"]) >= {"UMC", "GFX"}  # per block, read on the first reading


def test_each_amd_fault_written_while_the_agent_runs_shows_in_that_gpus_next_reading(amd):
    module_dir, state = amd
    agent = Agent(module_dir, state, {"gpu": "MI300X", "count": 4}, "--interval", "0.1", "--health-interval", "0.4")
    try:
        assert agent.wait(lambda: {g["physical"] for g in agent.health_after(0)} == {0, 1, 2, 3})
        written = time.time()
        plan = {
            0: ("ecc_uncorrectable", "reset"),
            1: ("page_pending", "power_throttle"),
            2: ("pcie_degraded", "thermal_throttle"),
            3: ("xgmi_down", "ecc_correctable"),
        }
        # in one write: eight took longer than the 50 ms slack on a loaded machine
        faults.add_faults(str(state), [(gpu, kind, 1) for gpu, kinds in plan.items() for kind in kinds])
        assert agent.wait(lambda: {g["physical"] for g in agent.health_after(written + 0.05)} == {0, 1, 2, 3})
        seen = {}
        for entry in agent.health_after(written + 0.05):
            seen.setdefault(entry["physical"], entry)  # the first reading after the write
        readings = {p: from_amdsmi(p, time.time(), e["results"], e["events"]) for p, e in seen.items()}
        r0, r1, r2, r3 = (readings[i] for i in range(4))
        assert r0.ecc_uncorrectable == 1
        # The reset is an event, read once per round of the GPUs and not with the counters: a
        # write that falls between the round's event read and GPU 0's counter read shows the ECC
        # error now and the reset in GPU 0's next reading; never later, and never twice.
        first = next(i for i, e in enumerate(agent.readings_of(0, written + 0.05)) if e is not None)
        assert agent.wait(lambda: len(agent.readings_of(0, written + 0.05)) >= first + 3)
        resets = [
            [f.kind for f in from_amdsmi(0, time.time(), e["results"], e["events"]).faults] if e else []
            for e in agent.readings_of(0, written + 0.05)[first : first + 3]
        ]
        assert resets in ([["reset"], [], []], [[], ["reset"], []]), resets
        assert r1.pages_pending == 1 and r1.throttle_reasons == ("power",)
        assert (r2.pcie_width, r2.pcie_width_max) == (8, 16) and r2.throttle_reasons == ("socket_thermal",)
        assert [link.up for link in r3.links][:2] == [False, True] and r3.ecc_correctable == 1
        verdicts = {p: evaluate([r], HealthRules()) for p, r in readings.items()}
        assert verdicts[0].state == "fail" and "uncorrectable ECC" in verdicts[0].reasons
        assert verdicts[1].state == "fail" and "pending retirement" in verdicts[1].reasons
        assert verdicts[2].state == "warn" and "PCIe gen 5 x8 (max gen 5 x16)" in verdicts[2].reasons
        assert verdicts[3].state == "warn" and "XGMI link 0 down" in verdicts[3].reasons
        # the per-block counts are read again when the total changed: the UMC block shows the error
        assert seen[0]["results"]["amdsmi_get_gpu_ecc_count"]["UMC"]["uncorrectable_count"] == 1
        # the reset is delivered once: no later reading of GPU 0 repeats it
        later = time.time()
        assert agent.wait(lambda: len(agent.readings_of(0, later)) >= 2)
        assert all(not g["events"] for g in agent.readings_of(0, later) if g is not None)

        # the throttle residency counters grow: the sample row says the GPU throttled
        def samples():
            return [o for _, o in agent.lines if o["kind"] == "sample" and o["ts"] > written + 0.3]

        assert agent.wait(lambda: len(samples()) >= 1)
        assert samples()[-1]["gpus"][1]["throttled"] is True and samples()[-1]["gpus"][0]["throttled"] is False
    finally:
        err = agent.stop()
    assert "Traceback" not in err


def test_cper_records_read_every_few_readings_only_the_new_ones(amd):
    """amdsmi_get_gpu_cper_entries on a GPU's first reading, at once when its ECC total moves and
    every CPER_EVERY readings after, from the cursor of the previous call: an uncorrectable ECC
    error brings one record, once, in the same reading that shows the error."""
    module_dir, state = amd
    agent = Agent(module_dir, state, {"gpu": "MI300X", "count": 1}, "--interval", "0.1", "--health-interval", "0.1")
    try:
        assert agent.wait(lambda: len(agent.health_after(0)) >= 1)
        early = agent.health_after(0)
        assert early[0]["results"]["amdsmi_get_gpu_cper_entries"] == {}  # the first reading; healthy: none
        written = time.time()
        faults.add_fault(str(state), 0, "ecc_uncorrectable")

        def cper_reads():
            got = agent.health_after(written + 0.05)
            return [
                g["results"]["amdsmi_get_gpu_cper_entries"]
                for g in got
                if "amdsmi_get_gpu_cper_entries" in g["results"]
            ]

        assert agent.wait(lambda: len(cper_reads()) >= 1)
        with_error = next(
            g for g in agent.health_after(written + 0.05) if "amdsmi_get_gpu_cper_entries" in g["results"]
        )
        assert with_error["results"]["amdsmi_get_gpu_total_ecc_count"]["uncorrectable_count"] == 1
        first = cper_reads()[0]
        assert list(first.values())[0]["error_severity"] == "non_fatal_uncorrected"
        reading = from_amdsmi(0, time.time(), {"amdsmi_get_gpu_cper_entries": first})
        assert reading.cper_records == (("non_fatal_uncorrected", "MCE"),)
        # the cursor moved past it: the next CPER reads (every 12th reading: full entries only when
        # something changed, so counted over the GPU's every reading, `same` too) bring nothing
        after = agent.readings_after(written + 0.05)
        assert agent.wait(lambda: agent.readings_after(written + 0.05) >= after + 2 * 12, timeout=60)
        assert len(first) == 1 and all(got == {} for got in cper_reads()[1:])
    finally:
        err = agent.stop()
    assert "Traceback" not in err


def test_cper_read_on_a_gpus_first_reading_then_every_12th():
    """The CPER call's cadence (amd_health.py): the first reading, then every CPER_EVERY (2 min
    at the default 10 s), each from the cursor the previous call returned."""
    sys.path.insert(0, str(ROOT / "console" / "agent"))
    try:
        import amd_health
    finally:
        sys.path.remove(str(ROOT / "console" / "agent"))
    cursors = []

    class Amdsmi:
        AmdSmiGpuBlock: list = []

        def __getattr__(self, name):
            if name == "amdsmi_get_gpu_cper_entries":
                return lambda handle, mask, size, cursor: cursors.append(cursor) or ({}, cursor + 1, [], 0)
            return lambda *args: {}

    reader = amd_health.AmdHealth(Amdsmi())
    reader.enumerate([object()])
    read = [i for i in range(30) if "amdsmi_get_gpu_cper_entries" in reader.read(0)["results"]]
    assert read == [0, amd_health.CPER_EVERY, 2 * amd_health.CPER_EVERY] and amd_health.CPER_EVERY == 12
    assert cursors == [0, 1, 2]


def test_an_amdsmi_without_the_cper_call_sends_no_cper_result(tmp_path):
    """amdsmi before ROCm 6.4 has no amdsmi_get_gpu_cper_entries: never asked, nothing sent."""
    sys.path.insert(0, str(ROOT / "console" / "agent"))
    try:
        import amd_health
    finally:
        sys.path.remove(str(ROOT / "console" / "agent"))

    class OldAmdsmi:
        AmdSmiGpuBlock: list = []

        def __getattr__(self, name):
            if name == "amdsmi_get_gpu_cper_entries":
                raise AttributeError(name)
            return lambda *args: {}

    reader = amd_health.AmdHealth(OldAmdsmi())
    reader.enumerate([object()])
    assert all("amdsmi_get_gpu_cper_entries" not in reader.read(0)["results"] for _ in range(8))


def test_health_interval_zero_sends_no_health_line(amd):
    module_dir, state = amd
    lines = run(module_dir, state, {"count": 2}, "--count", "4", "--interval", "0.1", "--health-interval", "0")
    assert [o["kind"] for o in lines] == ["hello", "static"] + ["sample"] * 4


@pytest.mark.parametrize("value", ["-1", "abc", "0.01", "nan", "100000"])
def test_a_bad_health_interval_is_one_error_line(amd, value):
    module_dir, state = amd
    proc = subprocess.run(
        [sys.executable, str(AGENT), "telemetry", "--health-interval", value, "--amdsmi-path", str(module_dir)],
        env=env_for(state, {"count": 1}),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    (line,) = [json.loads(x) for x in proc.stdout.splitlines()]
    assert line["kind"] == "error" and "--health-interval" in line["message"] and value in line["message"]


def test_a_failing_health_call_leaves_that_result_out_and_telemetry_going(amd):
    module_dir, state = amd
    run(module_dir, state, {"count": 2}, "--count", "1", "--health-interval", "0")  # creates state.json
    path = state / "state.json"
    data = json.loads(path.read_text())
    data["faults"] = {"amdsmi_get_pcie_info": 9, "amdsmi_get_violation_status": 1}  # RETRY, INVAL
    path.write_text(json.dumps(data))
    lines = run(module_dir, state, {"count": 2}, "--count", "6", "--interval", "0.1", "--health-interval", "0.2")
    assert [o["kind"] for o in lines].count("sample") == 6
    entries = [g for o in lines if o["kind"] == "health" for g in o["gpus"]]
    assert entries and all("amdsmi_get_pcie_info" not in g["results"] for g in entries)
    assert all("amdsmi_get_gpu_total_ecc_count" in g["results"] for g in entries)


def test_a_health_reading_that_raises_costs_its_health_line_only():
    sys.path.insert(0, str(AGENT.parent))
    try:
        import node_agent
    finally:
        sys.path.remove(str(AGENT.parent))

    class Broken:
        source, simulated = "test", True

        def static(self):
            return []

        def refresh(self, tick):
            return None

        def sample(self):
            return []

        def physical_count(self):
            return 2

        def health(self, physicals):
            raise RuntimeError("the library crashed")

    out: list[dict] = []

    class Writer:
        def write(self, *objs):
            out.extend(objs)

    node_agent.run_ticks(Broken(), Writer(), 0.1, 5, sleep=lambda s: None, health_interval=0.2)
    assert [o["kind"] for o in out] == ["static"] + ["sample"] * 5


# ------------------------------------------------------------------ NVIDIA


def test_nvidia_health_lines_and_faults(nvidia):
    module_dir, state = nvidia
    spec = {"gpu": "H100", "count": 3}
    agent = Agent(module_dir, state, spec, "--interval", "0.1", "--health-interval", "0.3")
    try:
        assert agent.wait(lambda: {g["physical"] for g in agent.health_after(0)} == {0, 1, 2})
        for entry in agent.health_after(0):
            assert (entry["vendor"], entry["source"]) == ("nvidia", "nvml")
            assert evaluate([from_nvml(entry["nvml"])]).state == "ok"
        written = time.time()
        for gpu, kind in ((0, "ecc_uncorrectable"), (0, "xid"), (1, "nvlink_down"), (1, "power_throttle"),
                          (2, "pcie_degraded"), (2, "page_pending")):  # fmt: skip
            faults.add_fault(str(state), gpu, kind)

        def newest() -> dict:
            # each GPU's newest full entry since the faults began: under load a reading may fall
            # between two of the writes, and the next one (changed again) has them all
            return {entry["physical"]: from_nvml(entry["nvml"]) for entry in agent.health_after(written)}

        def all_faults_seen() -> bool:
            seen = newest()
            return set(seen) == {0, 1, 2} and bool(seen[0].faults) and seen[2].pages_pending == 1

        assert agent.wait(all_faults_seen)
        seen = newest()
        assert seen[0].ecc_uncorrectable == 1 and [(f.kind, f.code) for f in seen[0].faults] == [("xid", 79)]
        assert seen[1].links[0].up is False and seen[1].throttle_reasons == ("power",)
        assert seen[2].pcie_width == 8 and seen[2].pages_pending == 1
        assert evaluate([seen[0]]).state == "fail" and evaluate([seen[2]]).state == "fail"
        assert "NVLink link 0 down" in evaluate([seen[1]]).reasons

        def samples():
            return [o for _, o in agent.lines if o["kind"] == "sample" and o["ts"] > written + 0.3]

        assert agent.wait(lambda: len(samples()) >= 2)
        assert samples()[-1]["gpus"][1]["throttled"] is True and samples()[-1]["gpus"][0]["throttled"] is False
        assert samples()[-1]["gpus"][0]["energy_j"] > samples()[0]["gpus"][0]["energy_j"] > 0
    finally:
        err = agent.stop()
    assert "Traceback" not in err


# ------------------------------------------------------------------ the real H100


HARDWARE = ROOT / "tests" / "fixtures" / "hardware"


def test_the_real_h100_run_health_lines_energy_and_throttle():
    """tests/fixtures/hardware/h100-agent-health-2026-11-26.jsonl: the agent on a real H100
    (INDEX.toml), 8 s idle, then 25 s of bf16 matmuls at the 700 W cap, then idle."""
    lines = [json.loads(x) for x in (HARDWARE / "h100-agent-health-2026-11-26.jsonl").read_text().splitlines()]
    samples = [o for o in lines if o["kind"] == "sample"]
    assert len(samples) == 45 and lines[0]["source"] == "nvml" and lines[0]["simulated"] is False
    for i, o in enumerate(lines):
        if o["kind"] == "health":
            assert lines[i - 1]["kind"] == "sample" and lines[i - 1]["seq"] % 5 == 0 and o["interval"] == 5.0
    gpus = [s["gpus"][0] for s in samples]
    # the energy counter: cumulative J, its growth per tick is the power drawn (within 10 %: the
    # power reading is NVML's 1 s average, the tick's span is the line's arrival time)
    for a, b, s0, s1 in zip(gpus, gpus[1:], samples, samples[1:]):
        assert b["energy_j"] > a["energy_j"]
        if abs(a["power_w"] - b["power_w"]) < 5:  # steady power over the tick
            assert (b["energy_j"] - a["energy_j"]) / (s1["ts"] - s0["ts"]) == pytest.approx(b["power_w"], rel=0.1)
    # throttled: unknown on the first tick, then true exactly while the GPU sat at its cap
    assert gpus[0]["throttled"] is None
    assert all(g["throttled"] is True for g in gpus[1:] if g["power_w"] > 600)
    assert all(g["throttled"] is False for g in gpus[1:] if g["power_w"] < 100)
    readings = [from_nvml(g["nvml"]) for o in lines if o["kind"] == "health" for g in o["gpus"]]
    assert len(readings) == 9
    loaded = [r for r in readings if r.throttle_reasons == ("power",)]
    assert len(loaded) == 5 and all(r.throttle_reasons == () for r in readings if r not in loaded)
    assert all((r.pcie_gen, r.pcie_width, r.ecc_uncorrectable) == (5, 16, 0) for r in readings)
    # what the console makes of them: throttled at the power cap for more than a quarter of the minute
    verdict = evaluate(readings)
    assert verdict.state == "warn" and "throttled (power cap)" in verdict.reasons, verdict.line()
    calls = [g["nvml"]["calls"] for o in lines if o["kind"] == "health" for g in o["gpus"]]
    assert calls[0] > calls[1] == 15  # the first reading finds what the GPU does not support


def test_nvidia_smi_has_no_energy_counter_to_query():
    """The real H100's nvidia-smi --help-query-gpu: the fallback's energy_j stays null."""
    text = (HARDWARE / "nvidia-smi_help-query-gpu_h100-2026-11-26.txt").read_text()
    assert '"power.draw"' in text and '"clocks_event_reasons.sw_power_cap"' in text
    assert "energy" not in text.lower()


def test_the_nvidia_smi_fallback_health_from_the_real_h100_answers(monkeypatch):
    """One nvidia-smi --query-gpu per round of readings; its answers here are the real H100's
    (idle, then at the power cap), mapped onto the NVML record keys; [N/A] stays absent."""
    monkeypatch.syspath_prepend(str(AGENT.parent))  # the agent's folder, as on the node
    import node_agent
    import nvidia

    capture = (HARDWARE / "nvidia-smi_query-gpu-health_h100-2026-11-26.txt").read_text().splitlines()
    fields = ",".join(f for f, _ in nvidia.SMI_HEALTH_FIELDS)
    assert capture[0].startswith(f"# nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits")
    answers = [capture[1], capture[3]]  # idle, then loaded
    asked = []

    class Fake(nvidia.SmiSampler):
        def _run(self, args):
            asked.append(args[0])
            if args[0].startswith("--query-gpu=index,name"):
                return (HARDWARE / "nvidia-smi_query-gpu_h100_idle-2026-11-25.csv").read_text()
            if args == ["-L"]:
                return (HARDWARE / "nvidia-smi_L_h100-2026-11-25.txt").read_text()
            if args[0] == f"--query-gpu={fields}":
                if not answers:
                    raise node_agent.SourceUnavailable("nvidia-smi: Field 'x' is not a valid field to query.")
                return answers.pop(0) + "\n"
            raise AssertionError(args)

    sampler = Fake(node_agent, "/usr/bin/nvidia-smi")
    assert sampler.physical_count() == 1
    (idle,) = sampler.health([0])
    assert (idle["physical"], idle["vendor"], idle["source"]) == (0, "nvidia", "nvidia-smi")
    record = idle["nvml"]
    assert record["clock_event_names"] == ["idle"] and record["throttled"] is False
    assert (record["pcie_gen"], record["pcie_gen_max"], record["pcie_width"], record["pcie_width_max"]) == (
        5,
        5,
        16,
        16,
    )
    assert record["remapped_pending"] is False and record["ecc_volatile_uncorrected"] == 0
    assert "retired_sbe" not in record and "retired_pending" not in record  # [N/A] on an H100
    assert evaluate([from_nvml(record)]).state == "ok"
    (loaded,) = sampler.health([0])  # GPU 0 again: a new query
    reading = from_nvml(loaded["nvml"])
    assert loaded["nvml"]["clock_event_names"] == ["sw_power_cap"] and reading.throttle_reasons == ("power",)
    assert sum(a.startswith(f"--query-gpu={fields}") for a in asked) == 2
    # an nvidia-smi without these fields: no health lines from then on, telemetry goes on
    assert sampler.health([0]) is None and sampler.physical_count() == 0
