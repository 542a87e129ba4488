"""The simulated `guidellm run`: GuideLLM 0.8's command line and output, for the demo.

The demo's nodes have no GuideLLM, so a bench preset with client = "guidellm" (multi-turn-chat)
runs this instead (console/services/runs/clients.py): the argv the console builds for GuideLLM
(console/core/bench/clients/argv.py), its progress log lines on stderr and its
`--output kind=json` report, in the shapes of the real 0.8.1 output kept in
tests/fixtures/clients/guidellm-0.8.1 (the report carries the keys the console's parser and a
reader of GuideLLM's reports use; not every statistic of the real one). Requests are real: each
conversation's turns are streamed chat completions to the (simulated) server, every turn sending
the conversation so far plus a new user message, so the server finds the history in its prefix
cache as vLLM does. Stdlib only, Python 3.8 syntax (it runs on a simulated node's interpreter).
"""

import asyncio
import collections
import json
import math
import random
import sys
import time
import uuid

from .bench_http import BenchHttp, BenchHttpError
from .bench_requests import SseHandler

VERSION = "0.8.1+sim"
_WORDS = ("the", "and", "for", "you", "are", "was", "not", "but", "can", "one", "all", "new", "way", "use", "now")
_PCTS = (("p001", 0.1), ("p01", 1.0), ("p05", 5.0), ("p10", 10.0), ("p25", 25.0), ("p50", 50.0), ("p75", 75.0),
         ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))  # fmt: skip


class Usage(Exception):
    """A bad command line: click's `Error: ...` and exit 2."""


def _kv(text, flag):
    """`kind=x,a=1,b=2` -> {"kind": "x", "a": "1", "b": "2"}."""
    out = collections.OrderedDict()
    for part in text.split(","):
        if "=" not in part:
            raise Usage("Invalid value for '%s': %r is not key=value" % (flag, part))
        key, value = part.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def _int(spec, key, flag, default=None):
    if key not in spec:
        if default is None:
            raise Usage("Invalid value for '%s': %s is required" % (flag, key))
        return default
    try:
        return int(spec[key])
    except ValueError:
        raise Usage("Invalid value for '%s': %s=%r is not an integer" % (flag, key, spec[key])) from None


def parse(argv):
    """The options the console passes (`guidellm run --help` of 0.8.1 names them)."""
    if not argv or argv[0] != "run":
        raise Usage("No such command %r (rocm-console's GuideLLM simulator has run)." % (argv[0] if argv else ""))
    opts = {}
    it = iter(argv[1:])
    for flag in it:
        if flag == "--disable-progress":
            opts["disable_progress"] = True
            continue
        if flag not in ("--backend", "--profile", "--constraint", "--data", "--seed", "--output"):
            raise Usage("No such option: %s" % flag)
        value = next(it, None)
        if value is None:
            raise Usage("Option '%s' requires an argument." % flag)
        opts[flag[2:]] = _kv(value, flag)
    for need in ("backend", "profile", "constraint", "data", "output"):
        if need not in opts:
            raise Usage("Missing option '--%s'." % need)
    backend, profile, data = opts["backend"], opts["profile"], opts["data"]
    if "target" not in backend:
        raise Usage("Invalid value for '--backend': target is required")
    kind = profile.get("kind")
    if kind == "concurrent":
        streams, rate = _int(profile, "streams", "--profile"), None
    elif kind == "poisson":
        try:
            streams, rate = None, float(profile.get("rate", ""))
        except ValueError:
            raise Usage("Invalid value for '--profile': rate is required") from None
    else:
        raise Usage("Invalid value for '--profile': kind %r is not simulated (concurrent, poisson)" % kind)
    if data.get("kind") != "synthetic_text":
        raise Usage("Invalid value for '--data': kind %r is not simulated (synthetic_text)" % data.get("kind"))
    return {
        "target": backend["target"].rstrip("/"),
        "model": backend.get("model"),
        "route": backend.get("request_format", "/v1/chat/completions"),
        "kind": kind,
        "streams": streams,
        "rate": rate,
        "count": _int(opts["constraint"], "count", "--constraint"),
        "prompt_tokens": _int(data, "prompt_tokens", "--data"),
        "output_tokens": _int(data, "output_tokens", "--data"),
        "turns": max(1, _int(data, "turns", "--data", 1)),
        "seed": _int(opts.get("seed") or {}, "value", "--seed", 42),
        "path": opts["output"].get("path", "benchmarks.json"),
    }


def _log(text):
    stamp = time.strftime("%y-%m-%d %H:%M:%S")
    sys.stderr.write("%s|INFO     |%s\n" % (stamp, text))
    sys.stderr.flush()


