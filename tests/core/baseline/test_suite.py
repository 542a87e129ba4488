"""Suite files: the shipped ones load and fit the shipped presets; every mistake is
one line naming the file, the line, the table and the key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from console.core.baseline.suite import (
    DEFAULT_METRICS,
    SUITES_DIR,
    SuiteError,
    check_suite,
    load_suite,
    parse_suite,
    suite_paths,
)
from console.core.bench.argv import apply_bench_overrides
from console.core.bench.offline import PRESETS_PATH, apply_offline_overrides, load_offline_presets
from console.core.profiles import PROFILES_DIR, demo_profile_path, load_profile

GOOD = """\
[suite]
repeats = 4

[serve]
preset = "tiny"
set = { max_num_seqs = 1, enforce_eager = true }

[[point]]
preset = "tiny"
concurrency = 4

[[point]]
input_len = 128
output_len = 32
rate = "inf"
num_prompts = 10
repeats = 3
metrics = ["output_throughput", "p99_itl_ms"]

[[point]]
kind = "latency"
input_len = 32
output_len = 16
batch_size = 2

[accuracy]
task = "gsm8k"
limit = 20
"""


def profile_names(profile):
    return {
        "serve_presets": {p.name for p in profile.serve_presets},
        "bench_presets": {b.name: b.max_concurrency for b in profile.bench_presets},
        "offline_presets": {(o.kind, o.name) for o in load_offline_presets(PRESETS_PATH)},
    }


def error(text: str, file: str = "s.toml") -> str:
    with pytest.raises(SuiteError) as info:
        parse_suite(textwrap.dedent(text), file)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------- shipped suites


def test_demo_suite_fits_the_demo_profile_and_its_presets():
    suite = load_suite(SUITES_DIR / "demo.toml")
    profile = load_profile([PROFILES_DIR / "presets.toml", demo_profile_path()])
    check_suite(suite, **profile_names(profile))
    assert suite.name == "demo" and suite.serve == "tiny" and suite.repeats == 3
    assert [p.name for p in suite.points] == ["tiny-c4", "tiny-c16", "offline-throughput"]
    # every serving point becomes a bench preset with one load level
    bench = {b.name: b for b in profile.bench_presets}
    for point in suite.points[:2]:
        preset = apply_bench_overrides(bench["tiny"], point.overrides())
        assert preset.max_concurrency == (point.setting("concurrency"),)
    assert suite.points[2].kind == "throughput" and suite.points[2].metrics == DEFAULT_METRICS["throughput"]


def test_vllm_cpu_suite_fits_the_integration_tests_profile(tmp_path):
    # The serve preset as tests/integration/test_serve_real_vllm.py defines it.
    lab = tmp_path / "lab.toml"
    lab.write_text(
        '[serve.tiny-real]\nmodel = "/tmp/tiny-llama"\ntp = 1\n'
        'args = ["--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"]\n'
    )
    suite = load_suite(SUITES_DIR / "vllm-cpu-tiny.toml")
    check_suite(suite, **profile_names(load_profile([PROFILES_DIR / "presets.toml", lab])))
    assert suite.serve == "tiny-real"
    assert suite.accuracy is not None and suite.accuracy.task == "gsm8k" and suite.accuracy.repeats >= 3
    offline = suite.point("offline-throughput")
    assert offline is not None
    preset = next(p for p in load_offline_presets(PRESETS_PATH) if p.kind == "throughput")
    changed = apply_offline_overrides(preset, offline.overrides())
    assert (changed.input_len, changed.output_len, changed.num_prompts) == (32, 16, 20)


def test_suite_paths_lists_the_shipped_suites():
    names = [p.name for p in suite_paths()]
    assert "demo.toml" in names and "vllm-cpu-tiny.toml" in names
    assert suite_paths(Path("/nonexistent-folder")) == []


# ---------------------------------------------------------------- the format


def test_a_full_suite_parses():
    suite = parse_suite(GOOD, "profiles/suites/lab.toml")
    assert suite.name == "lab" and suite.repeats == 4 and suite.min_effect_pct == 10.0
    assert suite.serve_set == (("max_num_seqs", "1"), ("enforce_eager", "true"))
    first, second, third = suite.points
    assert (first.name, first.repeats, first.metrics) == ("tiny-c4", 4, DEFAULT_METRICS["serving"])
    assert first.overrides() == {"max_concurrency": "4"}
    assert second.name == "serving-rinf" and second.repeats == 3
    assert second.overrides() == {"input_len": "128", "output_len": "32", "num_prompts": "10", "request_rate": "inf"}
    assert second.metrics == ("output_throughput", "p99_itl_ms")
    assert (third.name, third.kind, third.metrics) == ("latency-3", "latency", ("latency_s", "latency_p99_s"))
    assert third.overrides() == {"input_len": "32", "output_len": "16", "batch_size": "2"}
    assert suite.accuracy is not None and suite.accuracy.limit == 20 and suite.accuracy.repeats == 4
    assert first.line == 8 and second.line == 12 and first.preset_line == 9 and suite.serve_line == 5


def test_plan_runs_points_round_robin_serving_first():
    suite = parse_suite(GOOD, "s.toml")
    order = [(p.name, r) for p, r in suite.plan()]
    assert order[:4] == [("tiny-c4", 1), ("serving-rinf", 1), ("tiny-c4", 2), ("serving-rinf", 2)]
    assert order[4:7] == [("tiny-c4", 3), ("serving-rinf", 3), ("tiny-c4", 4)]  # 3 repeats for the second
    assert order[7:] == [("latency-3", r) for r in range(1, 5)]  # offline after the instance


# ---------------------------------------------------------------- one-line errors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[suite]\nrepeats = 2\n[serve]\npreset = "tiny"\n[[point]]\npreset = "tiny"\n',
            "s.toml:2: [suite] key 'repeats': must be 3 to 20, got 2 (the noise of a point is measured "
            "from its repeats: fewer than 3 cannot tell noise from a change)",
        ),
        (
            '[serve]\npreset = "tiny"\n[accuracy]\ntask = "gsm8k"\nrepeats = 1\n',
            "s.toml:5: [accuracy] key 'repeats': must be 2 to 20, got 1 (a score needs a second repeat to show "
            "it stays put)",
        ),
        (
            '[serve]\npreset = "tiny"\n[[pionts]]\npreset = "tiny"\n',
            "s.toml:3: key 'pionts': unknown table (did you mean 'point'? known: suite, serve, point, accuracy)",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]]\npreset = "tiny"\n\n[[point]]\npreset = "tiny"\nconcurrency = 0\n',
            "s.toml:8: [point 2] key 'concurrency': must be at least 1, got 0",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]]\nkind = "throughput"\ninput_len = 8\noutput_len = 8\nconcurrency = 4\n',
            "s.toml:7: [point 1] key 'concurrency': not a key of a throughput point (it belongs to serving points)",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]]\npreset = "tiny"\nmetrics = ["output_tput"]\n',
            "s.toml:5: [point 1] key 'metrics': item 1: 'output_tput' is not a metric of a serving run "
            "(e.g. output_throughput, request_throughput, median_ttft_ms, p99_itl_ms)",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]]\nkind = "latency"\npreset = "x"\nmetrics = ["latency_p95_s"]\n',
            "s.toml:6: [point 1] key 'metrics': item 1: 'latency_p95_s' is not a metric of a latency run "
            "(latency_s or latency_p10_s ... latency_p99_s)",
        ),
        ('[[point]]\npreset = "tiny"\n', "s.toml: missing table [serve]"),
        (
            "[serve]\nset = { x = 1 }\n[[point]]\n",
            "s.toml:1: [serve] key 'preset': missing: the serve preset the suite starts",
        ),
        (
            '[serve]\npreset = "tiny"\n[serve.set]\nport = 8000\n',
            "s.toml:4: [serve.set] key 'port': port: the console sets it from --port or the preset's port",
        ),
        (
            '[serve]\npreset = "tiny"\nset = { hf_token = "hf_abc" }\n[[point]]\npreset = "tiny"\n',
            "s.toml:3: [serve.set] key 'hf_token': hf_token: secrets stay out of argv; export HF_TOKEN instead",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]]\npreset = "tiny"\n[[point]]\nname = "tiny"\npreset = "tiny"\n',
            "s.toml:6: [point 2] key 'name': a second point named 'tiny': give each point its own name",
        ),
        ('[serve]\npreset = "tiny"\n', "s.toml: the suite has no [[point]] and no [accuracy]: nothing to measure"),
        (
            '[serve]\npreset = "tiny"\n[[point]]\nconcurrency = 4\n',
            "s.toml:3: [point 1]: no preset and no input_len / output_len: name a preset or give the lengths",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]]\npreset = "tiny"\nrate = "fast"\n',
            "s.toml:5: [point 1] key 'rate': expected requests per second or \"inf\", got string 'fast'",
        ),
        (
            '[serve]\npreset = "tiny"\n[accuracy]\nlimit = 5\n',
            "s.toml:3: [accuracy] key 'task': missing: the lm_eval task (e.g. gsm8k)",
        ),
        (
            '[serve]\npreset = "tiny"\n[accuracy]\ntask = "gsm8k"\nmetrics = ["mmlu_acc"]\n',
            "s.toml:5: [accuracy] key 'metrics': item 1: 'mmlu_acc' is not a score of gsm8k "
            "(e.g. gsm8k_exact_match_flexible_extract)",
        ),
        (
            '[serve]\npreset = "tiny"\n[accuracy]\ntask = "gsm8k"\nmin_effect = 5\n',
            "s.toml:5: [accuracy] key 'min_effect': an accuracy difference from 0 to 1 (0.02 = 2 points), got 5",
        ),
        (
            '[suite]\nmin_effect = 150\n[serve]\npreset = "tiny"\n',
            "s.toml:2: [suite] key 'min_effect': a percentage from 0 to below 100, got 150",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]\n',
            "s.toml:3: invalid TOML: Expected ']]' at the end of an array declaration (column 8)",
        ),
        (
            '[serve]\npreset = "tiny"\n[[point]]\npreset = "tiny"\nkind = "offline"\n',
            "s.toml:5: [point 1] key 'kind': 'offline' is not one of serving, latency, throughput",
        ),
    ],
)
def test_each_mistake_is_one_line_naming_file_line_table_and_key(text, expected):
    assert error(text) == expected


def test_a_multi_line_value_does_not_shift_the_lines():
    text = (
        '[serve]\npreset = "tiny"\n\n[[point]]\npreset = "tiny"\nmetrics = [\n  "output_throughput",\n'
        '  "p99_ttft_ms",\n]\ndescription = """\nname = 1\n"""\n'
    )
    assert error(text) == (
        "s.toml:10: [point 1] key 'description': unknown key "
        "(known: name, kind, repeats, metrics, preset, input_len, output_len, num_prompts, concurrency, rate)"
    )


def test_an_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(SuiteError) as info:
        load_suite(tmp_path / "missing.toml")
    assert str(info.value) == f"{tmp_path / 'missing.toml'}: cannot read file: No such file or directory"
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'[serve]\npreset = "\xff"\n')
    with pytest.raises(SuiteError, match=r"bad.toml:2: not UTF-8 text"):
        load_suite(bad)


# ---------------------------------------------------------------- against the profile


def test_names_are_held_against_the_profile(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text('[serve]\npreset = "tinny"\n\n[[point]]\npreset = "tiny"\n')
    profile = load_profile([PROFILES_DIR / "presets.toml"])
    with pytest.raises(SuiteError) as info:
        check_suite(load_suite(path), **profile_names(profile))
    assert (
        str(info.value)
        == f"{path}:2: [serve] key 'preset': no [serve.tinny] preset in the profile (did you mean 'tiny'?)"
    )

    path.write_text('[serve]\npreset = "tiny"\n\n[[point]]\npreset = "sharegpt-chat-sweep"\n')
    with pytest.raises(SuiteError) as info:
        check_suite(load_suite(path), **profile_names(profile))
    assert str(info.value) == (
        f"{path}:5: [point 1] key 'preset': bench preset 'sharegpt-chat-sweep' sweeps max_concurrency "
        "[128, 256, 512]: a point is one load level, give concurrency = N (one point per level)"
    )
    path.write_text('[serve]\npreset = "tiny"\n\n[[point]]\npreset = "sharegpt-chat-sweep"\nconcurrency = 128\n')
    check_suite(load_suite(path), **profile_names(profile))

    path.write_text('[serve]\npreset = "tiny"\n\n[[point]]\nkind = "latency"\npreset = "seed000-405b-fp8"\n')
    with pytest.raises(SuiteError) as info:
        check_suite(load_suite(path), **profile_names(profile))
    assert str(info.value) == (
        f"{path}:6: [point 1] key 'preset': no [latency.seed000-405b-fp8] preset in the profile "
        "(did you mean 'seed000-405b-fp8-tp8'?)"
    )
