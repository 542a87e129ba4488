"""`models pull|pulls|rm` and the serve preflight on the demo's simulated nodes.

The simulated hub (console/sim/huggingface_hub) knows the seeds' models, gates meta-llama's
without a token, and writes pulls into the simulated cache in the hub's real layout, so the
agent's pull, progress, re-attach and removal run here as on a node (the real hub and
huggingface_hub: tests/integration/test_models_pull_real.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_demoCanaryToken42"


@pytest.fixture
def run_cli(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), ROCM_CONSOLE_DATA_DIR=str(tmp_path / "data"), PYTHONPATH=str(ROOT))
    for key in ("ROCM_CONSOLE_DEMO_STATE", "HF_TOKEN", "HF_ENDPOINT"):
        env.pop(key, None)

    def run(*args: str, extra: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "console", *args],
            capture_output=True,
            text=True,
            env={**env, **(extra or {})},
            timeout=120,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )

    return run


def _models(run_cli, node: str) -> dict:
    proc = run_cli("models", "list", "--demo", "--node", node, "--json")
    assert proc.returncode == 0, proc.stderr
    return {m["name"]: m for m in json.loads(proc.stdout)["nodes"][0]["models"]}


def test_an_interrupted_pull_completes_and_lists_complete(run_cli):
    model = "amd/Llama-3.1-70B-Instruct-FP8-KV"  # the CPX node's cache holds it half pulled
    assert _models(run_cli, "mi300x-cpx")[model]["complete"] is False
    fast = {"ROCM_CONSOLE_SIM_PULL_RATE": "1e12"}
    proc = run_cli("models", "pull", model, "--node", "mi300x-cpx", "--demo", extra=fast)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pull of amd/Llama-3.1-70B-Instruct-FP8-KV started (revision c426b4772c89)" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith(f"mi300x-cpx: {model}: pulled, 73.5 GB in ")
    assert _models(run_cli, "mi300x-cpx")[model]["complete"] is True
    pulls = run_cli("models", "pulls", "--demo", "--node", "mi300x-cpx", "--json")
    [rec] = json.loads(pulls.stdout)["pulls"]  # the history's row, written when the pull ended
    assert rec["state"] == "ok" and rec["bytes"] == rec["total_bytes"] and rec["files"] > 1
    assert 73.5e9 <= rec["total_bytes"] < 73.6e9
    assert rec["origin"].startswith("cli@") and rec["ended"] >= rec["started"]


def test_a_detached_pull_is_reattached_cancelled_and_keeps_no_token(run_cli, tmp_path):
    model = "meta-llama/Llama-3.1-70B-Instruct"  # gated on the hub; not on the MI355X node
    gated = run_cli("models", "pull", model, "--node", "mi355x", "--demo")
    assert gated.returncode == 2
    [line] = gated.stderr.strip().splitlines()
    assert line.startswith(f"rocm-console: mi355x: model {model}: gated model (request access on the hub, then set")
    slow = {"HF_TOKEN": TOKEN, "ROCM_CONSOLE_SIM_PULL_RATE": "1e9"}  # 141 GB: minutes
    started = run_cli("models", "pull", model, "--node", "mi355x", "--demo", "--detach", extra=slow)
    assert started.returncode == 0, started.stdout + started.stderr
    assert f"mi355x: pull of {model} started" in started.stdout
    again = run_cli("models", "pull", model, "--node", "mi355x", "--demo", "--detach", extra=slow)
    assert f"mi355x: pull of {model} already running, following it" in again.stdout
    listed = run_cli("models", "pulls", "--demo", "--node", "mi355x")
    [header, row] = listed.stdout.splitlines()  # one row: the re-attach wrote the same pull's row
    assert header.split() == ["STARTED", "NODE", "MODEL", "STATE", "BYTES", "TOOK", "FROM"]
    assert row.split()[2:5] == ["mi355x", model, "running"] and " of 141.0 GB (" in row, row
    cancel = run_cli("models", "pull", model, "--node", "mi355x", "--demo", "--cancel")
    assert cancel.returncode == 0 and "pull cancelled at" in cancel.stdout, cancel.stdout + cancel.stderr
    stopped = run_cli("models", "pulls", "--demo", "--node", "mi355x", "--json")
    [rec] = json.loads(stopped.stdout)["pulls"]
    assert rec["state"] == "cancelled" and rec["bytes"] < rec["total_bytes"]
    assert rec["message"].startswith("stopped at ") and rec["ended"] is not None
    # the token went to the pull on stdin: nowhere in the node's files or the console's output
    texts = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size < 1 << 20]
    assert not any(TOKEN.encode() in t for t in texts)
    assert TOKEN not in started.stdout + started.stderr + again.stdout + listed.stdout


def test_rm_asks_is_refused_in_use_and_removes(run_cli):
    asked = run_cli("models", "rm", "meta-llama/Llama-3.1-70B-Instruct", "--node", "mi300x-spx", "--demo")
    assert asked.returncode == 2 and "confirmation needed: run in a terminal or pass --yes" in asked.stderr
    gone = run_cli("models", "rm", "meta-llama/Llama-3.1-70B-Instruct", "--node", "mi300x-spx", "--demo", "--yes")
    assert gone.returncode == 0, gone.stderr
    assert "mi300x-spx: removed meta-llama/Llama-3.1-70B-Instruct (1 revision(s), 141.0 GB freed)" in gone.stdout
    assert "meta-llama/Llama-3.1-70B-Instruct" not in _models(run_cli, "mi300x-spx")
    missing = run_cli("models", "rm", "meta-llama/Llama-3.1-70B-Instruct", "--node", "mi300x-spx", "--demo", "--yes")
    assert missing.returncode == 1 and "not in the Hugging Face cache" in missing.stderr


def test_serve_start_of_a_model_not_on_the_node_names_its_size_and_the_pull(run_cli):
    proc = run_cli("serve", "start", "--demo", "--node", "mi300x-cpx", "--preset", "llama-3.1-405b-fp8")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "rocm-console: mi300x-cpx: model amd/Llama-3.1-405B-Instruct-FP8-KV is not on the node (410.2 GB on the "
        "hub); pull it first: rocm-console models pull amd/Llama-3.1-405B-Instruct-FP8-KV --node mi300x-cpx"
    )


async def test_rm_is_refused_while_an_instance_serves_the_model():
    from console.core.instance_view import InstanceState, InstanceView
    from console.core.model import NodeSpec
    from console.services.models import ModelsError, remove_model, users_of

    model = "amd/Llama-3.1-8B-Instruct-FP8-KV"
    snap = f"/data/hub/models--{model.replace('/', '--')}/snapshots/f7b915a8"
    views = [
        InstanceView("n", "by-name", InstanceState.READY, model=model),
        InstanceView("n", "by-path", InstanceState.LOADING, model=snap),
        InstanceView("n", "ended", InstanceState.EXITED, model=model),
        InstanceView("other", "elsewhere", InstanceState.READY, model=model),
    ]
    assert users_of(model, views, "n") == ["by-name", "by-path"]
    with pytest.raises(ModelsError, match=r"^n: model amd/\S+ is in use by by-name, by-path: stop it first$"):
        await remove_model(None, NodeSpec(name="n", host="h"), model, views)  # type: ignore[arg-type]  # refused first


def test_model_dirs_are_listed_and_a_folder_model_needs_its_config(run_cli, tmp_path):
    models = tmp_path / "models"
    (models / "my-model").mkdir(parents=True)
    (models / "my-model" / "config.json").write_text('{"num_hidden_layers": 2}')
    (models / "my-model" / "model.safetensors").write_bytes(b"\0" * 4096)
    (models / "no-config").mkdir()
    (models / "no-config" / "model.safetensors").write_bytes(b"\0" * 16)
    profile = tmp_path / "lab.toml"
    profile.write_text(
        f"""
