"""profiles/presets.toml: loads, and each preset is its seed's command, flag for flag.

The seed excerpts below are copied verbatim from seeds/ (AMD's guides); when the
shared seeds folder is next to the repo, a test checks they still match it.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from pathlib import Path

import pytest

from console.core.model import ServePreset
from console.core.profiles import load_profile
from console.core.serve.argv import build_docker_argv, build_serve_argv
from console.core.serve.rules import check_cpx_tp, check_tp, env_for_vllm, version_warnings

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ROOT / "profiles" / "presets.toml"
SEEDS = ROOT.parent / "shared" / "seeds"

# ---------------------------------------------------------------- seed excerpts (verbatim)

SEED_000_ENV = """
export VLLM_USE_TRITON_FLASH_ATTN=0
export VLLM_V1_USE_PREFILL_DECODE_ATTENTION=1
"""

# seed 000, "Throughput Benchmark"
SEED_000_THROUGHPUT = """
export VLLM_USE_TRITON_FLASH_ATTN=0
export VLLM_V1_USE_PREFILL_DECODE_ATTENTION=1
MODEL=amd/Llama-3.1-405B-Instruct-FP8-KV
IN=128
OUT=2048
TP=8
PROMPTS=1500
MAX_NUM_SEQS=1500

python3 /app/vllm/benchmarks/benchmark_throughput.py \\
    --distributed-executor-backend mp \\
    --kv-cache-dtype fp8 \\
    --dtype float16 \\
    --disable-detokenize \\
    --gpu-memory-utilization 0.9 \\
    --trust-remote-code \\
    --model $MODEL \\
    --max-model-len 8192 \\
    --max-num-batched-tokens 131072 \\
    --max-seq-len-to-capture 131072 \\
    --input-len $IN \\
    --output-len $OUT \\
    --tensor-parallel-size $TP \\
    --num-prompts $PROMPTS \\
    --max-num-seqs $MAX_NUM_SEQS
"""
# benchmark_throughput.py options that are not engine flags
THROUGHPUT_ONLY = {"--disable-detokenize", "--input-len", "--output-len", "--num-prompts", "--max-num-seqs"}

# seed 000, "Online Serving Benchmark"
SEED_000_SERVE = """
export VLLM_USE_TRITON_FLASH_ATTN=0
vllm serve amd/Llama-3.1-70B-Instruct-FP8-KV \\
    --swap-space 16 \\
    --disable-log-requests \\
    --quantization fp8 \\
    --kv-cache-dtype fp8 \\
    --dtype float16 \\
    --max-model-len 8192 \\
    --tensor-parallel-size 8 \\
    --max-num-batched-tokens 65536 \\
    --gpu-memory-utilization 0.99 \\
    --num_scheduler-steps 10
"""

# seed 000, "CPX mode"
SEED_000_CPX = """
HIP_VISIBLE_DEVICES=0 \\
python3 /app/vllm/benchmarks/benchmark_throughput.py \\
    --max-model-len 4608 \\
    --num-scheduler-steps 10 \\
    --num-prompts 100 \\
    --model amd/Llama-3.1-8B-Instruct-FP8-KV \\
    --input-len 4096 \\
    --output-len 512 \\
    --dtype float16 \\
    --tensor-parallel-size 1 \\
    --output-json <path/to/output.json> \\
    --quantization fp8 \\
    --gpu-memory-utilization 0.99
"""

# seed 000, "AITER use cases"
SEED_000_AITER = """
export VLLM_ROCM_USE_AITER=1
export VLLM_ROCM_USE_AITER_MHA=0
export VLLM_ROCM_USE_AITER_RMSNORM=0
python3 /app/vllm/benchmarks/benchmark_latency.py --model amd/Mixtral-8x22B-Instruct-v0.1-FP8-KV -tp 8 --batch-size 256 --input-len 128 --output-len 2048
"""
LATENCY_ONLY = {"--batch-size", "--input-len", "--output-len"}

# seed 003, "AITER MoE requirements"
SEED_003_DEEPSEEK = """
VLLM_ROCM_USE_AITER=1 vllm serve deepseek-ai/DeepSeek-V3 \\
--block-size 1 \\
--tensor-parallel-size 8
"""

# seed 002, launch_server_llama_fp8.sh
SEED_002_FP8 = """
export SAFETENSORS_FAST_GPU=1
export VLLM_ROCM_USE_AITER=1
export VLLM_USE_V1=1
export NCCL_DEBUG=WARN
export VLLM_RPC_TIMEOUT=1800000

