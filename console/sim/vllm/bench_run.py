"""One `vllm bench serve` run: ready check, traffic, progress, result block and JSON."""

import asyncio
import collections
import json
import os
import random
import signal
import time

from .bench_args import (
    BENCH_OPENAI_COMPATIBLE,
    BENCH_SIMULATED_BACKENDS,
    BENCH_SRC,
    INF,
    bench_namespace,
)
from .bench_datasets import (
    BenchSample,
    bench_prefix_repetition_samples,
    bench_random_samples,
    bench_sharegpt_samples,
    bench_timed_trace_samples,
    trace_arrivals,
)
from .bench_http import BenchHttp, BenchHttpError, join_host_port
from .bench_metrics import (
    calculate_metrics,
    np_median,
    np_percentile,
    parse_goodput,
    result_row,
    stats_ms,
)
from .bench_output import (
    BenchFatal,
    awaiting_benchmark,
    bench_err,
    bench_flush,
    bench_log,
    bench_out,
    fatal_in_main_async,
    keyboard_interrupt_text,
    python_exception_text,
)
from .bench_progress import BenchBar
from .bench_requests import BenchInput, BenchOutput, bench_request
from .failures import tb_frame


class BenchRun(object):
    def __init__(self, args):
        self.args = args
        self.http = None
        self.pbar = None
        self.session_open = False
        self.phase = "setup"
        self.chat = args.backend == "openai-chat"
        self.rand = random.Random(args.seed)

    # -- entry

    def run(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        task = loop.create_task(self.main_async())
        interrupted = []
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:

            def on_sigint():
                interrupted.append(True)
                task.cancel()

            try:
                loop.add_signal_handler(signal.SIGINT, on_sigint)
            except (ValueError, RuntimeError, NotImplementedError):
                pass
        try:
            try:
                return loop.run_until_complete(task)
            except asyncio.CancelledError:
                if not interrupted:
                    raise
                bench_err(keyboard_interrupt_text(self.phase == "main", self.chat))
                if self.pbar is not None:
                    self.pbar.close()
                if self.session_open:
                    bench_err(
                        "Unclosed client session\nclient_session: <aiohttp.client.ClientSession object at "
                        "0x7f%010x>\n" % (id(self) & 0xFFFFFFFFFF)
                    )
                return 130
            except BenchFatal as exc:
                bench_flush()
                bench_err(exc.text())
                return 1
        finally:
            try:
                pending = [t for t in asyncio_all_tasks(loop) if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            except Exception:
                pass
            if self.http is not None:
                self.http.close_all()
            try:
                loop.run_until_complete(asyncio.sleep(0))
            except Exception:
                pass
            loop.close()

    # -- small HTTP helpers

    async def _get_json(self, url, method="GET", payload=None, headers=None):
        hdrs = collections.OrderedDict(headers or {})
        body = b""
        if payload is not None:
            hdrs["Content-Type"] = "application/json"
            body = json.dumps(payload).encode("utf-8")
        status, reason, raw = await self.http.request(method, url, hdrs, body)
        if status >= 400:
            raise ValueError("%d, message=%r, url=%r" % (status, reason, url))
        return json.loads(raw.decode("utf-8"))

    async def fetch_first_model(self, base_url, headers):
        models_url = base_url + "/v1/models"
        where = tb_frame(
            BENCH_SRC,
            166,
            "get_first_model_from_server",
            "async with session.get(models_url, headers=headers) as response:",
        )
        frames = tb_frame(
            BENCH_SRC,
            2081,
            "main_async",
            "model_name, model_id = await get_first_model_from_server(",
            "await get_first_model_from_server(",
        ) + tb_frame(BENCH_SRC, 177, "get_first_model_from_server", "raise RuntimeError(")
        head = (
            "RuntimeError: Failed to fetch models from server at %s. Check that:\n1. The server is running\n"
            "2. The server URL is correct\nError: " % models_url
        )
        try:
            data = await self._get_json(models_url, headers=headers)
        except BenchHttpError as exc:
            raise BenchFatal(frames, head + exc.message(), exc.text(where, where)) from None
        except ValueError as exc:
            raise BenchFatal(
                frames, head + str(exc), python_exception_text(exc, where).replace("builtins.", "")
            ) from None
        if isinstance(data, dict) and data.get("data"):
            first = data["data"][0]
            return first.get("id"), first.get("root", first.get("id"))
        raise BenchFatal(
            tb_frame(
                BENCH_SRC,
                2081,
                "main_async",
                "model_name, model_id = await get_first_model_from_server(",
                "await get_first_model_from_server(",
            )
            + tb_frame(BENCH_SRC, 172, "get_first_model_from_server", "raise ValueError("),
            "ValueError: No models found on the server at %s. Make sure the server is running and "
            "has models loaded." % base_url,
        )

    async def align_prompts(self, base_url, model_id, samples):
        """_align_prompts_to_server_tokenizer(): /tokenize the first prompt, re-align on a mismatch."""
        if not samples or not isinstance(samples[0].prompt, str):
            return samples

        async def tokenize(prompt):
            data = await self._get_json(
                base_url + "/tokenize", "POST", {"model": model_id, "prompt": prompt, "add_special_tokens": False}
            )
            return data["tokens"]

        try:
            first = await tokenize(samples[0].prompt)
        except Exception:
            bench_out("WARNING: /tokenize unavailable, skipping alignment.")
            return samples
        expected = samples[0].prompt_len
        if len(first) == expected:
            return samples
        bench_out("WARNING: tokenizer mismatch (server=%d, expected=%d), re-aligning prompts." % (len(first), expected))
        sem = asyncio.Semaphore(64)

        async def fix(s):
            async with sem:
                tokens = await tokenize(s.prompt)
                if len(tokens) <= s.prompt_len:
                    return s
                data = await self._get_json(
                    base_url + "/detokenize", "POST", {"model": model_id, "tokens": tokens[: s.prompt_len]}
                )
                return BenchSample(data["prompt"], s.prompt_len, s.expected_output_len, s.request_id)

        results = await asyncio.gather(*[fix(s) for s in samples], return_exceptions=True)
        return [r if isinstance(r, BenchSample) else s for s, r in zip(samples, results)]

    async def _metrics_probe(self, base_url):
        """The real client GETs /metrics twice (spec-decode and diffusion stats) before and after."""
        for _ in range(2):
            try:
                await self.http.request("GET", base_url + "/metrics")
            except Exception:
                pass

    async def _profile(self, base_url, what, headers):
        try:
            status, _, _ = await self.http.request("POST", base_url + "/" + what, headers or {})
            return status == 200
        except Exception:
            return False

    # -- main_async()

    async def main_async(self):
        a = self.args
        bench_out(bench_namespace(a))
        if a.max_concurrency is not None and a.max_concurrency <= 0:
            raise fatal_in_main_async(
                2010,
                'raise ValueError("--max-concurrency must be greater than 0")',
                "ValueError: --max-concurrency must be greater than 0",
            )
        if a.ramp_up_strategy is not None:
            problem = None
            if a.request_rate != INF:
                problem = (
                    2031,
                    "When using ramp-up, do not specify --request-rate. The request rate will be "
                    "controlled by ramp-up parameters. Please remove the --request-rate argument.",
                )
            elif a.ramp_up_start_rps is None or a.ramp_up_end_rps is None:
                problem = (
                    2037,
                    "When using --ramp-up-strategy, both --ramp-up-start-rps and --ramp-up-end-rps must be specified",
                )
            elif a.ramp_up_start_rps < 0 or a.ramp_up_end_rps < 0:
                problem = (2042, "Ramp-up start and end RPS must be non-negative")
            elif a.ramp_up_start_rps > a.ramp_up_end_rps:
                problem = (2044, "Ramp-up start RPS must be less than end RPS")
            elif a.ramp_up_strategy == "exponential" and a.ramp_up_start_rps == 0:
                problem = (2046, "For exponential ramp-up, the start RPS cannot be 0.")
            if problem:
                raise fatal_in_main_async(problem[0], "raise ValueError(", "ValueError: " + problem[1])
        label = a.label
        if a.base_url is not None:
            api_url = a.base_url + a.endpoint
            base_url = a.base_url
        else:
            base_url = "http://" + join_host_port(a.host, a.port)
            api_url = base_url + a.endpoint
        headers = None
        if a.header:
            headers = collections.OrderedDict()
            for item in a.header:
                if "=" not in item:
                    raise fatal_in_main_async(
                        2067,
                        'raise ValueError("Invalid header format. Please use KEY=VALUE format.")',
                        "ValueError: Invalid header format. Please use KEY=VALUE format.",
                    )
                k, v = item.split("=", 1)
                headers[k.strip()] = v.strip()
        ssl_context = None
        if a.insecure or "https://" in base_url:
            import ssl

            ssl_context = ssl._create_unverified_context() if a.insecure else ssl.create_default_context()
        self.http = BenchHttp(ssl_context)

        if a.model is None:
            bench_out("Model not specified, fetching first model from server...")
            model_name, model_id = await self.fetch_first_model(base_url, headers)
            bench_out("First model name: %s, first model id: %s" % (model_name, model_id))
        else:
            model_name, model_id = a.served_model_name, a.model
        has_tokenizer = not a.skip_tokenizer_init
        tokenizer_id = (a.tokenizer if a.tokenizer is not None else model_id) if has_tokenizer else None

        if a.dataset_name in ("random", "random-mm", "random-rerank", "prefix_repetition") and a.dataset_path:
            raise fatal_in_main_async(
                2114,
                "raise ValueError(",
                "ValueError: Cannot use '%s' dataset with --dataset-path. Please specify the appropriate "
                "--dataset-name (e.g., 'sharegpt', 'custom', 'hf') for your dataset file: %s"
                % (a.dataset_name, a.dataset_path),
            )
        if a.input_len is not None:
            a.random_input_len = a.input_len
        if a.output_len is not None:
            a.random_output_len = a.sharegpt_output_len = a.output_len
        if a.dataset_name in ("random", "random-mm") and a.backend in BENCH_OPENAI_COMPATIBLE:
            a.ignore_eos = True
        if a.dataset_name == "timed_trace":  # token-id prompts at the trace's own times
            if a.backend not in ("vllm", "openai"):
                raise fatal_in_main_async(
                    2143,
                    "raise ValueError(",
                    "ValueError: timed_trace dataset passes pre-tokenized prompts (list[int]) and requires a "
                    "completions backend ('vllm' or 'openai').",
                )
            a.ignore_eos = True
            if a.self_timed is None:
                a.self_timed = True
        elif a.self_timed is not None:
            raise fatal_in_main_async(
                2157,
                "raise ValueError(",
                "ValueError: --self-timed/--no-self-timed is only supported with --dataset-name=timed_trace",
            )
        if a.dataset_name == "random":
            samples = bench_random_samples(a)
        elif a.dataset_name == "sharegpt":
            samples = bench_sharegpt_samples(a)
        elif a.dataset_name == "prefix_repetition":
            samples = bench_prefix_repetition_samples(a)
        elif a.dataset_name == "timed_trace":
            samples = bench_timed_trace_samples(a)
        else:
            raise fatal_in_main_async(
                2165,
                "input_requests = get_samples(args, tokenizer)",
                "NotImplementedError: rocm-console's vLLM simulator only simulates the "
                "'random', 'sharegpt', 'prefix_repetition' and 'timed_trace' datasets, not %r" % a.dataset_name,
                "get_samples(args, tokenizer)",
            )
        if a.dataset_name in ("random", "prefix_repetition"):
            samples = await self.align_prompts(base_url, model_id, samples)
        goodput = {}
        if a.goodput:
            try:
                goodput = parse_goodput(a.goodput)
            except ValueError:
                raise fatal_in_main_async(
                    2172,
                    "goodput_config_dict = check_goodput_args(args)",
                    "argparse.ArgumentTypeError: Invalid format found for service level objectives. Specify "
                    'service level objectives for goodput as "KEY:VALUE" pairs, where the key is a metric name, '
                    "and the value is a number in milliseconds.",
                    "check_goodput_args(args)",
                ) from None
            for name, value in goodput.items():
                if name not in ("ttft", "tpot", "e2el"):
                    raise fatal_in_main_async(
                        2172,
                        "goodput_config_dict = check_goodput_args(args)",
                        "ValueError: Invalid metric name found, %s: %s. The service level objective name should "
                        "be one of ['ttft', 'tpot', 'e2el']. " % (name, value),
                        "check_goodput_args(args)",
                    )
                if value < 0:
                    raise fatal_in_main_async(
                        2172,
                        "goodput_config_dict = check_goodput_args(args)",
                        "ValueError: Invalid value found, %s: %s. The service level objective value should be "
                        "non-negative." % (name, value),
                        "check_goodput_args(args)",
                    )
        if a.backend not in BENCH_SIMULATED_BACKENDS:
            raise fatal_in_main_async(
                2220,
                "benchmark_result = await benchmark(",
                "NotImplementedError: rocm-console's vLLM simulator only simulates the "
                "vllm, openai and openai-chat backends, not %r" % a.backend,
                "await benchmark(",
            )
        sampling = collections.OrderedDict(
            (k, v)
            for k, v in (
                ("top_p", a.top_p),
                ("top_k", a.top_k),
                ("min_p", a.min_p),
                ("temperature", a.temperature),
                ("frequency_penalty", a.frequency_penalty),
                ("presence_penalty", a.presence_penalty),
                ("repetition_penalty", a.repetition_penalty),
            )
            if v is not None
        )
        if "temperature" not in sampling:
            bench_out(
                "WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. "
                "The default will be determined on the server side and can be model/API specific. For the "
                "old behavior, include --temperature=0."
            )
        extra_body = dict(sampling)
        extra_body.update(a.extra_body or {})
        percentile_metrics = a.percentile_metrics or "ttft,tpot,itl"
        result = await self.benchmark(
            api_url=api_url,
            base_url=base_url,
            model_id=model_id,
            model_name=model_name,
            has_tokenizer=has_tokenizer,
            samples=samples,
            headers=headers,
            extra_body=extra_body,
            selected_metrics=percentile_metrics.split(","),
            percentiles=[float(p) for p in a.metric_percentiles.split(",")],
            goodput=goodput,
        )

        result_json = collections.OrderedDict()
        current_dt = time.strftime("%Y%m%d-%H%M%S")
        result_json["date"] = current_dt
        result_json["endpoint_type"] = a.backend
        result_json["backend"] = a.backend
        result_json["label"] = label
        result_json["model_id"] = model_id
        result_json["tokenizer_id"] = tokenizer_id
        result_json["num_prompts"] = a.num_prompts
        for item in a.metadata or []:
            if "=" not in item:
                raise fatal_in_main_async(
                    2273, "raise ValueError(", "ValueError: Invalid metadata format. Please use KEY=VALUE format."
                )
            k, v = item.split("=", 1)
            result_json[k.strip()] = v.strip()
        result_json["request_rate"] = a.request_rate if a.request_rate < INF else "inf"
        result_json["burstiness"] = a.burstiness
        result_json["max_concurrency"] = a.max_concurrency
        if a.ramp_up_strategy is not None:
            result_json["ramp_up_strategy"] = a.ramp_up_strategy
            result_json["ramp_up_start_rps"] = a.ramp_up_start_rps
            result_json["ramp_up_end_rps"] = a.ramp_up_end_rps
        result_json.update(result)
        file_name = self.result_filename(model_id, label, current_dt)
        if not a.save_detailed:
            for field in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
                result_json.pop(field, None)
        if (a.save_result or a.append_result) and file_name:
            with open(file_name, "a+" if a.append_result else "w", encoding="utf-8") as f:
                if a.append_result and f.tell() != 0:
                    f.write("\n")
                json.dump(result_json, f)
        return 0

    def result_filename(self, model_id, label, current_dt):
        a = self.args
        if not (a.plot_timeline or a.save_result or a.append_result):
            return None
        base_model_id = model_id.split("/")[-1]
        conc = "-concurrency%s" % a.max_concurrency if a.max_concurrency is not None else ""
        label = label or a.backend
        if a.ramp_up_strategy is not None:
            name = "%s-ramp-up-%s-%sqps-%sqps%s-%s-%s.json" % (
                label,
                a.ramp_up_strategy,
                a.ramp_up_start_rps,
                a.ramp_up_end_rps,
                conc,
                base_model_id,
                current_dt,
            )
        else:
            name = "%s-%sqps%s-%s-%s.json" % (label, a.request_rate, conc, base_model_id, current_dt)
        if a.result_filename:
            name = a.result_filename
        if a.result_dir:
            os.makedirs(a.result_dir, exist_ok=True)
            name = os.path.join(a.result_dir, name)
        return name

    # -- arrivals

    def arrival_plan(self, n):
        """get_request(): (cumulative delay, rate) per request; Poisson/gamma gaps, seeded."""
        a = self.args
        rates, delays = [], []
        for i in range(n):
            rate = a.request_rate
            if a.ramp_up_strategy and a.ramp_up_start_rps is not None and a.ramp_up_end_rps is not None:
                progress = i / float(max(n - 1, 1))
                if a.ramp_up_strategy == "linear":
                    rate = a.ramp_up_start_rps + (a.ramp_up_end_rps - a.ramp_up_start_rps) * progress
                else:
                    rate = a.ramp_up_start_rps * (float(a.ramp_up_end_rps) / a.ramp_up_start_rps) ** progress
            if not rate > 0:
                raise BenchFatal(
                    tb_frame(BENCH_SRC, 456, "get_request", "assert current_request_rate > 0.0, ("),
                    "AssertionError: Obtained non-positive request rate %s." % rate,
                )
            rates.append(rate)
            if rate == INF:
                delays.append(0.0)
            elif a.burstiness == INF:
                delays.append(1.0 / rate)
            else:
                delays.append(self.rand.gammavariate(a.burstiness, 1.0 / (rate * a.burstiness)))
        for i in range(1, len(delays)):
            delays[i] += delays[i - 1]
        if a.ramp_up_strategy is None and delays and delays[-1] != 0:
            factor = (n / a.request_rate) / delays[-1]
            delays = [d * factor for d in delays]
        return delays, rates

    # -- benchmark()

    async def wait_for_endpoint(self, test_input, timeout_seconds, retry_interval=5):
        bench_out("Waiting for endpoint to become up in %d seconds" % timeout_seconds)
        deadline = time.perf_counter() + timeout_seconds
        output = BenchOutput()
        bar = BenchBar(timeout_seconds, bar_format="{desc} |{bar}| {elapsed} elapsed, {remaining} remaining", unit="s")
        while True:
            remaining = deadline - time.perf_counter()
            elapsed = timeout_seconds - remaining
            bar.update(min(elapsed - bar.n, timeout_seconds - bar.n))
            bar.refresh()
            if remaining <= 0:
                bar.close()
                break
            output = await bench_request(test_input, self.http)
            if output.success:
                bar.close()
                return output
            last = str(output.error).rstrip().rsplit("\n", 1)[-1]
            bench_log("WARNING", "ready_checker.py:71", "Endpoint is not ready. Error='%s'" % last)
            sleep = min(retry_interval, remaining)
            if sleep > 0:
                await asyncio.sleep(sleep)
        return output

    async def benchmark(
        self,
        api_url,
        base_url,
        model_id,
        model_name,
        has_tokenizer,
        samples,
        headers,
        extra_body,
        selected_metrics,
        percentiles,
        goodput,
    ):
        a = self.args
        max_concurrency = a.max_concurrency
        request_rate = a.request_rate
        self.session_open = True
        bench_out("Starting initial single prompt test run...")
        if not samples:
            raise BenchFatal(
                awaiting_benchmark() + tb_frame(BENCH_SRC, 839, "benchmark", "input_requests[0].prompt,"),
                "IndexError: list index out of range",
            )
        first = samples[0]
        test_input = BenchInput(
            first.prompt,
            api_url,
            first.prompt_len,
            first.expected_output_len,
            model_id,
            model_name,
            a.logprobs,
            headers,
            extra_body or None,
            a.ignore_eos,
            chat=self.chat,
        )
        if a.ready_check_timeout_sec > 0:
            self.phase = "ready"
            test_output = await self.wait_for_endpoint(test_input, a.ready_check_timeout_sec)
            if not test_output.success:
                raise BenchFatal(
                    awaiting_benchmark() + tb_frame(BENCH_SRC, 884, "benchmark", "raise ValueError("),
                    "ValueError: Initial test run failed - Please make sure benchmark arguments are "
                    "correctly specified. Error: %s" % test_output.error,
                )
            bench_out("Initial test run completed.")
        else:
            bench_out("Skipping endpoint ready check.")
        sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None

        if a.num_warmups > 0:
            self.phase = "warmup"
            bench_out("Warming up with %d requests..." % a.num_warmups)
            warm_bar = None if a.disable_tqdm else BenchBar(a.num_warmups)
            self.pbar = warm_bar

            async def warm():
                if sem is None:
                    return await bench_request(test_input, self.http, warm_bar)
                async with sem:
                    return await bench_request(test_input, self.http, warm_bar)

            await asyncio.gather(*[warm() for _ in range(a.num_warmups)])
            if warm_bar is not None:
                warm_bar.close()
            self.pbar = None
            bench_out("Warmup run completed.")

        bench_out("Starting main benchmark run...")
        lora_iter = None
        if a.lora_modules:
            mods = list(a.lora_modules)
            if a.lora_assignment == "round-robin":
                lora_iter = iter([mods[i % len(mods)] for i in range(len(samples))])
            else:
                lora_iter = iter([self.rand.choice(mods) for _ in range(len(samples))])
        if a.profile:
            bench_out("Starting profiler...")
            if await self._profile(base_url, "start_profile", headers):
                bench_out("Profiler started")
        distribution = "Poisson process" if a.burstiness == 1.0 else "Gamma distribution"
        if a.self_timed:
            bench_out("Self timing is set, using the timestamps from the trace file.")
        elif a.ramp_up_strategy is not None:
            bench_out("Traffic ramp-up strategy: %s." % a.ramp_up_strategy)
            bench_out(
                "Will increase RPS from %s to %s RPS over the duration of the benchmark."
                % (a.ramp_up_start_rps, a.ramp_up_end_rps)
            )
        else:
            bench_out("Traffic request rate: %s" % request_rate)
        if not a.self_timed:
            bench_out("Burstiness factor: %s (%s)" % (a.burstiness, distribution))
            bench_out("Maximum request concurrency: %s" % max_concurrency)
        await self._metrics_probe(base_url)
        if not a.burstiness > 0:
            raise BenchFatal(
                awaiting_benchmark() + tb_frame(BENCH_SRC, 440, "get_request", "assert burstiness > 0, ("),
                "AssertionError: A positive burstiness factor is expected, but given %s." % a.burstiness,
            )
        delays, rates = trace_arrivals(samples) if a.self_timed else self.arrival_plan(len(samples))
        self.phase = "main"
        pbar = None if a.disable_tqdm else BenchBar(len(samples))
        self.pbar = pbar

        async def limited(inp, arrival):
            if sem is None:
                out = await bench_request(inp, self.http, pbar)
            else:
                async with sem:
                    out = await bench_request(inp, self.http, pbar)
            out.client_queue_time = out.start_time - arrival
            return out

        probe_outputs = []
        probe_stop = asyncio.Event()
        probe_task = None
        if a.probe_request_rate > 0:
            bench_out("Probe request rate: %s req/s" % a.probe_request_rate)
            probe_input = test_input.replace(prompt="Hi", prompt_len=1, output_len=1)

            async def probe_loop():
                while not probe_stop.is_set():
                    probe_outputs.append(await bench_request(probe_input, self.http))
                    await asyncio.sleep(1.0 / a.probe_request_rate)

            probe_task = asyncio.ensure_future(probe_loop())

        start = time.perf_counter()
        tasks = []
        start_ts = time.time()
        for i, s in enumerate(samples):
            if delays[i] > 0:
                wait = start_ts + delays[i] - time.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            req_model_id, req_model_name = model_id, model_name
            if lora_iter is not None:
                req_model_id = req_model_name = next(lora_iter)
            inp = BenchInput(
                s.prompt,
                api_url,
                s.prompt_len,
                s.expected_output_len or 0,
                req_model_id,
                req_model_name,
                a.logprobs,
                headers,
                extra_body or None,
                a.ignore_eos,
                s.request_id,
                chat=self.chat,
            )
            tasks.append(asyncio.ensure_future(limited(inp, time.perf_counter())))
        outputs = await asyncio.gather(*tasks)
        if probe_task is not None:
            probe_stop.set()
            await probe_task
        if pbar is not None:
            pbar.close()
        self.pbar = None
        self.phase = "report"
        duration = time.perf_counter() - start
        await self._metrics_probe(base_url)

        m, actual_output_lens = calculate_metrics(outputs, duration, has_tokenizer, percentiles, goodput)
        bench_out("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
        result_row("Successful requests:", m["completed"])
        result_row("Failed requests:", m["failed"])
        if max_concurrency is not None:
            result_row("Maximum request concurrency:", max_concurrency)
        if request_rate != INF:
            result_row("Request rate configured (RPS):", request_rate, "{:<10.2f}")
        result_row("Benchmark duration (s):", duration, "{:<10.2f}")
        result_row("Total input tokens:", m["total_input"])
        if has_tokenizer:
            result_row("Total generated tokens:", m["total_output"])
        result_row("Request throughput (req/s):", m["request_throughput"], "{:<10.2f}")
        if goodput:
            result_row("Request goodput (req/s):", m["request_goodput"], "{:<10.2f}")
        if has_tokenizer:
            result_row("Output token throughput (tok/s):", m["output_throughput"], "{:<10.2f}")
            result_row("Peak output token throughput (tok/s):", m["max_output_tokens_per_s"], "{:<10.2f}")
        result_row("Peak concurrent requests:", m["max_concurrent_requests"], "{:<10.2f}")
        if has_tokenizer:
            result_row("Total token throughput (tok/s):", m["total_token_throughput"], "{:<10.2f}")

        probe_stats = None
        if probe_task is not None:
            lats = [o.latency for o in probe_outputs if o.success]
            if lats:
                probe_stats = collections.OrderedDict(
                    [
                        ("probe_completed", len(lats)),
                        ("probe_failed", len(probe_outputs) - len(lats)),
                        ("probe_median_e2el_ms", np_median(lats) * 1000),
                        ("probe_p99_e2el_ms", np_percentile(lats, 99) * 1000),
                        ("probe_max_e2el_ms", max(lats) * 1000),
                    ]
                )
                bench_out("{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-"))
                result_row("Probe requests completed:", probe_stats["probe_completed"])
                result_row("Probe requests failed:", probe_stats["probe_failed"])
                result_row("Median probe E2EL (ms):", probe_stats["probe_median_e2el_ms"], "{:<10.2f}")
                result_row("P99 probe E2EL (ms):", probe_stats["probe_p99_e2el_ms"], "{:<10.2f}")
                result_row("Max probe E2EL (ms):", probe_stats["probe_max_e2el_ms"], "{:<10.2f}")

        result = collections.OrderedDict(
            [
                ("duration", duration),
                ("completed", m["completed"]),
                ("failed", m["failed"]),
                ("total_input_tokens", m["total_input"]),
                ("total_output_tokens", m["total_output"]),
                ("request_throughput", m["request_throughput"]),
                ("request_goodput", m["request_goodput"] if goodput else None),
                ("output_throughput", m["output_throughput"]),
                ("total_token_throughput", m["total_token_throughput"]),
                ("input_lens", [o.prompt_len for o in outputs]),
                ("output_lens", actual_output_lens),
                ("ttfts", [o.ttft for o in outputs]),
                ("itls", [o.itl for o in outputs]),
                ("latencies", [o.latency for o in outputs]),
                ("start_times", [o.start_time for o in outputs]),
                ("queue_times", [o.client_queue_time for o in outputs]),
                ("generated_texts", [o.generated_text for o in outputs]),
                ("errors", [o.error for o in outputs]),
                ("max_output_tokens_per_s", m["max_output_tokens_per_s"]),
                ("max_concurrent_requests", m["max_concurrent_requests"]),
                ("rtfx", m["rtfx"]),
            ]
        )
        queue_times = e2els_queue = None
        if max_concurrency is not None:
            queue_times = [o.client_queue_time for o in outputs if o.success]
            if request_rate != INF:
                e2els_queue = [o.latency + o.client_queue_time for o in outputs if o.success]
        if probe_stats is not None:
            result.update(probe_stats)

        def one_metric(attr, name, header, values=None):
            if attr not in selected_metrics:
                return
            if values is None:
                mean, median, std = m["mean_%s_ms" % attr], m["median_%s_ms" % attr], m["std_%s_ms" % attr]
                pcts = m["percentiles_%s_ms" % attr]
            else:
                mean, median, std, pcts = stats_ms(values, percentiles)
            bench_out("{s:{c}^{n}}".format(s=header, n=50, c="-"))
            result_row("Mean %s (ms):" % name, mean, "{:<10.2f}")
            result_row("Median %s (ms):" % name, median, "{:<10.2f}")
            result["mean_%s_ms" % attr] = mean
            result["median_%s_ms" % attr] = median
            result["std_%s_ms" % attr] = std
            for p, value in pcts:
                word = str(int(p)) if int(p) == p else str(p)
                result_row("P%s %s (ms):" % (word, name), value, "{:<10.2f}")
                result["p%s_%s_ms" % (word, attr)] = value

        if has_tokenizer:
            one_metric("ttft", "TTFT", "Time to First Token")
            one_metric("tpot", "TPOT", "Time per Output Token (excl. 1st token)")
            one_metric("itl", "ITL", "Inter-token Latency")
        one_metric("e2el", "E2EL", "End-to-end Latency")
        if queue_times is not None:
            one_metric("client_queue_time", "Client Queue Time", "Client-side Queueing", queue_times)
        if e2els_queue is not None:
            one_metric(
                "e2el_including_client_queue",
                "E2EL incl. Client Queue",
                "Queue-inclusive End-to-end Latency",
                e2els_queue,
            )
        bench_out("=" * 50)
        if a.profile:
            bench_out("Stopping profiler...")
            if await self._profile(base_url, "stop_profile", headers):
                bench_out("Profiler stopped")
        self.session_open = False
        return result


def asyncio_all_tasks(loop):
    try:
        return asyncio.all_tasks(loop)
    except AttributeError:  # pragma: no cover - Python < 3.7
        return asyncio.Task.all_tasks(loop)
