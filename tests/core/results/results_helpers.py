"""Fixture paths and small builders shared by the results tests."""

from __future__ import annotations

import json
from pathlib import Path

from console.core.results.file_import import runs_from_file
from console.core.results.record import CONTEXT_KEYS, StoredRun

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
CPU = FIXTURES / "vllm-0.32-cpu"
SEED_004 = FIXTURES / "seeds" / "004_040c923192cb04a5.txt"
SEED_002 = FIXTURES / "seeds" / "002_55bd4ff5afc03ea6.txt"
REFERENCE = ROOT / "profiles" / "reference_numbers.toml"
NOW = 1_795_000_000.0


def parse(data, **kw):
    return runs_from_file(data, source="/x/file", created=NOW, **kw)


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def make_run(run_id: str, metrics: dict, **kw) -> StoredRun:
    setup = {"model": "org/M", "max_concurrency": 64, **kw.pop("setup", {})}
    return StoredRun(
        id=run_id, created=NOW, origin="import", context=dict.fromkeys(CONTEXT_KEYS), setup=setup, metrics=metrics, **kw
    )
