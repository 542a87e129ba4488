"""Alert delivery: run a rule's command, POST it to a webhook, off the caller's loop.

``AlertDispatcher.submit`` never blocks: notices go into a bounded queue (a full queue
drops the newest and says so once), a worker starts one task per notice (at most
``concurrency`` at a time), so a slow or failing receiver delays nobody else.

- command: the rule's argv run without a shell (its own session, so a timeout kills
  it and its children), the alert as JSON on stdin, one line ending in a newline (a
  command that appends it to a file keeps one alert a line); a non-zero exit or a
  timeout is a failure.  No command gets the webhook URL or token variable of any rule
  (nor the other secrets' variables the dispatcher is told of with ``hide_env``).
- webhook: ``POST`` of the same JSON, which carries a ``text`` field (Slack and
  Mattermost incoming webhooks show it); ``Authorization: Bearer <token>`` when the
  rule names ``token_env``.  A connection error, a timeout, 429 or a 5xx is retried
  with capped exponential backoff (console/core/backoff.py); other answers are final.
  A URL from the environment that is not a usable http(s) URL, or that carries a user
  or password (Basic auth would replace the token), is one failure naming the rule.

Each action's outcome is kept on its own: one action that fails in any way, even by a
bug, is a failed Delivery, never the loss of the rule's other actions' outcomes.

A failing action is logged once (logger ``console.alerts``) until it works again.
The token and a URL taken from the environment are never printed: messages name
the receiver by scheme and host only, and any text that quotes them is redacted.

``AlertService`` puts the pure engine (console/core/alerts.py), the event log and
the dispatcher together: fired and cleared alerts become events and deliveries.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.core.alerts import AlertEngine, AlertNotice, AlertRule, webhook_problem
from console.core.backoff import backoff_delay
from console.core.events import Event
from console.core.text import printable

if TYPE_CHECKING:  # imported on the first webhook: httpx costs the TUI's first frame ~0.1-0.2 s
    import httpx

    from console.services.history import HistoryEvents
from console.services.events import EventLog

__all__ = ["AlertDispatcher", "AlertService", "Delivery", "env_url_problems", "redact", "receiver_name", "secret_env"]

log = logging.getLogger("console.alerts")
REDACTED = "***"


@dataclass(frozen=True)
class Delivery:
    rule: str
    action: str  # command | webhook
    ok: bool
    detail: str  # one line, secrets redacted
    attempts: int = 1
    seconds: float = 0.0


def receiver_name(url: str) -> str:
    """scheme://host[:port] of a webhook URL: enough to recognise it, nothing secret."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port out of range: the host alone says enough
        port = ""
    return printable(f"{parts.scheme}://{host}{port}")


def secret_env(rules: Iterable[AlertRule]) -> set[str]:
    """The environment variables the rules name for a webhook URL or a token: secrets."""
    return {name for r in rules for name in (r.webhook_env, r.token_env) if name}


def env_url_problems(rules: Iterable[AlertRule], env: Mapping[str, str]) -> list[str]:
    """One line per rule whose webhook_env holds a URL that will not be sent to (a set but
    malformed URL, or one carrying credentials): said when the rules are loaded."""
    out = []
    for rule in rules:
        if rule.webhook_env and env.get(rule.webhook_env):
            problem = webhook_problem(env[rule.webhook_env])
            if problem:
                out.append(f"alert {rule.name}: webhook_env {rule.webhook_env} {problem}; its webhook is not sent")
    return out


