"""A real OpenSSH server on 127.0.0.1 for integration tests.

``SshServer.create(tmpdir)`` generates a host key and a client key pair,
writes an ``sshd_config`` and a ``known_hosts`` file (``sftp=False``: a
hardened variant without ``Subsystem sftp``, so SFTP requests are refused), and ``start()`` runs
``/usr/sbin/sshd -D -e`` in a new session (its own process group) on a free
port. ``stop()`` kills only what it started: the sshd process group it
created and the per-connection sshd processes forked from it (OpenSSH calls
``setsid()`` in every connection child, so they are *not* in our group and
killing the group alone would leave live sessions up).
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from console.core.model import NodeSpec
from tests.helpers import free_port

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
HOST = "127.0.0.1"


def pid_alive(pid: int) -> bool:
    """True if pid exists and is not a zombie (Linux /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # state is the field after the parenthesised comm
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def keygen(path: Path, comment: str) -> None:
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )


class SshServer:
    """One sshd instance; see the module docstring."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.host = HOST
        self.port = port
        self.user = getpass.getuser()
        self.host_key = root / "ssh_host_ed25519_key"
        self.identity_file = str(root / "client_ed25519")
        self.authorized_keys = root / "authorized_keys"
        self.known_hosts = str(root / "known_hosts")
        self.config = root / "sshd_config"
        self.pid_file = root / "sshd.pid"
        self.log_file = root / "sshd.log"
        self._proc: subprocess.Popen | None = None
        self._pgid: int | None = None

    # ------------------------------------------------------------ setup

    @classmethod
    def create(cls, root: Path, *, sftp: bool = True) -> SshServer:
        root.mkdir(parents=True, exist_ok=True)
        server = cls(root, free_port())
        keygen(server.host_key, "rocm-console-test-host")
        keygen(Path(server.identity_file), "rocm-console-test-client")
        server.authorized_keys.write_text(Path(server.identity_file + ".pub").read_text())
        host_pub = Path(str(server.host_key) + ".pub").read_text().split()
        Path(server.known_hosts).write_text(f"[{HOST}]:{server.port} {host_pub[0]} {host_pub[1]}\n")
        server.config.write_text(
            "\n".join(
                [
                    f"Port {server.port}",
                    f"ListenAddress {HOST}",
                    f"HostKey {server.host_key}",
                    f"PidFile {server.pid_file}",
                    f"AuthorizedKeysFile {server.authorized_keys}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "StrictModes no",
                    "UsePAM no",
                    "AllowTcpForwarding yes",
                    "X11Forwarding no",
                    "PrintMotd no",
                    "UseDNS no",
                    *(["Subsystem sftp internal-sftp"] if sftp else []),
                    "AcceptEnv none",
                    "LogLevel VERBOSE",
                    "",
                ]
            )
        )
        return server

    def make_client_key(self, name: str) -> str:
        """A fresh key pair that the server does NOT authorize; returns its path."""
        path = self.root / name
        keygen(path, name)
        return str(path)

    def node_spec(self, **overrides) -> NodeSpec:
        spec = NodeSpec(
            name="ssh-node",
            host=self.host,
            port=self.port,
            user=self.user,
            identity_file=self.identity_file,
            known_hosts=self.known_hosts,
            transport="ssh",
        )
        return replace(spec, **overrides)

    # ------------------------------------------------------------ lifecycle

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def start(self, timeout: float = 15.0) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        try:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation dir
        except PermissionError:
            pass  # not root: sshd may still run for the current user
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self._pgid = self._proc.pid  # start_new_session: pgid == pid
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = self._pgid = None
                raise RuntimeError(f"sshd exited with {code}:\n{self.log_tail()}")
            if self._banner_ok():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not accept on {HOST}:{self.port}:\n{self.log_tail()}")
            time.sleep(0.05)

    def _banner_ok(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1.0) as s:
                return s.recv(64).startswith(b"SSH-")
        except OSError:
            return False

    def session_pids(self) -> list[int]:
        """Per-connection sshd processes forked from our listener (and their sshd children)."""
        if self._proc is None:
            return []
        children = _children_map()
        found: list[int] = []
        todo = list(children.get(self._proc.pid, []))
        while todo and len(found) < 10_000:
            pid = todo.pop()
            if _comm(pid).startswith("sshd"):
                found.append(pid)
                todo.extend(children.get(pid, []))
        return found

    def freeze(self) -> list[int]:
        """SIGSTOP the live sessions: the TCP link stays up but goes silent."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        return pids

    def thaw(self, pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Kill the listener's process group and every session it forked."""
        if self._proc is None:
            return
        sessions = self.session_pids()
        try:
            os.killpg(self._pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        deadline = time.monotonic() + 5
        while any(pid_alive(p) for p in sessions) and time.monotonic() < deadline:
            time.sleep(0.02)
        self._proc = self._pgid = None