vllm serve amd/Llama-3.3-70B-Instruct-FP8-KV/ \\
    --tensor-parallel-size 1 \\
    --max-num-batched-tokens 32768 \\
    --port 8000 \\
    --trust-remote-code \\
    --no-enable-prefix-caching \\
    --disable-log-requests \\
    --gpu_memory_utilization 0.9 \\
    --async-scheduling \\
    --load-format safetensors \\
    --compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE", "custom_ops": ["-rms_norm", "-quant_fp8", "-silu_and_mul"]}' \\
    --kv-cache-dtype fp8 \\
"""

# seed 002, launch_server_llama_fp4.sh
SEED_002_FP4 = """
export SAFETENSORS_FAST_GPU=1
export VLLM_ROCM_USE_AITER=1
export VLLM_USE_V1=1
export NCCL_DEBUG=WARN
export VLLM_RPC_TIMEOUT=1800000
export VLLM_ROCM_USE_AITER_FP4_ASM_GEMM=1

vllm serve amd/Llama-3.3-70B-Instruct-MXFP4-Preview \\
    --tensor-parallel-size 1 \\
    --max-num-batched-tokens 32768 \\
    --port 8000 \\
    --trust-remote-code \\
    --no-enable-prefix-caching \\
    --disable-log-requests \\
    --gpu_memory_utilization 0.9 \\
    --async-scheduling \\
    --load-format safetensors \\
    --compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE"}' \\
    --kv-cache-dtype fp8 \\
