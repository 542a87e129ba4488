"""Models on the nodes and whether they fit: `models list`, `serve plan`, the start dialog's fit.

The node's agent reads its Hugging Face cache with huggingface_hub's own scanner
(console/agent/models.py); here the console asks it, joins the instances that use each
model, and turns a model's config.json and the node's GPUs into a fit plan
(console/core/models/fit.py). A simulated node answers from its simulated cache, built in the
hub's real layout from the seeds' real config.json files (console/sim/huggingface_hub).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.core.instance_view import InstanceView
from console.core.model import NodeSnapshot, NodeSpec
from console.core.models.config import ModelConfigError, ModelFacts, read_config, weight_bytes_from_index
from console.core.models.fit import (
    GPU_SPECS,
    FitError,
    FitPrediction,
    KvCapacity,
    LoggedKv,
    PlanRow,
    ServeSettings,
    compare,
    logged_kv,
    plan_table,
    predict,
    predict_cpu,
)
from console.core.models.settings import settings_from_args
from console.services.agent_bundle import AgentCommand, install_agent
from console.services.transports import TransportPool
from console.transport.base import AGENT_OUTPUT_LIMIT, TransportError

MODELS_TIMEOUT = 60.0  # a big cache is scanned file by file (stat only)
RECORD_TIMEOUT = 15.0  # the prediction after a start: best effort


class ModelsError(Exception):
    """One line naming the node and the model or the reason."""


@dataclass(frozen=True, slots=True)
class NodeModel:
    node: str
    name: str
    source: str  # hf-cache | dir
    path: str
    revision: str | None
    size_bytes: int
    complete: bool
    incomplete_reason: str | None = None
    used_by: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in ((k, getattr(self, k)) for k in self.__slots__)}


@dataclass(frozen=True, slots=True)
class NodeSpace:
    node: str
    place: str
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class NodeModels:
    node: str
    models: tuple[NodeModel, ...] = ()
    spaces: tuple[NodeSpace, ...] = ()
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "models": [m.as_dict() for m in self.models],
            "free_space": [
                {"place": s.place, "free_bytes": s.free_bytes, "total_bytes": s.total_bytes} for s in self.spaces
            ],
            "warnings": list(self.warnings),
        }


def _argv(node: NodeSpec, command: AgentCommand, op: str, *extra: str) -> list[str]:
    argv = command.argv("models", op, *extra)
    if node.simulate is not None:  # every simulated node (NVIDIA ones too) reads the simulated hub
        argv += ["--amdsmi-path", f"{command.bundle_dir}/sim"]
    return argv


async def _agent(pool: TransportPool, node: NodeSpec, op: str, *extra: str) -> list[dict[str, Any]]:
    transport = pool.get(node)
    command = await install_agent(transport, node)
    result = await transport.run(
        _argv(node, command, op, *extra), env=command.env_dict(), timeout=MODELS_TIMEOUT, max_output=AGENT_OUTPUT_LIMIT
    )
    records = []
    for line in result.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    error = next((r for r in records if r.get("kind") == "error"), None)
    if error is not None:
        raise ModelsError(f"{node.name}: {str(error.get('message') or 'the models op failed')[:300]}")
    if result.exit_status != 0 or not records:
        last = next((ln for ln in reversed(result.stderr.splitlines()) if ln.strip()), "")
        raise ModelsError(f"{node.name}: the agent's models op gave no answer (exit {result.exit_status}) {last}")
    return records


def uses(view: InstanceView, model: NodeModel) -> bool:
    return bool(view.model) and view.model in (model.name, model.path)


async def node_models(pool: TransportPool, node: NodeSpec, instances: Sequence[InstanceView] = ()) -> NodeModels:
    """What the node holds, each model with the (live) instances that serve it."""
    records = await _agent(pool, node, "list")
    models = []
    for rec in records:
        if rec.get("kind") != "model":
            continue
        model = NodeModel(
            node=node.name,
            name=str(rec.get("name")),
            source=str(rec.get("source")),
            path=str(rec.get("path")),
            revision=rec.get("revision"),
            size_bytes=int(rec.get("size_bytes") or 0),
            complete=bool(rec.get("complete")),
            incomplete_reason=rec.get("incomplete_reason"),
        )
        users = tuple(v.name for v in instances if v.node == node.name and uses(v, model))
        models.append(NodeModel(**{**{k: getattr(model, k) for k in model.__slots__}, "used_by": users}))
    spaces = tuple(
        NodeSpace(node.name, str(r.get("place")), int(r.get("free_bytes") or 0), int(r.get("total_bytes") or 0))
        for r in records
        if r.get("kind") == "space"
    )
    warnings = tuple(str(r.get("message")) for r in records if r.get("kind") == "warning")
    return NodeModels(node.name, tuple(models), spaces, warnings)


async def model_facts(pool: TransportPool, node: NodeSpec, model: str) -> ModelFacts:
    """The model's facts from its config.json on the node (and its index's real size)."""
    records = await _agent(pool, node, "config", model)
    rec = next((r for r in records if r.get("kind") == "config"), None)
    if rec is None or not isinstance(rec.get("config"), dict):
        raise ModelsError(f"{node.name}: model {model}: the agent sent no config.json")
    return facts_from(model, rec["config"], rec.get("index"))


def facts_from(model: str, config: Mapping[str, Any], index: Any = None) -> ModelFacts:
    weight_bytes = None
    if isinstance(index, dict):
        try:
            weight_bytes = weight_bytes_from_index(index, name=f"{model}'s model.safetensors.index.json")
        except ModelConfigError:
            weight_bytes = None  # the estimate from config.json stands in
    try:
        return read_config(config, name=model, weight_bytes=weight_bytes)
    except ModelConfigError as exc:
        raise ModelsError(str(exc)) from None


# ---------------------------------------------------------------- the node's GPUs


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """What the plan needs of a node: its GPU kind, physical count, current mode, logical memory."""

    gpu: str
    physical: int
    compute: str | None
    memory: str | None
    memory_caps: tuple[str, ...]
    logical_mib: Mapping[int, float] = field(default_factory=dict)  # logical GPU -> its reported memory


def node_gpus(snapshot: NodeSnapshot) -> NodeGpus:
    if not snapshot.static:
        raise ModelsError(f"{snapshot.name}: no GPUs reported")
    first = snapshot.static[0]
    name = (first.model or "").upper().replace("AMD INSTINCT", "").strip().replace(" ", "")
    kind = next((k for k in GPU_SPECS if k in name), None)
    if kind is None:
        raise ModelsError(
            f"{snapshot.name}: GPU {first.model or 'unknown'}: the fit plan knows {', '.join(GPU_SPECS)} only"
        )
    physical = len({g.physical for g in snapshot.static})
    caps = tuple(first.memory_caps)
    mib = {g.index: g.vram_total_mib for g in snapshot.static if g.vram_total_mib}
    return NodeGpus(kind, physical, first.compute_partition, first.memory_partition, caps, mib)


def plan(facts: ModelFacts, gpus: NodeGpus, settings: ServeSettings) -> list[PlanRow]:
    """Every mode x TP of the node, the current mode's memory as the device reports it."""
    reported = {}
    if gpus.compute and gpus.logical_mib:
        reported[gpus.compute.upper()] = min(gpus.logical_mib.values())
    try:
        return plan_table(
            facts,
            gpus.gpu,
            physical_gpus=gpus.physical,
            memory_modes=gpus.memory_caps or None,
            settings=settings,
            reported_mib=reported,
        )
    except FitError as exc:
        raise ModelsError(str(exc)) from None


