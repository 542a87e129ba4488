"""Replica group planning: where each replica goes, its port, and why a group does not fit."""

from __future__ import annotations

import pytest

from console.core.replicas import (
    PER_GPU,
    NodeCapacity,
    ReplicaPlanError,
    group_of,
    listening_ports,
    parse_replicas,
    plan_group,
)

SPX8 = NodeCapacity("mi300x", tuple(range(8)), partitions=dict.fromkeys(range(8), "SPX"))
CPX64 = NodeCapacity("mi300x", tuple(range(64)), partitions=dict.fromkeys(range(64), "CPX"))

PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F41 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F42 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 100 0 0 10 0
"""


def test_parse_replicas():
    assert parse_replicas("8") == 8
    assert parse_replicas("per-gpu") == PER_GPU
    for bad in ("0", "-1", "eight", "100000"):
        with pytest.raises(ReplicaPlanError, match="--replicas"):
            parse_replicas(bad)


def test_listening_ports_from_proc_net_tcp():
    # 8000 and 22 listen (v4), 8002 listens on v6; 8001 is an established connection, not a listener
    assert listening_ports(PROC_NET_TCP) == {8000, 22, 8002}
    # every local port, in any state: a server's port in TIME_WAIT cannot be bound again yet
    assert listening_ports(PROC_NET_TCP, any_state=True) == {8000, 8001, 22, 8002}


def test_eight_tp1_replicas_one_per_gpu_skip_taken_ports():
    cap = NodeCapacity("n", tuple(range(8)), taken_ports=frozenset({8000, 8002}))
    plan = plan_group(preset="llama", tp=1, replicas=8, nodes=[cap])
    assert [r.gpus for r in plan.replicas] == [(g,) for g in range(8)]
    assert [r.port for r in plan.replicas] == [8001, 8003, 8004, 8005, 8006, 8007, 8008, 8009]
    assert plan.group == "llama-x8" and plan.replicas[3].name == "llama-x8-r3"
    assert all(group_of(r.name, plan.group) for r in plan.replicas)
    assert not group_of("llama-x8-rogue", plan.group)


def test_per_gpu_counts_tp_groups_and_skips_busy_gpus():
    cap = NodeCapacity("n", tuple(range(8)), busy={2: "other"})
    plan = plan_group(preset="p", tp=2, replicas="per-gpu", nodes=[cap])
    # free GPUs 0,1,3,4,5,6,7 -> TP pairs (0,1) (3,4) (5,6); 7 is left over
    assert [r.gpus for r in plan.replicas] == [(0, 1), (3, 4), (5, 6)]


def test_cpx_64_replicas_and_tp_over_cpx_refused():
    plan = plan_group(preset="p", tp=1, replicas=PER_GPU, nodes=[CPX64])
    assert len(plan.replicas) == 64 and len({r.port for r in plan.replicas}) == 64
    with pytest.raises(ReplicaPlanError, match="mi300x: TP 2 in CPX"):
        plan_group(preset="p", tp=2, replicas=1, nodes=[CPX64])


def test_too_many_replicas_names_what_is_short():
    with pytest.raises(ReplicaPlanError) as err:
        plan_group(preset="p", tp=1, replicas=9, nodes=[SPX8])
    assert str(err.value) == "9 replicas of TP 1 need 9 free GPUs, mi300x offers 8 free sets of 1"
    with pytest.raises(ReplicaPlanError, match="TP 16 needs 16 GPUs, the node has 8"):
        plan_group(preset="p", tp=16, replicas=1, nodes=[SPX8])


def test_round_robin_over_nodes_with_ports_per_node():
    a = NodeCapacity("a", (0, 1))
    b = NodeCapacity("b", (0, 1), taken_ports=frozenset({8000}))
    plan = plan_group(preset="p", tp=1, replicas=3, nodes=[a, b])
    assert [(r.node, r.gpus, r.port) for r in plan.replicas] == [
        ("a", (0,), 8000),
        ("b", (0,), 8001),
        ("a", (1,), 8001),
    ]


def test_nodes_on_one_host_share_its_ports():
    a = NodeCapacity("a", (0, 1), host="localhost")
    b = NodeCapacity("b", (0,), host="localhost", taken_ports=frozenset({8001}))
    plan = plan_group(preset="p", tp=1, replicas=3, nodes=[a, b])
    assert [(r.node, r.port) for r in plan.replicas] == [("a", 8000), ("b", 8002), ("a", 8003)]


def test_chosen_gpus_and_group_name_clash():
    plan = plan_group(preset="p", tp=1, replicas=PER_GPU, nodes=[SPX8], gpus=[4, 5])
    assert [r.gpus for r in plan.replicas] == [(4,), (5,)]
    with pytest.raises(ReplicaPlanError, match="no GPU 9"):
        plan_group(preset="p", tp=1, replicas=1, nodes=[SPX8], gpus=[9])
    # default names avoid an existing group; an explicit one that clashes is refused
    assert plan_group(preset="p", tp=1, replicas=2, nodes=[SPX8], taken_names={"p-x2-r0"}).group == "p-x2-2"
    with pytest.raises(ReplicaPlanError, match="an instance named g-r0 exists"):
        plan_group(preset="p", tp=1, replicas=2, nodes=[SPX8], group="g", taken_names={"g-r0"})
