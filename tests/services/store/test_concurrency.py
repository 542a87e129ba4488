"""Eight processes writing one store at once (SQLite, and PostgreSQL) (two consoles, a watcher, CLI commands):
every distinct run and every event is stored, a result stored by several is stored once.

Real processes started together behind a barrier, each opening the store itself (the first
opening makes the schema while the others wait): nothing is shared but the file."""

from __future__ import annotations

import multiprocessing

from console.core.events import Event
from console.core.store.schema import MIGRATIONS, SCHEMA_VERSION
from console.services.store import open_store
from tests.services.store.file_store import NOW, console_run

WORKERS = 8
RUNS = 12  # distinct runs per process
EVENTS = 40  # events per process, in batches of 1 to 4


def _writer(path: str, worker: int, barrier, out) -> None:
    barrier.wait()
    store = open_store(path)
    saved = []
    for i in range(RUNS):
        saved.append(store.runs.add(console_run(1000 + worker * RUNS + i, node=f"w{worker}")))
        store.events.append([Event(NOW + i, "benchmark.finished", f"w{worker}", message=f"{worker}/{i}")])
    shared = store.runs.add(console_run(1, node="shared"))  # the same result, stored by all eight
    for i in range(EVENTS - RUNS):
        store.events.append(Event(NOW + 100 + i, "gpu.health", f"w{worker}", gpu=i % 8, message=f"{worker}:{i}"))
    store.close()
    out.put(([(s.id, s.new) for s in saved], (shared.id, shared.new)))


def test_eight_processes_lose_nothing_and_store_nothing_twice(store_engine):
    path = store_engine.location()  # the processes inherit PGPASSWORD
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, barrier, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    with open_store(path) as store:
        distinct = [run_id for saved, _ in results for run_id, new in saved]
        assert all(new for saved, _ in results for _, new in saved)
        shared = [shared for _, shared in results]
        assert len({run_id for run_id, _ in shared}) == 1  # one id for the shared result
        assert sorted(new for _, new in shared) == [False] * (WORKERS - 1) + [True]  # stored by one
        assert store.runs.count() == WORKERS * RUNS + 1 == len(set(distinct)) + 1
        assert sorted(store.runs.ids()) == sorted([*distinct, shared[0][0]])
        assert len(store.runs.fingerprints()) == store.runs.count()
        events = store.events.read()
        assert len(events) == WORKERS * EVENTS
        assert sorted(e.message for e in events) == sorted(
            [f"{w}/{i}" for w in range(WORKERS) for i in range(RUNS)]
            + [f"{w}:{i}" for w in range(WORKERS) for i in range(EVENTS - RUNS)]
        )
        assert store.db.schema_version() == SCHEMA_VERSION  # each migration applied once
        assert len(store.db.rows("SELECT * FROM schema_version")) == len(MIGRATIONS)
