"""The demo leaves nothing behind: quit it (q, SIGTERM, SIGHUP of a closed terminal, SIGKILL)
after starting an instance and a benchmark, and no process of it is left; nothing it started
ever listened beyond loopback.

The real `python -m console --demo` runs in a real terminal (tmux) with the real agent, the
supervisor and the simulated vLLM server and benchmark client, with HOME pointed at a fresh
folder: every process the demo starts inherits that HOME, which is how the test finds them
(on top of the console's own descendants), whatever the code under test does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from console.core.profiles import demo_profile_path, load_profile
from tests.ui.test_tmux_demo import ROOT, Tmux

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc"),
    pytest.mark.timeout(240),
]


def demo_profile():
    return load_profile([demo_profile_path()])


def start_time(pid: int) -> str | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, start time) of every live process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):
            out[int(entry)] = (int(fields[1]), fields[19])
    return out


def demo_processes(console: int, home: Path) -> set[tuple[int, str]]:
    """(pid, start time) of the console's descendants and of every process with its HOME."""
    table = processes()
    found = set()
    marker = b"\0HOME=" + str(home).encode() + b"\0"
    for pid, (_, started) in table.items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in b"\0" + environ:
            found.add((pid, started))
    family = {console}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, started) in table.items():
            if ppid in family and pid not in family:
                family.add(pid)
                found.add((pid, started))
                grew = True
    return found


def listening_inodes() -> dict[str, str]:
    """socket inode -> local address of every TCP socket in LISTEN state (IPv4 and IPv6)."""
    out = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":
                out[fields[9]] = fields[1]
    return out


def is_loopback(local: str) -> bool:
    address = local.rsplit(":", 1)[0]
    if len(address) == 8:
        return address.endswith("7F")  # 127.0.0.0/8, little-endian
    # IPv6: ::1, or ::ffff:127.x.x.x
    return address == "0" * 24 + "01000000" or (address[:24] == "0000000000000000FFFF0000" and address.endswith("7F"))


