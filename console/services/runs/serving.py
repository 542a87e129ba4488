"""Serving benchmark runs: the client runs detached on the node, the console follows it.

The client (`vllm bench serve` or the legacy benchmark_serving.py) is started
by the node's supervisor (group "runs") next to the server, with
--save-result into the run's folder: a dropped SSH link loses nothing, the
console re-attaches at the byte offset it had and collects the result. While
it runs, the instance's /metrics is polled through an SSH forward. The run's life
(start, log, collect, cancel) is the run API's (run.py); this kind builds the
client's argv and reads vLLM's output and result JSON.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import secrets
import shlex
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from console.core.bench import client_check as cc
from console.core.bench.argv import apply_bench_overrides, build_bench_argv
from console.core.bench.clients import OUTSIDE, as_vllm_text, client_of_argv, progress_of
from console.core.bench.context_fit import context_refusal
from console.core.bench.goodput import goodput_json, goodput_of, slo_of
from console.core.bench.output import BenchError, BenchProgress, BenchResultBlock, BenchStreamParser, SetupLine
from console.core.bench.prefix_cache import (
    ColdStart,
    PrefixCacheWindow,
    cold_start_plan,
    is_cold,
    prefix_cache_json,
    prefix_cache_window,
)
from console.core.bench.result import BenchResult, load_result_file
from console.core.bench.run_telemetry import RunTelemetry
from console.core.bench.spec_decode import SpecDecodeWindow, spec_decode_window, with_spec_decode
from console.core.bench.trace import load_trace_jsonl
from console.core.model import BenchPreset, NodeSpec
from console.core.node_json import loads_document
from console.core.profiles import PROFILES_DIR
from console.core.results.build import preset_changes
from console.core.serve.argv import api_key_from, redact
from console.services.agent_bundle import AgentCommand
from console.services.instances import InstanceView
from console.services.live_metrics import LiveSample, poll_metrics, reset_prefix_cache, scrape_once, scrape_samples
from console.services.runs import clients as outside
from console.services.runs import run as run_api
from console.services.runs import telemetry as run_telemetry
from console.services.transports import TransportPool
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.services.fleet import FleetTelemetry

MAX_LIVE = 3600  # live samples kept per run (an hour at 1 Hz)
MAX_LOG_LINES = 2000  # client log lines kept for the known-pitfall check (the last ones)


class BenchRunError(Exception):
    """A run could not start or could not be followed: one line."""


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class BenchStarted:
    run: str
    node: str
    argv: tuple[str, ...]  # redacted
    max_concurrency: int | None


@dataclass(frozen=True, slots=True)
class BenchProgressed:
    run: str
    progress: BenchProgress


@dataclass(frozen=True, slots=True)
class BenchSetupSeen:
    run: str
    line: SetupLine


@dataclass(frozen=True, slots=True)
class LiveMetricsSampled:
    run: str
    sample: LiveSample
    throttled: bool | None = None  # any of the run's GPUs throttled in the latest telemetry frame


@dataclass(frozen=True, kw_only=True)
class RunOutcome(run_api.Outcome):
    """result_json is the client's --save-result file, as written."""

    result: BenchResult | None  # vLLM's own JSON, normalised
    block: BenchResultBlock | None  # the printed block (for cross-checks)
    errors: tuple[BenchError, ...]
    live: tuple[LiveSample, ...] = field(default=(), repr=False)
    # Issue P: the run's GPUs over the run (None: no sample arrived; telemetry_note says why),
    # the client's self-check against the server's /metrics, and known client pitfalls seen.
    telemetry: RunTelemetry | None = field(default=None, repr=False)
    telemetry_note: str | None = None
    client_check: cc.ClientCheck | None = field(default=None, repr=False)
    pitfalls: tuple[cc.Pitfall, ...] = ()
    # The preset fields an override changed (build.preset_changes): the stored run's title names them.
    overrides: Mapping = field(default_factory=dict)
    # Issue B2: the prefix-cache counters over the run, and what run() made of them and of the SLO.
    prefix_window: PrefixCacheWindow | None = field(default=None, repr=False)
    prefix_cache: Mapping | None = None
    goodput: Mapping | None = None

    @property
    def client_bound(self) -> bool | None:
        return self.client_check.client_bound if self.client_check is not None else None

    @property
    def ok(self) -> bool:
        """Finished and every request completed (vLLM exits 0 even when requests failed)."""
        r = self.result
        return (
            self.exit_code == 0
            and r is not None
            and (r.completed or 0) > 0
            and not (r.failed or 0)
            and not self.cancelled
        )

    def failure(self) -> str:
        r = self.result
        failed = (r.failed or 0) if r is not None else 0
        if r is not None and failed > 0:
            first = next((e.message for e in self.errors if e.kind == "request_error"), None)
            return f"{int(failed)} of {int((r.completed or 0) + failed)} requests failed" + (
                f": {first}" if first else ""
            )
        if r is not None and not r.completed:
            return "no request completed" + (f": {self.errors[0].message}" if self.errors else "")
        if self.errors:
            return self.errors[0].message
        return f"the client {super().failure()}" if self.exit_code else super().failure()


