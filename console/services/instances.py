"""vLLM instances on nodes: start, watch to ready (log stages + /health), list, stop, logs.

The node's supervisor (console/agent/supervisor.py) owns the processes; this
service only asks it. So an instance outlives the console and the SSH link,
and a restarted console finds it again with `list`.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import json
import os
import re
import shlex
import time
from dataclasses import replace
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

from console.core.events import FAILURE_WINDOW, WARN, Event, failure_note, gpu_events_near

# The record lives in core (the UI's first frame needs it, not this service); re-exported here.
from console.core.instance_view import InstanceError as InstanceError
from console.core.instance_view import InstanceState as InstanceState
from console.core.instance_view import InstanceView as InstanceView
from console.core.model import GpuStatic, NodeSnapshot, NodeSpec, ServePreset
from console.core.models.packing import DEFAULT_MAX_SUM, PackingError, packing_refusal
from console.core.models.settings import utilization_from_args
from console.core.multinode import ray_exit_line
from console.core.node_json import NodeJsonError, loads, loads_object
from console.core.serve.argv import API_KEY_VAR, ServeCommand, api_key_from, build_docker_argv, build_serve_argv
from console.core.serve.log import ServeLogState, ServeStage
from console.core.serve.rules import (
    check_cpx_tp,
    check_gpus_free,
    check_port,
    check_tp,
    choose_port,
    env_for_vllm,
    version_warnings,
)
from console.core.status_view import health_refusal, health_warnings, physical_of
from console.core.telemetry import is_nvidia_source
from console.core.text import clip, printable
from console.services.agent_bundle import AgentCommand, install_agent
from console.services.events import EventLog
from console.services.timeline import Timeline, note
from console.services.transports import TransportPool
from console.transport.base import TransportError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# Secrets travel from the console's environment to the instance, never through profiles.
PASSTHROUGH_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# What holds its GPUs and port (an unmanaged vLLM too), and what has ended.
ACTIVE = (
    InstanceState.STARTING,
    InstanceState.LOADING,
    InstanceState.READY,
    InstanceState.STOPPING,
    InstanceState.UNMANAGED,
)
ENDED = (InstanceState.EXITED, InstanceState.FAILED, InstanceState.STOPPED)


def serve_spec(
    name: str, command: ServeCommand, preset: ServePreset, *, port: int, gpus: Sequence[int], runtime: str, **more: Any
) -> dict[str, Any]:
    """What the node's supervisor starts an instance from (its spec.json): the command, where
    it serves, the preset it came from, and the `more` keys as given."""
    spec: dict[str, Any] = {
        "name": name,
        "argv": list(command.argv),
        "env": dict(command.env),
        "port": port,
        "gpus": list(gpus),
        "model": preset.model,
        "preset": preset.name,
        "runtime": runtime,
        **more,
    }
    if preset.api_key_env:
        spec["api_key_env"] = preset.api_key_env  # the variable's name: later calls send the key
    return spec


# The line the simulated vLLM logs when its port was taken as it bound (console/sim/vllm/server.py).
PORT_MOVED_RE = re.compile(r"rocm-console: port (\d+) was taken on this node as the server started; listening on (\d+)")


def port_moved_note(node: str, asked: int, port: int) -> str:
    return f"{node}: port {asked} was taken; the instance listens on {port}"


def place_unmanaged(views: Sequence[InstanceView], snapshot: NodeSnapshot | None) -> list[InstanceView]:
    """Give unmanaged servers the GPUs their processes hold; drop those on no GPU of this node.

    Without a process list (CLI fallbacks report none) every one is kept.
    """
    if snapshot is None or snapshot.latest is None or not snapshot.latest.gpus:
        return list(views)
    holders: dict[int, list[int]] = {}
    for gpu in snapshot.latest.gpus:
        for proc in gpu.processes:
            holders.setdefault(proc.pid, []).append(gpu.index)
    out = []
    for v in views:
        if v.state != InstanceState.UNMANAGED:
            out.append(v)
            continue
        gpus = sorted({g for pid in v.pids for g in holders.get(pid, ())})
        if gpus:
            out.append(replace(v, gpus=tuple(gpus)))
    return out


def view_from_record(node: str, rec: dict) -> InstanceView:
    """An instance as the agent lists it; its text made printable (it may reach any screen).

    Raises KeyError, TypeError or ValueError for a record without the fields an instance has."""
    rec = _printable_tree(rec)
    if rec.get("kind") == "foreign":
        return InstanceView(
            node=node,
            name=f"pid-{rec['pid']}",
            state=InstanceState.UNMANAGED,
            pid=rec["pid"],
            argv=tuple(rec.get("argv") or ()),
            model=_model_of(rec.get("argv") or []),
            pids=tuple(rec.get("pids") or (rec["pid"],)),
        )
    spec = rec.get("spec") or {}
    if rec["state"] in ("running", "starting"):
        state = InstanceState.STARTING  # until its log or /health says more
    elif rec.get("exit_code") == 0 or rec.get("exit_signal") in (2, 15):
        state = InstanceState.EXITED  # a clean exit, or ended by SIGINT/SIGTERM
    else:
        state = InstanceState.FAILED
    return InstanceView(
        node=node,
        name=rec["name"],
        state=state,
        pid=rec.get("pid"),
        port=spec.get("port"),
        gpus=tuple(spec.get("gpus") or ()),
        model=spec.get("model"),
        preset=spec.get("preset"),
        started=rec.get("started"),
        exit_code=rec.get("exit_code"),
        exit_signal=rec.get("exit_signal"),
        argv=tuple(spec.get("argv") or ()),
        group=spec.get("group"),
        nodes=tuple((spec.get("multinode") or {}).get("nodes") or ()),
        api_key_env=spec.get("api_key_env") if isinstance(spec.get("api_key_env"), str) else None,
    )


def _printable_tree(value):
    """Every string in a decoded record made printable (numbers and structure as they are)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(str(k)): _printable_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable_tree(v) for v in value]
    return value