def _pct(xs, p):
    pos = (len(xs) - 1) * p / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stats(values):
    """GuideLLM's distribution summary of one metric (mean, median, std_dev, percentiles, ...)."""
    xs = sorted(float(v) for v in values)
    if not xs:
        zero = {"mean": 0.0, "median": 0.0, "mode": 0.0, "variance": 0.0, "std_dev": 0.0, "min": 0.0, "max": 0.0}
        zero.update(count=0, total_sum=0.0, percentiles=dict((k, 0.0) for k, _ in _PCTS))
        return zero
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / n
    return {
        "mean": mean,
        "median": _pct(xs, 50.0),
        "mode": xs[0],
        "variance": var,
        "std_dev": math.sqrt(var),
        "min": xs[0],
        "max": xs[-1],
        "count": n,
        "total_sum": sum(xs),
        "percentiles": dict((k, _pct(xs, p)) for k, p in _PCTS),
    }


def _split(requests, key):
    return {"successful": stats([r[key] for r in requests if r[key] is not None])}


class Run(object):
    def __init__(self, cfg):
        self.cfg = cfg
        self.rng = random.Random(cfg["seed"])
        self.http = BenchHttp()
        self.done = []  # finished requests' records, successful and errored
        self.sent = 0
        self.label = "concurrent@%d" % cfg["streams"] if cfg["kind"] == "concurrent" else "poisson@%g" % cfg["rate"]

    def text(self, tokens):
        return " ".join(self.rng.choice(_WORDS) for _ in range(max(1, tokens)))

    async def turn(self, conversation, index, history):
        cfg = self.cfg
        history.append({"role": "user", "content": [{"type": "text", "text": self.text(cfg["prompt_tokens"])}]})
        body = {
            "model": cfg["model"],
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "max_completion_tokens": cfg["output_tokens"],
            "ignore_eos": True,
            "messages": history,
        }
        handler = SseHandler()
        seen = {"first": None, "last": None, "text": [], "usage": None}

        def on_data(chunk):
            for message in handler.add_chunk(chunk):
                payload = message[len("data: ") :] if message.startswith("data: ") else message
                if payload == "[DONE]" or message.startswith(":"):
                    continue
                data = json.loads(payload)
                now = time.time()
                if data.get("usage"):
                    seen["usage"] = data["usage"]
                for choice in data.get("choices") or ():
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        seen["first"] = seen["first"] or now
                        seen["last"] = now
                        seen["text"].append(piece)

        start = time.time()
        error = None
        try:
            status, reason, raw = await self.http.request(
                "POST", cfg["target"] + cfg["route"], {"Content-Type": "application/json"},
                json.dumps(body).encode("utf-8"), on_data,
            )  # fmt: skip
            if status != 200:
                error = "HTTP %d %s: %s" % (status, reason, raw[:200].decode("utf-8", "replace"))
        except BenchHttpError as exc:
            error = exc.message()
        end = time.time()
        history.append({"role": "assistant", "content": "".join(seen["text"])})
        usage = seen["usage"] or {}
        out_tokens = int(usage.get("completion_tokens") or len(seen["text"]))
        record = self.record(conversation, index, len(history) - 2, start, end, seen, usage, out_tokens, error)
        self.done.append(record)
        return error is None

    def record(self, conversation, index, history_len, start, end, seen, usage, out_tokens, error):
        first, last = seen["first"], seen["last"]
        ok = error is None and first is not None
        ttft = (first - start) * 1000.0 if ok else None
        itl = (last - first) * 1000.0 / (out_tokens - 1) if ok and out_tokens > 1 else None
        tpot = (last - start) * 1000.0 / out_tokens if ok and out_tokens else None
        prompt = int(usage.get("prompt_tokens") or 0)
        return {
            "type_": "generative_request_stats",
            "request_id": str(uuid.UUID(int=self.rng.getrandbits(128))),
            "output": "".join(seen["text"]),
            "info": {
                "conversation_id": conversation,
                "history_len": history_len,
                "turn_index": index,
                "status": "completed" if ok else "errored",
                "error": None if ok else (error or "no token received"),
                "started_at": start,
                "completed_at": end,
            },
            "request_start_time": start,
            "request_end_time": end,
            "request_latency": end - start,
            "prompt_tokens": prompt,
            "output_tokens": out_tokens,
            "total_tokens": prompt + out_tokens,
            "time_to_first_token_ms": ttft,
            "time_to_first_output_token_ms": ttft,
            "time_per_output_token_ms": tpot,
            "inter_token_latency_ms": itl,
            "output_tokens_per_second": out_tokens / (end - start) if ok and end > start else None,
        }

    async def conversation(self):
        cfg = self.cfg
        name = str(uuid.UUID(int=self.rng.getrandbits(128)))
        history = []
        for index in range(cfg["turns"]):
            if self.sent >= cfg["count"]:
                return
            self.sent += 1
            if not await self.turn(name, index, history):
                return  # an errored turn ends its conversation

    async def progress(self, started, stop):
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                self.log_update("running", started)

    def log_update(self, state, started):
        ok = sum(1 for r in self.done if r["info"]["status"] == "completed")
        bad = len(self.done) - ok
        elapsed = time.time() - started
        tokens = sum(r["output_tokens"] for r in self.done if r["info"]["status"] == "completed")
        _log(
            "guidellm.benchmark.progress:_log_update:420 - Benchmark 1 (%s): %s | elapsed=%.1fs | successful=%d "
            "errored=%d incomplete=%d | requests/s=%.2f output_tokens/s=%.2f"
            % (self.label, state, elapsed, ok, bad, self.sent - len(self.done), ok / elapsed if elapsed else 0.0,
               tokens / elapsed if elapsed else 0.0)
        )  # fmt: skip

    async def main(self):
        cfg = self.cfg
        conversations = int(math.ceil(cfg["count"] / float(cfg["turns"])))
        _log("guidellm.benchmark.benchmarker:run:116 - Starting benchmark for strategy: %s" % self.label)
        started = time.time()
        self.log_update("started", started)
        stop = asyncio.Event()
        ticker = asyncio.ensure_future(self.progress(started, stop))
        try:
            if cfg["kind"] == "concurrent":
                queue = list(range(conversations))

                async def stream():
                    while queue:
                        queue.pop()
                        await self.conversation()

                await asyncio.gather(*(stream() for _ in range(cfg["streams"])))
            else:
                tasks = []
                for _ in range(conversations):
                    tasks.append(asyncio.ensure_future(self.conversation()))
                    await asyncio.sleep(self.rng.expovariate(cfg["rate"] / float(cfg["turns"])))
                await asyncio.gather(*tasks)
        finally:
            stop.set()
            await ticker
            self.http.close_all()
        ended = time.time()
        self.log_update("completed", started)
        _log("guidellm.benchmark.benchmarker:run:199 - All benchmarks finalized")
        return self.report(started, ended)

    def report(self, started, ended):
        cfg = self.cfg
        good = [r for r in self.done if r["info"]["status"] == "completed"]
        bad = [r for r in self.done if r["info"]["status"] != "completed"]
        duration = ended - started
        strategy = (
            {"type_": "concurrent", "worker_count": cfg["streams"], "max_concurrency": cfg["streams"],
             "streams": cfg["streams"], "rampup_duration": 0.0}
            if cfg["kind"] == "concurrent"
            else {"type_": "poisson", "rate": cfg["rate"]}
        )  # fmt: skip
        turns = []
        for index in range(cfg["turns"]):
            mine = [r for r in good if r["info"]["turn_index"] == index]
            turns.append(
                {
                    "turn_index": index,
                    "request_totals": {"successful": len(mine), "errored": 0, "incomplete": 0, "total": len(mine)},
                    "request_latency": _split(mine, "request_latency"),
                }
            )
        metrics = {
            "request_totals": {"successful": len(good), "errored": len(bad), "incomplete": 0, "total": len(self.done)},
            "requests_per_second": {"successful": dict(stats([len(good) / duration if duration else 0.0]))},
            "request_latency": _split(good, "request_latency"),
            "prompt_token_count": _split(good, "prompt_tokens"),
            "output_token_count": _split(good, "output_tokens"),
            "total_token_count": _split(good, "total_tokens"),
            "time_to_first_token_ms": _split(good, "time_to_first_token_ms"),
            "time_to_first_output_token_ms": _split(good, "time_to_first_output_token_ms"),
            "time_per_output_token_ms": _split(good, "time_per_output_token_ms"),
            "inter_token_latency_ms": _split(good, "inter_token_latency_ms"),
            "output_tokens_per_second": {
                "successful": stats([sum(r["output_tokens"] for r in good) / duration if duration else 0.0])
            },
            "turns": turns,
        }
        backend = {
            "kind": "openai_http",
            "target": cfg["target"],
            "model": cfg["model"],
            "request_format": cfg["route"],
        }
        bench = {
            "type_": "generative_benchmark",
            "config": {
                "strategy": strategy,
                "constraints": {"max_requests": {"type_": "max_requests", "args": {"count": cfg["count"]}}},
                "backend": backend,
            },
            "metrics": metrics,
            "requests": {"successful": good, "errored": bad, "incomplete": [], "total": None},
            "start_time": started,
            "end_time": ended,
            "duration": duration,
        }
        return {
            "metadata": {
                "version": 2,
                "guidellm_version": VERSION,
                "python_version": "%d.%d.%d" % sys.version_info[:3],
            },
            "config": {"metadata": {"labels": {}}, "spec": {"backend": backend}},
            "benchmarks": [bench],
        }


def main(argv):
    try:
        cfg = parse(list(argv))
    except Usage as exc:
        sys.stderr.write("Usage: guidellm run [OPTIONS]\nTry 'guidellm run --help' for help.\n\nError: %s\n" % exc)
        return 2
    sys.stdout.write("\u2714 OpenAIHTTPBackend backend validated with model %s (rocm-console's GuideLLM simulator %s)\n"
                     % (cfg["model"], VERSION))  # fmt: skip
    sys.stdout.flush()
    report = asyncio.run(Run(cfg).main())
    with open(cfg["path"], "w") as f:
        json.dump(report, f)
    sys.stdout.write("\u2714 Benchmarking complete, generated 1 benchmark(s)\n\u2026   json    : %s\n" % cfg["path"])
    return 0
