"""Schema version 2 on both engines (`store_engine`): a running watcher's row in the store is
how a console with another data folder (another machine) learns that the fleet is watched and
sees its alert states; a restarted watcher resumes the alerts of the store's row; every event
says which console or watcher wrote it, through the store, a dump and a migration back; a
store made at version 1 is brought to version 2 keeping its events."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time

from console.core.alerts import AlertRule, parse_condition
from console.core.events import Event
from console.core.health import HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import Profile
from console.core.store.rows import event_row
from console.core.store.schema import MIGRATIONS, SCHEMA_VERSION
from console.services import demo_faults
from console.services.history import History
from console.services.store import db as db_module
from console.services.store import dump, migrate_file_store, open_store
from console.services.watcher import Watcher
from console.services.watcher_presence import AlertState, WatcherInfo, WatcherPresence, fleet_key
from tests.helpers import wait_for


def _histories(store_engine, tmp_path) -> tuple[History, History]:
    """Two faces on two machines: one store, two data folders that share no file."""
    where = store_engine.location()
    return (
        History(where, tmp_path / "watcher-machine", origin="watch@a"),
        History(where, tmp_path / "console-machine", origin="tui@b"),
    )


async def test_a_console_elsewhere_sees_the_watcher_and_its_alerts_through_the_store(store_engine, sim_node, tmp_path):
    node = sim_node("n1", seed=5, state_dir=str(tmp_path / "n1"))
    rule = AlertRule(name="sick", condition=parse_condition("health == fail"))
    settings = HealthSettings(HealthRules(interval=0.5), (rule,))
    mine, theirs = _histories(store_engine, tmp_path)
    watcher = Watcher(Profile(nodes=(node,)), settings, history=mine, heartbeat_s=0.5)
    theirs.open()
    console = WatcherPresence(theirs.data_dir, [node], history=theirs, check_s=0)
    alone = WatcherPresence(theirs.data_dir, [node], check_s=0)  # no store: its folder has no watcher
    task = asyncio.create_task(watcher.run())
    try:
        assert await wait_for(lambda: console.check() is not None, timeout=20)
        assert console.header().startswith("watched since ") and console.watcher.label.endswith(f":{os.getpid()}")
        assert alone.check() is None
        assert await wait_for(lambda: watcher.fleet.snapshot("n1").health_of(2) is not None, timeout=30)
        demo_faults.inject(node, 2, "ecc_uncorrectable")
        assert await wait_for(lambda: console.check() is not None and console.alerts, timeout=30)
        assert [(a.rule, a.node, a.gpu) for a in console.alerts] == [("sick", "n1", 2)]
        assert console.header().endswith(" · 1 alert firing")
        # the watcher's events are in the console's timeline, saying who wrote them
        fired = theirs.events.read(kind="alert")
        assert [(e.kind, e.gpu, e.origin) for e in fired] == [("alert.fired", 2, "watch@a")]
    finally:
        watcher.stop()
        await asyncio.wait_for(task, 30)
    assert console.check() is None  # a clean end: the row is gone, the console takes over at once
    mine.close()
    theirs.close()


def test_a_stale_row_is_no_watcher_and_a_restarted_watcher_resumes_the_rows_alerts(store_engine, sim_node, tmp_path):
    node = sim_node("n1")
    mine, theirs = _histories(store_engine, tmp_path)
    key = fleet_key([node])
    now = float(int(time.time()))  # whole seconds: a row keeps times to the millisecond
    open_alert = AlertState("sick", "n1", 2, None, since=now - 60, fired=now - 50, severity="fail", text="FIRED sick")
    # a watcher of another machine, killed 20 s ago (its heartbeat: 3 periods of 5 s and more)
    killed = WatcherInfo(4242, "other-host", now - 3600, now - 20, 5.0, ("/etc/lab.toml",), key)
    theirs.open().watchers.beat(killed, [open_alert])
    console = WatcherPresence(theirs.data_dir, [node], history=theirs, check_s=0)
    assert console.check(now) is None
    assert console.check(now - 15) is not None  # when it was alive
    assert console.watcher == killed and console.alerts == [open_alert]

    rule = AlertRule(name="sick", condition=parse_condition("health == fail"))
    watcher = Watcher(Profile(nodes=(node,)), HealthSettings(HealthRules(), (rule,)), history=mine)
    watcher.lock()  # resumes the open alert: it is not fired again while it holds
    assert list(watcher.alerts.open.values()) == [open_alert]
    os.close(watcher._lock_fd)
    mine.close()
    theirs.close()


def test_a_watcher_whose_clock_is_off_is_judged_by_the_servers_clock(store_engine, sim_node, tmp_path):
    """Machines sharing a store need not agree on the time: a watcher whose clock runs an hour
    behind, beating now, is alive to a console elsewhere; one that stopped beating 20 s ago on
    a clock an hour ahead is gone."""
    node = sim_node("n1")
    _, theirs = _histories(store_engine, tmp_path)
    key = fleet_key([node])
    store = theirs.open()
    t = time.time()
    behind = t - 3600  # the watcher's machine: an hour behind
    store.watchers.beat(WatcherInfo(4242, "slow-host", behind - 600, behind, 5.0, (), key), [], now=behind)
    console = WatcherPresence(theirs.data_dir, [node], history=theirs, check_s=0)
    assert console.check() is not None, "a live watcher on a slow clock was taken for gone"
    assert console.watcher.host == "slow-host" and abs(console.watcher.heartbeat - t) < 3
    assert abs(console.watcher.started - (t - 600)) < 3  # "watched since" in the reader's clock

    ahead = t + 3600  # another machine, an hour ahead, whose watcher was killed 20 s ago
    store.watchers.beat(WatcherInfo(4242, "slow-host", ahead - 600, ahead - 20, 5.0, (), key), [], now=ahead)
    assert console.check() is None, "a dead watcher on a fast clock was taken for alive"
    theirs.close()


def test_this_hosts_dead_watchers_rows_are_removed_by_the_next_one(store_engine, sim_node, tmp_path):
    node = sim_node("n1")
    mine, _ = _histories(store_engine, tmp_path)
    key = fleet_key([node])
    dead_pid = 2**22 + 7  # above any pid_max the test machine uses: no such process
    now = time.time()
    store = mine.open()
    store.watchers.beat(WatcherInfo(dead_pid, socket.gethostname(), now - 100, now - 1, 5.0, (), key), [])
    store.watchers.beat(WatcherInfo(1, "far-host", now - 100, now - 8 * 86400, 5.0, (), "other-fleet"), [])
    watcher = Watcher(Profile(nodes=(node,)), HealthSettings(), history=mine)
    watcher.lock()
    assert store.watchers.of(key) == [] and store.watchers.of("other-fleet") == []
    os.close(watcher._lock_fd)
    mine.close()


def test_events_say_where_they_came_from_through_a_dump_and_back(store_engine, tmp_path):
    mine, theirs = _histories(store_engine, tmp_path)
    mine.events.append(Event(1000.0, "node.up", "n1"))
    theirs.events.append([Event(1001.0, "benchmark.started", "n1"), Event(1002.0, "node.down", "n1", origin="cli@c")])
    store = mine.open()
    assert [(e.kind, e.origin) for e in store.events.read()[::-1]] == [
        ("node.up", "watch@a"),
        ("benchmark.started", "tui@b"),
        ("node.down", "cli@c"),  # an event that names its writer keeps it
    ]
    assert store.db.rows("SELECT origin FROM events ORDER BY seq") == [("watch@a",), ("tui@b",), ("cli@c",)]
    dump(store, tmp_path / "dump")
    lines = [json.loads(x) for x in (tmp_path / "dump" / "events.jsonl").read_text().splitlines()]
    assert [x["origin"] for x in lines] == ["watch@a", "tui@b", "cli@c"]
    with open_store(tmp_path / "from-dump.sqlite3") as rebuilt:
        migrate_file_store(tmp_path / "dump", rebuilt)
        assert [e.origin for e in rebuilt.events.read()[::-1]] == ["watch@a", "tui@b", "cli@c"]
        assert rebuilt.db.rows("SELECT origin FROM events ORDER BY seq") == [("watch@a",), ("tui@b",), ("cli@c",)]
    mine.close()
    theirs.close()


def test_an_event_written_while_the_store_was_down_keeps_its_origin_when_moved_in(tmp_path):
    data = tmp_path / "data"
    (data / "store.sqlite3").mkdir(parents=True)
    down = History(None, data, origin="watch@a")
    down.events.append(Event(1000.0, "node.up", "n1"))
    assert down.events.unavailable is not None
    (data / "store.sqlite3").rmdir()
    back = History(None, data)
    assert [(e.kind, e.origin) for e in back.open().events.read()] == [("node.up", "watch@a")]
    back.close()


def test_a_version_1_store_is_brought_to_version_2_keeping_its_events(store_engine, monkeypatch):
    where = store_engine.location()
    with monkeypatch.context() as old_console:
        old_console.setattr(db_module, "MIGRATIONS", MIGRATIONS[:1])
        old_console.setattr(db_module, "SCHEMA_VERSION", 1)
        with open_store(where) as old:
            assert old.db.schema_version() == 1
            row = event_row(Event(1000.0, "node.up", "n1", message="from version 1"), "u-1")
            del row["origin"]  # version 1 has no such column
            with old.db.transaction():
                old.db.execute(
                    f"INSERT INTO events ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", list(row.values())
                )
    with open_store(where) as store:
        assert store.db.schema_version() == SCHEMA_VERSION  # 2 and every later one, in one opening
        [event] = store.events.read()
        assert (event.message, event.origin) == ("from version 1", None)
        assert store.watchers.of("any") == []


async def test_a_consoles_health_watch_steps_aside_for_a_watcher_of_another_machine(store_engine, sim_node, tmp_path):
    from console.services.fleet import FleetTelemetry
    from console.services.health_watch import HealthWatch

    node = sim_node("n1")
    mine, theirs = _histories(store_engine, tmp_path)
    theirs.open()
    rule = AlertRule(name="sick", condition=parse_condition("health == fail"))
    watch = HealthWatch(FleetTelemetry([node]), HealthSettings(HealthRules(), (rule,)), events=theirs.events)
    await watch.start()
    try:
        assert watch.watched is None
        key = fleet_key([node])
        info = WatcherInfo(4242, "other-host", time.time() - 60, time.time(), 5.0, (), key)
        mine.open().watchers.beat(info, [])
        assert await wait_for(lambda: watch.watched is not None, timeout=10)  # looked at every 3 s, off the loop
        assert watch.watched.label == "other-host:4242"
        watch.observe_instances("n1", [])  # what only a console sees is still written; alerts are not sent
        watch._alert("observe_gpu", time.time(), "n1", 0, {}, "fail")
        watch._alert("tick", time.time() + 1)
        assert theirs.events.read(kind="alert") == []
    finally:
        await watch.stop()
    mine.close()
    theirs.close()
