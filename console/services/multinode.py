"""Multi-node instances on Ray: one `vllm serve` spanning several nodes (seed 003).

Start: learn each node's facts (GPUs, partition mode, vLLM and Ray versions),
check the shape (console/core/multinode.py) and that the workers reach the
head's address, then `ray start --head … --block` on the first node and
`ray start --address … --block` on the others, each run by the node's
supervisor like an instance (named "<instance>.ray"), wait until `ray status`
counts every node ("Ray cluster up (N nodes)"), and start `vllm serve
--distributed-executor-backend ray` on the head as the instance itself.

Stop: vLLM first, then Ray on every node. `ray stop` is not used: it ends every
Ray process of the user on the machine (other clusters too); the supervisor
signals the process group it started and then sweeps what still names this
instance's Ray temp dir, so nothing is left and nothing else is touched.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from console.core.model import NodeSnapshot, NodeSpec, ServePreset
from console.core.multinode import (
    DEFAULT_RAY_PORT,
    NodeFacts,
    build_head_serve,
    build_ray_head_argv,
    build_ray_worker_argv,
    check_shape,
    parse_ray_status,
    parse_ray_version,
    python_of,
    ray_command,
    ray_exit_line,
)
from console.core.serve.argv import API_KEY_VAR, api_key_from
from console.core.serve.rules import choose_port
from console.core.telemetry import is_nvidia_source
from console.services.instances import (
    NAME_RE,
    PASSTHROUGH_SECRETS,
    InstanceError,
    InstanceService,
    InstanceState,
    InstanceView,
    serve_spec,
    view_from_record,
)
from console.transport.base import TransportError

RAY_SUFFIX = ".ray"  # the supervisor's name for a node's `ray start --block`
STAGE_RAY_UP = "ray-cluster-up"
TEMP_ROOT = "/tmp/rcray"  # short: Ray's sockets live below it (AF_UNIX paths stop at 107 bytes)

# Listens on the head's address and Ray port for a few seconds (also proves the
# port is free there); prints LISTENING, then how many workers connected.
_LISTEN = """
import socket, sys, time
addr, port, want, wait = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.bind((addr, port))
except OSError as exc:
    print("ERR %s" % (exc.strerror or exc), flush=True)
    sys.exit(0)
s.listen(16)
s.settimeout(0.2)
print("LISTENING", flush=True)
n, end = 0, time.time() + wait
while n < want and time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    # the worker closes first, so the TIME_WAIT stays on its side and Ray can bind this port next
    c.settimeout(5)
    try:
        c.recv(1)
    except OSError:
        pass
    c.close()
    n += 1
print("DONE %d" % n, flush=True)
"""
_VERSIONS = """
import importlib.metadata as m, os, sys
for name in ("vllm", "ray"):
    try:
        version = m.version(name)
    except m.PackageNotFoundError:
        version = ""
    if name == "ray" and not os.access(sys.argv[1], os.X_OK):
        version = ""  # the package without its CLI cannot start a node
    print(name, version)
"""
_CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("OK")
except OSError as exc:
    print("ERR %s" % (exc.strerror or exc))
"""


def member_name(name: str) -> str:
    return name + RAY_SUFFIX


