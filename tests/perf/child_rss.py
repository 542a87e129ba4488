"""A child process's own wall time and peak RSS, as a perf script should read them.

`os.wait4` on a child started by `subprocess` reports a peak RSS that is at least the
*parent's*: Linux keeps the larger of the old and new address space's high-water mark across
`execve`, and the child began in the parent's (vfork or fork). A measuring script that holds a
filled store reported 143 MB for a CLI command that uses 46. So the command runs under a small
launcher (`python -S`, a few MB) that forks it afresh (a new process starts its high-water mark
from the launcher's small one), times it and reads its rusage itself, and writes both to a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import IO

_LAUNCH = r"""
import json, os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - t
with open(report, "w") as f:
    json.dump({"seconds": seconds, "peak_rss_kb": usage.ru_maxrss}, f)
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def run_measured(
    argv: list[str], *, cwd: str | os.PathLike | None = None, env: dict | None = None, stdout: IO | None = None,
    stderr: IO | None = None,
) -> tuple[int, float, float]:  # fmt: skip
    """(exit code, seconds from fork to exit, the command's own peak RSS in MB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        done = subprocess.run(
            [sys.executable, "-S", "-c", _LAUNCH, report.name, *argv], cwd=cwd, env=env, stdout=stdout, stderr=stderr
        )
        figures = json.loads(open(report.name).read() or "{}")
    if not figures:
        raise RuntimeError(f"{argv[0]}: the launcher wrote no figures (exit {done.returncode})")
    return done.returncode, figures["seconds"], figures["peak_rss_kb"] / 1024
