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
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.core.instance_view import InstanceState, InstanceView
from console.core.model import ModelsConfig, NodeSnapshot, NodeSpec
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

if TYPE_CHECKING:
    from console.core.store.pulls import PullRecord
    from console.services.history import History

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


@dataclass(frozen=True, slots=True)
class NodeModelSettings:
    """What the models ops of one node use: the node's keys, else the profile's [models] table."""

    hf_endpoint: str | None = None
    hf_home: str | None = None
    model_dirs: tuple[str, ...] = ()
    max_packing_sum: float = 0.95


def settings_for(node: NodeSpec, config: ModelsConfig | None = None) -> NodeModelSettings:
    base = config or ModelsConfig()
    return NodeModelSettings(
        hf_endpoint=node.hf_endpoint or base.hf_endpoint,
        hf_home=node.hf_home or base.hf_home,
        model_dirs=node.model_dirs or base.model_dirs,
        max_packing_sum=base.max_packing_sum,
    )


def simulated_hub(node: NodeSpec) -> bool:
    """A simulated node whose vLLM is the simulator's: its models come from the simulated hub. A
    simulated node with a real vLLM (the integration tests' node) uses the real huggingface_hub."""
    return node.simulate is not None and node.vllm == "vllm"


def _argv(
    node: NodeSpec, command: AgentCommand, op: str, *extra: str, settings: NodeModelSettings | None = None
) -> list[str]:
    # every option before the positional (the model), which the builder puts after a `--`
    options: list[str] = []
    if simulated_hub(node):  # a simulated node (NVIDIA ones too) with the simulated vLLM reads the simulated hub
        options += ["--amdsmi-path", f"{command.bundle_dir}/sim"]
    else:  # the vLLM venv's python has huggingface_hub: the agent runs the op there
        options += ["--vllm", node.vllm]
    options += ["--state-dir", command.state_dir]
    for folder in (settings or settings_for(node)).model_dirs:
        options += ["--model-dir", folder]
    return command.argv("models", op, *options, *extra)


