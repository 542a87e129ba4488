"""The result metrics of `vllm bench serve`, with numpy's formulas."""

import collections
import math

from .bench_args import BENCH_SRC
from .bench_datasets import bench_count_tokens
from .bench_output import bench_err, bench_out


def np_percentile(values, p):
    """numpy.percentile(values, p), linear interpolation."""
    a = sorted(values)
    if not a:
        return 0.0
    idx = (len(a) - 1) * p / 100.0
    lo = int(math.floor(idx))
    hi = min(lo + 1, len(a) - 1)
    t = idx - lo
    x, y = a[lo], a[hi]
    diff = y - x
    return y - diff * (1 - t) if t >= 0.5 else x + diff * t


def np_mean(values):
    return math.fsum(values) / len(values) if values else 0.0


def np_std(values):
    if not values:
        return 0.0
    m = np_mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / len(values))


def np_median(values):
    return np_percentile(values, 50)


def stats_ms(values, percentiles):
    values = values or [0.0]
    return (
        np_mean(values) * 1000,
        np_median(values) * 1000,
        np_std(values) * 1000,
        [(p, np_percentile(values, p) * 1000) for p in percentiles],
    )


def peak_in_flight(outputs):
    """Most requests in flight at one instant (their [start, start + latency) intervals).

    vLLM 0.32 counts the requests active in each 1-second bucket instead, which adds a
    request that ended early in a second to one that began late in it: its "Peak concurrent
    requests" can exceed --max-concurrency (a capture shows 34 at concurrency 8). The
    simulator reports the true peak, which never exceeds the concurrency asked for."""
    events = []
    for o in outputs:
        events.append((o.start_time + o.latency, -1))  # an end sorts before a start at the same time
        events.append((o.start_time, 1))
    peak = now = 0
    for _, step in sorted(events):
        now += step
        peak = max(peak, now)
    return peak


def calculate_metrics(outputs, dur_s, has_tokenizer, percentiles, goodput):
    """serve.py calculate_metrics(): the same numbers; prints the failed requests and the tip."""
    actual_output_lens = []
    total_input = completed = good_completed = 0
    itls, tpots, all_tpots, ttfts, e2els = [], [], [], [], []
    for o in outputs:
        if o.success:
            output_len = o.output_tokens
            if not output_len:
                output_len = bench_count_tokens(o.generated_text) if has_tokenizer else 1
            actual_output_lens.append(output_len)
            total_input += o.prompt_len
            tpot = 0.0
            if output_len > 1:
                tpot = (o.latency - o.ttft) / (output_len - 1)
                tpots.append(tpot)
            all_tpots.append(tpot)
            itls += o.itl
            ttfts.append(o.ttft)
            e2els.append(o.latency)
            completed += 1
        else:
            actual_output_lens.append(0)
    if goodput:
        valid, slos = [], []
        for name, series in (("ttft", ttfts), ("tpot", all_tpots), ("e2el", e2els)):
            if name in goodput:
                valid.append(series)
                slos.append(goodput[name] / 1000.0)
        for req in zip(*valid):
            if all(s >= r for s, r in zip(slos, req)):
                good_completed += 1
    if completed == 0:
        bench_err(
            "%s:1165: UserWarning: All requests failed. This is likely due to a misconfiguration on the "
            "benchmark arguments.\n  metrics, actual_output_lens = calculate_metrics(\n" % BENCH_SRC
        )
    successful = [o for o in outputs if o.success]
    failed = [o for o in outputs if not o.success]
    if failed:
        bench_out("Failed requests during benchmark run detected (capping to 10):")
        for i, o in enumerate(failed[:10]):
            bench_out("Error %d: %s" % (i, o.error))
    max_tokens_per_s = 0.0
    max_concurrent = 0
    if successful:
        min_start = min(o.start_time for o in successful)
        max_end = max(o.start_time + o.latency for o in successful)
        seconds = int(math.ceil(max_end - min_start)) + 1
        tokens = [0] * seconds
        for o in successful:
            t = o.start_time + o.ttft
            times = [t]
            for gap in o.itl:
                t += gap
                times.append(t)
            for t in times:
                bucket = int(t - min_start)
                if 0 <= bucket < seconds:
                    tokens[bucket] += 1
        max_tokens_per_s = float(max(tokens))
        max_concurrent = peak_in_flight(successful)
        bench_out("tip: install termplotlib and gnuplot to plot the metrics")
    total_output = sum(actual_output_lens)
    m = {
        "completed": completed,
        "failed": len(failed),
        "total_input": total_input,
        "total_output": total_output,
        "request_throughput": completed / dur_s,
        "request_goodput": good_completed / dur_s,
        "output_throughput": total_output / dur_s,
        "total_token_throughput": (total_input + total_output) / dur_s,
        "max_output_tokens_per_s": max_tokens_per_s,
        "max_concurrent_requests": max_concurrent,
        "rtfx": 0.0,
    }
    for name, series in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        mean, median, std, pcts = stats_ms(series, percentiles)
        m["mean_%s_ms" % name] = mean
        m["median_%s_ms" % name] = median
        m["std_%s_ms" % name] = std
        m["percentiles_%s_ms" % name] = pcts
    return m, actual_output_lens


def result_row(label, value, fmt="{:<10}"):
    bench_out(("{:<40} " + fmt).format(label, value))


def parse_goodput(pairs):
    out = collections.OrderedDict()
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or ":" in value:
            raise ValueError(pair)
        out[name] = float(value)
    return out
