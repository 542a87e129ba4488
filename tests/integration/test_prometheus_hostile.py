"""Whatever a Prometheus answers, each node ends down with one clear line.

A local HTTP server on 127.0.0.1 answers the console's queries as a Prometheus would,
with bodies a broken or hostile one could send: JSON nested 100,000 deep, numbers of
thousands of digits, a 200 MB answer, control characters and escape sequences,
binary, an answer that drips a byte a second, the wrong shapes. Through the real
paths: `rocm-console status --json` and the fleet source behind the TUI. Never a
traceback, never a node left "connecting", never the whole oversized answer read.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from console.cli.entry import main
from console.core.model import NodeHealth, NodeSpec, PrometheusSpec
from console.services.fleet import FleetTelemetry
from console.services.prometheus import MAX_BODY_BYTES
from tests.helpers import loopback_buffer_bytes, wait_for

HOST = "127.0.0.1"
NODES = ("gpu-a", "gpu-b")
HUGE = 200 * 1024 * 1024


def _vector(items) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": items}}).encode()


def _series(host: str, value) -> dict:
    return {"metric": {"hostname": host, "gpu_id": "0", "__name__": "gpu_nodes_total"}, "value": [1764000000, value]}


# mode -> (body, or a callable that writes the answer itself; what a node's error says)
BODIES: dict[str, tuple[object, str]] = {
    "nested": (b'{"status":"success","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than 32 levels"),
    "nested-in-strings": (  # brackets inside strings do not count, real nesting does
        b'{"a":"' + b"]" * 50_000 + b'","b":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        "nested deeper than 32 levels",
    ),
    "long-integer": (
        b'{"status":"success","data":{"resultType":"vector","result":[' + b"9" * 5000 + b"]}}",
        "too long",
    ),
    "huge-numbers": (  # parses; every number is out of any float's range
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"hostname":"gpu-a",'
        b'"gpu_id":"0"},"value":[' + b"9" * 400 + b',"1e999"]}]}}',
        'no DME series with hostname="',
    ),
    "control": (
        json.dumps(
            {"status": "error", "errorType": "bad_data\x1b[31m", "error": "\x1b[2J\x1b]0;pwned\x07\nsecond line\r"}
        ).encode(),
        "bad_data [31m: [2J ]0;pwned second line",
    ),
    "raw-control": (b'{"status":"success","data":"\x1b[2J\x00\x07"}', "not a Prometheus API answer (not JSON)"),
    "binary": (bytes(range(256)) * 64 + os.urandom(4096), "not a Prometheus API answer (not JSON)"),
    "empty": (b"", "not a Prometheus API answer (an empty answer)"),
    "html": (b"<html><body>502 Bad Gateway</body></html>", "not a Prometheus API answer (not JSON)"),
    "shapes": (
        json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [
                        {"metric": {"hostname": ["gpu-a"], "gpu_id": {"x": 1}}, "value": {"a": 1}},
                        {"metric": "gpu-a", "value": [1, 2, 3]},
                        None,
                        [1, 2],
                        {"metric": {"hostname": "gpu-a", "gpu_id": "9" * 50, "gpu_partition_id": "x"}},
                    ],
                },
            }
        ).encode(),
        'no DME series with hostname="',
    ),
    "error-status": (b"Service Unavailable", "HTTP 503 Service Unavailable"),
    "oversized": ("stream", "MiB"),  # one answer over the cap, or a batch's answers together
    "oversized-declared": ("declared", f"an answer over {MAX_BODY_BYTES / 2**20:g} MiB (not read further)"),
    "drip": ("drip", "no answer within 2 s"),  # status: its --timeout bounds everything
}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # a client that hung up mid-answer (the console giving up) is expected here, not a fault


QUERY_ONLY = ("huge-numbers", "shapes")  # bodies shaped as query answers: other endpoints answer well


class HostilePrometheus:
    """Answers every request as BODIES[mode] says; counts the bytes it managed to send, by mode
    (a previous test's answer may still be draining into a closed socket)."""

    def __init__(self) -> None:
        self.mode = "nested"
        self.sent: dict[str, int] = {}
        self.streams: dict[str, int] = {}  # answers begun
        self.finished: dict[str, int] = {}  # answers written to their last byte
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.mode = owner.mode
                body, _ = BODIES[self.mode]
                if self.mode in QUERY_ONLY and "/label/" in self.path:  # let the bad part reach the queries
                    body = b'{"status":"success","data":["gpu_nodes_total","gpu_gfx_activity"]}'
                try:
                    if body == "stream":
                        self._count(owner.streams)
                        self._stream()
                        self._count(owner.finished)
                    elif body == "declared":
                        self._count(owner.streams)
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(HUGE))
                        self.end_headers()
                        self._write(b'{"status":"success","data":{"resultType":"vector","result":[')
                    elif body == "drip":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "1000")
                        self.end_headers()
                        for _ in range(45):  # bounded: 45 s at most
                            self._write(b" ")
                            time.sleep(1.0)
                    else:
                        assert isinstance(body, bytes)
                        status = 503 if self.mode == "error-status" else 200
                        self.send_response(status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self._write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the console gave up reading: what it should do

            do_GET = do_POST  # noqa: N815 - the label-values API is a GET

            def _count(self, counts: dict[str, int]) -> None:
                counts[self.mode] = counts.get(self.mode, 0) + 1

            def _write(self, data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()
                owner.sent[self.mode] = owner.sent.get(self.mode, 0) + len(data)

            def _stream(self) -> None:
                """200 MB of a valid-looking vector, chunked, made on the fly (never held here)."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                series = json.dumps(_series("gpu-a", "1")).encode() + b","
                block = series * (65536 // len(series))
                head = b'{"status":"success","data":{"resultType":"vector","result":['
                chunks = [head] + [block] * (HUGE // len(block))
                for chunk in chunks:
                    self._write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                self._write(b"0\r\n\r\n")

            def log_message(self, format, *args) -> None:  # noqa: A002
                pass

        self.server = _QuietServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hostile():
    server = HostilePrometheus()
    try:
        yield server
    finally:
        server.stop()


def profile(tmp_path: Path, url: str) -> Path:
    text = f'telemetry = "prometheus"\n[prometheus]\nurl = "{url}"\nscrape_interval = 1\n'
    for node in NODES:
        text += f'[nodes.{node}]\nhost = "{node}"\n'
    path = tmp_path / "site.toml"
    path.write_text(text)
    return path


def assert_stopped_at_the_cap(hostile: HostilePrometheus, mode: str, refreshes: int = 1) -> None:
    """The console stopped reading at its cap: no oversized answer was sent to its end, and the
    bytes sent are the batch's budget per refresh plus what each connection's kernel buffers
    could hold when the console hung up (what was sent is not what was read)."""
    streams = hostile.streams.get(mode, 0)
    assert streams >= 1 and hostile.finished.get(mode, 0) == 0, (hostile.streams, hostile.finished)
    bound = refreshes * 2 * MAX_BODY_BYTES + streams * (loopback_buffer_bytes() + 2**20)
    # (nothing at all when the console hung up at the declared length, before the body's first write)
    assert hostile.sent.get(mode, 0) < bound, (hostile.sent, streams, bound)


def assert_one_clean_line(text: str) -> None:
    assert "\n" not in text and "\r" not in text
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text), repr(text)
    assert len(text) < 400


@pytest.mark.parametrize("mode", sorted(BODIES))
def test_status_json_says_one_line_per_node_whatever_prometheus_answers(hostile, mode, tmp_path, capsys):
    hostile.mode, hostile.sent, hostile.streams, hostile.finished = mode, {}, {}, {}
    started = time.monotonic()
    code = main(["status", "--profile", str(profile(tmp_path, hostile.url)), "--json", "--timeout", "2"])
    took = time.monotonic() - started
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "Traceback" not in out.out
    assert code == 1
    nodes = json.loads(out.out)["nodes"]
    _, says = BODIES[mode]
    for node in nodes:
        assert node["state"] == "down"
        assert node["error"].startswith(f"{node['name']}: ")
        assert says in node["error"], node["error"]
        if mode.startswith("oversized"):
            assert node["error"].endswith("(not read further)"), node["error"]
        assert_one_clean_line(node["error"])
    assert took < 15
    if mode.startswith("oversized"):  # stopped at the cap: never the whole 200 MB of any answer
        assert_stopped_at_the_cap(hostile, mode)


@pytest.mark.parametrize("mode", ["nested", "long-integer", "control", "binary", "oversized", "drip", "shapes"])
def test_the_fleet_marks_nodes_down_with_the_reason_never_connecting(hostile, mode):
    hostile.mode, hostile.sent, hostile.streams, hostile.finished = mode, {}, {}, {}

    async def scenario():
        spec = PrometheusSpec(url=hostile.url, scrape_interval=1.0)
        nodes = [NodeSpec(name=n, host=n, telemetry="prometheus") for n in NODES]
        fleet = FleetTelemetry(nodes, interval=0.5, prometheus=spec)
        await fleet.start()
        try:
            down = await wait_for(lambda: all(fleet.snapshot(n).health == NodeHealth.DOWN for n in NODES), 45)
            return down, {n: fleet.snapshot(n) for n in NODES}
        finally:
            await fleet.stop()

    down, snaps = asyncio.run(scenario())
    assert down, {n: (s.health, s.error) for n, s in snaps.items()}
    _, says = BODIES[mode]
    if mode == "drip":
        says = "no whole answer within 30 s"  # the fleet's client: 3 x its 10 s timeout in all
    for name, snap in snaps.items():
        assert snap.error is not None and snap.error.startswith(f"{name}: ") and says in snap.error, snap.error
        assert_one_clean_line(snap.error)
    if mode == "oversized":  # each refresh stops at the cap (a few refreshes ran)
        assert_stopped_at_the_cap(hostile, mode, refreshes=10)
