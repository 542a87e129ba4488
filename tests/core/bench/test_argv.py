"""bench_argv: argv of `vllm bench serve` and benchmark_serving.py from a bench preset."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.core.bench.argv import (
    OVERRIDABLE,
    apply_bench_overrides,
    bench_endpoint,
    build_bench_argv,
    sweep_points,
)
from console.core.model import BenchPreset

HELP = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32-cpu" / "bench_serve_help_all.txt"
VLLM = ("vllm",)
SCRIPT = ("python3", "benchmarks/benchmark_serving.py")


def build(preset: BenchPreset, **kwargs) -> tuple[str, ...]:
    args = {
        "client_cmd": VLLM if preset.client == "vllm-bench" else SCRIPT,
        "base_url": "http://127.0.0.1:8011",
        "model": "/srv/models/tiny-llama",
        "result_dir": "/state/inst-1/bench",
        "result_filename": "run-1.json",
        "max_concurrency": None,
    }
    args.update(kwargs)
    return build_bench_argv(preset, **args)


def flag_value(argv, flag):
    i = argv.index(flag)
    return argv[i + 1]


TINY = BenchPreset(
    name="tiny",
    input_len=64,
    output_len=64,
    num_prompts=20,
    max_concurrency=(4,),
    ignore_eos=True,
    percentile_metrics="ttft,tpot,itl,e2el",
)


def test_vllm_bench_full_argv():
    assert build(TINY, max_concurrency=4) == (
        "vllm",
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        "http://127.0.0.1:8011",
        "--endpoint",
        "/v1/completions",
        "--model",
        "/srv/models/tiny-llama",
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        "64",
        "--num-prompts",
        "20",
        "--request-rate",
        "inf",
        "--max-concurrency",
        "4",
        "--ignore-eos",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--result-dir",
        "/state/inst-1/bench",
        "--result-filename",
        "run-1.json",
    )


def test_every_field_in_its_place():
    preset = BenchPreset(
        name="all",
        backend="openai",
        endpoint="/v1/completions",
        dataset="random",
        input_len=128,
        output_len=32,
        range_ratio=0.25,
        num_prompts=7,
        request_rate=2.5,
        burstiness=0.5,
        seed=123,
        ignore_eos=True,
        percentile_metrics="ttft,e2el",
        metric_percentiles="50,99.9",
        extra_args=("--temperature", "0", "--trust-remote-code"),
    )
    argv = build(preset, max_concurrency=16, tokenizer="meta-llama/Llama-3.1-70B-Instruct")
    assert argv[:3] == ("vllm", "bench", "serve")
    assert flag_value(argv, "--tokenizer") == "meta-llama/Llama-3.1-70B-Instruct"
    assert flag_value(argv, "--random-range-ratio") == "0.25"  # passed as written
    assert flag_value(argv, "--request-rate") == "2.5"
    assert flag_value(argv, "--burstiness") == "0.5"
    assert flag_value(argv, "--seed") == "123"
    assert flag_value(argv, "--metric-percentiles") == "50,99.9"
    assert flag_value(argv, "--max-concurrency") == "16"
    assert argv[-3:] == ("--temperature", "0", "--trust-remote-code")  # extra args last


def test_legacy_script_argv():
    preset = BenchPreset(
        name="sharegpt",
        client="benchmark_serving",
        backend="openai-chat",
        dataset="sharegpt",
        dataset_path="./ShareGPT_V3_unfiltered_cleaned_split.json",
        num_prompts=1024,
        max_concurrency=(128, 256, 512),
    )
    argvs = [build(preset, max_concurrency=c) for c in sweep_points(preset)]
    assert [flag_value(a, "--max-concurrency") for a in argvs] == ["128", "256", "512"]
    assert argvs[0] == (
        "python3",
        "benchmarks/benchmark_serving.py",
        "--backend",
        "openai-chat",
        "--base-url",
        "http://127.0.0.1:8011",
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        "/srv/models/tiny-llama",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        "./ShareGPT_V3_unfiltered_cleaned_split.json",
        "--num-prompts",
        "1024",
        "--request-rate",
        "inf",
        "--max-concurrency",
        "128",
        "--save-result",
        "--result-dir",
        "/state/inst-1/bench",
        "--result-filename",
        "run-1.json",
    )


def test_request_rate_formatting_and_no_limit():
    argv = build(BenchPreset(name="r", request_rate=1.0))
    assert flag_value(argv, "--request-rate") == "1"
    assert "--max-concurrency" not in argv
    assert flag_value(build(BenchPreset(name="r", request_rate=float("inf"))), "--request-rate") == "inf"
    assert sweep_points(BenchPreset(name="r")) == (None,)


@pytest.mark.parametrize(
    "dataset, fields, expected",
    [
        ("random", {"input_len": 10, "output_len": 20}, ["--random-input-len", "10", "--random-output-len", "20"]),
        ("random-mm", {"input_len": 10}, ["--random-input-len", "10"]),
        ("sonnet", {"input_len": 550, "output_len": 150}, ["--sonnet-input-len", "550", "--sonnet-output-len", "150"]),
        ("sharegpt", {"output_len": 256}, ["--sharegpt-output-len", "256"]),
        ("hf", {"output_len": 64}, ["--hf-output-len", "64"]),
        ("custom", {"output_len": 64}, ["--custom-output-len", "64"]),
        ("burstgpt", {"input_len": 5, "output_len": 6}, ["--input-len", "5", "--output-len", "6"]),
        ("sharegpt", {}, []),
    ],
)
def test_length_flags_per_dataset(dataset, fields, expected):
    argv = build(BenchPreset(name="d", dataset=dataset, **fields))
    start = argv.index("--dataset-name") + 2
    end = argv.index("--num-prompts")
    assert list(argv[start:end]) == expected


@pytest.mark.parametrize(
    "preset, message",
    [
        (BenchPreset(name="x", dataset="sharegpt", input_len=100), "brings its own prompts"),
        (BenchPreset(name="x", dataset="sonnet", range_ratio=0.5), "random dataset only"),
        (BenchPreset(name="x", client="benchmark_serving", dataset="burstgpt", output_len=5), "no length flags"),
        (BenchPreset(name="x", backend="openai-chat", endpoint="/v1/completions"), "chat/completions"),
        (BenchPreset(name="x", endpoint="v1/completions"), "must start with '/'"),
        (BenchPreset(name="x", client="curl"), "unknown client"),
        (BenchPreset(name="x", extra_args=("--model", "other")), "instance's model"),
        (BenchPreset(name="x", extra_args=("--base-url=http://x",)), "instance's address"),
        (BenchPreset(name="x", extra_args=("--result_dir", "/tmp")), "state folder"),
        (BenchPreset(name="x", extra_args=("--num-prompts", "5")), "num_prompts instead"),
        (BenchPreset(name="x", extra_args=("--ignore-eos",)), "ignore_eos instead"),
    ],
)
def test_refused(preset, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build(preset)


def test_tokenizer_twice_is_refused():
    preset = BenchPreset(name="x", extra_args=("--tokenizer", "a"))
    assert "--tokenizer" in build(preset)
    with pytest.raises(ValueError, match="tokenizer"):
        build(preset, tokenizer="b")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"base_url": "127.0.0.1:8000"}, "http"),
        ({"base_url": "http://host:8000/v1"}, "/v1"),
        ({"base_url": "http://host :8000"}, "http"),
        ({"model": ""}, "model"),
        ({"result_filename": "a/b.json"}, "'/'"),
        ({"result_dir": "x\ny"}, "single line"),
        ({"max_concurrency": 0}, "positive"),
        ({"max_concurrency": True}, "positive"),
        ({"client_cmd": ()}, "client command"),
        ({"client_cmd": "vllm"}, "client command"),  # a shell string is not an argv
        ({"tokenizer": ""}, "tokenizer"),
    ],
)
def test_bad_build_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build(TINY, **kwargs)


def test_base_url_trailing_slash_and_odd_values_stay_single_items():
    preset = BenchPreset(name="x", dataset="sharegpt", dataset_path="/data/my sets/share gpt.json")
    argv = build(preset, base_url="https://node-a:8443/", model="my model; rm -rf /")
    assert flag_value(argv, "--base-url") == "https://node-a:8443"
    assert flag_value(argv, "--dataset-path") == "/data/my sets/share gpt.json"
    assert flag_value(argv, "--model") == "my model; rm -rf /"
    assert all(isinstance(item, str) for item in argv)


def test_endpoint_defaults():
    assert bench_endpoint(BenchPreset(name="x")) == "/v1/completions"
    assert bench_endpoint(BenchPreset(name="x", backend="openai-chat")) == "/v1/chat/completions"
    assert bench_endpoint(BenchPreset(name="x", endpoint="/v1/custom")) == "/v1/custom"


# ---------------------------------------------------------------- overrides


def test_overrides_map_to_preset_fields():
    argv = build(TINY, overrides={"num_prompts": "50"}, max_concurrency=4)
    assert flag_value(argv, "--num-prompts") == "50"
    changed = apply_bench_overrides(
        TINY,
        {
            "num-prompts": "100",
            "--request_rate": "2",
            "max_concurrency": "1,4,16",
            "seed": "",
            "ignore_eos": "false",
            "dataset_name": "random",
            "random_input_len": "1024",
            "extra_args": "--temperature 0 --metadata 'run=a b'",
            "percentile_metrics": "ttft",
            "client": "benchmark_serving",
        },
    )
    assert changed.num_prompts == 100 and changed.request_rate == 2.0
    assert changed.max_concurrency == (1, 4, 16) and sweep_points(changed) == (1, 4, 16)
    assert changed.seed is None and changed.ignore_eos is False and changed.input_len == 1024
    assert changed.extra_args == ("--temperature", "0", "--metadata", "run=a b")
    assert changed.client == "benchmark_serving" and changed.percentile_metrics == "ttft"
    assert apply_bench_overrides(TINY, {"request_rate": "inf"}).request_rate is None
    assert apply_bench_overrides(TINY, {"max_concurrency": "[2, 8]"}).max_concurrency == (2, 8)
    assert apply_bench_overrides(TINY, {"max_concurrency": ""}).max_concurrency == ()
    assert apply_bench_overrides(TINY, {}) is TINY
    assert "name" not in OVERRIDABLE and "source" not in OVERRIDABLE


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_promts": "5"}, "unknown bench preset key"),
        ({"name": "other"}, "unknown bench preset key"),
        ({"num_prompts": "0"}, "must be >= 1"),
        ({"num_prompts": "many"}, "expected an integer"),
        ({"request_rate": "fast"}, 'expected a number or "inf"'),
        ({"ignore_eos": "yes"}, "expected true or false"),
        ({"range_ratio": "1.5"}, "must be >= 0 and < 1"),
        ({"percentile_metrics": "ttft,foo"}, "unknown metric 'foo'"),
        ({"client": "curl"}, "must be one of"),
        ({"num_prompts": ""}, "empty value"),
        ({"extra_args": "'unclosed"}, "cannot split"),
    ],
)
def test_bad_overrides(overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build(TINY, overrides=overrides)


# ---------------------------------------------------------------- the real 0.32 client


def test_every_flag_exists_in_the_032_help():
    help_flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", HELP.read_text()))
    preset = BenchPreset(
        name="all",
        backend="openai",
        input_len=128,
        output_len=32,
        range_ratio=0.25,
        request_rate=2.5,
        burstiness=0.5,
        seed=1,
        ignore_eos=True,
        percentile_metrics="ttft",
        metric_percentiles="99",
    )
    argvs = [
        build(preset, max_concurrency=8, tokenizer="t"),
        build(BenchPreset(name="s", dataset="sharegpt", dataset_path="x.json", output_len=5)),
        build(BenchPreset(name="h", dataset="hf", output_len=5)),
        build(BenchPreset(name="c", dataset="custom", output_len=5)),
        build(BenchPreset(name="b", dataset="burstgpt", input_len=5, output_len=5)),
    ]
    used = {item for argv in argvs for item in argv if item.startswith("--")}
    assert used - help_flags == set()
