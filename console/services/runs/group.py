"""A benchmark of a whole replica group, reported as one result.

One `vllm bench serve --save-detailed` client per replica, on the replica's node
(next to it: each client is a single serving run, runs/serving.py, started, followed
and collected through the run API), with the group's concurrency / rate and prompts
split evenly, and each client's own seed (the same seed would send every replica the
same prompts). The clients are started detached and hold at a common start time,
then run together. The group's result
merges every client's per-request data (console/core/bench/group_result.py).

With `url` (a load balancer the user already runs in front of the replicas) one
client drives that URL instead, from the first replica's node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from console.core.bench import client_check as cc
from console.core.bench.argv import apply_bench_overrides
from console.core.bench.goodput import combined_goodput, goodput_json, goodput_of, slo_of
from console.core.bench.group_result import GroupResult, GroupResultError, merge_results
from console.core.bench.prefix_cache import ColdStart, PrefixCacheWindow, combined_window, is_cold, prefix_cache_json
from console.core.bench.result import BenchResult
from console.core.bench.run_telemetry import Episode, RunTelemetry, summarize
from console.core.experiment.spec import split_evenly
from console.core.model import BenchPreset, NodeSpec
from console.core.results.build import preset_changes, run_from_console
from console.core.status_view import fmt_num
from console.services.groups import GroupView
from console.services.instances import InstanceState, InstanceView
from console.services.results import ResultStore
from console.services.runs import telemetry as run_telemetry
from console.services.runs.run import NodeRuns
from console.services.runs.serving import (
    BenchEvent,
    BenchRunError,
    BenchRunner,
    RunOutcome,
    client_check_of,
    client_target,
    measured,
    prefix_window_of,
    workload_lines_of,
)
from console.services.transports import TransportPool
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.services.fleet import FleetTelemetry

# Clients that stream their output to the console; the others are waited for by
# polling (one SSH session each would pass sshd's MaxSessions on a 64-replica node).
FOLLOWED_PER_NODE = 4
START_PARALLEL = 4  # clients started at once (each start is one SSH command)
# The start barrier: each client waits (python3 -c ..., its argv unchanged after it) until
# a go file appears on its node, then execs itself. The console writes the go files once
# every client is started, so they start within ~50 ms of each other however long the
# starting took. Past HOLD_LIMIT without a go file (the console died) a client ends (exit 3).
HOLD_LIMIT = 600
_HOLD = (
    "import os,sys,time\n"
    "end=time.time()+float(sys.argv[2])\n"
    "while not os.path.exists(sys.argv[1]):\n"
    " if time.time()>end: sys.exit(3)\n"
    " time.sleep(0.05)\n"
    "os.execvp(sys.argv[3],sys.argv[3:])"
)


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    replica: str
    node: str
    max_concurrency: int | None
    request_rate: float | None  # None = the preset's (inf when unset)
    num_prompts: int
    seed: int


@dataclass(frozen=True)
class GroupBenchOutcome:
    group: str
    outcomes: tuple[RunOutcome, ...]  # one per client, in replica order
    loads: tuple[ReplicaLoad, ...]
    result: GroupResult | None
    url: str | None = None
    merge_error: str | None = None
    # Issue P: every GPU of the group's replicas over the run (None: no sample arrived), and the
    # clients checked against their replicas' /metrics (per client; None where not judged).
    telemetry: RunTelemetry | None = dataclasses.field(default=None, repr=False)
    client_checks: tuple[cc.ClientCheck | None, ...] = ()
    # The preset fields an override (or --concurrency/--rate/--num-prompts) changed: the title names them.
    overrides: Mapping = dataclasses.field(default_factory=dict)
    # Issue B2: the group's prefix-cache share (every replica's counters added up) and its goodput
    # (every client's requests counted against the SLO), as a single run's (serving.measured).
    prefix_cache: Mapping | None = None
    goodput: Mapping | None = None

    @property
    def client_bound(self) -> bool | None:
        """True when any client was the bottleneck; False when every client was judged and none was."""
        verdicts = [c.client_bound if c is not None else None for c in self.client_checks]
        if any(v is True for v in verdicts):
            return True
        if verdicts and all(v is False for v in verdicts):
            return False
        return None

    def group_check(self) -> cc.ClientCheck | None:
        """The check stored with the group's merged run: the first client-bound client's, else the
        first judged one's (each client's own is stored with its run)."""
        judged = [c for c in self.client_checks if c is not None]
        bound = [c for c in judged if c.client_bound]
        picked = bound or [c for c in judged if c.client_bound is False] or judged
        return picked[0] if picked else None

    @property
    def ok(self) -> bool:
        return self.result is not None and all(o.ok for o in self.outcomes)

    @property
    def reason(self) -> str | None:
        if self.ok:
            return None
        bad = [f"{load.replica}: {o.reason}" for load, o in zip(self.loads, self.outcomes) if not o.ok]
        if bad:
            return "; ".join(bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "")
        return self.merge_error or "no result"


def split_load(
    replicas: Sequence[InstanceView],
    preset: BenchPreset,
    *,
    concurrency: int | None,
    rate: float | None = None,
    num_prompts: int | None = None,
) -> list[ReplicaLoad]:
    """The group's load over its replicas: concurrency and prompts split evenly, the rate divided."""
    n = len(replicas)
    if n == 0:
        raise BenchRunError("the group has no ready replica")
    prompts = num_prompts if num_prompts is not None else preset.num_prompts
    if prompts < n:
        raise BenchRunError(f"{prompts} prompts cannot be split over {n} replicas (at least 1 each)")
    if concurrency is not None and concurrency < n:
        raise BenchRunError(f"concurrency {concurrency} cannot be split over {n} replicas (at least 1 each)")
    conc = split_evenly(concurrency, n) if concurrency is not None else [None] * n
    per_prompts = split_evenly(prompts, n)
    total_rate = rate if rate is not None else preset.request_rate
    per_rate = None if total_rate is None or math.isinf(total_rate) else total_rate / n
    base_seed = preset.seed or 0
    return [
        ReplicaLoad(v.name, v.node, conc[i], per_rate, per_prompts[i], base_seed + i) for i, v in enumerate(replicas)
    ]


