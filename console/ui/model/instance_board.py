"""What the console knows about vLLM instances: the poller's lists merged with live progress.

Pure (no Textual). The poller replaces a node's list every few seconds; the start and
stop workers report progress in between (stage, ready, failed, stopping). Progress
fills what a plain list cannot say, and the list wins once it knows more (the process
ended). Counters per node tell the widgets what to redraw.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

from console.core.instance_view import InstanceState, InstanceView
from console.core.serve.stage import ServeStage

State = InstanceState
RUNNING = (State.STARTING, State.LOADING, State.READY, State.STOPPING)
ACTIVE = RUNNING + (State.UNMANAGED,)  # holds its GPUs
ENDED = (State.FAILED, State.EXITED, State.STOPPED)

# Display levels (the GPU table and the panel map them to theme colours).
READY, LOADING, FAILED, UNMANAGED, ENDED_LEVEL = "ready", "loading", "failed", "unmanaged", "ended"

_GLYPH = {
    State.READY: "●",
    State.STARTING: "◐",
    State.LOADING: "◐",
    State.STOPPING: "◌",
    State.FAILED: "✖",
    State.EXITED: "○",
    State.STOPPED: "○",
    State.UNMANAGED: "◇",
}

_STAGE_RANK = {s.value: i for i, s in enumerate(ServeStage)}
MISSES_TO_FORGET = 2


def level(view: InstanceView) -> str:
    if view.state == State.READY:
        return READY
    if view.state in (State.STARTING, State.LOADING, State.STOPPING):
        return LOADING
    if view.state == State.FAILED:
        return FAILED
    if view.state == State.UNMANAGED:
        return UNMANAGED
    return ENDED_LEVEL


def glyph(view: InstanceView) -> str:
    return _GLYPH.get(view.state, "?")


def stage_label(stage: str | None) -> str:
    return stage.replace("-", " ") if stage else ""


def state_word(view: InstanceView) -> str:
    """One or two words: 'ready', 'kv cache' (the stage while loading), 'failed', 'stopping'."""
    if view.state in (State.STARTING, State.LOADING):
        if view.stage == ServeStage.READY.value:
            return "health check"  # the log says ready, /health has not answered yet
        return stage_label(view.stage) or view.state.value
    return view.state.value


def detail(view: InstanceView) -> str:
    """The panel's detail column: the stage and its detail, the failure reason, the exit."""
    if view.state == State.FAILED:
        return view.reason or (f"exited with code {view.exit_code}" if view.exit_code is not None else "failed")
    if view.state in (State.STARTING, State.LOADING):
        parts = [stage_label(view.stage) or "waiting for the first log line"]
        if view.stage_detail:
            parts.append(view.stage_detail)
        return ": ".join(parts)
    if view.state == State.READY:
        served = ", ".join(view.served_models)
        return f"serving {served}" if served else "ready"
    if view.state == State.STOPPING:
        return "stopping (SIGINT, then SIGTERM)"
    if view.state in (State.STOPPED, State.EXITED):
        return _ended(view, signal="ended by signal", code="exited with code")
    if view.state == State.UNMANAGED:
        return "started outside the console" + (f" (pid {view.pid})" if view.pid else "")
    return ""


def _ended(view: InstanceView, *, signal: str, code: str) -> str:
    """How a stopped or exited instance ended: its reason, else the signal, else the exit code."""
    if view.reason:
        return view.reason
    if view.exit_signal:
        return f"{signal} {view.exit_signal}"
    return f"{code} {view.exit_code}" if view.exit_code is not None else "exited"


def short_detail(view: InstanceView) -> str:
    """A few words for a table cell: the stage, the failure's short reason, how it ended."""
    if view.state in (State.STARTING, State.LOADING):
        return stage_label(view.stage) or "waiting for the log"
    if view.state == State.FAILED:
        if view.reason:
            return view.reason.split(": ", 1)[0]
        return f"exit code {view.exit_code}" if view.exit_code is not None else "failed"
    if view.state == State.READY:
        return f"vLLM {view.version}" if view.version else "health ok"
    if view.state == State.STOPPING:
        return "SIGINT sent"
    if view.state in (State.STOPPED, State.EXITED):
        return _ended(view, signal="signal", code="exit code")
    if view.state == State.UNMANAGED:
        return "not started here"
    return ""


def gpu_text(views: Sequence[InstanceView]) -> tuple[str, str, str]:
    """(name, state word, level) for a GPU's cell; several instances: the first '+N'."""
    first = views[0]
    name = first.name if len(views) == 1 else f"{first.name} +{len(views) - 1}"
    return name, state_word(first), level(first)


def _stage_rank(stage: str | None) -> int:
    return _STAGE_RANK.get(stage or "", -1)


