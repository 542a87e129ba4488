"""Issue U: a run's title and stored setup say what was overridden, not only the preset's name."""

from __future__ import annotations

from console.core.bench.argv import apply_bench_overrides
from console.core.model import BenchPreset
from console.core.results.build import preset_changes, run_from_console
from console.core.results.display import run_summary, run_title, title_of

CHAT = BenchPreset(name="chat-short", dataset="random", input_len=256, output_len=128, max_concurrency=(4,))
RESULT = {"completed": 10, "failed": 0, "output_throughput": 100.0, "max_concurrency": 16, "num_prompts": 10}


def test_title_names_every_overridden_field():
    ran = apply_bench_overrides(CHAT, {"max_concurrency": "16", "input_len": "512"})
    changes = preset_changes(CHAT, ran)
    assert changes == {"input_len": 512, "max_concurrency": [16]}
    assert run_title("chat-short", {"max_concurrency": [16], "input_len": 512}) == "chat-short · conc 16 · in 512"
    assert preset_changes(CHAT, CHAT) == {} and run_title("chat-short", {}) == "chat-short"


def test_stored_run_keeps_its_overrides_and_title():
    ran = apply_bench_overrides(CHAT, {"max_concurrency": "16", "input_len": "512"})
    run = run_from_console({"node": "n1"}, RESULT, setup=ran, overrides=preset_changes(CHAT, ran))
    assert run.context["bench_overrides"] == {"input_len": 512, "max_concurrency": [16]}
    assert title_of(run) == "chat-short · in 512 · conc 16"
    assert run.setup["input_len"] == 512 and run.setup["max_concurrency"] == 16
    assert run_summary(run)["setup"].startswith("chat-short*: random 512/128 c16")
    # without overrides: the preset's name, no mark
    plain = run_from_console({"node": "n1"}, RESULT, setup=CHAT)
    assert title_of(plain) == "chat-short" and run_summary(plain)["setup"].startswith("chat-short: ")
    assert "bench_overrides" not in plain.context