def fit_on(facts: ModelFacts, gpus: NodeGpus, chosen: Sequence[int], settings: ServeSettings) -> FitPrediction:
    """The fit on the chosen logical GPUs (TP = how many), at their reported memory."""
    missing = [g for g in chosen if g not in gpus.logical_mib]
    if missing:
        raise ModelsError(f"GPU {missing[0]}: not on this node (or its memory is not reported)")
    memory = int(min(gpus.logical_mib[g] for g in chosen) * 1024 * 1024)
    from dataclasses import replace

    try:
        return predict(facts, memory, replace(settings, tp=len(chosen)))
    except FitError as exc:
        raise ModelsError(str(exc)) from None


__all__ = [
    "ModelsError",
    "NodeGpus",
    "NodeModel",
    "NodeModels",
    "TransportError",
    "facts_from",
    "fit_on",
    "model_facts",
    "node_gpus",
    "node_models",
    "plan",
]


# ---------------------------------------------------------------- prediction vs vLLM's log, kept


FIT_PAIRS = "fit-pairs.jsonl"
_MAX_PAIRS_BYTES = 4 << 20  # a line per start: thousands of starts before this


def fit_pairs_path() -> Path:
    """`$ROCM_CONSOLE_DATA_DIR/fit-pairs.jsonl`, else the user's data folder."""
    import os

    base = os.environ.get("ROCM_CONSOLE_DATA_DIR")
    if base:
        return Path(base).expanduser() / FIT_PAIRS
    import platformdirs

    return Path(platformdirs.user_data_path("rocm-console")) / FIT_PAIRS


