"""An instance's port, chosen by the console, checked where the server binds: taken by another
program (or another demo) before the server got it, the start moves on and still gets ready."""

from __future__ import annotations

import dataclasses
import http.server
import socket
import threading
import time

import pytest

from console.services.instances import InstanceError, InstanceState
from tests.services.test_instances import TINY


def listening(port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen(1)
    return sock


def a_free_port() -> int:
    with listening() as sock:
        return sock.getsockname()[1]


def once_chosen(spec, then) -> threading.Thread:
    """Runs then() in a thread as soon as the supervisor wrote the instance's spec (the port is
    chosen, the server not started yet): another program's move in that moment."""

    def wait_then() -> None:
        deadline = time.monotonic() + 30
        while not spec.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        then()

    thread = threading.Thread(target=wait_then, daemon=True)
    thread.start()
    return thread


async def test_a_port_taken_after_the_consoles_check_moves_on_the_node(sim_node, service, monkeypatch):
    svc, started = service
    node = sim_node("ports-a")
    with listening() as taken:
        held = taken.getsockname()[1]
        # the console's own look found it free a moment before another program bound it
        monkeypatch.setattr("console.services.demo.free_local_port", lambda *a, **k: held)
        view = await svc.start(node, TINY, gpus=[3], name="moved")
        started.append((node, "moved"))
        assert view.port != held
        assert f"ports-a: port {held} was taken; the instance listens on {view.port}" in view.warnings
        ready = await svc.wait_ready(node, "moved", timeout=60)
    assert ready.state == InstanceState.READY, ready.reason
    assert ready.port == view.port
    [listed] = [v for v in await svc.list(node) if v.name == "moved"]
    assert listed.port == view.port


async def test_a_port_lost_while_the_server_starts_moves_on_and_gets_ready(sim_node, service, tmp_path):
    svc, started = service
    node = sim_node("ports-b")
    spec = tmp_path / "state" / "instances" / "raced" / "spec.json"
    port = a_free_port()
    holder: list[socket.socket] = []
    thread = once_chosen(spec, lambda: holder.append(listening(port)))  # another program binds it
    try:
        view = await svc.start(node, TINY, gpus=[4], name="raced", port=port)
        started.append((node, "raced"))
        thread.join(30)
        assert holder, "the port was never taken"
        ready = await svc.wait_ready(node, "raced", timeout=60)
        assert ready.state == InstanceState.READY, ready.reason
        assert ready.port != port and view.port == port
        assert f"ports-b: port {port} was taken; the instance listens on {ready.port}" in ready.warnings
        [listed] = [v for v in await svc.list(node) if v.name == "raced"]
        assert listed.port == ready.port  # the node's record says where it listens
    finally:
        for sock in holder:
            sock.close()


async def test_a_real_node_keeps_the_users_port_and_says_it_is_taken(sim_node, service):
    svc, _ = service
    real = dataclasses.replace(sim_node("gpu-a"), simulate=None)  # a node with no simulator
    with listening() as taken, pytest.raises(InstanceError) as err:
        port = taken.getsockname()[1]
        await svc.start(real, TINY, gpus=[0], name="mine", port=port)
    assert str(err.value) == (
        f"gpu-a: port {port} is already in use on this node (by another program): choose another port, "
        "or leave it out and one is picked"
    )


async def test_another_server_answering_on_the_lost_port_is_not_taken_for_ours(sim_node, service, tmp_path):
    # Another demo's server, already up, wins the port between the supervisor's look and our
    # server's bind: it answers /health there with 200 before our log says we moved. The console
    # must not call ours ready on that port (its benchmarks would load the other demo's server,
    # and fail when that one stops), but follow ours to where it listens.
    svc, started = service
    node = sim_node("ports-c")
    spec = tmp_path / "state" / "instances" / "raced" / "spec.json"
    port = a_free_port()
    other: list[http.server.HTTPServer] = []

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = b'{"object": "list", "data": [{"id": "tiny", "object": "model"}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    def serve_there_first() -> None:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Healthy)
        other.append(server)
        server.serve_forever(poll_interval=0.05)

    once_chosen(spec, serve_there_first)
    try:
        await svc.start(node, TINY, gpus=[5], name="raced", port=port)
        started.append((node, "raced"))
        ready = await svc.wait_ready(node, "raced", timeout=60)
        assert other, "the other server never started"
        assert ready.state == InstanceState.READY, ready.reason
        assert ready.port != port
        assert await svc.listening_ports(node, "raced") == (ready.port,)
        assert f"ports-c: port {port} was taken; the instance listens on {ready.port}" in ready.warnings
    finally:
        for server in other:
            server.shutdown()
            server.server_close()
