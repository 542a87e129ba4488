"""A simulated H100 node through the console's services: telemetry, an instance, a benchmark
compared with the same benchmark on a simulated MI300X node.

The node runs the real agent over LocalTransport with the simulated NVML (sim/pynvml.py)
and the simulated vLLM, like the demo's h100 node.
"""

from __future__ import annotations

import pytest

from console.core.model import BenchPreset, ServePreset
from console.core.results.compare import compare_table
from console.core.results.display import run_summary
from console.services.instances import InstanceService, InstanceState
from console.services.results import ResultStore
from console.services.runs.outcome import RunRecorder
from console.services.runs.serving import BenchRunner
from console.services.status import sample_node
from console.services.transports import TransportPool
from tests.helpers import free_port

TINY = ServePreset(name="tiny", model="tiny-llama", tp=1)
BENCH = BenchPreset(
    name="tiny",
    dataset="random",
    input_len=64,
    output_len=64,
    num_prompts=24,
    max_concurrency=(4,),
    ignore_eos=True,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def fast_sim_vllm(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [p.split(b"=", 1) for p in f.read().split(b"\0") if b"=" in p]
    return {k.decode(): v.decode() for k, v in pairs}


async def test_h100_node_telemetry_and_an_instance_on_one_gpu(sim_node):
    node = sim_node("h100", gpu="H100", count=4)
    pool = TransportPool()
    svc = InstanceService(pool)
    try:
        snap = await sample_node(pool, node, probe=False)
        assert snap.source == "NVIDIA nvml (simulated)"
        assert [g.model for g in snap.static] == ["NVIDIA H100 80GB HBM3"] * 4
        assert not any(p for g in snap.latest.gpus for p in g.processes)
        await svc.start(node, TINY, gpus=[3], snapshot=snap, port=free_port(), name="tiny-h")
        ready = await svc.wait_ready(node, "tiny-h", timeout=60)
        assert ready.state == InstanceState.READY, ready.reason
        env = environ_of(ready.pid)
        assert env["CUDA_VISIBLE_DEVICES"] == "3" and "HIP_VISIBLE_DEVICES" not in env
        snap = await sample_node(pool, node, probe=False)
        by_index = {g.index: g for g in snap.latest.gpus}
        assert [p.pid for p in by_index[3].processes] == [ready.pid]  # NVML sees the server on its GPU
        assert by_index[3].vram_used_mib > by_index[2].vram_used_mib + 1000
        stopped = await svc.stop(node, "tiny-h", int_timeout=5, term_timeout=2)
        assert stopped.state == InstanceState.STOPPED
    finally:
        await pool.close()


async def test_mi300x_and_h100_runs_of_one_benchmark_side_by_side(sim_node, tmp_path):
    store = ResultStore(tmp_path / "results")
    pool = TransportPool()
    ids = []
    try:
        for name, gpu in (("mi300x", "MI300X"), ("h100", "H100")):
            node = sim_node(name, gpu=gpu, count=2)
            svc = InstanceService(pool)
            snap = await sample_node(pool, node, probe=False)
            await svc.start(node, TINY, gpus=[1], snapshot=snap, port=free_port(), name=f"tiny-{name}")
            view = await svc.wait_ready(node, f"tiny-{name}", timeout=60)
            try:
                outcome = await BenchRunner(pool).run(node, view, BENCH, max_concurrency=4)
                assert outcome.ok, outcome
                # stored the way every face stores a run (services/runs/outcome.py)
                recorded = await RunRecorder(pool, store).serving(node, view, outcome, BENCH)
            finally:
                await svc.stop(node, f"tiny-{name}", int_timeout=5, term_timeout=2)
            assert recorded.stored_id, recorded
            ids.append(recorded.stored_id)
    finally:
        await pool.close()
    runs = [store.get(i) for i in ids]
    rows = {(r["section"], r["key"]): r for r in compare_table(runs)}
    assert rows[("context", "gpu_model")]["values"] == ["AMD Instinct MI300X", "NVIDIA H100 80GB HBM3"]
    assert rows[("context", "node")]["values"] == ["mi300x", "h100"]
    assert rows[("setup", "model")]["values"] == ["tiny-llama", "tiny-llama"]
    throughput = rows[("metric", "output_throughput")]
    assert all(v and v > 0 for v in throughput["values"]) and throughput["delta"][1] is not None
    # history: each run names its GPU
    assert [run_summary(r)["gpu_model"] for r in runs] == ["AMD Instinct MI300X", "NVIDIA H100 80GB HBM3"]
    # the MI300X run keeps its partition; the whole H100 has none (MIG off)
    assert rows[("context", "partition")]["values"] == ["SPX/NPS1", None]


def test_docker_runtime_on_an_nvidia_node_uses_gpus_all_and_vllms_cuda_image():
    from console.core.serve.argv import build_docker_argv

    preset = ServePreset(
        name="big", model="meta-llama/Llama-3.1-8B-Instruct", runtime="docker", image="rocm/vllm:latest"
    )
    amd = build_docker_argv(preset, name="a", port=8000, gpus=[3])
    nvidia = build_docker_argv(preset, name="n", port=8000, gpus=[3], vendor="nvidia")
    assert "--device=/dev/kfd" in amd.argv and "rocm/vllm:latest" in amd.argv
    argv = list(nvidia.argv)
    assert "--device=/dev/kfd" not in argv and argv[argv.index("--gpus") + 1] == "all"
    assert "rocm/vllm:latest" not in argv and "vllm/vllm-openai:latest" in argv
    assert argv[argv.index("vllm/vllm-openai:latest") + 1 :][:3] == [
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert "CUDA_VISIBLE_DEVICES=3" in argv
    # an image the preset names for NVIDIA is kept
    own = ServePreset(name="n", model="m", runtime="docker", image="nvcr.io/nvidia/vllm:25.09")
    assert "nvcr.io/nvidia/vllm:25.09" in build_docker_argv(own, name="x", port=1, gpus=[0], vendor="nvidia").argv


async def test_an_instance_on_a_mig_instance_is_given_its_uuid(sim_node):
    """CUDA numbers MIG instances by UUID, never by the console's logical index."""
    from dataclasses import replace

    from console.core.model import SimulateSpec
    from console.services.instances import InstanceError

    node = replace(sim_node("h100-mig"), simulate=SimulateSpec(gpu="H100", count=2, seed=4, mig=(1,)))
    pool = TransportPool()
    svc = InstanceService(pool)
    try:
        snap = await sample_node(pool, node, probe=False)
        by_index = {g.index: g for g in snap.static}
        assert by_index[3].compute_partition == "MIG" and by_index[3].uuid.startswith("MIG-")
        assert by_index[0].uuid.startswith("GPU-")
        with pytest.raises(InstanceError, match="h100-mig: GPU 2 is a MIG instance: a vLLM server can use only one"):
            await svc.start(node, replace(TINY, tp=2), gpus=[2, 3], snapshot=snap, port=free_port(), name="two")
        await svc.start(node, TINY, gpus=[3], snapshot=snap, port=free_port(), name="tiny-mig")
        ready = await svc.wait_ready(node, "tiny-mig", timeout=60)
        assert ready.state == InstanceState.READY, ready.reason
        assert environ_of(ready.pid)["CUDA_VISIBLE_DEVICES"] == by_index[3].uuid
        snap = await sample_node(pool, node, probe=False)
        procs = {g.index: [p.pid for p in g.processes] for g in snap.latest.gpus}
        assert procs[3] == [ready.pid] and procs[2] == [] and procs[4] == []
        await svc.stop(node, "tiny-mig", int_timeout=5, term_timeout=2)
    finally:
        await pool.close()
