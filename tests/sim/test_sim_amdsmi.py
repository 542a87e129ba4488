"""The simulated amdsmi module: enumeration, partitions, units, errors, telemetry."""

import ast
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.sim.simulators import AMDSMI_DIR, amdsmi_sources, load_amdsmi


def load_module():
    """A fresh copy of the simulator, loaded by path like the node agent does."""
    return load_amdsmi("amdsmi")


@pytest.fixture
def sim_dir(tmp_path, monkeypatch):
    folder = tmp_path / "node"
    monkeypatch.setenv("ROCM_CONSOLE_SIM_DIR", str(folder))
    monkeypatch.delenv("ROCM_CONSOLE_SIM_SPEC", raising=False)
    return folder


def patch_state(folder, **changes):
    path = folder / "state.json"
    state = json.loads(path.read_text())
    state.update(changes)
    path.write_text(json.dumps(state))


def write_processes(folder, entries):
    (folder / "processes.json").write_text(json.dumps(entries))


@pytest.fixture
def amdsmi(sim_dir):
    """Initialised simulator with instant partition switches and root rights."""
    mod = load_module()
    mod.amdsmi_init()
    patch_state(sim_dir, switch_seconds=0, root=True)
    yield mod
    for _ in range(10):  # every init this test left (shut_down is a no-op past the last)
        mod.amdsmi_shut_down()


def reinit(mod):
    mod.amdsmi_shut_down()
    mod.amdsmi_init()
    return mod.amdsmi_get_processor_handles()


# ------------------------------------------------------------------ basics


def test_module_identity():
    mod = load_module()
    assert mod.__simulated__ is True
    assert mod.__version__.endswith("+sim")


def test_parses_as_python_38():
    for path in amdsmi_sources():
        ast.parse(path.read_text(), feature_version=(3, 8))


def test_runs_under_python_38_if_available(sim_dir):
    exe = shutil.which("python3.8")
    if not exe:
        pytest.skip("no python3.8")
    env = dict(os.environ, PYENV_VERSION="3.8.18")
    code = (
        f"import sys; sys.path.insert(0, {str(AMDSMI_DIR.parent)!r}); import amdsmi; amdsmi.amdsmi_init();"
        "h = amdsmi.amdsmi_get_processor_handles(); amdsmi.amdsmi_get_gpu_metrics_info(h[0]);"
        "sys.stderr.write('%d.%d %d' % (sys.version_info[0], sys.version_info[1], len(h)))"
    )
    proc = subprocess.run([exe, "-c", code], env=env, capture_output=True, text=True)
    if proc.returncode != 0 and "command not found" in proc.stderr:
        pytest.skip("python3.8 shim without an interpreter")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.strip() == "3.8 8"


def test_missing_sim_dir_is_driver_not_loaded(monkeypatch):
    monkeypatch.delenv("ROCM_CONSOLE_SIM_DIR", raising=False)
    mod = load_module()
    with pytest.raises(mod.AmdSmiLibraryException) as err:
        mod.amdsmi_init()
    assert err.value.get_error_code() == mod.amdsmi_wrapper.AMDSMI_STATUS_DRIVER_NOT_LOADED
    assert "ROCM_CONSOLE_SIM_DIR" in err.value.get_error_info()


def test_calls_before_init_raise_not_init(sim_dir):
    mod = load_module()
    with pytest.raises(mod.AmdSmiLibraryException) as err:
        mod.amdsmi_get_processor_handles()
    assert err.value.get_error_code() == mod.amdsmi_wrapper.AMDSMI_STATUS_NOT_INIT


def test_init_flag_must_be_enum(sim_dir):
    mod = load_module()
    with pytest.raises(mod.AmdSmiParameterException):
        mod.amdsmi_init(2)


