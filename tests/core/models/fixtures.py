"""The model fixtures (tests/fixtures/models): their INDEX.toml and their config.json read as facts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from console.core.models.config import ModelFacts, read_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
SEEDS = Path(__file__).resolve().parents[2] / "fixtures" / "seeds"
INDEX: dict[str, Any] = tomllib.loads((MODELS / "INDEX.toml").read_text())


def config(key: str) -> dict[str, Any]:
    return json.loads((MODELS / INDEX[key]["file"]).read_text())


def facts(key: str, **kwargs: Any) -> ModelFacts:
    return read_config(config(key), name=key, **kwargs)


def seed_text(prefix: str) -> str:
    """The seed whose file name starts with `prefix` (e.g. "000"): shell line continuations,
    the mirror's table bars and runs of whitespace collapsed, so a command reads on one line."""
    (path,) = SEEDS.glob(f"{prefix}_*.txt")
    return " ".join(path.read_text().replace("\\", " ").replace("|", " ").split())
