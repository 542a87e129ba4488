"""The guard of `rocm-console web` (console/services/web_guard.py) on a real aiohttp server on
127.0.0.1: a page route and a WebSocket route behind it, requests sent by aiohttp's client (or
http.client, for a Host header of one's own). Every refused request is checked to have reached
no handler; the browser's side (Chromium) is tests/integration/test_web.py.
"""

from __future__ import annotations

import asyncio
import http.client
import os

import pytest

from console.services.web_guard import MIN_TOKEN_LENGTH, Guard, TokenFileError, new_token, read_token_file
from tests.helpers import free_port

aiohttp = pytest.importorskip("aiohttp")
from aiohttp import WSServerHandshakeError, web  # noqa: E402
from aiohttp.test_utils import TestServer  # noqa: E402

TOKEN = new_token()


class Served:
    def __init__(self, guard: Guard, server: TestServer, reached: list[str]) -> None:
        self.guard, self.server, self.reached = guard, server, reached
        self.base = f"http://127.0.0.1:{guard.port}"


@pytest.fixture
async def served():
    port = free_port()
    guard = Guard(token=TOKEN, host="127.0.0.1", port=port)
    reached: list[str] = []

    async def page(request):
        reached.append(request.path)
        return web.Response(text="the console page")

    async def ws(request):
        reached.append("ws")
        sock = web.WebSocketResponse()
        await sock.prepare(request)
        async for msg in sock:
            await sock.send_str(f"echo {msg.data}")
        return sock

    app = web.Application()
    app.add_routes([web.get("/", page), web.get("/static/app.js", page), web.get("/ws", ws)])
    server = TestServer(guard.install(app), host="127.0.0.1", port=port)
    await server.start_server()
    try:
        yield Served(guard, server, reached)
    finally:
        await server.close()


def own(guard: Guard, **extra: str) -> dict[str, str]:
    return {"Origin": guard.origin, **extra}


async def test_no_token_no_page_no_file_no_websocket(served):
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/static/app.js", "/?token=", f"/?token={TOKEN[:-1]}", f"/?token={TOKEN}x", "/?token=%C3%A9"):
            async with http.get(served.base + path, allow_redirects=False) as resp:
                body = await resp.text()
                assert resp.status == 403, path
                assert "no valid token" in body and TOKEN not in body
                assert body.count("\n") == 1  # one line, never a traceback
        for headers in ({}, {"Cookie": f"{served.guard.cookie}=wrong"}, {"Cookie": f"rocm-console-token-1={TOKEN}"}):
            with pytest.raises(WSServerHandshakeError) as refused:
                await http.ws_connect(served.base + "/ws", headers=own(served.guard, **headers))
            assert refused.value.status == 403
    assert served.reached == []


async def test_the_token_url_sets_a_strict_httponly_cookie_and_leaves_the_address_bar(served):
    guard = served.guard
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{served.base}/?fontsize=14&token={TOKEN}", allow_redirects=False) as resp:
            assert resp.status == 302
            assert resp.headers["Location"] == "/?fontsize=14"  # the token is out of the URL
            cookie = resp.cookies[guard.cookie]
            assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
            assert cookie["path"] == "/" and not cookie["max-age"] and not cookie["expires"]  # this session only
        assert guard.cookie == f"rocm-console-token-{guard.port}"  # two servers: two cookies
        jar = {"Cookie": f"{guard.cookie}={TOKEN}"}
        async with http.get(served.base + "/", headers=jar) as resp:
            assert resp.status == 200 and await resp.text() == "the console page"
        async with http.get(served.base + "/static/app.js", headers=jar) as resp:
            assert resp.status == 200
        async with http.ws_connect(served.base + "/ws", headers=own(guard, **jar)) as sock:
            await sock.send_str("hi")
            assert (await sock.receive_str(timeout=5)) == "echo hi"
        # A script (no browser, no Origin) may pass the token in the WebSocket's query.
        async with http.ws_connect(f"{served.base}/ws?token={TOKEN}") as sock:
            await sock.send_str("again")
            assert (await sock.receive_str(timeout=5)) == "echo again"
    assert served.reached == ["/", "/static/app.js", "ws", "ws"]


