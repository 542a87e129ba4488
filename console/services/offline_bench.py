"""Offline benchmarks on a node's GPUs: `vllm bench latency|throughput` (or the
old benchmark_*.py scripts), no instance needed.

Like serving runs, the command runs detached under the node's supervisor (group
"runs", so `bench runs` / `bench cancel` see it) with --output-json into the
run's folder; the console follows its log by byte offset (re-attaching after a
dropped link) and reads the JSON when it ends. The GPUs must be free: the
serve-start checks (TP, CPX, instances) plus running offline runs and any GPU
process the node's telemetry reports.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

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
from console.core.model import NodeSnapshot, NodeSpec
from console.core.node_json import NodeJsonError, loads_document, loads_object, object_lines
from console.core.serve.argv import redact
from console.core.serve.rules import check_cpx_tp, check_gpus_free, check_tp
from console.core.text import printable
from console.services.agent_bundle import AgentCommand, install_agent
from console.services.instances import _ACTIVE, PASSTHROUGH_SECRETS, InstanceService
from console.services.run_log import follow_run_log
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.transport.base import RESULT_FILE_LIMIT

RESULT_FILE = "result.json"


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


@dataclass(frozen=True, slots=True)
class OfflineLogLine:
    run: str
    text: str


@dataclass(frozen=True, slots=True)
class OfflineFinished:
    run: str
    outcome: OfflineOutcome


@dataclass(frozen=True)
class OfflineOutcome:
    run: str
    node: str
    kind: str
    exit_code: int | None
    result_json: dict | None  # vLLM's --output-json, as written
    fatal: str | None  # vLLM's own fatal line, when it failed
    printed: dict
    argv: tuple[str, ...] = ()
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.result_json is not None and not self.cancelled

    @property
    def reason(self) -> str | None:
        if self.ok:
            return None
        if self.cancelled:
            return "cancelled"
        if self.fatal:
            return self.fatal
        if self.exit_code:
            return f"vLLM exited with code {self.exit_code}"
        return "no result was written"


OfflineEvent = OfflineStarted | OfflineProgressed | OfflineLogLine | OfflineFinished


@dataclass(frozen=True)
class Preflight:
    """What the checks saw: the node's snapshot (GPU model, partitions, vLLM version)."""

    snapshot: NodeSnapshot
    version: str | None


def offline_run_name(preset: str, kind: str, gpus: Sequence[int], clock: Callable[[], float] = time.time) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", preset).strip("-.")[:30] or kind
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


