"""The console's record of one vLLM instance (what every screen, command and service shows).

Kept apart from the instance service (console/services/instances.py), which re-exports
these: the UI's first frame needs the record and its states, not the service's machinery.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["InstanceError", "InstanceState", "InstanceView"]


class InstanceState(str, enum.Enum):
    STARTING = "starting"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    STOPPING = "stopping"
    STOPPED = "stopped"
    EXITED = "exited"
    UNMANAGED = "unmanaged"


class InstanceError(Exception):
    """A refusal or failure with a one-line reason."""


@dataclass(frozen=True, slots=True)
class InstanceView:
    node: str
    name: str
    state: InstanceState
    pid: int | None = None
    port: int | None = None
    gpus: tuple[int, ...] = ()
    model: str | None = None
    preset: str | None = None
    started: float | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    stage: str | None = None
    stage_detail: str | None = None
    reason: str | None = None
    served_models: tuple[str, ...] = ()
    version: str | None = None
    argv: tuple[str, ...] = field(default=(), compare=False)
    pids: tuple[int, ...] = ()  # an unmanaged server's process tree
    warnings: tuple[str, ...] = ()  # flags/env the node's vLLM version may not know
    group: str | None = None  # the replica group it belongs to (console/services/groups.py)
    nodes: tuple[str, ...] = ()  # a multi-node instance's nodes, head first (services/multinode.py)
    api_key_env: str | None = None  # the console's variable holding the key its API requires (not the key)

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["state"] = self.state.value
        d["gpus"] = list(self.gpus)
        d["served_models"] = list(self.served_models)
        d["argv"] = list(self.argv)
        d["pids"] = list(self.pids)
        d["warnings"] = list(self.warnings)
        d["nodes"] = list(self.nodes)
        return d
