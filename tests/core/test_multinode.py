"""Multi-node on Ray: presets from seed 003, the shape check, argv builders, `ray status`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from console.core.errors import ProfileError
from console.core.model import ServePreset
from console.core.multinode import (
    NodeFacts,
    build_head_serve,
    build_ray_head_argv,
    build_ray_worker_argv,
    check_shape,
    is_multinode,
    parse_ray_status,
    parse_ray_version,
    python_of,
    ray_command,
    ray_exit_line,
    world_size,
)
from console.core.profiles import load_profile

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ROOT / "profiles" / "presets.toml"
SEED_003 = ROOT / "tests" / "fixtures" / "seeds" / "003_03980a5ac225bd85.txt"  # a copy of seeds/003
STATUS_2 = ROOT / "tests" / "fixtures" / "ray-2.60" / "status-2-nodes.txt"


@pytest.fixture(scope="module")
def presets() -> dict[str, ServePreset]:
    return {p.name: p for p in load_profile([PRESETS]).serve_presets}


def gpu_node(name: str, **kw) -> NodeFacts:
    base = dict(
        name=name,
        gpus=tuple(range(8)),
        gpu_count=8,
        gpu_model="AMD Instinct MI300X",
        compute_partition="SPX",
        memory_partition="NPS1",
        vllm_version="0.32.0",
        ray_version="2.60.0",
        python="/opt/venv/bin/python",
    )
    base.update(kw)
    return NodeFacts(**base)


# ---------------------------------------------------------------- presets


def test_multinode_presets_are_the_seed_layouts(presets):
    llama = presets["llama-3.1-405b-tp8-pp2"]
    assert (llama.model, llama.tp, llama.pp, llama.dp) == ("meta-llama/Llama-3.1-405B-Instruct", 8, 2, 1)
    assert world_size(llama) == 16 and is_multinode(llama)
    assert dict(llama.env)["RCCL_NET_GDR_LEVEL"] == "2" and dict(llama.env)["RCCL_DEBUG"] == "INFO"
    dp = presets["deepseek-v3-dp16-ep"]
    assert (dp.tp, dp.dp, dp.dp_local) == (1, 16, 8)
    assert "--enable-expert-parallel" in dp.args and "--disable-nccl-for-dp-synchronization" in dp.args
    assert dict(dp.env)["VLLM_ALL2ALL_BACKEND"] == "allgather_reducescatter"
    hybrid = presets["deepseek-v3-dp2-tp8-ep"]
    assert world_size(hybrid) == 16 and hybrid.dp_local == 1


def test_preset_values_appear_in_seed_003():
    seed = SEED_003.read_text(encoding="utf-8")
    for text in (
        "vllm serve meta-llama/Llama-3.1-405B-Instruct",
        "--tensor-parallel-size 8",
        "--pipeline-parallel-size 2",
        "--distributed-executor-backend ray",
        "RCCL_NET_GDR_LEVEL=2",
        "RCCL_DEBUG=INFO",
        'VLLM_ALL2ALL_BACKEND="allgather_reducescatter"',
        "--disable-nccl-for-dp-synchronization",
        "--data-parallel-size-local",
        "--data-parallel-address",
        "--enable-expert-parallel",
    ):
        assert text in seed, text


def test_profile_refuses_pp_in_args_and_bad_dp_local(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[serve.x]\nmodel = "m"\nargs = ["--pipeline-parallel-size", "2"]\n')
    with pytest.raises(ProfileError, match=r"set pp = \.\.\. instead"):
        load_profile([path])
    path.write_text('[serve.x]\nmodel = "m"\ndp = 2\ndp_local = 4\n')
    with pytest.raises(ProfileError, match="dp_local 4 is more than dp 2"):
        load_profile([path])
    path.write_text('[serve.x]\nmodel = "m"\nnodes = ["a", "a"]\n')
    with pytest.raises(ProfileError, match="listed twice"):
        load_profile([path])
    path.write_text('[serve.x]\nmodel = "m"\npp = 2\nnodes = ["a", "b"]\nray_port = 7000\nhead_address = "10.0.0.1"\n')
    (preset,) = load_profile([path]).serve_presets
    assert (preset.pp, preset.nodes, preset.ray_port, preset.head_address) == (2, ("a", "b"), 7000, "10.0.0.1")


# ---------------------------------------------------------------- shape check


def test_the_seed_layout_passes(presets):
    llama = presets["llama-3.1-405b-tp8-pp2"]
    assert check_shape(llama, [gpu_node("a"), gpu_node("b")]) is None
    assert check_shape(presets["deepseek-v3-dp16-ep"], [gpu_node("a"), gpu_node("b")]) is None
    assert check_shape(presets["deepseek-v3-dp2-tp8-ep"], [gpu_node("a"), gpu_node("b")]) is None


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        (
            [gpu_node("a"), gpu_node("b", gpus=(0, 1, 2, 3))],
            "node b: TP 8 > 4 GPUs chosen on this node",
        ),
        (
            [gpu_node("a"), gpu_node("b"), gpu_node("c")],
            "preset llama-3.1-405b-tp8-pp2: TP 8 × PP 2 = 16 GPUs, but 24 are chosen (a: 8, b: 8, c: 8)",
        ),
        (
            [gpu_node("a"), gpu_node("b", gpu_model="AMD Instinct MI325X")],
            "node b: GPU model AMD Instinct MI325X differs from head a's AMD Instinct MI300X",
        ),
        (
            [gpu_node("a"), gpu_node("b", compute_partition="CPX")],
            "node b: partition mode CPX/NPS1 differs from head a's SPX/NPS1",
        ),
        (
            [gpu_node("a"), gpu_node("b", vllm_version="0.31.0")],
            "node b: vLLM 0.31.0 differs from head a's 0.32.0 (every node must run the same vLLM)",
        ),
        (
            [gpu_node("a"), gpu_node("b", ray_version=None)],
            "node b: ray is not installed next to vLLM; install it: /opt/venv/bin/python -m pip install ray==2.60.0",
        ),
        (
            [gpu_node("a"), gpu_node("b", ray_version="2.59.0")],
            "node b: Ray 2.59.0 differs from head a's 2.60.0",
        ),
        (
            [gpu_node("a"), gpu_node("b", head_unreachable="Connection refused")],
            "node b: cannot reach head a at 10.0.0.1: Connection refused",
        ),
        (
            [gpu_node("a"), gpu_node("b", busy=(3,))],
            "node b: GPU 3 is in use by another instance",
        ),
        ([gpu_node("a")], "a multi-node instance needs 2 nodes or more, 1 given"),
        ([gpu_node("a"), gpu_node("a")], "node a: given twice"),
    ],
)
def test_shapes_that_cannot_work_are_refused_in_one_line(presets, nodes, expected):
    message = check_shape(presets["llama-3.1-405b-tp8-pp2"], nodes, head_address="10.0.0.1")
    assert message is not None and expected in message
    assert "\n" not in message


def test_loopback_head_with_a_remote_worker_is_refused(presets):
    message = check_shape(
        presets["llama-3.1-405b-tp8-pp2"],
        [gpu_node("a"), gpu_node("b")],
        head_address="127.0.0.1",
        head_is_loopback=True,
        worker_hosts={"b": "10.0.0.2"},
    )
    assert message and message.startswith("node b: the head address 127.0.0.1 is a loopback address")


def test_dp_layouts_must_split_over_the_nodes(presets):
    dp = presets["deepseek-v3-dp16-ep"]
    three = [gpu_node("a"), gpu_node("b"), gpu_node("c")]
    assert "dp_local 8 × 3 nodes ≠ dp 16" in (check_shape(dp, three) or "")
    assert "does not split evenly" in (
        check_shape(replace(dp, dp_local=None, dp=3), [gpu_node("a"), gpu_node("b")]) or ""
    )


def test_cpu_nodes_count_ranks_not_gpus():
    tiny = ServePreset(name="tiny-pp2", model="m", tp=1, pp=2)
    cpu = [NodeFacts(name=n, vllm_version="0.32.0+cpu", ray_version="2.60.0") for n in ("a", "b")]
    assert check_shape(tiny, cpu) is None
    assert "do not split over 2 CPU nodes" in (check_shape(replace(tiny, pp=3), cpu) or "")


def test_docker_runtime_is_refused():
    preset = ServePreset(name="d", model="m", tp=8, pp=2, runtime="docker", image="img")
    assert "runtime docker is not supported" in (check_shape(preset, [gpu_node("a"), gpu_node("b")]) or "")


# ---------------------------------------------------------------- argv


def test_ray_lives_next_to_vllm():
    assert ray_command("/opt/venv/bin/vllm") == ["/opt/venv/bin/ray"]
    assert ray_command("vllm") == ["ray"]
    assert ray_command("uv run vllm") == ["uv", "run", "ray"]
    assert python_of("/opt/venv/bin/vllm") == "/opt/venv/bin/python"
    with pytest.raises(ValueError):
        ray_command("/opt/venv/bin/python -m vllm.entrypoints.cli.main")


def test_ray_start_argv():
    head = build_ray_head_argv(
        ["/v/bin/ray"], port=6379, node_ip="10.0.0.1", temp_dir="/tmp/rc-ray/x", num_gpus=8, extra=["--num-cpus", "2"]
    )
    assert head == (
        "/v/bin/ray", "start", "--head", "--port", "6379", "--node-ip-address", "10.0.0.1",
        "--temp-dir", "/tmp/rc-ray/x", "--num-gpus", "8", "--disable-usage-stats", "--num-cpus", "2", "--block",
    )  # fmt: skip
    worker = build_ray_worker_argv(["ray"], head="10.0.0.1", port=6379, temp_dir="/tmp/rc-ray/y", num_gpus=8)
    assert worker[:4] == ("ray", "start", "--address", "10.0.0.1:6379") and worker[-1] == "--block"
    with pytest.raises(ValueError, match="--port: the console sets it"):
        build_ray_head_argv(["ray"], port=1, node_ip="x", temp_dir="/t", num_gpus=0, extra=["--port", "2"])
    with pytest.raises(ValueError, match="longer than"):
        build_ray_worker_argv(["ray"], head="h", port=1, temp_dir="/" + "x" * 60, num_gpus=0)


def test_head_serve_for_pp_across_nodes(presets):
    cmd = build_head_serve(
        presets["llama-3.1-405b-tp8-pp2"], vllm="/v/bin/vllm", port=8000, head_address="10.0.0.1", ray_port=6379
    )
    argv = list(cmd.argv)
    assert argv[:3] == ["/v/bin/vllm", "serve", "meta-llama/Llama-3.1-405B-Instruct"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8"
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"
    assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"
    env = dict(cmd.env)
    assert env["RAY_ADDRESS"] == "10.0.0.1:6379" and env["VLLM_HOST_IP"] == "10.0.0.1"
    assert env["RCCL_NET_GDR_LEVEL"] == "2" and "CUDA_VISIBLE_DEVICES" not in env
    assert "--data-parallel-size" not in argv


def test_head_serve_for_dp_across_nodes(presets):
    cmd = build_head_serve(presets["deepseek-v3-dp16-ep"], vllm="vllm", port=8000, head_address="10.0.0.1", ray_port=1)
    argv = list(cmd.argv)
    assert argv[argv.index("--data-parallel-size") + 1] == "16"
    assert argv[argv.index("--data-parallel-size-local") + 1] == "8"
    assert argv[argv.index("--data-parallel-address") + 1] == "10.0.0.1"
    assert argv[argv.index("--data-parallel-backend") + 1] == "ray"
    assert argv.count("--disable-nccl-for-dp-synchronization") == 1
    assert dict(cmd.env)["VLLM_ALL2ALL_BACKEND"] == "allgather_reducescatter"
    # a DP preset without the ROCm settings gets them from the seed's tip
    bare = ServePreset(name="b", model="m", dp=2, dp_local=1)
    cmd = build_head_serve(bare, vllm="vllm", port=8000, head_address="h", ray_port=1)
    assert "--disable-nccl-for-dp-synchronization" in cmd.argv
    assert dict(cmd.env)["VLLM_ALL2ALL_BACKEND"] == "allgather_reducescatter"


# ---------------------------------------------------------------- ray status


def test_ray_status_of_a_real_two_node_cluster():
    status = parse_ray_status(STATUS_2.read_text())
    assert (status.active, status.pending, status.failures) == (2, 0, ())


def test_ray_status_with_a_failure_line():
    text = "Node status\n----\nActive:\n 1 node_abc\nPending:\n (no pending nodes)\nRecent failures:\n node_def: NodeTerminated (ip: 127.0.0.3)\n\nResources\n"
    status = parse_ray_status(text)
    assert status.active == 1 and status.failures == ("node_def: NodeTerminated (ip: 127.0.0.3)",)


def test_ray_version():
    assert parse_ray_version("ray, version 2.60.0\n") == "2.60.0"
    assert parse_ray_version("bash: ray: command not found") is None


def test_the_multinode_demo_profile_fits_the_405b_preset():
    profile = load_profile([PRESETS, ROOT / "profiles" / "demo-multinode.toml"])
    preset = next(p for p in profile.serve_presets if p.name == "llama-3.1-405b-tp8-pp2")
    facts = [
        NodeFacts(
            name=n.name,
            gpus=tuple(range(n.simulate.count)),
            gpu_count=n.simulate.count,
            gpu_model=n.simulate.gpu,
            compute_partition=n.simulate.compute_partition,
            memory_partition=n.simulate.memory_partition,
            vllm_version="0.32.0",
            ray_version="2.60.0",
        )
        for n in profile.nodes
        if n.simulate is not None
    ]
    assert [f.name for f in facts] == ["mi300x-a", "mi300x-b"]
    assert check_shape(preset, facts) is None


def test_rays_exit_line():
    # the tail of `ray start --block` on a worker whose raylet got SIGKILL (Ray 2.60, this machine)
    log = [
        "[2026-11-25 15:06:49,514 I 16987 16987] (raylet) accessor.cc:475: Received address and liveness",
        "2026-11-25 15:07:06,805\tERR scripts.py:1307 -- Some Ray subprocesses exited unexpectedly:",
        "2026-11-25 15:07:06,805\tERR scripts.py:87 -- raylet [exit code=-9]",
        "2026-11-25 15:07:06,806\tERR scripts.py:115 -- ----- BEGIN raylet.out tail (exit code(s)=-9 (signal 9)) -----",
        "2026-11-25 15:07:06,829\tERR scripts.py:1315 -- Remaining processes will be killed.",
    ]
    assert ray_exit_line(log) == "Some Ray subprocesses exited unexpectedly: raylet [exit code=-9]"
    assert ray_exit_line(["RuntimeError: Failed to start GCS.", "done"]) == "RuntimeError: Failed to start GCS."
    assert ray_exit_line([]) is None
