"""Ship the node agent (and, for simulated nodes, the fake amdsmi) to a node.

Files are uploaded once into ``<state_dir>/agent/<content hash>/`` and reused:
nothing is installed by hand on the node, and a new console version never runs
an old agent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from console.core.model import NodeSpec, ProbeInfo
from console.core.telemetry import AgentProtocolError, parse_agent_line
from console.services.demo import STATE_ENV as DEMO_STATE_ENV
from console.transport.base import AGENT_OUTPUT_LIMIT, Transport, TransportError
from console.transport.local import LocalTransport, write_file_atomic

_PKG = Path(__file__).resolve().parents[1]
AGENT_SOURCE = _PKG / "agent" / "node_agent.py"
SUPERVISOR_SOURCE = _PKG / "agent" / "supervisor.py"
PARTITIONS_SOURCE = _PKG / "agent" / "partitions.py"
DOCTOR_SOURCE = _PKG / "agent" / "doctor.py"
# the telemetry sources: what they share, the amdsmi library, the amd-smi / rocm-smi CLIs
SAMPLING_SOURCE = _PKG / "agent" / "sampling.py"
AMDSMI_SAMPLER_SOURCE = _PKG / "agent" / "amdsmi_sampler.py"
SMI_CLI_SOURCE = _PKG / "agent" / "smi_cli.py"
AMD_HEALTH_SOURCE = _PKG / "agent" / "amd_health.py"  # health readings through amdsmi
NVIDIA_HEALTH_SOURCE = _PKG / "agent" / "nvidia_health.py"  # health readings through NVML
NVIDIA_SOURCE = _PKG / "agent" / "nvidia.py"  # NVML / nvidia-smi sampler, imported by the agent on NVIDIA nodes
LIFELINE_SOURCE = _PKG / "agent" / "lifeline.py"
# JSON state files and pid checks: the supervisor's, and the simulators' (each folder gets a copy)
STATEFILES_SOURCE = _PKG / "agent" / "statefiles.py"
LAUNCHER_SOURCE = _PKG / "agent" / "__main__.py"
SIM_AMDSMI_PACKAGE = _PKG / "sim" / "amdsmi"  # imported as the package `amdsmi` from <bundle>/sim
SIM_PYNVML_SOURCE = _PKG / "sim" / "pynvml.py"
SIM_FAULTS_SOURCE = _PKG / "sim" / "faults.py"  # faults.json, read by both simulators
NVIDIA_SIM_GPUS = ("H100", "H200")  # simulated through sim/nvidia/pynvml.py, not the simulated amdsmi
SIM_VLLM_PACKAGE = _PKG / "sim" / "vllm"  # run on the node as a folder: `python3 .../sim/vllm serve`


@dataclass(frozen=True, slots=True)
class AgentCommand:
    """How to run the installed agent on one node."""

    agent_path: str
    amdsmi_paths: tuple[str, ...]
    python: str
    env: tuple[tuple[str, str], ...]
    state_dir: str
    vllm: tuple[str, ...] = ("vllm",)  # how `vllm` is run on the node (the simulator's on sim nodes)
    sysroot: str | None = None  # where the doctor reads /proc, /sys, /dev (the simulated host's files)
    python_flags: tuple[str, ...] = ()  # e.g. -S on a simulated node: it needs nothing from site-packages

    @property
    def bundle_dir(self) -> str:
        return self.agent_path.rsplit("/", 1)[0]

    def argv(self, mode: str, *extra: str) -> list[str]:
        """The agent's command line: `extra` is the op, options (`"--key", value` pairs become
        `--key=value`) and, after a `"--"`, the positionals; a value that starts with `-` is
        never read as an option by the agent's parser (agent_args)."""
        # `python3 <bundle dir>` runs its __main__.py, which imports node_agent: the compiled
        # agent is cached in __pycache__ instead of compiled again at every start (~10 ms each;
        # the console starts one per node and lists instances every few seconds).
        amdsmi = self.amdsmi_paths if mode in ("telemetry", "probe", "partition", "doctor", "models") else ()
        return [self.python, *self.python_flags, self.bundle_dir, mode, *agent_args(mode, extra, amdsmi)]

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


