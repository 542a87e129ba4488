"""A real Alertmanager (Debian's `prometheus-alertmanager`) on 127.0.0.1 and the webhook receiver
it notifies: a small HTTP server in the test process that records every notification.

The route sends everything to the receiver, one group per label set (group_by ['...']), with
group_wait and group_interval of a second so a firing and its resolution arrive within seconds;
repeat_interval is long, so a notification that comes twice is a duplicate, not a repeat.
Clustering is off (an empty --cluster.listen-address), the storage is the test's own folder,
and the process is stopped by the PID it was started with.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.helpers import free_port
from tests.integration.prometheus_server import _stop, spawn_until_ready

HOST = "127.0.0.1"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"


class WebhookReceiver:
    """Records the JSON bodies Alertmanager's webhook notifier posts."""

    def __init__(self) -> None:
        self.notifications: list[dict] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.notifications.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def alerts(self, status: str | None = None, **labels: str) -> list[dict]:
        """Every alert of every notification whose labels include ``labels`` (and of ``status``)."""
        with self._lock:
            got = [a for n in self.notifications for a in n.get("alerts", [])]
        return [
            a
            for a in got
            if all(a["labels"].get(k) == v for k, v in labels.items()) and (status is None or a["status"] == status)
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class AlertmanagerServer:
    def __init__(self, workdir: Path, receiver: WebhookReceiver, port: int | None = None) -> None:
        self.workdir = workdir
        self.receiver = receiver
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "alertmanager.log"

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def write_config(self) -> Path:
        config = {
            "route": {
                "receiver": "hook",
                "group_by": ["..."],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "hook", "webhook_configs": [{"url": self.receiver.url, "send_resolved": True}]}],
        }
        path = self.workdir / "alertmanager.yml"
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML
        return path

    def start(self, timeout: float = 30.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [
            ALERTMANAGER,
            f"--config.file={self.write_config()}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address={HOST}:{self.port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]
        self.proc, ready = spawn_until_ready("alertmanager", argv, self.log, f"{self.url}/-/ready", timeout, 0.1)
        if not ready:
            self.stop()
            raise RuntimeError(f"alertmanager not ready within {timeout:g} s")

    def alerts(self) -> list[dict]:
        """What Alertmanager holds now (GET /api/v2/alerts)."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=5) as reply:
            return json.loads(reply.read())

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None
