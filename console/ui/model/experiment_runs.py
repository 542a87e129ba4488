"""The experiments this console runs (from the experiments screen), and the files it offers.

Pure: what the screen shows of a run it started (its last line, whether it still runs, how it
ended) and the cancel it may call. The run itself is ExperimentRunner.run in a worker of the
app, so leaving the screen does not end it; its points are followed, like any other run's,
from the state file it writes after every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

MAX_FILES = 200


@dataclass
class ExperimentRun:
    """One run started here. Mutable on purpose: the run's worker updates it, the screen reads it."""

    file: str
    node: str
    state_path: Path
    line: str = "starting: checking the node"
    running: bool = True
    outcome: str | None = None  # finished | failed | cancelled | refused
    cancel: Callable[[], object] | None = field(default=None, repr=False)

    def report_command(self) -> str:
        return f"rocm-console experiment report {self.file} --node {self.node} --state {self.state_path}"


class ExperimentRuns:
    """The runs of one console, by state file (one run per experiment and node at a time)."""

    def __init__(self) -> None:
        self._runs: dict[Path, ExperimentRun] = {}

    def get(self, state_path: Path) -> ExperimentRun | None:
        return self._runs.get(Path(state_path))

    def running(self, state_path: Path) -> bool:
        run = self.get(state_path)
        return run is not None and run.running

    def add(self, run: ExperimentRun) -> ExperimentRun:
        self._runs[Path(run.state_path)] = run
        return run

    def all(self) -> list[ExperimentRun]:
        return list(self._runs.values())


def experiment_files(folders: Iterable[Path]) -> list[Path]:
    """The experiment TOML files of the folders (the shipped examples, the data dir's), by name,
    each once; a folder that cannot be read is skipped."""
    found: dict[Path, None] = {}
    for folder in folders:
        try:
            files = sorted(Path(folder).glob("*.toml"))
        except OSError:
            continue
        for path in files:
            found.setdefault(path.resolve(), None)
    return list(found)[:MAX_FILES]