# The agent's grammar as far as argv needs it (tests/services/test_agent_argv.py checks it against
# the agent's own parser, every subcommand): the options that take a value (each sent as one
# `--key=value` item), the flags, and the modes whose first word is an op.
AGENT_VALUE_OPTIONS = frozenset(
    (
        "--amdsmi-path", "--cache-dir", "--compute", "--count", "--exclude", "--gpu", "--gpus", "--grace",
        "--group", "--health-interval", "--include", "--int-timeout", "--interval", "--lines", "--max-seconds",
        "--memory", "--model-dir", "--offset", "--pid", "--revision", "--state-dir", "--sysroot",
        "--term-timeout", "--to", "--vllm",
    )
)  # fmt: skip
AGENT_FLAGS = frozenset(
    ("--allow-foreign", "--cancel", "--dry-run", "--follow", "--reload-driver", "--split-cr", "--sudo")
)
AGENT_OP_MODES = frozenset(("instance", "models", "partition", "process"))


def _is_option(item: str) -> bool:
    return item in AGENT_FLAGS or item.partition("=")[0] in AGENT_VALUE_OPTIONS and "=" in item


def agent_args(mode: str, extra: Sequence[str], amdsmi_paths: Sequence[str] = ()) -> list[str]:
    """`extra` with every value glued to its option and the positionals behind one `--`.

    W2: `models pull -- --help` reached the agent's own parser as its `--help`. A value of
    `--key value` that starts with `-` is read by argparse as an option; `--key=value` and a
    positional after `--` never are. So: each `"--key", value` pair of a value option becomes
    `--key=value`; the op (a mode's first word) stays; every other item (a name, a model, a
    folder, whatever it starts with) is a positional and goes after the `--`, as does all that
    follows a `"--"` in `extra`. The amdsmi paths go with the options."""
    items = list(extra)
    out: list[str] = []
    tail: list[str] = []
    want_op = mode in AGENT_OP_MODES
    i = 0
    while i < len(items):
        item = items[i]
        if item in AGENT_VALUE_OPTIONS and i + 1 < len(items):
            out.append(f"{item}={items[i + 1]}")  # its value may be "--" or "-h" itself
            i += 2
            continue
        if item == "--":
            tail += items[i + 1 :]
            break
        if _is_option(item):
            out.append(item)
        elif want_op:
            out.append(item)
            want_op = False
        else:
            tail.append(item)
        i += 1
    out += [f"--amdsmi-path={path}" for path in amdsmi_paths]
    return out + (["--", *tail] if tail else [])


def _modules(dest: str, folder: Path) -> list[tuple[str, bytes]]:
    """Every module of a package folder, as dest/<name>. read_bytes() follows the git symlinks
    (lifeline.py, statefiles.py): the node gets a real file in each place."""
    return [(f"{dest}/{module.name}", module.read_bytes()) for module in sorted(folder.glob("*.py"))]


@lru_cache(maxsize=4)
def _bundle(simulated: bool) -> tuple[str, tuple[tuple[str, bytes], ...]]:
    files = [
        ("node_agent.py", AGENT_SOURCE.read_bytes()),
        ("sampling.py", SAMPLING_SOURCE.read_bytes()),
        ("amdsmi_sampler.py", AMDSMI_SAMPLER_SOURCE.read_bytes()),
        ("smi_cli.py", SMI_CLI_SOURCE.read_bytes()),
        ("amd_health.py", AMD_HEALTH_SOURCE.read_bytes()),
        ("nvidia_health.py", NVIDIA_HEALTH_SOURCE.read_bytes()),
        ("supervisor.py", SUPERVISOR_SOURCE.read_bytes()),
        ("partitions.py", PARTITIONS_SOURCE.read_bytes()),
        ("doctor.py", DOCTOR_SOURCE.read_bytes()),
        ("processes.py", (_PKG / "agent" / "processes.py").read_bytes()),  # `process end` (issue U)
        ("models.py", (_PKG / "agent" / "models.py").read_bytes()),  # `models list|config` (issue Q)
        ("model_pull.py", (_PKG / "agent" / "model_pull.py").read_bytes()),  # `models pull`'s worker (issue Q)
        ("nvidia.py", NVIDIA_SOURCE.read_bytes()),
        ("nvml_energy.py", (_PKG / "agent" / "nvml_energy.py").read_bytes()),  # nvidia.py's energy cadence
        ("lifeline.py", LIFELINE_SOURCE.read_bytes()),
        ("tether.py", (_PKG / "agent" / "tether.py").read_bytes()),  # ties a command's instances to it (W2)
        ("statefiles.py", STATEFILES_SOURCE.read_bytes()),
        ("__main__.py", LAUNCHER_SOURCE.read_bytes()),
    ]
    if simulated:
        from console.sim.host import FILES as SIM_HOST_FILES

        files.extend(_modules("sim/amdsmi", SIM_AMDSMI_PACKAGE))
        # its own folder: an NVIDIA sim node imports no amdsmi, like a real one
        files.append(("sim/nvidia/pynvml.py", SIM_PYNVML_SOURCE.read_bytes()))
        files.append(("sim/nvidia/statefiles.py", STATEFILES_SOURCE.read_bytes()))
        files.append(("sim/nvidia/faults.py", SIM_FAULTS_SOURCE.read_bytes()))
        files.append(
            ("sim/nvidia/nvml_errors.py", (_PKG / "sim" / "nvml_errors.py").read_bytes())
        )  # pynvml.py's constants
        files.extend((f"sim/host/{name}", data) for name, data in sorted(SIM_HOST_FILES.items()))
        files.extend(_modules("sim/vllm", SIM_VLLM_PACKAGE))
        files.extend(_modules("sim/huggingface_hub", _PKG / "sim" / "huggingface_hub"))  # the demo's model cache
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + data)
    return digest.hexdigest()[:16], tuple(files)