class MultiNodeService:
    """Start, wait for, stop and read multi-node instances through each node's supervisor."""

    def __init__(self, instances: InstanceService) -> None:
        self.instances = instances
        self.pool = instances.pool

    async def _get(self, node: NodeSpec, name: str) -> InstanceView | None:
        """One record as the supervisor has it (list() folds the Ray members away)."""
        for rec in await self.instances.call(node, "list", timeout=30):
            if rec.get("name") == name:
                return view_from_record(node.name, rec)
        return None

    # ------------------------------------------------------------ facts

    async def _ray(self, node: NodeSpec) -> list[str]:
        cmd = await self.instances.agent(node)
        if node.simulate is not None and node.vllm == "vllm":
            return [*cmd.vllm, "ray"]  # the simulator's `ray` (console/sim/vllm/ray_sim.py)
        try:
            return ray_command(node.vllm)
        except ValueError as exc:
            raise InstanceError(f"{node.name}: {exc}") from None

    async def node_facts(self, node: NodeSpec, snapshot: NodeSnapshot | None, gpus: Sequence[int] | None) -> NodeFacts:
        cmd = await self.instances.agent(node)
        ray = await self._ray(node)
        static = snapshot.static if snapshot is not None else ()
        chosen = tuple(gpus) if gpus is not None else tuple(g.index for g in static)
        first = next((g for g in static if g.index in chosen), static[0] if static else None)
        views = await self.instances.list(node)
        held = {g for v in views if v.state in _ACTIVE for g in v.gpus}
        vllm_version, ray_version = await self._versions(node, cmd.env_dict(), list(cmd.vllm), ray)
        if vllm_version is None and snapshot is not None and snapshot.probe is not None:
            vllm_version = snapshot.probe.vllm
        return NodeFacts(
            name=node.name,
            gpus=chosen,
            gpu_count=len(static),
            gpu_model=first.model if first else None,
            compute_partition=first.compute_partition if first else None,
            memory_partition=first.memory_partition if first else None,
            vllm_version=vllm_version,
            ray_version=ray_version,
            python=python_of(node.vllm) if node.simulate is None else node.python,
            busy=tuple(g for g in chosen if g in held),
        )

    async def _versions(
        self, node: NodeSpec, env: Mapping[str, str], vllm: list[str], ray: list[str]
    ) -> tuple[str | None, str | None]:
        """(vLLM version, Ray version) as the node's own vLLM environment has them; None = missing.

        Next to a vLLM given by path, its interpreter reads both from package
        metadata (importing vLLM would take many seconds); otherwise the two CLIs answer.
        """
        run = self.pool.get(node).run
        python = python_of(node.vllm)
        if node.simulate is None and python != "python3":
            res = await run([python, "-c", _VERSIONS, ray[-1]], env=env, timeout=60)
            found = dict(line.split(" ", 1) for line in res.stdout.splitlines() if " " in line)
            return (found.get("vllm") or None, found.get("ray") or None)
        out: list[str | None] = []
        for argv in ([*vllm, "--version"], [*ray, "--version"]):
            try:
                res = await run(argv, env=env, timeout=120)
            except TransportError as exc:
                if exc.kind != "timeout":
                    raise
                out.append(None)
                continue
            text = (res.stdout + res.stderr).strip()
            if argv[0] == vllm[0] and argv[:-1] == vllm:
                out.append(text.splitlines()[-1].strip() if res.ok and text else None)
            else:
                out.append(parse_ray_version(text) if res.ok else None)
        return out[0], out[1]

    async def reach(self, head: NodeSpec, workers: Sequence[NodeSpec], address: str, port: int) -> dict[str, str]:
        """Each worker connects to the head's address:port, where the head listens for a moment.

        Returns {worker: why it failed}; the head's own failure (address not its own,
        port taken) comes under the head's name.
        """
        out: dict[str, str] = {}
        argv = [head.python, "-c", _LISTEN, address, str(port), str(len(workers)), "20"]
        lines = self.pool.get(head).stream_lines(argv)
        try:
            first = await asyncio.wait_for(lines.__anext__(), 30)
        except (StopAsyncIteration, asyncio.TimeoutError):
            first = "ERR no answer"
        try:
            if not first.startswith("LISTENING"):
                out[head.name] = f"cannot listen on {address}:{port} ({first.removeprefix('ERR ')})"
                return out

            async def one(worker: NodeSpec) -> None:
                argv = [worker.python, "-c", _CONNECT, address, str(port)]
                res = await self.pool.get(worker).run(argv, timeout=30)
                text = res.stdout.strip() or res.stderr.strip() or f"exit {res.exit_status}"
                if text != "OK":
                    out[worker.name] = text.removeprefix("ERR ")

            await asyncio.gather(*(one(w) for w in workers))
        finally:
            await lines.aclose()
        return out

    # ------------------------------------------------------------ start

    async def start(
        self,
        nodes: Sequence[NodeSpec],
        preset: ServePreset,
        *,
        snapshots: Mapping[str, NodeSnapshot | None],
        gpus: Mapping[str, Sequence[int]] | None = None,
        name: str | None = None,
        port: int | None = None,
        node_ips: Mapping[str, str] | None = None,
        ray_args: Mapping[str, Sequence[str]] | None = None,
        temp_root: str = TEMP_ROOT,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
        on_stage: Callable[[str, str], None] | None = None,
        cluster_timeout: float = 120.0,
    ) -> InstanceView:
        """Check, start Ray on every node, then vLLM on the head. Refusals raise InstanceError."""
        nodes = list(nodes)
        if not nodes:
            raise InstanceError(f"preset {preset.name}: no nodes given")
        head, workers = nodes[0], nodes[1:]
        name = name or re.sub(r"[^A-Za-z0-9_.-]+", "-", preset.name).strip("-.")[:56] or "vllm"
        if not NAME_RE.match(name) or not NAME_RE.match(member_name(name)):
            raise InstanceError(f"bad instance name {name!r} (letters, digits, . _ -)")
        node_ips = dict(node_ips or {})
        ray_port = preset.ray_port or DEFAULT_RAY_PORT
        address = preset.head_address or node_ips.get(head.name) or head.host
        stage = on_stage or (lambda s, d: None)

        stage("checking", f"{len(nodes)} nodes: GPUs, partition mode, vLLM and Ray versions")
        facts = list(
            await asyncio.gather(*(self.node_facts(n, snapshots.get(n.name), (gpus or {}).get(n.name)) for n in nodes))
        )
        kw: dict[str, Any] = dict(
            head_address=address,
            head_is_loopback=_loopback(address),
            worker_hosts={n.name: n.host for n in workers},
        )
        refusal = check_shape(preset, facts, **kw)
        if refusal:
            raise InstanceError(refusal)
        for n in nodes:
            existing = await self._get(n, name) or await self._get(n, member_name(name))
            if existing is not None and existing.state in _ACTIVE:
                raise InstanceError(f"node {n.name}: an instance named {name} is already running")
        unreachable = await self.reach(head, workers, address, ray_port)
        if head.name in unreachable:
            raise InstanceError(f"node {head.name}: {unreachable[head.name]}")
        facts = [facts[0]] + [replace(f, head_unreachable=unreachable.get(f.name)) for f in facts[1:]]
        refusal = check_shape(preset, facts, **kw)
        if refusal:
            raise InstanceError(refusal)

        by_node = {f.name: f.gpus for f in facts}
        info: dict[str, Any] = {"instance": name, "nodes": [n.name for n in nodes], "head": head.name}
        info["gpus"] = {k: list(v) for k, v in by_node.items()}
        info["address"] = f"{address}:{ray_port}"
        head_snap = snapshots.get(head.name)
        info["nvidia"] = head_snap is not None and is_nvidia_source(head_snap.source)
        started: list[NodeSpec] = []
        try:
            for i, node in enumerate(nodes):
                cmd = await self.instances.agent(node)
                ray = await self._ray(node)
                temp_dir = f"{temp_root}/{_short(name)}-{i}"
                extra = [*preset.ray_args, *(ray_args or {}).get(node.name, ())]
                if i == 0:
                    build = functools.partial(build_ray_head_argv, ray, node_ip=address)
                else:
                    build = functools.partial(build_ray_worker_argv, ray, head=address, node_ip=node_ips.get(node.name))
                try:
                    argv = build(port=ray_port, temp_dir=temp_dir, num_gpus=len(by_node[node.name]), extra=extra)
                except ValueError as exc:
                    raise InstanceError(f"node {node.name}: {exc}") from None
                env = dict(preset.env)  # RCCL/NCCL settings reach the Ray workers on every node
                env["RAY_USAGE_STATS_ENABLED"] = "0"
                if by_node[node.name]:
                    env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, by_node[node.name]))
                env.update(cmd.env_dict())
                spec = {
                    "name": member_name(name),
                    "argv": list(argv),
                    "env": env,
                    "gpus": list(by_node[node.name]),
                    "model": preset.model,
                    "preset": preset.name,
                    "runtime": "host",
                    "multinode": dict(info, role="ray-head" if i == 0 else "ray-worker"),
                    "stop_sweep": temp_dir,
                }
                stage("starting Ray", f"{'head' if i == 0 else 'worker'} on {node.name}: {shlex.join(argv)}")
                await self.instances.call(node, "start", input=json.dumps(spec), timeout=60)
                started.append(node)
                await self.wait_cluster(nodes, name, i + 1, address, ray_port, timeout=cluster_timeout)
            stage(STAGE_RAY_UP, f"Ray cluster up ({len(nodes)} nodes)")
            view = await self._start_serve(
                head, preset, name, info, by_node[head.name], address, ray_port, port, overrides, extra_env,
                extra_args, environ,
            )  # fmt: skip
        except BaseException:
            await self._stop_members(started, name)
            raise
        # the stage until vLLM's own log says more
        up = f"Ray cluster up ({len(nodes)} nodes)"
        return replace(view, nodes=tuple(n.name for n in nodes), stage=STAGE_RAY_UP, stage_detail=up)

    async def _start_serve(
        self,
        head: NodeSpec,
        preset: ServePreset,
        name: str,
        info: dict,
        gpus: Sequence[int],
        address: str,
        ray_port: int,
        port: int | None,
        overrides: Mapping[str, str] | None,
        extra_env: Mapping[str, str] | None,
        extra_args: Sequence[str],
        environ: Mapping[str, str] | None,
    ) -> InstanceView:
        cmd = await self.instances.agent(head)
        nvidia = bool(info.get("nvidia"))
        existing = await self.instances.list(head)
        used = {v.port for v in existing if v.state in _ACTIVE and v.port}
        port = port or preset.port or choose_port(used)
        env = dict(extra_env or {})
        environ = os.environ if environ is None else environ
        for secret in PASSTHROUGH_SECRETS:
            if secret in environ and secret not in env:
                env[secret] = environ[secret]
        if preset.api_key_env:  # as InstanceService.start: the key in the environment, never argv
            try:
                env[API_KEY_VAR] = api_key_from(preset.api_key_env, environ, f"preset {preset.name}")
            except ValueError as exc:
                raise InstanceError(f"{head.name}: {exc}") from None
        env["ROCM_CONSOLE_RAY"] = shlex.join(await self._ray(head))  # read by the simulated vllm only
        try:
            command = build_head_serve(
                preset,
                vllm=shlex.join(cmd.vllm),
                port=port,
                host=preset.host or "0.0.0.0",  # where the preset says (vLLM's default: every address)
                head_address=address,
                ray_port=ray_port,
                gpus=gpus,
                # the seed's ROCm DP settings, not on NVIDIA nodes (nor on a CPU-only head)
                rocm=bool(gpus) and not nvidia,
                overrides=overrides or {},
                extra_args=extra_args,
                extra_env=env,
            )
        except ValueError as exc:
            raise InstanceError(f"{head.name}: preset {preset.name}: {exc}") from None
        spec = serve_spec(
            name, command, preset, port=port, gpus=gpus, runtime="host", multinode=dict(info, role="serve")
        )
        spec["env"].update(cmd.env_dict())
        [rec] = await self.instances.call(head, "start", input=json.dumps(spec), timeout=60)
        return view_from_record(head.name, rec)

    async def restart(
        self,
        nodes: Sequence[NodeSpec],
        name: str,
        preset: ServePreset,
        *,
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> InstanceView:
        """`vllm serve` again on the head of a Ray cluster that is still up (after vLLM ended).

        Ray is not restarted: every node's member must be running and `ray status`
        must count them all, else this refuses with the node at fault.
        """
        nodes = list(nodes)
        head = nodes[0]
        serve = await self._get(head, name)
        if serve is not None and serve.state in _ACTIVE:
            raise InstanceError(f"node {head.name}: {name} is still running; stop it first")
        rec = await self._rec(head, member_name(name))
        if rec is None:
            raise InstanceError(f"node {head.name}: no Ray cluster of {name} (start it with serve start --nodes)")
        info = dict((rec.get("spec") or {}).get("multinode") or {})
        info.pop("role", None)
        if info.get("nodes") != [n.name for n in nodes]:
            raise InstanceError(f"{name}: its Ray cluster spans {','.join(info.get('nodes') or [])}")
        for node in nodes:
            member = await self._get(node, member_name(name))
            if member is None or member.state not in _ACTIVE:
                raise InstanceError(f"node {node.name}: Ray of {name} is not running")
        address, _, ray_port = str(info.get("address")).rpartition(":")
        status = await self.ray_status(head, address, int(ray_port))
        if status is None or status.active < len(nodes):
            seen = status.active if status is not None else 0
            raise InstanceError(f"Ray cluster at {address}:{ray_port}: {seen} of {len(nodes)} nodes are up")
        if serve is not None:
            await self.instances.remove(head, name)
        gpus = (info.get("gpus") or {}).get(head.name) or []
        view = await self._start_serve(
            head, preset, name, info, gpus, address, int(ray_port), port, overrides, extra_env, extra_args, environ
        )
        return replace(view, nodes=tuple(n.name for n in nodes))

    async def _rec(self, node: NodeSpec, name: str) -> dict | None:
        for rec in await self.instances.call(node, "list", timeout=30):
            if rec.get("name") == name:
                return rec
        return None

    async def ray_status(self, head: NodeSpec, address: str, port: int):
        cmd = await self.instances.agent(head)
        ray = await self._ray(head)
        res = await self.pool.get(head).run(
            [*ray, "status", "--address", f"{address}:{port}"], env=cmd.env_dict(), timeout=60
        )
        return parse_ray_status(res.stdout) if res.ok else None

    async def wait_cluster(
        self, nodes: Sequence[NodeSpec], name: str, want: int, address: str, port: int, *, timeout: float = 120.0
    ) -> int:
        """Until `ray status` on the head counts `want` nodes; a member that exits fails it with its last line."""
        deadline = time.monotonic() + timeout
        while True:
            for node in nodes:
                v = await self._get(node, member_name(name))
                if v is not None and v.state in (InstanceState.EXITED, InstanceState.FAILED):
                    raise InstanceError(
                        f"node {node.name}: Ray exited: {await self._last_line(node, member_name(name))}"
                    )
            status = await self.ray_status(nodes[0], address, port)
            if status is not None and status.active >= want:
                return status.active
            if time.monotonic() > deadline:
                seen = status.active if status is not None else 0
                raise InstanceError(f"Ray cluster at {address}:{port}: {seen} of {want} nodes after {timeout:g} s")
            await asyncio.sleep(1.0)

    async def _last_line(self, node: NodeSpec, member: str) -> str:
        """The member's own last meaningful log line (Ray's or vLLM's words)."""
        lines: list[str] = []
        try:
            async for line in self.instances.log_lines(node, member, lines=600):
                if line.strip():
                    lines.append(line.strip())
        except (TransportError, InstanceError):
            pass
        return ray_exit_line(lines) or "no log"

    # ------------------------------------------------------------ status / stop

    async def status(self, nodes: Sequence[NodeSpec], name: str) -> InstanceView | None:
        """The instance as one view: the head's vLLM, failed with Ray's line if a node's Ray ended."""
        head = nodes[0]
        serve = await self._get(head, name)
        if serve is None:
            return None
        for node in nodes:
            member = await self._get(node, member_name(name))
            if member is None or member.state in (InstanceState.EXITED, InstanceState.FAILED):
                if serve.state in (InstanceState.EXITED, InstanceState.STOPPED):
                    break
                line = await self._last_line(node, member_name(name)) if member else "its Ray is gone"
                return replace(serve, state=InstanceState.FAILED, reason=f"node {node.name}: Ray exited: {line}")
        if serve.state == InstanceState.FAILED:
            return replace(serve, reason=await self._last_line(head, name))
        return serve

    async def stop(self, nodes: Sequence[NodeSpec], name: str, *, int_timeout: float = 20.0) -> InstanceView:
        """vLLM on the head first, then Ray on every node (its group, then what names its temp dir)."""
        head = nodes[0]
        view = None
        if await self._get(head, name) is not None:
            view = await self.instances.stop(head, name, int_timeout=int_timeout)
        await self._stop_members(nodes, name, int_timeout=int_timeout)
        if view is None:
            raise InstanceError(f"{head.name}: no instance named {name}")
        return replace(view, nodes=tuple(n.name for n in nodes))

    async def remove(self, nodes: Sequence[NodeSpec], name: str) -> None:
        """Forget an ended multi-node instance: vLLM's folder on the head, Ray's on every node."""
        for node in nodes:
            for record in (name, member_name(name)):
                view = await self._get(node, record)
                if view is None:
                    continue
                if view.state in _ACTIVE:
                    raise InstanceError(f"node {node.name}: {record} is running; stop {name} first")
                await self.instances.remove(node, record)

    async def _stop_members(self, nodes: Sequence[NodeSpec], name: str, *, int_timeout: float = 20.0) -> None:
        async def one(node: NodeSpec) -> None:
            if await self._get(node, member_name(name)) is not None:
                await self.instances.stop(node, member_name(name), int_timeout=int_timeout)

        # workers first, the head last: a worker whose GCS vanished first only logs noise
        for node in reversed(list(nodes)):
            await one(node)


def _short(name: str) -> str:
    """An instance name short enough for a Ray temp dir: long ones keep 13 chars and a hash."""
    if len(name) <= 20:
        return name
    import hashlib

    return f"{name[:13]}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def _loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


_ACTIVE = (
    InstanceState.STARTING,
    InstanceState.LOADING,
    InstanceState.READY,
    InstanceState.STOPPING,
)