def fold_ray_members(views: Sequence[InstanceView]) -> list[InstanceView]:
    """A multi-node instance is one instance: its Ray process ("NAME.ray") shows as
    NAME on a worker node, and is hidden beside NAME on the head (services/multinode.py)."""
    names = {v.name for v in views}
    out = []
    for v in views:
        if v.nodes and v.name.endswith(".ray"):
            if v.name[:-4] in names:
                continue
            v = replace(v, name=v.name[:-4], stage=v.stage or f"Ray worker of {v.nodes[0]}")
        out.append(v)
    return out


def _model_of(argv: Sequence[str]) -> str | None:
    for i, a in enumerate(argv[:-1]):
        if a == "serve":
            return argv[i + 1]
    return None


def mig_devices(node: str, chosen: Sequence[GpuStatic]) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES names for an instance on a MIG instance (its "MIG-…" UUID), else None.

    CUDA shows a process one MIG instance at most: one GPU, and the node must have said
    its UUID (the NVIDIA agent does)."""
    migs = [g for g in chosen if g.compute_partition == "MIG"]
    if not migs:
        return None
    if len(chosen) > 1:
        raise InstanceError(f"{node}: GPU {migs[0].index} is a MIG instance: a vLLM server can use only one (TP 1)")
    if not migs[0].uuid:
        raise InstanceError(f"{node}: GPU {migs[0].index} is a MIG instance whose UUID the node did not report")
    return [migs[0].uuid]


class InstanceService:
    def __init__(
        self, pool: TransportPool | None = None, *, http_timeout: float = 3.0, timeline: Timeline | None = None
    ) -> None:
        self.pool = pool or TransportPool()
        self.timeline = timeline  # a refused start and a stop are written there (services/timeline.py)
        self._commands: dict[str, AgentCommand] = {}
        self.specs: dict[str, NodeSpec] = {}  # nodes seen, by name (a multi-node stop reaches them all)
        self._http_timeout = http_timeout
        self._tls: Any = None  # httpx's default SSL context, made once (see health)

    async def agent(self, node: NodeSpec) -> AgentCommand:
        self.specs[node.name] = node
        cmd = self._commands.get(node.name)
        if cmd is None:
            cmd = self._commands[node.name] = await install_agent(self.pool.get(node), node)
        return cmd

    async def call(
        self, node: NodeSpec, op: str, *args: str, input: str | None = None, timeout: float = 60
    ) -> list[dict]:
        cmd = await self.agent(node)
        argv = cmd.argv("instance", "--state-dir", cmd.state_dir, op, *args)
        result = await self.pool.get(node).run(argv, env=cmd.env_dict(), input=input, timeout=timeout)
        records = []
        for line in result.stdout.splitlines():
            line = line.strip()
            if not line:
                continue
            if not line.startswith("{"):
                continue  # not the agent's (a warning some library printed)
            try:
                rec = loads_object(line)
            except NodeJsonError as exc:
                raise InstanceError(f"{node.name}: agent instance {op}: {exc}") from None
            if rec.get("kind") == "error":
                raise InstanceError(f"{node.name}: {printable(rec.get('message'))}")
            records.append(_printable_tree(rec))  # its text may reach any screen
        if not result.ok and not records:
            raise InstanceError(
                f"{node.name}: agent instance {op} failed: {(result.stderr.strip().splitlines() or ['?'])[-1]}"
            )
        return records

    # ------------------------------------------------------------ queries

    async def list(self, node: NodeSpec) -> list[InstanceView]:
        records = await self.call(node, "list", timeout=30)
        try:
            views = [view_from_record(node.name, r) for r in records]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InstanceError(
                f"{node.name}: agent instance list: a record without what an instance has ({clip(repr(exc), 80)})"
            ) from None
        return fold_ray_members(views)

    async def list_checked(self, node: NodeSpec) -> builtins.list[InstanceView]:  # list: the method above
        """list(), with running instances marked ready or loading by one /health call each."""
        views = await self.list(node)
        forwards: dict = {}
        try:
            out = []
            for v in views:
                if v.state == InstanceState.STARTING and v.port:
                    try:
                        ok, models, version = await self.health(node, v.port, forwards, api_key_env=v.api_key_env)
                    except TransportError:
                        ok, models, version = False, (), None
                    v = replace(
                        v,
                        state=InstanceState.READY if ok else InstanceState.LOADING,
                        served_models=models,
                        version=version,
                    )
                out.append(v)
            return out
        finally:
            for fwd in forwards.values():
                await fwd.close()

    async def get(self, node: NodeSpec, name: str) -> InstanceView | None:
        return next((v for v in await self.list(node) if v.name == name), None)

    # ------------------------------------------------------------ start

    async def start(
        self,
        node: NodeSpec,
        preset: ServePreset,
        *,
        gpus: Sequence[int],
        snapshot: NodeSnapshot | None = None,
        port: int | None = None,
        name: str | None = None,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
        group: str | None = None,
        force: bool = False,
        max_packing_sum: float | None = None,
    ) -> InstanceView:
        """Start a preset on logical GPUs. With a snapshot that has GPU health, a GPU in fail
        health is refused in one line (``force``: start anyway); warn states become warnings.

        Without a port (``port``, or the preset's) the console picks a free one, and the node moves
        it on should it be taken there meanwhile (the view then has its port and a warning saying
        so); on a simulated node (the demo) any port but a group's planned one moves so. A real node
        keeps a port given: taken there, the start is refused in one line naming node and port."""
        gpus = tuple(gpus)
        if preset.pp > 1 or preset.dp > 1 or preset.nodes:  # pp/dp would be dropped here: services/multinode.py
            raise InstanceError(
                f"preset {preset.name} spans several nodes (PP {preset.pp}, DP {preset.dp}): "
                "start it with `rocm-console serve start --nodes a,b`"
            )
        existing = await self.list(node)
        name = name or self._default_name(preset, gpus, existing)
        if not NAME_RE.match(name):
            raise InstanceError(f"bad instance name {name!r} (letters, digits, . _ -)")
        on_gpus: dict[int, list[tuple[str, float | None]]] = {}  # packing: each GPU's instances, their shares
        for v in existing:
            if v.state in ACTIVE:
                for g in v.gpus:
                    on_gpus.setdefault(g, []).append((v.name, _share_of(v.argv)))
        used_ports = {v.port for v in existing if v.state in ACTIVE and v.port}
        tp = preset.tp
        for key, value in (overrides or {}).items():
            if key.replace("-", "_") in ("tp", "tensor_parallel_size"):
                tp = int(value)
        partitions = []
        devices: list[str] | None = None
        if snapshot is not None:
            by_index = {g.index: g for g in snapshot.static}
            unknown = [g for g in gpus if g not in by_index]
            if unknown and snapshot.static:
                raise InstanceError(f"{node.name}: no GPU {unknown[0]} (the node has {len(snapshot.static)})")
            partitions = [by_index[g].compute_partition for g in gpus if g in by_index]
            devices = mig_devices(node.name, [by_index[g] for g in gpus if g in by_index])
        auto = not port and not preset.port
        if auto and node.transport == "local":
            # Local nodes (the demo's three) share this machine: skip ports bound here.
            from console.services.demo import free_local_port

            port = free_local_port(choose_port(used_ports))
        port = port or preset.port or choose_port(used_ports)
        for refusal in (
            check_tp(tp, gpus),
            check_cpx_tp(tp, partitions),
            _packing(name, gpus, on_gpus, preset, overrides, extra_args, packing_limit(node, max_packing_sum)),
            check_port(port, used_ports),
            None if force or snapshot is None else health_refusal(snapshot, gpus),
        ):
            if refusal:
                details = {"gpus": list(gpus), "preset": preset.name, "reason": refusal}
                text = f"start of {name} on GPUs {','.join(map(str, gpus)) or '-'} refused: {refusal}"
                event = Event(time.time(), "instance.refused", node.name, None, name, WARN, text, details)
                note(self.timeline, event)
                raise InstanceError(f"{node.name}: {refusal}")
        health_notes = tuple(health_warnings(snapshot, gpus)) if snapshot is not None else ()
        if force and snapshot is not None and health_refusal(snapshot, gpus):
            health_notes += (
                str(health_refusal(snapshot, gpus)).replace(" (--force to start anyway)", "") + " (forced)",
            )
        cmd = await self.agent(node)
        env = dict(extra_env or {})
        environ = os.environ if environ is None else environ
        for secret in PASSTHROUGH_SECRETS:
            if secret in environ and secret not in env:
                env[secret] = environ[secret]
        if preset.api_key_env:  # vLLM reads VLLM_API_KEY: the key goes in the environment, never argv
            try:
                env[API_KEY_VAR] = api_key_from(preset.api_key_env, environ, f"preset {preset.name}")
            except ValueError as exc:
                raise InstanceError(f"{node.name}: {exc}") from None
        # tp is the console's own key (it chose the GPUs): never passed on as a flag, equal or not
        overrides = {
            k: v for k, v in (overrides or {}).items() if k.replace("-", "_") not in ("tp", "tensor_parallel_size")
        }
        if tp != preset.tp:
            preset = replace(preset, tp=tp)
        if preset.env_by_vllm:  # the env this node's vLLM release reads (a preset's env_by_vllm)
            known = snapshot.probe.vllm if snapshot is not None and snapshot.probe is not None else None
            preset = replace(preset, env=env_for_vllm(preset.env, preset.env_by_vllm, known), env_by_vllm=())
        # where vLLM listens: the preset's host (vLLM's default, every address, when it names none);
        # a simulated node is this machine: its server is never for the network
        bind = "127.0.0.1" if node.simulate is not None else (preset.host or "0.0.0.0")
        container = f"rocm-console-{name}" if preset.runtime == "docker" else None
        if container is not None:
            vendor = "nvidia" if snapshot is not None and is_nvidia_source(snapshot.source) else "amd"
            build = functools.partial(build_docker_argv, preset, name=container, vendor=vendor)
        else:
            build = functools.partial(build_serve_argv, preset, vllm=shlex.join(cmd.vllm))
        try:
            command = build(
                port=port,
                host=bind,
                gpus=gpus,
                overrides=overrides or {},
                extra_args=extra_args,
                extra_env=env,
                devices=devices,
            )
        except ValueError as exc:
            raise InstanceError(f"{node.name}: preset {preset.name}: {exc}") from None
        probe = snapshot.probe if snapshot is not None else None
        warnings = health_notes + tuple(version_warnings(probe.vllm if probe else None, command.argv, command.env))
        spec = serve_spec(name, command, preset, port=port, gpus=gpus, runtime=preset.runtime, container=container)
        if group:
            spec["group"] = group
        # Checked where the server binds (agent/supervisor.py), moved on if taken there. Not a
        # group's planned port: the group moves it itself, clear of its other replicas' (groups.py).
        if (auto or (node.simulate is not None and not group)) and container is None:
            spec["port_auto"] = True
        # The simulator's env (state dir) must reach the fake vllm too, with the
        # VRAM of the chosen logical GPUs (a CPX partition has 1/8 of the GPU).
        spec["env"].update(cmd.env_dict())
        if node.simulate is not None and snapshot is not None:
            vram = [g.vram_total_mib for g in snapshot.static if g.index in gpus and g.vram_total_mib]
            if vram:
                spec["env"]["ROCM_CONSOLE_SIM_GPU_VRAM_MB"] = str(int(min(vram)))
        [rec] = await self.call(node, "start", input=json.dumps(spec), timeout=60)
        view = view_from_record(node.name, rec)
        if view.port is not None and view.port != port:
            warnings += (port_moved_note(node.name, port, view.port),)
        return replace(view, warnings=warnings)

    @staticmethod
    def _default_name(preset: ServePreset, gpus: Sequence[int], existing: Sequence[InstanceView]) -> str:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", preset.name).strip("-.") or "vllm"
        base = f"{base}-g{'-'.join(str(g) for g in gpus)}" if gpus else base
        taken = {v.name for v in existing}
        name, n = base[:60], 2
        while name in taken:
            name, n = f"{base[:56]}-{n}", n + 1
        return name

    # ------------------------------------------------------------ watch

    async def log_lines(
        self, node: NodeSpec, name: str, *, follow: bool = False, lines: int | None = None, offset: int = 0
    ) -> AsyncIterator[str]:
        cmd = await self.agent(node)
        args = ["logs", name, "--offset", str(offset)]
        if lines is not None:
            args += ["--lines", str(lines)]
        if follow:
            args.append("--follow")
        argv = cmd.argv("instance", "--state-dir", cmd.state_dir, *args)
        async for line in self.pool.get(node).stream_lines(argv, env=cmd.env_dict()):
            yield line

    async def health(
        self, node: NodeSpec, port: int, forwards: dict, *, api_key_env: str | None = None
    ) -> tuple[bool, tuple[str, ...], str | None]:
        """(healthy, served models, version) through an SSH forward of the node's port.

        api_key_env: the instance's key variable; its value is sent as a bearer token
        (vLLM guards /v1/*; /health and /version are open)."""
        fwd = forwards.get(port)
        if fwd is None:
            fwd = forwards[port] = await self.pool.get(node).forward_port(port)
        base = f"http://127.0.0.1:{fwd.local_port}"
        import httpx  # here, not at the top: the fleet screen starts without it (~50 ms)

        key = os.environ.get(api_key_env) if api_key_env else None
        auth = {"Authorization": f"Bearer {key}"} if key else None
        if self._tls is None:
            # A client makes its SSL context anew (the CA bundle: ~40 ms here) unless given
            # one, and a start being waited for is asked for /health every second.
            self._tls = httpx.create_ssl_context()
        async with httpx.AsyncClient(timeout=self._http_timeout, headers=auth, verify=self._tls) as client:
            try:
                r = await client.get(base + "/health")
            except httpx.HTTPError:
                return False, (), None
            if r.status_code != 200:
                return False, (), None
            models: tuple[str, ...] = ()
            version = None
            try:  # the server's JSON, decoded within limits; its text made printable
                listed = loads((await client.get(base + "/v1/models")).content).get("data", [])
                models = tuple(printable(str(m["id"])) for m in listed)
                said = loads((await client.get(base + "/version")).content).get("version")
                version = None if said is None else printable(str(said))
            except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
                pass
            return True, models, version

    async def wait_ready(
        self,
        node: NodeSpec,
        name: str,
        *,
        timeout: float = 900.0,
        on_update: Callable[[InstanceView], None] | None = None,
        health_every: float = 1.0,
    ) -> InstanceView:
        """Follow the log (stages) and /health until ready, failed, or the timeout."""
        view = await self.get(node, name)
        if view is None:
            raise InstanceError(f"{node.name}: no instance named {name}")
        log = ServeLogState()
        forwards: dict = {}
        done = asyncio.Event()
        state = {
            "view": replace(view, state=InstanceState.LOADING if view.state == InstanceState.STARTING else view.state)
        }

        def update(v: InstanceView) -> None:
            state["view"] = v
            if on_update:
                on_update(v)

        async def follow_log() -> None:
            nonlocal log
            async for line in self.log_lines(node, name, follow=True):
                log = log.feed(line)
                v = state["view"]
                moved = PORT_MOVED_RE.search(line) if "rocm-console: port" in line else None
                if moved and v.port == int(moved.group(1)):  # health checks go to where it listens
                    asked, port = int(moved.group(1)), int(moved.group(2))
                    v = replace(v, port=port, warnings=(*v.warnings, port_moved_note(node.name, asked, port)))
                    update(v)
                if log.stage is not None and (v.stage != log.stage.value or v.stage_detail != log.stage_detail):
                    update(replace(v, stage=log.stage.value, stage_detail=log.stage_detail))
            done.set()  # the process ended

        async def poll_health() -> None:
            while not done.is_set():
                v = state["view"]
                if v.port:
                    try:
                        ok, models, version = await self.health(node, v.port, forwards, api_key_env=v.api_key_env)
                    except TransportError:
                        ok, models, version = False, (), None
                    if ok:
                        ok, where = await self._answered_by_ours(node, name, v.port)
                        now = state["view"]
                        if where is not None and now.port == v.port:  # ours moved on before its log said so
                            note = port_moved_note(node.name, v.port, where)
                            update(replace(now, port=where, warnings=(*now.warnings, note)))
                    if ok:
                        update(
                            replace(
                                v,
                                state=InstanceState.READY,
                                served_models=models,
                                version=version,
                                stage=ServeStage.READY.value,
                            )
                        )
                        done.set()
                        return
                try:
                    await asyncio.wait_for(done.wait(), health_every)
                except asyncio.TimeoutError:
                    pass

        tasks = [asyncio.create_task(follow_log()), asyncio.create_task(poll_health())]
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except asyncio.TimeoutError:
            raise InstanceError(
                f"{node.name}: {name} not ready after {timeout:g} s (stage: {state['view'].stage or 'unknown'})"
            ) from None
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for fwd in forwards.values():
                await fwd.close()
        v = state["view"]
        if v.state == InstanceState.READY:
            return v
        final = await self.get(node, name) or v
        reason = f"{log.fatal.reason}: {log.fatal.message}" if log.fatal else None
        if reason is None:
            reason = f"exited with code {final.exit_code}" if final.exit_code is not None else "exited"
        failed = replace(final, state=InstanceState.FAILED, stage=log.stage.value if log.stage else None, reason=reason)
        update(failed)
        return failed

    async def listening_ports(self, node: NodeSpec, name: str) -> tuple[int, ...] | None:
        """The ports the instance's own processes listen on; None when the node cannot tell."""
        try:
            [rec] = await self.call(node, "ports", name, timeout=30)
        except (InstanceError, TransportError, ValueError):
            return None
        ports = rec.get("ports")
        if not isinstance(ports, list) or not all(isinstance(p, int) for p in ports):
            return None
        return tuple(ports)

    async def _answered_by_ours(self, node: NodeSpec, name: str, port: int) -> tuple[bool, int | None]:
        """Whether the server that answered /health on `port` is this instance's, and where ours
        listens when it is elsewhere. Another server may answer there (another demo's, or a
        program's that held the port) while ours is still starting, or moved on to the next free
        port before its log said so."""
        ports = await self.listening_ports(node, name)
        if ports is None or port in ports:
            return True, None
        return False, (ports[0] if len(ports) == 1 else None)

    # ------------------------------------------------------------ stop / forget

    async def stop(
        self, node: NodeSpec, name: str, *, int_timeout: float = 30.0, term_timeout: float = 10.0
    ) -> InstanceView:
        [rec] = await self.call(
            node,
            "stop",
            name,
            "--int-timeout",
            f"{int_timeout:g}",
            "--term-timeout",
            f"{term_timeout:g}",
            timeout=int_timeout + term_timeout + 60,
        )
        view = view_from_record(node.name, rec)
        if rec.get("stopped_by"):
            view = replace(view, state=InstanceState.STOPPED, reason=f"stopped with {rec['stopped_by']}")
            # the instance list shows it exited, never stopped: the stop itself is the event
            text = f"{name} stopped by the console ({rec['stopped_by']}) on GPUs {','.join(map(str, view.gpus)) or '-'}"
            details = {"gpus": list(view.gpus), "pid": view.pid, "model": view.model, "signal": rec["stopped_by"]}
            event = Event(time.time(), "instance.stopped", node.name, instance=name, message=text, details=details)
            note(self.timeline, event)
        return view

    async def remove(self, node: NodeSpec, name: str) -> None:
        """Forget an ended instance: its folder (spec, log, exit status) is deleted on the node."""
        await self.call(node, "remove", name, timeout=30)


class InstancePoller:
    """An instance list cheap enough to ask for every few seconds (a console's view of a node).

    - running instances: /health only until it answers once, then ready is remembered for
      that pid; while loading, the stage comes from the log's last lines (skipped for the
      names in `watched`, whose log someone already follows);
    - failed instances: the fatal line, read once from the log and remembered;
    - unmanaged servers: placed on the GPUs their processes hold (needs the node's snapshot).
    """

    def __init__(self, service: InstanceService, *, log_tail: int = 400, events: EventLog | None = None) -> None:
        self.service = service
        self.log_tail = log_tail
        self.events = events  # the timeline: a failure's reason names its GPUs' events (None: not read)
        self._ready: dict[tuple, tuple[tuple[str, ...], str | None]] = {}
        self._ended: dict[tuple, tuple[str | None, str | None, str | None]] = {}

    @staticmethod
    def _key(view: InstanceView) -> tuple:
        return (view.node, view.name, view.pid)

    def mark_ready(self, view: InstanceView) -> None:
        """Someone else saw it ready (e.g. wait_ready): no more /health calls for it."""
        self._ready[self._key(view)] = (view.served_models, view.version)

    async def poll(
        self, node: NodeSpec, snapshot: NodeSnapshot | None = None, *, watched: Sequence[str] = ()
    ) -> list[InstanceView]:
        views = await self.service.list(node)
        forwards: dict = {}
        out: list[InstanceView] = []
        try:
            for v in views:
                if v.state == InstanceState.STARTING:
                    v = await self._running(node, v, forwards, watched)
                elif v.state == InstanceState.FAILED:
                    v = await self._failed(node, v, snapshot)
                out.append(v)
        finally:
            for fwd in forwards.values():
                await fwd.close()
        seen = {self._key(v) for v in views}
        for cache in (self._ready, self._ended):
            for key in [k for k in cache if k[0] == node.name and k not in seen]:
                del cache[key]
        if any(v.state == InstanceState.UNMANAGED for v in out):
            out = place_unmanaged(out, snapshot)
        return out

    async def _running(self, node: NodeSpec, v: InstanceView, forwards: dict, watched: Sequence[str]) -> InstanceView:
        known = self._ready.get(self._key(v))
        if known is not None:
            return replace(
                v, state=InstanceState.READY, served_models=known[0], version=known[1], stage=ServeStage.READY.value
            )
        ok, version = False, None
        models: tuple[str, ...] = ()
        if v.port:
            try:
                ok, models, version = await self.service.health(node, v.port, forwards, api_key_env=v.api_key_env)
            except TransportError:
                ok = False
        if ok:
            self._ready[self._key(v)] = (models, version)
            return replace(
                v, state=InstanceState.READY, served_models=models, version=version, stage=ServeStage.READY.value
            )
        v = replace(v, state=InstanceState.LOADING)
        if v.name in watched or (v.nodes and v.nodes[0] != node.name):  # a Ray worker: its stage is the head's
            return v
        log = await self._tail(node, v.name)
        if log.stage is not None:
            v = replace(v, stage=log.stage.value, stage_detail=log.stage_detail or None)
        if log.fatal is not None:
            v = replace(v, reason=f"{log.fatal.reason}: {log.fatal.message}")
        return v

    async def _failed(self, node: NodeSpec, v: InstanceView, snapshot: NodeSnapshot | None = None) -> InstanceView:
        key = self._key(v)
        known = self._ended.get(key)
        if known is None and v.nodes and v.nodes[0] != node.name:  # a multi-node instance's Ray worker ended
            ray_reason = await self._ray_reason(node, v.name + ".ray")
            known = self._ended[key] = (None, None, f"node {node.name}: Ray exited: {ray_reason}")
        if known is None:
            log = await self._tail(node, v.name)
            reason = f"{log.fatal.reason}: {log.fatal.message}" if log.fatal else None
            if reason is None:
                reason = f"exited with code {v.exit_code}" if v.exit_code is not None else "exited"
                if v.exit_code is None and v.exit_signal:
                    reason = f"killed by signal {v.exit_signal}"
            note = await self._gpu_note(node, v, snapshot)
            if note:
                reason = f"{reason} — {note}"
            known = self._ended[key] = (log.stage.value if log.stage else None, log.stage_detail or None, reason)
        return replace(v, stage=known[0], stage_detail=known[1], reason=known[2])

    async def _gpu_note(self, node: NodeSpec, v: InstanceView, snapshot: NodeSnapshot | None) -> str | None:
        """The GPU events (ECC, reset, XID, health) of the instance's GPUs around its failure."""
        if self.events is None or not v.gpus:
            return None
        physical = {physical_of(snapshot, g) if snapshot is not None else g for g in v.gpus}
        now = time.time()
        try:
            # read once per failure (the reason is remembered), off the loop: the log may be megabytes
            recent = await asyncio.to_thread(self.events.read, since=now - FAILURE_WINDOW, node=node.name, kind="gpu")
        except OSError:
            return None
        return failure_note(gpu_events_near(recent, node.name, physical, now))

    async def _ray_reason(self, node: NodeSpec, member: str) -> str:
        lines: list[str] = []
        try:
            async for line in self.service.log_lines(node, member, lines=self.log_tail):
                lines.append(line)
        except (TransportError, InstanceError):
            pass
        return ray_exit_line(lines) or "no log"

    async def _tail(self, node: NodeSpec, name: str) -> ServeLogState:
        log = ServeLogState()
        try:
            async for line in self.service.log_lines(node, name, lines=self.log_tail):
                log = log.feed(line)
        except (TransportError, InstanceError):
            pass
        return log


def _share_of(argv: Sequence[str]) -> float | None:
    """An instance's --gpu-memory-utilization (None: not set, or not readable: it holds its GPU alone)."""
    try:
        return utilization_from_args(argv)
    except ValueError:
        return None


def _packing(name, gpus, on_gpus, preset: ServePreset, overrides, extra_args, max_sum: float) -> str | None:
    """Several instances on one GPU while their --gpu-memory-utilization sum stays ≤ max_sum
    (core/models/packing.py); the new one's share from the preset, --set and --arg."""
    argv = [*preset.args, *extra_args]
    for key, value in (overrides or {}).items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    try:
        share = utilization_from_args(argv)
        there = {g: on_gpus[g] for g in gpus if on_gpus.get(g)}
        if share is None or any(u is None for placed in there.values() for _, u in placed):
            # a GPU held alone (no share set, vLLM's 0.9): the one line it always was
            return check_gpus_free(gpus, {g: placed[0][0] for g, placed in there.items()})
        return packing_refusal(on_gpus, gpus, name, share, max_sum=max_sum)
    except (ValueError, PackingError) as exc:
        return str(exc)


def since(started: float | None, now: float | None = None) -> str:
    if not started:
        return ""
    s = int((now or time.time()) - started)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def packing_limit(node: NodeSpec, given: float | None = None) -> float:
    """The most the --gpu-memory-utilization shares on one of the node's GPUs may add up to:
    the caller's, else the profile's [models] max_packing_sum, else 0.95."""
    if given is not None:
        return given
    return node.max_packing_sum if node.max_packing_sum is not None else DEFAULT_MAX_SUM