def expand_home(path: str, home: str, node_name: str) -> str:
    """Absolute path on the node: a quoted '~' is never expanded by a remote shell."""
    if path == "~" or path.startswith("~/"):
        if not home.startswith("/"):
            raise TransportError(f"{node_name}: cannot find the home directory for {path!r}", "command")
        path = home + path[1:]
    return path.rstrip("/") or "/"


# One round trip does both jobs: print $HOME and whether every bundle file is
# there. Paths arrive as arguments (never spliced into the script), and a
# leading "~/" is expanded by the script itself because a quoted ~ is not.
_CHECK_SCRIPT = r"""
printf '%s\n' "$HOME"
for f; do
  case $f in "~/"*) f="$HOME/${f#"~/"}" ;; esac
  [ -f "$f" ] || { echo missing; exit 0; }
done
echo present
"""


DEFAULT_STATE_DIR = NodeSpec.__dataclass_fields__["state_dir"].default
DEFAULT_PYTHON = NodeSpec.__dataclass_fields__["python"].default


def node_state_dir(node: NodeSpec) -> str:
    """Where the node keeps agent, instances and simulator state.

    Several local nodes (the demo) share one machine and one home: each gets
    its own folder so their instances and simulated GPUs never mix.
    """
    if node.transport == "local" and node.state_dir == DEFAULT_STATE_DIR:
        return f"{DEFAULT_STATE_DIR}/local/{node.name}"
    return node.state_dir


async def _upload_all(transport: Transport, items: list[tuple[bytes, str]]) -> None:
    """The first file alone (it settles how this node takes files: SFTP or sh), then the
    rest side by side: each upload is a session round trip, ~0.2 s over a command channel.
    The first failure is raised as itself; the uploads still running are cancelled."""
    first, *rest = items
    await transport.upload(first[0], first[1], mode=0o644)
    tasks = [asyncio.ensure_future(transport.upload(data, path, mode=0o644)) for data, path in rest]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def install_agent(transport: Transport, node: NodeSpec) -> AgentCommand:
    digest, files = _bundle(node.simulate is not None)
    state_dir_raw = node_state_dir(node)
    if isinstance(transport, LocalTransport):
        # The node is this machine: look at the files here rather than through a shell
        # (one process less before the agent can start; the demo's start-up is budgeted).
        state_dir = _local_state_dir(node)
        present = all(os.path.isfile(path) for path in _bundle_paths(state_dir, digest, files))
    else:
        raw_base = f"{state_dir_raw.rstrip('/') or '/'}/agent/{digest}"
        check = await transport.run(
            ["sh", "-c", _CHECK_SCRIPT, "sh", *(f"{raw_base}/{name}" for name, _ in files)], timeout=30
        )
        out = check.stdout.splitlines()
        if not check.ok or len(out) < 2:
            raise TransportError(
                f"{node.name}: cannot inspect state_dir {state_dir_raw!r}: {check.stderr.strip()[:120]}", "command"
            )
        state_dir = expand_home(state_dir_raw, out[0].strip(), node.name)
        present = out[-1].strip() == "present"
    paths = _bundle_paths(state_dir, digest, files)
    if not present:
        await _upload_all(transport, [(data, path) for (_, data), path in zip(files, paths)])
    return _agent_command(node, _own_state_dir(node, state_dir), f"{state_dir}/agent/{digest}", paths[0])


