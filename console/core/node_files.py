"""A node's name as a file or folder name, one rule for every file store that keeps a file per
node (baselines/<node>/, node-versions/<node>.json) and for the database store's dump."""

from __future__ import annotations

import re

__all__ = ["node_file_stem"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def node_file_stem(node: str) -> str:
    """Anything but letters, digits, _ . - becomes _ (a node `gpu node/7` is `gpu_node_7`)."""
    return _UNSAFE.sub("_", node)
