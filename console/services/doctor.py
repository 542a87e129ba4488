"""Run the node doctor on every node in parallel, with a deadline: `rocm-console doctor`.

Per node: ship the agent (as for telemetry), run its ``doctor`` mode, read the
one ``doctor`` line, add the console's own lines (how the node is reached,
environment names its vLLM does not know). A node that cannot be reached, or
whose agent cannot run, is one fail line naming the node and the reason.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Iterable

from console.core.doctor import (
    SHELL_FIX,
    WARN,
    DoctorCheck,
    DoctorOutputError,
    NodeDoctor,
    banner_check,
    down_node,
    health_checks,
    link_check,
    parse_doctor_output,
    vllm_env_checks,
)
from console.core.health import HealthRules
from console.core.model import NodeSpec
from console.core.telemetry import AgentProtocolError
from console.core.text import printable, unexpected
from console.services.agent_bundle import AgentCommand, install_agent
from console.services.transports import TransportPool, each_node
from console.transport.base import AGENT_OUTPUT_LIMIT, Transport, TransportError

DOCTOR_TIMEOUT = 90.0  # per node: `vllm --version` alone can take 30 s on a real node
_EXIT_NOT_FOUND = 127  # sh: the command (the node's python) was not found


def doctor_argv(node: NodeSpec, command: AgentCommand) -> list[str]:
    extra = ["--vllm", shlex.join(command.vllm)]
    if node.sudo:
        extra.append("--sudo")
    if command.sysroot:
        extra += ["--sysroot", command.sysroot]
    return command.argv("doctor", *extra)


async def _link(transport: Transport, node: NodeSpec) -> DoctorCheck:
    if node.transport == "local":
        return link_check("local node: the agent runs on this machine (no SSH)", None)
    where = f"SSH to {node.user + '@' if node.user else ''}{node.host}:{node.port}"
    if node.jump:
        where += f" via {node.jump}"
    refusal = None
    check_sftp = getattr(transport, "sftp_refusal", None)
    if check_sftp is not None:
        try:
            refusal = await check_sftp()
        except TransportError as exc:
            refusal = f"the SFTP check failed: {exc}"
    return link_check(where, refusal)


def _python_fix(node: NodeSpec) -> str:
    return f'install Python >= 3.8 on the node, or set python = "/path/to/python3" for {node.name} in the profile'


def _agent_failed(node: NodeSpec, command: AgentCommand, exit_status: int, stderr: str, why: str) -> NodeDoctor:
    last = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "")
    if exit_status == _EXIT_NOT_FOUND:
        return down_node(
            node.name, "agent", f"{node.python} not found on the node ({last or 'exit 127'})", _python_fix(node)
        )
    reason = f"the agent's doctor gave no report ({why}; exit {exit_status}{': ' + last if last else ''})"
    return down_node(
        node.name,
        "agent",
        reason,
        f"the agent needs Python >= 3.8 ({node.python} on the node); run "
        f"`{shlex.join(doctor_argv(node, command))}` there to see the error",
    )


async def doctor_node(
    pool: TransportPool, node: NodeSpec, *, timeout: float = DOCTOR_TIMEOUT, health: HealthRules | None = None
) -> NodeDoctor:
    transport = pool.get(node)
    try:
        command = await install_agent(transport, node)
    except TransportError as exc:
        title = {"command": "agent install", "shell": "login shell"}.get(exc.kind, "connection")
        return down_node(node.name, title, exc.reason, _transport_fix(exc.kind))
    link = await _link(transport, node)
    try:
        result = await transport.run(
            doctor_argv(node, command), env=command.env_dict(), timeout=timeout, max_output=AGENT_OUTPUT_LIMIT
        )
    except TransportError as exc:
        if exc.kind != "command":  # the link went down or the doctor ran out of time
            return down_node(node.name, "agent", exc.reason, _transport_fix(exc.kind))
        return down_node(node.name, "agent", exc.reason, _python_fix(node))  # the python could not start
    try:
        checks, facts = parse_doctor_output(result.stdout)
    except DoctorOutputError as exc:
        return _agent_failed(node, command, result.exit_status, result.stderr, str(exc))
    banner = banner_check(getattr(transport, "login_banner", None))
    link_checks = (link, banner) if banner is not None else (link,)
    gpu_checks = await _health(pool, node, health) if health is not None else []
    return NodeDoctor(node.name, (*link_checks, *checks, *vllm_env_checks(facts), *gpu_checks), facts)


async def _health(pool: TransportPool, node: NodeSpec, rules: HealthRules) -> list[DoctorCheck]:
    """Each physical GPU's health from a short telemetry run (none when the agent reads no health)."""
    from console.services.status import sample_node

    try:
        snap = await sample_node(pool, node, probe=False, health=rules)
    except (TransportError, AgentProtocolError, OSError) as exc:
        reason = exc.reason if isinstance(exc, TransportError) else printable(exc)
        return [DoctorCheck("health", "GPU health", WARN, f"not read: {reason}", "run `rocm-console doctor` again")]
    return health_checks(snap.gpu_health, node.name)


async def collect_doctor(
    nodes: Iterable[NodeSpec],
    *,
    timeout: float = DOCTOR_TIMEOUT,
    pool: TransportPool | None = None,
    health: HealthRules | None = None,
) -> list[NodeDoctor]:
    """The doctor on every node concurrently; a node past the deadline is a fail line, not waited for."""

    def down(node: NodeSpec, exc: Exception) -> NodeDoctor:
        if isinstance(exc, asyncio.TimeoutError):
            fix = "is the node up and its sshd answering? try `--timeout` with more seconds"
            return down_node(node.name, "connection", f"no answer within {timeout:g} s", fix)
        if isinstance(exc, TransportError):  # the SFTP check's link went down
            return down_node(node.name, "connection", exc.reason, _transport_fix(exc.kind))
        if isinstance(exc, OSError):
            return down_node(node.name, "connection", printable(exc))
        # whatever a node sent: one fail line naming it, never a traceback
        return down_node(node.name, "agent", unexpected(node.name, exc))

    async def check(pool: TransportPool, node: NodeSpec) -> NodeDoctor:
        return await doctor_node(pool, node, timeout=timeout, health=health)

    return await each_node(nodes, check, down, timeout=timeout, pool=pool, failures=(Exception,))


def _transport_fix(kind: str) -> str:
    return {
        "host_key": "check the node's host key (ssh-keyscan it, compare, add it to known_hosts)",
        "auth": "check user, identity_file and the SSH agent: `ssh -v` the node with the same settings",
        "unreachable": "check host, port and jump in the profile, and that sshd runs on the node",
        "timeout": "the node did not answer in time: is it up? (a slow node: raise --timeout)",
        "closed": "the SSH connection dropped: run the doctor again",
        "command": "check state_dir in the profile: it must be writable on the node",
        "shell": SHELL_FIX,
    }.get(kind, "")