[models]
model_dirs = ["{models}"]

[nodes.sim]
transport = "local"
simulate = {{ gpu = "MI300X", count = 8 }}

[serve.folder]
model = "{models / "no-config"}"
"""
    )
    listed = run_cli("models", "list", "--profile", str(profile), "--json")
    assert listed.returncode == 0, listed.stderr
    found = {m["name"]: m for m in json.loads(listed.stdout)["nodes"][0]["models"]}
    assert found["my-model"]["source"] == "dir" and found["my-model"]["complete"] is True
    assert found["my-model"]["size_bytes"] == 4096 + len('{"num_hidden_layers": 2}')
    start = run_cli("serve", "start", "--profile", str(profile), "--node", "sim", "--preset", "folder")
    assert start.returncode == 2
    assert start.stderr.strip() == (
        f"rocm-console: sim: model {models / 'no-config'}: no readable config.json in {models / 'no-config'}"
    )


# ---------------------------------------------------------------- W2: bad values, disk, cancel


def test_values_that_start_with_a_dash_reach_the_agent_as_values(run_cli, tmp_path):
    """A model id, revision or `--to` that starts with `-` is that value on the node, never an
    option of the agent's parser (its help, its --cancel)."""
    help_model = run_cli("models", "pull", "--demo", "--node", "mi300x-cpx", "--", "--help")
    assert help_model.returncode == 2, help_model.stdout + help_model.stderr
    assert "usage:" not in help_model.stdout + help_model.stderr
    [line] = help_model.stderr.strip().splitlines()
    assert line.startswith("rocm-console: mi300x-cpx: model --help: ") and "Repository Not Found" in line, line
    model = "amd/Llama-3.1-8B-Instruct-FP8-KV"
    rev = run_cli("models", "pull", model, "--demo", "--node", "mi300x-cpx", "--revision=-h")
    assert rev.returncode == 2 and "usage:" not in rev.stdout + rev.stderr
    [line] = rev.stderr.strip().splitlines()
    assert "Revision Not Found" in line and "/revision/-h" in line, line
    cancel = run_cli("models", "pull", "--demo", "--node", "mi300x-cpx", "--cancel", "--", "--cancel")
    assert cancel.returncode == 1, cancel.stdout + cancel.stderr
    assert cancel.stderr.strip() == "rocm-console: mi300x-cpx: model --cancel: no pull of it on this node"
    rm = run_cli("models", "rm", "--demo", "--node", "mi300x-cpx", "--yes", "--", "-h")
    assert rm.returncode == 1, rm.stdout + rm.stderr
    assert rm.stderr.strip() == "rocm-console: mi300x-cpx: model -h: not in the Hugging Face cache on this node"
    # `--to` that starts with `-`: a folder of that name (the demo node's cwd is this test's), not an option
    fast = {"ROCM_CONSOLE_SIM_PULL_RATE": "1e12"}
    to = run_cli("models", "pull", model, "--demo", "--node", "mi300x-cpx", "--to=-x", extra=fast)
    assert to.returncode == 0, to.stdout + to.stderr
    assert to.stdout.strip().splitlines()[-1].endswith("/-x")
    assert (tmp_path / "-x" / "config.json").is_file()


