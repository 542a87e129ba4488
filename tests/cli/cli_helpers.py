"""Run `rocm-console` as a user does: `python -m console ...` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, ROCM_CONSOLE_SIM_VLLM_SPEEDUP="20", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "console", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]
