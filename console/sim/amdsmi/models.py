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
# A spec sheet per model, one line a topic: identity, compute, memory, power, modes.
# fmt: off
_MI300X = _Model(
    name="MI300X", market_name="AMD Instinct MI300X", device_id=0x74A1, vbios_part="113-M3000100-102",
    gfx_target="gfx942", cus=304, xcds=8, gfx_min=500, gfx_max=2100, soc_max=1143,
    vram_mb=196592, vram_type=4, vram_vendor="HYNIX", vram_bandwidth=5300, mem_clk=1300,
    power_cap_w=750, idle_w=140,
    compute_modes=("SPX", "DPX", "QPX", "CPX"), memory_caps=("NPS1", "NPS4"),
)
MODELS = {
    "MI300X": _MI300X,
    # the same chip with more and faster memory (HBM3E) and a higher power cap
    "MI325X": _MI300X._replace(
        name="MI325X", market_name="AMD Instinct MI325X", device_id=0x74A5, vbios_part="113-M3250100-100",
        vram_mb=262128, vram_type=5, vram_bandwidth=6000,
        power_cap_w=1000, idle_w=165,
    ),
    # the next chip (gfx950): fewer, faster CUs, more HBM3E, NPS2 instead of NPS4
    "MI355X": _MI300X._replace(
        name="MI355X", market_name="AMD Instinct MI355X", device_id=0x75A3, vbios_part="113-M3550100-100",
        gfx_target="gfx950", cus=256, gfx_max=2400, soc_max=1200,
        vram_mb=294896, vram_type=5, vram_vendor="SAMSUNG", vram_bandwidth=8000,
        power_cap_w=1400, idle_w=220,
        memory_caps=("NPS1", "NPS2"),
    ),
}
# fmt: on

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
