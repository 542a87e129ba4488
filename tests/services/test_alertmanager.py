"""AlertmanagerPoster against a stand-in HTTP server that can fail: errors and slowness are
retried with backoff, said once, never block the caller, and lose no alert; active alerts are
re-sent, a cleared one goes once with endsAt; a console posts while no watcher runs and posts
nothing while one does."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.core.alerts import AlertNotice, AlertRule, parse_condition
from console.core.model import AlertmanagerSpec, Profile
from console.services.alertmanager import AlertmanagerPoster
from console.services.alerts import AlertService
from tests.helpers import wait_for

RULE = AlertRule("sick", parse_condition("health == fail"), severity="fail")


class FakeAlertmanager:
    """Answers POST /api/v2/alerts with the next of ``answers`` (then 200), after ``delay``."""

    def __init__(self, answers: list[int] | None = None, delay: float = 0.0) -> None:
        self.answers = list(answers or [])
        self.delay = delay
        self.posts: list[tuple[str, list[dict], str | None]] = []  # (path, body, Authorization)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                time.sleep(fake.delay)
                code = fake.answers.pop(0) if fake.answers else 200
                fake.posts.append((self.path, body, self.headers.get("Authorization")))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self) -> list[list[dict]]:
        return [body for _, body, _ in self.posts]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeAlertmanager()
    yield server
    server.close()


def _fired(gpu: int = 3, t: float = 1000.0) -> AlertNotice:
    return AlertNotice(RULE, "fired", t, "n1", gpu, since=t - 5)


async def test_errors_are_retried_with_backoff_said_once_and_the_alert_arrives(fake, caplog, monkeypatch):
    fake.answers = [503, 500, 400, 429]
    monkeypatch.setenv("AM_TOKEN", "tok-secret-123")
    poster = AlertmanagerPoster(
        AlertmanagerSpec(fake.url, token_env="AM_TOKEN", resend_interval=60), backoff_base=0.05, backoff_cap=0.2
    )
    caplog.set_level(logging.INFO, "console.alerts")
    async with asyncio.timeout(20):
        poster.notice(_fired())
        assert await wait_for(lambda: poster.posts == 1, timeout=10)
    await poster.close()
    assert poster.attempts == 5  # four refused, the fifth taken
    path, body, auth = fake.posts[-1]
    assert path == "/api/v2/alerts" and auth == "Bearer tok-secret-123"
    assert body[0]["labels"] == {"alertname": "sick", "node": "n1", "gpu": "3", "severity": "critical"}
    lines = [r.getMessage() for r in caplog.records]
    assert sum("cannot post" in line for line in lines) == 1, lines  # not once per retry
    assert sum("works again" in line for line in lines) == 1, lines
    assert f"alertmanager {fake.url}: cannot post: HTTP 503" in lines[0]
    assert not any("tok-secret-123" in line for line in lines)


async def test_alertmanager_down_keeps_the_alerts_and_sends_them_when_it_is_back(caplog):
    from tests.helpers import free_port

    port = free_port()
    poster = AlertmanagerPoster(AlertmanagerSpec(f"http://127.0.0.1:{port}"), backoff_base=0.05, backoff_cap=0.2)
    poster.notice(_fired(1))
    poster.notice(_fired(2))
    poster.notice(AlertNotice(RULE, "cleared", 1010.0, "n1", 2, since=995.0))
    assert await wait_for(lambda: poster.attempts >= 3, timeout=10)
    assert poster.posts == 0 and len(poster.active) == 1 and len(poster.pending) == 1
    server = FakeAlertmanager()
    try:
        poster.spec = AlertmanagerSpec(server.url)  # Alertmanager back (at the address it had)
        assert await wait_for(lambda: poster.posts == 1, timeout=10)
        body = server.delivered()[0]
        assert {(a["labels"]["gpu"], "endsAt" in a) for a in body} == {("1", False), ("2", True)}
        assert not poster.pending  # the resolution went out once: it is not sent again
    finally:
        await poster.close()
        server.close()
    assert sum("cannot post" in r.getMessage() for r in caplog.records) == 1


async def test_a_slow_alertmanager_never_blocks_the_caller():
    import httpx  # noqa: F401 - imported once per process (the first POST's): not what is measured

    slow = FakeAlertmanager(delay=1.5)
    poster = AlertmanagerPoster(AlertmanagerSpec(slow.url, timeout=0.3), backoff_base=0.05, backoff_cap=0.1)
    try:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        for gpu in range(8):
            poster.notice(_fired(gpu))
        assert time.perf_counter() - started < 0.1  # no I/O in the sink
        # the loop stays free while the POSTs time out and are retried
        lag = 0.0
        for _ in range(15):
            asked = loop.time()
            await asyncio.sleep(0.1)
            lag = max(lag, loop.time() - asked - 0.1)
        assert lag < 0.25  # a POST waiting on the loop would hold it 0.3 s per try
        assert poster.failing and len(poster.active) == 8
    finally:
        await poster.close()
        slow.close()


async def test_active_alerts_are_resent_and_a_cleared_one_goes_once_with_ends_at(fake):
    poster = AlertmanagerPoster(AlertmanagerSpec(fake.url, resend_interval=0.2))
    try:
        poster.notice(_fired(3))
        assert await wait_for(lambda: len(fake.posts) >= 3, timeout=5)  # re-sent while active
        assert all(b[0]["labels"]["gpu"] == "3" and "endsAt" not in b[0] for b in fake.delivered())
        poster.notice(AlertNotice(RULE, "cleared", 1060.0, "n1", 3, since=995.0))
        count = len(fake.posts)
        assert await wait_for(lambda: len(fake.posts) > count, timeout=5)
        resolved = fake.delivered()[count]
        assert resolved[0]["endsAt"] == "1970-01-01T00:17:40.000Z"
        await asyncio.sleep(0.5)
        assert all(not b for b in fake.delivered()[count + 1 :])  # nothing left to send
        assert len(fake.posts) == count + 1
    finally:
        await poster.close()


async def test_a_console_posts_through_its_alert_service_and_nothing_once_watched(fake):
    service = AlertService([RULE])
    poster = AlertmanagerPoster(AlertmanagerSpec(fake.url))
    service.alertmanager = poster
    try:
        service.handle([_fired(6)])
        assert await wait_for(lambda: len(fake.posts) == 1, timeout=5)
        assert fake.delivered()[0][0]["labels"]["gpu"] == "6"
        poster.forget()  # a watcher took over: what HealthWatch does when it sees one
        assert not poster.active and not poster.pending
    finally:
        await poster.close()


async def test_a_restarted_watcher_re_sends_the_alerts_it_resumed(fake, tmp_path):
    from console.core.health import HealthRules
    from console.core.health_profile import HealthSettings
    from console.services.events import EventLog
    from console.services.watcher import Watcher
    from console.services.watcher_presence import ALERTS_FILE, AlertState, write_json_atomic
    from tests.conftest import NodeSpec

    node = NodeSpec(name="n1", host="localhost", transport="local", state_dir=str(tmp_path / "n1"))
    profile = Profile(nodes=(node,), alertmanager=AlertmanagerSpec(fake.url))
    watcher = Watcher(profile, HealthSettings(HealthRules(), (RULE,)), events=EventLog(tmp_path / "d" / "events.jsonl"))
    state = AlertState("sick", "n1", 3, None, 990.0, 995.0, "fail", "FIRED sick: n1 GPU 3: health == fail")
    write_json_atomic(watcher.folder / ALERTS_FILE, {"alerts": [state.to_dict()]})
    watcher.lock()
    try:
        watcher.alertmanager.start()
        assert await wait_for(lambda: fake.posts, timeout=5)
        (alert,) = fake.delivered()[0]
        assert alert["labels"] == {"alertname": "sick", "node": "n1", "gpu": "3", "severity": "critical"}
        assert "endsAt" not in alert and alert["startsAt"] == "1970-01-01T00:16:30.000Z"
    finally:
        await watcher.alertmanager.close()
        await watcher._end()
