"""`rocm-console web`: the app in a real browser (headless Chromium), served by textual-serve
behind its token, Origin and Host checks (console/services/web_guard.py).

The tests start `python -m console web --demo` on a free loopback port, read the URL with the
token it prints, and start Debian's `chromium --headless` with its DevTools port, driving the
page through the Chrome DevTools protocol with a small client (aiohttp's websocket, which
textual-serve brings):

* the page without the token is a 403; the printed URL opens the console: the fleet table
  arrives with live numbers, `?` typed into the page brings the help screen back, and a
  screenshot is taken (ROCM_CONSOLE_SCREENSHOTS=1 writes it to screenshots/web.png, the README's);
* a page of another origin on 127.0.0.1 (a small HTTP server of the test's, another port: the
  same *site*, so the browser sends it the console's cookie) cannot open the console's
  WebSocket, and no console session starts for it; the same script from the console's own
  page can;
* plain HTTP clients: no token, a wrong one, or a Host that is not 127.0.0.1:P (DNS
  rebinding) get 403 for the page, its files and the WebSocket; `--token-file` works, and a bad
  one is one line and exit 2.

Everything started is stopped by pid.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console.core.profiles import demo_profile_path, load_profile
from tests.helpers import free_port
from tests.integration.test_demo_lifeline import demo_processes, start_time

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "screenshots" / "web.png"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

aiohttp = pytest.importorskip("aiohttp")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test-all installs it)")

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")


def wait_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[:4]} exited {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port} after {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM its process group (it leads one: start_new_session), SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass


class Page:
    """One Chromium tab over the DevTools protocol: commands, and the terminal text received."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.received: list[str] = []  # websocket frames from the app, escapes removed
        self.sent: list[str] = []  # websocket frames the page sent to the app (keys, sizes)
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Network.webSocketFrameReceived":
                resp = data["params"]["response"]
                payload = resp["payloadData"]
                if resp.get("opcode") == 2:
                    payload = base64.b64decode(payload).decode("utf-8", "replace")
                self.received.append(ANSI.sub("", payload))
            elif data.get("method") == "Network.webSocketFrameSent":
                self.sent.append(data["params"]["response"]["payloadData"])

    async def send(self, method: str, **params) -> dict:
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, 30)
        assert "error" not in reply, reply
        return reply.get("result", {})

    def text(self) -> str:
        return "".join(self.received)

    async def wait_text(self, pattern: str, timeout: float, since: int = 0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = "".join(self.received[since:])
            if re.search(pattern, text):
                return text
            await asyncio.sleep(0.2)
        raise AssertionError(f"{pattern!r} never reached the page; last text: {self.text()[-600:]!r}")

    async def key(self, char: str) -> None:
        await self.send("Input.dispatchKeyEvent", type="keyDown", key=char, text=char)
        await self.send("Input.dispatchKeyEvent", type="keyUp", key=char)


URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)")


def printed_url(out: Path, proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """The URL (and its token) `rocm-console web` printed on stdout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = URL.search(out.read_text()) if out.exists() else None
        if found:
            return found.group(0), found.group(2)
        if proc.poll() is not None:
            raise AssertionError(f"web exited {proc.returncode}: {out.read_text()!r}")
        time.sleep(0.1)
    raise AssertionError(f"no URL with a token was printed: {out.read_text()!r}")


class Web:
    """`python -m console web --demo` on a free port, with its own HOME."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.port = free_port()
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.out = tmp_path / "web.out"
        env = dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console", "web", "--demo", "--port", str(self.port), *extra],
            cwd=ROOT,
            env=env,
            stdout=open(self.out, "wb"),
            stderr=open(tmp_path / "web.log", "wb"),
            start_new_session=True,
        )

    def ready(self) -> tuple[str, str]:
        wait_port(self.port, self.proc, 30)
        return printed_url(self.out, self.proc, 10)

    def sessions(self) -> set[int]:
        """The console sessions the server runs (one `python -m console` per open page)."""
        out = set()
        for pid, _ in demo_processes(self.proc.pid, self.home):
            cmd = _cmdline(pid)
            if " -m console " in cmd and " web " not in cmd:
                out.add(pid)
        return out

    def stop(self) -> None:
        stop(self.proc)
        for pid, started in demo_processes(self.proc.pid, self.home):  # a failed test's leftovers
            if start_time(pid) == started:
                os.kill(pid, signal.SIGKILL)


