"""`rocm-console web`: the app in a real browser (headless Chromium), served by textual-serve.

The test starts `python -m console web --demo` on a free loopback port and Debian's
`chromium --headless` with its DevTools port, and drives the page through the Chrome DevTools
protocol with a small client (aiohttp's websocket, which textual-serve brings): it reads the
terminal output the page receives (the websocket frames from the app), checks that the fleet
table arrives with live numbers, types `?` into the page and sees the help screen come back, and
saves a screenshot of the page. Everything it started is stopped by pid.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.profiles import demo_profile_path, load_profile
from tests.integration.test_demo_lifeline import demo_processes, start_time

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "screenshots" / "web.png"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

aiohttp = pytest.importorskip("aiohttp")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test-all installs it)"),
    pytest.mark.timeout(120),
]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


@pytest.fixture
def served(tmp_path):
    port, devtools = free_port(), free_port()
    env = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    (tmp_path / "home").mkdir()
    (tmp_path / "browser-home").mkdir()
    web = subprocess.Popen(
        [sys.executable, "-m", "console", "web", "--demo", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "web.log", "wb"),
        start_new_session=True,
    )
    browser = subprocess.Popen(
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
    try:
        wait_port(port, web, 30)
        wait_port(devtools, browser, 30)
        yield port, devtools, web, tmp_path / "home"
    finally:
        stop(browser)
        stop(web)
        for pid, started in demo_processes(web.pid, tmp_path / "home"):  # a failed test's leftovers
            if start_time(pid) == started:
                os.kill(pid, signal.SIGKILL)


async def test_the_console_in_a_browser(served):
    port, devtools, web, home = served
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{devtools}/json/list") as resp:
            targets = await resp.json()
        page_ws = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        async with http.ws_connect(page_ws, max_msg_size=0) as ws:
            page = Page(ws)
            await page.send("Network.enable")
            await page.send("Page.enable")
            await page.send("Page.navigate", url=f"http://127.0.0.1:{port}/")
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
            SCREENSHOT.parent.mkdir(exist_ok=True)
            SCREENSHOT.write_bytes(data)
            page.reader.cancel()
    # The server stopped as a service manager stops it (SIGTERM to its pid alone) while a tab
    # is open: its console session and everything that session started end with it.
    recorded = demo_processes(web.pid, home)
    assert any("--demo" in _cmdline(pid) and "web" not in _cmdline(pid) for pid, _ in recorded)
    os.kill(web.pid, signal.SIGTERM)
    web.wait(15)
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