def redact(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return text


def _one_line(text: str, limit: int = 200) -> str:
    """One line, shown as text: a command's stderr may carry escape sequences (ESC, BEL,
    OSC title changes) that must not act on the terminal or screen that prints it."""
    line = printable(" ".join(text.split()))
    return line if len(line) <= limit else line[: limit - 3] + "..."


class AlertDispatcher:
    def __init__(
        self,
        *,
        queue_size: int = 64,
        concurrency: int = 4,
        retries: int = 4,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        env: Mapping[str, str] | None = None,
        hide_env: Iterable[str] = (),
    ) -> None:
        self.queue: asyncio.Queue[AlertNotice] = asyncio.Queue(maxsize=queue_size)
        self.retries = retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.env = env if env is not None else os.environ
        # Secret variables no command gets: every rule's webhook URL and token (AlertService
        # adds its rules'), whichever rule the command belongs to.
        self.hidden_env: set[str] = set(hide_env)
        self.results: deque[Delivery] = deque(maxlen=256)  # the latest outcomes, for screens and tests
        self.dropped = 0
        self._concurrency = concurrency
        self._limit: asyncio.Semaphore | None = None
        self._worker: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._failing: set[tuple[str, str]] = set()
        self._last: dict[tuple, asyncio.Task] = {}  # alert -> its latest notice's delivery
        self._client: httpx.AsyncClient | None = None

    # -- the queue

    def submit(self, notice: AlertNotice) -> bool:
        """Queue a notice for delivery; never blocks.  False when the queue was full (dropped)."""
        if not notice.rule.actions:
            return True
        try:
            self.queue.put_nowait(notice)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("alert queue full: %s (and later ones until it drains) not delivered", notice.rule.name)
            return False
        if self._worker is None:
            # Outside a running loop the notice waits in the queue until start() is called in one.
            with contextlib.suppress(RuntimeError):
                self.start()
        return True

    def start(self) -> None:
        """Start the worker on the running loop (submit does it on first use)."""
        if self._worker is None or self._worker.done():
            self._limit = asyncio.Semaphore(self._concurrency)
            self._worker = asyncio.get_running_loop().create_task(self._work(), name="alert-dispatcher")

    async def _work(self) -> None:
        while True:
            notice = await self.queue.get()
            if self.dropped:
                self.dropped = 0
            assert self._limit is not None
            await self._limit.acquire()
            # One alert's notices go out in the order they came: a receiver that got "cleared"
            # before "fired" (deliveries run side by side) would keep an incident open.
            key = (notice.rule.name, notice.node, notice.gpu, notice.instance)
            before = self._last.get(key)
            task = asyncio.get_running_loop().create_task(self._deliver_one(notice, after=before))
            self._last[key] = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(functools.partial(self._forget_last, key))

    def _forget_last(self, key: tuple, task: asyncio.Task) -> None:
        if self._last.get(key) is task:
            del self._last[key]

    async def _deliver_one(self, notice: AlertNotice, *, after: asyncio.Task | None = None) -> None:
        try:
            if after is not None:
                await asyncio.wait([after])  # the same alert's earlier notice, delivered or given up
            await self.deliver(notice)
        except Exception as exc:  # a bug in one delivery must not stop the others
            log.error("alert %s: delivery failed: %s", notice.rule.name, type(exc).__name__)
        finally:
            assert self._limit is not None
            self._limit.release()
            self.queue.task_done()

    async def drain(self, timeout: float) -> bool:
        """Wait until every queued notice is delivered (or given up); False on timeout."""
        try:
            await asyncio.wait_for(self.queue.join(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def close(self) -> None:
        """Stop the worker and any delivery still retrying; their commands are killed."""
        tasks = [t for t in (self._worker, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._worker = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- one notice

    def hide(self, names: Iterable[str | None]) -> None:
        """Keep these environment variables from every command (secrets named elsewhere)."""
        self.hidden_env.update(n for n in names if n)

    async def deliver(self, notice: AlertNotice, *, retries: int | None = None) -> list[Delivery]:
        """Run a notice's actions side by side; their outcomes (also kept in ``results``)."""
        payload = notice.payload()
        jobs = []
        if notice.rule.command:
            jobs.append(("command", self.run_command(notice.rule, payload)))
        if notice.rule.webhook or notice.rule.webhook_env:
            jobs.append(
                ("webhook", self.post_webhook(notice.rule, payload, self.retries if retries is None else retries))
            )
        # return_exceptions: an action that raises is its own failure; the other's outcome stays.
        done = await asyncio.gather(*(job for _, job in jobs), return_exceptions=True)
        out = []
        for (action, _), result in zip(jobs, done):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # KeyboardInterrupt, SystemExit: not an action's failure
                why = f"unexpected {type(result).__name__}"
                result = Delivery(notice.rule.name, action, False, redact(why, self._secrets(notice.rule)), 0)
            out.append(result)
        for result in out:
            self._note(result)
        return out

    def _note(self, result: Delivery) -> None:
        self.results.append(result)
        key = (result.rule, result.action)
        if not result.ok and key not in self._failing:
            self._failing.add(key)
            log.warning("alert %s: %s failed: %s", result.rule, result.action, result.detail)
        elif result.ok and key in self._failing:
            self._failing.discard(key)
            log.info("alert %s: %s works again", result.rule, result.action)

    def _secrets(self, rule: AlertRule) -> list[str | None]:
        return [self.env.get(rule.token_env or ""), self.env.get(rule.webhook_env or "")]

    async def run_command(self, rule: AlertRule, payload: Mapping) -> Delivery:
        started = time.monotonic()
        data = json.dumps(payload).encode("utf-8") + b"\n"
        hidden = self.hidden_env | {rule.token_env, rule.webhook_env}
        child_env = {k: v for k, v in self.env.items() if k not in hidden}

        def done(ok: bool, detail: str) -> Delivery:
            text = redact(_one_line(detail), self._secrets(rule))
            return Delivery(rule.name, "command", ok, text, 1, time.monotonic() - started)

        try:
            proc = await asyncio.create_subprocess_exec(
                *rule.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=child_env,
                start_new_session=True,  # its own group: a timeout ends it and its children
            )
        except OSError as exc:
            return done(False, f"cannot run {rule.command[0]}: {exc.strerror or type(exc).__name__}")
        try:
            _out, err = await asyncio.wait_for(proc.communicate(data), rule.timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return done(False, f"{rule.command[0]} timed out after {rule.timeout:g} s (killed)")
        if proc.returncode != 0:
            last = err.decode("utf-8", "replace").strip().splitlines()[-1:] if err else []
            why = f": {last[0]}" if last else ""
            return done(False, f"{rule.command[0]} exited with {proc.returncode}{why}")
        return done(True, f"{rule.command[0]} exited with 0")

    async def post_webhook(self, rule: AlertRule, payload: Mapping, retries: int) -> Delivery:
        started = time.monotonic()
        secrets = self._secrets(rule)
        url = rule.webhook
        if rule.webhook_env:
            url = self.env.get(rule.webhook_env) or None
            if not url:
                return Delivery(rule.name, "webhook", False, f"webhook_env {rule.webhook_env} is not set", 0)
        assert url is not None
        problem = webhook_problem(url)
        if problem:
            # Only a URL from the environment can get here (the profile's are checked when it
            # loads); the message never quotes it, it is a secret.
            what = f"webhook_env {rule.webhook_env}" if rule.webhook_env else "webhook"
            return Delivery(rule.name, "webhook", False, f"{what} {problem}", 0)
        where = receiver_name(url)
        headers = {"Content-Type": "application/json", "User-Agent": "rocm-console"}
        if rule.token_env:
            token = self.env.get(rule.token_env)
            if not token:
                return Delivery(rule.name, "webhook", False, f"{where}: token_env {rule.token_env} is not set", 0)
            headers["Authorization"] = f"Bearer {token}"
        body = json.dumps(payload).encode("utf-8")
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False)
        detail = ""
        attempt = 0
        for attempt in range(1, retries + 2):
            try:
                response = await self._client.post(url, content=body, headers=headers, timeout=rule.timeout)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                detail = f"{where}: {type(exc).__name__}" + (f": {exc}" if str(exc) else "")
            except Exception as exc:  # what the URL check missed, raised deep in the client: final
                detail = f"{where}: unexpected {type(exc).__name__}"
                break
            else:
                if 200 <= response.status_code < 300:
                    return Delivery(
                        rule.name,
                        "webhook",
                        True,
                        f"{where}: HTTP {response.status_code}",
                        attempt,
                        time.monotonic() - started,
                    )
                detail = f"{where}: HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    break  # the receiver refuses this request: asking again changes nothing
            if attempt <= retries:
                await asyncio.sleep(backoff_delay(attempt - 1, base=self.backoff_base, cap=self.backoff_cap))
        text = redact(_one_line(f"{detail} (after {attempt} attempt{'s' if attempt > 1 else ''})"), [*secrets, url])
        if where not in text:
            text = f"{where}: {text}"
        return Delivery(rule.name, "webhook", False, text, attempt, time.monotonic() - started)


class AlertService:
    """Engine + event log + dispatcher: call observe_* as things are seen, tick() each second."""

    def __init__(
        self,
        rules: Sequence[AlertRule],
        *,
        events: EventLog | HistoryEvents | None = None,
        dispatcher: AlertDispatcher | None = None,
    ) -> None:
        self.engine = AlertEngine(rules)
        self.events = events
        self.dispatcher = dispatcher if dispatcher is not None else AlertDispatcher()
        self.dispatcher.hide(secret_env(rules))
        # A console's [alertmanager] poster (services/alertmanager.py); the watcher's is one of its sinks.
        self.alertmanager: Callable[[AlertNotice], None] | None = None
        # A webhook_env URL that will never be sent to is said now, once, not at the first alert.
        for line in env_url_problems(rules, self.dispatcher.env):
            log.warning("%s", line)

    def handle(self, notices: Sequence[AlertNotice]) -> list[Event]:
        """Record notices as events and queue their deliveries; returns the events."""
        events = [n.event() for n in notices]
        if events and self.events is not None:
            self.events.append(events)
        for notice in notices:
            self.dispatcher.submit(notice)
            if self.alertmanager is not None:
                self.alertmanager(notice)
        return events

    def observe_gpu(self, now: float, node: str, gpu: int, values: Mapping, health: str | None) -> list[Event]:
        return self.handle(self.engine.observe_gpu(now, node, gpu, values, health))

    def observe_node(self, now: float, node: str, state: str) -> list[Event]:
        return self.handle(self.engine.observe_node(now, node, state))

    def observe_event(self, event: Event) -> list[Event]:
        return self.handle(self.engine.observe_event(event))

    def tick(self, now: float) -> list[Event]:
        return self.handle(self.engine.tick(now))