"""

# (preset, seed file prefix, excerpt, seed flags left out on purpose, tp when the seed gives none)
CASES = [
    ("llama-3.1-8b-fp8", "000", SEED_000_THROUGHPUT, THROUGHPUT_ONLY, 1),
    ("llama-3.1-70b-fp8", "000", SEED_000_SERVE, set(), None),
    ("llama-3.1-405b-fp8", "000", SEED_000_THROUGHPUT, THROUGHPUT_ONLY, None),
    ("llama-3.1-8b-fp8-cpx", "000", SEED_000_CPX, THROUGHPUT_ONLY | {"--output-json"}, None),
    ("mixtral-8x22b-fp8", "000", SEED_000_AITER, LATENCY_ONLY, None),
    ("deepseek-v3", "003", SEED_003_DEEPSEEK, set(), None),
    ("llama-3.3-70b-fp8-mi355", "002", SEED_002_FP8, {"--port"}, None),
    ("llama-3.3-70b-mxfp4-mi355", "002", SEED_002_FP4, {"--port"}, None),
]
# The 8B preset is the seed-000 throughput template with the 8B checkpoint (the
# seed lists it among the pre-quantized models and runs 8B at TP 1 in CPX mode).
MODEL_OF = {"llama-3.1-8b-fp8": "amd/Llama-3.1-8B-Instruct-FP8-KV"}


# ---------------------------------------------------------------- excerpt parsing


def parse_excerpt(text: str) -> dict:
    """A seed shell snippet -> model, tp, flags [(flag, value|None)], env."""
    joined = re.sub(r"\\\n", " ", text)
    variables: dict[str, str] = {}
    env: dict[str, str] = {}
    command: list[str] = []
    for line in joined.splitlines():
        words = shlex.split(line)
        if not words:
            continue
        if words[0] == "export":
            name, value = words[1].split("=", 1)
            env[name] = value
            continue
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name, value = words.pop(0).split("=", 1)
            if words:  # VAR=x cmd ...: environment of the command
                env[name] = value
            else:  # VAR=x alone: a shell variable
                variables[name] = value
        if words:
            command = words
    words = [variables.get(w[1:], w) if w.startswith("$") else w for w in command]
    model = None
    if "serve" in words:
        model = words[words.index("serve") + 1]
        words = words[words.index("serve") + 2 :]
    else:
        words = words[2:]  # python3 script.py
    flags: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        flag = words[i]
        norm = "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag
        if i + 1 < len(words) and not words[i + 1].startswith("--") and words[i + 1] != "-tp":
            flags.append((norm, words[i + 1]))
            i += 2
        else:
            flags.append((norm, None))
            i += 1
    as_dict = dict(flags)
    model = model or as_dict.get("--model")
    tp = as_dict.get("--tensor-parallel-size") or as_dict.get("-tp")
    return {"model": model, "tp": int(tp) if tp else None, "flags": flags, "env": env}


def preset_flags(preset: ServePreset) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    args = list(preset.args)
    i = 0
    while i < len(args):
        norm = "--" + args[i][2:].replace("_", "-")
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append((norm, args[i + 1]))
            i += 2
        else:
            out.append((norm, None))
            i += 1
    return out


@pytest.fixture(scope="module")
def presets() -> dict[str, ServePreset]:
    profile = load_profile([PRESETS])
    return {p.name: p for p in profile.serve_presets}


# ---------------------------------------------------------------- loading


# multi-node presets (seed 003), checked flag for flag in tests/core/test_multinode.py
MULTINODE = {"llama-3.1-405b-tp8-pp2", "deepseek-v3-dp16-ep", "deepseek-v3-dp2-tp8-ep"}


def test_presets_load_with_the_profile_loader(presets):
    assert set(presets) == {case[0] for case in CASES} | {"tiny"} | MULTINODE
    assert all(p.runtime == "host" and p.image is None and p.port is None for p in presets.values())
    profile = load_profile([PRESETS])
    assert profile.nodes == ()  # presets only; bench presets are checked in bench/test_presets.py


def test_every_preset_cites_its_source():
    text = PRESETS.read_text()
    # the comment block right above each table names a seed (or the CPU reference)
    for match in re.finditer(r"((?:#[^\n]*\n)+)\[serve\.(\"[^\"]+\"|\w+)\]", text):
        comment, name = match.group(1), match.group(2).strip('"')
        source = re.search(r"Seed 00\d|reference/vllm-cpu\.md", comment)
        assert source, f"{name}: no source cited in {comment!r}"
    assert len(re.findall(r"^\[serve\.", text, re.MULTILINE)) == len(CASES) + 1 + len(MULTINODE)


def test_dotted_names_are_quoted():
    text = PRESETS.read_text()
    for name in re.findall(r"^\[serve\.([^\]]+)\]", text, re.MULTILINE):
        if "." in name.strip('"'):
            assert name.startswith('"') and name.endswith('"'), name


# ---------------------------------------------------------------- flag for flag


@pytest.mark.parametrize(("name", "seed", "excerpt", "left_out", "tp"), CASES, ids=[c[0] for c in CASES])
def test_preset_is_its_seed_command(presets, name, seed, excerpt, left_out, tp):
    preset = presets[name]
    parsed = parse_excerpt(excerpt)
    # model: the seed's, without the FP8 recipe's stray trailing slash
    assert preset.model == MODEL_OF.get(name, parsed["model"].rstrip("/"))
    assert preset.tp == (tp if tp is not None else parsed["tp"])
    owned = {"--tensor-parallel-size", "-tp", "--model", "--port"}
    seed_flags = [(f, v) for f, v in parsed["flags"] if f not in owned | left_out]
    assert preset_flags(preset) == seed_flags
    seed_env = {k: v for k, v in parsed["env"].items() if k != "HIP_VISIBLE_DEVICES"}
    # the seed's env, whole where the node's vLLM is unknown (some of it in env_by_vllm)
    assert dict(env_for_vllm(preset.env, preset.env_by_vllm, None)) == seed_env


def test_spot_checks_against_the_seeds(presets):
    def args(name):
        return presets[name].args

    def pairs(name):
        a = args(name)
        return {(a[i], a[i + 1]) for i in range(len(a) - 1)}

    for name in ("llama-3.1-8b-fp8", "llama-3.1-70b-fp8", "llama-3.1-405b-fp8"):
        assert ("--kv-cache-dtype", "fp8") in pairs(name)
        assert ("--max-model-len", "8192") in pairs(name)
        assert (
            dict(env_for_vllm(presets[name].env, presets[name].env_by_vllm, "0.9.1"))["VLLM_USE_TRITON_FLASH_ATTN"]
            == "0"
        )
    assert ("--max-num-batched-tokens", "65536") in pairs("llama-3.1-70b-fp8")
    assert ("--gpu-memory-utilization", "0.99") in pairs("llama-3.1-70b-fp8")
    assert ("--max-num-batched-tokens", "131072") in pairs("llama-3.1-405b-fp8")
    assert ("--gpu-memory-utilization", "0.9") in pairs("llama-3.1-405b-fp8")
    assert presets["llama-3.1-405b-fp8"].tp == 8 and presets["llama-3.1-70b-fp8"].tp == 8
    assert presets["llama-3.1-8b-fp8"].tp == 1

    for name in ("llama-3.3-70b-fp8-mi355", "llama-3.3-70b-mxfp4-mi355"):
        assert "--async-scheduling" in args(name)
        assert ("--kv-cache-dtype", "fp8") in pairs(name)
        assert ("--max-num-batched-tokens", "32768") in pairs(name)
        assert dict(presets[name].env)["VLLM_ROCM_USE_AITER"] == "1"
        assert dict(presets[name].env)["VLLM_RPC_TIMEOUT"] == "1800000"
        assert presets[name].tp == 1
    fp8_cc = args("llama-3.3-70b-fp8-mi355")[args("llama-3.3-70b-fp8-mi355").index("--compilation-config") + 1]
    assert (
        fp8_cc == '{"cudagraph_mode":"FULL_AND_PIECEWISE", "custom_ops": ["-rms_norm", "-quant_fp8", "-silu_and_mul"]}'
    )
    fp4 = presets["llama-3.3-70b-mxfp4-mi355"]
    assert ("--compilation-config", '{"cudagraph_mode":"FULL_AND_PIECEWISE"}') in pairs(fp4.name)
    assert dict(fp4.env)["VLLM_ROCM_USE_AITER_FP4_ASM_GEMM"] == "1"

    ds = presets["deepseek-v3"]
    assert (ds.model, ds.tp, ds.args, dict(ds.env)) == (
        "deepseek-ai/DeepSeek-V3",
        8,
        ("--block-size", "1"),
        {"VLLM_ROCM_USE_AITER": "1"},
    )
    mx = presets["mixtral-8x22b-fp8"]
    assert mx.model == "amd/Mixtral-8x22B-Instruct-v0.1-FP8-KV" and mx.tp == 8
    assert dict(mx.env) == {
        "VLLM_ROCM_USE_AITER": "1",
        "VLLM_ROCM_USE_AITER_MHA": "0",
        "VLLM_ROCM_USE_AITER_RMSNORM": "0",
    }
    assert "fp8" not in mx.args  # seed 000: "AITER does not support fp8 kv cache"
    cpx = presets["llama-3.1-8b-fp8-cpx"]
    assert cpx.tp == 1 and ("--max-model-len", "4608") in pairs(cpx.name)

    tiny = presets["tiny"]
    assert (tiny.model, tiny.tp, tiny.args, tiny.env) == (
        "tiny-llama",
        1,
        ("--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"),
        (("VLLM_CPU_KVCACHE_SPACE", "1"),),
    )


def norm_seed(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip().strip("|")]
    return " ".join(" ".join(lines).split())


@pytest.mark.skipif(not SEEDS.is_dir(), reason="seeds folder not next to the repo")
@pytest.mark.parametrize(
    "excerpt_seed",
    [
        (SEED_000_ENV, "000"),
        (SEED_000_THROUGHPUT, "000"),
        (SEED_000_SERVE, "000"),
        (SEED_000_CPX, "000"),
        (SEED_000_AITER, "000"),
        (SEED_003_DEEPSEEK, "003"),
        (SEED_002_FP8, "002"),
        (SEED_002_FP4, "002"),
    ],
)
def test_excerpts_are_verbatim(excerpt_seed):
    excerpt, prefix = excerpt_seed
    (path,) = SEEDS.glob(f"{prefix}_*.txt")
    assert norm_seed(excerpt) in norm_seed(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- rules and argv


def test_presets_pass_the_rules(presets):
    for preset in presets.values():
        assert check_tp(preset.tp, list(range(preset.tp))) is None
    cpx = presets["llama-3.1-8b-fp8-cpx"]
    assert check_cpx_tp(cpx.tp, {17: "CPX"}) is None
    assert check_cpx_tp(presets["llama-3.1-70b-fp8"].tp, {0: "CPX"}) is not None


def test_version_warnings_for_the_seed_presets(presets):
    # On the seed's own image (vLLM 0.9.1) the 70B command is clean ...
    p70 = presets["llama-3.1-70b-fp8"]

    def env(preset, version):
        return env_for_vllm(preset.env, preset.env_by_vllm, version)

    assert version_warnings("0.9.1", p70.args, env(p70, "0.9.1")) == []
    # ... and on 0.33 the console says what no longer works; the env it no longer reads is not set
    text = "\n".join(version_warnings("0.33.0", p70.args, env(p70, "0.33.0")))
    assert "--num-scheduler-steps" in text and "VLLM_USE_TRITON_FLASH_ATTN" not in text
    assert "VLLM_USE_TRITON_FLASH_ATTN" not in dict(env(p70, "0.32.0"))
    # issue U2: no seed preset sets a variable the node's vLLM release does not know
    for preset in presets.values():
        for version in ("0.6.3", "0.9.1", "0.12.0", "0.32.0", "0.33.0"):
            said = [w for w in version_warnings(version, (), env(preset, version)) if w.startswith("env ")]
            assert not [w for w in said if "VLLM_USE_TRITON_FLASH_ATTN" in w or "PREFILL_DECODE" in w], (
                preset.name,
                said,
            )
    mi355 = presets["llama-3.3-70b-fp8-mi355"]
    assert any("--async-scheduling" in w for w in version_warnings("0.9.1", mi355.args, mi355.env))
    assert any("VLLM_USE_V1" in w for w in version_warnings("0.12.0", mi355.args, mi355.env))


def test_every_preset_builds_literal_argv(presets):
    for preset in presets.values():
        cmd = build_serve_argv(preset, vllm="vllm", port=8000, gpus=list(range(preset.tp)))
        assert cmd.argv[:3] == ("vllm", "serve", preset.model)
        assert cmd.argv[9:] == preset.args
        assert dict(cmd.env)["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, range(preset.tp)))
        assert "HIP_VISIBLE_DEVICES" not in dict(cmd.env)
    fp8 = presets["llama-3.3-70b-fp8-mi355"]
    cmd = build_docker_argv(fp8, name="llama33", port=8000, gpus=[0], image="rocm/vllm-dev:nightly")
    assert (
        '{"cudagraph_mode":"FULL_AND_PIECEWISE", "custom_ops": ["-rms_norm", "-quant_fp8", "-silu_and_mul"]}'
        in cmd.argv
    )


def test_shell_metacharacters_from_a_profile_stay_literal(tmp_path):
    path = tmp_path / "weird.toml"
    path.write_text(
        textwrap.dedent(
            """
        [serve."weird.one"]
        model = "/models/a b;$(touch x)`id`|&<>*?"
        args = ["--chat-template", "{{ messages }} && rm -rf / ; echo $HOME", "--compilation-config", '{"k": ["-x", "$y"]}']
        env = { VLLM_NOTE = "a; b | c $(d) 'e' \\"f\\"" }
        """
        )
    )
    (preset,) = load_profile([path]).serve_presets
    cmd = build_serve_argv(preset, vllm="vllm", port=8000, gpus=[0])
    assert cmd.argv[2] == "/models/a b;$(touch x)`id`|&<>*?"
    assert "{{ messages }} && rm -rf / ; echo $HOME" in cmd.argv
    assert '{"k": ["-x", "$y"]}' in cmd.argv
    assert dict(cmd.env)["VLLM_NOTE"] == "a; b | c $(d) 'e' \"f\""
    docker = build_docker_argv(preset, name="w", port=8000, gpus=[0], image="img")
    assert "VLLM_NOTE=a; b | c $(d) 'e' \"f\"" in docker.argv
    assert docker.argv[docker.argv.index("img") + 3] == "/models/a b;$(touch x)`id`|&<>*?"
