"""Issue Y: the history screen reads any page directly (row N in page N // PAGE): list_runs'
`offset` gives the rows the keyset read gives, in the same order, with the same filters, and
`only` / `without` keep or leave out runs by id (the reference rows, the folded find-max
answers); on SQLite and on a real PostgreSQL (`store_engine`)."""

from __future__ import annotations

import dataclasses

import pytest

from console.services.store import open_store
from tests.services.store.file_store import console_run


@pytest.fixture
def store(store_engine):
    with open_store(store_engine.location()) as s:
        yield s


def keyset(store, size: int, **filters) -> list[str]:
    seen, before = [], None
    while True:
        page = store.runs.list_runs(**filters, limit=size, before=before)
        seen += [r.id for r in page]
        if len(page) < size:
            return seen
        before = page[-1].id


def test_offset_pages_equal_the_keyset_pages_with_the_same_filters(store):
    runs = []
    for i in range(90):
        run = console_run(i, node=f"n{i % 3}", label="nightly" if i % 4 == 0 else None)
        runs.append(run)
        store.runs.save(run)
    same_time = dataclasses.replace(console_run(200, node="n0"), created=runs[40].created)  # a tie: seq decides
    store.runs.save(same_time)
    for filters in ({}, {"node": "n1"}, {"label": "nightly"}, {"node": "n0", "since": runs[30].created}):
        wanted = keyset(store, 7, **filters)
        assert len(wanted) == store.runs.count_runs(**filters) and len(wanted) > 7, filters
        by_offset = []
        for offset in range(0, len(wanted), 7):
            by_offset += [r.id for r in store.runs.list_runs(**filters, limit=7, offset=offset)]
        assert by_offset == wanted, filters
        middle = store.runs.list_runs(**filters, limit=5, offset=len(wanted) - 3)  # the last page: short
        assert [r.id for r in middle] == wanted[-3:]
        oldest = store.runs.list_runs(**filters, limit=7, offset=2, oldest_first=True)  # a page near the end
        assert [r.id for r in oldest][::-1] == wanted[-9:-2], filters
    assert store.runs.list_runs(limit=5, offset=10_000) == []
    with pytest.raises(ValueError, match="newest first only"):
        store.runs.list_runs(before=wanted[0], oldest_first=True)


def test_only_and_without_keep_the_order_and_count_alike(store):
    runs = [console_run(i, node=f"n{i % 2}") for i in range(20)]
    for run in runs:
        store.runs.save(run)
    newest = [r.id for r in reversed(runs)]
    apart = [newest[0], newest[5], newest[6], "no-such-run"]  # an id not stored is no error
    left = [i for i in newest if i not in apart]
    assert [r.id for r in store.runs.list_runs(limit=100, without=apart)] == left
    assert [r.id for r in store.runs.list_runs(limit=4, offset=4, without=apart)] == left[4:8]
    assert store.runs.count_runs(without=apart) == 17
    assert [r.id for r in store.runs.list_runs(limit=100, only=apart)] == [newest[0], newest[5], newest[6]]
    assert [r.id for r in store.runs.list_runs(limit=1, offset=1, only=apart)] == [newest[5]]
    node1 = [r.id for r in store.runs.list_runs(node="n1", limit=100, without=apart)]
    assert node1 == [i for i in left if store.runs.get(i).context["node"] == "n1"]
    assert store.runs.count_runs(only=[]) == 0 and store.runs.list_runs(only=[]) == []


def test_side_runs_are_the_reference_rows_and_find_max_answers(store):
    plain = console_run(0)
    answer = console_run(1)
    answer = dataclasses.replace(answer, context={**answer.context, "run_kind": "find_max"})
    reference = dataclasses.replace(console_run(2), label="reference: seed 004's published numbers")
    for run in (plain, answer, reference):
        store.runs.save(run)
    assert [r.id for r in store.runs.side_runs()] == [reference.id, answer.id]
    assert store.runs.side_runs(node="elsewhere") == []
