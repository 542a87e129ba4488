"""`serve start --nodes a,b` on two simulated nodes: a TP 8 × PP 2 405B instance over simulated Ray.

Fast and CPU-only: both nodes are local simulated MI300X servers; `ray` is the
simulator's (console/sim/vllm/ray_sim.py). The real-Ray flow over real sshd is
tests/integration/test_ray_multinode.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.cli_helpers import one_line_error, run
from tests.helpers import free_port


@pytest.fixture
def two_nodes(tmp_path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.node-a]
transport = "local"
state_dir = "{tmp_path / "state-a"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 21 }}

[nodes.node-b]
transport = "local"
state_dir = "{tmp_path / "state-b"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 22 }}

[nodes.node-cpx]
transport = "local"
state_dir = "{tmp_path / "state-c"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "CPX", seed = 23 }}

[serve."405b-tp8-pp2"]
model = "meta-llama/Llama-3.1-405B-Instruct"
tp = 8
pp = 2
ray_port = {free_port()}
head_address = "127.0.0.1"
env = {{ RCCL_NET_GDR_LEVEL = "2", RCCL_DEBUG = "INFO" }}

[serve."dsv3-dp2-tp8"]
model = "deepseek-ai/DeepSeek-V3"
tp = 8
dp = 2
dp_local = 1
ray_port = {free_port()}
head_address = "127.0.0.1"
args = ["--enable-expert-parallel", "--block-size", "1"]
""")
    return path


def ray_alive(tmp_path: Path) -> list[int]:
    """Processes of the simulated Ray of this test (their command line names its state dirs)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if str(tmp_path).encode() in args and b" ray" not in args and b"\0ray\0start" in args:
                found.append(int(entry))
    return found


def test_a_405b_tp8_pp2_instance_over_two_simulated_nodes(two_nodes, tmp_path):
    port = str(free_port())
    start = run(
        "serve", "start", "--profile", str(two_nodes), "--nodes", "node-a,node-b", "--preset", "405b-tp8-pp2",
        "--port", port, "--name", "big", "--wait", "--timeout", "90",
        timeout=180,
    )  # fmt: skip
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert "Ray cluster up (2 nodes)" in start.stdout
        assert "big: ready" in start.stdout
        listing = json.loads(run("serve", "list", "--profile", str(two_nodes), "--json").stdout)["instances"]
        [inst] = [i for i in listing if i["name"] == "big"]  # one instance, not one per node
        assert inst["nodes"] == ["node-a", "node-b"] and inst["node"] == "node-a+node-b"
        assert inst["gpus"] == list(range(8)) and inst["state"] == "ready"
        argv = inst["argv"]
        assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"
        assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"
        # the worker node's own rows carry it too
        rows = json.loads(run("serve", "list", "--profile", str(two_nodes), "--node", "node-b", "--json").stdout)
        [row] = rows["instances"]
        assert row["name"] == "big" and row["nodes"] == ["node-a", "node-b"] and row["gpus"] == list(range(8))
        logs = run("serve", "logs", "big", "--profile", str(two_nodes), "--node", "node-b", "--lines", "400")
        assert "Ray cluster at 127.0.0.1" in logs.stdout  # the head's log, asked on the worker
        assert ray_alive(tmp_path)
    finally:
        stop = run("serve", "stop", "big", "--profile", str(two_nodes), "--node", "node-b", timeout=180)
    assert stop.returncode == 0 and "big: stopped" in stop.stdout, stop.stdout + stop.stderr
    assert ray_alive(tmp_path) == []


def test_bad_shapes_are_refused_before_anything_starts(two_nodes, tmp_path):
    proc = run("serve", "start", "--profile", str(two_nodes), "--nodes", "node-a,node-cpx", "--preset", "405b-tp8-pp2")
    assert proc.returncode == 1
    assert one_line_error(proc).endswith("node node-cpx: partition mode CPX/NPS1 differs from head node-a's SPX/NPS1")
    proc = run("serve", "start", "--profile", str(two_nodes), "--nodes", "node-a", "--preset", "405b-tp8-pp2")
    assert proc.returncode == 2 and "needs 2 nodes or more" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(two_nodes), "--node", "node-a", "--preset", "405b-tp8-pp2")
    assert proc.returncode == 2 and "name them with --nodes a,b" in one_line_error(proc)
    assert ray_alive(tmp_path) == []
    assert not list((tmp_path / "state-a").glob("instances/*"))


def test_serve_list_prints_one_line_and_a_lost_worker_fails_it():
    from console.cli.serve import _merge_multinode, view_line
    from console.services.instances import InstanceState, InstanceView

    nodes = ("node-a", "node-b")
    head = InstanceView(node="node-a", name="big", state=InstanceState.READY, gpus=(0, 1), port=8000, nodes=nodes)
    worker = InstanceView(node="node-b", name="big", state=InstanceState.STARTING, gpus=(0, 1), nodes=nodes)
    other = InstanceView(node="node-b", name="small", state=InstanceState.READY, gpus=(5,), port=8001)
    [big, small] = _merge_multinode([head, worker, other])
    assert big.node == "node-a+node-b" and big.state == InstanceState.READY and small == other
    assert view_line(big).startswith("node-a+node-b  big")
    lost = InstanceView(node="node-b", name="big", state=InstanceState.FAILED, nodes=nodes)
    [big] = _merge_multinode([head, lost])
    assert big.state == InstanceState.FAILED and big.reason == "node node-b: Ray exited"


def test_a_dp_layout_over_two_simulated_nodes_is_one_endpoint(two_nodes, tmp_path):
    start = run(
        "serve", "start", "--profile", str(two_nodes), "--nodes", "node-a,node-b", "--preset", "dsv3-dp2-tp8",
        "--port", str(free_port()), "--name", "dsv3", "--wait", "--timeout", "90", "--json",
        timeout=180,
    )  # fmt: skip
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        view = json.loads(start.stdout)
        assert view["state"] == "ready" and view["nodes"] == ["node-a", "node-b"]
        argv = view["argv"]
        for flag, value in (
            ("--data-parallel-size", "2"),
            ("--data-parallel-size-local", "1"),
            ("--data-parallel-address", "127.0.0.1"),
            ("--data-parallel-backend", "ray"),
        ):
            assert argv[argv.index(flag) + 1] == value
        assert "--disable-nccl-for-dp-synchronization" in argv and "--enable-expert-parallel" in argv
    finally:
        stop = run("serve", "stop", "dsv3", "--profile", str(two_nodes), "--node", "node-a", timeout=180)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert ray_alive(tmp_path) == []
