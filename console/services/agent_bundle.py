"""Ship the node agent (and, for simulated nodes, the fake amdsmi) to a node.

Files are uploaded once into ``<state_dir>/agent/<content hash>/`` and reused:
nothing is installed by hand on the node, and a new console version never runs
an old agent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from console.core.model import NodeSpec, ProbeInfo
from console.core.telemetry import AgentProtocolError, parse_agent_line
from console.transport.base import Transport, TransportError

_PKG = Path(__file__).resolve().parents[1]
AGENT_SOURCE = _PKG / "agent" / "node_agent.py"
SIM_AMDSMI_SOURCE = _PKG / "sim" / "amdsmi.py"


@dataclass(frozen=True, slots=True)
class AgentCommand:
    """How to run the installed agent on one node."""

    agent_path: str
    amdsmi_paths: tuple[str, ...]
    python: str
    env: tuple[tuple[str, str], ...]
    state_dir: str

    def argv(self, mode: str, *extra: str) -> list[str]:
        argv = [self.python, self.agent_path, mode, *extra]
        for path in self.amdsmi_paths:
            argv += ["--amdsmi-path", path]
        return argv

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@lru_cache(maxsize=4)
def _bundle(simulated: bool) -> tuple[str, tuple[tuple[str, bytes], ...]]:
    files = [("node_agent.py", AGENT_SOURCE.read_bytes())]
    if simulated:
        files.append(("sim/amdsmi.py", SIM_AMDSMI_SOURCE.read_bytes()))
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + data)
    return digest.hexdigest()[:16], tuple(files)


async def resolve_state_dir(transport: Transport, node: NodeSpec) -> str:
    """Absolute state dir on the node: a quoted '~' is never expanded by a remote shell."""
    state_dir = node.state_dir
    if state_dir == "~" or state_dir.startswith("~/"):
        result = await transport.run(["sh", "-c", 'printf %s "$HOME"'], timeout=30)
        home = result.stdout.strip()
        if not result.ok or not home.startswith("/"):
            raise TransportError(f"{node.name}: cannot find the home directory for state_dir {state_dir!r}", "command")
        state_dir = home + state_dir[1:]
    return state_dir.rstrip("/") or "/"


async def install_agent(transport: Transport, node: NodeSpec) -> AgentCommand:
    state_dir = await resolve_state_dir(transport, node)
    digest, files = _bundle(node.simulate is not None)
    base = f"{state_dir}/agent/{digest}"
    paths = [f"{base}/{name}" for name, _ in files]
    check = await transport.run(
        ["sh", "-c", 'for f; do [ -f "$f" ] || exit 1; done', "sh", *paths], timeout=30
    )
    if not check.ok:
        for (name, data), path in zip(files, paths):
            await transport.upload(data, path, mode=0o644)
    env: list[tuple[str, str]] = []
    amdsmi_paths: tuple[str, ...] = ()
    if node.simulate is not None:
        amdsmi_paths = (f"{base}/sim",)
        env = [
            ("ROCM_CONSOLE_SIM_DIR", f"{state_dir}/sim/{node.name}"),
            ("ROCM_CONSOLE_SIM_SPEC", json.dumps(asdict(node.simulate), sort_keys=True)),
        ]
    return AgentCommand(
        agent_path=paths[0], amdsmi_paths=amdsmi_paths, python=node.python, env=tuple(env), state_dir=state_dir
    )


async def run_probe(transport: Transport, command: AgentCommand, timeout: float = 30.0) -> ProbeInfo | None:
    """Versions and facts of the node; None when the probe cannot say (never fatal)."""
    try:
        result = await transport.run(command.argv("probe"), env=command.env_dict(), timeout=timeout)
    except TransportError:
        return None
    for line in result.stdout.splitlines():
        try:
            message = parse_agent_line(line)
        except AgentProtocolError:
            continue
        if isinstance(message, ProbeInfo):
            return message
    return None
