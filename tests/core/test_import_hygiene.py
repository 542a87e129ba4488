"""The core stays pure: importing it must not load textual, asyncssh or httpx."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_imports_no_ui_or_network_libraries():
    code = (
        "import sys, pkgutil, importlib, console.core as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module('console.core.' + m.name)\n"
        "print(' '.join(sorted(x for x in ('textual', 'asyncssh', 'httpx', 'rich') if x in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"console.core pulled in: {out.stdout.strip()}"


def test_agent_and_sim_are_standalone():
    # They are shipped to nodes as single files: no imports from the console package.
    for rel in ("console/agent/node_agent.py", "console/sim/amdsmi.py"):
        src = (ROOT / rel).read_text()
        assert "from console" not in src and "import console" not in src, rel
