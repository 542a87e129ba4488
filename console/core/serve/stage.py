"""The start-up stages of `vllm serve`, in the order vLLM passes them.

Apart from the log parser (console/core/serve/log.py, which re-exports it): the instance
panels and the GPU table show stages long before any log is read.
"""

from __future__ import annotations

import enum

__all__ = ["ServeStage"]


class ServeStage(str, enum.Enum):
    """Startup stages in the order vLLM passes them (compare with < and >)."""

    STARTING = "starting"  # version banner / parsed args
    ENGINE_INIT = "engine-init"  # "Initializing a V1 LLM engine (vX) with config"
    LOADING_WEIGHTS = "loading-weights"
    WEIGHTS_LOADED = "weights-loaded"
    KV_CACHE = "kv-cache"
    GRAPH_CAPTURE = "graph-capture"
    ENGINE_READY = "engine-ready"  # "init engine (profile, create kv cache, ...) took"
    SERVER_STARTING = "server-starting"  # HTTP server set-up, routes
    READY = "ready"  # "Application startup complete."

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def label(self) -> str:
        """Human text: "loading weights"."""
        return self.value.replace("-", " ")

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ServeStage):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, ServeStage):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, ServeStage):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, ServeStage):
            return NotImplemented
        return self.rank >= other.rank


_RANK = {stage: i for i, stage in enumerate(ServeStage)}
