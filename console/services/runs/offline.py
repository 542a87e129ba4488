"""Offline benchmarks on a node's GPUs: `vllm bench latency|throughput` (or the
old benchmark_*.py scripts), no instance needed.

Like serving runs, the command runs detached under the node's supervisor (group
"runs", so `bench runs` / `bench cancel` see it) with --output-json into the
run's folder; the console follows its log by byte offset (re-attaching after a
dropped link) and reads the JSON when it ends: the run API's life (run.py), with
this kind's argv and reader. The GPUs must be free: the
serve-start checks (TP, CPX, instances) plus running offline runs and any GPU
process the node's telemetry reports.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from console.core.bench.offline import (
    OfflineCommand,
    OfflineError,
    OfflinePreset,
    OfflineProgress,
    OfflineStreamParser,
    build_offline_argv,
    choose_client,
    fatal_text,
)
from console.core.bench.run_telemetry import RunTelemetry
from console.core.model import NodeSnapshot, NodeSpec
from console.core.serve.argv import redact
from console.core.serve.rules import check_cpx_tp, check_gpus_free, check_tp
from console.services.instances import ACTIVE, PASSTHROUGH_SECRETS, InstanceService
from console.services.runs import run as run_api
from console.services.runs import telemetry as run_telemetry
from console.services.status import sample_node

if TYPE_CHECKING:
    from console.services.fleet import FleetTelemetry


class OfflineRunError(Exception):
    """A run was refused, could not start or could not be followed: one line."""


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class OfflineStarted:
    run: str
    node: str
    kind: str
    gpus: tuple[int, ...]
    argv: tuple[str, ...]  # redacted
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OfflineProgressed:
    run: str
    progress: OfflineProgress


@dataclass(frozen=True, kw_only=True)
class OfflineOutcome(run_api.Outcome):
    """result_json is vLLM's --output-json, as written."""

    kind: str
    fatal: str | None  # vLLM's own fatal line, when it failed
    printed: dict
    # Issue P: the run's GPUs over the run (None: not recorded; telemetry_note says why)
    telemetry: RunTelemetry | None = field(default=None, repr=False)
    telemetry_note: str | None = None

    def failure(self) -> str:
        if self.fatal:
            return self.fatal
        return f"vLLM {super().failure()}" if self.exit_code else super().failure()


# A log line and the end are the run API's events, as for every kind.
OfflineLogLine = run_api.RunLogLine
OfflineFinished = run_api.RunFinished
OfflineEvent = OfflineStarted | OfflineProgressed | run_api.RunLogLine | run_api.RunFinished[OfflineOutcome]


@dataclass(frozen=True)
class OfflineClient:
    """How the benchmark runs: the client (`vllm bench` subcommand or the old scripts, and where
    those are), extra engine flags and environment on the node."""

    client: str = "auto"
    scripts_dir: str | None = None
    extra_args: Sequence[str] = ()
    extra_env: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Preflight:
    """What the checks saw: the node's snapshot (GPU model, partitions, vLLM version)."""

    snapshot: NodeSnapshot
    version: str | None


def offline_run_name(preset: str, kind: str, gpus: Sequence[int], clock: Callable[[], float] = time.time) -> str:
    stamp = run_api.run_stamp(clock)
    base = run_api.name_part(preset, 30, kind)
    return f"{kind}-{base}-g{'-'.join(map(str, gpus))}-{stamp}"


def busy_gpus(
    gpus: Sequence[int], snapshot: NodeSnapshot | None, instances: Mapping[int, str], runs: Mapping[int, str]
) -> str | None:
    """One line naming what holds a GPU: an instance, an offline run, or a process."""
    refusal = check_gpus_free(gpus, instances)
    if refusal:
        return refusal
    for gpu in gpus:
        if gpu in runs:
            return f"GPU {gpu} is running benchmark {runs[gpu]}"
    latest = snapshot.latest if snapshot is not None else None
    for metrics in latest.gpus if latest is not None else ():
        if metrics.index in gpus and metrics.processes:
            proc = metrics.processes[0]
            more = f" and {len(metrics.processes) - 1} more" if len(metrics.processes) > 1 else ""
            return f"GPU {metrics.index} is busy: process {proc.pid} ({proc.name}){more}"
    return None


