"""The versions-and-settings record of a node and its diff: one line per change,
secrets never kept."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from console.core.baseline.diff import (
    ADDED,
    CHANGED,
    REDACTED,
    REMOVED,
    Change,
    NodeVersions,
    change_summary,
    diff_versions,
    is_secret_name,
    serve_flags,
    versions_from_dict,
    versions_from_facts,
    versions_to_dict,
)

TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "mi300x-spx.jsonl"


def trace_lines(kind: str) -> list[dict]:
    return [d for d in map(json.loads, TRACE.read_text().splitlines()) if d.get("kind") == kind]


def recorded_node(**changes) -> NodeVersions:
    """The record the console builds from the agent's first lines on the simulated
    MI300X node (probe: versions, host settings; static: GPUs and firmware)."""
    probe = trace_lines("probe")[0]
    static = trace_lines("static")[0]["gpus"]
    facts = {
        **probe,
        "kernel": "6.8.0-31-generic",
        "gpus": [
            {
                "physical": g["physical"],
                "model": g["model"],
                "compute_partition": g["compute_partition"],
                "memory_partition": g["memory_partition"],
            }
            for g in static
        ],
        "env": {"HIP_FORCE_DEV_KERNARG": "1", "NCCL_MIN_NCHANNELS": "112", "HF_TOKEN": "hf_secret_value"},
        "simulated": True,
    }
    facts.update(changes)
    return versions_from_facts(
        "mi300x-spx",
        facts,
        static_gpus=static,
        torch="2.9.0+rocm7.0",
        preset_env={"VLLM_ROCM_USE_AITER": "1", "VLLM_API_KEY": "sk-123"},
        preset_args=["--dtype", "float16", "--max-num-seqs", "256", "--enforce-eager", "--kv-cache-dtype=fp8"],
        captured=1767225571.0,
    )


def test_the_record_from_a_recorded_node():
    v = recorded_node()
    assert (v.rocm, v.amdsmi, v.vllm, v.torch) == ("7.0.2-56", "7.0.2+sim", "0.32.0+sim", "2.9.0+rocm7.0")
    assert dict(v.gpus) == {"models": "8x AMD Instinct MI300X", "partition": "SPX/NPS1"}
    assert dict(v.firmware)["gpu 0 vbios"] == "022.040.003.043.000001" and len(v.firmware) == 8
    assert dict(v.host) == {"numa_balancing": "0"}
    assert dict(v.flags) == {
        "--dtype": "float16",
        "--max-num-seqs": "256",
        "--enforce-eager": "true",
        "--kv-cache-dtype": "fp8",
    }
    assert v.simulated


def test_secrets_never_enter_the_record():
    v = recorded_node()
    assert dict(v.env)["HF_TOKEN"] == REDACTED and dict(v.preset_env)["VLLM_API_KEY"] == REDACTED
    dumped = json.dumps(versions_to_dict(v))
    assert "hf_secret_value" not in dumped and "sk-123" not in dumped
    # even when built directly
    direct = NodeVersions("n", env=(("GITHUB_TOKEN", "ghp_x"),), flags=serve_flags(["--api-key", "abc"]))
    assert direct.env == (("GITHUB_TOKEN", REDACTED),) and direct.flags == (("--api-key", REDACTED),)
    # a changed secret is not a change anyone can see
    other = recorded_node(env={"HIP_FORCE_DEV_KERNARG": "1", "NCCL_MIN_NCHANNELS": "112", "HF_TOKEN": "hf_other"})
    assert diff_versions(recorded_node(), other) == ()


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("DB_PASSWORD", True),
        ("SSH_KEY", True),
        ("GH_CREDENTIALS", True),
        ("my-token", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("VLLM_MAX_TOKENS", False),
        ("KEYBOARD_LAYOUT", False),
        ("VLLM_ROCM_USE_AITER", False),
    ],
)
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_a_rocm_bump_and_a_flipped_switch_are_one_line_each():
    before = recorded_node()
    after = versions_from_facts(
        "mi300x-spx",
        {
            **trace_lines("probe")[0],
            "rocm": "7.1.0-12",
            "kernel": "6.8.0-31-generic",
            "env": {"HIP_FORCE_DEV_KERNARG": "1", "NCCL_DEBUG": "WARN", "HF_TOKEN": "x"},
            "simulated": True,
            "gpus": [
                {"physical": i, "model": "AMD Instinct MI300X", "compute_partition": "CPX", "memory_partition": "NPS1"}
                for i in range(8)
            ],
        },
        static_gpus=trace_lines("static")[0]["gpus"],
        torch="2.9.0+rocm7.0",
        preset_env={"VLLM_ROCM_USE_AITER": "0", "VLLM_API_KEY": "sk-9"},
        preset_args=["--dtype", "float16", "--max-num-seqs", "1", "--enforce-eager", "--kv-cache-dtype=fp8"],
    )
    lines = [c.line() for c in diff_versions(before, after)]
    assert lines == [
        "ROCm: 7.0.2-56 -> 7.1.0-12",
        "GPUs partition: SPX/NPS1 -> CPX/NPS1",
        "added node env NCCL_DEBUG = WARN",
        "preset env VLLM_ROCM_USE_AITER: 1 -> 0",
        "serve flag --max-num-seqs: 256 -> 1",
        "removed node env NCCL_MIN_NCHANNELS (was 112)",
    ]
    kinds = [c.kind for c in diff_versions(before, after)]
    assert kinds == [CHANGED, CHANGED, ADDED, CHANGED, CHANGED, REMOVED]


def test_name_and_time_of_the_reading_do_not_count():
    v = recorded_node()
    assert diff_versions(v, replace(v, captured=2e9)) == ()
    assert diff_versions(v, versions_from_dict(json.loads(json.dumps(versions_to_dict(v))))) == ()


def test_unknown_becomes_known_is_added():
    before = NodeVersions("n", vllm=None)
    after = NodeVersions("n", vllm="0.32.0", torch="2.9.0")
    assert [c.line() for c in diff_versions(before, after)] == ["added vLLM = 0.32.0", "added torch = 2.9.0"]


def test_round_trip_and_bad_records():
    v = recorded_node()
    back = versions_from_dict(versions_to_dict(v))
    assert back == v and back.captured == v.captured
    with pytest.raises(ValueError, match="not a node versions record"):
        versions_from_dict({"format": "other/1", "node": "n"})
    with pytest.raises(ValueError, match="'rocm' is not a string"):
        versions_from_dict({"node": "n", "rocm": 7})
    with pytest.raises(ValueError, match="without 'node'"):
        versions_from_dict({"rocm": "7"})


def test_serve_flags_read_every_spelling():
    assert serve_flags(
        ["--max_num_seqs", "8", "--no-enable-prefix-caching", "--gpu-memory-utilization=0.9", "-tp", "2", "--x", "-1"]
    ) == (
        ("--max-num-seqs", "8"),
        ("--no-enable-prefix-caching", "true"),
        ("--gpu-memory-utilization", "0.9"),
        ("-tp", "2"),
        ("--x", "-1"),
    )


def test_change_summary_is_one_line():
    changes = [Change(CHANGED, f"k{i}", "a", "b") for i in range(5)]
    assert change_summary(changes) == "k0: a -> b; k1: a -> b; k2: a -> b; and 2 more"
    assert change_summary([]) == "no change"
