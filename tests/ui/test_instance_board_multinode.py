"""A multi-node instance on the board: listed once, its GPUs marked on every node's rows."""

from __future__ import annotations

from console.services.instances import InstanceState as S
from console.services.instances import InstanceView
from console.ui.model import instance_board as ib

NODES = ("mi300x-a", "mi300x-b")


def row(node, state, **kw) -> InstanceView:
    return InstanceView(node=node, name="405b", state=state, gpus=tuple(range(8)), nodes=NODES, **kw)


def test_listed_once_marked_on_both_nodes_in_the_heads_state():
    board = ib.InstanceBoard([*NODES, "other"])
    board.set_polled("mi300x-a", [row("mi300x-a", S.LOADING, stage="loading-weights", port=8000, pid=10)])
    board.set_polled("mi300x-b", [row("mi300x-b", S.LOADING, stage="Ray worker of mi300x-a", pid=20)])
    board.set_polled("other", [])
    [one] = board.views()
    assert one.node == "mi300x-a" and one.nodes == NODES
    for node in NODES:
        cells = board.on_gpus(node)
        assert sorted(cells) == list(range(8))
        assert {cells[g][0].stage for g in cells} == {"loading-weights"}  # the head's stage on the worker too
    assert board.busy_gpus("mi300x-b") == set(range(8)) and board.busy_gpus("other") == set()
    # the head becomes ready: the worker's rows follow without a poll of the worker
    gen = board.generation["mi300x-b"]
    board.progress(row("mi300x-a", S.READY, stage="ready", port=8000, pid=10))
    assert board.generation["mi300x-b"] > gen
    assert ib.gpu_text(board.on_gpus("mi300x-b")[3]) == ("405b", "ready", ib.READY)
    [worker_row] = board.views("mi300x-b")
    assert worker_row.node == "mi300x-b" and worker_row.pid == 20


def test_a_worker_whose_ray_ended_fails_the_instance():
    board = ib.InstanceBoard(NODES)
    board.set_polled("mi300x-a", [row("mi300x-a", S.READY, port=8000, pid=10)])
    reason = "node mi300x-b: Ray exited: Some Ray subprocesses exited unexpectedly: raylet [exit code=-9]"
    board.set_polled("mi300x-b", [row("mi300x-b", S.FAILED, reason=reason, pid=20)])
    [one] = board.views()
    assert one.state == S.FAILED and one.reason == reason
    assert ib.gpu_text(board.on_gpus("mi300x-b")[0])[2] == ib.FAILED