def _disk_bytes(folder: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in folder.rglob("*"))


def test_a_demo_pull_to_a_folder_stays_sparse_and_cancel_of_a_done_pull_says_so(run_cli, tmp_path):
    """The simulated weights take no disk: 9.1 GB pulled `--to` a folder is a few kB of real blocks."""
    model = "amd/Llama-3.1-8B-Instruct-FP8-KV"
    fast = {"ROCM_CONSOLE_SIM_PULL_RATE": "1e12"}
    proc = run_cli("models", "pull", model, "--demo", "--node", "mi300x-cpx", "--to", str(tmp_path / "m"), extra=fast)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shards = sorted((tmp_path / "m").glob("*.safetensors"))
    assert [p.stat().st_size for p in shards] == [5_000_000_000, 4_080_000_000]
    assert _disk_bytes(tmp_path / "m") < 1 << 20  # `du`: the sizes, not the bytes
    assert _disk_bytes(tmp_path) < 64 << 20  # the whole demo (its caches, state and logs) too
    done = run_cli("models", "pull", model, "--demo", "--node", "mi300x-cpx", "--cancel")
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"rocm-console: mi300x-cpx: {model}: no running pull to cancel: it is done (9.1 GB in ")


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs filled to the last byte (needs root: skipped where mount is refused)."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        with open(small / "filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\1" * 4096)
            except OSError:
                pass
        yield small
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_a_disk_that_fills_ends_the_pull_in_one_line_and_cancel_says_it_failed(run_cli, full_disk):
    model = "amd/Llama-3.1-8B-Instruct-FP8-KV"
    fast = {"ROCM_CONSOLE_SIM_PULL_RATE": "1e12"}
    target = full_disk / "m"
    proc = run_cli("models", "pull", model, "--demo", "--node", "mi300x-cpx", "--to", str(target), extra=fast)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith(f"mi300x-cpx: {model}: pull failed: the disk filled at {target} (No space left on device")
    assert "`models pull` again resumes it" in last and "Traceback" not in proc.stderr
    assert not [p.name for p in full_disk.rglob("*") if p.name != "filler" and p.is_file()]  # no short file left
    pulls = run_cli("models", "pulls", "--demo", "--node", "mi300x-cpx", "--json")
    [rec] = json.loads(pulls.stdout)["pulls"]
    assert rec["state"] == "failed" and rec["message"].startswith("the disk filled at ")
    cancel = run_cli("models", "pull", model, "--demo", "--node", "mi300x-cpx", "--cancel")
    assert cancel.returncode == 1, cancel.stdout + cancel.stderr
    [line] = cancel.stderr.strip().splitlines()
    assert line.startswith(f"rocm-console: mi300x-cpx: {model}: no running pull to cancel: it failed: the disk filled")
    assert "cancelled" not in cancel.stdout
