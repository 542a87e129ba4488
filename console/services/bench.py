"""Benchmark runs: the client runs detached on the node, the console follows it.

The client (`vllm bench serve` or the legacy benchmark_serving.py) is started
by the node's supervisor (group "runs") next to the server, with
--save-result into the run's folder: a dropped SSH link loses nothing, the
console re-attaches at the byte offset it had and collects the result. While
it runs, the instance's /metrics is polled through an SSH forward.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable

from console.core.bench.argv import apply_bench_overrides, build_bench_argv
from console.core.bench.output_events import BenchError, BenchProgress, BenchResultBlock, SetupLine
from console.core.bench.output_parser import BenchStreamParser
from console.core.bench.result import BenchResult, load_result_file
from console.core.model import BenchPreset, NodeSpec
from console.core.node_json import NodeJsonError, loads_document, loads_object, object_lines
from console.core.serve.argv import api_key_from, redact
from console.core.text import printable
from console.services.agent_bundle import AgentCommand, install_agent
from console.services.instances import InstanceView
from console.services.live_metrics import LiveSample, poll_metrics
from console.services.run_log import follow_run_log
from console.services.transports import TransportPool
from console.transport.base import RESULT_FILE_LIMIT, TransportError

RESULT_FILE = "result.json"
MAX_LIVE = 3600  # live samples kept per run (an hour at 1 Hz)


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


@dataclass(frozen=True, slots=True)
class BenchLogLine:
    run: str
    text: str


@dataclass(frozen=True, slots=True)
class BenchFinished:
    run: str
    outcome: RunOutcome


@dataclass(frozen=True)
class RunOutcome:
    run: str
    node: str
    exit_code: int | None
    result: BenchResult | None  # vLLM's own JSON, normalised
    result_json: dict | None  # as written by the client
    block: BenchResultBlock | None  # the printed block (for cross-checks)
    errors: tuple[BenchError, ...]
    live: tuple[LiveSample, ...] = field(default=(), repr=False)
    argv: tuple[str, ...] = ()
    cancelled: bool = False

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

    @property
    def reason(self) -> str | None:
        if self.ok:
            return None
        if self.cancelled:
            return "cancelled"
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
        return f"the client exited with code {self.exit_code}" if self.exit_code else "no result was written"


BenchEvent = BenchStarted | BenchProgressed | BenchSetupSeen | LiveMetricsSampled | BenchLogLine | BenchFinished


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
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", preset).strip("-.")[:36] or "bench"
    return f"{base}-c{concurrency}-{stamp}" if concurrency else f"{base}-{stamp}"


class BenchRunner:
    def __init__(self, pool: TransportPool | None = None, *, metrics_interval: float = 1.0) -> None:
        self.pool = pool or TransportPool()
        self.metrics_interval = metrics_interval

    async def _agent(self, node: NodeSpec) -> AgentCommand:
        return await install_agent(self.pool.get(node), node)

    def client_command(self, node: NodeSpec, cmd: AgentCommand, preset: BenchPreset) -> list[str]:
        if preset.client == "benchmark_serving":
            # Old images: the script sits in vLLM's source tree on the node.
            return [node.python, "benchmarks/benchmark_serving.py"]
        return list(cmd.vllm)

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
        cmd = await self._agent(node)
        preset = apply_bench_overrides(preset, overrides or {})
        name = name or run_name(preset.name, max_concurrency)
        folder = f"{cmd.state_dir}/runs/{name}"
        model = instance.served_models[0] if instance.served_models else instance.model
        if not model:
            raise BenchRunError(f"{node.name}: instance {instance.name} serves no known model")
        try:
            argv = build_bench_argv(
                preset,
                client_cmd=self.client_command(node, cmd, preset),
                base_url=f"http://127.0.0.1:{instance.port}",
                model=model,
                result_dir=folder,
                result_filename=RESULT_FILE,
                max_concurrency=max_concurrency,
                tokenizer=instance.model if instance.served_models and instance.model != model else None,
            )
        except ValueError as exc:
            raise BenchRunError(f"bench preset {preset.name}: {exc}") from None
        env = {**cmd.env_dict(), **(extra_env or {}), "COLUMNS": "100", "PYTHONUNBUFFERED": "1"}
        if instance.api_key_env:  # `vllm bench serve` sends OPENAI_API_KEY as its bearer token
            try:
                env["OPENAI_API_KEY"] = api_key_from(instance.api_key_env, os.environ, f"instance {instance.name}")
            except ValueError as exc:
                raise BenchRunError(f"{node.name}: {exc}") from None
        spec = {
            "name": name,
            "argv": list(argv),
            "env": env,
            "instance": instance.name,
            "preset": preset.name,
            "max_concurrency": max_concurrency,
        }
        result = await self.pool.get(node).run(
            cmd.argv("instance", "--state-dir", cmd.state_dir, "--group", "runs", "start"),
            env=cmd.env_dict(),
            input=json.dumps(spec),
            timeout=60,
        )
        for line in result.stdout.splitlines():
            if line.startswith("{"):
                try:
                    rec = loads_object(line)
                except NodeJsonError as exc:
                    raise BenchRunError(f"{node.name}: agent runs start: {exc}") from None
                if rec.get("kind") == "error":
                    raise BenchRunError(f"{node.name}: {printable(rec.get('message'))}")
                return name, tuple(argv)
        raise BenchRunError(f"{node.name}: could not start the benchmark: {result.stderr.strip()[-200:]}")

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
    ) -> RunOutcome:
        """Stream the run's output (re-attaching after a dropped link) and collect its result."""
        emit = on_event or (lambda e: None)
        cmd = await self._agent(node)
        parser = BenchStreamParser()
        live: list[LiveSample] = []
        stop = asyncio.Event()
        poller = None
        forward = None
        if poll_metrics_too and instance.port:
            try:
                forward = await self.pool.get(node).forward_port(instance.port)

                def sampled(s: LiveSample) -> None:
                    if len(live) < MAX_LIVE:
                        live.append(s)
                    emit(LiveMetricsSampled(run, s))

                poller = asyncio.create_task(
                    poll_metrics(
                        f"http://127.0.0.1:{forward.local_port}", sampled, interval=self.metrics_interval, stop=stop
                    )
                )
            except TransportError:
                poller = None  # live charts are a bonus; the run goes on
        lines = follow_run_log(self.pool, node, cmd, run, reconnect_attempts=reconnect_attempts, lost=BenchRunError)
        try:
            async for line in lines:
                if line.strip():
                    emit(BenchLogLine(run, line))
                for event in parser.feed(line + "\n"):
                    self._emit_parsed(run, event, emit)
            for event in parser.close():
                self._emit_parsed(run, event, emit)
        finally:
            stop.set()
            if poller is not None:
                await asyncio.gather(poller, return_exceptions=True)
            if forward is not None:
                await forward.close()
        outcome = await self._collect(node, cmd, run, parser, tuple(live), argv)
        emit(BenchFinished(run, outcome))
        return outcome

    @staticmethod
    def _emit_parsed(run: str, event, emit) -> None:
        if isinstance(event, BenchProgress):
            emit(BenchProgressed(run, event))
        elif isinstance(event, SetupLine):
            emit(BenchSetupSeen(run, event))

    async def _collect(
        self,
        node: NodeSpec,
        cmd: AgentCommand,
        run: str,
        parser: BenchStreamParser,
        live: tuple[LiveSample, ...],
        argv: tuple[str, ...],
    ) -> RunOutcome:
        transport = self.pool.get(node)
        listing = await transport.run(
            cmd.argv("instance", "--state-dir", cmd.state_dir, "--group", "runs", "list"),
            env=cmd.env_dict(),
            timeout=30,
        )
        # A bad line in the listing must not cost the result: it is skipped here.
        rec: dict = next((r for r in object_lines(listing.stdout, skip_bad=True) if r.get("name") == run), {})
        exit_code = rec.get("exit_code")
        # SIGINT/SIGTERM as a signal, or as Python's exit codes for them (130, 143)
        cancelled = rec.get("exit_signal") in (2, 15) or exit_code in (130, 143)
        folder = f"{cmd.state_dir}/runs/{run}"
        read = await transport.run(["cat", f"{folder}/{RESULT_FILE}"], timeout=60, max_output=RESULT_FILE_LIMIT)
        result_json, result = None, None
        if read.ok and read.stdout.strip():
            try:
                result_json = loads_document(read.stdout)
                result = load_result_file(read.stdout)[-1]
            except (ValueError, IndexError):
                result_json, result = None, None
        return RunOutcome(
            run=run,
            node=node.name,
            exit_code=exit_code,
            result=result,
            result_json=result_json,
            block=parser.blocks[-1] if parser.blocks else None,
            errors=tuple(parser.errors),
            live=live,
            argv=tuple(redact(list(argv or rec.get("spec", {}).get("argv", [])))),
            cancelled=bool(cancelled),
        )

    async def run(
        self,
        node: NodeSpec,
        instance: InstanceView,
        preset: BenchPreset,
        *,
        overrides: dict[str, str] | None = None,
        max_concurrency: int | None = None,
        on_event: Callable[[BenchEvent], None] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> RunOutcome:
        name, argv = await self.start(
            node, instance, preset, overrides=overrides, max_concurrency=max_concurrency, extra_env=extra_env
        )
        if on_event:
            on_event(BenchStarted(name, node.name, tuple(redact(list(argv))), max_concurrency))
        return await self.follow(node, instance, name, on_event=on_event, argv=argv)

    async def cancel(self, node: NodeSpec, run: str) -> None:
        cmd = await self._agent(node)
        await self.pool.get(node).run(
            cmd.argv(
                "instance",
                "--state-dir",
                cmd.state_dir,
                "--group",
                "runs",
                "stop",
                run,
                "--int-timeout",
                "10",
                "--term-timeout",
                "5",
            ),
            env=cmd.env_dict(),
            timeout=60,
        )

    async def runs(self, node: NodeSpec) -> list[dict]:
        cmd = await self._agent(node)
        listing = await self.pool.get(node).run(
            cmd.argv("instance", "--state-dir", cmd.state_dir, "--group", "runs", "list"),
            env=cmd.env_dict(),
            timeout=30,
        )
        try:
            return object_lines(listing.stdout)
        except NodeJsonError as exc:
            raise BenchRunError(f"{node.name}: agent runs list: {exc}") from None