def start_browser(tmp_path: Path, devtools: int) -> subprocess.Popen:
    (tmp_path / "browser-home").mkdir(exist_ok=True)
    return subprocess.Popen(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",  # root in CI containers
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            f"--remote-debugging-port={devtools}",
            "--remote-debugging-address=127.0.0.1",
            "--window-size=1500,950",
            "--disable-breakpad",
            "--disable-crash-reporter",
            "about:blank",
        ],
        env=dict(os.environ, HOME=str(tmp_path / "browser-home")),  # apart from the console's HOME
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@pytest.fixture
def served(tmp_path):
    devtools = free_port()
    web = Web(tmp_path)
    browser = start_browser(tmp_path, devtools)
    try:
        url, _ = web.ready()
        wait_port(devtools, browser, 30)
        yield web, url, devtools
    finally:
        stop(browser)
        web.stop()


async def open_page(http, devtools: int):
    async with http.get(f"http://127.0.0.1:{devtools}/json/list") as resp:
        targets = await resp.json()
    return next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")


async def body_text(page: Page) -> str:
    reply = await page.send("Runtime.evaluate", expression="document.body ? document.body.innerText : ''")
    return reply["result"].get("value", "")


async def navigate(page: Page, url: str) -> None:
    await page.send("Page.navigate", url=url)
    await asyncio.sleep(0.5)
    end = time.monotonic() + 15
    while time.monotonic() < end:
        state = await page.send("Runtime.evaluate", expression="document.readyState")
        if state["result"].get("value") == "complete":
            return
        await asyncio.sleep(0.2)


@needs_chromium
async def test_the_console_in_a_browser(served):
    web, url, devtools = served
    home = web.home
    async with aiohttp.ClientSession() as http:
        page_ws = await open_page(http, devtools)
        async with http.ws_connect(page_ws, max_msg_size=0) as ws:
            page = Page(ws)
            await page.send("Network.enable")
            await page.send("Page.enable")
            # Without the token the browser gets the refusal, and no console starts.
            await navigate(page, f"http://127.0.0.1:{web.port}/")
            assert "403 Forbidden: no valid token" in await body_text(page)
            assert not web.sessions()
            # The printed URL: the token goes into the cookie and out of the address bar.
            await page.send("Page.navigate", url=url)
            # The fleet table: every demo node live, with numbers (utilization, power).
            nodes = [n.name for n in load_profile([demo_profile_path()]).nodes]
            text = await page.wait_text(rf"{len(nodes)} live", timeout=45)
            text = await page.wait_text(r"mi300x-cpx\s+live", timeout=20)
            assert "mi300x-spx" in text and all(name in text for name in nodes)
            assert re.search(r"\d+%", text) and re.search(r"\d+/750", text), text[-2000:]
            # Numbers keep coming: the sample ages and values are redrawn.
            seen = len(page.received)
            await page.wait_text(r"\d+%", timeout=10, since=seen)
            # A key typed into the page reaches the app: ? opens the help screen.
            await page.send("Runtime.evaluate", expression="document.querySelector('.xterm-helper-textarea').focus()")
            seen = len(page.received)
            await page.key("?")
            try:
                await page.wait_text(r"Id for", timeout=15, since=seen)
            except AssertionError:
                raise AssertionError(f"sent: {page.sent[-5:]}") from None
            seen = len(page.received)
            await page.key("\x1b")  # back to the fleet for the picture, once the demo's instances serve
            await page.wait_text(r"instance ready", timeout=40, since=seen)
            await asyncio.sleep(8)  # the start notices fade
            shot = await page.send("Page.captureScreenshot", format="png")
            data = base64.b64decode(shot["data"])
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a drawn page, not a blank one
            # The README's picture is rewritten only when asked: a test run leaves the tree clean.
            target = SCREENSHOT if os.environ.get("ROCM_CONSOLE_SCREENSHOTS") else home.parent / SCREENSHOT.name
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(data)
            location = await page.send("Runtime.evaluate", expression="location.href")
            assert location["result"]["value"] == f"http://127.0.0.1:{web.port}/"
            page.reader.cancel()
    # The server stopped as a service manager stops it (SIGTERM to its pid alone) while a tab
    # is open: its console session and everything that session started end with it.
    recorded = demo_processes(web.proc.pid, home)
    assert any("--demo" in _cmdline(pid) and "web" not in _cmdline(pid) for pid, _ in recorded)
    os.kill(web.proc.pid, signal.SIGTERM)
    web.proc.wait(15)
    end = time.monotonic() + 15
    while time.monotonic() < end and any(start_time(p) == st for p, st in recorded):
        time.sleep(0.2)
    left = [_cmdline(p) for p, st in recorded if start_time(p) == st]
    assert not left, left


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_web_refuses_a_bad_port_in_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "console", "web", "--demo", "--port", "70000"],
        cwd=ROOT,
        env=dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "rocm-console: --port 70000: must be between 1 and 65535"