def merge(polled: InstanceView, live: InstanceView | None) -> InstanceView:
    """One instance as the list saw it, completed by what a worker saw since."""
    if live is None or (live.pid is not None and polled.pid is not None and live.pid != polled.pid):
        return polled
    stage, stage_detail = polled.stage, polled.stage_detail
    if _stage_rank(live.stage) > _stage_rank(stage):
        stage, stage_detail = live.stage, live.stage_detail
    reason = live.reason or polled.reason
    if polled.state in (State.STARTING, State.LOADING, State.READY):
        # Still running: the worker knows better (ready, stopping, or failing as we speak).
        state = polled.state if live.state == State.STARTING else live.state
        if polled.state == State.READY and live.state in (State.STARTING, State.LOADING):
            state = State.READY
        served = polled.served_models or live.served_models
        return replace(
            polled,
            state=state,
            stage=stage,
            stage_detail=stage_detail,
            reason=reason,
            served_models=served,
            version=polled.version or live.version,
        )
    if polled.state in ENDED:
        # Ended: the list is right about that; a stop we asked for reads 'stopped'.
        state = State.STOPPED if live.state in (State.STOPPED, State.STOPPING) else polled.state
        return replace(polled, state=state, stage=stage, stage_detail=stage_detail, reason=reason)
    return polled


class InstanceBoard:
    def __init__(self, nodes: Iterable[str] = ()) -> None:
        self._polled: dict[str, list[InstanceView]] = {n: [] for n in nodes}
        self._live: dict[tuple[str, str], InstanceView] = {}
        self._misses: dict[tuple[str, str], int] = {}  # lists in a row without a live record's instance
        self._merged: dict[str, list[InstanceView]] = {}
        self._on_gpu: dict[str, dict[int, tuple[InstanceView, ...]]] = {}
        self.errors: dict[str, str] = {}  # node -> why its last poll failed
        self.polled_once: set[str] = set()
        self.generation: dict[str, int] = dict.fromkeys(nodes, 0)
        self.version = 0

    # ------------------------------------------------------------ in

    def _bump(self, node: str) -> None:
        self.generation[node] = self.generation.get(node, 0) + 1
        self.version += 1
        self._merged.pop(node, None)
        self._on_gpu.pop(node, None)
        # A multi-node instance's worker rows show its head's state: redraw them too.
        for other, views in self._polled.items():
            if other != node and any(node in v.nodes for v in views):
                self.generation[other] = self.generation.get(other, 0) + 1
                self._merged.pop(other, None)
                self._on_gpu.pop(other, None)

    def set_polled(self, node: str, views: Sequence[InstanceView] | None, error: str | None = None) -> bool:
        """A poll's result (views None: it failed, keep the last list). True if anything changed."""
        changed = False
        if error != self.errors.get(node):
            if error:
                self.errors[node] = error
            else:
                self.errors.pop(node, None)
            changed = True
        if views is not None:
            views = list(views)
            self.polled_once.add(node)
            if views != self._polled.get(node):
                self._polled[node] = views
                changed = True
            # A worker's record goes once its instance was started again (another pid) or is
            # gone from the node (forgotten). Gone means missing from two lists in a row: the
            # first may have been read just before the instance started.
            by_name = {v.name: v for v in views}
            for key in [k for k in self._live if k[0] == node]:
                live, seen = self._live[key], by_name.get(key[1])
                if seen is None:
                    self._misses[key] = self._misses.get(key, 0) + 1
                    gone = live.state in ENDED or self._misses[key] >= MISSES_TO_FORGET
                else:
                    self._misses.pop(key, None)
                    gone = bool(live.pid and seen.pid and live.pid != seen.pid)
                if gone:
                    del self._live[key]
                    self._misses.pop(key, None)
                    changed = True
        if changed:
            self._bump(node)
        return changed

    def progress(self, view: InstanceView) -> None:
        """A worker's news about one instance (start progress, ready, failed, stopping, stopped)."""
        key = (view.node, view.name)
        self._misses.pop(key, None)
        if self._live.get(key) != view:
            self._live[key] = view
            self._bump(view.node)

    def drop_live(self, node: str, name: str) -> None:
        """A worker's news turned out wrong (its action failed): back to what the list says."""
        if self._live.pop((node, name), None) is not None:
            self._bump(node)

    def forget(self, node: str, name: str) -> None:
        self._live.pop((node, name), None)
        polled = self._polled.get(node, [])
        kept = [v for v in polled if v.name != name]
        if len(kept) != len(polled):
            self._polled[node] = kept
        self._bump(node)

    # ------------------------------------------------------------ out

    @property
    def nodes(self) -> list[str]:
        return list(self._polled)

    def views(self, node: str | None = None) -> list[InstanceView]:
        if node is None:
            every = [v for n in self._polled for v in self.views(n)]
            # a multi-node instance once: its head's row stands for the worker rows
            heads = {(v.name, v.nodes) for v in every if v.nodes and v.node == v.nodes[0]}
            return [v for v in every if not (v.nodes and v.node != v.nodes[0] and (v.name, v.nodes) in heads)]
        merged = self._merged.get(node)
        if merged is None:
            polled = self._polled.get(node, [])
            names = {v.name for v in polled}
            merged = [merge(v, self._live.get((node, v.name))) for v in polled]
            # Started since the last poll: only the worker knows it yet.
            merged += [v for (n, name), v in self._live.items() if n == node and name not in names]
            merged = [self._as_head(v) for v in merged]
            self._merged[node] = merged
        return merged

    def _as_head(self, v: InstanceView) -> InstanceView:
        """A multi-node instance's row: a worker's in its head's state (its own node and GPUs);
        the head's failed while a worker's Ray has ended (that worker's reason)."""
        if not v.nodes or v.nodes[0] not in self._polled:
            return v
        if v.node == v.nodes[0]:
            if v.state in RUNNING:
                for other in v.nodes[1:]:
                    w = next((w for w in self._polled.get(other, []) if w.name == v.name), None)
                    if w is not None and w.state in ENDED:
                        return replace(v, state=State.FAILED, reason=w.reason or f"node {other}: Ray exited")
            return v
        if v.state in ENDED:
            return v
        head = next((h for h in self.views(v.nodes[0]) if h.name == v.name), None)
        if head is None:
            return v
        return replace(head, node=v.node, gpus=v.gpus, pid=v.pid)

    def find(self, node: str, name: str) -> InstanceView | None:
        return next((v for v in self.views(node) if v.name == name), None)

    def on_gpus(self, node: str) -> dict[int, tuple[InstanceView, ...]]:
        """The instances each GPU shows: the active ones, else the latest one if it failed."""
        found = self._on_gpu.get(node)
        if found is not None:
            return found
        active: dict[int, list[InstanceView]] = {}
        latest_ended: dict[int, InstanceView] = {}
        for v in self.views(node):
            for gpu in v.gpus:
                if v.state in ACTIVE:
                    active.setdefault(gpu, []).append(v)
                elif gpu not in latest_ended or (v.started or 0) > (latest_ended[gpu].started or 0):
                    latest_ended[gpu] = v
        found = {g: tuple(vs) for g, vs in active.items()}
        for gpu, v in latest_ended.items():
            if gpu not in found and v.state == State.FAILED:
                found[gpu] = (v,)
        self._on_gpu[node] = found
        return found

    def counts(self, node: str) -> dict[str, int]:
        """Active instances of a node by display level (ready / loading / unmanaged)."""
        out: dict[str, int] = {}
        for v in self.views(node):
            if v.state in ACTIVE:
                out[level(v)] = out.get(level(v), 0) + 1
        return out

    def busy_gpus(self, node: str) -> set[int]:
        return {g for v in self.views(node) if v.state in ACTIVE for g in v.gpus}


