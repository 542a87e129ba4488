"""Baselines per node: run a suite (console/core/baseline/suite.py) on a node, store it
with the node's versions and settings, run it again later and judge the difference.

A run of a suite starts its own instance of the suite's serve preset, runs the serving
points round-robin (each repeat a `vllm bench serve` through the one run API,
console/services/runs/serving.py), then the accuracy repeats (lm_eval through
console/services/runs/accuracy.py), stops and forgets the instance, then runs the
offline points (`vllm bench latency|throughput`, runs/offline.py) on the freed GPUs.
No second benchmark runner: each repeat is an ordinary run of its kind.

Stored under the data dir: `baselines/<node>/<name>.json` holds the suite's text (a
check runs exactly what the baseline ran, even if the file changed since), every
repeat's metrics, and the node's versions and settings. `node-versions/<node>.json`
holds the last versions seen of each node and any change not yet acknowledged (the
fleet's change mark, `node.changed` events).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from console.core.baseline.diff import (
    NodeVersions,
)
from console.core.baseline.names import BASELINE_NAME
from console.core.baseline.report import ACCURACY, CheckReport, PointRuns, build_report
from console.core.baseline.suite import SERVING, Suite, SuiteError, SuitePoint, check_suite
from console.core.bench.argv import apply_bench_overrides
from console.core.bench.offline import OfflineError, OfflinePreset, apply_offline_overrides, offline_metrics
from console.core.bounded_file import RESULT_FILE_LIMIT, read_bounded_text
from console.core.model import BenchPreset, NodeSnapshot, NodeSpec, Profile, ServePreset
from console.core.node_files import node_file_stem
from console.core.node_json import loads_document
from console.core.results.offline import accuracy_metrics
from console.services.baseline_record import (
    BASELINE_FORMAT,
    BaselineError,
    StoredBaseline,
    baseline_from_dict,
    check_baseline_name,
)
from console.services.instances import ENDED, InstanceError, InstanceService, InstanceState
from console.services.node_versions import VersionsBook, data_dir, node_changed_event, versions_of, write_json
from console.services.runs.accuracy import AccuracyError, AccuracyRunner
from console.services.runs.offline import OfflineClient, OfflineRunError, OfflineRunner
from console.services.runs.serving import BenchRunError, BenchRunner
from console.services.status import sample_node
from console.services.tether import Tether, tethered
from console.services.transports import TransportPool
from console.transport.base import TransportError

__all__ = [
    "BASELINE_FORMAT",
    "BaselineError",
    "BaselineRunner",
    "BaselineStore",
    "StoredBaseline",
    "SuiteRun",
    "VersionsBook",
    "node_changed_event",
    "versions_of",
]

# a file name under the node's folder: no `/`, and never `.`, `..`, a hidden file or an option (W2)
_NAME_RE = BASELINE_NAME


# ---------------------------------------------------------------- stored baselines


@dataclass(frozen=True)
class SuiteRun:
    """One run of a suite on a node: every point's repeats and the node's versions."""

    node: str
    suite: Suite
    suite_text: str
    runs: tuple[PointRuns, ...]
    versions: NodeVersions | None
    started: float
    finished: float
    notes: tuple[str, ...] = ()  # one line per failed repeat


class BaselineStore:
    """`<data dir>/baselines/<node>/<name>.json`."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else data_dir() / "baselines"

    @staticmethod
    def check_name(name: str) -> str:
        return check_baseline_name(name)

    def path(self, node: str, name: str) -> Path:
        return self.root / node_file_stem(node) / f"{self.check_name(name)}.json"

    def save(self, baseline: StoredBaseline) -> Path:
        path = self.path(baseline.node, baseline.name)
        try:
            write_json(path, baseline.to_dict())
        except OSError as exc:
            raise BaselineError(f"cannot write {path}: {exc.strerror or exc}") from None
        return path

    def get(self, node: str, name: str) -> StoredBaseline:
        path = self.path(node, name)
        try:
            text = read_bounded_text(path, RESULT_FILE_LIMIT, "baseline")
        except FileNotFoundError:
            known = [b.name for b in self.list(node)]
            hint = f" (known: {', '.join(known)})" if known else " (save one with `baseline save`)"
            raise BaselineError(f"no baseline {name!r} for node {node}{hint}") from None
        except OSError as exc:
            raise BaselineError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            doc = loads_document(text)
        except ValueError as exc:
            raise BaselineError(f"{path}: not JSON ({exc})") from None
        return baseline_from_dict(doc, str(path))

    def list(self, node: str | None = None) -> list[StoredBaseline]:
        """Every readable baseline (of one node), by node then name; broken files are skipped."""
        out = []
        folders = [self.root / node_file_stem(node)] if node else sorted(self.root.glob("*"))
        for folder in folders:
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                try:
                    text = read_bounded_text(path, RESULT_FILE_LIMIT, "baseline")
                    out.append(baseline_from_dict(loads_document(text), str(path)))
                except (OSError, ValueError, BaselineError):
                    continue
        return out

    def remove(self, node: str, name: str) -> bool:
        try:
            self.path(node, name).unlink()
        except FileNotFoundError:
            return False
        return True


