"""Which profile files a command reads, found without reading them: kept apart from
console/core/profiles.py so that a command that needs only the profile's `[store] url` (a
fresh `results list`, budgeted in tests/perf/store_scale.py) never imports the profile model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from console.core.errors import ProfileError

__all__ = ["SAMPLE_PROFILES", "SHIPPED_DATA", "discover_profile_paths", "unique_paths"]

# Shipped samples in profiles/: loaded only via --profile / --demo, never found by
# discovery, so running from the repo never dials the example's hosts.
SAMPLE_PROFILES = ("example.toml", "demo.toml", "demo-multinode.toml")
# The other data files shipped in profiles/: read by their own loaders, never as a profile
# (the presets are loaded before every profile anyway).
SHIPPED_DATA = ("presets.toml", "offline_presets.toml", "reference_numbers.toml")


def discover_profile_paths(explicit: Sequence[str], cwd: Path, config_dir: Path | None) -> list[Path]:
    """Which profile files to load, in order.

    Explicit paths win outright. Otherwise cwd/profiles/*.toml (minus the shipped
    samples), then config_dir/*.toml; each group sorted by name.
    """
    if explicit:
        found: list[Path] = []
        for raw in explicit:
            path = Path(raw).expanduser()
            if not path.is_absolute():
                path = cwd / path
            if not path.exists():
                raise ProfileError(str(raw), None, None, None, "no such profile file")
            found.append(path)
        return unique_paths(found)
    shipped = (*SAMPLE_PROFILES, *SHIPPED_DATA)
    found = [p for p in _toml_files(cwd / "profiles") if p.name not in shipped]
    if config_dir is not None:
        found += _toml_files(config_dir)
    return unique_paths(found)


def _toml_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.toml") if p.is_file())


def unique_paths(paths: list[Path]) -> list[Path]:
    """Drop repeats of the same file (e.g. config_dir == cwd/profiles)."""
    seen: set[Path] = set()
    out = []
    for path in paths:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            out.append(path)
    return out