def test_state_created_from_spec(sim_dir, monkeypatch):
    spec = {"gpu": "MI355X", "count": 4, "compute_partition": "DPX", "memory_partition": "NPS2", "seed": 7}
    monkeypatch.setenv("ROCM_CONSOLE_SIM_SPEC", json.dumps(spec))
    mod = load_module()
    mod.amdsmi_init()
    state = json.loads((sim_dir / "state.json").read_text())
    assert state["gpu"] == "MI355X" and state["seed"] == 7 and len(state["gpus"]) == 4
    assert {g["compute_partition"] for g in state["gpus"]} == {"DPX"}
    handles = mod.amdsmi_get_processor_handles()
    assert len(handles) == 8
    info = mod.amdsmi_get_gpu_asic_info(handles[0])
    assert info["market_name"] == "AMD Instinct MI355X"
    assert info["target_graphics_version"] == "gfx950"
    cfg = mod.amdsmi_get_gpu_memory_partition_config(handles[0])
    assert cfg["partition_caps"] == ["NPS1", "NPS2"] and cfg["mp_mode"] == "NPS2"
    mod.amdsmi_shut_down()


def test_invalid_spec_is_init_error(sim_dir, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_SPEC", json.dumps({"compute_partition": "SPX", "memory_partition": "NPS4"}))
    mod = load_module()
    with pytest.raises(mod.AmdSmiLibraryException) as err:
        mod.amdsmi_init()
    assert err.value.get_error_code() == mod.amdsmi_wrapper.AMDSMI_STATUS_INIT_ERROR


def test_handles_die_at_shut_down_and_init_is_ref_counted(amdsmi):
    handles = amdsmi.amdsmi_get_processor_handles()
    amdsmi.amdsmi_init()  # second reference
    amdsmi.amdsmi_shut_down()
    assert amdsmi.amdsmi_get_gpu_device_bdf(handles[0]) == "0000:0c:00.0"
    amdsmi.amdsmi_shut_down()
    with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
        amdsmi.amdsmi_get_gpu_device_bdf(handles[0])
    assert err.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NOT_INIT
    amdsmi.amdsmi_init()
    with pytest.raises(amdsmi.AmdSmiLibraryException):  # old session's handle stays dead
        amdsmi.amdsmi_get_gpu_device_bdf(handles[0])
    assert "partition" in repr(amdsmi.amdsmi_get_processor_handles()[0])


def test_wrong_argument_types(amdsmi):
    h = amdsmi.amdsmi_get_processor_handles()[0]
    with pytest.raises(amdsmi.AmdSmiParameterException):
        amdsmi.amdsmi_get_power_info(0)
    with pytest.raises(amdsmi.AmdSmiParameterException):
        amdsmi.amdsmi_get_clock_info(h, 0)
    with pytest.raises(amdsmi.AmdSmiParameterException):
        amdsmi.amdsmi_set_gpu_compute_partition(h, 5)
    with pytest.raises(amdsmi.AmdSmiParameterException):
        amdsmi.amdsmi_get_gpu_accelerator_partition_profile("gpu0")


# ------------------------------------------------------------- enumeration


def test_spx_enumerates_eight_and_cpx_sixty_four(amdsmi):
    handles = amdsmi.amdsmi_get_processor_handles()
    assert len(handles) == 8
    bdfs = [amdsmi.amdsmi_get_gpu_device_bdf(h) for h in handles]
    assert bdfs[0] == "0000:0c:00.0" and len(set(bdfs)) == 8
    for h in handles:
        amdsmi.amdsmi_set_gpu_compute_partition(h, amdsmi.AmdSmiComputePartitionType.CPX)
    # Like the real library, the enumeration is a snapshot until re-init.
    assert len(amdsmi.amdsmi_get_processor_handles()) == 8
    assert amdsmi.amdsmi_get_gpu_compute_partition(handles[0]) == "CPX"
    handles = reinit(amdsmi)
    assert len(handles) == 64
    assert amdsmi.amdsmi_get_gpu_device_bdf(handles[3]) == "0000:0c:00.3"
    assert amdsmi.amdsmi_get_gpu_device_bdf(handles[8]) == "0000:22:00.0"
    assert amdsmi.amdsmi_get_gpu_kfd_info(handles[11])["current_partition_id"] == 3
    enum = [amdsmi.amdsmi_get_gpu_enumeration_info(h) for h in handles]
    assert [e["drm_render"] for e in enum] == list(range(128, 192))
    assert len({amdsmi.amdsmi_get_gpu_device_uuid(h) for h in handles}) == 64
    assert amdsmi.amdsmi_get_gpu_asic_info(handles[5])["num_compute_units"] == 38


def test_dpx_and_qpx_counts(amdsmi):
    handles = amdsmi.amdsmi_get_processor_handles()
    amdsmi.amdsmi_set_gpu_compute_partition(handles[0], amdsmi.AmdSmiComputePartitionType.DPX)
    amdsmi.amdsmi_set_gpu_compute_partition(handles[1], amdsmi.AmdSmiComputePartitionType.QPX)
    assert len(reinit(amdsmi)) == 2 + 4 + 6


def test_secondary_partitions_report_na(amdsmi):
    for h in amdsmi.amdsmi_get_processor_handles():
        amdsmi.amdsmi_set_gpu_compute_partition(h, amdsmi.AmdSmiComputePartitionType.CPX)
    handles = reinit(amdsmi)
    primary, secondary = handles[0], handles[1]
    m = amdsmi
    assert set(m.amdsmi_get_power_info(secondary).values()) == {"N/A"}
    assert set(m.amdsmi_get_gpu_activity(secondary).values()) == {"N/A"}
    assert m.amdsmi_get_clock_info(secondary, m.AmdSmiClkType.GFX)["clk"] == "N/A"
    with pytest.raises(m.AmdSmiLibraryException) as err:  # only the primary has a gpu_metrics table
        m.amdsmi_get_gpu_metrics_info(secondary)
    assert err.value.get_error_code() == m.amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED
    with pytest.raises(m.AmdSmiLibraryException) as err:
        m.amdsmi_get_temp_metric(secondary, m.AmdSmiTemperatureType.HOTSPOT, m.AmdSmiTemperatureMetric.CURRENT)
    assert err.value.get_error_code() == m.amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED
    # The primary partition carries the physical GPU's values.
    assert isinstance(m.amdsmi_get_power_info(primary)["socket_power"], int)
    assert m.amdsmi_get_power_info(primary)["power_limit"] == 750  # W in amdsmi 7.x
    temp = m.amdsmi_get_temp_metric(primary, m.AmdSmiTemperatureType.HOTSPOT, m.AmdSmiTemperatureMetric.CURRENT)
    assert 35 <= temp <= 95
    metrics = m.amdsmi_get_gpu_metrics_info(primary)
    # ...and every partition's gfx load: one list per XCP slot (8), one entry per XCC
    # slot (8); in CPX each partition has one XCC, the other slots are N/A
    busy = metrics["xcp_stats.gfx_busy_inst"]
    assert metrics["num_partition"] == 8 and len(busy) == 8
    assert all(len(xcp) == 8 and isinstance(xcp[0], int) and xcp[1:] == ["N/A"] * 7 for xcp in busy)


def test_vram_is_per_partition(amdsmi):
    h = amdsmi.amdsmi_get_processor_handles()[0]
    assert amdsmi.amdsmi_get_gpu_vram_usage(h)["vram_total"] == 196592
    assert amdsmi.amdsmi_get_gpu_memory_total(h, amdsmi.AmdSmiMemoryType.VRAM) == 196592 * 1024 * 1024
    amdsmi.amdsmi_set_gpu_compute_partition(h, amdsmi.AmdSmiComputePartitionType.DPX)
    handles = reinit(amdsmi)
    assert amdsmi.amdsmi_get_gpu_vram_usage(handles[1])["vram_total"] == 98296
    amdsmi.amdsmi_set_gpu_compute_partition(handles[0], amdsmi.AmdSmiComputePartitionType.CPX)
    handles = reinit(amdsmi)
    total_mb = amdsmi.amdsmi_get_gpu_vram_usage(handles[7])["vram_total"]
    assert total_mb == 196592 // 8 and round(total_mb / 1024) == 24
    assert amdsmi.amdsmi_get_gpu_vram_info(handles[7])["vram_size"] == total_mb


def test_power_cap_in_microwatts(amdsmi):
    h = amdsmi.amdsmi_get_processor_handles()[0]
    cap = amdsmi.amdsmi_get_power_cap_info(h)
    assert cap["power_cap"] == cap["max_power_cap"] == cap["default_power_cap"] == 750_000_000
    assert 0 < cap["min_power_cap"] < cap["power_cap"]


def test_edge_temperature_not_supported(amdsmi):
    h = amdsmi.amdsmi_get_processor_handles()[0]
    with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
        amdsmi.amdsmi_get_temp_metric(h, amdsmi.AmdSmiTemperatureType.EDGE, amdsmi.AmdSmiTemperatureMetric.CURRENT)
    assert err.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED


# ---------------------------------------------------------- processes and setters


def test_process_list_and_vram_follow_processes_json(amdsmi, sim_dir):
    handles = amdsmi.amdsmi_get_processor_handles()
    before = amdsmi.amdsmi_get_gpu_vram_usage(handles[2])["vram_used"]
    write_processes(
        sim_dir,
        [
            {"pid": os.getpid(), "name": "vllm", "gpu": 2, "vram_bytes": 100 * 1024**3},
            {"pid": 999999999, "name": "gone", "gpu": 2, "vram_bytes": 5 * 1024**3},
            {"pid": -5, "name": "pinned", "gpu": 3, "vram_bytes": 1024**3, "sticky": True},
        ],
    )
    procs = amdsmi.amdsmi_get_gpu_process_list(handles[2])
    assert [p["name"] for p in procs] == ["vllm"]
    p = procs[0]
    assert p["pid"] == os.getpid() and p["mem"] == p["memory_usage"]["vram_mem"] == 100 * 1024**3
    assert set(p) >= {"name", "pid", "mem", "engine_usage", "memory_usage", "cu_occupancy"}
    assert set(p["engine_usage"]) == {"gfx", "enc"}
    assert set(p["memory_usage"]) == {"gtt_mem", "cpu_mem", "vram_mem"}
    assert amdsmi.amdsmi_get_gpu_vram_usage(handles[2])["vram_used"] == before + 100 * 1024
    assert [p["name"] for p in amdsmi.amdsmi_get_gpu_process_list(handles[3])] == ["pinned"]
    assert amdsmi.amdsmi_get_gpu_process_list(handles[0]) == []


def test_gpu_with_process_looks_busier(amdsmi, sim_dir, monkeypatch):
    handles = amdsmi.amdsmi_get_processor_handles()
    write_processes(sim_dir, [{"pid": os.getpid(), "name": "vllm", "gpu": 1, "vram_bytes": 1}])
    for t in range(1_700_000_000, 1_700_000_300, 17):
        monkeypatch.setattr(time, "time", lambda t=t: float(t))
        busy = amdsmi.amdsmi_get_gpu_activity(handles[1])["gfx_activity"]
        idle = amdsmi.amdsmi_get_gpu_activity(handles[0])["gfx_activity"]
        assert busy >= 35 > 8 >= idle


def test_compute_switch_busy_with_live_process(amdsmi, sim_dir):
    handles = amdsmi.amdsmi_get_processor_handles()
    write_processes(sim_dir, [{"pid": os.getpid(), "name": "vllm", "gpu": 0, "vram_bytes": 1}])
    with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
        amdsmi.amdsmi_set_gpu_compute_partition(handles[0], amdsmi.AmdSmiComputePartitionType.CPX)
    assert err.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_BUSY
    # Other physical GPUs are free.
    amdsmi.amdsmi_set_gpu_compute_partition(handles[1], amdsmi.AmdSmiComputePartitionType.CPX)
    assert amdsmi.amdsmi_get_gpu_compute_partition(handles[1]) == "CPX"


def test_no_perm_when_not_root(amdsmi, sim_dir):
    patch_state(sim_dir, root=False)
    h = amdsmi.amdsmi_get_processor_handles()[0]
    for call, arg in (
        (amdsmi.amdsmi_set_gpu_compute_partition, amdsmi.AmdSmiComputePartitionType.CPX),
        (amdsmi.amdsmi_set_gpu_memory_partition, amdsmi.AmdSmiMemoryPartitionType.NPS4),
        (amdsmi.amdsmi_set_gpu_accelerator_partition_profile, 3),
    ):
        with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
            call(h, arg)
        assert err.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NO_PERM
    with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
        amdsmi.amdsmi_gpu_driver_reload()
    assert err.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NO_PERM
    with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
        amdsmi.amdsmi_get_gpu_accelerator_partition_profile_config(h)
    assert err.value.get_error_code() == amdsmi.amdsmi_wrapper.AMDSMI_STATUS_NO_PERM
    assert amdsmi.amdsmi_get_gpu_compute_partition(h) == "SPX"  # getters need no root


def test_invalid_combinations(amdsmi):
    h = amdsmi.amdsmi_get_processor_handles()[0]
    m = amdsmi
    with pytest.raises(m.AmdSmiLibraryException) as err:
        m.amdsmi_set_gpu_compute_partition(h, m.AmdSmiComputePartitionType.TPX)
    assert err.value.get_error_code() == m.amdsmi_wrapper.AMDSMI_STATUS_SETTING_UNAVAILABLE
    with pytest.raises(m.AmdSmiLibraryException) as err:  # NPS4 needs QPX/CPX everywhere
        m.amdsmi_set_gpu_memory_partition(h, m.AmdSmiMemoryPartitionType.NPS4)
    assert err.value.get_error_code() == m.amdsmi_wrapper.AMDSMI_STATUS_INVAL
    with pytest.raises(m.AmdSmiLibraryException) as err:  # MI300X has no NPS2
        m.amdsmi_set_gpu_memory_partition(h, m.AmdSmiMemoryPartitionType.NPS2)
    assert err.value.get_error_code() == m.amdsmi_wrapper.AMDSMI_STATUS_SETTING_UNAVAILABLE


def test_memory_partition_pending_until_driver_reload(amdsmi, sim_dir):
    m = amdsmi
    handles = m.amdsmi_get_processor_handles()
    for h in handles:
        m.amdsmi_set_gpu_compute_partition(h, m.AmdSmiComputePartitionType.CPX)
    m.amdsmi_set_gpu_memory_partition(handles[0], m.AmdSmiMemoryPartitionType.NPS4)
    assert m.amdsmi_get_gpu_memory_partition(handles[0]) == "NPS1"
    state = json.loads((sim_dir / "state.json").read_text())
    assert {g["pending_memory_partition"] for g in state["gpus"]} == {"NPS4"}

    write_processes(sim_dir, [{"pid": os.getpid(), "name": "vllm", "gpu": 5, "vram_bytes": 1}])
    with pytest.raises(m.AmdSmiLibraryException) as err:
        m.amdsmi_gpu_driver_reload()
    assert err.value.get_error_code() == m.amdsmi_wrapper.AMDSMI_STATUS_AMDGPU_RESTART_ERR
    assert m.amdsmi_get_gpu_memory_partition(handles[0]) == "NPS1"

    write_processes(sim_dir, [])
    m.amdsmi_gpu_driver_reload()
    assert m.amdsmi_get_gpu_memory_partition(handles[7]) == "NPS4"
    assert m.amdsmi_get_gpu_memory_partition_config(handles[0])["mp_mode"] == "NPS4"
    # CPX is still valid with NPS4, so the compute mode survives the reload.
    assert len(reinit(m)) == 64


def test_compute_mode_must_fit_memory_mode(amdsmi):
    m = amdsmi
    handles = m.amdsmi_get_processor_handles()
    for h in handles:
        m.amdsmi_set_gpu_compute_partition(h, m.AmdSmiComputePartitionType.QPX)
    m.amdsmi_set_gpu_memory_partition(handles[0], m.AmdSmiMemoryPartitionType.NPS4)
    m.amdsmi_gpu_driver_reload()
    with pytest.raises(m.AmdSmiLibraryException) as err:
        m.amdsmi_set_gpu_compute_partition(handles[0], m.AmdSmiComputePartitionType.SPX)
    assert err.value.get_error_code() == m.amdsmi_wrapper.AMDSMI_STATUS_INVAL


def test_accelerator_profiles(amdsmi):
    m = amdsmi
    h = m.amdsmi_get_processor_handles()[0]
    prof = m.amdsmi_get_gpu_accelerator_partition_profile(h)
    assert prof["partition_id"] == [0]
    assert prof["partition_profile"]["profile_type"] == "SPX"
    assert prof["partition_profile"]["profile_index"] == 0
    cfg = m.amdsmi_get_gpu_accelerator_partition_profile_config(h)
    assert [p["profile_type"] for p in cfg["profiles"]] == ["SPX", "DPX", "QPX", "CPX"]
    assert cfg["profiles"][3]["memory_caps"] == ["NPS1", "NPS4"]
    spx = {r["resource_type"]: r["partition_resource"] for r in cfg["profiles"][0]["resources"]}
    assert spx == {"XCC": 8, "DECODER": 4, "DMA": 16, "JPEG": 32}
    m.amdsmi_set_gpu_accelerator_partition_profile(h, 3)
    assert m.amdsmi_get_gpu_compute_partition(h) == "CPX"
    with pytest.raises(m.AmdSmiLibraryException):
        m.amdsmi_set_gpu_accelerator_partition_profile(h, 9)


def test_accelerator_profile_swallows_errors_like_the_real_wrapper(amdsmi, sim_dir):
    m = amdsmi
    h = m.amdsmi_get_processor_handles()[0]
    patch_state(sim_dir, faults={"amdsmi_get_gpu_accelerator_partition_profile": 10})
    prof = m.amdsmi_get_gpu_accelerator_partition_profile(h)
    assert prof["partition_profile"]["profile_type"] == "N/A"
    assert prof["partition_profile"]["profile_index"] == 0
    patch_state(sim_dir, faults={"amdsmi_get_gpu_accelerator_partition_profile": 2})
    with pytest.raises(m.AmdSmiLibraryException):
        m.amdsmi_get_gpu_accelerator_partition_profile(h)


def test_injected_faults_use_real_exception_classes(amdsmi, sim_dir):
    m = amdsmi
    h = m.amdsmi_get_processor_handles()[0]
    patch_state(sim_dir, faults={"amdsmi_get_power_info": 9, "amdsmi_get_gpu_activity": 8})
    with pytest.raises(m.AmdSmiRetryException):
        m.amdsmi_get_power_info(h)
    with pytest.raises(m.AmdSmiTimeoutException):
        m.amdsmi_get_gpu_activity(h)


# --------------------------------------------------------------- telemetry values


def sample(m, h):
    power = m.amdsmi_get_power_info(h)
    clk = m.amdsmi_get_clock_info(h, m.AmdSmiClkType.GFX)
    return {
        "activity": m.amdsmi_get_gpu_activity(h),
        "power": power["socket_power"],
        "hotspot": m.amdsmi_get_temp_metric(h, m.AmdSmiTemperatureType.HOTSPOT, m.AmdSmiTemperatureMetric.CURRENT),
        "mem_temp": m.amdsmi_get_temp_metric(h, m.AmdSmiTemperatureType.VRAM, m.AmdSmiTemperatureMetric.CURRENT),
        "gfx_clk": clk["clk"],
        "max_clk": clk["max_clk"],
        "mem_clk": m.amdsmi_get_clock_info(h, m.AmdSmiClkType.MEM)["clk"],
    }


def test_values_change_over_time_and_stay_in_range(amdsmi, sim_dir, monkeypatch):
    m = amdsmi
    handles = m.amdsmi_get_processor_handles()
    write_processes(sim_dir, [{"pid": os.getpid(), "name": "vllm", "gpu": 0, "vram_bytes": 1}])
    seen = {h.index: [] for h in handles}
    for step in range(60):
        t = 1_700_000_000.0 + step * 3.7
        monkeypatch.setattr(time, "time", lambda t=t: t)
        for h in handles:
            s = sample(m, h)
            seen[h.index].append(s)
            act = s["activity"]
            assert 0 <= act["gfx_activity"] <= 100 and 0 <= act["umc_activity"] <= 100
            assert 130 <= s["power"] <= 750
            assert 35 <= s["hotspot"] <= 95
            assert 25 <= s["mem_temp"] <= s["hotspot"]
            assert 100 <= s["gfx_clk"] <= s["max_clk"] == 2100
            assert s["mem_clk"] == 1300
    for samples in seen.values():
        assert len({s["power"] for s in samples}) > 5
        assert len({s["hotspot"] for s in samples}) > 1
    busy = seen[0]
    assert len({s["activity"]["gfx_activity"] for s in busy}) > 5
    assert max(s["power"] for s in busy) > 400


def test_same_seed_and_time_give_same_values(tmp_path, monkeypatch):
    def run(folder, seed):
        monkeypatch.setenv("ROCM_CONSOLE_SIM_DIR", str(folder))
        monkeypatch.setenv("ROCM_CONSOLE_SIM_SPEC", json.dumps({"seed": seed}))
        m = load_module()
        monkeypatch.setattr(time, "time", lambda: 1_700_000_123.0)
        m.amdsmi_init()
        out = [sample(m, h) for h in m.amdsmi_get_processor_handles()]
        out.append(m.amdsmi_get_gpu_device_uuid(m.amdsmi_get_processor_handles()[0]))
        m.amdsmi_shut_down()
        return out

    assert run(tmp_path / "a", 1) == run(tmp_path / "b", 1)
    assert run(tmp_path / "a", 1) != run(tmp_path / "c", 2)


def test_metrics_info_shape(amdsmi):
    metrics = amdsmi.amdsmi_get_gpu_metrics_info(amdsmi.amdsmi_get_processor_handles()[0])
    assert metrics["temperature_edge"] == "N/A"
    assert len(metrics["temperature_hbm"]) == 4
    assert len(metrics["current_gfxclks"]) == 8
    assert metrics["num_partition"] == 1
    assert isinstance(metrics["current_socket_power"], int)
    assert metrics["average_socket_power"] == "N/A"  # MI300: current power only
    assert metrics["current_gfxclk"] == metrics["current_gfxclks"][0]
    # SPX: XCP 0 holds all 8 XCCs, XCP slots 1-7 are unused (N/A), as the 7.0.2 wrapper returns them
    busy = metrics["xcp_stats.gfx_busy_inst"]
    assert busy[0] == [metrics["average_gfx_activity"]] * 8
    assert busy[1:] == [["N/A"] * 8] * 7
    assert [len(x) for x in metrics["xcp_stats.jpeg_busy"]] == [32] * 8
    assert "xcp_stats" not in metrics  # 7.0.2 flattens the struct into dotted keys


def test_prints_nothing_to_stdout(sim_dir, capsys):
    m = load_module()
    m.amdsmi_init()
    for h in m.amdsmi_get_processor_handles():
        m.amdsmi_get_gpu_metrics_info(h)
        m.amdsmi_get_gpu_process_list(h)
        m.amdsmi_get_gpu_board_info(h)
        m.amdsmi_get_gpu_vbios_info(h)
    try:
        m.amdsmi_get_temp_metric(h, m.AmdSmiTemperatureType.EDGE, m.AmdSmiTemperatureMetric.CURRENT)
    except m.AmdSmiLibraryException as exc:
        str(exc)
    m.amdsmi_shut_down()
    assert capsys.readouterr().out == ""


def test_imports_nothing_from_console():
    """The stdlib and its own modules only (relatively: it is imported as `amdsmi` on the node)."""
    sources = amdsmi_sources()
    siblings = {p.stem for p in sources}
    assert {"__init__", "library", "telemetry", "partitions", "statefiles"} <= siblings
    names = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in siblings, (path.name, node.module)
            elif isinstance(node, ast.ImportFrom):
                names.add((node.module or "").split(".")[0])
    assert names <= set(sys.stdlib_module_names) | {"__future__"}
