"""The shell scripts a newcomer runs (the README's test command, CI's entry, the setup scripts) parse.

A merge once left scripts/test-all with an unclosed `if`: CI then died in its first second.
`bash -n` reads a script without running any of it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    p
    for p in [*ROOT.joinpath("scripts").iterdir(), ROOT / ".ci" / "run"]
    if p.is_file() and p.read_bytes()[:2] == b"#!"
)
SHELL = [p for p in SCRIPTS if b"bash" in p.read_bytes().splitlines()[0] or b"/sh" in p.read_bytes().splitlines()[0]]


def test_the_readme_test_command_and_ci_entry_are_shell_scripts_we_check():
    names = {p.relative_to(ROOT).as_posix() for p in SHELL}
    assert {"scripts/test-all", ".ci/run", "scripts/setup-vllm-cpu"} <= names


@pytest.mark.parametrize("script", SHELL, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_script_parses(script):
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"{script.relative_to(ROOT)}: {r.stderr.strip()}"
