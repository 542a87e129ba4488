"""The results store: one JSON file per run in the user's data folder, and imports.

Layout: `<root>/<id>.json`, each file `run_to_dict(run)`. The root is
`platformdirs.user_data_path("rocm-console") / "results"`, or
`$ROCM_CONSOLE_DATA_DIR/results` when that variable is set (tests, scripts).
Writes are atomic (a temporary file in the same folder, then a rename that
never replaces another run's file). Every check-then-write (is this result
stored already? is this id free?) holds an exclusive lock on `<root>/.lock`
(flock), so two consoles importing or storing at once never store a run twice
and never lose one; `<root>/.index` caches each file's fingerprint (by size and
mtime) so the check reads only files that changed. A store that cannot be
written (the data dir is a file, read-only, the disk full) raises StoreError,
one line naming the folder and the reason.

`import_paths` reads vLLM result JSON of any version and captured text output of
the benchmark clients (files or folders, recursively) into stored runs, skipping
what is already stored (same fingerprint) and reporting every file it skips
with the reason it shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from console.core.bounded_file import RESULT_FILE_LIMIT, read_bounded
from console.core.node_json import loads_document

try:
    import fcntl
except ImportError:  # Windows: no flock; one console at a time there
    fcntl = None  # type: ignore[assignment]

from console.core.results.ids import other_id, run_order, unresolved_ref
from console.core.results.record import StoredRun, run_from_dict, run_to_dict
from console.services.data_dir import DATA_DIR_ENV, default_root

__all__ = [
    "DATA_DIR_ENV",
    "ImportReport",
    "ImportedItem",
    "ResultStore",
    "Saved",
    "SkippedItem",
    "StoreError",
    "default_root",
    "import_files",
]

MAX_FILE_BYTES = RESULT_FILE_LIMIT  # a benchmark log or result JSON is far smaller
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
LOCK_NAME = ".lock"
INDEX_NAME = ".index"


class StoreError(Exception):
    """The store cannot be written (or its folder cannot be made): one line naming the folder."""


@dataclass(frozen=True)
class Saved:
    """What save() did: the id the run is stored under, and whether this call stored it
    (False: the same result was stored already, under `id`)."""

    id: str
    new: bool


@dataclass(frozen=True)
class SkippedItem:
    """A file (part None) or a part of a file (`block 2 (lines 40-62)`, `object 3`) not imported."""

    path: str
    reason: str
    part: str | None = None

    def as_dict(self) -> dict:
        return {"path": self.path, "part": self.part, "reason": self.reason}


@dataclass(frozen=True)
class ImportedItem:
    """A run found in a file: stored now (`new`) or already stored as `id`."""

    path: str
    id: str
    new: bool
    part: str | None = None

    def as_dict(self) -> dict:
        return {"path": self.path, "part": self.part, "id": self.id, "new": self.new}


@dataclass
class ImportReport:
    imported: list[StoredRun] = field(default_factory=list)  # stored by this import
    duplicates: list[ImportedItem] = field(default_factory=list)  # found, already stored
    skipped: list[SkippedItem] = field(default_factory=list)  # files or parts without a usable result
    unreadable: list[SkippedItem] = field(default_factory=list)  # paths that could not be read
    files: int = 0  # files read

    @property
    def exit_code(self) -> int:
        """2 if a path was unreadable; else 0 if any run was found (new or
        already stored), 1 if nothing at all was found."""
        if self.unreadable:
            return 2
        return 0 if self.imported or self.duplicates else 1

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "imported": [_imported_dict(r) for r in self.imported],
            "duplicates": [d.as_dict() for d in self.duplicates],
            "skipped": [s.as_dict() for s in self.skipped],
            "unreadable": [u.as_dict() for u in self.unreadable],
            "exit_code": self.exit_code,
        }


def _imported_dict(run: StoredRun) -> dict:
    return {
        "id": run.id,
        "path": run.source,
        "part": run.context.get("source_part"),
        "model": run.setup.get("model"),
        "max_concurrency": run.setup.get("max_concurrency"),
    }


class ResultStore:
    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.errors: list[str] = []  # files list() could not read, one line each
        self._lock_depth = 0

    # ---------------------------------------------------------- lock

    def _failed(self, exc: OSError) -> StoreError:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, (NotADirectoryError, FileExistsError)) or (self.root.exists() and not self.root.is_dir()):
            reason = "a file is in the way of the results folder"
        return StoreError(f"cannot store results in {self.root}: {reason}")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock on the store across processes (re-entrant within this object)."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._failed(exc) from None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_depth = 1
            yield
        finally:
            self._lock_depth = 0
            os.close(fd)  # releases the lock

    def _fingerprint_index(self) -> dict[str, str]:
        """id -> fingerprint of every stored run; call with the lock held.

        Each file is read only when its size or mtime differs from `.index` (kept in
        the folder), so a large store costs one directory listing per check."""
        index_path = self.root / INDEX_NAME
        try:
            cached = loads_document(index_path.read_text(encoding="utf-8")).get("runs", {})  # W2: depth-safe
            if not isinstance(cached, dict):
                cached = {}
        except (OSError, ValueError, AttributeError):
            cached = {}
        fresh: dict[str, list] = {}
        changed = False
        with os.scandir(self.root) as entries:
            for entry in entries:
                run_id = entry.name[:-5] if entry.name.endswith(".json") else ""
                if not _ID_RE.match(run_id):
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                old = cached.get(run_id)
                if isinstance(old, list) and len(old) == 3 and old[:2] == [st.st_mtime_ns, st.st_size]:
                    fresh[run_id] = old
                    continue
                try:
                    fingerprint = self._read(Path(entry.path)).fingerprint
                except ValueError:
                    fingerprint = ""  # unreadable: list() reports it; never a duplicate of anything
                fresh[run_id] = [st.st_mtime_ns, st.st_size, fingerprint]
                changed = True
        if changed or len(fresh) != len(cached):
            try:
                tmp = self._write_temp(json.dumps({"runs": fresh}, separators=(",", ":")))
                os.replace(tmp, index_path)
            except OSError:
                pass  # a cache only: the next check reads the files again
        return {run_id: entry[2] for run_id, entry in fresh.items()}

    # ---------------------------------------------------------- files

    def _path(self, run_id: str) -> Path:
        if not _ID_RE.match(run_id):
            raise KeyError(f"invalid run id {run_id!r}")
        return self.root / f"{run_id}.json"

    def check_readable(self) -> None:
        """StoreError when something other than a folder stands where the store is (the data
        dir is a file, or lies under one): a store that is merely not made yet is empty."""
        for path in (self.root, *self.root.parents):
            if path.exists():
                if not path.is_dir():
                    raise StoreError(f"cannot read results in {self.root}: {path} is a file, not a folder")
                return

    def ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.json") if p.is_file() and _ID_RE.match(p.stem))

    def _read(self, path: Path) -> StoredRun:
        try:
            text = read_bounded(path, MAX_FILE_BYTES, "stored run").decode("utf-8")  # W2: never a FIFO's hang
            data = loads_document(text)  # within limits: never a RecursionError
            return run_from_dict(data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable stored run ({exc})") from None

    def _write_new(self, run: StoredRun) -> StoredRun:
        """Write under run.id, or a fresh id when that one is taken; never replaces a file."""
        run_id = run.id
        for _ in range(20):
            candidate = dataclasses.replace(run, id=run_id)
            tmp = self._temp_file(candidate)
            try:
                try:
                    os.link(tmp, self._path(run_id))  # atomic, fails if the name is taken
                except FileExistsError:
                    run_id = other_id(run.id)
                    continue
                except OSError:  # no hard links here (some network/FUSE folders)
                    if self._path(run_id).exists():
                        run_id = other_id(run.id)
                        continue
                    os.replace(tmp, self._path(run_id))
                return candidate
            finally:
                tmp.unlink(missing_ok=True)
        raise OSError(f"could not find a free id for {run.id} in {self.root}")

    def _temp_file(self, run: StoredRun) -> Path:
        return self._write_temp(json.dumps(run_to_dict(run), indent=1, ensure_ascii=False, allow_nan=False) + "\n")

    def _write_temp(self, text: str) -> Path:
        """text in a new hidden file of the folder, synced: ready to be linked or renamed into place."""
        fd, name = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=self.root)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return Path(name)

    # ---------------------------------------------------------- API

    def save(self, run: StoredRun) -> str:
        """Store a run; returns the id it is stored under (see add)."""
        return self.add(run).id

    def add(self, run: StoredRun) -> Saved:
        """Store a run unless the same result is stored already (same fingerprint, any id):
        then the stored file is left as it is (update() replaces one, e.g. for a new label).

        Its own id is kept when free; a taken id gets new hex. The check and the write
        hold the store's lock, so this holds across processes. StoreError when the
        store cannot be written."""
        if not run.id:
            raise ValueError("a run needs an id (build it with run_from_console / run_from_result)")
        self._path(run.id)  # an id that is no file name: KeyError before anything is written
        with self._locked():
            try:
                index = self._fingerprint_index()
                if run.fingerprint and index.get(run.id) == run.fingerprint:
                    return Saved(run.id, False)
                existing = next((i for i, fp in index.items() if fp and fp == run.fingerprint), None)
                if existing is not None:
                    return Saved(existing, False)
                return Saved(self._write_new(run).id, True)
            except OSError as exc:
                raise self._failed(exc) from None

    def update(self, run: StoredRun) -> str:
        """Replace a stored run's file (e.g. a new label). KeyError if it is not stored."""
        path = self._path(run.id)
        with self._locked():
            if not path.exists():
                raise KeyError(f"no stored run {run.id!r}")
            try:
                tmp = self._temp_file(run)
                try:
                    os.replace(tmp, path)
                finally:
                    tmp.unlink(missing_ok=True)
            except OSError as exc:
                raise self._failed(exc) from None
        return run.id

    def resolve(self, ref: str) -> str:
        """The id a full id or a unique prefix names. KeyError with a one-line reason."""
        ref = ref.strip()
        ids = self.ids()
        if ref in ids:
            return ref
        found = [i for i in ids if i.startswith(ref)] if ref else []
        if len(found) == 1:
            return found[0]
        raise unresolved_ref(ref, found, len(found))

    def get(self, ref: str) -> StoredRun:
        """A run by id or unique id prefix. KeyError (unknown / ambiguous), ValueError (unreadable file)."""
        return self._read(self._path(self.resolve(ref)))

    def list(
        self,
        *,
        node: str | None = None,
        label: str | None = None,
        model: str | None = None,
        since: float | None = None,
    ) -> list[StoredRun]:
        """Stored runs, oldest first. node and label match exactly, model as a
        case-insensitive substring, since is epoch seconds (created at or after).
        Files that cannot be read are left out and noted in `errors`."""
        self.errors = []
        out = []
        for run_id in self.ids():
            try:
                run = self._read(self._path(run_id))
            except ValueError as exc:
                self.errors.append(str(exc))
                continue
            if node is not None and run.context.get("node") != node:
                continue
            if label is not None and run.label != label:
                continue
            if model is not None and model.casefold() not in str(run.setup.get("model") or "").casefold():
                continue
            if since is not None and run.created < since:
                continue
            out.append(run)
        out.sort(key=run_order)
        return out

    def fingerprints(self) -> dict[str, str]:
        """fingerprint -> id of every readable stored run."""
        out: dict[str, str] = {}
        for run in self.list():
            if run.fingerprint:
                out.setdefault(run.fingerprint, run.id)
        return out

    def find_by_fingerprint(self, fingerprint: str) -> StoredRun | None:
        for run in self.list():
            if run.fingerprint == fingerprint:
                return run
        return None

    def delete(self, ref: str) -> str:
        """Remove a run (id or unique prefix); returns its id. KeyError if unknown/ambiguous,
        StoreError if the file cannot be removed."""
        with self._locked():
            run_id = self.resolve(ref)
            try:
                self._path(run_id).unlink()
            except FileNotFoundError:
                raise KeyError(f"no stored run {ref!r} (results list shows the ids)") from None
            except OSError as exc:
                raise self._failed(exc) from None
        return run_id

    # ---------------------------------------------------------- import

    def import_paths(
        self,
        paths: Iterable[str | Path],
        label: str | None = None,
        node: str | None = None,
        *,
        now: float | None = None,
    ) -> ImportReport:
        """Import result JSON files and captured client output (files, or folders
        searched recursively; hidden entries inside folders are left out)."""
        report = ImportReport()
        created = time.time() if now is None else now
        # One lock for the whole import: another console importing the same files waits, then
        # finds them stored; the fingerprints are read once and kept up to date as runs are written.
        with self._locked():
            try:
                known = {fp: run_id for run_id, fp in self._fingerprint_index().items() if fp}
            except OSError as exc:
                raise self._failed(exc) from None
            for file in import_files(paths, report):
                self._import_file(file, label, node, created, known, report)
        return report

    def _import_file(
        self,
        file: Path,
        label: str | None,
        node: str | None,
        created: float,
        known: dict[str, str],
        report: ImportReport,
    ) -> None:
        shown = str(file)
        try:  # W2: bounded (a device, a FIFO, /proc or a huge file is one line: unreadable, exit 2)
            data = read_bounded(file, MAX_FILE_BYTES, "result file")
        except OSError as exc:
            report.unreadable.append(SkippedItem(shown, exc.strerror or type(exc).__name__))
            return
        report.files += 1
        if b"\x00" in data[:8192]:
            report.skipped.append(SkippedItem(shown, "binary file"))
            return
        source = str(file.resolve())
        from console.core.results.file_import import runs_from_file  # here: the parsers of every client
        # are not imported by the store's readers (a fresh `results list` is budgeted)

        parsed = runs_from_file(data, source=source, label=label, node=node, created=created)
        for part, reason in parsed.skipped:
            report.skipped.append(SkippedItem(shown, reason, part))
        try:  # under import_paths' lock
            for run in parsed.runs:
                part = run.context.get("source_part")
                existing = known.get(run.fingerprint)
                if existing is not None:
                    report.duplicates.append(ImportedItem(shown, existing, False, part))
                    continue
                stored = self._write_new(run)
                known[run.fingerprint] = stored.id
                report.imported.append(stored)
        except OSError as exc:
            raise self._failed(exc) from None


def import_files(paths: Iterable[str | Path], report: ImportReport) -> Iterator[Path]:
    """The files to import: each path, or the files in a folder (those that cannot be read: in report);
    a lazy iterator (the database store resumes it batch after batch)."""
    for raw in _ensure_sequence(paths):
        shown = str(raw)
        path = Path(raw).expanduser()
        try:
            if path.is_dir():
                files = list(_walk(path, report))
            elif path.exists():
                files = [path]
            else:
                report.unreadable.append(SkippedItem(shown, "no such file or folder"))
                continue
        except OSError as exc:
            report.unreadable.append(SkippedItem(shown, exc.strerror or type(exc).__name__))
            continue
        yield from files


def _walk(folder: Path, report: ImportReport) -> Iterator[Path]:
    def failed(exc: OSError) -> None:
        report.unreadable.append(SkippedItem(str(exc.filename or folder), exc.strerror or type(exc).__name__))

    for top, dirs, names in os.walk(folder, onerror=failed):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if not name.startswith("."):
                yield Path(top) / name


def _ensure_sequence(paths: Iterable[str | Path] | str | Path) -> list:
    return [paths] if isinstance(paths, (str, Path)) else list(paths)
