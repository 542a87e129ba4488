"""An instance whose API needs a key: the preset names the variable (`api_key_env`), the key
travels to vLLM as VLLM_API_KEY in its environment (never argv, never a stored file), and the
console's own calls send it: the health check's /v1/models and the benchmark client.

The simulated vLLM guards /v1/* exactly as vLLM does (VLLM_API_KEY, else --api-key; /health,
/metrics and /version open), so a request without the key fails where a real server's would."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.cli.cli_helpers import one_line_error, run
from tests.helpers import free_port

KEY = "sk-test-9f3a1c7e"  # what must never show up anywhere but the server's environment


@pytest.fixture
def lab(tmp_path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}

[serve.keyed]
model = "tiny-llama"
served_model_name = "keyed-llama"
args = ["--max-model-len", "256"]
api_key_env = "RC_TEST_VLLM_KEY"
""")
    return path


def _env(tmp_path: Path, key: str | None = KEY) -> dict:
    env = {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    if key is not None:
        env["RC_TEST_VLLM_KEY"] = key
    return env


def _get(url: str, key: str | None = None) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _everything_written(tmp_path: Path) -> str:
    """Every file the node, the store and the console wrote, as text."""
    out = []
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix not in (".pyc",) and path.stat().st_size < 5 << 20:
            out.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(out)


def test_key_from_the_environment_is_used_and_never_shown(lab, tmp_path):
    port = free_port()
    start = run(
        "serve", "start", "--profile", str(lab), "--preset", "keyed", "--gpus", "1", "--port", str(port),
        "--name", "k", "--wait", "--timeout", "60", "--json", env=_env(tmp_path),
    )  # fmt: skip
    try:
        assert start.returncode == 0, start.stderr
        view = json.loads(start.stdout)
        # ready from the open /health, and the guarded /v1/models answered the console's key
        assert view["state"] == "ready" and view["served_models"] == ["keyed-llama"]
        assert view["api_key_env"] == "RC_TEST_VLLM_KEY"
        base = f"http://127.0.0.1:{port}"
        assert _get(base + "/health") == 200
        assert _get(base + "/v1/models") == 401  # the server really wants the key
        assert _get(base + "/v1/models", KEY) == 200
        pid = view["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert "keyed-llama" in cmdline and KEY not in cmdline and "--api-key" not in cmdline
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
        assert f"VLLM_API_KEY={KEY}" in environ  # where vLLM reads it

        bench = run(
            "bench", "run", "--profile", str(lab), "--instance", "k", "--preset", "tiny", "--json",
            env=_env(tmp_path),
        )  # fmt: skip
        assert bench.returncode == 0, bench.stderr
        doc = json.loads(bench.stdout)
        assert doc["metrics"]["completed"] == 20 and doc["metrics"]["failed"] == 0  # the client sent the key

        listed = run("serve", "list", "--profile", str(lab), "--json", env=_env(tmp_path))
        runs = run("bench", "runs", "--profile", str(lab), "--json", env=_env(tmp_path))
        for proc in (start, bench, listed, runs):
            assert KEY not in proc.stdout + proc.stderr
        assert KEY not in _everything_written(tmp_path)  # spec.json, logs, the stored run

        no_key = run(
            "bench", "run", "--profile", str(lab), "--instance", "k", "--preset", "tiny", env=_env(tmp_path, None)
        )
        assert no_key.returncode == 1
        assert one_line_error(no_key) == (
            "rocm-console: sim: instance k: api_key_env RC_TEST_VLLM_KEY is not set in this environment (export it first)"
        )
    finally:
        run("serve", "stop", "k", "--profile", str(lab), env=_env(tmp_path))


def test_a_keyed_preset_without_its_variable_starts_nothing(lab, tmp_path):
    proc = run("serve", "start", "--profile", str(lab), "--preset", "keyed", "--gpus", "1", env=_env(tmp_path, ""))
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "rocm-console: preset keyed: api_key_env RC_TEST_VLLM_KEY is not set in this environment (export it first)"
    )
    assert not (tmp_path / "state" / "instances").exists() or not any((tmp_path / "state" / "instances").iterdir())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('api_key_env = "sk-live-123"', "expected the name of an environment variable"),
        ('api_key_env = "MY KEY"', "must not contain spaces"),
        ('args = ["--api-key", "x"]', "secrets do not belong in profiles"),
        ('env = { VLLM_API_KEY = "x" }', "secrets do not belong in profiles"),
    ],
)
def test_a_key_in_the_profile_is_refused(tmp_path, line, message):
    path = tmp_path / "p.toml"
    path.write_text(f'[nodes.n]\nhost = "h"\n\n[serve.s]\nmodel = "m"\n{line}\n')
    proc = run("serve", "list", "--profile", str(path), env=_env(tmp_path))
    assert proc.returncode == 2 and message in one_line_error(proc) and f"{path}:6:" in one_line_error(proc)