def sockets_of(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


class Demo:
    def __init__(self, tmp_path: Path, home: Path | None = None) -> None:
        self.term = Tmux(tmp_path)
        if home is not None:  # another demo's HOME: the same user twice (two browser tabs)
            self.term.home = home
        self.home = self.term.home
        self.seen: set[tuple[int, str]] = set()
        self.listening: dict[str, tuple[int, str]] = {}  # address -> (pid, command) that listened
        self.pid = 0

    def start(self) -> None:
        env = f"HOME={self.home} PYTHONPATH={ROOT}"
        command = f"cd {ROOT} && exec env {env} {sys.executable} -m console --demo"
        self.term.tmux("new-session", "-d", "-s", self.term.session, "-x", "140", "-y", "40", command)
        self.pid = int(self.term.tmux("display-message", "-p", "-t", self.term.session, "#{pane_pid}").strip())

    def look(self) -> None:
        """Record every demo process and every socket one of them listens on."""
        found = demo_processes(self.pid, self.home)
        self.seen |= found
        listening = listening_inodes()
        for pid, _ in found:
            for inode in sockets_of(pid) & listening.keys():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    cmd = "?"
                self.listening[listening[inode]] = (pid, cmd)

    def wait_for(self, text: str, timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.look()
            screen = self.term.screen()
            if text in screen:
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{text!r} never appeared; the pane shows:\n{self.term.screen()}")

    def start_instance_and_benchmark(self) -> None:
        self.wait_for(f"{len(demo_profile().nodes)} live", timeout=25)
        # GPU 5 of the SPX node is idle (the demo's load is on 0-3, its own instance on 4):
        # s there, ctrl+s starts it (Enter only moves between the dialog's fields).
        self.term.keys("j", "j", "j", "j", "j", "j", "s")
        self.wait_for("Start a vLLM instance", timeout=20)
        self.term.keys("C-s")
        self.wait_for("2 instances ready", timeout=40)
        self.term.keys("b")
        self.wait_for("Run a benchmark", timeout=20)
        self.term.keys("C-s")  # the first preset runs 500 prompts at 1/s: asked first
        self.wait_for("A long run", timeout=20)
        self.term.keys("y")
        self.wait_for("requests ·", timeout=20)
        end = time.monotonic() + 20
        while not any(" bench serve " in cmd for cmd in _commands(self)) and time.monotonic() < end:
            time.sleep(0.3)
            self.look()

    def leftovers(self, timeout: float) -> list[str]:
        end = time.monotonic() + timeout
        while True:
            alive = [(pid, started) for pid, started in self.seen if start_time(pid) == started]
            if not alive or time.monotonic() > end:
                break
            time.sleep(0.2)
        out = []
        for pid, _ in alive:
            try:
                out.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                pass
        return out

    def cleanup(self) -> None:
        # Whatever a failed test left: only the processes recorded as this demo's, by pid.
        for pid, started in self.seen:
            if start_time(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        self.term.kill()


@pytest.fixture
def demo(tmp_path):
    d = Demo(tmp_path)
    yield d
    d.cleanup()


def check_nothing_left(demo: Demo) -> None:
    kinds = " ".join(cmd for _, cmd in demo.listening.values())
    assert "serve" in kinds, f"the simulated vLLM server was never seen listening: {demo.listening}"
    beyond = {addr: who for addr, who in demo.listening.items() if not is_loopback(addr)}
    assert not beyond, f"demo processes listened beyond loopback: {beyond}"
    commands = " ".join(
        Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        for pid, started in demo.seen
        if start_time(pid) == started
    )
    assert "serve" in commands or demo.listening, "the instance was never seen"
    left = demo.leftovers(timeout=10)
    assert not left, "left running after the console ended:\n" + "\n".join(left)


def test_q_quits_and_stops_everything_the_demo_started(demo):
    demo.start()
    demo.start_instance_and_benchmark()
    assert any(" bench serve " in cmd for cmd in _commands(demo)), f"no benchmark client ran: {_commands(demo)}"
    demo.term.keys("q")
    check_nothing_left(demo)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_console_leaves_nothing(demo, sig):
    demo.start()
    demo.start_instance_and_benchmark()
    assert any(" bench serve " in cmd for cmd in _commands(demo)), f"no benchmark client ran: {_commands(demo)}"
    os.kill(demo.pid, sig)
    check_nothing_left(demo)


def test_a_closed_terminal_leaves_nothing(demo):
    demo.start()
    demo.start_instance_and_benchmark()
    assert any(" bench serve " in cmd for cmd in _commands(demo)), f"no benchmark client ran: {_commands(demo)}"
    # Closing the window: tmux hangs up the pane's terminal (SIGHUP to the console).
    subprocess.run(["tmux", "-S", demo.term.socket, "kill-session", "-t", demo.term.session], timeout=10)
    check_nothing_left(demo)


def _commands(demo: Demo) -> list[str]:
    out = []
    for pid, started in demo.seen:
        if start_time(pid) != started:
            continue
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return out


# ---------------------------------------------------------------- two demos at once


def lifeline_of(console: int) -> set[tuple[int, str]]:
    """(pid, start time) of the processes that carry this console's lifeline: what it started,
    told apart from another demo's even when both run with the same HOME."""
    marker = f"\0ROCM_CONSOLE_LIFELINE={console}:{start_time(console)}\0".encode()
    found = set()
    for pid, (_, started) in processes().items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in b"\0" + environ + b"\0":
            found.add((pid, started))
    return found


def environ_value(pid: int, name: str) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{name}=".encode()
    return next((e[len(prefix) :].decode() for e in environ if e.startswith(prefix)), None)


def serving(demo: Demo) -> dict[int, tuple[int, str]]:
    """port -> (pid, start time) of the simulated vLLM servers this demo's lifeline holds."""
    ours = lifeline_of(demo.pid)
    demo.seen |= ours
    listening = listening_inodes()
    out = {}
    for pid, started in ours:
        if " serve " not in _cmdline(pid):
            continue
        for inode in sockets_of(pid) & listening.keys():
            out[int(listening[inode].rsplit(":", 1)[1], 16)] = (pid, started)
    return out


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_serving(demo: Demo, count: int, timeout: float) -> dict[int, tuple[int, str]]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = serving(demo)
        if len(found) >= count and all(healthy(p) for p in found):
            return found
        time.sleep(0.5)
    raise AssertionError(f"the demo's {count} instances never all served: {found}; pane:\n{demo.term.screen()}")


@pytest.mark.timeout(300)
def test_two_demos_at_once_share_nothing_and_one_quitting_leaves_the_other(tmp_path):
    """Two demos of one user at once, with one HOME (two `web --demo` tabs: each tab is such a
    console process), started together: each runs its own two instances (no name or port
    collides), keeps its state in its own folder, and quitting one leaves the other serving."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Demo(tmp_path / "a")
    second = Demo(tmp_path / "b", home=first.home)
    try:
        first.start()
        second.start()
        a = wait_serving(first, 2, timeout=90)
        b = wait_serving(second, 2, timeout=60)
        assert len(a) == 2 and len(b) == 2, (a, b)
        assert not set(a) & set(b), f"the two demos' instances share a port: {a} {b}"
        assert not {p for p, _ in a.values()} & {p for p, _ in b.values()}

        # Each demo's own state folder (its processes carry it), outside the shared HOME.
        folders = []
        for found in (a, b):
            pid = next(iter(found.values()))[0]
            folder = environ_value(pid, "ROCM_CONSOLE_DEMO_STATE")
            assert folder and Path(folder).is_dir() and not Path(folder).is_relative_to(first.home), folder
            assert any(Path(folder).glob("*/instances/*/spec.json")), f"no instance of its own in {folder}"
            folders.append(Path(folder))
        assert folders[0] != folders[1]

        # The second one quits: everything it started ends, its folder goes...
        second.term.keys("q")
        second.seen.add((second.pid, start_time(second.pid) or ""))  # the console too: it removes the folder last
        left = second.leftovers(timeout=10)
        assert not left, "the quit demo left:\n" + "\n".join(left)
        assert not folders[1].exists(), f"{folders[1]} was left behind"
        # ...and the first one goes on serving what it shows, a few lifeline checks later.
        time.sleep(3)
        for port, (pid, started) in a.items():
            assert start_time(pid) == started, f"the first demo's instance on port {port} was ended"
            assert healthy(port), f"the first demo's instance on port {port} stopped answering"
        assert serving(first) == a
        screen = first.term.screen()
        assert "instance ready" in screen and "failed" not in screen and "exited" not in screen, screen
        first.term.keys("q")
        first.seen.add((first.pid, start_time(first.pid) or ""))
        left = first.leftovers(timeout=10)
        assert not left, "the first demo left:\n" + "\n".join(left)
        assert not folders[0].exists()
    finally:
        first.cleanup()
        second.cleanup()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