def capacity_dict(kv: KvCapacity) -> dict[str, Any]:
    return {
        "kv_cache_bytes": kv.kv_cache_bytes,
        "kv_bytes_per_token": kv.kv_bytes_per_token,
        "block_size": kv.block_size,
        "max_model_len": kv.max_model_len,
    }


def capacity_from(d: Mapping[str, Any]) -> KvCapacity | None:
    try:
        return KvCapacity(
            int(d["kv_cache_bytes"]), int(d["kv_bytes_per_token"]), int(d["block_size"]), d.get("max_model_len")
        )
    except (KeyError, TypeError, ValueError):
        return None


class FitPairs:
    """The predictions made at starts and what vLLM logged after: one JSON line per event.

    A `predicted` line when an instance starts, a `logged` line once its log shows the KV-cache
    figures; `pairs()` joins them by (node, instance, started) so the prediction's error is known.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or fit_pairs_path()

    def _append(self, rec: Mapping[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > _MAX_PAIRS_BYTES:
                return  # bounded: the oldest pairs already tell the error
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec, sort_keys=True) + "\n")
        except OSError:
            pass  # a pair not kept never stops a start

    def predicted(self, node: str, instance: str, started: float | None, model: str, kv: KvCapacity) -> None:
        self._append(
            {"kind": "predicted", "node": node, "instance": instance, "started": started, "model": model}
            | {"capacity": capacity_dict(kv)}
        )

    def logged(self, node: str, instance: str, started: float | None, logged: LoggedKv) -> None:
        self._append(
            {
                "kind": "logged",
                "node": node,
                "instance": instance,
                "started": started,
                "tokens": logged.tokens,
                "concurrency": logged.concurrency,
                "context": logged.context,
            }
        )

    def records(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn last line
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def pairs(self) -> dict[tuple, dict[str, Any]]:
        """(node, instance, started) -> {"model", "predicted": KvCapacity dict, "comparison": ... or None}."""
        out: dict[tuple, dict[str, Any]] = {}
        for rec in self.records():
            key = (rec.get("node"), rec.get("instance"), rec.get("started"))
            if rec.get("kind") == "predicted":
                out[key] = {"model": rec.get("model"), "capacity": rec.get("capacity"), "comparison": None}
            elif rec.get("kind") == "logged" and key in out:
                kv = capacity_from(out[key].get("capacity") or {})
                if kv is not None:
                    got = LoggedKv(rec.get("tokens"), rec.get("concurrency"), rec.get("context"))
                    out[key]["comparison"] = compare(kv, got)
        return out


def fit_entry(pair: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What `serve list --json` shows under "fit" for an instance."""
    if pair is None:
        return None
    kv = capacity_from(pair.get("capacity") or {})
    comparison = pair.get("comparison")
    if comparison is not None:
        return {**comparison.as_dict(), "line": comparison.line()}
    if kv is None:
        return None
    return {
        "context": kv.max_model_len,
        "predicted_tokens": kv.logged_tokens(),
        "predicted_concurrency": kv.concurrency(),
        "logged_tokens": None,
        "logged_concurrency": None,
        "line": f"KV cache tokens: predicted {kv.logged_tokens() or 0:,}; vLLM has not logged its figure yet",
    }