class OfflineRunner:
    def __init__(self, pool: TransportPool | None = None) -> None:
        self.pool = pool or TransportPool()

    async def _agent(self, node: NodeSpec) -> AgentCommand:
        return await install_agent(self.pool.get(node), node)

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
            raise OfflineRunError(f"{node.name}: agent runs list: {exc}") from None

    async def cancel(self, node: NodeSpec, run: str) -> None:
        """Stop a run cleanly (SIGINT, then SIGTERM): vLLM shuts its engine down itself."""
        cmd = await self._agent(node)
        argv = cmd.argv("instance", "--state-dir", cmd.state_dir, "--group", "runs", "stop", run)
        await self.pool.get(node).run(
            [*argv, "--int-timeout", "10", "--term-timeout", "5"], env=cmd.env_dict(), timeout=60
        )

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
        instances = {g: v.name for v in views if v.state in _ACTIVE for g in v.gpus}
        runs: dict[int, str] = {}
        for rec in await self.runs(node):
            if rec.get("state") == "running":
                for g in (rec.get("spec") or {}).get("gpus") or ():
                    runs[int(g)] = str(rec.get("name"))
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
        client: str = "auto",
        scripts_dir: str | None = None,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> tuple[str, OfflineCommand]:
        """Start the benchmark detached on the node; returns (run name, command)."""
        cmd = await self._agent(node)
        gpus = tuple(gpus)
        name = name or offline_run_name(preset.name, preset.kind, gpus)
        folder = f"{cmd.state_dir}/runs/{name}"
        try:
            chosen = choose_client(version, client)
            kw = {"scripts_dir": scripts_dir} if scripts_dir else {}
            command = build_offline_argv(
                preset,
                output_json=f"{folder}/{RESULT_FILE}",
                vllm_cmd=cmd.vllm,
                python=node.python,
                client=chosen,
                version=version,
                extra_args=extra_args,
                **kw,
            )
        except OfflineError as exc:
            raise OfflineRunError(f"{preset.kind} preset {preset.name}: {exc}") from None
        env = {**cmd.env_dict(), **dict(command.env), **(extra_env or {}), "COLUMNS": "100", "PYTHONUNBUFFERED": "1"}
        for secret in PASSTHROUGH_SECRETS:  # gated models (seed 001: HF_TOKEN); redacted in spec.json
            if secret in os.environ and secret not in env:
                env[secret] = os.environ[secret]
        if gpus:
            env["HIP_VISIBLE_DEVICES"] = ",".join(map(str, gpus))  # seeds 000/001 (CPX: one per partition)
        spec = {
            "name": name,
            "argv": list(command.argv),
            "env": env,
            "kind": preset.kind,
            "preset": preset.name,
            "gpus": list(gpus),
            # so `--attach` (from any console) stores the run with the setup it started with
            "offline_preset": {k: v for k, v in asdict(preset).items() if k not in ("env", "source")},
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
                    raise OfflineRunError(f"{node.name}: agent runs start: {exc}") from None
                if rec.get("kind") == "error":
                    raise OfflineRunError(f"{node.name}: {printable(rec.get('message'))}")
                return name, command
        raise OfflineRunError(f"{node.name}: could not start the benchmark: {result.stderr.strip()[-200:]}")

    async def follow(
        self,
        node: NodeSpec,
        run: str,
        kind: str,
        *,
        on_event: Callable[[OfflineEvent], None] | None = None,
        argv: tuple[str, ...] = (),
        reconnect_attempts: int = 8,
    ) -> OfflineOutcome:
        """Stream the run's log (re-attaching at the byte offset after a dropped link), then collect."""
        emit = on_event or (lambda e: None)
        cmd = await self._agent(node)
        parser = OfflineStreamParser()
        lines = follow_run_log(self.pool, node, cmd, run, reconnect_attempts=reconnect_attempts, lost=OfflineRunError)
        async for line in lines:
            if line.strip():
                emit(OfflineLogLine(run, line))
            for event in parser.feed(line):
                emit(OfflineProgressed(run, event))
        outcome = await self._collect(node, cmd, run, kind, parser, argv)
        emit(OfflineFinished(run, outcome))
        return outcome

    async def _collect(
        self, node: NodeSpec, cmd: AgentCommand, run: str, kind: str, parser: OfflineStreamParser, argv
    ) -> OfflineOutcome:
        transport = self.pool.get(node)
        rec = next((r for r in await self.runs(node) if r.get("name") == run), {})
        exit_code = rec.get("exit_code")
        cancelled = rec.get("exit_signal") in (2, 15) or exit_code in (130, 143)
        read = await transport.run(
            ["cat", f"{cmd.state_dir}/runs/{run}/{RESULT_FILE}"], timeout=60, max_output=RESULT_FILE_LIMIT
        )
        result_json = None
        if read.ok and read.stdout.strip():
            try:
                loaded = loads_document(read.stdout)
                result_json = loaded if isinstance(loaded, dict) else None
            except ValueError:
                result_json = None
        fatal = parser.fatal
        return OfflineOutcome(
            run=run,
            node=node.name,
            kind=kind,
            exit_code=exit_code,
            result_json=result_json,
            fatal=fatal_text(fatal) if fatal is not None and exit_code != 0 else None,
            printed=dict(parser.printed),
            argv=tuple(redact(list(argv or (rec.get("spec") or {}).get("argv", [])))),
            cancelled=bool(cancelled),
        )

    async def run(
        self,
        node: NodeSpec,
        preset: OfflinePreset,
        gpus: Sequence[int],
        *,
        version: str | None,
        client: str = "auto",
        scripts_dir: str | None = None,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        on_event: Callable[[OfflineEvent], None] | None = None,
    ) -> OfflineOutcome:
        name, command = await self.start(
            node,
            preset,
            gpus,
            version=version,
            client=client,
            scripts_dir=scripts_dir,
            extra_args=extra_args,
            extra_env=extra_env,
        )
        if on_event:
            on_event(
                OfflineStarted(
                    name, node.name, preset.kind, tuple(gpus), tuple(redact(list(command.argv))), command.notes
                )
            )
        return await self.follow(node, name, preset.kind, on_event=on_event, argv=command.argv)