# ---------------------------------------------------------------- running a suite


def check_against_profile(suite: Suite, profile: Profile) -> None:
    """The suite's preset names against the profile (SuiteError naming file, line, key)."""
    from console.core.bench.offline import PRESETS_PATH, load_offline_presets

    try:
        offline = [(p.kind, p.name) for p in load_offline_presets(PRESETS_PATH)]
    except Exception:  # noqa: BLE001 - the shipped file is checked by its own tests
        offline = []
    check_suite(
        suite,
        serve_presets=[p.name for p in profile.serve_presets],
        bench_presets={b.name: tuple(b.max_concurrency) for b in profile.bench_presets},
        offline_presets=offline,
    )


def _bench_preset(point: SuitePoint, profile: Profile) -> BenchPreset:
    base = next((b for b in profile.bench_presets if b.name == point.preset), None) if point.preset else None
    if base is None:  # no preset: the random dataset at the point's lengths
        base = BenchPreset(name=point.name, dataset="random", ignore_eos=True, percentile_metrics="ttft,tpot,itl,e2el")
    overrides = point.overrides()
    concurrency = overrides.pop("max_concurrency", None)
    try:
        preset = apply_bench_overrides(base, overrides)
    except ValueError as exc:
        raise BaselineError(f"point {point.name}: {exc}") from None
    if concurrency is not None:
        preset = replace(preset, max_concurrency=(int(concurrency),))
        if "rate" not in dict(point.settings):  # a load level is as fast as that many in flight allow
            preset = replace(preset, request_rate=None)
    return preset


def _offline_preset(point: SuitePoint, serve: ServePreset) -> OfflinePreset:
    from console.core.bench.offline import PRESETS_PATH, load_offline_presets

    base: OfflinePreset | None = None
    if point.preset:
        base = next(
            (p for p in load_offline_presets(PRESETS_PATH) if p.kind == point.kind and p.name == point.preset), None
        )
        if base is None:
            raise BaselineError(f"point {point.name}: no [{point.kind}.{point.preset}] offline preset")
    else:  # the serve preset's model and engine flags
        base = OfflinePreset(
            name=point.name, kind=point.kind, model=serve.model, tp=serve.tp, args=serve.args, env=serve.env
        )
    try:
        return apply_offline_overrides(base, point.overrides())
    except OfflineError as exc:
        raise BaselineError(f"point {point.name}: {exc}") from None


Say = Callable[[str], None]


