"""Stored runs in the database, with ResultStore's method names and return types.

`list_runs` is the new query: newest first, filtered by indexed columns, one page at a time
(`before` = the id of the last run of the previous page). `list` keeps ResultStore's
meaning (every match, oldest first) for the faces that still want it, reading in pages."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from console.core.results.ids import other_id, run_order, unresolved_ref
from console.core.results.record import StoredRun
from console.core.store.queries import Where, run_where
from console.core.store.rows import RUN_COLUMNS, run_from_doc, run_row
from console.services.results import ImportReport, Saved, StoreError
from console.services.store.db import Database, IntegrityError

__all__ = ["PAGE", "RunTable"]

PAGE = 50  # a history screen's page
_INSERT = (
    f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' for _ in RUN_COLUMNS)}) ON CONFLICT DO NOTHING"
)
_ID_CHARS_END = "\x7f"  # ids are ASCII letters, digits and . _ -: every id with a prefix sorts below prefix + DEL


class RunTable:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.errors: list[str] = []  # rows list() could not read, one line each

    # ---------------------------------------------------------- writing

    def save(self, run: StoredRun) -> str:
        """Store a run; the id it is stored under (see add)."""
        return self.add(run).id

    def add(self, run: StoredRun) -> Saved:
        """Store a run unless the same result is stored (same fingerprint, any id): then
        Saved(that id, False). A taken id gets new hex. Race-free across processes and
        consoles: the unique fingerprint and id decide, inside one transaction."""
        if not run.id:
            raise ValueError("a run needs an id (build it with run_from_console / run_from_result)")
        return self.insert(run)

    def insert(self, run: StoredRun, doc: dict | None = None, *, keep_id: bool = False) -> Saved:
        """add(), with the document to keep (a migrated file's as read). keep_id (a migration):
        never a new id, and never a run dropped: a run whose id is stored already is
        Saved(id, False) (the migration run again); one whose fingerprint another id holds
        (two equal files in the old folder) is stored with its fingerprint in its doc only."""
        run_id = run.id
        with self.db.transaction():
            for _ in range(20):
                candidate = run if run_id == run.id else dataclasses.replace(run, id=run_id)
                row = run_row(candidate, doc if run_id == run.id else None)
                if self._insert(row):
                    return Saved(run_id, True)
                if keep_id:
                    if self.db.one("SELECT 1 FROM runs WHERE id = ?", (run.id,)) is not None:
                        return Saved(run.id, False)
                    row["fingerprint"] = None
                    if self._insert(row):
                        return Saved(run.id, True)
                    raise StoreError(f"cannot store run {run.id} in {self.db.where}: not inserted")
                if run.fingerprint:
                    found = self.db.one("SELECT id FROM runs WHERE fingerprint = ?", (run.fingerprint,))
                    if found is not None:
                        return Saved(str(found[0]), False)
                run_id = other_id(run.id)
        raise StoreError(f"could not find a free id for {run.id} in {self.db.where}")

    def _insert(self, row: dict) -> bool:
        return self.db.execute(_INSERT, [row[c] for c in RUN_COLUMNS]).rowcount == 1

    def update(self, run: StoredRun) -> str:
        """Replace a stored run (e.g. a new label). KeyError if it is not stored."""
        row = run_row(run)
        names = [c for c in RUN_COLUMNS if c != "id"]
        sql = f"UPDATE runs SET {', '.join(f'{c} = ?' for c in names)} WHERE id = ?"
        with self.db.transaction():
            try:
                with self.db.savepoint():
                    cursor = self.db.execute(sql, [*(row[c] for c in names), run.id])
            except IntegrityError:  # its new fingerprint is another run's: kept in the doc only
                row["fingerprint"] = None
                cursor = self.db.execute(sql, [*(row[c] for c in names), run.id])
            if cursor.rowcount != 1:
                raise KeyError(f"no stored run {run.id!r}")
        return run.id

    def delete(self, ref: str) -> str:
        """Remove a run (id or unique prefix); its id. KeyError if unknown or ambiguous."""
        with self.db.transaction():
            run_id = self.resolve(ref)
            self.db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        return run_id

    def import_paths(
        self,
        paths: Iterable[str | Path],
        label: str | None = None,
        node: str | None = None,
        *,
        now: float | None = None,
    ) -> ImportReport:
        """ResultStore.import_paths into the database (console/services/store/importing.py)."""
        from console.services.store.importing import import_paths

        return import_paths(self, paths, label, node, now=now)

    # ---------------------------------------------------------- reading

    def count(self) -> int:
        row = self.db.one("SELECT COUNT(*) FROM runs")
        return int(row[0]) if row else 0

    def ids(self) -> list[str]:
        return [str(r[0]) for r in self.db.rows("SELECT id FROM runs ORDER BY id")]

    def resolve(self, ref: str) -> str:
        """The id a full id or a unique prefix names. KeyError with a one-line reason."""
        ref = ref.strip()
        if ref and self.db.one("SELECT 1 FROM runs WHERE id = ?", (ref,)) is not None:
            return ref
        found = (
            [
                str(r[0])
                for r in self.db.rows(
                    "SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 5", (ref, ref + _ID_CHARS_END)
                )
            ]
            if ref
            else []
        )
        if len(found) == 1:
            return found[0]
        total = len(found)
        if found:  # only the first few were read: count them all for the line
            row = self.db.one("SELECT COUNT(*) FROM runs WHERE id >= ? AND id < ?", (ref, ref + _ID_CHARS_END))
            total = int(row[0]) if row else total
        raise unresolved_ref(ref, found, total)

    def get(self, ref: str) -> StoredRun:
        """A run by id or unique id prefix. KeyError (unknown / ambiguous), ValueError (unreadable row)."""
        run_id = self.resolve(ref)
        row = self.db.one("SELECT doc FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise KeyError(f"no stored run {ref!r} (results list shows the ids)")
        return self._run(run_id, row[0])

    def document(self, run_id: str) -> dict | None:
        """The stored dict of a run, exactly as kept (None when no such id)."""
        from console.core.store.rows import read_doc

        row = self.db.one("SELECT doc FROM runs WHERE id = ?", (run_id,))
        return read_doc(row[0]) if row is not None else None

    def _run(self, run_id: str, doc: str) -> StoredRun:
        try:
            return run_from_doc(doc)
        except ValueError as exc:
            raise ValueError(f"{self.db.where}: run {run_id}: unreadable stored run ({exc})") from None

    def list_runs(
        self,
        *,
        node: str | None = None,
        model: str | None = None,
        label: str | None = None,
        preset: str | None = None,
        since: float | None = None,
        limit: int = PAGE,
        before: str | None = None,
        offset: int = 0,
        only: Sequence[str] | None = None,
        without: Sequence[str] = (),
        oldest_first: bool = False,
    ) -> list[StoredRun]:
        """One page of runs, newest first: at most `limit`, after the run `before` (the last id
        of the previous page) when given, or from position `offset` of the same order (a page
        read directly: SQL OFFSET over the same index). Filters as list(); preset: bench or
        serve preset; only / without: of these runs only / leaving these out (ids);
        oldest_first: the same order backwards (a page near the end read from the end, `offset`
        counted from the oldest; not with `before`). Rows that cannot be read are left out and
        noted in `errors`. KeyError: no run `before`."""
        self.errors = []
        if oldest_first and before is not None:
            raise ValueError("list_runs: before pages newest first only")
        runs, _, _ = self._page(node, model, label, preset, since, limit, before, offset, only, without, oldest_first)
        return runs

    def _where(
        self,
        node: str | None,
        model: str | None,
        label: str | None,
        preset: str | None,
        since: float | None,
        *,
        before: tuple[float, int] | None = None,
        only: Sequence[str] | None = None,
        without: Sequence[str] = (),
    ) -> Where:
        """The WHERE of list_runs' filters, the run ids of `only` / `without` as their seqs."""
        return run_where(
            node=node,
            model=model,
            label=label,
            preset=preset,
            since=since,
            before=before,
            seqs_in=self._seqs(only),
            seqs_out=self._seqs(without) or (),
        )

    def _seqs(self, ids: Sequence[str] | None) -> list[int] | None:
        """The seq of each stored run of `ids` (the runs indexes hold seq, not id)."""
        if ids is None:
            return None
        ids = list(dict.fromkeys(ids))
        out: list[int] = []
        for i in range(0, len(ids), 500):  # bound parameters, a few hundred a statement
            chunk = ids[i : i + 500]
            marks = ", ".join("?" for _ in chunk)
            out += [int(r[0]) for r in self.db.rows(f"SELECT seq FROM runs WHERE id IN ({marks})", chunk)]
        return out

    def _page(
        self, node, model, label, preset, since, limit, before, offset=0, only=None, without=(), oldest_first=False
    ) -> tuple[list[StoredRun], str | None, int]:
        """(the page's readable runs, the id of its last row, how many rows it held)."""
        cursor = None
        if before is not None:
            row = self.db.one("SELECT created, seq FROM runs WHERE id = ?", (before,))
            if row is None:
                raise KeyError(f"no stored run {before!r} to page from")
            cursor = (float(row[0]), int(row[1]))
        where = self._where(node, model, label, preset, since, before=cursor, only=only, without=without)
        order = "created, seq" if oldest_first else "created DESC, seq DESC"
        sql = f"SELECT id, doc FROM runs{where.sql()} ORDER BY {order} LIMIT ? OFFSET ?"
        rows = self.db.rows(sql, [*where.params, max(0, int(limit)), max(0, int(offset))])
        return self._read_rows(rows), (str(rows[-1][0]) if rows else None), len(rows)

    def count_runs(
        self,
        *,
        node: str | None = None,
        model: str | None = None,
        label: str | None = None,
        preset: str | None = None,
        since: float | None = None,
        only: Sequence[str] | None = None,
        without: Sequence[str] = (),
    ) -> int:
        """How many runs list_runs' filters match (a history's "N runs")."""
        where = self._where(node, model, label, preset, since, only=only, without=without)
        row = self.db.one(f"SELECT COUNT(*) FROM runs{where.sql()}", where.params)
        return int(row[0]) if row else 0

    def side_runs(
        self,
        *,
        node: str | None = None,
        model: str | None = None,
        label: str | None = None,
        preset: str | None = None,
        since: float | None = None,
    ) -> list[StoredRun]:
        """The matching runs a list may show apart from the others, newest first: find-max
        answers (run_kind find_max: a mark on their point's row) and published reference rows
        (origin reference, or a label `reference: ...` as the seeds' rows are stored). A few
        among many: one query over the runs' own columns, not every run read."""
        self.errors = []
        where = self._where(node, model, label, preset, since)
        where.add("(run_kind = ? OR origin = ? OR COALESCE(label, '') LIKE ?)", "find_max", "reference", "reference:%")
        # sorted here: an ORDER BY would walk the created index, a table lookup per run, not one scan
        found = self.db.rows(f"SELECT created, seq, id, doc FROM runs{where.sql()}", where.params)
        found.sort(key=lambda r: (float(r[0]), int(r[1])), reverse=True)
        return self._read_rows([(run_id, doc) for _, _, run_id, doc in found])

    def iter_runs(
        self,
        *,
        node: str | None = None,
        model: str | None = None,
        label: str | None = None,
        preset: str | None = None,
        since: float | None = None,
        page: int = 500,
    ) -> Iterator[StoredRun]:
        """Every matching run, newest first, read a page at a time (`--all` streams); rows that
        cannot be read are noted in `errors`."""
        self.errors = []
        before = None
        while True:
            runs, before, n = self._page(node, model, label, preset, since, page, before)
            yield from runs
            if n < page:
                return

    def list(
        self,
        *,
        node: str | None = None,
        label: str | None = None,
        model: str | None = None,
        since: float | None = None,
    ) -> list[StoredRun]:
        """ResultStore.list: every match, oldest first (loads them all: prefer list_runs)."""
        out = list(self.iter_runs(node=node, label=label, model=model, since=since))
        out.sort(key=run_order)  # ResultStore's order exactly (runs of one time: by source, part)
        return out

    def _read_rows(self, rows: Sequence[tuple]) -> builtins.list[StoredRun]:
        out = []
        for run_id, doc in rows:
            try:
                out.append(self._run(str(run_id), doc))
            except ValueError as exc:
                self.errors.append(str(exc))
        return out

    def mark(self) -> tuple[int, int]:
        """(the last sequence number, how many runs): changes whenever a run is stored or removed
        (a reader that caches what it read asks this first, one indexed query)."""
        row = self.db.one("SELECT MAX(seq), COUNT(*) FROM runs")
        return (int(row[0] or 0), int(row[1] or 0)) if row else (0, 0)

    def bench_presets(self) -> builtins.list[str]:
        """Every benchmark preset some stored run names (its index, not the runs)."""
        rows = self.db.rows("SELECT DISTINCT bench_preset FROM runs WHERE bench_preset IS NOT NULL")
        return sorted(str(r[0]) for r in rows)

    def stored_after(self, seq: int, limit: int = PAGE) -> tuple[builtins.list[StoredRun], int]:
        """The runs stored after sequence number `seq`, in the order they were stored (at most
        `limit`), and the sequence number to ask from next."""
        self.errors = []
        rows = self.db.rows("SELECT seq, id, doc FROM runs WHERE seq > ? ORDER BY seq LIMIT ?", (int(seq), int(limit)))
        last = int(rows[-1][0]) if rows else int(seq)
        return self._read_rows([(run_id, doc) for _, run_id, doc in rows]), last

    def fingerprints(self) -> dict[str, str]:
        """fingerprint -> id of every stored run with one."""
        rows = self.db.rows("SELECT fingerprint, id FROM runs WHERE fingerprint IS NOT NULL")
        return {str(fp): str(run_id) for fp, run_id in rows}

    def find_by_fingerprint(self, fingerprint: str) -> StoredRun | None:
        row = self.db.one("SELECT id, doc FROM runs WHERE fingerprint = ?", (fingerprint,))
        return self._run(str(row[0]), row[1]) if row is not None else None

    def check_readable(self) -> None:
        """ResultStore.check_readable: the database is open, so it is readable."""
