"""The results store: one JSON file per run in the user's data folder, and imports.

Layout: `<root>/<id>.json`, each file `run_to_dict(run)`. The root is
`platformdirs.user_data_path("rocm-console") / "results"`, or
`$ROCM_CONSOLE_DATA_DIR/results` when that variable is set (tests, scripts).
Writes are atomic (a temporary file in the same folder, then a rename that
never replaces another run's file).

`import_paths` reads vLLM result JSON of any version and captured text output of
the benchmark clients (files or folders, recursively) into stored runs, skipping
what is already stored (same fingerprint) and reporting every file it skips
with the reason it shows.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from console.core.node_json import loads_document
from console.core.results.file_import import runs_from_file
from console.core.results.record import StoredRun, run_from_dict, run_to_dict

__all__ = [
    "DATA_DIR_ENV",
    "ImportReport",
    "ImportedItem",
    "ResultStore",
    "SkippedItem",
    "default_root",
]

DATA_DIR_ENV = "ROCM_CONSOLE_DATA_DIR"
MAX_FILE_BYTES = 256 << 20  # a benchmark log or result JSON is far smaller
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


def default_root() -> Path:
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser() / "results"
    import platformdirs

    return Path(platformdirs.user_data_path("rocm-console")) / "results"


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

    # ---------------------------------------------------------- files

    def _path(self, run_id: str) -> Path:
        if not _ID_RE.match(run_id):
            raise KeyError(f"invalid run id {run_id!r}")
        return self.root / f"{run_id}.json"

    def ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.json") if p.is_file() and _ID_RE.match(p.stem))

    def _read(self, path: Path) -> StoredRun:
        try:
            data = loads_document(path.read_text(encoding="utf-8"))  # within limits: never a RecursionError
            return run_from_dict(data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable stored run ({exc})") from None

    def _write_new(self, run: StoredRun) -> StoredRun:
        """Write under run.id, or a fresh id when that one is taken; never replaces a file."""
        self.root.mkdir(parents=True, exist_ok=True)
        run_id = run.id
        for _ in range(20):
            candidate = dataclasses.replace(run, id=run_id)
            tmp = self._temp_file(candidate)
            try:
                try:
                    os.link(tmp, self._path(run_id))  # atomic, fails if the name is taken
                except FileExistsError:
                    run_id = self._other_id(run.id)
                    continue
                except OSError:  # no hard links here (some network/FUSE folders)
                    if self._path(run_id).exists():
                        run_id = self._other_id(run.id)
                        continue
                    os.replace(tmp, self._path(run_id))
                return candidate
            finally:
                tmp.unlink(missing_ok=True)
        raise OSError(f"could not find a free id for {run.id} in {self.root}")

    @staticmethod
    def _other_id(run_id: str) -> str:
        head = run_id.rsplit("-", 1)[0] if re.search(r"-[0-9a-f]{6}\Z", run_id) else run_id
        return f"{head}-{secrets.token_hex(3)}"

    def _temp_file(self, run: StoredRun) -> Path:
        text = json.dumps(run_to_dict(run), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
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
        """Store a run; returns its id. Its own id is kept when free (a run saved
        again with the same fingerprint replaces its file); a taken id gets new hex."""
        if not run.id:
            raise ValueError("a run needs an id (build it with run_from_console / run_from_result)")
        path = self._path(run.id)
        if path.exists():
            try:
                same = self._read(path).fingerprint == run.fingerprint and bool(run.fingerprint)
            except ValueError:
                same = False
            if same:
                return self.update(run)
        return self._write_new(run).id

    def update(self, run: StoredRun) -> str:
        """Replace a stored run's file (e.g. a new label). KeyError if it is not stored."""
        path = self._path(run.id)
        if not path.exists():
            raise KeyError(f"no stored run {run.id!r}")
        tmp = self._temp_file(run)
        try:
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
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
        if not found:
            raise KeyError(f"no stored run {ref!r} (results list shows the ids)")
        shown = ", ".join(found[:4]) + (", …" if len(found) > 4 else "")
        raise KeyError(f"ambiguous id prefix {ref!r}: {len(found)} runs match ({shown})")

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
        out.sort(key=_order)
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
        """Remove a run (id or unique prefix); returns its id. KeyError if unknown/ambiguous."""
        run_id = self.resolve(ref)
        self._path(run_id).unlink()
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
        known = self.fingerprints()
        created = time.time() if now is None else now
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
            for file in files:
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
        try:
            size = file.stat().st_size
            if size > MAX_FILE_BYTES:
                report.skipped.append(SkippedItem(shown, f"too large for a result ({size >> 20} MiB)"))
                return
            data = file.read_bytes()
        except OSError as exc:
            report.unreadable.append(SkippedItem(shown, exc.strerror or type(exc).__name__))
            return
        report.files += 1
        if b"\x00" in data[:8192]:
            report.skipped.append(SkippedItem(shown, "binary file"))
            return
        source = str(file.resolve())
        parsed = runs_from_file(data, source=source, label=label, node=node, created=created)
        for part, reason in parsed.skipped:
            report.skipped.append(SkippedItem(shown, reason, part))
        for run in parsed.runs:
            part = run.context.get("source_part")
            existing = known.get(run.fingerprint)
            if existing is not None:
                report.duplicates.append(ImportedItem(shown, existing, False, part))
                continue
            stored = self._write_new(run)
            known[run.fingerprint] = stored.id
            report.imported.append(stored)


def _order(run: StoredRun) -> tuple:
    """Oldest first; runs imported together keep their order in the file."""
    found = re.search(r"\d+", str(run.context.get("source_part") or ""))
    return (run.created, run.source or "", int(found.group()) if found else 0, run.id)


def _walk(folder: Path, report: ImportReport) -> Iterable[Path]:
    def failed(exc: OSError) -> None:
        report.unreadable.append(SkippedItem(str(exc.filename or folder), exc.strerror or type(exc).__name__))

    for top, dirs, names in os.walk(folder, onerror=failed):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if not name.startswith("."):
                yield Path(top) / name


def _ensure_sequence(paths: Iterable[str | Path] | str | Path) -> list:
    return [paths] if isinstance(paths, (str, Path)) else list(paths)
