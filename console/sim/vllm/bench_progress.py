"""tqdm's progress bar, drawn on stderr like the real client's."""

import os
import sys
import time

from .bench_output import bench_err, bench_flush


class _EMA(object):
    """tqdm.utils.EMA."""

    def __init__(self, smoothing=0.3):
        self.alpha = smoothing
        self.last = 0.0
        self.calls = 0

    def __call__(self, x=None):
        beta = 1 - self.alpha
        if x is not None:
            self.last = self.alpha * x + beta * self.last
            self.calls += 1
        return self.last / (1 - beta**self.calls) if self.calls else self.last


def tqdm_interval(t):
    sign = "-" if t < 0 else ""
    mins, s = divmod(abs(int(t)), 60)
    h, m = divmod(mins, 60)
    return "%s%d:%02d:%02d" % (sign, h, m, s) if h else "%s%02d:%02d" % (sign, m, s)


TQDM_CHARSET = " " + "".join(chr(c) for c in range(0x258F, 0x2587, -1))


class BenchBar(object):
    """tqdm(total=N) as `vllm bench serve` uses it: stderr, `\\r` redraws at most every 0.1 s
    (mininterval, dynamic miniters, EMA rate with smoothing 0.3), width = terminal columns - 1
    on a tty and a 10-character bar otherwise (tqdm ignores $COLUMNS), a final redraw with the
    overall rate and a newline at close()."""

    def __init__(self, total, bar_format=None, unit="it"):
        self.total = total
        self.bar_format = bar_format
        self.unit = unit
        self.n = 0
        self.last_print_n = 0
        self.miniters = 0
        self.mininterval = 0.1
        self.maxinterval = 10.0
        self.ema_dn = _EMA()
        self.ema_dt = _EMA()
        self.ema_miniters = _EMA()
        self.overall = False
        self.closed = False
        self.last_len = 0
        try:
            self.ncols = os.get_terminal_size(sys.stderr.fileno())[0] - 1
        except (OSError, ValueError, AttributeError):
            self.ncols = None
        bench_flush()  # tqdm's status_printer flushes both streams
        self.start_t = self.last_print_t = time.time()
        self.refresh()

    def update(self, n=1):
        if self.closed:
            return
        self.n += n
        cur_t = time.time()
        if self.miniters > 1 and cur_t - self.last_print_t >= self.maxinterval:
            self.miniters = 1  # what tqdm's monitor thread does
        if self.n - self.last_print_n >= self.miniters:
            dt = cur_t - self.last_print_t
            if dt >= self.mininterval:
                dn = self.n - self.last_print_n
                if dt and dn:
                    self.ema_dn(dn)
                    self.ema_dt(dt)
                self.refresh()
                if dt >= self.maxinterval:
                    self.miniters = dn * self.mininterval / dt
                else:
                    self.miniters = self.ema_miniters(dn * (self.mininterval / dt if dt else 1))
                self.last_print_n = self.n
                self.last_print_t = cur_t

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.overall = True
        self.refresh()
        bench_err("\n")

    def refresh(self):
        s = self.format()
        pad = " " * max(self.last_len - len(s), 0)
        self.last_len = len(s)
        bench_err("\r" + s + pad)

    def format(self):
        n, total = self.n, self.total
        elapsed = time.time() - self.start_t
        rate = None
        if not self.overall:
            dt = self.ema_dt()
            rate = self.ema_dn() / dt if dt else None
        if rate is None and elapsed:
            rate = n / elapsed
        inv_rate = 1 / rate if rate else None
        rate_noinv = ("%5.2f" % rate if rate else "?") + self.unit + "/s"
        rate_inv = ("%5.2f" % inv_rate if inv_rate else "?") + "s/" + self.unit
        rate_fmt = rate_inv if inv_rate and inv_rate > 1 else rate_noinv
        remaining = (total - n) / rate if rate and total else 0
        remaining_str = tqdm_interval(remaining) if rate else "?"
        elapsed_str = tqdm_interval(elapsed)
        frac = float(n) / total if total else 0.0
        if self.bar_format is not None:  # "{desc} |{bar}| {elapsed} elapsed, {remaining} remaining"
            left, right = " |", "| %s elapsed, %s remaining" % (elapsed_str, remaining_str)
        else:
            left = "{0:3.0f}%|".format(frac * 100)
            right = "| %s/%s [%s<%s, %s]" % (n, total, elapsed_str, remaining_str, rate_fmt)
        width = max(1, self.ncols - len(left) - len(right)) if self.ncols else 10
        full, part = divmod(int(frac * width * 8), 8)
        bar = TQDM_CHARSET[-1] * full
        if full < width:
            bar += TQDM_CHARSET[part] + TQDM_CHARSET[0] * (width - full - 1)
        res = left + bar + right
        return res[: self.ncols] if self.ncols else res
