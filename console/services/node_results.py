"""Benchmark results that stay on the node until the local store takes them.

Every benchmark run (serving or offline) writes its result into its folder on the
node, `<state_dir>/runs/<run>/result.json`, and the folder outlives the console.
When the local store cannot take a finished run (the data dir is a file, read-only,
the disk is full), `keep_on_node` writes the run as the console built it beside that
result (`console-run.json`: context, setup, live summary, label), and the one line
the user reads names that place. `fetch_run` (`rocm-console results fetch RUN`)
stores it later: the kept run as it was, or, for a run the console never got to
(it was closed, or another console started it), a run rebuilt from the node's
record and result file. The store's fingerprints make a second fetch a no-op.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from console.core.bench.offline import KINDS, OfflineError, OfflinePreset
from console.core.model import BenchPreset, NodeSpec
from console.core.node_json import loads_document
from console.core.results.build import run_from_console
from console.core.results.offline import run_from_offline
from console.core.results.record import StoredRun, run_from_dict, run_to_dict
from console.core.serve.argv import redact
from console.services.results import ResultStore
from console.services.runs.run import RESULT_FILE, NodeRuns, RunRecord
from console.services.transports import TransportPool
from console.transport.base import TransportError

__all__ = [
    "KEPT_FILE",
    "RESULT_FILE",
    "FetchError",
    "Fetched",
    "fetch_run",
    "keep_locally",
    "keep_on_node",
    "result_place",
]

KEPT_FILE = "console-run.json"  # the run as the console built it, when the store could not take it


class FetchError(Exception):
    """A run that cannot be fetched (unknown, still running, no result): one line."""


@dataclass(frozen=True)
class Fetched:
    run: StoredRun  # as stored (its id is the store's)
    new: bool  # False: the same result was stored already
    kept: bool  # True: the run the console kept on the node; False: rebuilt from the node's files


def _runs(pool: TransportPool) -> NodeRuns:
    return NodeRuns(pool, error=FetchError)


async def _run_folder(pool: TransportPool, node: NodeSpec, run: str) -> str:
    return NodeRuns.folder(await _runs(pool).agent(node), run)


async def result_place(pool: TransportPool, node: NodeSpec, run: str) -> str:
    """Where the run's result file is on the node (for the one line a user reads)."""
    try:
        return f"{await _run_folder(pool, node, run)}/{RESULT_FILE}"
    except TransportError:
        return f"<state_dir>/runs/{run}/{RESULT_FILE}"


async def keep_on_node(pool: TransportPool, node: NodeSpec, run_name: str, run: StoredRun) -> str:
    """Write `run` beside the result on the node (best effort); returns the result file's path there."""
    try:
        folder = await _run_folder(pool, node, run_name)
    except TransportError:
        return f"<state_dir>/runs/{run_name}/{RESULT_FILE}"
    text = json.dumps(run_to_dict(run), ensure_ascii=False, allow_nan=False)
    try:
        await pool.get(node).upload(text.encode("utf-8"), f"{folder}/{KEPT_FILE}", mode=0o600)
    except (TransportError, OSError):
        pass  # the result file itself stays; fetch rebuilds the run from it
    return f"{folder}/{RESULT_FILE}"


def keep_locally(run: StoredRun) -> str | None:
    """A run made on this machine (lm_eval, a group's merged result) that the store could not
    take: written to the temporary folder as a stored-run file `results import` reads back.
    Returns its path, or None when even that cannot be written."""
    import os
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"rocm-console-unstored-{run.id}.json")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(run_to_dict(run), out, ensure_ascii=False, allow_nan=False)
    except (OSError, ValueError):
        return None
    return path


async def _read_json(pool: TransportPool, node: NodeSpec, path: str) -> dict | None:
    read = await pool.get(node).run(["cat", path], timeout=60)
    if not read.ok or not read.stdout.strip():
        return None
    try:
        loaded = loads_document(read.stdout)  # W2: a node's file, nested deep, is a ValueError
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None


def _offline_preset(spec: dict, kind: str) -> OfflinePreset:
    from console.services.runs.offline import preset_from_spec

    return preset_from_spec(spec) or OfflinePreset(name=str(spec.get("preset") or "custom"), kind=kind, model="?")


def _rebuilt(
    node: NodeSpec, rec: RunRecord, result: dict, presets: dict[str, BenchPreset], label: str | None
) -> StoredRun:
    """A stored run from what the node keeps: its spec (preset, argv, instance) and result file."""
    spec = dict(rec.spec)
    kind = spec.get("kind")
    argv = list(redact(list(rec.argv)))
    context = {
        "node": node.name,
        "bench_preset": spec.get("preset"),
        "client_argv": argv,
        "instance": spec.get("instance"),
        "fetched_from": node.name,  # not stored by the console that ran it
    }
    created = rec.ended or rec.started
    if kind in KINDS:
        context.update(offline_run=rec.name, gpus=list(spec.get("gpus") or ()))
        offline = _offline_preset(spec, kind)
        script = any(a.endswith(f"benchmark_{kind}.py") for a in argv[:3])
        return run_from_offline(
            context,
            kind,
            result,
            offline,
            client="script" if script else "subcommand",
            label=label,
            created=created,
        )
    # the preset as the profile has it now (the result JSON records what it ran with, and wins)
    preset = presets.get(str(spec.get("preset")))
    context["sweep_point"] = spec.get("max_concurrency")
    return run_from_console(context, result, None, setup=preset, label=label, created=created)


async def fetch_run(
    pool: TransportPool,
    node: NodeSpec,
    run: str,
    store: ResultStore,
    *,
    presets: dict[str, BenchPreset] | None = None,
    label: str | None = None,
) -> Fetched:
    """Store a finished run from the node. FetchError (one line) when it cannot be;
    StoreError when the store still cannot be written."""
    rec = await _runs(pool).record(node, run)
    if rec is None:
        raise FetchError(f"{node.name}: no benchmark run named {run} (bench runs lists them)")
    if rec.running:
        raise FetchError(f"{node.name}: {run} is still running; fetch it once it has finished")
    folder = await _run_folder(pool, node, run)
    kept = await _read_json(pool, node, f"{folder}/{KEPT_FILE}")
    stored: StoredRun | None = None
    if kept is not None:
        try:
            stored = run_from_dict(kept)
        except ValueError:
            stored = None  # a damaged copy: rebuild from the result file
        if stored is not None and label is not None:
            stored = dataclasses.replace(stored, label=label)
    if stored is None:
        result = await _read_json(pool, node, f"{folder}/{RESULT_FILE}")
        if result is None:
            code = rec.exit_code
            raise FetchError(f"{node.name}: {run} left no result ({folder}/{RESULT_FILE}; exit code {code})")
        try:
            stored = _rebuilt(node, rec, result, presets or {}, label)
        except (OfflineError, ValueError) as exc:
            raise FetchError(f"{node.name}: {run}: {exc}") from None
    saved = store.add(stored)
    return Fetched(store.get(saved.id), saved.new, kept is not None)
