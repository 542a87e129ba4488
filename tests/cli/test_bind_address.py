"""Where an instance listens on a real (not simulated) node: where its preset says.

The node here is this machine reached by the local transport, with no simulated amdsmi; its
`vllm` is the simulator's server started as a real node would start vLLM, so the address it
binds is the one in the argv the console built. Only loopback addresses are bound."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli.cli_helpers import ROOT, one_line_error, run
from tests.helpers import free_port


def _listening(port: int) -> set[str]:
    """IPv4 addresses with a listening TCP socket on `port` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        addr, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:
            found.add(".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


@pytest.fixture
def node_profile(tmp_path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.real]
transport = "local"
state_dir = "{tmp_path / "state"}"
vllm = "{sys.executable} {ROOT / "console" / "sim" / "vllm"}"

[serve.node-only]
model = "tiny-llama"
host = "127.0.0.1"
args = ["--max-model-len", "256"]
""")
    return path


def test_a_real_node_instance_listens_where_the_preset_says(node_profile, tmp_path):
    port = free_port()
    env = {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    start = run(
        "serve", "start", "--profile", str(node_profile), "--preset", "node-only", "--gpus", "0",
        "--port", str(port), "--name", "n", "--wait", "--timeout", "60", "--json", env=env,
    )  # fmt: skip
    try:
        assert start.returncode == 0, start.stderr
        view = json.loads(start.stdout)
        assert view["state"] == "ready"
        argv = view["argv"]
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert _listening(port) == {"127.0.0.1"}  # not 0.0.0.0: the node only, reached through SSH
    finally:
        run("serve", "stop", "n", "--profile", str(node_profile), env=env)


@pytest.mark.parametrize("host", ["10.1.2.3", "::", "localhost", "0.0.0.0 "])
def test_a_bind_address_the_console_could_not_reach_is_refused(tmp_path, host):
    path = tmp_path / "p.toml"
    path.write_text(f'[nodes.n]\nhost = "h"\n\n[serve.s]\nmodel = "m"\nhost = "{host}"\n')
    proc = run("serve", "list", "--profile", str(path))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"rocm-console: {path}:6: [serve.s] key 'host': ")
    assert "127.0.0.1 (the node only, reached through SSH) or 0.0.0.0 (every address)" in line or "spaces" in line
