"""/metrics: the Prometheus families of vLLM V1, in its text exposition format."""

import bisect
import collections
import time

from .constants import (
    FINISH_REASONS,
    ITERATION_BUCKETS,
    ITL_BUCKETS,
    REQUEST_BUCKETS,
    TTFT_BUCKETS,
)


def go_float(d):
    """prometheus_client's floatToGoString."""
    d = float(d)
    if d == float("inf"):
        return "+Inf"
    if d == float("-inf"):
        return "-Inf"
    if d != d:
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = "{}.{}{}".format(s[0], s[1:dot], s[dot + 1 :]).rstrip("0.")
        return "{}e+0{}".format(mantissa, dot - 1)
    return s


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels):
    if not labels:
        return ""
    return "{" + ",".join('%s="%s"' % (k, _escape(labels[k])) for k in sorted(labels)) + "}"


def one_two_five(max_value):
    out, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


class _Child:
    __slots__ = ("labels", "value", "counts", "sum", "count", "created")

    def __init__(self, labels, nbuckets):
        self.labels = labels
        self.value = 0.0
        self.counts = [0] * nbuckets
        self.sum = 0.0
        self.count = 0
        self.created = time.time()

    def inc(self, amount=1.0):
        self.value += amount

    def observe(self, value, bounds):
        i = bisect.bisect_left(bounds, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1


class Family:
    def __init__(self, name, doc, kind, buckets=None, base=True, value_fn=None):
        self.name = name
        self.doc = doc
        self.kind = kind
        self.bounds = [float(b) for b in buckets] if buckets else []
        self.base = base
        self.value_fn = value_fn
        self.children = collections.OrderedDict()

    def labels(self, **extra):
        key = tuple(sorted(extra.items()))
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = _Child(extra, len(self.bounds))
        return child

    def inc(self, amount=1.0):
        self.labels().inc(amount)

    def observe(self, value):
        self.labels().observe(value, self.bounds)

    def render(self, out, base):
        def lab(extra, **more):
            merged = dict(base) if self.base else {"engine": base["engine"]}
            merged.update(extra)
            merged.update(more)
            return _labels(merged)

        if self.kind == "gauge":
            out.append("# HELP %s %s" % (self.name, self.doc))
            out.append("# TYPE %s gauge" % self.name)
            values = self.value_fn()
            if not isinstance(values, list):
                values = [({}, values)]
            for extra, value in values:
                out.append("%s%s %s" % (self.name, lab(extra), go_float(value)))
            return
        if self.kind == "counter":
            total = self.name + "_total"
            out.append("# HELP %s %s" % (total, self.doc))
            out.append("# TYPE %s counter" % total)
            for c in self.children.values():
                out.append("%s%s %s" % (total, lab(c.labels), go_float(c.value)))
        else:
            out.append("# HELP %s %s" % (self.name, self.doc))
            out.append("# TYPE %s histogram" % self.name)
            for c in self.children.values():
                cumulative = 0
                for bound, n in zip(self.bounds, c.counts):
                    cumulative += n
                    out.append("%s_bucket%s %s" % (self.name, lab(c.labels, le=go_float(bound)), go_float(cumulative)))
                out.append("%s_bucket%s %s" % (self.name, lab(c.labels, le="+Inf"), go_float(c.count)))
                out.append("%s_count%s %s" % (self.name, lab(c.labels), go_float(c.count)))
                out.append("%s_sum%s %s" % (self.name, lab(c.labels), go_float(c.sum)))
        created = self.name + "_created"
        out.append("# HELP %s %s" % (created, self.doc))
        out.append("# TYPE %s gauge" % created)
        for c in self.children.values():
            out.append("%s%s %s" % (created, lab(c.labels), go_float(c.created)))


class Metrics:
    """vLLM V1's Prometheus families (labels model_name and engine="0")."""

    def __init__(self, model_name, max_model_len, engine, cache_info):
        self.base = {"engine": "0", "model_name": model_name}
        self.engine = engine
        tokens = one_two_five(max_model_len)
        F = Family

        def counter(name, doc):
            return Family(name, doc, "counter")

        def histogram(name, doc, bounds):
            return Family(name, doc, "histogram", bounds)

        def token_counts(name, doc):
            """Tokens per request, in 1-2-5 steps up to the model's length."""
            return histogram(name, doc, tokens)

        def phase_time(name, phase):
            """Seconds a request spent in one phase of its life (vLLM's four phase histograms)."""
            doc = "Histogram of time spent in %s phase for request." % phase
            return histogram("vllm:request_%s_time_seconds" % name, doc, REQUEST_BUCKETS)

        self.running = F(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            "gauge",
            value_fn=lambda: len(engine.running),
        )
        self.waiting = F(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            "gauge",
            value_fn=lambda: len(engine.waiting),
        )
        self.waiting_by_reason = F(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
            "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, "
            "blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
            "gauge",
            value_fn=lambda: [({"reason": "capacity"}, len(engine.waiting)), ({"reason": "deferred"}, 0)],
        )
        self.sleep_state = F(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            "gauge",
            value_fn=lambda: [
                ({"sleep_state": "awake"}, 1),
                ({"sleep_state": "weights_offloaded"}, 0),
                ({"sleep_state": "discard_all"}, 0),
            ],
        )
        self.kv_usage = F(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge", value_fn=engine.kv_usage
        )
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.success = counter("vllm:request_success", "Count of successfully processed requests.")
        for reason in FINISH_REASONS:
            self.success.labels(finished_reason=reason)
        self.req_prompt = token_counts("vllm:request_prompt_tokens", "Number of prefill tokens processed.")
        self.req_generation = token_counts("vllm:request_generation_tokens", "Number of generation tokens processed.")
        self.iteration = histogram(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_BUCKETS
        )
        self.max_gen = token_counts(
            "vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens."
        )
        self.params_n = histogram("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20])
        self.params_max_tokens = token_counts(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter."
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_BUCKETS
        )
        self.queue = phase_time("queue", "WAITING")
        self.inference = phase_time("inference", "RUNNING")
        self.prefill = phase_time("prefill", "PREFILL")
        self.decode = phase_time("decode", "DECODE")
        self.req_preemptions = histogram(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            [0, 1, 2, 5, 10, 20, 50],
        )
        self.cache_info = F(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            "gauge",
            base=False,
            value_fn=lambda: [(cache_info, 1)],
        )
        self.families = [
            self.running,
            self.waiting,
            self.waiting_by_reason,
            self.sleep_state,
            self.kv_usage,
            self.prefix_queries,
            self.prefix_hits,
            self.preemptions,
            self.prompt_tokens,
            self.generation_tokens,
            self.success,
            self.req_prompt,
            self.req_generation,
            self.iteration,
            self.max_gen,
            self.params_n,
            self.params_max_tokens,
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue,
            self.inference,
            self.prefill,
            self.decode,
            self.req_preemptions,
            self.cache_info,
        ]
        for fam in self.families:  # unlabeled series exist (at 0) from the start, like V1
            if fam.kind != "gauge" and fam is not self.success:
                fam.labels()

    def render(self):
        out = []
        for fam in self.families:
            fam.render(out, self.base)
        return "\n".join(out) + "\n"
