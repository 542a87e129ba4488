"""`bench accuracy` THROUGH THE CONSOLE: the real lm_eval (scripts/setup-lm-eval)
against a real vLLM-CPU instance started over a real sshd, on a gsm8k-format
dataset written here (no hub). The score is stored and shown beside the
instance's speed run; the instance's GPU is refused to an offline benchmark;
after the instance stops, an accuracy run fails in one line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.sshd import free_port
from tests.integration.vllm_cpu import console, env_flags, node_profile, serve_tiny

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [
    ("Tom has 3 apples and buys 4 more. How many apples does he have?", "3 + 4 = <<3+4=7>>7\n#### 7"),
    ("A box holds 6 pens. How many pens are in 2 boxes?", "2 * 6 = <<2*6=12>>12\n#### 12"),
    ("Sara had 10 dollars and spent 4. How much is left?", "10 - 4 = <<10-4=6>>6\n#### 6"),
    ("There are 5 birds and 3 fly away. How many remain?", "5 - 3 = <<5-3=2>>2\n#### 2"),
    ("A car has 4 wheels. How many wheels do 3 cars have?", "3 * 4 = <<3*4=12>>12\n#### 12"),
]


def cli(tmp: Path, *args: str, timeout: float = 500, hub_offline: bool = False) -> subprocess.CompletedProcess:
    # as on a node with no route to the hub: offline mode, an empty HF cache of our own
    offline = dict(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp / "hf-empty"))
    return console(tmp, *args, timeout=timeout, env=offline if hub_offline else None)


def write_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("test.jsonl", "train.jsonl"):
        with (folder / name).open("w") as fh:
            for question, answer in QUESTIONS:
                fh.write(json.dumps({"question": question, "answer": answer}) + "\n")
    return folder


@pytest.mark.timeout(900)
def test_accuracy_stored_beside_speed_and_refused_when_stopped(sshd, tiny_model, lm_eval, short_tmp):
    node_profile(short_tmp, sshd, model=tiny_model)
    env = env_flags(short_tmp / "s")  # the speed run's client gets the server's environment
    start = serve_tiny(short_tmp, "acc", free_port())
    stopped = False
    try:
        assert start.returncode == 0 and "acc: ready" in start.stdout, start.stdout + start.stderr
        dataset = write_dataset(short_tmp / "gsm8k-copy")
        acc = cli(
            short_tmp,
            "bench",
            "accuracy",
            "--node",
            "ssh-node",
            "--instance",
            "acc",
            "--dataset",
            str(dataset),
            "--limit",
            "3",
            "--num-fewshot",
            "2",
        )
        assert acc.returncode == 0, acc.stdout + acc.stderr
        assert "acc: gsm8k: exact_match,strict-match = " in acc.stdout
        acc_id = next(line.split()[-1] for line in acc.stdout.splitlines() if "stored as" in line)
        shown = json.loads(cli(short_tmp, "results", "show", acc_id, "--json").stdout)
        assert shown["context"]["run_kind"] == "accuracy" and shown["context"]["instance"] == "acc"
        score = shown["metrics"]["gsm8k_exact_match_flexible_extract"]
        assert 0.0 <= score <= 1.0  # the model is random: any value
        assert shown["result"]["results"]["gsm8k"]["exact_match,flexible-extract"] == score
        assert shown["result"]["n-samples"]["gsm8k"]["effective"] == 3

        speed = cli(
            short_tmp,
            "bench",
            "run",
            "--node",
            "ssh-node",
            "--instance",
            "acc",
            "--preset",
            "tiny",
            "--set",
            "num_prompts=8",
            "--concurrency",
            "2",
            *env,
        )
        assert speed.returncode == 0, speed.stdout + speed.stderr
        speed_id = next(line.split()[-1] for line in speed.stdout.splitlines() if "stored as" in line)
        text = f"gsm8k {score:.4g} (exact_match_flexible_extract, n=3)"
        listing = cli(short_tmp, "results", "list").stdout
        assert next(line for line in listing.splitlines() if line.startswith(speed_id)).count(text) == 1
        compare = cli(short_tmp, "results", "compare", speed_id, acc_id, "--json")
        rows = {r["key"]: r for r in json.loads(compare.stdout)["rows"]}
        assert rows["accuracy"]["values"][0] == text
        assert rows["run_kind"]["values"] == ["serving", "accuracy"]

        # no local copy and no hub (offline mode): the error says how to point at a local copy
        nohub = cli(
            short_tmp, "bench", "accuracy", "--node", "ssh-node", "--instance", "acc", "--limit", "2", hub_offline=True
        )
        assert nohub.returncode == 1 and nohub.stderr.count("\n") == 1, nohub.stderr
        assert "lm_eval could not fetch the gsm8k dataset from the Hugging Face hub" in nohub.stderr
        assert "give --dataset PATH with a local copy" in nohub.stderr

        busy = cli(short_tmp, "bench", "latency", "--node", "ssh-node", "--gpus", "0", f"--set=model={tiny_model}")
        assert busy.returncode == 1
        assert busy.stderr.strip() == "rocm-console: ssh-node: GPU 0 already serves instance acc", busy.stderr

        stop = cli(short_tmp, "serve", "stop", "acc", "--node", "ssh-node")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        stopped = True
        again = cli(
            short_tmp, "bench", "accuracy", "--node", "ssh-node", "--instance", "acc", "--dataset", str(dataset)
        )
        assert again.returncode == 1
        assert again.stderr.count("\n") == 1, again.stderr
        assert again.stderr.startswith("rocm-console: ssh-node: instance acc has stopped (exited): "), again.stderr
    finally:
        if not stopped:
            cli(short_tmp, "serve", "stop", "acc", "--node", "ssh-node")