async def test_a_websocket_from_another_origin_is_refused_even_with_the_cookie(served):
    guard = served.guard
    jar = f"{guard.cookie}={TOKEN}"
    others = [
        f"http://127.0.0.1:{guard.port + 1}",  # another server on this machine: the same site
        f"http://localhost:{guard.port}",
        f"https://127.0.0.1:{guard.port}",
        "http://evil.example",
        "null",  # a sandboxed frame, a file:// page
    ]
    async with aiohttp.ClientSession() as http:
        for origin in others:
            with pytest.raises(WSServerHandshakeError) as refused:
                await http.ws_connect(f"{served.base}/ws?token={TOKEN}", headers={"Origin": origin, "Cookie": jar})
            assert refused.value.status == 403, origin
            async with http.get(served.base + "/", headers={"Origin": origin, "Cookie": jar}) as resp:
                assert resp.status == 403 and "another origin" in await resp.text()
    assert served.reached == []


def _raw_get(port: int, path: str, host: str | None, cookie: str | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        if cookie is not None:
            conn.putheader("Cookie", cookie)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


async def test_a_host_that_is_not_the_bound_address_is_refused(served):
    """DNS rebinding: a name of the attacker's, resolved to 127.0.0.1, arrives as the Host."""
    port = served.guard.port
    jar = f"{served.guard.cookie}={TOKEN}"
    for host in (f"evil.example:{port}", f"localhost:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}", ""):
        status, body = await asyncio.to_thread(_raw_get, port, f"/?token={TOKEN}", host, jar)
        assert status == 403, host
        assert "Host header" in body and TOKEN not in body
    status, _ = await asyncio.to_thread(_raw_get, port, "/", f"127.0.0.1:{port}", jar)
    assert status == 200
    assert served.reached == ["/"]


async def test_every_answer_forbids_frames_and_referrers(served):
    async with aiohttp.ClientSession() as http:
        for headers in ({}, {"Cookie": f"{served.guard.cookie}={TOKEN}"}):
            async with http.get(served.base + "/", headers=headers) as resp:
                assert resp.headers["X-Frame-Options"] == "DENY"
                assert resp.headers["Content-Security-Policy"] == "frame-ancestors 'none'"
                assert resp.headers["Referrer-Policy"] == "no-referrer"


def test_tokens_are_new_every_start_and_long():
    tokens = {new_token() for _ in range(20)}
    assert len(tokens) == 20 and all(len(t) >= 40 for t in tokens)


def test_a_token_file_gives_its_one_line(tmp_path):
    path = tmp_path / "token"
    path.write_text("  s3cret-token_for.scripts~1  \n\n")
    assert read_token_file(path) == "s3cret-token_for.scripts~1"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        (b"", "is empty"),
        (b"  \n\t\n", "is empty"),
        (b"first-token-line-x\nsecond-token-line\n", "holds 2 lines"),
        (b"a token with spaces in it", "only letters, digits"),
        (b"tok;en=1234567890123", "only letters, digits"),
        (b"short", f"has 5 characters; at least {MIN_TOKEN_LENGTH}"),
        (b"\xff\xfe bad bytes", "not UTF-8"),
        ("dir", "is a directory"),
        ("below-a-file", "cannot read it"),
    ],
)
def test_a_bad_token_file_is_one_line_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "token"
    if content == "dir":
        path.mkdir()
    elif content == "below-a-file":
        path.write_text("x")
        path = path / "token"
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(TokenFileError) as err:
        read_token_file(path)
    message = str(err.value)
    assert message.startswith(f"--token-file {path}: ") and expected in message and "\n" not in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_token_file_says_so(tmp_path):
    path = tmp_path / "token"
    path.write_text(new_token())
    path.chmod(0)
    with pytest.raises(TokenFileError, match="permission denied"):
        read_token_file(path)
