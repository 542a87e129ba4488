"""Alert delivery (console/services/alerts.py) to real receivers: a webhook HTTP server on
127.0.0.1 and real commands reading the alert on stdin."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path

import pytest

from console.core.alerts import AlertEngine, AlertRule, notice_for_test, parse_condition
from console.core.events import Event
from console.services.alerts import AlertDispatcher, AlertService
from console.services.events import EventLog
from tests.services.webhook_receiver import Receiver

TOKEN = "s3cr3t-token-value-0042"


def rule(**kw) -> AlertRule:
    return AlertRule(name=kw.pop("name", "gpu-sick"), condition=parse_condition(kw.pop("when", "health == fail")), **kw)


def fired(r: AlertRule):
    engine = AlertEngine([r])
    return engine.observe_gpu(1000.0, "mi300-a", 3, {}, "fail")[0]


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    path = tmp_path / name
    path.write_text(body)
    return [sys.executable, str(path)]


# ---------------------------------------------------------------- webhook


async def test_webhook_gets_the_alert_with_text_and_token(caplog):
    caplog.set_level(logging.DEBUG)
    with Receiver() as receiver:
        r = rule(webhook=receiver.url, token_env="ALERT_TOKEN")
        dispatcher = AlertDispatcher(env={"ALERT_TOKEN": TOKEN})
        try:
            [result] = await dispatcher.deliver(fired(r))
        finally:
            await dispatcher.close()
        [got] = receiver.received
    assert result.ok and result.attempts == 1 and result.detail == f"{receiver.url.rsplit('/hooks', 1)[0]}: HTTP 200"
    assert got.path == "/hooks/alerts"
    assert got.headers["authorization"] == f"Bearer {TOKEN}"
    assert got.headers["content-type"] == "application/json"
    body = got.json()
    assert body["text"] == "[rocm-console] FIRED gpu-sick: mi300-a GPU 3: health == fail"
    assert (body["alert"], body["state"], body["node"], body["gpu"], body["value"]) == (
        "gpu-sick",
        "fired",
        "mi300-a",
        3,
        "fail",
    )
    assert TOKEN not in caplog.text and TOKEN not in result.detail


async def test_failing_receiver_is_retried_with_backoff():
    with Receiver(statuses=[500, 503]) as receiver:
        dispatcher = AlertDispatcher(backoff_base=0.2, backoff_cap=5)
        try:
            [result] = await dispatcher.deliver(fired(rule(webhook=receiver.url)))
        finally:
            await dispatcher.close()
        times = [r.at for r in receiver.received]
    assert result.ok and result.attempts == 3
    assert len(times) == 3
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4  # 0.2 s, then 0.4 s: exponential


async def test_a_refusing_receiver_is_not_asked_again():
    with Receiver(statuses=[404]) as receiver:
        dispatcher = AlertDispatcher(backoff_base=0.05)
        try:
            [result] = await dispatcher.deliver(fired(rule(webhook=receiver.url)))
        finally:
            await dispatcher.close()
        assert len(receiver.received) == 1
    assert not result.ok and result.detail.endswith("HTTP 404 (after 1 attempt)")


async def test_failure_is_logged_once_without_the_token(caplog):
    caplog.set_level(logging.INFO, logger="console.alerts")
    with Receiver(statuses=[500] * 6) as receiver:
        r = rule(webhook=receiver.url, token_env="ALERT_TOKEN")
        dispatcher = AlertDispatcher(retries=2, backoff_base=0.01, env={"ALERT_TOKEN": TOKEN})
        try:
            first = await dispatcher.deliver(fired(r))
            second = await dispatcher.deliver(fired(r))
            third = await dispatcher.deliver(fired(r))  # the receiver answers 200 again
        finally:
            await dispatcher.close()
        assert len(receiver.received) == 7
    assert [d.ok for d in (*first, *second, *third)] == [False, False, True]
    assert first[0].attempts == 3 and "HTTP 500 (after 3 attempts)" in first[0].detail
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "gpu-sick: webhook failed" in warnings[0].getMessage()
    assert any("works again" in r.getMessage() for r in caplog.records)
    assert TOKEN not in caplog.text


async def test_url_from_the_environment_is_never_shown(caplog):
    caplog.set_level(logging.INFO, logger="console.alerts")
    secret_url = "http://127.0.0.1:9/services/T000/B000/" + TOKEN  # nothing listens on port 9
    r = rule(webhook_env="HOOK_URL")
    dispatcher = AlertDispatcher(retries=1, backoff_base=0.01, env={"HOOK_URL": secret_url})
    try:
        [result] = await dispatcher.deliver(fired(r))
        [unset] = await AlertDispatcher(env={}).deliver(fired(r))
    finally:
        await dispatcher.close()
    assert not result.ok and result.detail.startswith("http://127.0.0.1:9: ConnectError")
    assert TOKEN not in result.detail and TOKEN not in caplog.text
    assert unset.detail == "webhook_env HOOK_URL is not set"
    [garbage] = await AlertDispatcher(env={"HOOK_URL": "hooks/" + TOKEN}).deliver(fired(r))
    assert garbage.detail == "webhook_env HOOK_URL holds no http(s) URL"


async def test_missing_token_is_one_clear_failure():
    with Receiver() as receiver:
        [result] = await AlertDispatcher(env={}).deliver(fired(rule(webhook=receiver.url, token_env="NOPE")))
        assert receiver.received == []
    assert not result.ok and result.detail.endswith("token_env NOPE is not set")


# ---------------------------------------------------------------- command


async def test_command_reads_the_alert_on_stdin(tmp_path):
    out = tmp_path / "got.json"
    argv = script(
        tmp_path,
        "page.py",
        "import json, os, sys\n"
        f"data = json.load(sys.stdin)\n"
        f"data['_argv'] = sys.argv[1:]\n"
        f"data['_token_seen'] = 'ALERT_TOKEN' in os.environ\n"
        f"open({str(out)!r}, 'w').write(json.dumps(data))\n",
    )
    r = rule(command=(*argv, "--team", "gpu; rm -rf /"), webhook="http://127.0.0.1:9/", token_env="ALERT_TOKEN")
    dispatcher = AlertDispatcher(env={**os.environ, "ALERT_TOKEN": TOKEN}, retries=0)
    try:
        results = await dispatcher.deliver(fired(r))
    finally:
        await dispatcher.close()
    command = next(d for d in results if d.action == "command")
    assert command.ok, command.detail
    got = json.loads(out.read_text())
    assert got["state"] == "fired" and got["alert"] == "gpu-sick" and got["gpu"] == 3
    assert got["text"].startswith("[rocm-console] FIRED gpu-sick")
    assert got["_argv"] == ["--team", "gpu; rm -rf /"]  # one argv item: no shell saw it
    assert got["_token_seen"] is False  # the webhook's token is not handed to commands


async def test_command_failures(tmp_path):
    failing = script(tmp_path, "fail.py", "import sys\nsys.stderr.write('pager down\\n')\nsys.exit(3)\n")
    [result] = await AlertDispatcher().deliver(fired(rule(command=tuple(failing))))
    assert not result.ok and result.detail.endswith("exited with 3: pager down")
    [missing] = await AlertDispatcher().deliver(fired(rule(command=("/no/such/pager",))))
    assert missing.detail == "cannot run /no/such/pager: No such file or directory"


async def test_command_timeout_kills_it_and_its_children(tmp_path):
    pids = tmp_path / "pids"
    argv = script(
        tmp_path,
        "hang.py",
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(60)\n",
    )
    started = time.monotonic()
    [result] = await AlertDispatcher().deliver(fired(rule(command=tuple(argv), timeout=1.0)))
    assert not result.ok and result.detail.endswith("timed out after 1 s (killed)")
    assert time.monotonic() - started < 8
    for pid in map(int, pids.read_text().split()):
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail(f"process {pid} outlived the timeout")


# ---------------------------------------------------------------- never blocking


def test_submit_outside_a_loop_waits_for_start(tmp_path):
    out = tmp_path / "later.json"
    argv = script(tmp_path, "later.py", f"import sys\nopen({str(out)!r}, 'w').write(sys.stdin.read())\n")
    dispatcher = AlertDispatcher()
    assert dispatcher.submit(fired(rule(command=tuple(argv))))  # no running loop: queued

    async def later() -> None:
        dispatcher.start()
        assert await dispatcher.drain(timeout=10)
        await dispatcher.close()

    asyncio.run(later())
    assert json.loads(out.read_text())["alert"] == "gpu-sick"


async def test_submit_never_waits_for_a_slow_or_failing_receiver(tmp_path):
    out = tmp_path / "fast.json"
    fast = script(tmp_path, "fast.py", f"import sys\nopen({str(out)!r}, 'w').write(sys.stdin.read())\n")
    with Receiver(statuses=[500, 500, 500], delay=0.5) as receiver:
        dispatcher = AlertDispatcher(backoff_base=0.3)
        slow = rule(name="slow-hook", webhook=receiver.url)
        quick = rule(name="quick-command", command=tuple(fast))
        try:
            started = time.monotonic()
            assert dispatcher.submit(fired(slow))
            assert dispatcher.submit(fired(quick))
            assert time.monotonic() - started < 0.05  # submit returns at once
            # The command is done long before the webhook stops retrying.
            for _ in range(100):
                if out.exists() and out.read_text():
                    break
                await asyncio.sleep(0.05)
            assert json.loads(out.read_text())["alert"] == "quick-command"
            assert not [d for d in dispatcher.results if d.action == "webhook"]
            assert await dispatcher.drain(timeout=20)
        finally:
            await dispatcher.close()
        assert len(receiver.received) == 4
    webhook = next(d for d in dispatcher.results if d.action == "webhook")
    assert webhook.ok and webhook.attempts == 4


async def test_a_full_queue_drops_instead_of_blocking(caplog):
    caplog.set_level(logging.WARNING, logger="console.alerts")
    with Receiver(delay=0.3) as receiver:
        dispatcher = AlertDispatcher(queue_size=2, concurrency=1)
        r = rule(webhook=receiver.url)
        try:
            accepted = [dispatcher.submit(fired(r)) for _ in range(6)]
            assert accepted[:2] == [True, True] and not all(accepted)
            assert dispatcher.dropped >= 1
            assert await dispatcher.drain(timeout=10)
        finally:
            await dispatcher.close()
    assert len([r for r in caplog.records if "alert queue full" in r.getMessage()]) == 1


async def test_close_stops_retries():
    with Receiver(statuses=[500] * 50) as receiver:
        dispatcher = AlertDispatcher(retries=40, backoff_base=0.2)
        dispatcher.submit(fired(rule(webhook=receiver.url)))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        await dispatcher.close()
        assert time.monotonic() - started < 2
        count = len(receiver.received)
        await asyncio.sleep(0.6)
        assert len(receiver.received) == count


# ---------------------------------------------------------------- engine + log + dispatcher


async def test_alert_service_records_events_and_delivers(tmp_path):
    log = EventLog(tmp_path / "data" / "events.jsonl")
    with Receiver() as receiver:
        r = rule(name="hot", when="temp_junction_c > 95 for 30s", webhook=receiver.url)
        service = AlertService([r], events=log, dispatcher=AlertDispatcher())
        try:
            service.observe_gpu(0.0, "n1", 2, {"temp_junction_c": 97.0}, "ok")
            assert service.tick(29.0) == []
            [fired_event] = service.tick(30.0)
            [cleared_event] = service.observe_gpu(40.0, "n1", 2, {"temp_junction_c": 60.0}, "ok")
            assert await service.dispatcher.drain(timeout=10)
        finally:
            await service.dispatcher.close()
        bodies = [x.json() for x in receiver.received]
    assert [b["state"] for b in bodies] == ["fired", "cleared"]
    assert (fired_event.kind, cleared_event.kind) == ("alert.fired", "alert.cleared")
    assert [e.kind for e in log.read()] == ["alert.cleared", "alert.fired"]
    failed = Event(50.0, "instance.failed", "n1", 0, "llama", "fail", "exit 1")
    assert AlertService([rule(when="instance failed")], events=log).observe_event(failed)[0].kind == "alert.fired"


def test_test_notice_goes_through_every_action(tmp_path):
    out = tmp_path / "test.json"
    argv = script(tmp_path, "t.py", f"import sys\nopen({str(out)!r}, 'w').write(sys.stdin.read())\n")
    with Receiver() as receiver:
        r = rule(command=tuple(argv), webhook=receiver.url)
        results = asyncio.run(AlertDispatcher().deliver(notice_for_test(r, time.time())))
        [got] = receiver.received
    assert [d.ok for d in results] == [True, True]
    assert json.loads(out.read_text())["state"] == "test" and got.json()["state"] == "test"


async def test_one_alerts_notices_arrive_in_order_when_the_first_is_retried():
    """fired, then cleared: the receiver's first answer is a 503, so "fired" is retried; the
    "cleared" behind it waits for it instead of overtaking it (an incident left open)."""
    from dataclasses import replace

    refused = []

    def refuse_a_once(body: bytes) -> int | None:
        # mi300-a's first request gets the 503, whichever of the two "fired" reaches us first
        if json.loads(body)["node"] == "mi300-a" and not refused:
            refused.append(body)
            return 503
        return None

    with Receiver(status_for=refuse_a_once) as receiver:
        r = rule(name="hot", webhook=receiver.url)
        notice = fired(r)
        dispatcher = AlertDispatcher(backoff_base=0.3)
        try:
            dispatcher.submit(notice)
            dispatcher.submit(replace(notice, state="cleared", time=notice.time + 10))
            other = replace(notice, node="mi300-b")  # another alert is not held up by this one
            dispatcher.submit(other)
            assert await dispatcher.drain(timeout=20)
        finally:
            await dispatcher.close()
        got = [(x.json()["state"], x.json()["node"]) for x in receiver.received]
    assert [json.loads(b)["state"] for b in refused] == ["fired"]  # answered 503
    delivered_a = [state for state, node in got if node == "mi300-a"]
    assert delivered_a == ["fired", "fired", "cleared"], got  # refused, retried, then cleared
    assert got.index(("fired", "mi300-b")) < got.index(("cleared", "mi300-a")), got