def start_capacity(
    facts: ModelFacts,
    gpus: NodeGpus | None,
    chosen: Sequence[int],
    argv: Sequence[str],
    env: Mapping[str, str],
) -> KvCapacity | None:
    """The KV capacity predicted for a start: vLLM-CPU when VLLM_CPU_KVCACHE_SPACE is set, else the GPUs."""
    settings = settings_from_args(argv)
    space = env.get("VLLM_CPU_KVCACHE_SPACE")
    if space is not None:
        return predict_cpu(
            facts,
            kvcache_space_gib=int(space),
            dtype=settings.dtype,
            kv_cache_dtype=settings.kv_cache_dtype,
            max_model_len=settings.max_model_len,
        )
    if gpus is None:
        return None
    return fit_on(facts, gpus, chosen, settings).kv


async def record_start(
    pool: TransportPool,
    node: NodeSpec,
    view: InstanceView,
    snapshot: NodeSnapshot | None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Best effort, after a start: the prediction for it, kept for the comparison with vLLM's log."""
    if not view.model:
        return
    try:
        # bounded: a start never waits long for its prediction
        facts = await asyncio.wait_for(model_facts(pool, node, view.model), RECORD_TIMEOUT)
    except (ModelsError, TransportError, OSError, asyncio.TimeoutError):
        return  # a model the node cannot show: no pair, the start stands
    record_prediction(node.name, view, facts, snapshot, env)


def record_prediction(
    node: str,
    view: InstanceView,
    facts: ModelFacts,
    snapshot: NodeSnapshot | None,
    env: Mapping[str, str] | None = None,
    store: FitPairs | None = None,
) -> KvCapacity | None:
    """Keep the KV capacity predicted for a started instance (None: the plan cannot tell)."""
    try:
        gpus = node_gpus(snapshot) if snapshot is not None and snapshot.static else None
        kv = start_capacity(facts, gpus, view.gpus, view.argv, {**_env_of(view.argv), **(env or {})})
    except (ModelsError, FitError, ValueError):
        return None  # a GPU the plan does not know: no pair
    if kv is not None:
        (store or FitPairs()).predicted(node, view.name, view.started, facts.name, kv)
    return kv


def _env_of(argv: Sequence[str]) -> dict[str, str]:
    """`env A=1 B=2 vllm serve ...` → {A: 1, B: 2} (how the supervisor's argv carries the environment)."""
    env = {}
    for item in argv:
        key, eq, value = item.partition("=")
        if eq and key.isidentifier() and key.upper() == key:
            env[key] = value
    return env


async def refresh_logged(service: Any, node: NodeSpec, views: Sequence[InstanceView], store: FitPairs) -> None:
    """For instances with a prediction and no logged figures yet: read the log's KV lines once."""
    pairs = store.pairs()
    for v in views:
        pair = pairs.get((node.name, v.name, v.started))
        if pair is None or pair.get("comparison") is not None:
            continue
        lines = []
        try:
            async for line in service.log_lines(node, v.name, follow=False, lines=None):
                lines.append(line)
        except Exception:  # a log the node cannot give now: tried again at the next list
            continue
        got = logged_kv(lines)
        if got.tokens is not None or got.concurrency is not None:
            store.logged(node.name, v.name, v.started, got)