async def _agent(
    pool: TransportPool,
    node: NodeSpec,
    op: str,
    *extra: str,
    settings: NodeModelSettings | None = None,
    secrets: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    transport = pool.get(node)
    command = await install_agent(transport, node)
    settings = settings or settings_for(node)
    env = command.env_dict()
    if settings.hf_home:
        env["HF_HOME"] = settings.hf_home
    result = await transport.run(
        _argv(node, command, op, *extra, settings=settings),
        env=env,
        input=json.dumps(dict(secrets or {})),  # HF_TOKEN on stdin: never in argv, `ps` or a log
        timeout=MODELS_TIMEOUT,
        max_output=AGENT_OUTPUT_LIMIT,
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


async def node_models(
    pool: TransportPool,
    node: NodeSpec,
    instances: Sequence[InstanceView] = (),
    settings: NodeModelSettings | None = None,
) -> NodeModels:
    """What the node holds, each model with the (live) instances that serve it."""
    records = await _agent(pool, node, "list", settings=settings)
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


async def model_facts(
    pool: TransportPool, node: NodeSpec, model: str, settings: NodeModelSettings | None = None
) -> ModelFacts:
    """The model's facts from its config.json on the node (and its index's real size)."""
    records = await _agent(pool, node, "config", "--", model, settings=settings)
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
    "pull_record",
    "record_pull",
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


# ---------------------------------------------------------------- pulls, removal, the serve preflight


def size_text(n: int | float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def duration_text(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


@dataclass(frozen=True, slots=True)
class PullStatus:
    """One pull on a node, as its supervisor and the bytes on the disk tell it."""

    node: str
    name: str
    model: str
    state: str  # running | done | failed | stopped
    bytes: int = 0
    total_bytes: int = 0
    rate: float | None = None  # bytes per second over the last seconds
    eta: float | None = None
    revision: str | None = None
    target: str | None = None
    path: str | None = None
    error: str | None = None
    attached: bool = False  # `models pull` found it already running
    pid: int | None = None
    cancelled: bool = False  # `models pull --cancel` stopped it (it was running)
    started: float | None = None  # when the node started it (its supervisor's clock)
    ended: float | None = None
    files: int | None = None

    @property
    def percent(self) -> float:
        return 100.0 * self.bytes / self.total_bytes if self.total_bytes else 0.0

    def progress_text(self) -> str:
        text = f"{size_text(self.bytes)} of {size_text(self.total_bytes)} ({self.percent:.0f} %)"
        if self.state == "running":
            if self.rate:
                text += f", {size_text(self.rate)}/s"
            if self.eta is not None:
                text += f", ETA {duration_text(self.eta)}"
        return text

    def not_cancelled(self) -> str:
        """Why `--cancel` stopped nothing: the pull's real state, in one line."""
        head = f"{self.node}: {self.model}: no running pull to cancel"
        if self.state == "done":
            return f"{head}: it is done ({size_text(self.total_bytes)} in {self.path})"
        if self.state == "failed":
            return f"{head}: it failed: {self.error}"
        if self.state == "stopped":
            return f"{head}: it is stopped at {self.progress_text()}"
        return f"{head}: it is {self.state}"

    def line(self) -> str:
        head = f"{self.node}: {self.model}"
        if self.state == "done":
            return f"{head}: pulled, {size_text(self.total_bytes)} in {self.path}"
        if self.state == "failed":
            return f"{head}: pull failed: {self.error}"
        if self.state == "stopped":
            return f"{head}: pull stopped at {self.progress_text()}; `models pull` again resumes it"
        return f"{head}: pulling {self.progress_text()}"

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__} | {"percent": round(self.percent, 1)}


def _pull_status(node: str, rec: Mapping[str, Any]) -> PullStatus:
    def num(key: str) -> float | None:
        value = rec.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    return PullStatus(
        node=node,
        name=str(rec.get("name")),
        model=str(rec.get("model")),
        state=str(rec.get("state")),
        bytes=int(rec.get("bytes") or 0),
        total_bytes=int(rec.get("total_bytes") or 0),
        rate=num("rate"),
        eta=num("eta"),
        revision=rec.get("revision"),
        target=rec.get("target"),
        path=rec.get("path"),
        error=rec.get("error"),
        attached=bool(rec.get("attached")),
        pid=rec.get("pid") if isinstance(rec.get("pid"), int) else None,
        cancelled=rec.get("cancelled") is True,
        started=num("started"),
        ended=num("ended"),
        files=int(rec["files"]) if isinstance(rec.get("files"), int) else None,
    )


def hub_secrets(settings: NodeModelSettings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """HF_TOKEN from the console's environment (else the node's own), and the mirror: sent on stdin."""
    import os

    env = os.environ if environ is None else environ
    out = {}
    if env.get("HF_TOKEN"):
        out["token"] = env["HF_TOKEN"]
    if settings.hf_endpoint:
        out["endpoint"] = settings.hf_endpoint
    return out


def redact(text: str, secrets: Mapping[str, str]) -> str:
    token = secrets.get("token")
    return text.replace(token, "***") if token else text


async def start_pull(
    pool: TransportPool,
    node: NodeSpec,
    model: str,
    *,
    revision: str | None = None,
    exclude: Sequence[str] = (),
    to: str | None = None,
    settings: NodeModelSettings | None = None,
    cancel: bool = False,
    dry_run: bool = False,
    history: History | None = None,
) -> PullStatus:
    """Start the pull detached on the node (or find it running); ModelsError: the one-line refusal.
    `history`: the face's, where the pull's row is written (record_pull: best effort)."""
    settings = settings or settings_for(node)
    secrets = hub_secrets(settings)
    extra: list[str] = []
    if revision:
        extra += ["--revision", revision]
    for glob in exclude:
        extra += ["--exclude", glob]
    if to:
        extra += ["--to", to]
    if cancel:
        extra.append("--cancel")
    if dry_run:
        extra.append("--dry-run")
    extra += ["--", model]  # whatever it starts with, the model is never an option of the agent
    try:
        records = await _agent(pool, node, "pull", *extra, settings=settings, secrets=secrets)
    except ModelsError as exc:
        raise ModelsError(redact(str(exc), secrets)) from None
    rec = next((r for r in records if r.get("kind") in ("pull", "plan")), None)
    if rec is None:
        raise ModelsError(f"{node.name}: model {model}: the agent sent no pull record")
    if rec.get("kind") == "plan":
        return PullStatus(node.name, "", model, "plan", int(rec.get("have_bytes") or 0), int(rec["total_bytes"]))
    status = _pull_status(node.name, rec)
    await record_pull_async(history, status)  # started (or found running, or cancelled): its row
    return status


async def node_pulls(
    pool: TransportPool, node: NodeSpec, settings: NodeModelSettings | None = None, history: History | None = None
) -> list[PullStatus]:
    """Every pull the node's supervisor knows: running, done, failed or stopped. `history`:
    each is recorded there (a pull started detached, or by another console, ended meanwhile)."""
    records = await _agent_or_empty(pool, node, "pulls", settings=settings)
    pulls = [_pull_status(node.name, r) for r in records if r.get("kind") == "pull"]
    if history is not None and pulls:
        await asyncio.to_thread(lambda: [record_pull(history, p) for p in pulls])
    return pulls


async def _agent_or_empty(pool: TransportPool, node: NodeSpec, op: str, **kw: Any) -> list[dict[str, Any]]:
    try:
        return await _agent(pool, node, op, **kw)
    except ModelsError as exc:
        if "gave no answer (exit 0)" in str(exc):  # no pulls: no lines
            return []
        raise


async def follow_pull(
    pool: TransportPool,
    node: NodeSpec,
    model: str,
    on_status: Any,
    *,
    interval: float = 1.0,
    timeout: float | None = None,
    settings: NodeModelSettings | None = None,
    silent_limit: float = 300.0,
    history: History | None = None,
) -> PullStatus:
    """Poll the pull until it ends. A dropped link is retried (the pull goes on without us) for
    `silent_limit` seconds; a pull the node no longer lists ends the follow after as long.
    `history`: the pull's row is updated there when its state changes (its end)."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    last: PullStatus | None = None
    last_seen = loop.time()
    recorded: tuple[float | None, str] | None = None
    while True:
        why = "no pull of it on the node"
        try:
            pulls = await node_pulls(pool, node, settings)
        except (TransportError, OSError) as exc:
            pulls = []
            why = f"the node does not answer ({exc}); the pull goes on there"
        found = next((p for p in pulls if p.model == model), None)
        now = loop.time()
        if found is not None:
            last, last_seen = found, now
            on_status(found)
            if recorded != (found.started, found.state):
                recorded = (found.started, found.state)
                await record_pull_async(history, found)
            if found.state != "running":
                return found
        elif now - last_seen > silent_limit:
            raise ModelsError(f"{node.name}: model {model}: {why}")
        if deadline is not None and now > deadline:
            if last is None:
                raise ModelsError(f"{node.name}: model {model}: {why}")
            return last
        await asyncio.sleep(interval)


# ---------------------------------------------------------------- pulls in the history (the store)


def pull_record(status: PullStatus, origin: str | None = None) -> PullRecord | None:
    """The store's record of a pull as the node tells it; None when it is not one yet (no start
    time: its supervisor is starting it) or not a pull (a dry run's plan)."""
    from console.core.store.pulls import PullRecord, one_line, pull_id, pull_state

    state = pull_state(status.state)
    if state is None or status.started is None:
        return None
    message = {
        "ok": f"into {status.path}" if status.path else None,
        "failed": status.error,
        "cancelled": f"stopped at {size_text(status.bytes)} of {size_text(status.total_bytes)}",
    }.get(state)
    return PullRecord(
        id=pull_id(status.node, status.model, status.started),
        node=status.node,
        model=status.model,
        started=status.started,
        state=state,
        bytes=status.bytes,
        total_bytes=status.total_bytes,
        revision=status.revision,
        target=status.target,
        ended=status.ended if state != "running" else None,
        files=status.files,
        message=one_line(message),
        origin=origin,
    )


# what each History has had written, by pull id: its state (a write only when that changes)
_RECORDED: weakref.WeakKeyDictionary[History, dict[str, str]] = weakref.WeakKeyDictionary()


def record_pull(history: History | None, status: PullStatus) -> bool:
    """Write the pull's row through the face's History; whether it was written. Best effort: a
    store that cannot be opened (History.problem says why) or fails under us never stops,
    fails or delays a pull; the node keeps the pull's own record either way."""
    from console.services.results import StoreError

    record = pull_record(status, history.origin) if history is not None else None
    if history is None or record is None:
        return False
    seen = _RECORDED.setdefault(history, {})
    if seen.get(record.id) == record.state:
        return False  # written already: a screen that reads the pulls every 2 s writes nothing
    try:
        table = history.pulls
    except StoreError:
        return False  # retried after History's RETRY_AFTER_S, at the pull's next change
    try:
        wrote = table.record(record)
    except StoreError as exc:
        history.lost(exc)
        return False
    seen[record.id] = record.state  # written, or the stored row has ended already: final
    return wrote


async def record_pull_async(history: History | None, status: PullStatus) -> None:
    if history is not None:  # a thread: opening the store (and its catch-up) never holds the loop
        await asyncio.to_thread(record_pull, history, status)


ENDED = (InstanceState.EXITED, InstanceState.FAILED, InstanceState.STOPPED)


def users_of(model: str, views: Sequence[InstanceView], node: str) -> list[str]:
    """The running instances of the node that serve `model` (by name, or a path of its cache)."""
    out = []
    for v in views:
        if v.node != node or not v.model or v.state in ENDED:
            continue
        if v.model == model or f"/models--{model.replace('/', '--')}/" in v.model + "/":
            out.append(v.name)
    return out


async def remove_model(
    pool: TransportPool,
    node: NodeSpec,
    model: str,
    instances: Sequence[InstanceView],
    *,
    revision: str | None = None,
    settings: NodeModelSettings | None = None,
) -> tuple[list[str], int]:
    """Delete the model from the node's cache (huggingface_hub's delete strategy); refused while
    an instance serves it. Returns (revisions removed, bytes freed)."""
    users = users_of(model, instances, node.name)
    if users:
        raise ModelsError(f"{node.name}: model {model} is in use by {', '.join(users)}: stop it first")
    extra = (["--revision", revision] if revision else []) + ["--", model]
    records = await _agent(pool, node, "rm", *extra, settings=settings)
    rec = next((r for r in records if r.get("kind") == "removed"), None)
    if rec is None:
        raise ModelsError(f"{node.name}: model {model}: the agent removed nothing")
    return [str(r) for r in rec.get("revisions") or ()], int(rec.get("freed_bytes") or 0)


def pull_command(node: str, model: str, profile_flag: str = "") -> str:
    return f"rocm-console models pull {model} --node {node}{profile_flag}"


async def serve_preflight(
    pool: TransportPool, node: NodeSpec, model: str, settings: NodeModelSettings | None = None
) -> str | None:
    """None when the node can serve `model` from what it holds, else one line: a local path without
    its config.json, or a model not on the node with its size on the hub and the pull command."""
    settings = settings or settings_for(node)
    if not model.startswith("/") and model.count("/") != 1:
        return None  # neither a folder on the node nor a hub repo id (org/name): vLLM decides
    try:
        await _agent(pool, node, "config", "--", model, settings=settings)
        return None
    except ModelsError as exc:
        reason = str(exc)
    if "huggingface_hub missing" in reason:
        return None  # the node cannot tell: vLLM will say
    if model.startswith("/"):
        return reason
    size = ""
    try:
        plan = await start_pull(pool, node, model, settings=settings, dry_run=True)
        size = f" ({size_text(plan.total_bytes)} on the hub)"
    except (ModelsError, TransportError, OSError):
        pass  # the hub does not answer: the line goes without the size
    return f"{node.name}: model {model} is not on the node{size}; pull it first: {pull_command(node.name, model)}"
