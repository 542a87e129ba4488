"""What the comparison of stored runs shows: cells with their deltas judged better or worse,
and the seeds' reference rows for the runs' configurations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.text import Text

from console.core.profiles import PROFILES_DIR
from console.core.results.display import delta_suffix, format_value, model_name
from console.core.results.record import StoredRun
from console.core.results.reference import ReferenceMatch, load_reference_numbers
from console.core.results.reference import pick_references as pick_rows

REFERENCE_PATH = PROFILES_DIR / "reference_numbers.toml"


def short_model(model: object) -> str:
    """'Llama-3.1-70B-Instruct-FP8-KV' for 'amd/Llama-3.1-70B-Instruct-FP8-KV'; '-' for none."""
    return model_name(model) or "-"


def pick_references(runs: Sequence[StoredRun], path: Path) -> list[ReferenceMatch]:
    """The reference rows for the runs' configurations: every exact match, else the
    best three (the same choice as `results compare --reference`). ProfileError if
    the file is wrong."""
    return pick_rows(runs, load_reference_numbers(path))


def verdict(row: dict, i: int) -> str | None:
    """'better' / 'worse' / None (equal, unknown, or no better direction) for column i's delta."""
    delta = row["delta"][i]
    direction = row.get("better")
    if delta is None or direction not in ("higher", "lower") or delta == 0:
        return None
    return "better" if (delta > 0) == (direction == "higher") else "worse"


def compare_cell(row: dict, i: int, styles: dict[str, str]) -> Text:
    """A value, and for the metric rows of the other columns its delta, coloured better/worse."""
    key = row["key"]
    value = row["values"][i]
    if row["section"] not in ("metric", "energy") or key == "client_bound":
        if key == "client_bound" and value:
            return Text("CLIENT-BOUND", style="bold red")
        if key == "prefix_cache_warning" and isinstance(value, str) and value.startswith("NOT COLD"):
            return Text(value, style="bold red")  # issue B2: a cold figure that came from the cache
        return Text(short_model(value) if key == "model" else format_value(key, value))
    text = Text(format_value(key, value))
    extra = delta_suffix(row, i)
    if extra is None:
        return text
    judged = verdict(row, i)
    text.append(f"  {extra}", style=styles.get(judged or "same", ""))
    return text