def preset_from_spec(spec: Mapping) -> OfflinePreset | None:
    """The preset a run was started with (its spec.json), or None."""
    data = spec.get("offline_preset")
    if not isinstance(data, Mapping):
        return None
    try:
        values = dict(data)
        values["args"] = tuple(str(a) for a in values.get("args") or ())
        return OfflinePreset(**values)
    except TypeError:
        return None


class OfflineReader:
    """The offline kind's reader: vLLM's progress bars and fatal line, then its --output-json."""

    def __init__(self, run: str, kind: str) -> None:
        self.run = run
        self.kind = kind
        self.parser = OfflineStreamParser()
        self.recorder: run_telemetry.RunTelemetryRecorder | None = None

    def line(self, text: str) -> list[OfflineProgressed]:
        return [OfflineProgressed(self.run, event) for event in self.parser.feed(text)]

    def end(self) -> list[OfflineProgressed]:
        return []

    def outcome(self, collected: run_api.Collected) -> OfflineOutcome:
        loaded = collected.result_json()
        fatal = self.parser.fatal
        exit_code = collected.exit_code
        rec = self.recorder
        telemetry = rec.record() if rec is not None else None
        note = (
            (rec.error or "no telemetry sample of the run's GPUs arrived")
            if rec is not None and (telemetry is None or rec.error)
            else None
        )
        return OfflineOutcome(
            telemetry=telemetry,
            telemetry_note=note,
            run=collected.name,
            node=collected.node,
            kind=self.kind,
            exit_code=exit_code,
            result_json=loaded if isinstance(loaded, dict) else None,
            fatal=fatal_text(fatal) if fatal is not None and exit_code != 0 else None,
            printed=dict(self.parser.printed),
            argv=collected.argv,
            cancelled=collected.cancelled,
        )


