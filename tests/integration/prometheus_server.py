"""A real Prometheus (Debian's `prometheus` package) and simulated DME exporters on 127.0.0.1.

``DmeExporter.start(workdir, nodes)`` runs console/sim/dme_exporter.py for a
fleet of simulated nodes (one HTTP port, one path per node). ``PrometheusServer``
writes a config that scrapes every node's path as its own target every
``scrape_interval`` seconds, keeps its TSDB in its own temp folder, listens on
127.0.0.1 only, and is stopped by the PID it started (SIGTERM, then SIGKILL).
``AuthProxy`` stands in for the auth gateway sites put in front of Prometheus:
it forwards to Prometheus only requests that carry the right bearer token.
``StaticMetrics`` serves fixed /metrics texts (real DME captures), one path each.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.integration.sshd import HOST, free_port, pid_alive

ROOT = Path(__file__).resolve().parents[2]
EXPORTER = ROOT / "console" / "sim" / "dme_exporter.py"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def spawn_until_ready(
    name: str, argv: list[str], log: Path, ready_url: str, timeout: float, pause: float
) -> tuple[subprocess.Popen, bool]:
    """Start a Prometheus-family server (Prometheus, Alertmanager) in its own session, its output
    appended to `log`, and wait for its `/-/ready` page: (the process, ready in time?). One that
    exits first is a RuntimeError naming it, with the end of its log."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(ready_url, timeout=2) as reply:
                if reply.status == 200:
                    return proc, True
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(pause)
    return proc, False


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop a child we started, by its PID: SIGTERM, then SIGKILL after grace."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _instance(target: str, path: str) -> str:
    """'/nodes/gpu-7/metrics' -> 'gpu-7:5000' (DME's port), as if each node ran its own exporter;
    '/captures/NAME' -> NAME."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "captures":
        return parts[1]
    return f"{parts[1]}:5000" if len(parts) == 3 and parts[0] == "nodes" else target


@dataclass
class DmeExporter:
    proc: subprocess.Popen
    port: int
    nodes: list[str]

    @classmethod
    def start(cls, workdir: Path, nodes: list[dict], *, env: dict | None = None, period: float = 1.0) -> DmeExporter:
        workdir.mkdir(parents=True, exist_ok=True)
        spec = workdir / "nodes.json"
        spec.write_text(json.dumps(nodes))
        argv = [sys.executable, str(EXPORTER), "--nodes", str(spec), "--state-dir", str(workdir / "state")]
        argv += ["--period", str(period), "--parent-pid", str(os.getpid())]
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}, start_new_session=True
        )
        line = proc.stdout.readline() if proc.stdout else ""
        if not line:
            _stop(proc)
            raise RuntimeError(f"the simulated DME exporter did not start (exit {proc.poll()})")
        hello = json.loads(line)
        return cls(proc, hello["port"], hello["nodes"])

    def targets(self) -> list[tuple[str, str]]:
        return [(f"{HOST}:{self.port}", f"/nodes/{n}/metrics") for n in self.nodes]

    def stop(self) -> None:
        _stop(self.proc)


@dataclass
class PrometheusServer:
    workdir: Path
    targets: list[tuple[str, str]]  # (host:port, metrics path)
    scrape_interval: float = 1.0
    port: int = 0
    proc: subprocess.Popen | None = None
    metric_relabel: list[dict] | None = None  # the job's metric_relabel_configs (a site's renaming)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "prometheus.log"
        self.port = self.port or free_port()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def write_config(self) -> Path:
        interval = f"{int(self.scrape_interval * 1000)}ms"
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": "1m"},
            "scrape_configs": [
                {
                    "job_name": "dme",
                    # One target per node: its own path and its own instance label (the
                    # default, host:port, is the same for all of them).
                    "static_configs": [
                        {"targets": [target], "labels": {"__metrics_path__": path, "instance": _instance(target, path)}}
                        for target, path in self.targets
                    ],
                    **({"metric_relabel_configs": self.metric_relabel} if self.metric_relabel else {}),
                }
            ],
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML
        return path

    def start(self, timeout: float = 60.0) -> None:
        config = self.write_config()
        argv = [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            "--storage.tsdb.retention.time=2h",
            f"--web.listen-address={HOST}:{self.port}",
            "--log.level=warn",
        ]
        self.proc, ready = spawn_until_ready("prometheus", argv, self.log, f"{self.url}/-/ready", timeout, 0.2)
        if not ready:
            self.stop()
            raise RuntimeError(f"prometheus not ready within {timeout:g} s")

    def query(self, expr: str) -> dict:
        data = urllib.parse.urlencode({"query": expr}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=10) as reply:
            return json.loads(reply.read())

    def wait_for_series(self, count: int, timeout: float = 60.0, expr: str = "count(gpu_total_vram)") -> None:
        """Until Prometheus has scraped ``count`` GPU series (or raise)."""
        deadline = time.monotonic() + timeout
        got = 0
        while time.monotonic() < deadline:
            result = self.query(expr)["data"]["result"]
            got = int(float(result[0]["value"][1])) if result else 0
            if got >= count:
                return
            time.sleep(0.25)
        raise RuntimeError(f"prometheus has {got} of {count} series after {timeout:g} s")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and pid_alive(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


class AuthProxy:
    """Forwards to ``upstream`` only requests with ``Authorization: Bearer <token>``;
    records every Authorization header it saw."""

    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream
        self.token = token
        self.seen: list[str | None] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self, body: bytes | None) -> None:
                auth = self.headers.get("Authorization")
                proxy.seen.append(auth)
                if auth != f"Bearer {proxy.token}":
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                request = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command)
                if self.headers.get("Content-Type"):
                    request.add_header("Content-Type", self.headers["Content-Type"])
                try:
                    with urllib.request.urlopen(request, timeout=30) as reply:
                        status, payload = reply.status, reply.read()
                except urllib.error.HTTPError as exc:
                    status, payload = exc.code, exc.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:  # noqa: N802
                self._forward(None)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def log_message(self, format, *args) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server.server_address[1]}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class StaticMetrics:
    """Serves fixed texts as /metrics on 127.0.0.1: GET /captures/NAME answers the file
    NAME of ``folder`` up to its last newline (a capture cut mid-line ends in a fragment
    that is no series)."""

    def __init__(self, folder: Path, names: list[str]) -> None:
        self.pages = {}
        for name in names:
            text = (folder / name).read_bytes()
            self.pages[name] = text[: text.rfind(b"\n") + 1]
        pages = self.pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                name = self.path.split("?", 1)[0].removeprefix("/captures/")
                body = pages.get(name)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def targets(self) -> list[tuple[str, str]]:
        return [(f"{HOST}:{self.server.server_address[1]}", f"/captures/{name}") for name in self.pages]

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
