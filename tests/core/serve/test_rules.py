"""serve_rules: refusals name the thing at fault; version warnings follow reference §3/§5."""

from __future__ import annotations

import pytest

from console.core.serve.rules import (
    check_cpx_tp,
    check_gpus_free,
    check_port,
    check_tp,
    choose_port,
    parse_version,
    version_warnings,
)

# ---------------------------------------------------------------- TP and GPUs


def test_check_tp():
    assert check_tp(8, list(range(8))) is None
    assert check_tp(1, [5]) is None
    assert check_tp(8, [0, 1]) == "TP 8 needs 8 GPUs, 2 given"
    assert check_tp(1, []) == "TP 1 needs 1 GPU, 0 given"
    assert check_tp(2, [3, 3]) == "GPU 3 is selected twice"
    assert check_tp(0, []) == "TP 0 is not valid: it must be 1 or more"


def test_check_cpx_tp():
    # seeds 000/001 "CPX mode": ONLY tp=1 is supported in CPX mode
    assert check_cpx_tp(1, {0: "CPX", 1: "CPX"}) is None
    assert check_cpx_tp(2, {0: "SPX", 1: "SPX"}) is None
    assert check_cpx_tp(2, {8: "SPX", 9: "cpx"}) == ("GPU 9 is in CPX mode, where only TP 1 runs (TP 2 asked)")
    assert check_cpx_tp(4, ["CPX", None]) == ("the selected GPUs are in CPX mode, where only TP 1 runs (TP 4 asked)")
    assert check_cpx_tp(4, [None, "DPX"]) is None


def test_check_gpus_free():
    busy = {3: "llama-a", 4: "llama-a", 6: "mixtral"}
    assert check_gpus_free([0, 1], busy) is None
    assert check_gpus_free([3], busy) == "GPU 3 already serves instance llama-a"
    assert check_gpus_free([2, 3, 4, 6], busy) == (
        "GPUs 3, 4 already serve instance llama-a; GPU 6 already serves instance mixtral"
    )


# ---------------------------------------------------------------- ports


def test_check_port():
    assert check_port(8000, set()) is None
    assert check_port(8000, {8000, 8001}) == "port 8000 is already in use"
    assert check_port(8001, {8001: "llama-a"}) == "port 8001 is already used by instance llama-a"
    assert check_port(0, ()) == "port 0 is out of range (1-65535)"
    assert check_port(65536, ()) == "port 65536 is out of range (1-65535)"
    assert check_port(True, ()) == "port True is out of range (1-65535)"  # type: ignore[arg-type]


def test_choose_port():
    assert choose_port(set()) == 8000
    assert choose_port({8000, 8001, 8003}) == 8002
    assert choose_port({9000}, start=9000) == 9001
    assert choose_port(set(), start=0) == 1
    with pytest.raises(ValueError, match="no free port"):
        choose_port(set(range(65000, 65536)), start=65000)


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("0.9.1", (0, 9, 1)),
        ("0.9.1+rocm", (0, 9, 1)),
        ("v0.6.3.post1", (0, 6, 3)),
        ("0.12.0rc1", (0, 12, 0)),
        ("0.32.0+cpu", (0, 32, 0)),
        ("0.33", (0, 33, 0)),
        ("vllm 0.10.2", (0, 10, 2)),
        ("", None),
        (None, None),
        ("unknown", None),
    ],
)
def test_parse_version(text, version):
    assert parse_version(text) == version


def test_triton_flash_attn_unknown_from_012():
    env = {"VLLM_USE_TRITON_FLASH_ATTN": "0"}
    assert version_warnings("0.11.0", [], env) == []
    assert version_warnings("0.9.1", [], env) == []
    (w12,) = version_warnings("0.12.0", [], env)
    assert w12 == "env VLLM_USE_TRITON_FLASH_ATTN is gone in vLLM 0.12.0 (last in 0.11): it has no effect"
    (w33,) = version_warnings("0.33.0", [], env)
    assert "VLLM_USE_TRITON_FLASH_ATTN" in w33 and "Unknown vLLM environment variable" in w33


def test_use_v1_gone_from_012_and_absent_in_063():
    env = {"VLLM_USE_V1": "1"}
    assert version_warnings("0.10.2", [], env) == []
    (w,) = version_warnings("0.12.0", [], env)
    assert w.startswith("env VLLM_USE_V1 is gone in vLLM 0.12.0") and "only engine" in w
    (old,) = version_warnings("0.6.3", [], env)
    assert old == "env VLLM_USE_V1 is not in vLLM 0.6.3 (first in 0.8.5): it has no effect"


def test_num_scheduler_steps_gone_after_09x():
    for spelling in (["--num-scheduler-steps", "10"], ["--num_scheduler-steps", "10"], ["--num_scheduler_steps=10"]):
        assert version_warnings("0.9.1", spelling, {}) == []
        (w,) = version_warnings("0.10.2", spelling, {})
        assert w.startswith("flag --num-scheduler-steps is gone in vLLM 0.10.2 (last in 0.9.x)")
        assert "unrecognized arguments" in w and "--async-scheduling" in w


