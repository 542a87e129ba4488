"""Issue U2: a preset's environment per vLLM release (`env_by_vllm`): the tables whose range
holds the node's version are added, every table when it is unknown; a bad range is one line
naming the preset's key."""

from __future__ import annotations

import pytest

from console.core.errors import ProfileError
from console.core.profiles import load_profile
from console.core.serve.rules import env_for_vllm, parse_vllm_range

BY = (
    ("<0.12", (("VLLM_USE_TRITON_FLASH_ATTN", "0"),)),
    (">=0.9.1,<0.33", (("VLLM_V1_USE_PREFILL_DECODE_ATTENTION", "1"),)),
    ("==0.32.0", (("A", "2"),)),
)
BASE = (("A", "1"),)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.6.3", {"A": "1", "VLLM_USE_TRITON_FLASH_ATTN": "0"}),
        ("0.9.1+rocm", {"A": "1", "VLLM_USE_TRITON_FLASH_ATTN": "0", "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "1"}),
        ("0.12.0", {"A": "1", "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "1"}),
        ("0.32.0+sim", {"A": "2", "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "1"}),
        ("0.33.0", {"A": "1"}),
        (None, {"A": "2", "VLLM_USE_TRITON_FLASH_ATTN": "0", "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "1"}),
    ],
)
def test_the_env_follows_the_nodes_vllm(version, expected):
    assert dict(env_for_vllm(BASE, BY, version)) == expected


def test_ranges_are_comparisons():
    assert parse_vllm_range(">=0.9.1, <0.12") == ((">=", (0, 9, 1)), ("<", (0, 12, 0)))
    with pytest.raises(ValueError, match="'0.12' is not a comparison"):
        parse_vllm_range("0.12")


def test_a_bad_range_or_value_is_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text('[serve.x]\nmodel = "m"\nenv_by_vllm = { "~0.12" = { A = "1" } }\n')
    with pytest.raises(ProfileError) as err:
        load_profile([bad])
    assert "key 'env_by_vllm.\"~0.12\"'" in str(err.value) and "\n" not in str(err.value)
    bad.write_text('[serve.x]\nmodel = "m"\nenv_by_vllm = { "<0.12" = { A = 1 } }\n')
    with pytest.raises(ProfileError, match=r"env_by_vllm.\"<0.12\".A'. expected a string"):
        load_profile([bad])
    bad.write_text('[serve.x]\nmodel = "m"\nenv_by_vllm = { "<0.12" = { HF_TOKEN = "x" } }\n')
    with pytest.raises(ProfileError, match="secrets do not belong"):
        load_profile([bad])