# A log line and the end are the run API's events, as for every kind.
BenchLogLine = run_api.RunLogLine
BenchFinished = run_api.RunFinished
BenchEvent = (
    BenchStarted
    | BenchProgressed
    | BenchSetupSeen
    | LiveMetricsSampled
    | run_api.RunLogLine
    | run_api.RunFinished[RunOutcome]
)


def live_summary(samples: tuple[LiveSample, ...]) -> dict:
    """What is stored with a result: peaks and medians of the live series."""

    def values(attr: str) -> list[float]:
        return [v for v in (getattr(s, attr) for s in samples) if v is not None]

    def med(xs: list[float]) -> float | None:
        if not xs:
            return None
        xs = sorted(xs)
        return xs[len(xs) // 2]

    return {
        "samples": len(samples),
        "peak_output_tok_s": max(values("output_tok_s"), default=None),
        "median_output_tok_s": med(values("output_tok_s")),
        "peak_running": max(values("running"), default=None),
        "peak_waiting": max(values("waiting"), default=None),
        "peak_kv_cache_pct": max(values("kv_cache_pct"), default=None),
        "median_ttft_p50_ms": med(values("ttft_p50")),
        "median_itl_p50_ms": med(values("itl_p50")),
        "itl_metric": next((s.itl_metric for s in reversed(samples) if s.itl_metric), None),
    }


def run_name(preset: str, concurrency: int | None, clock: Callable[[], float] = time.time) -> str:
    stamp = run_api.run_stamp(clock)
    base = run_api.name_part(preset, 36, "bench")
    return f"{base}-c{concurrency}-{stamp}" if concurrency else f"{base}-{stamp}"


def client_target(instance: InstanceView) -> tuple[str | None, str | None]:
    """(model, tokenizer) a client sends to an instance: its first served name, and then the
    model's own name as the tokenizer when that differs."""
    model = instance.served_models[0] if instance.served_models else instance.model
    tokenizer = instance.model if instance.served_models and instance.model != model else None
    return model, tokenizer


class ServingReader:
    """The serving kind's reader: vLLM's printed progress and result block, then result.json."""

    def __init__(self, run: str, client: str | None = None, total: int | None = None) -> None:
        self.run = run
        self.client = client  # issue B2: "guidellm" / "aiperf" (console/core/bench/clients); None: vLLM's
        self.total = total  # the requests an outside client was asked for, where it does not print it
        self.parser = BenchStreamParser()
        self.live: list[LiveSample] = []  # filled by the live metrics poller while the log is read
        self.log: collections.deque[str] = collections.deque(maxlen=MAX_LOG_LINES)
        self.recorder: run_telemetry.RunTelemetryRecorder | None = None
        self.server_before: tuple[float, str] | None = None  # (time, /metrics text) just before the run
        self.server_after: tuple[float, str] | None = None  # ... and just after it

    def _events(self, parsed) -> list[BenchEvent]:
        out: list[BenchEvent] = []
        for event in parsed:
            if isinstance(event, BenchProgress):
                out.append(BenchProgressed(self.run, event))
            elif isinstance(event, SetupLine):
                out.append(BenchSetupSeen(self.run, event))
        return out

    def line(self, text: str) -> list[BenchEvent]:
        self.log.append(text)
        if self.client is not None:
            progress = progress_of(self.client, text, self.total)
            return [BenchProgressed(self.run, progress)] if progress is not None else []
        return self._events(self.parser.feed(text + "\n"))

    def end(self) -> list[BenchEvent]:
        return self._events(self.parser.close())

    def outcome(self, collected: run_api.Collected) -> RunOutcome:
        if self.client is not None:  # an outside client's result file, as vLLM's client writes it
            collected = dataclasses.replace(collected, result_text=as_vllm_text(collected.result_text))
        result_json, result = None, None
        if collected.result_text is not None:
            try:
                result_json = loads_document(collected.result_text)
                result = load_result_file(collected.result_text)[-1]
                # issue B2: speculative decoding's acceptance from the server's counters over the run
                filled = with_spec_decode(result_json, spec_window_of(self.server_before, self.server_after))
                if filled is not result_json:
                    result_json, result = filled, load_result_file(json.dumps(filled))[-1]
            except (ValueError, IndexError):
                result_json, result = None, None
        check = self.client_check(result)
        prefix = prefix_window_of(self.server_before, self.server_after)
        recorder = self.recorder
        telemetry = recorder.record() if recorder is not None else None
        note = None
        if recorder is not None and (telemetry is None or recorder.error):
            note = recorder.error or "no telemetry sample of the run's GPUs arrived"
        return RunOutcome(
            run=collected.name,
            node=collected.node,
            exit_code=collected.exit_code,
            result=result,
            result_json=result_json,
            block=self.parser.blocks[-1] if self.parser.blocks else None,
            errors=tuple(self.parser.errors),
            live=tuple(self.live),
            argv=collected.argv,
            cancelled=collected.cancelled,
            telemetry=telemetry,
            telemetry_note=note,
            client_check=check,
            pitfalls=cc.recognise_pitfalls("\n".join(self.log), result, check),
            prefix_window=prefix,
        )

    def client_check(self, result: BenchResult | None) -> cc.ClientCheck | None:
        """Both sides compared (None without a result or the scrape after the run)."""
        return client_check_of(result, self.server_before, self.server_after)


def client_check_of(
    result: BenchResult | None, before: tuple[float, str] | None, after: tuple[float, str] | None
) -> cc.ClientCheck | None:
    """The client check of a run from the server's /metrics texts just before and just after it
    (``before`` None: counted from the server's start, which a count mismatch then shows)."""
    if result is None or after is None:
        return None
    try:
        window = cc.server_window(
            scrape_samples(before[1]) if before is not None else None,
            scrape_samples(after[1]),
            seconds=after[0] - before[0] if before is not None else None,
        )
    except ValueError:  # a scrape that is not Prometheus text: nothing to compare with
        return None
    return cc.check(result, window)


def spec_window_of(before: tuple[float, str] | None, after: tuple[float, str] | None) -> SpecDecodeWindow | None:
    """Speculative decoding's counters' deltas between the scrapes bracketing a run (None: none)."""
    if after is None:
        return None
    try:
        return spec_decode_window(scrape_samples(before[1]) if before is not None else None, scrape_samples(after[1]))
    except ValueError:
        return None


def prefix_window_of(before: tuple[float, str] | None, after: tuple[float, str] | None) -> PrefixCacheWindow | None:
    """The prefix-cache counters' deltas between the scrapes bracketing a run (None: no scrape after it)."""
    if after is None:
        return None
    try:
        return prefix_cache_window(scrape_samples(before[1]) if before is not None else None, scrape_samples(after[1]))
    except ValueError:
        return None


def measured(outcome: RunOutcome, preset: BenchPreset, cold_start: ColdStart | None = None) -> RunOutcome:
    """The outcome with its prefix-cache share (and the cold warning) and its goodput against the
    preset's SLO, as stored (issue B2); cold_start: what the preset's cold start did."""
    cold = is_cold(preset.dataset, preset.cold)
    prefix = prefix_cache_json(
        outcome.prefix_window,
        cold=cold,
        cold_start=preset.cold_start,
        cold_start_done=cold_start.done if cold_start is not None else None,
        cold_start_note=cold_start.note if cold_start is not None else None,
    )
    slo = slo_of(preset)
    return dataclasses.replace(outcome, prefix_cache=prefix, goodput=goodput_json(slo, goodput_of(outcome.result, slo)))


class BenchRunner(run_api.KindRunner):
    """Serving benchmark runs: the client next to an instance, detached on its node."""

    error = BenchRunError

    def __init__(
        self,
        pool: TransportPool | None = None,
        *,
        metrics_interval: float = 1.0,
        fleet: FleetTelemetry | None = None,
        record_telemetry: bool = True,
    ) -> None:
        super().__init__(pool)
        self.metrics_interval = metrics_interval
        # Issue P: the run's GPUs recorded from the fleet's stream when given (the TUI), else
        # from an agent stream of the run's own (the CLI); record_telemetry=False: neither.
        self.fleet = fleet
        self.record_telemetry = record_telemetry

    def client_command(self, node: NodeSpec, cmd: AgentCommand, preset: BenchPreset) -> list[str]:
        if preset.client == "benchmark_serving":
            # Old images: the script sits in vLLM's source tree on the node.
            return [node.python, "benchmarks/benchmark_serving.py"]
        return list(cmd.vllm)

    def spec(
        self,
        node: NodeSpec,
        cmd: AgentCommand,
        preset: BenchPreset,
        *,
        name: str,
        base_url: str,
        model: str,
        tokenizer: str | None,
        max_concurrency: int | None,
        instance: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> run_api.RunSpec:
        """The client's argv, environment and spec keys: the serving kind's argv builder."""
        if preset.client in OUTSIDE:  # issue B2: GuideLLM / AIPerf (console/services/runs/clients.py)
            try:
                return outside.spec_for(node, cmd, preset, name=name, base_url=base_url, model=model,
                                        tokenizer=tokenizer, max_concurrency=max_concurrency, instance=instance,
                                        extra_env=extra_env)  # fmt: skip
            except ValueError as exc:
                raise BenchRunError(str(exc)) from None  # names the node or the preset and its key
        try:
            argv = build_bench_argv(
                preset,
                client_cmd=self.client_command(node, cmd, preset),
                base_url=base_url,
                model=model,
                result_dir=run_api.NodeRuns.folder(cmd, name),
                result_filename=run_api.RESULT_FILE,
                max_concurrency=max_concurrency,
                tokenizer=tokenizer,
            )
        except ValueError as exc:
            raise BenchRunError(f"bench preset {preset.name}: {exc}") from None
        env = {**cmd.env_dict(), **(extra_env or {}), "COLUMNS": "100", "PYTHONUNBUFFERED": "1"}
        keys = {"instance": instance, "preset": preset.name, "max_concurrency": max_concurrency}
        return run_api.RunSpec(name, tuple(argv), env, keys)

    async def start(
        self,
        node: NodeSpec,
        instance: InstanceView,
        preset: BenchPreset,
        *,
        overrides: dict[str, str] | None = None,
        max_concurrency: int | None = None,
        name: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> tuple[str, tuple[str, ...]]:
        """Start the client detached on the node; returns (run name, argv)."""
        if not instance.port:
            raise BenchRunError(f"{node.name}: instance {instance.name} has no port")
        cmd = await self.node_runs.agent(node)
        preset = apply_bench_overrides(preset, overrides or {})
        refusal = context_refusal(preset, instance_max_model_len(instance), instance.name)
        if refusal is not None:  # every request would be a 400: refused before anything starts
            raise BenchRunError(f"{node.name}: {refusal}")
        name = name or run_name(preset.name, max_concurrency)
        preset = await self._upload_trace(node, cmd, preset)
        model, tokenizer = client_target(instance)
        if not model:
            raise BenchRunError(f"{node.name}: instance {instance.name} serves no known model")
        spec = self.spec(
            node,
            cmd,
            preset,
            name=name,
            base_url=f"http://127.0.0.1:{instance.port}",
            model=model,
            tokenizer=tokenizer,
            max_concurrency=max_concurrency,
            instance=instance.name,
            extra_env=extra_env,
        )
        if instance.api_key_env:  # `vllm bench serve` sends OPENAI_API_KEY as its bearer token
            try:
                key = api_key_from(instance.api_key_env, os.environ, f"instance {instance.name}")
            except ValueError as exc:
                raise BenchRunError(f"{node.name}: {exc}") from None
            spec = dataclasses.replace(spec, env={**spec.env, "OPENAI_API_KEY": key})
        await self.node_runs.start(node, cmd, spec)
        return name, spec.argv

    async def _upload_trace(self, node: NodeSpec, cmd: AgentCommand, preset: BenchPreset) -> BenchPreset:
        """A preset's kept trace converted for vLLM's timed_trace dataset and uploaded to the node
        (issue B2); the preset then points at that file. Content-named: a rerun reuses the name."""
        if preset.trace is None or preset.dataset != "timed_trace":
            return preset
        try:
            text = load_trace_jsonl(
                preset.trace,
                PROFILES_DIR / "traces",
                max_input=preset.trace_max_input,
                speedup=preset.trace_speedup,
                count=preset.num_prompts,
            )
        except ValueError as exc:
            raise BenchRunError(f"bench preset {preset.name}: {exc}") from None
        data = text.encode("utf-8")
        path = f"{cmd.state_dir}/datasets/trace-{hashlib.sha256(data).hexdigest()[:16]}.jsonl"
        try:
            await self.pool.get(node).upload(data, path)
        except (TransportError, OSError) as exc:
            raise BenchRunError(f"{node.name}: cannot upload the trace file: {exc}") from None
        return dataclasses.replace(preset, dataset_path=path)

    @contextlib.asynccontextmanager
    async def _live_metrics(
        self, node: NodeSpec, port: int, reader: ServingReader, emit: Callable[[BenchEvent], None]
    ) -> AsyncIterator[None]:
        """The instance's /metrics polled through a forward while the run's log is read."""
        stop = asyncio.Event()
        poller = None
        forward = None
        try:
            forward = await self.pool.get(node).forward_port(port)

            def sampled(s: LiveSample) -> None:
                if len(reader.live) < MAX_LIVE:
                    reader.live.append(s)
                rec = reader.recorder
                emit(LiveMetricsSampled(reader.run, s, rec.throttled_now if rec is not None else None))

            poller = asyncio.create_task(
                poll_metrics(
                    f"http://127.0.0.1:{forward.local_port}", sampled, interval=self.metrics_interval, stop=stop
                )
            )
        except TransportError:
            poller = None  # live charts are a bonus; the run goes on
        try:
            yield
        finally:
            stop.set()
            if poller is not None:
                await asyncio.gather(poller, return_exceptions=True)
            if forward is not None:
                # the client has exited: the server's side of the client check
                after = await scrape_once(f"http://127.0.0.1:{forward.local_port}")
                if after is not None:
                    reader.server_after = (time.time(), after)
                await forward.close()

    async def reset_cache(self, node: NodeSpec, port: int) -> tuple[bool, str]:
        """POST /reset_prefix_cache to an instance through a forward: (done, what it said)."""
        try:
            forward = await self.pool.get(node).forward_port(port)
        except TransportError:
            return False, "no forward to the instance"
        try:
            return await reset_prefix_cache(f"http://127.0.0.1:{forward.local_port}")
        finally:
            await forward.close()

    async def cold_start(self, targets: Sequence[tuple[NodeSpec, InstanceView]], preset: BenchPreset) -> ColdStart:
        """A preset's cold start on every server a run drives: vLLM's prefix-cache reset where each
        allows it, else a fresh cache_salt, a fresh seed (random prompts) or nothing, and why
        (prefix_cache.cold_start_plan)."""
        answers = [await self.reset_cache(node, view.port) for node, view in targets if view.port]
        done = bool(answers) and all(ok for ok, _ in answers)
        said = next((text for ok, text in answers if not ok), answers[0][1] if answers else "no port to reach")
        if len(answers) > 1 and done:
            said = f"{len(answers)} servers emptied their prefix caches"
        return cold_start_plan(
            reset=(done, said),
            client=preset.client,
            dataset=preset.dataset,
            extra_args=preset.extra_args,
            versions=[view.version for _node, view in targets],
            seed=secrets.randbelow(1 << 31),
            salt=secrets.token_hex(8),
        )

    async def scrape(self, node: NodeSpec, port: int) -> tuple[float, str] | None:
        """(time, the instance's /metrics text) through a forward; None when it cannot be had."""
        try:
            forward = await self.pool.get(node).forward_port(port)
        except TransportError:
            return None
        try:
            text = await scrape_once(f"http://127.0.0.1:{forward.local_port}")
        finally:
            await forward.close()
        return (time.time(), text) if text is not None else None

    @contextlib.asynccontextmanager
    async def _alongside(
        self,
        node: NodeSpec,
        instance: InstanceView,
        reader: ServingReader,
        emit: Callable[[BenchEvent], None],
        poll: bool,
    ) -> AsyncIterator[None]:
        """What goes on while the run's log is read: the GPUs' telemetry and the live /metrics."""
        async with contextlib.AsyncExitStack() as stack:
            if self.record_telemetry and instance.gpus:
                reader.recorder = run_telemetry.RunTelemetryRecorder(node.name, instance.gpus)
                await stack.enter_async_context(
                    run_telemetry.recording(reader.recorder, fleet=self.fleet, pool=self.pool, node=node)
                )
            if poll and instance.port:
                await stack.enter_async_context(self._live_metrics(node, instance.port, reader, emit))
            yield

    async def follow(
        self,
        node: NodeSpec,
        instance: InstanceView,
        run: str,
        *,
        on_event: Callable[[BenchEvent], None] | None = None,
        poll_metrics_too: bool = True,
        argv: tuple[str, ...] = (),
        reconnect_attempts: int = 8,
        server_before: tuple[float, str] | None = None,
    ) -> RunOutcome:
        """Stream the run's output (re-attaching after a dropped link) and collect its result.

        server_before: the instance's /metrics scraped just before the run started (run() does);
        without it the client check counts from the server's start and judges only when the
        counts still match (a server that served nothing else)."""
        emit = on_event or (lambda e: None)
        reader = _reader_for(run, argv)  # vLLM's, or an outside client's (issue B2)
        reader.server_before = server_before
        alongside = self._alongside(node, instance, reader, emit, poll_metrics_too)
        return await self.node_runs.follow(
            node, run, reader, emit=emit, argv=argv, reconnect_attempts=reconnect_attempts, alongside=alongside
        )

    async def collect(self, node: NodeSpec, run: str, *, argv: tuple[str, ...] = ()) -> RunOutcome:
        """The outcome of a run that has ended, without its log (a group's quiet clients)."""
        return await self.node_runs.collect(node, run, _reader_for(run, argv), argv=argv)

    async def run(
        self,
        node: NodeSpec,
        instance: InstanceView,
        preset: BenchPreset,
        *,
        on_event: Callable[[BenchEvent], None] | None = None,
        overrides: dict[str, str] | None = None,
        max_concurrency: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> RunOutcome:
        """start() and follow(), the instance's /metrics polled meanwhile (and scraped just
        before and after: the client check, the prefix-cache share), its GPUs' telemetry recorded."""
        base = preset
        overrides = dict(overrides or {})
        plan = None
        if apply_bench_overrides(base, overrides).cold_start == "reset" and instance.port:
            plan = await self.cold_start([(node, instance)], apply_bench_overrides(base, overrides))
            if plan.seed is not None:  # an override, so the stored title says the seed changed
                overrides["seed"] = str(plan.seed)
            if plan.extra_args is not None and "extra_args" in overrides:  # the user's args, salted
                overrides["extra_args"] = shlex.join(plan.extra_args)
            elif plan.extra_args is not None:  # the salt alone: not a setting the title names
                preset = dataclasses.replace(base, extra_args=plan.extra_args)
        before = await self.scrape(node, instance.port) if instance.port else None
        name, argv = await self.start(
            node, instance, preset, overrides=overrides, max_concurrency=max_concurrency, extra_env=extra_env
        )
        if on_event:
            on_event(BenchStarted(name, node.name, tuple(redact(list(argv))), max_concurrency))
        outcome = await self.follow(node, instance, name, on_event=on_event, argv=argv, server_before=before)
        outcome = await outside.with_records(self.node_runs, node, outcome)  # AIPerf's per-request file (B2)
        outcome = measured(outcome, apply_bench_overrides(base, overrides), plan)
        changes = preset_changes(base, apply_bench_overrides(base, overrides))  # start() checked them
        return dataclasses.replace(outcome, overrides=changes) if changes else outcome

    async def runs(self, node: NodeSpec) -> list[dict]:
        """records() as the node listed them (plain dicts, as `bench runs --json` prints them)."""
        return [r.as_dict() for r in await self.records(node)]


def _reader_for(run: str, argv: tuple[str, ...]) -> ServingReader:
    """vLLM's reader, or one for the outside client the argv starts (issue B2)."""
    found = client_of_argv(argv)
    return ServingReader(run, *found) if found is not None else ServingReader(run)


def instance_max_model_len(instance: InstanceView) -> int | None:
    """The --max-model-len the instance was started with (None: not set, or not readable)."""
    from console.core.models.fit import FitError
    from console.core.models.settings import settings_from_args

    try:
        return settings_from_args(instance.argv).max_model_len
    except FitError:
        return None


def store_kwargs(outcome: RunOutcome) -> dict:
    """run_from_console's keywords for what issue P adds to a stored serving run."""
    return {
        "telemetry": outcome.telemetry,
        "client_check": outcome.client_check,
        "pitfalls": outcome.pitfalls,
        "overrides": outcome.overrides,
        "prefix_cache": outcome.prefix_cache,
        "goodput": outcome.goodput,
    }


def check_lines(outcome: RunOutcome) -> list[str]:
    """The client check and known pitfalls, one line each, for the CLI and the benchmark screen."""
    out = []
    check = outcome.client_check
    if check is not None:
        word = {True: "CLIENT-BOUND", False: "ok (client kept up)", None: "not judged"}[check.client_bound]
        ttft, e2e = check.figure("ttft"), check.figure("e2el")

        def pair(f: cc.Figure | None) -> str:
            if f is None or f.client_mean_ms is None or f.server_mean_ms is None:
                return "-"
            return f"{f.client_mean_ms:.1f}/{f.server_mean_ms:.1f} ms"

        out.append(f"client check: {word}  mean TTFT client/server {pair(ttft)}  E2E {pair(e2e)}")
        if check.client_bound is not False:
            out.extend(f"  {r}" for r in check.reasons)
    for p in outcome.pitfalls:
        out.append(f"client pitfall {p.key}: {p.line}")
    return out + workload_lines(outcome)


def workload_lines(outcome: RunOutcome) -> list[str]:
    """Goodput against the SLO, the prefix-cache share and its warning (issue B2), one line each."""
    return workload_lines_of(outcome.goodput, outcome.prefix_cache)


def workload_lines_of(goodput: Mapping | None, prefix_cache: Mapping | None) -> list[str]:
    """workload_lines from a stored goodput and prefix_cache object (a run's, or a group's)."""
    out = []
    g = goodput
    if g:
        pct, rps = g.get("goodput_pct"), g.get("good_rps")
        slo = ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in (g.get("slo") or {}).items())
        if pct is None:
            out.append(f"goodput: not counted (no per-request figures) · SLO {slo}")
        else:
            out.append(f"goodput {pct:.1f}% of requests · {rps or 0:.2f} good req/s · SLO {slo}")
    p = prefix_cache
    if p:
        pct = p.get("hit_pct")
        cached = "not counted" if pct is None else f"{pct:.1f}% of prompt tokens"
        line = f"prefix cache: {cached} ({'meant cold' if p.get('cold') else 'warm by design'})"
        if p.get("cold_start"):
            line += f" · cold start: {p.get('cold_start_done')} ({p.get('cold_start_note')})"
        out.append(line)
        if p.get("warning"):
            out.append(f"WARNING: {p['warning']}")
    return out
