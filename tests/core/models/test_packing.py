"""Packing small models: several instances on a GPU while their utilization shares sum to ≤ 0.95."""

from __future__ import annotations

import pytest

from console.core.models.packing import PackingError, gpu_sums, packing_refusal
from tests.core.models.fixtures import seed_text


def test_the_seed_guide_packs_two_instances_at_045_on_gpu_0():
    # seed 003 "Decrease to pack multiple instances on the same GPU": both on GPU 0 at 0.45
    text = seed_text("003")
    assert "CUDA_VISIBLE_DEVICES=0 vllm serve meta-llama/Llama-3.1-8B-Instruct" in text
    assert "CUDA_VISIBLE_DEVICES=0 vllm serve meta-llama/Llama-Guard-3-8B" in text
    assert text.count("--gpu-memory-utilization 0.45") >= 2
    assert packing_refusal({}, [0], "llama", 0.45) is None
    assert packing_refusal({0: [("llama", 0.45)]}, [0], "guard", 0.45) is None
    assert gpu_sums({0: [("llama", 0.45), ("guard", 0.45)]}) == {0: pytest.approx(0.9)}


def test_a_third_instance_is_refused_naming_the_sum_and_the_instances_there():
    on = {0: [("llama", 0.45), ("guard", 0.45)]}
    why = packing_refusal(on, [0], "third", 0.45)
    assert (
        why
        == "GPU 0: gpu_memory_utilization would sum to 1.35 > 0.95 (third 0.45 + llama (0.45), guard (0.45) already there)"
    )
    # exactly at the limit is allowed (no float rounding surprise: 0.45 + 0.5 = 0.95)
    assert packing_refusal({0: [("a", 0.45)]}, [0], "b", 0.5) is None
    assert packing_refusal({0: [("a", 0.45)]}, [0], "b", 0.51) is not None


def test_the_limit_is_configurable():
    on = {0: [("a", 0.45), ("b", 0.45)]}
    assert packing_refusal(on, [0], "c", 0.05) is None
    assert "> 0.9 " in (packing_refusal(on, [0], "c", 0.05, max_sum=0.9) or "")
    assert packing_refusal({0: [("a", 0.5)]}, [0], "b", 0.45, max_sum=1.0) is None


def test_an_instance_without_a_share_holds_its_gpu_alone():
    assert "GPU 0 is held by solo, which sets no --gpu-memory-utilization" in (
        packing_refusal({0: [("solo", None)]}, [0], "small", 0.2) or ""
    )
    why = packing_refusal({0: [("a", 0.45)]}, [0], "big", None)
    assert why == (
        "GPU 0 already serves a (0.45): set --gpu-memory-utilization for big to share it (the sum must stay ≤ 0.95)"
    )
    assert packing_refusal({}, [0, 1], "big", None) is None  # an empty GPU takes anyone
    assert gpu_sums({0: [("solo", None)], 1: []}) == {0: None, 1: 0}


def test_a_tp_instance_is_checked_on_each_of_its_gpus():
    on = {0: [("a", 0.6)], 1: [("b", 0.2)], 2: [("c", 0.6)]}
    why = packing_refusal(on, [0, 1, 2, 3], "tp4", 0.4)
    assert why == (
        "GPU 0: gpu_memory_utilization would sum to 1.0 > 0.95 (tp4 0.4 + a (0.6) already there); "
        "GPU 2: gpu_memory_utilization would sum to 1.0 > 0.95 (tp4 0.4 + c (0.6) already there)"
    )  # GPU 1 (0.2 + 0.4) and the empty GPU 3 take it


@pytest.mark.parametrize("bad", [0, -0.1, 1.2, True, "0.5"])
def test_out_of_range_shares_are_one_line_errors(bad):
    with pytest.raises(PackingError, match=r"^instance x: gpu_memory_utilization .* must be above 0 and at most 1$"):
        packing_refusal({}, [0], "x", bad)
    with pytest.raises(PackingError, match=r"^the packing limit"):
        packing_refusal({}, [0], "x", 0.5, max_sum=bad)