def free_gpus(snapshot: NodeSnapshot, count: int) -> tuple[int, ...]:
    """The first `count` GPUs with no process and under 5 % of their memory in use; BaselineError
    when there are not that many (a suite wants GPUs nobody else is using)."""
    latest = {g.index: g for g in snapshot.latest.gpus} if snapshot.latest else {}
    free = []
    for static in snapshot.static:
        m = latest.get(static.index)
        if m is None or m.processes:
            continue
        if m.vram_used_mib and m.vram_total_mib and m.vram_used_mib > 0.05 * m.vram_total_mib:
            continue
        free.append(static.index)
    if len(free) < count:
        raise BaselineError(f"{snapshot.name}: {len(free)} idle GPUs, the suite's preset needs {count}: give --gpus")
    return tuple(free[:count])


class BaselineRunner:
    """Runs a suite on one node: its own instance, the repeats, the versions."""

    def __init__(
        self,
        pool: TransportPool | None = None,
        *,
        lm_eval: str | None = None,
        ready_timeout: float = 900.0,
        stop_timeout: float = 30.0,
    ) -> None:
        self.pool = pool or TransportPool()
        self.instances = InstanceService(self.pool)
        self.bench = BenchRunner(self.pool, record_telemetry=False)
        self.offline = OfflineRunner(self.pool)
        self.offline.record_telemetry = False
        self.accuracy = AccuracyRunner(self.pool, lm_eval=lm_eval)
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout

    async def run(
        self,
        node: NodeSpec,
        suite: Suite,
        profile: Profile,
        *,
        suite_text: str,
        gpus: Sequence[int] = (),  # () = the first idle ones
        extra_env: Mapping[str, str] | None = None,
        say: Say | None = None,
        instance: str | None = None,
        port: int | None = None,
    ) -> SuiteRun:
        """Run the suite; `instance`: on that ready instance of the node instead of one of its
        own (its flags are the settings recorded; offline points cannot run beside it)."""
        say = say or (lambda line: None)
        try:
            check_against_profile(suite, profile)
        except SuiteError as exc:
            raise BaselineError(str(exc)) from None
        serve = next(p for p in profile.serve_presets if p.name == suite.serve)
        env = dict(extra_env or {})
        started = time.time()
        try:
            snapshot = await sample_node(self.pool, node, probe=True)
        except TransportError as exc:
            raise BaselineError(f"{node.name}: {exc.reason}") from None
        if snapshot.error:
            raise BaselineError(f"{node.name}: {snapshot.error}")
        gpus = tuple(gpus) or free_gpus(snapshot, serve.tp)
        results: dict[str, list[Mapping[str, float] | None]] = {}
        kinds: dict[str, str] = {}
        notes: list[str] = []
        serving = [(p, r) for p, r in suite.plan() if p.kind == SERVING]
        offline = [(p, r) for p, r in suite.plan() if p.kind != SERVING]
        settings_args: Sequence[str] = ()
        if instance is not None and offline:
            raise BaselineError(f"suite {suite.name}: offline points need the GPUs free: run it without --instance")
        if instance is not None:
            view = await self._ready(node, instance)
            settings_args = view.argv
            await self._serving_phase(node, view, instance, suite, profile, env, serving, results, kinds, notes, say)
        else:
            # what the suite starts itself (its instance, its offline runs) ends with this command (W2)
            async with self._tether(node) as tie:
                try:
                    settings_args = await self._own_phases(
                        node, suite, profile, serve, gpus, snapshot, port, env, tie.env, results, kinds, notes, say
                    )
                except BaselineError:
                    if tie.lost:  # the root cause, not the failure it led to
                        raise BaselineError(tie.lost) from None
                    raise
                if tie.lost:
                    raise BaselineError(tie.lost)
        preset_env = {**dict(serve.env), **env}
        versions = versions_of(
            node.name,
            snapshot.probe,
            snapshot,
            preset_env=preset_env,
            serve_args=settings_args,
            captured=started,
            simulated=node.simulate is not None,
        )
        runs = tuple(PointRuns(p, kinds[p], tuple(reps)) for p, reps in results.items())
        return SuiteRun(node.name, suite, suite_text, runs, versions, started, time.time(), tuple(notes))

    async def _own_phases(
        self, node, suite, profile, serve, gpus, snapshot, port, env, tie_env, results, kinds, notes, say
    ) -> Sequence[str]:
        """The suite on an instance of its own, then its offline points; the instance's flags."""
        settings_args: Sequence[str] = ()
        serving = [(p, r) for p, r in suite.plan() if p.kind == SERVING]
        offline = [(p, r) for p, r in suite.plan() if p.kind != SERVING]
        if serving or suite.accuracy is not None:
            name = f"baseline-{suite.name}"[:48].rstrip("-.")
            await self._clear(node, name)
            say(f"{node.name}: starting {suite.serve} as {name} on GPU {','.join(map(str, gpus))}")
            try:
                view = await self.instances.start(
                    node,
                    serve,
                    gpus=gpus,
                    snapshot=snapshot,
                    name=name,
                    port=port,
                    overrides=dict(suite.serve_set),
                    extra_env={**env, **tie_env},
                )
            except (InstanceError, TransportError) as exc:
                raise BaselineError(f"{node.name}: cannot start {suite.serve}: {exc}") from None
            try:
                view = await self.instances.wait_ready(node, name, timeout=self.ready_timeout)
                if view.state != InstanceState.READY:
                    raise BaselineError(f"{node.name}: {name} did not come up: {view.reason or view.state.value}")
                say(f"{node.name}: {name} ready")
                settings_args = view.argv
                await self._serving_phase(node, view, name, suite, profile, env, serving, results, kinds, notes, say)
            finally:
                await asyncio.shield(self._clear(node, name))
                say(f"{node.name}: {name} stopped")
        for i, (point, repeat) in enumerate(offline, 1):
            metrics = await self._offline_repeat(node, point, serve, gpus, snapshot, notes, repeat, tie_env)
            results.setdefault(point.name, []).append(metrics)
            kinds[point.name] = point.kind
            say(f"  [{i}/{len(offline)}] {point.name} #{repeat}: {_headline(metrics, point.metrics)}")
        return settings_args

    @contextlib.asynccontextmanager
    async def _tether(self, node: NodeSpec) -> AsyncIterator[Tether]:
        """This command's tether on the node (services/tether.py); one that cannot start is one line."""
        stack = contextlib.AsyncExitStack()
        try:
            tie = await stack.enter_async_context(tethered(self.pool, node))
        except TransportError as exc:
            raise BaselineError(f"{node.name}: cannot tie the suite's instance to this command: {exc}") from None
        async with stack:
            yield tie

    async def _serving_phase(self, node, view, name, suite, profile, env, serving, results, kinds, notes, say) -> None:
        """The serving points round-robin, then the accuracy repeats, against one instance."""
        for i, (point, repeat) in enumerate(serving, 1):
            metrics = await self._serving_repeat(node, view, point, profile, env, notes, repeat)
            results.setdefault(point.name, []).append(metrics)
            kinds[point.name] = point.kind
            say(f"  [{i}/{len(serving)}] {point.name} #{repeat}: {_headline(metrics, point.metrics)}")
        acc = suite.accuracy
        for repeat in range(1, acc.repeats + 1 if acc is not None else 1):
            metrics = await self._accuracy_repeat(node, name, suite, notes, repeat)
            results.setdefault(ACCURACY, []).append(metrics)
            kinds[ACCURACY] = ACCURACY
            say(
                f"  accuracy {acc.task if acc else ''} #{repeat}: {_headline(metrics, acc.metrics if acc else (), digits=4)}"
            )

    async def _ready(self, node: NodeSpec, name: str):
        try:
            views = await self.instances.list_checked(node)
        except (InstanceError, TransportError) as exc:
            raise BaselineError(f"{node.name}: {exc}") from None
        view = next((v for v in views if v.name == name), None)
        if view is None:
            raise BaselineError(f"{node.name}: no instance named {name}")
        if view.state != InstanceState.READY:
            raise BaselineError(f"{node.name}: instance {name} is {view.state.value}, not ready")
        return view

    async def _clear(self, node: NodeSpec, name: str) -> None:
        """Stop and forget the suite's instance (one left by a killed run, or ours at the end)."""
        try:
            view = await self.instances.get(node, name)
            if view is None:
                return
            if view.state not in ENDED:
                await self.instances.stop(node, name, int_timeout=self.stop_timeout, term_timeout=10)
            await self.instances.remove(node, name)
        except (InstanceError, TransportError):
            pass

    async def _serving_repeat(self, node, view, point: SuitePoint, profile, env, notes, repeat) -> dict | None:
        preset = _bench_preset(point, profile)
        try:
            outcome = await self.bench.run(
                node, view, preset, max_concurrency=preset.max_concurrency[0] if preset.max_concurrency else None,
                extra_env=dict(env),
            )  # fmt: skip
        except (BenchRunError, TransportError) as exc:
            notes.append(f"{point.name} #{repeat}: {exc}")
            return None
        if not outcome.ok or outcome.result is None:
            notes.append(f"{point.name} #{repeat}: {outcome.reason}")
            return None
        return {k: float(v) for k, v in outcome.result.metrics.items() if isinstance(v, (int, float))}

    async def _accuracy_repeat(self, node, name: str, suite: Suite, notes, repeat) -> dict | None:
        acc = suite.accuracy
        assert acc is not None
        try:
            outcome = await self.accuracy.run(
                node, name, task=acc.task, limit=acc.limit, dataset=acc.dataset, num_fewshot=acc.num_fewshot
            )
            return accuracy_metrics(outcome.results, acc.task)
        except (AccuracyError, ValueError, TransportError) as exc:
            notes.append(f"accuracy #{repeat}: {exc}")
            return None

    async def _offline_repeat(
        self, node, point: SuitePoint, serve, gpus, snapshot, notes, repeat, tie_env=None
    ) -> dict | None:
        preset = _offline_preset(point, serve)
        version = snapshot.probe.vllm if snapshot.probe else None
        how = OfflineClient(extra_env=tie_env or None)  # the run holds the GPUs: it ends with this command too
        try:
            outcome = await self.offline.run(node, preset, gpus[: max(1, preset.tp)], version=version, how=how)
        except (OfflineRunError, TransportError) as exc:
            notes.append(f"{point.name} #{repeat}: {exc}")
            return None
        if not outcome.ok or outcome.result_json is None:
            notes.append(f"{point.name} #{repeat}: {outcome.reason}")
            return None
        try:
            return offline_metrics(point.kind, outcome.result_json)
        except OfflineError as exc:
            notes.append(f"{point.name} #{repeat}: {exc}")
            return None


def _headline(metrics: Mapping[str, float] | None, names: Sequence[str], digits: int = 1) -> str:
    if metrics is None:
        return "failed"
    shown = [(n, metrics[n]) for n in names[:3] if n in metrics]
    if not shown:
        shown = [(k, v) for k, v in metrics.items() if not k.endswith("_stderr")][:2]
    return "  ".join(f"{n} {v:.{digits}f}" for n, v in shown)


def baseline_of(name: str, run: SuiteRun) -> StoredBaseline:
    return StoredBaseline(
        name=name,
        node=run.node,
        suite_file=run.suite.file,
        suite_text=run.suite_text,
        created=run.finished,
        runs=run.runs,
        versions=run.versions,
        seconds=run.finished - run.started,
    )


def check_report(baseline: StoredBaseline, run: SuiteRun) -> CheckReport:
    """Judge a fresh run of the suite against the stored baseline."""
    report = build_report(
        baseline.suite(),
        baseline.runs,
        run.runs,
        name=baseline.name,
        node=baseline.node,
        before=baseline.versions,
        after=run.versions,
        saved_at=baseline.created,
        checked_at=run.finished,
    )
    if run.notes:
        report = replace(report, problems=report.problems + tuple(run.notes))
    return report
