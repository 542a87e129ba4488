"""Alerts posted to Alertmanager (``[alertmanager]`` in the profile, docs/watch.md).

``AlertmanagerPoster.notice`` is an alert sink: it never blocks and never does I/O. It keeps
what Alertmanager must hear (console/core/alertmanager.py builds the JSON):

- ``active``: the alerts firing now, re-sent every ``resend_interval`` seconds (below
  Alertmanager's resolve_timeout, 5 m by default, past which it would end them itself);
- ``pending``: what must arrive once (a resolved alert with its endsAt, an event alert), kept
  until a POST that carried it succeeds.

One task posts them all in one ``POST /api/v2/alerts`` when something changed and at each
re-send. Alertmanager down, slow or answering an error: the alerts stay where they are and
the POST is tried again with capped exponential backoff (console/core/backoff.py), so an alert
fired while Alertmanager was stopped reaches it when it comes back. A failure is said once
(logger ``console.alerts``: the watcher's stderr) until a POST works again, which is said too.
The token and the URL's path are never printed: messages name scheme://host:port.

httpx is imported on the first POST (the TUI's first frame does not pay for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from console.core.alertmanager import API_PATH, alert_key, alert_labels, am_alert, notice_alert
from console.core.alerts import AlertNotice
from console.core.backoff import backoff_delay
from console.core.model import AlertmanagerSpec
from console.services.alerts import receiver_name, redact

if TYPE_CHECKING:
    import httpx

__all__ = ["AlertmanagerPoster"]

log = logging.getLogger("console.alerts")


class AlertmanagerPoster:
    def __init__(
        self,
        spec: AlertmanagerSpec,
        *,
        env: Mapping[str, str] | None = None,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.spec = spec
        self.env = env if env is not None else os.environ
        self.where = receiver_name(spec.url)
        self.backoff_base = backoff_base
        self.backoff_cap = min(backoff_cap, spec.resend_interval)
        self._clock = clock
        self.active: dict[tuple, dict[str, Any]] = {}
        self.pending: dict[tuple, dict[str, Any]] = {}
        self.failing = False
        self.posts = 0  # POSTs Alertmanager accepted
        self.attempts = 0  # POSTs tried
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._client: httpx.AsyncClient | None = None

    # ------------------------------------------------------------ what to send (no I/O)

    def __call__(self, notice: AlertNotice) -> None:
        self.notice(notice)

    def notice(self, notice: AlertNotice) -> None:
        """Take an alert fired or cleared; the posting task sends it soon."""
        alert = notice_alert(notice)
        if alert is None:
            return
        key = alert_key(alert["labels"])
        if "endsAt" in alert:
            self.active.pop(key, None)
            self.pending[key] = alert
        else:
            self.pending.pop(key, None)
            self.active[key] = alert
        self._poke()

    def resume(
        self,
        alerts: Iterable[tuple[str, str | None, int | None, str | None, str, float, str, str]],
    ) -> None:
        """Alerts open before this process started (a restarted watcher's): re-sent while active.
        Each is (rule, node, gpu, instance, severity, since, summary, description)."""
        for rule, node, gpu, instance, severity, since, summary, description in alerts:
            labels = alert_labels(rule, node, gpu, instance, severity)
            self.active.setdefault(alert_key(labels), am_alert(labels, summary, description, since))
        self._poke()

    def forget(self) -> None:
        """Drop every alert (a watcher took over this fleet: it posts them now)."""
        self.active.clear()
        self.pending.clear()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()
        else:
            with contextlib.suppress(RuntimeError):  # outside a loop: start() sends them later
                self.start()

    # ------------------------------------------------------------ the posting task

    def start(self) -> None:
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._wake.set()
            self._task = loop.create_task(self._run(), name="alertmanager")

    async def close(self, drain: float = 0.0) -> None:
        """Stop posting; with ``drain``, first give what is pending that long to go out."""
        if drain > 0 and self.pending and self._task is not None and not self.failing:
            end = time.monotonic() + drain
            while self.pending and time.monotonic() < end and not self.failing:
                await asyncio.sleep(0.05)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._wake = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    async def _run(self) -> None:
        assert self._wake is not None
        failures = 0
        while True:
            self._wake.clear()
            wait = self.spec.resend_interval
            if self.active or self.pending:
                sent = dict(self.pending)
                ok = await self._post([*self.active.values(), *sent.values()])
                if ok:
                    failures = 0
                    for key, alert in sent.items():
                        if self.pending.get(key) is alert:  # not replaced while the POST ran
                            del self.pending[key]
                else:
                    # Alerts stay kept; new ones wait for the next try too (no hammering).
                    wait = backoff_delay(failures, base=self.backoff_base, cap=self.backoff_cap)
                    failures += 1
                    await asyncio.sleep(wait)
                    continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _post(self, alerts: list[dict[str, Any]]) -> bool:
        import httpx

        headers = {"Content-Type": "application/json", "User-Agent": "rocm-console"}
        secrets: list[str | None] = [self.spec.url]
        if self.spec.token_env:
            token = self.env.get(self.spec.token_env)
            if not token:
                return self._failed(f"token_env {self.spec.token_env} is not set")
            headers["Authorization"] = f"Bearer {token}"
            secrets.append(token)
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False)
        self.attempts += 1
        body = json.dumps(alerts).encode("utf-8")
        try:
            response = await self._client.post(
                self.spec.url + API_PATH, content=body, headers=headers, timeout=self.spec.timeout
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return self._failed(redact(f"{type(exc).__name__}" + (f": {exc}" if str(exc) else ""), secrets))
        if not 200 <= response.status_code < 300:
            why = " ".join(response.text.split())[:160] if response.status_code < 500 else ""
            return self._failed(redact(f"HTTP {response.status_code}" + (f": {why}" if why else ""), secrets))
        self.posts += 1
        if self.failing:
            self.failing = False
            log.info("alertmanager %s works again (%d alert%s sent)", self.where, len(alerts), "s"[: len(alerts) != 1])
        return True

    def _failed(self, detail: str) -> bool:
        if not self.failing:
            self.failing = True
            kept = len(self.active) + len(self.pending)
            log.warning(
                "alertmanager %s: cannot post: %s (retrying with backoff; %d alert%s kept)",
                self.where,
                detail,
                kept,
                "s"[: kept != 1],
            )
        return False
