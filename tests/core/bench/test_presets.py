"""The bench presets in profiles/presets.toml: each is its seed's client command, flag for flag."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from console.core.bench.argv import build_bench_argv, sweep_points
from console.core.bench.output_parser import parse_result_blocks
from console.core.model import BenchPreset
from console.core.profiles import load_profile

ROOT = Path(__file__).resolve().parents[3]
PRESETS = ROOT / "profiles" / "presets.toml"
SEEDS = ROOT / "tests" / "fixtures" / "seeds"
SEED_000 = SEEDS / "000_383fc7ac89897e18.txt"
SEED_002 = SEEDS / "002_55bd4ff5afc03ea6.txt"
SEED_004 = SEEDS / "004_040c923192cb04a5.txt"
SHARED_SEEDS = ROOT.parent / "shared" / "seeds"

# Flags the console sets itself (the server address, the model, where results go)
CONSOLE_FLAGS = {
    "--port",
    "--host",
    "--base-url",
    "--model",
    "--tokenizer",
    "--save-result",
    "--result-dir",
    "--result-filename",
}
# Flags every argv carries; a seed that leaves them out runs with the same value by default
DEFAULTS = {"--backend": "vllm", "--endpoint": "/v1/completions", "--request-rate": "inf"}


@pytest.fixture(scope="module")
def presets() -> dict[str, BenchPreset]:
    return {p.name: p for p in load_profile([PRESETS]).bench_presets}


def seed_command(path: Path, start: str, occurrence: int = 0) -> list[str]:
    """The client command that begins at the occurrence-th `start` in a seed, with
    its `\\` continuation lines, shell variables from the script substituted."""
    text = path.read_text(encoding="utf-8")
    pos = -1
    for _ in range(occurrence + 1):
        pos = text.index(start, pos + 1)
    lines = text[pos:].split("\n")
    parts = []
    for line in lines:
        if line.strip().startswith("```"):
            break
        parts.append(line.rstrip().rstrip("\\"))
        if not line.rstrip().endswith("\\"):
            break
    command = " ".join(parts)
    variables = dict(re.findall(r"^(\w+)=(\S+)$", text, re.MULTILINE))
    command = re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), m.group(0)), command)
    return shlex.split(command)


def flags(argv) -> dict[str, str | bool]:
    out: dict[str, str | bool] = {}
    items = list(argv)
    for i, item in enumerate(items):
        if item.startswith("--"):
            value = items[i + 1] if i + 1 < len(items) and not items[i + 1].startswith("--") else True
            out[item] = value
    return out


def build(preset: BenchPreset, concurrency):
    client = ("vllm",) if preset.client == "vllm-bench" else ("python3", "benchmarks/benchmark_serving.py")
    return build_bench_argv(
        preset,
        client_cmd=client,
        base_url="http://127.0.0.1:8000",
        model="served-model",
        result_dir="/state/bench",
        result_filename="r.json",
        max_concurrency=concurrency,
    )


# preset name -> (seed file, where its client command starts, occurrence, flags a sweep replaces)
CASES = {
    "random-4096-512-rate1": (SEED_000, "python /app/vllm/benchmarks/benchmark_serving.py", 0, ()),
    "random-8192-1024-c64": (SEED_002, "vllm bench serve", 1, ()),
    "sharegpt-chat-sweep": (SEED_004, "benchmark_serving.py --backend", 0, ("--max-concurrency",)),
    "deepseek-random-128-128-c256": (SEED_000, "python3 /app/vllm/benchmarks/benchmark_serving.py", 0, ()),
}


def test_presets_load(presets):
    assert set(presets) == set(CASES) | {"tiny", "prefix-heavy", "trace-replay", "multi-turn-chat"}
    profile = load_profile([PRESETS])
    assert profile.nodes == ()
    assert [p.name for p in profile.bench_presets] == [
        *CASES,
        "tiny",
        "prefix-heavy",
        "trace-replay",
        "multi-turn-chat",
    ]


def test_preset_fields(presets):
    assert presets["random-4096-512-rate1"] == BenchPreset(
        name="random-4096-512-rate1",
        dataset="random",
        input_len=4096,
        output_len=512,
        request_rate=1.0,
        num_prompts=500,
        ignore_eos=True,
        percentile_metrics="ttft,tpot,itl,e2el",
        cold=True,
        source=str(PRESETS),
    )
    assert presets["random-8192-1024-c64"] == BenchPreset(
        name="random-8192-1024-c64",
        dataset="random",
        input_len=8192,
        output_len=1024,
        max_concurrency=(64,),
        num_prompts=128,
        seed=123,
        ignore_eos=True,
        percentile_metrics="ttft,tpot,itl,e2el",
        cold=True,
        source=str(PRESETS),
    )
    assert presets["sharegpt-chat-sweep"] == BenchPreset(
        name="sharegpt-chat-sweep",
        client="benchmark_serving",
        backend="openai-chat",
        endpoint="/v1/chat/completions",
        dataset="sharegpt",
        dataset_path="./ShareGPT_V3_unfiltered_cleaned_split.json",
        num_prompts=1024,
        max_concurrency=(128, 256, 512),
        source=str(PRESETS),
    )
    assert presets["deepseek-random-128-128-c256"] == BenchPreset(
        name="deepseek-random-128-128-c256",
        backend="vllm",
        dataset="random",
        input_len=128,
        output_len=128,
        max_concurrency=(256,),
        num_prompts=1000,
        cold=True,
        source=str(PRESETS),
    )
    assert presets["tiny"] == BenchPreset(
        name="tiny",
        dataset="random",
        input_len=64,
        output_len=64,
        num_prompts=20,
        max_concurrency=(4,),
        ignore_eos=True,
        percentile_metrics="ttft,tpot,itl,e2el",
        cold=True,
        source=str(PRESETS),
    )


def test_random_presets_are_cold_and_prefix_heavy_is_warm(presets):
    """Issue B2: a random preset's prefix-cache hits are warned about, prefix-heavy's never."""
    # multi-turn-chat is random too, but its turns carry the history: warm by design
    assert all(p.cold is True for p in presets.values() if p.dataset == "random" and not p.turns)
    heavy = presets["prefix-heavy"]
    assert heavy.dataset == "prefix_repetition" and heavy.cold is False
    argv = build(heavy, 4)
    i = argv.index("--dataset-name")
    assert argv[i + 1] == "prefix_repetition"
    assert argv[argv.index("--prefix-repetition-output-len") + 1] == "32"
    assert argv[argv.index("--prefix-repetition-num-prefixes") + 1] == "5"
    assert "--input-len" not in argv and "--random-input-len" not in argv


@pytest.mark.parametrize("name", list(CASES))
def test_preset_is_its_seed_command_flag_for_flag(presets, name):
    path, start, occurrence, swept = CASES[name]
    seed = flags(seed_command(path, start, occurrence))
    preset = presets[name]
    for concurrency in sweep_points(preset):
        ours = flags(build(preset, concurrency))
        for flag, value in seed.items():
            if flag in CONSOLE_FLAGS or flag in swept:
                continue
            assert ours.get(flag) == value, (flag, value, ours.get(flag))
        for flag, value in ours.items():
            if flag in CONSOLE_FLAGS or flag in swept or flag in seed:
                continue
            assert DEFAULTS.get(flag) == value, f"{flag} {value} is not in the seed's command"
    for flag in swept:
        assert int(seed[flag]) in sweep_points(preset)


def test_sweep_is_the_seed_logs_concurrencies(presets):
    blocks = parse_result_blocks(SEED_004.read_text(encoding="utf-8"))
    first_server = [b.setup["max_concurrency"] for b in blocks[:3]]
    assert tuple(first_server) == presets["sharegpt-chat-sweep"].max_concurrency == (128, 256, 512)


def test_every_bench_preset_cites_its_source():
    text = PRESETS.read_text()
    found = re.findall(r"((?:#[^\n]*\n)+)\[bench\.(\"[^\"]+\"|[\w-]+)\]", text)
    assert len(found) == len(re.findall(r"^\[bench\.", text, re.MULTILINE)) == len(CASES) + 4
    for comment, name in found:
        name = name.strip('"')
        if name == "multi-turn-chat":
            assert "guidellm run --help" in comment and "turns" in comment
            continue
        if name == "tiny":
            assert "reference/vllm-cpu.md" in comment
            continue
        if name == "prefix-heavy":
            assert "prefix_repetition" in comment and "--help" in comment
            continue
        if name == "trace-replay":
            assert "timed_trace" in comment and "CC BY 4.0" in comment
            continue
        seed = re.search(r"Seed (00\d)", comment)
        section = re.search(r'"[A-Z][^"]+"', comment)
        assert seed and section, f"{name}: no seed and section cited in {comment!r}"
        assert seed.group(1) == CASES[name][0].name[:3]
        # the cited section exists in that seed
        heading = section.group(0).strip('"')
        assert heading in CASES[name][0].read_text(encoding="utf-8"), (name, heading)


@pytest.mark.skipif(not SHARED_SEEDS.is_dir(), reason="shared seeds folder not next to the repo")
def test_fixture_seeds_match_the_shared_seeds():
    for copy in SEEDS.glob("*.txt"):
        assert copy.read_bytes() == (SHARED_SEEDS / copy.name).read_bytes(), copy.name
