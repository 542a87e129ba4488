"""The simulated GPU models, their partition modes and the platform around them."""

from collections import namedtuple

MiB = 1024 * 1024

_Model = namedtuple(
    "_Model",
    "name market_name device_id gfx_target cus xcds vram_mb vram_type vram_vendor"
    " vram_bandwidth power_cap_w idle_w gfx_min gfx_max soc_max mem_clk"
    " compute_modes memory_caps vbios_part",
)

# vram_mb is what the driver reports (a little under the marketing GB);
# vram_type is the amdsmi_vram_type_t value (HBM3 4, HBM3E 5).
MODELS = {
    "MI300X": _Model(
        "MI300X",
        "AMD Instinct MI300X",
        0x74A1,
        "gfx942",
        304,
        8,
        196592,
        4,
        "HYNIX",
        5300,
        750,
        140,
        500,
        2100,
        1143,
        1300,
        ("SPX", "DPX", "QPX", "CPX"),
        ("NPS1", "NPS4"),
        "113-M3000100-102",
    ),
    "MI325X": _Model(
        "MI325X",
        "AMD Instinct MI325X",
        0x74A5,
        "gfx942",
        304,
        8,
        262128,
        5,
        "HYNIX",
        6000,
        1000,
        165,
        500,
        2100,
        1143,
        1300,
        ("SPX", "DPX", "QPX", "CPX"),
        ("NPS1", "NPS4"),
        "113-M3250100-100",
    ),
    "MI355X": _Model(
        "MI355X",
        "AMD Instinct MI355X",
        0x75A3,
        "gfx950",
        256,
        8,
        294896,
        5,
        "SAMSUNG",
        8000,
        1400,
        220,
        500,
        2400,
        1200,
        1300,
        ("SPX", "DPX", "QPX", "CPX"),
        ("NPS1", "NPS2"),
        "113-M3550100-100",
    ),
}

# Logical GPUs per physical GPU for each compute mode.
PARTITIONS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 8}

# Which memory (NPS) modes each compute mode works with (partition.md).
COMPATIBLE = {
    "SPX": ("NPS1",),
    "DPX": ("NPS1", "NPS2"),
    "QPX": ("NPS1", "NPS4"),
    "CPX": ("NPS1", "NPS4"),
}

# PCI buses of the eight OAM slots on an MI300X platform; more GPUs get made-up buses.
BUSES = ("0c", "22", "38", "5c", "9f", "af", "bf", "df")

# Engines of one physical GPU, split among partitions (accelerator profiles).
RESOURCES = (("XCC", 8), ("DECODER", 4), ("DMA", 16), ("JPEG", 32))

CPU_NODES = 2  # KFD/HSA number CPU agents first; a 2-socket host is assumed


def memory_caps(model, compute):
    """NPS modes usable with `compute` on this model, in the model's order."""
    return [m for m in model.memory_caps if m in COMPATIBLE.get(compute, ())]


def model_of(state):
    """The model of the node whose state.json content is `state`."""
    return MODELS[state["gpu"]]
