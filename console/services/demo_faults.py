"""The demo's "Inject GPU fault…" and "Clear GPU faults": a simulated fault written into a
demo node's simulator folder (``$ROCM_CONSOLE_SIM_DIR/faults.json``, through
console/sim/faults.py), so a newcomer sees the whole path: the row turns warn or fail at
the GPU's next health reading, an event is logged, an alert fires, a start is refused.

Only simulated nodes on this machine take faults: their simulator folder is the one the
agent runs with (services/agent_bundle.py sets ROCM_CONSOLE_SIM_DIR; install_local_agent
gives that same command without starting anything).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from console.core.model import NodeSpec
from console.services.agent_bundle import NVIDIA_SIM_GPUS, install_local_agent

__all__ = ["DemoFaultError", "clear", "fault_kinds", "inject", "sim_dir"]

SIM_DIR_ENV = "ROCM_CONSOLE_SIM_DIR"
_NVIDIA_ONLY = ("nvlink_down", "xid")
_AMD_ONLY = ("xgmi_down", "reset")


class DemoFaultError(Exception):
    """Why a fault cannot be written, in one line naming the node or GPU."""


def _faults() -> ModuleType:
    try:  # by name: the simulator's module is stdlib code shipped beside the console
        return importlib.import_module("console.sim.faults")
    except ImportError:
        raise DemoFaultError("simulated faults are not in this build (console/sim/faults.py)") from None


def fault_kinds(node: NodeSpec) -> tuple[str, ...]:
    """The kinds the node's simulator takes (XGMI and reset on AMD, NVLink and XID on NVIDIA)."""
    nvidia = node.simulate is not None and node.simulate.gpu in NVIDIA_SIM_GPUS
    skip = _AMD_ONLY if nvidia else _NVIDIA_ONLY
    return tuple(k for k in _faults().FAULT_KINDS if k not in skip)


def sim_dir(node: NodeSpec) -> Path:
    """The simulator folder of a simulated node on this machine; DemoFaultError otherwise."""
    if node.simulate is None or node.transport != "local":
        raise DemoFaultError(f"{node.name}: not a simulated node on this machine (faults are for the demo)")
    env = install_local_agent(node).env_dict()
    folder = env.get(SIM_DIR_ENV)
    if not folder:
        raise DemoFaultError(f"{node.name}: its agent has no simulator folder ({SIM_DIR_ENV})")
    return Path(folder)


def _check_gpu(node: NodeSpec, gpu: int) -> None:
    count = node.simulate.count if node.simulate is not None else 0
    if gpu < 0 or (count and gpu >= count):
        raise DemoFaultError(f"{node.name}: no physical GPU {gpu} (it has {count}: 0-{count - 1})")


def inject(node: NodeSpec, gpu: int, kind: str, count: int = 1) -> str:
    """Write one fault; returns what was done, in one line."""
    _check_gpu(node, gpu)
    if kind not in fault_kinds(node):
        raise DemoFaultError(f"{node.name}: fault kind {kind!r} unknown here; one of {', '.join(fault_kinds(node))}")
    folder = sim_dir(node)
    faults = _faults()
    try:
        faults.add_fault(str(folder), gpu, kind, count)
    except (ValueError, OSError) as exc:
        raise DemoFaultError(f"{node.name} GPU {gpu}: {exc}") from None
    return f"{node.name} GPU {gpu}: {kind} injected; it shows at the GPU's next health reading"


def clear(node: NodeSpec, gpu: int | None = None) -> str:
    """Remove the node's simulated faults (or one GPU's); returns what was done, in one line."""
    if gpu is not None:
        _check_gpu(node, gpu)
    folder = sim_dir(node)
    try:
        removed = _faults().clear_faults(str(folder), gpu)
    except (ValueError, OSError) as exc:
        raise DemoFaultError(f"{node.name}: {exc}") from None
    where = node.name if gpu is None else f"{node.name} GPU {gpu}"
    return f"{where}: {removed} simulated fault{'s' if removed != 1 else ''} cleared"
