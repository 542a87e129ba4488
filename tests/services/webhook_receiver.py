"""A real HTTP webhook receiver on 127.0.0.1 for the alert tests: it keeps every POST
(path, headers, body, when) and answers with the status codes it is told, in turn."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()

    def json(self) -> dict:
        return json.loads(self.body)


class Receiver:
    def __init__(
        self,
        statuses: list[int] | None = None,
        delay: float = 0.0,
        status_for: Callable[[bytes], int | None] | None = None,
    ) -> None:
        self.statuses = list(statuses or [])  # answered in turn; 200 once they run out
        # Chooses the answer from the body (None: fall through to `statuses`), so a test can
        # refuse one sender's request whichever of several concurrent ones arrives first.
        self.status_for = status_for
        self.delay = delay
        self.received: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                    )
                    chosen = receiver.status_for(body) if receiver.status_for else None
                    if chosen is not None:
                        status = chosen
                    else:
                        status = receiver.statuses.pop(0) if receiver.statuses else 200
                if receiver.delay:
                    time.sleep(receiver.delay)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"ok": true}' if status < 300 else b'{"error": "receiver says no"}')

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hooks/alerts"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        with self._lock:
            return list(self.received)
