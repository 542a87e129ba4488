"""A real Hugging Face mirror on 127.0.0.1 for the pull tests: olah (PyPI `olah`, installed by
scripts/setup-olah) serving a local git repository, offline (it never asks huggingface.co).

The repository holds the tiny test model's files and a padding file of random bytes, so a
pull lasts long enough to be killed half way. `ThrottledProxy` (a plain TCP relay in front of
olah) slows what olah sends back per connection; it reads no HTTP, so the client talks to
olah unchanged.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx

from tests.integration.sshd import free_port

OLAH_VERSION = "0.5.4"
REPO_ID = "rc-test/tiny-llama"
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
PADDING = "padding.bin"


def olah_venv() -> Path:
    env = os.environ.get("ROCM_CONSOLE_OLAH_VENV")
    return Path(env) if env else Path.home() / ".cache" / "rocm-console" / f"olah-{OLAH_VERSION}"


def olah_available() -> bool:
    marker = olah_venv() / ".rocm-console-ready"
    try:
        return marker.read_text().strip() == OLAH_VERSION and os.access(olah_venv() / "bin" / "olah-cli", os.X_OK)
    except OSError:
        return False


def build_repo(root: Path, model: Path, padding_bytes: int) -> Path:
    """<root>/models/rc-test/tiny-llama: a git repository of the tiny model (+ padding), one commit."""
    repo = root / "models" / REPO_ID
    repo.mkdir(parents=True)
    for name in MODEL_FILES:
        shutil.copyfile(model / name, repo / name)
    (repo / PADDING).write_bytes(os.urandom(padding_bytes))
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=test", "-C", str(repo)]
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "tiny model"]):
        subprocess.run([*git, *argv], check=True, capture_output=True, timeout=60)
    return repo


class Olah:
    """olah-cli on 127.0.0.1:<free port>, offline, its mirrors-path the folder of build_repo."""

    def __init__(self, folder: Path, mirrors: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.log_path = folder / "olah.log"
        self.config = folder / "olah.toml"
        self.config.write_text(
            f'[basic]\nhost = "127.0.0.1"\nport = {self.port}\nrepos-path = "{folder / "repos"}"\n'
            f'mirrors-path = ["{mirrors}"]\n\n[accessibility]\noffline = true\n'
        )
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VIRTUAL_ENV", "PYTHON"))}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(olah_venv() / "bin" / "olah-cli"), "-c", str(self.config)],
                cwd=self.folder,  # its ./logs
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"olah exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                r = httpx.get(f"{self.url}/api/models/{REPO_ID}/revision/main", timeout=2)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"olah not answering after {timeout:.0f} s: {self.log_path.read_text()[-2000:]}")

    def gets(self, name: str) -> int:
        """How many GETs of the file `name` olah answered (its access log)."""
        text = self.log_path.read_text(errors="replace")
        return len(re.findall(rf'"GET /{re.escape(REPO_ID)}/resolve/[0-9a-f]+/{re.escape(name)} HTTP', text))

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)


class ThrottledProxy:
    """127.0.0.1:<port> → 127.0.0.1:<target>; the answers at `rate` bytes/s per connection (None: full speed)."""

    CHUNK = 16 * 1024

    def __init__(self, target: int, rate: float | None) -> None:
        self.target = target
        self.rate = rate
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the throttling proxy did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
            self._ready.set()

        self._loop.run_until_complete(serve())
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, throttled: bool) -> None:
            try:
                while True:
                    data = await src.read(self.CHUNK)
                    if not data:
                        break
                    dst.write(data)
                    await dst.drain()
                    if throttled and self.rate:
                        await asyncio.sleep(len(data) / self.rate)
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    dst.close()
                except (ConnectionError, OSError):
                    pass

        await asyncio.gather(pump(reader, up_w, False), pump(up_r, writer, True))

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
