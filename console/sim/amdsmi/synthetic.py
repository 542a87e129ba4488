"""The synthetic telemetry: smooth, seeded waves per GPU, plausible for the model and the load.

Values are deterministic for a given (seed, GPU, time); a GPU with a simulated process works.
"""

import hashlib
import math

from .library import layout, live_processes, processes_on
from .models import PARTITIONS, MiB, model_of

_phase_cache: dict = {}  # (seed, physical, partition) -> wave phases and periods


def _phases(seed, phys, partition):
    """Per-GPU wave phases and periods, derived from the seed (stable across runs)."""
    key = (seed, phys, partition)
    if key not in _phase_cache:
        digest = hashlib.sha256("{}:{}:{}".format(seed, phys, partition).encode()).digest()
        u = [b / 255.0 for b in digest[:6]]
        _phase_cache[key] = (
            (2 * math.pi * u[0], 60 + 60 * u[3]),
            (2 * math.pi * u[1], 15 + 15 * u[4]),
            (2 * math.pi * u[2], 4 + 4 * u[5]),
        )
    return _phase_cache[key]


def _wave(seed, phys, partition, t):
    """A smooth 0..1 signal: three sines of different periods."""
    (p1, t1), (p2, t2), (p3, t3) = _phases(seed, phys, partition)
    w = (
        0.5
        + 0.3 * math.sin(2 * math.pi * t / t1 + p1)
        + 0.15 * math.sin(2 * math.pi * t / t2 + p2)
        + 0.05 * math.sin(2 * math.pi * t / t3 + p3)
    )
    return min(1.0, max(0.0, w))


def logical_load(seed, phys, partition, t, busy):
    """(gfx, umc) activity 0..1 of one logical GPU; a GPU with a process works."""
    w = _wave(seed, phys, partition, t)
    if busy:
        return 0.35 + 0.65 * w, 0.15 + 0.55 * w
    return 0.08 * w * w, 0.01 * w


_SAMPLE_MEMO: dict = {}  # one entry per physical GPU: (key, sample)


def physical_sample(state, phys, t):
    """Physical-GPU telemetry at time t, memoised for 50 ms.

    A telemetry tick asks for the same GPU's values through many calls
    (activity, power, temperatures, clocks); computing them once per tick keeps
    the simulator's cost from dominating what the agent's cost is measured with.
    """
    used = frozenset(g for g, _ in live_processes())
    key = (id(state), phys, int(t * 20), used)
    hit = _SAMPLE_MEMO.get(phys)
    if hit is not None and hit[0] == key:
        return hit[1]
    sample = _compute_physical_sample(state, phys, t, used)
    _SAMPLE_MEMO[phys] = (key, sample)
    return sample


def _compute_physical_sample(state, phys, t, used):
    """Physical-GPU telemetry at time t: activity, power, temperatures, clocks."""
    model = model_of(state)
    seed = state.get("seed", 0)
    n = PARTITIONS[state["gpus"][phys]["compute_partition"]]
    base = layout(state)[phys]
    busy = [(base + p) in used for p in range(n)]

    def load(at):
        parts = [logical_load(seed, phys, p, at, busy[p]) for p in range(n)]
        return sum(g for g, _ in parts) / n, sum(u for _, u in parts) / n, [g for g, _ in parts]

    gfx, umc, per_partition = load(t)
    # Temperatures follow the load with a lag (thermal mass).
    lagged = sum(load(t - lag)[0] for lag in (0, 8, 16, 24)) / 4
    jitter = _wave(seed, phys, 99, t) - 0.5  # small independent wobble, -0.5..0.5

    power = model.idle_w + (0.96 * model.power_cap_w - model.idle_w) * gfx**1.1
    power = min(model.power_cap_w, power + 0.04 * model.idle_w * jitter)
    hotspot = min(95.0, max(35.0, 37 + 53 * lagged**0.9 + 2 * jitter))
    mem_temp = max(30.0, hotspot - 4 - 6 * lagged)

    if not any(busy):  # idle: deep sleep, clock below the DPM minimum
        gfx_clk, deep_sleep = 140 + 60 * (jitter + 0.5), 1
    else:
        span = model.gfx_max - model.gfx_min
        gfx_clk, deep_sleep = model.gfx_min + span * min(1.0, 0.25 + 1.2 * gfx), 0
        if power > 0.93 * model.power_cap_w:  # power-capped: clocks back off
            gfx_clk *= 0.93
    soc_clk = 400 + (model.soc_max - 400) * min(1.0, 2 * gfx)
    return {
        "gfx": gfx,
        "umc": umc,
        "per_partition": per_partition,
        "power": power,
        "hotspot": hotspot,
        "mem_temp": mem_temp,
        "hbm": [mem_temp + d for d in (-1.0, 0.5, 1.0, -0.5)],
        "gfx_clk": int(round(min(model.gfx_max, max(120, gfx_clk)))),
        "soc_clk": int(round(soc_clk)),
        "mem_clk": model.mem_clk,
        "deep_sleep": deep_sleep,
    }


def vram_used_bytes(state, h):
    baseline = (283 * MiB) // h.num_partitions + 8 * MiB  # driver/firmware reservations
    procs = sum(int(e.get("vram_bytes", 0) or 0) for e in processes_on(state, h.phys, h.partition))
    return min(vram_total_mb(state, h) * MiB, baseline + procs)


def vram_total_mb(state, h):
    return model_of(state).vram_mb // h.num_partitions


def hex_digest(*parts):
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def serial(state, phys):
    return hex_digest("serial", state.get("seed", 0), phys)[:16].upper()