class OfflineRunner(run_api.KindRunner):
    """Offline benchmark runs: `vllm bench latency|throughput` on free GPUs, detached on the node."""

    # Issue P: the run's GPUs recorded from this fleet's stream when set (the TUI), else from an
    # agent stream of the run's own; record_telemetry False: neither.
    fleet: FleetTelemetry | None = None
    record_telemetry: bool = True

    error = OfflineRunError

    async def preflight(self, node: NodeSpec, gpus: Sequence[int], tp: int, *, per_gpu: bool = False) -> Preflight:
        """The serve-start checks for these GPUs (per_gpu: one TP 1 run on each);
        OfflineRunError naming what is at fault."""
        snapshot = await sample_node(self.pool, node, probe=True)
        if snapshot.error:
            raise OfflineRunError(snapshot.error)
        by_index = {g.index: g for g in snapshot.static}
        unknown = [g for g in gpus if g not in by_index]
        if unknown and snapshot.static:
            raise OfflineRunError(f"{node.name}: no GPU {unknown[0]} (the node has {len(snapshot.static)})")
        views = await InstanceService(self.pool).list(node)
        instances = {g: v.name for v in views if v.state in ACTIVE for g in v.gpus}
        runs: dict[int, str] = {}
        for rec in await self.records(node):
            if rec.running:
                for g in rec.spec.get("gpus") or ():
                    runs[int(g)] = rec.name
        partitions = {g: by_index[g].compute_partition for g in gpus if g in by_index}
        tp_check = check_tp(1, gpus[:1]) if per_gpu else check_tp(tp, gpus)
        cpx_check = None if per_gpu else check_cpx_tp(tp, partitions)
        for refusal in (tp_check, cpx_check, busy_gpus(gpus, snapshot, instances, runs)):
            if refusal:
                raise OfflineRunError(f"{node.name}: {refusal}")
        return Preflight(snapshot, snapshot.probe.vllm if snapshot.probe else None)

    async def start(
        self,
        node: NodeSpec,
        preset: OfflinePreset,
        gpus: Sequence[int],
        *,
        version: str | None,
        how: OfflineClient = OfflineClient(),
        name: str | None = None,
    ) -> tuple[str, OfflineCommand]:
        """Start the benchmark detached on the node; returns (run name, command)."""
        cmd = await self.node_runs.agent(node)
        gpus = tuple(gpus)
        name = name or offline_run_name(preset.name, preset.kind, gpus)
        try:
            chosen = choose_client(version, how.client)
            kw = {"scripts_dir": how.scripts_dir} if how.scripts_dir else {}
            command = build_offline_argv(
                preset,
                output_json=run_api.NodeRuns.result_path(cmd, name),
                vllm_cmd=cmd.vllm,
                python=node.python,
                client=chosen,
                version=version,
                extra_args=how.extra_args,
                **kw,
            )
        except OfflineError as exc:
            raise OfflineRunError(f"{preset.kind} preset {preset.name}: {exc}") from None
        env = {
            **cmd.env_dict(),
            **dict(command.env),
            **(how.extra_env or {}),
            "COLUMNS": "100",
            "PYTHONUNBUFFERED": "1",
        }
        for secret in PASSTHROUGH_SECRETS:  # gated models (seed 001: HF_TOKEN); redacted in spec.json
            if secret in os.environ and secret not in env:
                env[secret] = os.environ[secret]
        if gpus:
            env["HIP_VISIBLE_DEVICES"] = ",".join(map(str, gpus))  # seeds 000/001 (CPX: one per partition)
        keys = {
            "kind": preset.kind,
            "preset": preset.name,
            "gpus": list(gpus),
            # so `--attach` (from any console) stores the run with the setup it started with
            "offline_preset": {k: v for k, v in asdict(preset).items() if k not in ("env", "source")},
        }
        await self.node_runs.start(node, cmd, run_api.RunSpec(name, tuple(command.argv), env, keys))
        return name, command

    async def follow(
        self,
        node: NodeSpec,
        run: str,
        kind: str,
        *,
        on_event: Callable[[OfflineEvent], None] | None = None,
        argv: tuple[str, ...] = (),
        reconnect_attempts: int = 8,
        gpus: Sequence[int] = (),
    ) -> OfflineOutcome:
        """Stream the run's log (re-attaching at the byte offset after a dropped link), then collect.
        gpus: the run's GPUs, whose telemetry is recorded meanwhile (issue P; none: not recorded)."""
        reader = OfflineReader(run, kind)
        alongside = None
        if gpus and self.record_telemetry:
            reader.recorder = run_telemetry.RunTelemetryRecorder(node.name, gpus)
            alongside = run_telemetry.recording(reader.recorder, fleet=self.fleet, pool=self.pool, node=node)
        return await self.node_runs.follow(
            node,
            run,
            reader,
            emit=on_event or (lambda e: None),
            argv=argv,
            reconnect_attempts=reconnect_attempts,
            alongside=alongside,
        )

    async def run(
        self,
        node: NodeSpec,
        preset: OfflinePreset,
        gpus: Sequence[int],
        *,
        on_event: Callable[[OfflineEvent], None] | None = None,
        version: str | None,
        how: OfflineClient = OfflineClient(),
    ) -> OfflineOutcome:
        """start() and follow()."""
        name, command = await self.start(node, preset, gpus, version=version, how=how)
        if on_event:
            on_event(
                OfflineStarted(
                    name, node.name, preset.kind, tuple(gpus), tuple(redact(list(command.argv))), command.notes
                )
            )
        return await self.follow(node, name, preset.kind, on_event=on_event, argv=command.argv, gpus=gpus)
