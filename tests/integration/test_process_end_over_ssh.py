""" "End process" through the console over a real OpenSSH sshd, against a simulated CPX node:
the sticky demo load removed, a real GPU process ended with SIGTERM, an arbitrary pid and
another user's process refused (the latter allowed by the node's allow_kill_foreign)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.model import NodeSpec, SimulateSpec
from console.services.processes import ProcessEndFailed, ProcessService
from console.services.transports import TransportPool


def node_spec(sshd, tmp_path: Path) -> NodeSpec:
    return NodeSpec(
        name="ssh-node",
        host=sshd.host,
        port=sshd.port,
        user=sshd.user,
        identity_file=str(sshd.identity_file),
        known_hosts=str(sshd.known_hosts),
        python=sys.executable,
        state_dir=str(tmp_path / "node-state"),
        simulate=SimulateSpec("MI300X", 8, "CPX", "NPS1", 4, busy=(0, 9)),
    )


def processes_file(tmp_path: Path) -> Path:
    return tmp_path / "node-state" / "sim" / "ssh-node" / "processes.json"


@pytest.mark.timeout(180)
def test_end_process_over_real_sshd(sshd, tmp_path):
    started: list[subprocess.Popen] = []

    def spawn(argv: list[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(argv, **kwargs)
        started.append(proc)
        return proc

    def register(proc: subprocess.Popen, gpu: int, name: str) -> None:
        path = processes_file(tmp_path)
        entries = json.loads(path.read_text())
        entries.append({"pid": proc.pid, "name": name, "gpu": gpu, "vram_bytes": 2**30})
        path.write_text(json.dumps(entries))

    async def scenario() -> None:
        node = node_spec(sshd, tmp_path)
        pool = TransportPool()
        service = ProcessService(pool)
        try:
            # a live process of this user that is on no GPU: refused, untouched
            bystander = spawn([sys.executable, "-c", "import time; time.sleep(60)"])
            with pytest.raises(ProcessEndFailed) as refused:
                await service.end(node, bystander.pid)
            assert refused.value.reason == "not_gpu"
            assert f"ssh-node: pid {bystander.pid} is not a GPU process on this node" in str(refused.value)
            time.sleep(0.2)
            assert bystander.poll() is None

            # the demo's sticky load on GPU 0: removed, no signal sent
            sticky = {e["gpu"]: e["pid"] for e in json.loads(processes_file(tmp_path).read_text())}
            done = await service.end(node, sticky[0], gpu=0)
            assert (done.how, done.signal, done.ended, done.gpus) == ("simulated", None, True, (0,))
            assert done.line() == f"ended pid {sticky[0]} (python3 (sim workload)) on GPU 0: a simulated load, removed"
            assert [e["pid"] for e in json.loads(processes_file(tmp_path).read_text())] == [sticky[9]]

            # a real GPU process: SIGTERM ends it
            worker = spawn([sys.executable, "-c", "import time; time.sleep(60)"])
            register(worker, 5, "vllm-worker")
            done = await service.end(node, worker.pid, gpu=5, grace=5)
            assert (done.how, done.signal, done.ended, done.name) == ("signal", "SIGTERM", True, "vllm-worker")
            assert worker.wait(timeout=5) == -15

            if os.getuid() == 0:
                # another user's GPU process: refused unless the node allows it
                foreign = spawn([shutil.which("sleep") or "/bin/sleep", "60"], user=65534)
                register(foreign, 7, "their-job")
                with pytest.raises(ProcessEndFailed) as refused:
                    await service.end(node, foreign.pid)
                assert refused.value.reason == "foreign"
                assert "belongs to user nobody" in str(refused.value)
                assert "allow_kill_foreign = true" in str(refused.value)
                assert foreign.poll() is None
                allowed = dataclasses.replace(node, allow_kill_foreign=True)
                done = await service.end(allowed, foreign.pid)
                assert done.ended and done.user == "nobody" and done.signal == "SIGTERM"
                assert foreign.wait(timeout=5) == -15
        finally:
            await pool.close()

    try:
        asyncio.run(scenario())
    finally:
        for proc in started:  # only what this test started, by its pid
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
