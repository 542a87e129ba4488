"""Workers of the console: each one named (its group is its name unless said otherwise), none
able to end the app. What a worker does not catch itself the app reports, naming it
(ConsoleApp.on_worker_state_changed)."""

from __future__ import annotations

from typing import Any

from textual.dom import DOMNode
from textual.worker import Worker, WorkType


def run_named(
    node: DOMNode,
    work: WorkType[Any],
    name: str,
    *,
    group: str | None = None,
    exclusive: bool = False,
    thread: bool = False,
) -> Worker[Any]:
    """Run `work` on `node` (it ends with the node) as the worker `name`; exclusive: a newer
    one of the same group cancels the one still running."""
    return node.run_worker(
        work, name=name, group=group or name, exclusive=exclusive, thread=thread, exit_on_error=False
    )