# ---------------------------------------------------------------- a page of another origin

ATTACK = """<!doctype html><title>not the console</title><script>
window.result = "pending";
const ws = new WebSocket("ws://127.0.0.1:PORT/ws?width=80&height=24");
ws.onopen = () => { window.result = "open"; ws.send(JSON.stringify(["stdin", "q"])); };
ws.onerror = () => { if (window.result === "pending") window.result = "refused"; };
ws.onclose = () => { if (window.result === "pending") window.result = "refused"; };
</script>"""

OPEN_WS = """new Promise(done => {
  const ws = new WebSocket("ws://127.0.0.1:PORT/ws?width=80&height=24");
  ws.onopen = () => { ws.close(); done("open"); };
  ws.onerror = () => done("refused");
  setTimeout(() => done("timeout"), 10000);
})"""


class AttackerSite:
    """A page on another port of 127.0.0.1 (the test's own HTTP server) that tries the console."""

    def __init__(self, console_port: int) -> None:
        page = ATTACK.replace("PORT", str(console_port)).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def result_of(page: Page, timeout: float) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        reply = await page.send("Runtime.evaluate", expression="window.result")
        value = reply["result"].get("value")
        if value not in (None, "pending"):
            return value
        await asyncio.sleep(0.2)
    return "pending"


@needs_chromium
async def test_a_page_of_another_origin_cannot_open_the_console(served):
    web, url, devtools = served
    attacker = AttackerSite(web.port)
    try:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(await open_page(http, devtools), max_msg_size=0) as ws:
                page = Page(ws)
                await page.send("Network.enable")
                await page.send("Page.enable")
                # The user has the console open: the browser holds its cookie.
                await page.send("Page.navigate", url=url)
                await page.wait_text(r"\d+ live", timeout=45)
                cookies = await page.send("Network.getCookies", urls=[f"http://127.0.0.1:{web.port}/"])
                [cookie] = [c for c in cookies["cookies"] if c["name"] == f"rocm-console-token-{web.port}"]
                assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
                # Then a page of another origin on this machine (the same site: the cookie goes
                # along) tries the console's WebSocket.
                before = web.sessions()
                await navigate(page, attacker.url)
                assert await result_of(page, timeout=15) == "refused"
                await asyncio.sleep(1)
                started = web.sessions() - before
                assert not started, f"a console session started for the other page: {started}"
                # The same script from the console's own page opens it: only the origin differed.
                await navigate(page, f"http://127.0.0.1:{web.port}/")
                opened = await page.send(
                    "Runtime.evaluate", expression=OPEN_WS.replace("PORT", str(web.port)), awaitPromise=True
                )
                assert opened["result"]["value"] == "open"
                page.reader.cancel()
    finally:
        attacker.close()


# ---------------------------------------------------------------- plain HTTP clients


