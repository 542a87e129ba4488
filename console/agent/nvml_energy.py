"""A physical GPU's energy figure for every tick from rare reads of NVML's energy counter.

Shipped beside nvidia.py (stdlib only, Python >= 3.8).  Why: on an H200 (driver 580)
one read of the energy counter (field 191, ``nvmlDeviceGetTotalEnergyConsumption``)
costs 4.2 ms of CPU, more than the rest of a tick together (tests/perf/README.md,
"NVML call cost").  So the sampler reads the counter every ``every_s`` seconds
(staggered over the GPUs), at a step in power (a run starting or ending: the
edges a run's energy is measured between), and integrates the tick's power
reading in between: the figure a tick reports is the last counter reading plus
the power drawn since.

The power reading (``nvmlDeviceGetPowerUsage``) is a 1 s average on Ampere and
later, so the energy of the interval that ends at a tick is that reading times
the interval (the rectangle rule): over the real H100 capture's load step it is
3 x closer to the counter than the trapezoid (tests/agent/test_nvml_energy.py).

The figure never goes backwards: a counter reading below the figure already
reported (the integral ran ahead) holds the figure until the counter passes it,
so the console never mistakes a correction for a counter reset.
"""

from __future__ import annotations

ENERGY_EVERY_S = 30.0  # seconds between two counter reads of one GPU at a steady draw
STEP_MIN_GAP_S = 2.0  # no step read within this of the last read (a ramp over a few ticks is one step)
STEP_BURST = 2.0  # step reads in hand (a run's start and end); one more is earned per ``every_s``
STEP_W = 100.0  # a step: power changed by this much since the last tick ...
STEP_SHARE = 0.5  # ... and by half the larger reading (idle <-> busy, not a busy server's swings)


class EnergyMeter:
    """One physical GPU: ``due(now, power_w)`` says whether to read the counter this tick;
    then ``counter(mj, now)`` or ``power(watts, now)``; ``joules()`` is the tick's figure."""

    def __init__(self, every_s=ENERGY_EVERY_S, offset_s=0.0):
        self.every_s = float(every_s)
        self.offset_s = float(offset_s)  # the first periodic read after the first: staggered per GPU
        self.base_mj = None  # the counter at its last read
        self.read_at = None  # when it was read
        self.drawn_mj = 0.0  # power integrated since
        self.last_t = None  # the end of the integrated span
        self.last_w = None  # the previous tick's power
        self.shown_mj = None  # the figure last reported (never decreases)
        self.next_due = None
        self.reads = 0
        self.step_reads = 0
        self.credit = STEP_BURST  # step reads allowed now: bounded, so a swinging draw cannot read every tick
        self.credit_t = None

    def due(self, now, power_w=None):
        """True when the counter should be read on this tick: the first tick, every
        ``every_s`` seconds, or at a step in power (idle <-> busy: a run starting or
        ending) while a step read is in hand and none was made in the last STEP_MIN_GAP_S."""
        if self.credit_t is not None and self.every_s > 0:
            self.credit = min(STEP_BURST, self.credit + (now - self.credit_t) / self.every_s)
        self.credit_t = now
        if self.next_due is None or now >= self.next_due:
            return True
        if power_w is None or self.last_w is None or self.read_at is None or self.credit < 1.0:
            return False
        change = abs(power_w - self.last_w)
        if change >= STEP_W and change >= STEP_SHARE * max(power_w, self.last_w):
            return now - self.read_at >= STEP_MIN_GAP_S
        return False

    def counter(self, mj, now, power_w=None):
        """The counter was read at ``now`` (mJ); None: it could not be, integrate instead."""
        if mj is None:
            self.power(power_w, now)
            self.next_due = now + self.every_s  # not asked again on every tick
            return
        if self.read_at is not None and now < self.next_due:
            self.step_reads += 1
            self.credit -= 1.0
        first = self.read_at is None
        self.base_mj, self.read_at, self.drawn_mj, self.last_t = float(mj), now, 0.0, now
        self.next_due = now + self.every_s + (self.offset_s if first else 0.0)
        self.last_w = power_w if power_w is not None else self.last_w
        self.reads += 1

    def power(self, watts, now):
        """The tick's power (W, a 1 s average) covers the time since the last tick."""
        if watts is None:
            return  # the next reading covers this tick's span too
        if self.last_t is not None and now > self.last_t:
            self.drawn_mj += watts * 1000.0 * (now - self.last_t)
        self.last_t = now
        self.last_w = watts

    def joules(self):
        """The figure for this tick (J, cumulative like the counter); None before a counter read."""
        if self.base_mj is None:
            return None
        mj = self.base_mj + self.drawn_mj
        if self.shown_mj is not None and mj < self.shown_mj:
            mj = self.shown_mj
        self.shown_mj = mj
        return mj / 1000.0