class GroupBenchRunner:
    def __init__(
        self, pool: TransportPool | None = None, *, poll_every: float = 1.0, fleet: FleetTelemetry | None = None
    ) -> None:
        self.pool = pool or TransportPool()
        # each client is a single serving run; the group records its GPUs once per node (below)
        self.runner = BenchRunner(self.pool, record_telemetry=False)
        self.fleet = fleet
        self.record_telemetry = True
        self.clients = NodeRuns(self.pool, error=BenchRunError, what="benchmark client")
        self.poll_every = poll_every

    async def _start_client(
        self,
        node: NodeSpec,
        *,
        preset: BenchPreset,
        base_url: str,
        model: str,
        tokenizer: str | None,
        name: str,
        max_concurrency: int | None,
        go_file: str,
        instance: str,
        extra_env: Mapping[str, str] | None,
    ) -> tuple[str, ...]:
        """One client as a single serving run, held at the start barrier: its argv, as it will run."""
        cmd = await self.clients.agent(node)
        spec = self.runner.spec(
            node,
            cmd,
            preset,
            name=name,
            base_url=base_url,
            model=model,
            tokenizer=tokenizer,
            max_concurrency=max_concurrency,
            instance=instance,
            extra_env=extra_env,
        )
        held = (node.python, "-c", _HOLD, go_file, str(HOLD_LIMIT), *spec.argv)
        await self.clients.start(node, cmd, dataclasses.replace(spec, argv=held))
        return spec.argv

    async def _go_file(self, node: NodeSpec, go_files: dict[str, str], group: str, stamp: str) -> str:
        path = go_files.get(node.name)
        if path is None:
            cmd = await self.clients.agent(node)
            path = go_files[node.name] = NodeRuns.folder(cmd, f".go-{group[:40]}-{stamp}")
        return path

    async def _release(self, nodes: Mapping[str, NodeSpec], go_files: Mapping[str, str]) -> None:
        """Every node's go file at once: the held clients start together."""

        async def one(name: str, path: str) -> None:
            # the runs folder exists: a client was started there
            await self.pool.get(nodes[name]).run(["touch", path], timeout=30)

        await asyncio.gather(*(one(n, p) for n, p in go_files.items()))

    async def _tidy(self, nodes: Mapping[str, NodeSpec], go_files: Mapping[str, str]) -> None:
        for name, path in go_files.items():
            try:
                await self.pool.get(nodes[name]).run(["rm", "-f", path], timeout=30)
            except TransportError:
                pass

    async def _cancel_all(self, started: Sequence[tuple[NodeSpec, InstanceView, ReplicaLoad, str, tuple]]) -> None:
        """Never leave half a group's clients running (nor held ones waiting for nothing)."""
        for node, _view, _load, name, _argv in started:
            try:
                await self.clients.cancel(node, name)
            except (TransportError, BenchRunError):
                pass

    async def _wait_quietly(self, node: NodeSpec, run: str, argv: tuple[str, ...]) -> RunOutcome:
        """Wait for a client without streaming its output, then collect it."""
        await self.clients.wait(node, run, poll_every=self.poll_every)
        return await self.runner.collect(node, run, argv=argv)

    async def run(
        self,
        nodes: Sequence[NodeSpec],
        group: GroupView,
        preset: BenchPreset,
        *,
        overrides: Mapping[str, str] | None = None,
        concurrency: int | None = None,
        rate: float | None = None,
        num_prompts: int | None = None,
        url: str | None = None,
        on_event: Callable[[str, BenchEvent], None] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> GroupBenchOutcome:
        """Drive every ready replica at once (or `url` with one client); on_event gets (replica, event)."""
        base = preset
        try:
            preset = apply_bench_overrides(preset, dict(overrides or {}))
        except ValueError as exc:
            raise BenchRunError(str(exc)) from None
        changes = preset_changes(base, preset)
        for key, value in (("max_concurrency", concurrency), ("request_rate", rate), ("num_prompts", num_prompts)):
            if value is not None:
                changes[key] = value
        by_name = {n.name: n for n in nodes}
        ready = [v for v in group.replicas if v.state == InstanceState.READY and v.node in by_name]
        if not ready:
            raise BenchRunError(f"group {group.name}: no replica is ready ({group.summary()})")
        if url and not url.startswith(("http://", "https://")):
            raise BenchRunError(f"--url {url!r}: expected http://HOST:PORT")
        plan = None
        if preset.cold_start == "reset":  # every server the load reaches (behind a URL: every ready one)
            plan = await self.runner.cold_start([(by_name[v.node], v) for v in ready], preset)
            if plan.seed is not None:  # each replica's seed follows from it (split_load)
                preset = dataclasses.replace(preset, seed=plan.seed)
                changes["seed"] = plan.seed
            if plan.extra_args is not None:
                preset = dataclasses.replace(preset, extra_args=plan.extra_args)
        targets: list[InstanceView]
        if url:
            targets = [ready[0]]
            loads = [
                ReplicaLoad(
                    "lb",
                    ready[0].node,
                    concurrency,
                    rate,
                    num_prompts if num_prompts is not None else preset.num_prompts,
                    preset.seed or 0,
                )
            ]
        else:
            targets = ready
            loads = split_load(ready, preset, concurrency=concurrency, rate=rate, num_prompts=num_prompts)
        detailed = preset if "--save-detailed" in preset.extra_args else None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        load_tag = f"c{concurrency}" if concurrency is not None else (f"r{rate:g}" if rate is not None else "inf")
        go_files: dict[str, str] = {}
        started: list[tuple[NodeSpec, InstanceView, ReplicaLoad, str, tuple[str, ...]]] = []
        for view in targets:  # the go file's path per node, before the clients start in parallel
            await self._go_file(by_name[view.node], go_files, group.name, stamp)
        gate = asyncio.Semaphore(START_PARALLEL)

        async def start_one(view: InstanceView, load: ReplicaLoad) -> None:
            node = by_name[view.node]
            client = dataclasses.replace(
                detailed or preset,
                extra_args=tuple(preset.extra_args) + (() if detailed else ("--save-detailed",)),
                num_prompts=load.num_prompts,
                request_rate=load.request_rate if load.request_rate is not None else preset.request_rate,
                seed=load.seed,
            )
            model, tokenizer = client_target(view)
            if not model:
                raise BenchRunError(f"{view.node}: replica {view.name} serves no known model")
            # <= 64 characters, the supervisor's limit: group (30) tail load stamp
            tail = "lb" if url else load.replica.rsplit("-", 1)[-1]
            name = f"{group.name[:30].rstrip('-.')}-{tail[:5]}-{load_tag[:8]}-{stamp}"
            async with gate:
                argv = await self._start_client(
                    node,
                    preset=client,
                    base_url=url.rstrip("/") if url else f"http://127.0.0.1:{view.port}",
                    model=model,
                    tokenizer=tokenizer,
                    name=name,
                    max_concurrency=load.max_concurrency,
                    go_file=go_files[node.name],
                    instance=view.name,
                    extra_env=extra_env,
                )
            started.append((node, view, load, name, argv))

        results = await asyncio.gather(*(start_one(v, ld) for v, ld in zip(targets, loads)), return_exceptions=True)
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            await self._cancel_all(started)
            raise failure
        order = {v.name: i for i, v in enumerate(targets)}
        started.sort(key=lambda s: order[s[1].name])
        # The servers' /metrics while the clients are still held, and after: each client's check
        # against its replica, and the prefix cache of every replica the load reached.
        watched = [v for _n, v, _l, _nm, _a in started] if not url else ready
        try:
            befores = await self._scrape_all(by_name, watched)
        except BaseException:
            await self._cancel_all(started)
            raise
        recorders = self._recorders(targets) if self.record_telemetry else []
        async with contextlib.AsyncExitStack() as stack:
            for rec in recorders:
                await stack.enter_async_context(
                    run_telemetry.recording(rec, fleet=self.fleet, pool=self.pool, node=by_name[rec.node])
                )
            outcome = await self._drive(by_name, group, started, go_files, url, on_event, loads)
        telemetry = merge_records([r for r in (rec.record() for rec in recorders) if r is not None])
        try:
            afters = await self._scrape_all(by_name, watched)
        except (TransportError, OSError):
            afters = [None] * len(befores)
        checks: tuple[cc.ClientCheck | None, ...] = ()
        if not url:
            checks = tuple(client_check_of(o.result, b, a) for o, b, a in zip(outcome.outcomes, befores, afters))
        windows = [prefix_window_of(b, a) for b, a in zip(befores, afters)]
        outcome = measured_group(outcome, preset, windows, plan)
        return dataclasses.replace(outcome, telemetry=telemetry, client_checks=checks, overrides=changes)

    def _recorders(self, targets: Sequence[InstanceView]) -> list[run_telemetry.RunTelemetryRecorder]:
        """One recorder per node, for the GPUs of every replica driven on it."""
        gpus: dict[str, set[int]] = {}
        for v in targets:
            gpus.setdefault(v.node, set()).update(v.gpus)
        return [run_telemetry.RunTelemetryRecorder(node, sorted(g)) for node, g in gpus.items() if g]

    async def _scrape_all(
        self, by_name: Mapping[str, NodeSpec], views: Sequence[InstanceView]
    ) -> list[tuple[float, str] | None]:
        async def one(v: InstanceView) -> tuple[float, str] | None:
            return await self.runner.scrape(by_name[v.node], v.port) if v.port else None

        return list(await asyncio.gather(*(one(v) for v in views)))

    async def _drive(
        self,
        by_name: Mapping[str, NodeSpec],
        group: GroupView,
        started: list[tuple[NodeSpec, InstanceView, ReplicaLoad, str, tuple[str, ...]]],
        go_files: dict[str, str],
        url: str | None,
        on_event: Callable[[str, BenchEvent], None] | None,
        loads: Sequence[ReplicaLoad],
    ) -> GroupBenchOutcome:
        """Release the held clients, follow them to their end, merge their results."""
        try:
            await self._release(by_name, go_files)
        except BaseException:
            await self._cancel_all(started)
            raise
        per_node_followed: dict[str, int] = {}

        async def one(node: NodeSpec, view: InstanceView, load: ReplicaLoad, name: str, argv) -> RunOutcome:
            count = per_node_followed.get(node.name, 0)
            if count < FOLLOWED_PER_NODE:
                per_node_followed[node.name] = count + 1

                def emit(event: BenchEvent) -> None:
                    if on_event:
                        on_event(load.replica, event)

                return await self.runner.follow(
                    node, view if not url else dataclasses.replace(view, port=None), name, on_event=emit, argv=argv
                )
            return await self._wait_quietly(node, name, argv)

        try:
            outcomes = await asyncio.gather(*(one(*s) for s in started))
        except BaseException:
            await self._cancel_all(started)
            raise
        finally:
            await self._tidy(by_name, go_files)
        result, merge_error = None, None
        jsons = [(load.replica, node.name, o.result_json) for (node, _v, load, _n, _a), o in zip(started, outcomes)]
        if all(j is not None for _, _, j in jsons):
            try:
                # a thread: a million ITL samples take seconds to sort, the UI's loop must not wait
                result = await asyncio.to_thread(
                    merge_results,
                    group.name if not url else f"{group.name} via {url}",
                    [(r, n, j) for r, n, j in jsons if j is not None],
                )
            except GroupResultError as exc:
                merge_error = str(exc)
        else:
            merge_error = "a client wrote no result"
        return GroupBenchOutcome(
            group=group.name,
            outcomes=tuple(outcomes),
            loads=tuple(loads),
            result=result,
            url=url,
            merge_error=merge_error,
        )


def measured_group(
    outcome: GroupBenchOutcome,
    preset: BenchPreset,
    windows: Sequence[PrefixCacheWindow | None],
    cold_start: ColdStart | None = None,
) -> GroupBenchOutcome:
    """The group's outcome with each client's prefix-cache share and goodput (its own replica's
    counters, its own requests: serving.measured), and the group's: the counters of every replica
    the load reached added up, the good requests of every client over all of them (issue B2).
    windows: one per replica scraped (behind a URL, every ready replica: no client has its own)."""
    per_client = outcome.url is None and len(windows) == len(outcome.outcomes)
    outcomes = tuple(
        measured(dataclasses.replace(o, prefix_window=windows[i] if per_client else None), preset, cold_start)
        for i, o in enumerate(outcome.outcomes)
    )
    slo = slo_of(preset)
    duration = outcome.result.duration if outcome.result is not None else None
    good = combined_goodput([goodput_of(o.result, slo) for o in outcomes], duration) if slo is not None else None
    prefix = prefix_cache_json(
        combined_window(windows),
        cold=is_cold(preset.dataset, preset.cold),
        cold_start=preset.cold_start,
        cold_start_done=cold_start.done if cold_start is not None else None,
        cold_start_note=cold_start.note if cold_start is not None else None,
    )
    return dataclasses.replace(outcome, outcomes=outcomes, prefix_cache=prefix, goodput=goodput_json(slo, good))


def merge_records(records: Sequence[RunTelemetry]) -> RunTelemetry | None:
    """Several nodes' records as one (times from the earliest start)."""
    if not records:
        return None
    if len(records) == 1:
        return records[0]
    start = min(r.start for r in records)
    gpus = []
    for r in records:
        shift = round(r.start - start, 3)
        for g in r.gpus:
            cols = dict(g.columns)
            cols["t"] = tuple(None if t is None else round(t + shift, 3) for t in cols["t"])
            gpus.append(
                dataclasses.replace(
                    g,
                    end=round(g.end + shift, 3),
                    columns=cols,
                    episodes=tuple(Episode(e.start + shift, e.end + shift) for e in g.episodes),
                )
            )
    return RunTelemetry(start=start, gpus=tuple(gpus), max_points=records[0].max_points)


def energy_summary(outcome: GroupBenchOutcome) -> dict:
    """The group's energy keys (issue P) for an experiment's point and the report."""
    r = outcome.result
    if outcome.telemetry is None:
        doc: dict = dict.fromkeys(("energy_j", "avg_power_w", "tokens_per_joule", "throttled_pct"))
    else:
        tokens = float(r.total_output_tokens) if r is not None and r.total_output_tokens is not None else None
        doc = summarize(outcome.telemetry, tokens).as_fields()
    doc["client_bound"] = outcome.client_bound
    return doc


def summary_of(outcome: GroupBenchOutcome, *, nodes: int | None = None) -> dict:
    """What an experiment stores per point: the group's result keys, per-replica lines, and why it failed."""
    doc: dict = dict(outcome.result.as_result_json()) if outcome.result else {}
    doc.update(energy_summary(outcome))
    doc["nodes"] = nodes if nodes is not None else len({load.node for load in outcome.loads})
    # issue B2: beside the throughput in the experiment's report (None: no SLO / not counted)
    doc["goodput_pct"] = (outcome.goodput or {}).get("goodput_pct")
    doc["good_rps"] = (outcome.goodput or {}).get("good_rps")
    doc["prefix_cache_hit_pct"] = (outcome.prefix_cache or {}).get("hit_pct")
    doc["prefix_cache_warning"] = (outcome.prefix_cache or {}).get("warning")
    doc["ok"] = outcome.ok
    if outcome.reason:
        doc["reason"] = outcome.reason
    per = []
    for load, o in zip(outcome.loads, outcome.outcomes):
        r: BenchResult | None = o.result
        per.append(
            {
                "replica": load.replica,
                "node": load.node,
                "run": o.run,
                "max_concurrency": load.max_concurrency,
                "num_prompts": load.num_prompts,
                "completed": r.completed if r else None,
                "output_throughput": r.output_throughput if r else None,
                "median_ttft_ms": r.latency("ttft") if r else None,
                "p99_ttft_ms": r.latency("ttft", "p99") if r else None,
                "ok": o.ok,
            }
        )
    doc["per_replica"] = per
    return doc


def format_group_outcome(outcome: GroupBenchOutcome) -> str:
    r = outcome.result
    head = f"group {outcome.group}" + (f" via {outcome.url}" if outcome.url else "")
    if r is None:
        return f"{head}: no result ({outcome.reason})"
    lines = [
        f"{head}: {'ok' if outcome.ok else 'FAILED — ' + (outcome.reason or '')}",
        f"  completed {r.completed}  failed {r.failed}  duration {fmt_num(r.duration, '{:.2f}')} s",
        f"  output {r.output_throughput:.1f} tok/s  total {r.total_token_throughput:.1f} tok/s  requests {r.request_throughput:.2f}/s  (sum of {len(r.replicas)} clients)",
    ]
    for metric in ("ttft", "tpot", "itl", "e2el"):
        if metric in r.latency:
            lines.append(
                f"  {metric.upper():<5} mean {r.stat(metric, 'mean'):.2f}  median {r.stat(metric, 'median'):.2f}  "
                f"p99 {fmt_num(r.stat(metric, 'p99'), '{:.2f}')} ms  (merged over {r.latency[metric].count} samples)"
            )
    lines += [f"  {line}" for line in workload_lines_of(outcome.goodput, outcome.prefix_cache)]
    for rep, load in zip(r.replicas, outcome.loads):
        res = rep.result
        lines.append(
            f"  {rep.name:<28} c {load.max_concurrency or '-':<4} completed {res.completed}  "
            f"{fmt_num(res.output_throughput, '{:.1f}')} tok/s  median TTFT {fmt_num(res.latency('ttft'), '{:.2f}')} ms"
        )
    return "\n".join(lines)


def store_group(
    store: ResultStore,
    outcome: GroupBenchOutcome,
    group: GroupView,
    preset: BenchPreset,
    *,
    label: str | None = None,
    extra: Mapping[str, object] | None = None,
) -> list[str]:
    """Each client's result, then the group's merged one (naming them), in the results store: ids."""
    if outcome.result is None:
        return []
    views = {v.name: v for v in group.replicas}
    ids: list[str] = []
    for load, o in zip(outcome.loads, outcome.outcomes):
        if o.result_json is None:
            continue
        view = views.get(load.replica)
        context = {
            "node": load.node,
            "instance": load.replica,
            "serve_preset": view.preset if view else None,
            "serve_args": list(view.argv) if view else [],
            "vllm_version": view.version if view else None,
            "client_argv": list(o.argv),
            "gpus": list(view.gpus) if view else [],
            "group": group.name,
            **(extra or {}),
        }
        i = len(ids)
        check = outcome.client_checks[i] if i < len(outcome.client_checks) else None
        ids.append(
            store.save(
                run_from_console(
                    context,
                    o.result_json,
                    {},
                    setup=preset,
                    label=label,
                    client_check=check,
                    overrides=outcome.overrides,
                    prefix_cache=o.prefix_cache,
                    goodput=o.goodput,
                )
            )
        )
    context = {
        "node": ",".join(group.nodes),
        "instance": group.name,
        "serve_preset": group.preset,
        "group": group.name,
        "replica_runs": ids,
        "url": outcome.url,
        **(extra or {}),
    }
    ids.append(
        store.save(
            run_from_console(
                context,
                outcome.result.as_result_json(),
                {},
                setup=preset,
                label=label,
                telemetry=outcome.telemetry,
                client_check=outcome.group_check(),
                overrides=outcome.overrides,
                prefix_cache=outcome.prefix_cache,
                goodput=outcome.goodput,
            )
        )
    )
    return ids
