"""A file store built with today's code paths, for the migration and dump tests.

Runs stored through ResultStore: runs the console made (serving with its live series,
offline latency and throughput, an lm_eval accuracy run), imports of every legacy format in
tests/fixtures (vLLM result JSON, captured client text from the seeds, a terminal capture with
ANSI codes, vLLM 0.6.3's `request_goodput:` JSON with an infinite rate and per-request
arrays), the demo's runs with energy and telemetry (seed_history); baselines through
BaselineStore (the demo's, and one saved again under another node and name); node-versions
records through VersionsBook (a first reading, then a change left unacknowledged); events
through EventLog, rotated, with equal events twice."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from console.core.baseline.diff import versions_from_dict
from console.core.bench.offline import OfflinePreset
from console.core.events import Event
from console.core.results.build import run_from_console
from console.core.results.offline import run_from_accuracy, run_from_offline
from console.services.baseline import BaselineStore
from console.services.baseline_demo import seed_baselines
from console.services.demo import seed_history
from console.services.events import EventLog
from console.services.node_versions import VersionsBook
from console.services.results import ResultStore
from tests.core.results.test_file_import import LEGACY_063

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
CPU = FIXTURES / "vllm-0.32-cpu"
SEEDS = FIXTURES / "seeds"
LM_EVAL = FIXTURES / "lm-eval-0.4.13" / "results_gsm8k_local.json"
NOW = 1_795_000_000.0


def console_run(i: int, node: str = "mi300x-a", **extra):
    data = json.loads((CPU / "bench_result.json").read_text())
    data["duration"] = 2.0 + i / 1000  # a different measurement: a different result
    return run_from_console(
        {"node": node, "gpu_model": "AMD Instinct MI300X", "serve_preset": "llama-8b", "bench_preset": "chat"},
        data,
        {"samples": 2, "peak_tps": 1600.0 + i},
        label=extra.pop("label", None),
        created=NOW + i,
        **extra,
    )


def build_runs(results: Path, extra_console_runs: int = 0) -> ResultStore:
    store = ResultStore(results)
    assert seed_history(store) >= 4  # the demo's runs first (it seeds an empty store only): energy and telemetry
    for i in range(3 + extra_console_runs):
        store.save(console_run(i, node=f"mi300x-{'ab'[i % 2]}", label="nightly" if i % 3 == 0 else None))
    preset = OfflinePreset(name="lat", kind="latency", model="m", tp=1, input_len=32, output_len=16, batch_size=1)
    latency = json.loads((CPU / "bench_latency.json").read_text())
    store.save(run_from_offline({"node": "mi300x-a"}, "latency", latency, preset, created=NOW + 50))
    throughput = json.loads((CPU / "bench_throughput.json").read_text())
    tp = replace(preset, name="tput", kind="throughput", num_prompts=10)
    store.save(run_from_offline({"node": "mi300x-b"}, "throughput", throughput, tp, created=NOW + 60))
    acc = json.loads(LM_EVAL.read_text())
    store.save(run_from_accuracy({"node": "mi300x-a"}, acc, task="gsm8k_local", limit=10, model="m", created=NOW + 70))
    legacy = results.parent / "imports"
    legacy.mkdir(parents=True, exist_ok=True)
    (legacy / "legacy-063.json").write_text(json.dumps(LEGACY_063))
    for name in ("bench_result.json", "bench_tiny_result.json", "bench_serve_stdout_pty.raw", "bench_serve_stdout.raw"):
        shutil.copy(CPU / name, legacy / name)
    for seed in sorted(SEEDS.glob("*.txt")):
        shutil.copy(seed, legacy / seed.name)
    report = store.import_paths([legacy], label="imported", node="mi300x-c", now=NOW + 100)
    assert report.imported, report.as_dict()
    return store


def build_baselines(folder: Path) -> BaselineStore:
    seed_baselines(folder)
    store = BaselineStore(folder)
    demo = store.get("mi300x-spx", "demo")
    store.save(replace(demo, name="nightly.v2", node="gpu node/7", created=demo.created + 86400, seconds=12.5))
    return store


def build_versions(folder: Path) -> VersionsBook:
    book = VersionsBook(folder)
    doc = json.loads((ROOT / "profiles" / "demo-baselines" / "mi300x-spx" / "demo.json").read_text())
    before = versions_from_dict(doc["versions"])
    book.observe(before)
    book.observe(replace(before, rocm="7.1.0-21"))  # a change, not acknowledged: pending
    book.observe(replace(before, node="mi300x-cpx"))
    return book


def events(n: int = 60) -> list[Event]:
    out = []
    for i in range(n):
        out.append(Event(NOW + i * 0.25, "gpu.health", f"node-{i % 3}", gpu=i % 8, severity="warn", message=f"hot {i}"))
        if i % 10 == 0:
            out.append(
                Event(NOW + i * 0.25, "instance.started", "node-0", instance="i1", details={"argv": ["vllm", "serve"]})
            )
    same = Event(NOW + 99.0, "node.down", "node-9", severity="fail", message="no answer")
    return [*out, same, same]  # two equal events: both are kept


def build_file_store(data: Path, extra_console_runs: int = 0, n_events: int = 60, event_bytes: int = 2048) -> dict:
    """Every kind of record in `data`, written by today's code; the writers (to read it back)."""
    runs = build_runs(data / "results", extra_console_runs)
    baselines = build_baselines(data / "baselines")
    versions = build_versions(data / "node-versions")
    log = EventLog(data / "events.jsonl", max_bytes=event_bytes, keep=3)  # small files: rotated
    for event in events(n_events):
        log.append(event)
    return {"runs": runs, "baselines": baselines, "versions": versions, "events": log}


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (path -> bytes), lock files left out."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }
