"""`results import` into the database: ResultStore.import_paths' rules (files or folders
searched recursively, hidden entries left out, every file or part skipped named with its
reason, what is stored already reported as a duplicate), one transaction per file."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from console.core.bounded_file import RESULT_FILE_LIMIT, read_bounded
from console.core.results.file_import import runs_from_file
from console.core.results.record import StoredRun
from console.services.results import ImportedItem, ImportReport, Saved, SkippedItem, import_files
from console.services.store.db import Database

__all__ = ["BATCH_FILES", "BATCH_SECONDS", "RunWriter", "import_paths"]

BATCH_FILES = 200
BATCH_SECONDS = 1.0


class RunWriter(Protocol):
    """What an import needs of the runs table (RunTable)."""

    db: Database

    def add(self, run: StoredRun) -> Saved: ...

    def get(self, ref: str) -> StoredRun: ...


def import_paths(
    table: RunWriter,
    paths: Iterable[str | Path],
    label: str | None = None,
    node: str | None = None,
    *,
    now: float | None = None,
) -> ImportReport:
    report = ImportReport()
    created = time.time() if now is None else now
    files = import_files(paths, report)
    exhausted = False
    while not exhausted:
        # Files in transactions of up to BATCH_FILES or BATCH_SECONDS: one commit (one fsync) per
        # batch, not per file, and the write lock never held long from other consoles. A
        # failure (StoreError: the disk) rolls back the batch and ends the import, as it did.
        started, done = time.monotonic(), 0
        exhausted = True
        with table.db.transaction():
            for file in files:
                _import_file(table, file, label, node, created, report)
                done += 1
                if done >= BATCH_FILES or time.monotonic() - started > BATCH_SECONDS:
                    exhausted = False
                    break
    return report


def _import_file(
    table: RunWriter, file: Path, label: str | None, node: str | None, created: float, report: ImportReport
) -> None:
    shown = str(file)
    try:  # bounded: a device, a FIFO or a huge file is one line (unreadable)
        data = read_bounded(file, RESULT_FILE_LIMIT, "result file")
    except OSError as exc:
        report.unreadable.append(SkippedItem(shown, exc.strerror or type(exc).__name__))
        return
    report.files += 1
    if b"\x00" in data[:8192]:
        report.skipped.append(SkippedItem(shown, "binary file"))
        return
    parsed = runs_from_file(data, source=str(file.resolve()), label=label, node=node, created=created)
    for part, reason in parsed.skipped:
        report.skipped.append(SkippedItem(shown, reason, part))
    for run in parsed.runs:  # inside import_paths' transaction
        saved = table.add(run)
        if saved.new:
            report.imported.append(run if saved.id == run.id else table.get(saved.id))
        else:
            report.duplicates.append(ImportedItem(shown, saved.id, False, run.context.get("source_part")))