def raw_get(port: int, path: str, host: str, cookie: str | None = None) -> tuple[int, str, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        if cookie:
            conn.putheader("Cookie", cookie)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace"), dict(resp.getheaders())
    finally:
        conn.close()


@pytest.fixture
def web_only(tmp_path):
    web = Web(tmp_path)
    try:
        yield web
    finally:
        web.stop()


async def test_without_the_token_or_from_another_host_everything_is_403(web_only):
    web = web_only
    url, token = web.ready()
    assert url == f"http://127.0.0.1:{web.port}/?token={token}" and len(token) >= 40
    printed = web.out.read_text()
    assert printed.count(token) == 1  # printed once
    port, own = web.port, f"127.0.0.1:{web.port}"
    jar = f"rocm-console-token-{port}={token}"
    # No token (or a wrong one): the page, its files, its WebSocket.
    for path in ("/", "/static/js/textual.js", "/ws", "/download/x", f"/?token={token[:-2]}"):
        status, body, _ = raw_get(port, path, own)
        assert status == 403 and "no valid token" in body, (path, status, body[:200])
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"http://{own}/ws", headers={"Origin": f"http://{own}"})
        assert refused.value.status == 403
    # DNS rebinding: the attacker's name for 127.0.0.1 arrives as the Host, token or not.
    for host in (f"rebind.example:{port}", f"localhost:{port}", "127.0.0.1"):
        status, body, _ = raw_get(port, f"/?token={token}", host, jar)
        assert status == 403 and "Host header" in body, (host, status)
    assert not web.sessions()
    # The printed URL: a cookie, then the page and its files with the cookie alone.
    status, _, headers = raw_get(port, f"/?token={token}", own)
    assert status == 302 and headers["Location"] == "/"
    assert f"{jar};" in headers["Set-Cookie"] and "HttpOnly" in headers["Set-Cookie"]
    assert "SameSite=Strict" in headers["Set-Cookie"]
    status, body, headers = raw_get(port, "/", own, jar)
    assert status == 200 and f"ws://{own}/ws" in body and headers["X-Frame-Options"] == "DENY"
    status, _, _ = raw_get(port, "/static/js/textual.js", own, jar)
    assert status == 200
    # The access log is off: the token is not written again for every request.
    assert web.out.read_text().count(token) == 1
    assert token not in (web.out.parent / "web.log").read_text()


async def test_a_token_file_for_scripts(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("scripted-token-0123456789abcdef\n")
    token_file.chmod(0o600)
    web = Web(tmp_path, "--token-file", str(token_file))
    try:
        wait_port(web.port, web.proc, 30)
        end = time.monotonic() + 10
        while "token" not in web.out.read_text() and time.monotonic() < end:
            time.sleep(0.1)
        printed = web.out.read_text()
        assert f"?token=<the token in {token_file}>" in printed and "scripted-token" not in printed
        own = f"127.0.0.1:{web.port}"
        assert raw_get(web.port, "/", own)[0] == 403
        assert raw_get(web.port, "/?token=scripted-token-0123456789abcdef", own)[0] == 302
        assert raw_get(web.port, "/", own, f"rocm-console-token-{web.port}=scripted-token-0123456789abcdef")[0] == 200
    finally:
        web.stop()


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("missing", "no such file"),
        ("empty", "is empty"),
        ("short", "has 5 characters; at least 16"),
        ("dir", "is a directory"),
    ],
)
def test_web_refuses_a_bad_token_file_in_one_line(tmp_path, setup, expected):
    path = tmp_path / "token"
    if setup == "empty":
        path.write_text("\n")
    elif setup == "short":
        path.write_text("short\n")
    elif setup == "dir":
        path.mkdir()
    port = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "console", "web", "--demo", "--port", str(port), "--token-file", str(path)],
        cwd=ROOT,
        env=dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"rocm-console: --token-file {path}: {proc.stderr.split(': ', 2)[2].strip()}"
    assert expected in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""  # nothing served, no URL


def test_web_warns_about_a_token_file_others_can_read(tmp_path):
    path = tmp_path / "token"
    path.write_text("scripted-token-0123456789abcdef\n")
    path.chmod(0o644)
    web = Web(tmp_path, "--token-file", str(path))
    try:
        wait_port(web.port, web.proc, 30)
        end = time.monotonic() + 5
        log = tmp_path / "web.log"
        while "readable by other users" not in log.read_text() and time.monotonic() < end:
            time.sleep(0.1)
        assert f"rocm-console: web: warning: {path} is readable by other users (chmod 600 {path})" in log.read_text()
    finally:
        web.stop()


def test_web_says_in_one_line_when_its_port_is_taken(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "console", "web", "--demo", "--port", str(port)],
            cwd=ROOT,
            env=dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(ROOT)),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"rocm-console: web: cannot listen on 127.0.0.1:{port}: ")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "token=" not in proc.stdout  # no URL for a server that never listened
