"""The live /metrics poller against a real HTTP server on 127.0.0.1: vLLM's real scrape
gives samples; an oversized, broken or failing answer is a skipped sample, never a
crash and never a body held whole."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from console.services.live_metrics import MAX_SCRAPE_BYTES, poll_metrics
from tests.helpers import loopback_buffer_bytes

SCRAPE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu" / "metrics_during_load.txt"


class Server:
    """Answers /metrics with whatever `mode` says, counting the bytes it sent."""

    def __init__(self) -> None:
        self.mode = "real"
        self.sent: list[int] = []  # bytes sent per request
        self.finished = 0  # oversized answers written to their end
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if outer.mode == "error":
                    self.send_response(500)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                try:
                    if outer.mode == "real":
                        self.wfile.write(SCRAPE.read_bytes())
                    else:  # "huge": streams far past the cap, until the client hangs up
                        block = b"# " + b"x" * (1 << 20) + b"\n"
                        outer.sent.append(0)
                        for _ in range(4 * MAX_SCRAPE_BYTES // len(block)):
                            self.wfile.write(block)
                            outer.sent[-1] += len(block)
                        outer.finished += 1
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


async def poll(url: str, seconds: float) -> list:
    samples: list = []
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, stop.set)
    await poll_metrics(url, samples.append, interval=0.2, stop=stop)
    return samples


async def test_a_real_vllm_scrape_gives_samples(server):
    samples = await poll(server.url, 1.0)
    assert samples and samples[-1].running is not None


@pytest.mark.parametrize("mode", ["huge", "error"])
async def test_an_oversized_or_failing_answer_is_a_skipped_sample(server, mode):
    server.mode = mode
    samples = await poll(server.url, 1.5)
    assert samples == []
    # the oversized body was dropped while streaming: the client hung up soon after the cap
    # (what was sent past the cap is at most what the connection's kernel buffers held)
    if mode == "huge":
        assert server.sent and server.finished == 0, (server.sent, server.finished)
        bound = MAX_SCRAPE_BYTES + loopback_buffer_bytes() + 2 * 2**20
        assert all(sent < bound for sent in server.sent), (server.sent, bound)
    server.mode = "real"  # and the next good answer counts again
    assert await poll(server.url, 1.0)
