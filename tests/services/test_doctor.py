"""The doctor service: every node in parallel, a deadline, a down node as one fail line."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from console.core.doctor import exit_code
from console.services.doctor import collect_doctor
from console.services.transports import TransportPool
from console.transport.base import CommandResult
from console.transport.local import LocalTransport


class Node(LocalTransport):
    """A local node whose doctor run can hang, or find no python (exit 127 as sh reports it)."""

    def __init__(self, name, *, hang=False, no_python=False, sftp_refusal=None):
        super().__init__(name)
        self.hang, self.no_python, self.refusal = hang, no_python, sftp_refusal

    async def run(self, argv, **kw):
        if "doctor" in argv:
            if self.hang:
                await asyncio.sleep(3600)
            if self.no_python:
                return CommandResult(127, "", f"sh: 1: exec: {argv[0]}: not found\n")
        return await super().run(argv, **kw)


def pool_of(nodes):
    return TransportPool(lambda node: nodes[node.name])


async def test_deadline_per_node_and_the_others_still_answer(sim_node):
    a, b, c = sim_node("a"), sim_node("b"), sim_node("c", python="/opt/py/bin/python3")
    transports = {"a": Node("a"), "b": Node("b", hang=True), "c": Node("c", no_python=True)}
    started = time.monotonic()
    reports = await collect_doctor([a, b, c], timeout=3, pool=pool_of(transports))
    assert time.monotonic() - started < 15  # b was not waited for beyond its deadline
    assert [r.name for r in reports] == ["a", "b", "c"]
    assert reports[0].level in ("ok", "warn") and len(reports[0].checks) > 10
    [hung] = reports[1].checks
    assert (hung.level, hung.title) == ("fail", "connection") and hung.detail == "b: no answer within 3 s"
    [nopy] = reports[2].checks
    assert (
        nopy.title == "agent"
        and nopy.detail == "c: /opt/py/bin/python3 not found on the node (sh: 1: exec: /opt/py/bin/python3: not found)"
    )
    assert 'set python = "/path/to/python3" for c' in nopy.fix
    assert exit_code(reports) == 1 and exit_code(reports[:1]) == 0


async def test_ssh_nodes_say_how_files_reach_them(sim_node):
    node = replace(sim_node("h"), transport="ssh", host="10.0.0.7", user="ops", port=2222, jump="bastion")
    t = Node("h", sftp_refusal="sshd refused the sftp subsystem request (no Subsystem sftp in sshd_config)")

    async def refusal():
        return t.refusal

    t.sftp_refusal = refusal
    [report] = await collect_doctor([node], pool=pool_of({"h": t}))
    link = report.checks[0]
    assert link.id == "link" and link.detail.startswith("SSH to ops@10.0.0.7:2222 via bastion; sshd serves no SFTP")