def install_local_agent(node: NodeSpec) -> AgentCommand:
    """install_agent for a node that is this machine, without an event loop: plain file checks
    and writes (the console starts the demo's agents before its UI loads: services/early_agents.py)."""
    digest, files = _bundle(node.simulate is not None)
    state_dir = _local_state_dir(node)
    paths = _bundle_paths(state_dir, digest, files)
    for (_, data), path in zip(files, paths):
        if not os.path.isfile(path):
            write_file_atomic(data, path)
    return _agent_command(node, _own_state_dir(node, state_dir), f"{state_dir}/agent/{digest}", paths[0])


def _local_state_dir(node: NodeSpec) -> str:
    """The node's state_dir when the node is this machine (its ~ is this user's home)."""
    return expand_home(node_state_dir(node), os.path.expanduser("~"), node.name)


def _own_state_dir(node: NodeSpec, shared: str) -> str:
    """Where a simulated node of a demo console keeps its state: the demo's own folder
    (services/demo.py use_private_state), so two demos never share instances or simulated
    GPUs. The bundle stays in the shared place: it never changes once written, and its
    compiled files are reused by every start."""
    private = os.environ.get(DEMO_STATE_ENV)
    if private and node.simulate is not None and node.transport == "local" and node.state_dir == DEFAULT_STATE_DIR:
        return f"{private}/{node.name}"
    return shared


def _bundle_paths(state_dir: str, digest: str, files) -> list[str]:
    return [f"{state_dir}/agent/{digest}/{name}" for name, _ in files]


def telemetry_argv(command: AgentCommand, interval: float, health_interval: float | None = None) -> list[str]:
    """The agent's telemetry stream at `interval` seconds (the fleet's and the early start's),
    with a GPU health reading every `health_interval` seconds when given (0: health off)."""
    extra = ["--interval", f"{interval:g}"]
    if health_interval is not None:
        extra += ["--health-interval", f"{health_interval:g}"]
    return command.argv("telemetry", *extra)


def _agent_command(node: NodeSpec, state_dir: str, base: str, agent_path: str) -> AgentCommand:
    env: list[tuple[str, str]] = []
    amdsmi_paths: tuple[str, ...] = ()
    if node.simulate is not None:
        nvidia = node.simulate.gpu in NVIDIA_SIM_GPUS
        amdsmi_paths = (f"{base}/sim/nvidia",) if nvidia else (f"{base}/sim",)
        env = [
            ("ROCM_CONSOLE_SIM_DIR", f"{state_dir}/sim/{node.name}"),
            ("ROCM_CONSOLE_SIM_SPEC", json.dumps(asdict(node.simulate), sort_keys=True)),
            # The simulated host's ROCm (sim/host.py): the probe reads <ROCM_PATH>/.info/version.
            ("ROCM_PATH", f"{base}/sim/host/opt/rocm"),
        ]
    python = node.python
    if node.simulate is not None and node.transport == "local" and python == DEFAULT_PYTHON:
        # A simulated node on this machine: the console's own interpreter (>= 3.8, known to be
        # there) instead of looking `python3` up on PATH each time; a version-manager shim
        # (pyenv) costs a shell and ~50 ms of CPU per agent, probe and instance list.
        python = sys.executable or python
    vllm = tuple(shlex.split(node.vllm))
    if node.simulate is not None and node.vllm == "vllm":
        vllm = (python, f"{base}/sim/vllm")
    return AgentCommand(
        agent_path=agent_path,
        amdsmi_paths=amdsmi_paths,
        python=python,
        env=tuple(env),
        state_dir=state_dir,
        vllm=vllm,
        sysroot=f"{base}/sim/host" if node.simulate is not None else None,
        # The simulator is stdlib only: skipping site (its .pth files, editable-install finders)
        # saves ~15 ms of every agent start on the demo's machine.
        python_flags=("-S",) if node.simulate is not None else (),
    )


async def run_probe(transport: Transport, command: AgentCommand, timeout: float = 30.0) -> ProbeInfo | None:
    """Versions and facts of the node; None when the probe cannot say (never fatal)."""
    try:
        result = await transport.run(
            command.argv("probe"), env=command.env_dict(), timeout=timeout, max_output=AGENT_OUTPUT_LIMIT
        )
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
