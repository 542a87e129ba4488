"""Identification: ASIC, board, bus address, ids, VBIOS and driver of each GPU."""

from .library import LIB, checked, checked_with_state
from .models import CPU_NODES, model_of
from .synthetic import hex_digest, serial


def amdsmi_get_gpu_asic_info(processor_handle):
    h, state, model = checked_with_state(processor_handle, "amdsmi_get_gpu_asic_info")
    return {
        "market_name": model.market_name,
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "subvendor_id": "0x1002",
        "device_id": hex(model.device_id),
        "rev_id": "0x00",
        "asic_serial": "0x" + serial(state, h.phys),
        "oam_id": h.phys,
        "num_compute_units": model.cus // h.num_partitions,
        "target_graphics_version": model.gfx_target,
        "subsystem_id": hex(model.device_id),
    }


def amdsmi_get_gpu_board_info(processor_handle):
    h, state, model = checked_with_state(processor_handle, "amdsmi_get_gpu_board_info")
    return {
        "model_number": "102-G{}-00".format(model.name[2:5]),
        "product_serial": "PCB" + serial(state, h.phys)[:9],
        "fru_id": "FRU-{:02d}".format(h.phys),
        "product_name": "{}-O OAM {}GB {}W".format(model.name, int(round(model.vram_mb / 1024.0)), model.power_cap_w),
        "manufacturer_name": "AMD",
    }


def _bdf(state, h):
    bus = state["gpus"][h.phys]["bus"]
    return "0000:{}:00.{}".format(bus, h.partition)


def amdsmi_get_gpu_device_bdf(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_device_bdf")
    return _bdf(LIB.state(), h)


def amdsmi_get_gpu_device_uuid(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_device_uuid")
    state = LIB.state()
    d = hex_digest("uuid", state.get("seed", 0), h.phys, h.partition)
    # Shaped like the driver's: partition and device id up front.
    return "{:02x}ff{:04x}-0000-1000-80{}-{}".format(h.partition, model_of(state).device_id, d[:2], d[2:14])


def amdsmi_get_gpu_enumeration_info(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_enumeration_info")
    state = LIB.state()
    return {
        "drm_render": 128 + h.index,
        "drm_card": h.index,
        "hsa_id": CPU_NODES + h.index,
        "hip_id": h.index,
        "hip_uuid": "GPU-" + hex_digest("hip", state.get("seed", 0), h.phys, h.partition)[:16],
    }


def amdsmi_get_gpu_kfd_info(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_kfd_info")
    state = LIB.state()
    return {
        "kfd_id": 1000 + int(hex_digest("kfd", state.get("seed", 0), h.phys, h.partition)[:4], 16),
        "node_id": CPU_NODES + h.index,
        "current_partition_id": h.partition,
    }


def amdsmi_get_gpu_vbios_info(processor_handle):
    checked(processor_handle, "amdsmi_get_gpu_vbios_info")
    model = model_of(LIB.state())
    return {
        "name": "AMD {} OAM".format(model.name),
        "build_date": "2024/05/09 13:47",
        "part_number": model.vbios_part,
        "version": "022.040.003.043.000001",
    }


def amdsmi_get_gpu_driver_info(processor_handle):
    checked(processor_handle, "amdsmi_get_gpu_driver_info")
    return {"driver_name": "amdgpu", "driver_version": "6.12.12", "driver_date": "2015/01/01 00:00"}
