"""Where this console keeps what it stores: the data folder ($ROCM_CONSOLE_DATA_DIR, else the
platform's user data folder) and its `results` folder, beside which the events log, node
versions, form memory and watcher files live.

A module of its own so that the event log and the node-versions book find their folder
without importing the results store and its parsers: both are opened before the console's
first frame (start-up time is budgeted: tests/perf/startup.py)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_DIR_ENV", "default_root"]

DATA_DIR_ENV = "ROCM_CONSOLE_DATA_DIR"


def default_root() -> Path:
    """The results folder of the data folder (its parent holds the rest)."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser() / "results"
    import platformdirs

    return Path(platformdirs.user_data_path("rocm-console")) / "results"