def node_summary(counts: dict[str, int]) -> str:
    """'3 instances: 2 ready, 1 loading' for a node header ('' without any)."""
    total = sum(counts.values())
    if not total:
        return ""
    parts = [f"{counts[k]} {k}" for k in (READY, LOADING, UNMANAGED) if counts.get(k)]
    noun = "instance" if total == 1 else "instances"
    if len(parts) == 1:
        return f"{total} {noun} {parts[0].split(' ', 1)[1]}"  # '2 instances ready'
    return f"{total} {noun}: {', '.join(parts)}"


def middle_cut(text: str, width: int, tail: int = 0) -> str:
    """`llama-3.1-8b…cpx-g13`: the start and the end of a name, an ellipsis between, in `width`
    cells; at least `tail` characters of the end are kept (the part that tells names apart)."""
    if len(text) <= width:
        return text
    if width <= 2:
        return text[-width:]
    keep = min(width - 2, max(tail, (width - 1) // 2))
    head = width - 1 - keep
    return text[:head] + "…" + text[len(text) - keep :]


def distinct_cuts(names: Sequence[str], width: int) -> list[str]:
    """Names cut to `width` so that names that differ stay different: each keeps the end that
    differs from the name most like it (instances of one preset differ in their last part)."""
    out = []
    unique = list(dict.fromkeys(names))
    for name in names:
        shared = max((_common_prefix(name, other) for other in unique if other != name), default=0)
        head = width - 1 - (width - 1) // 2  # what a plain middle cut keeps of the start
        out.append(middle_cut(name, width, tail=0 if shared < head else len(name) - shared))
    return out


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