def test_async_scheduling_only_from_010():
    assert version_warnings("0.10.2", ["--async-scheduling"], {}) == []
    assert version_warnings("0.33.0", ["--async-scheduling"], {}) == []
    (w,) = version_warnings("0.9.1", ["--async-scheduling"], {})
    assert w.startswith("flag --async-scheduling is not in vLLM 0.9.1 (first in 0.10)")


def test_renamed_unified_attention():
    old = {"VLLM_ROCM_USE_AITER": "1", "VLLM_USE_AITER_UNIFIED_ATTENTION": "1"}
    assert version_warnings("0.11.0", [], old) == []
    (w,) = version_warnings("0.12.0", [], old)
    assert "renamed VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION" in w
    new = {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1"}
    assert version_warnings("0.12.0", [], new) == []
    (w,) = version_warnings("0.11.0", [], new)
    assert "VLLM_USE_AITER_UNIFIED_ATTENTION" in w


@pytest.mark.parametrize(
    ("name", "absent", "present"),
    [
        ("VLLM_ROCM_USE_AITER_MHA", "0.9.1", "0.9.2"),
        ("VLLM_ROCM_USE_AITER_FP8BMM", "0.9.2", "0.10.2"),
        ("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "0.9.1", "0.9.2"),
        ("VLLM_ROCM_USE_AITER_TRITON_ROPE", "0.11.0", "0.12.0"),
        ("VLLM_ENGINE_READY_TIMEOUT_S", "0.12.0", "0.33.0"),
        ("VLLM_RPC_TIMEOUT", "0.33.0", "0.12.0"),
        ("VLLM_V1_USE_PREFILL_DECODE_ATTENTION", "0.33.0", "0.9.1"),
        ("VLLM_ROCM_CUSTOM_PAGED_ATTN", "0.33.0", "0.12.0"),
        ("VLLM_ROCM_PREFER_TRITON", "0.9.1", "0.6.3"),
    ],
)
def test_env_table(name, absent, present):
    env = {"VLLM_ROCM_USE_AITER": "1", name: "1"}
    if name == "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION":
        env[name] = "FP"
    warnings = version_warnings(absent, [], env)
    assert any(name in w for w in warnings), warnings
    assert not any(name in w for w in version_warnings(present, [], env))


def test_versions_between_checked_ones_are_not_judged():
    # 0.11.1 lies between the checked 0.11 and 0.12: no claim either way
    assert version_warnings("0.11.1", [], {"VLLM_USE_TRITON_FLASH_ATTN": "0"}) == []


def test_unknown_version_gives_only_version_free_warnings():
    env = {"VLLM_USE_V1": "1", "VLLM_ROCM_USE_AITER_MOE": "1"}
    assert version_warnings(None, ["--num-scheduler-steps", "10"], env) == [
        "env VLLM_ROCM_USE_AITER_MOE=1 has no effect without VLLM_ROCM_USE_AITER=1"
    ]


def test_aiter_feature_flags_need_the_master_switch():
    assert version_warnings("0.12.0", [], {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_MOE": "1"}) == []
    assert version_warnings("0.12.0", [], {"VLLM_ROCM_USE_AITER_MHA": "0"}) == []  # turning off is fine
    (w,) = version_warnings("0.12.0", [], {"VLLM_ROCM_USE_AITER": "0", "VLLM_ROCM_USE_AITER_MLA": "1"})
    assert w == "env VLLM_ROCM_USE_AITER_MLA=1 has no effect without VLLM_ROCM_USE_AITER=1"


def test_quick_reduce_mode_is_checked():
    (w,) = version_warnings("0.12.0", [], {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT5"})
    assert "INT5" in w and "FP, INT8, INT6, INT4, INT3, NONE" in w
    assert version_warnings("0.12.0", [], {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "int4"}) == []


def test_disable_log_requests_deprecated():
    assert version_warnings("0.9.1", ["--disable-log-requests"], {}) == []
    (w,) = version_warnings("0.33.0", ["--disable-log-requests"], {})
    assert "--disable-log-requests" in w and "drop it" in w


def test_env_as_pairs_and_repeated_flags_warn_once():
    warnings = version_warnings(
        "0.12.0", ["--num-scheduler-steps", "1", "--num-scheduler-steps=2"], (("VLLM_USE_V1", "1"),)
    )
    assert len(warnings) == 2


def test_non_vllm_variables_are_not_judged():
    env = {"HIP_FORCE_DEV_KERNARG": "1", "SAFETENSORS_FAST_GPU": "1", "NCCL_MIN_NCHANNELS": "112"}
    for version in ("0.6.3", "0.9.1", "0.12.0", "0.33.0"):
        assert version_warnings(version, [], env) == []
