"""The start dialog's TP field, replicas field and model marks (console/ui/model/start_form.py), pure."""

from __future__ import annotations

import pytest

from console.core.replicas import PER_GPU
from console.ui.model.start_form import (
    FormError,
    ReplicaAsk,
    default_tp,
    model_mark,
    parse_replicas_field,
    refuse_tp_override,
    tp_choices,
)


def test_tp_sizes_follow_the_marked_gpus_the_partition_and_the_heads():
    assert tp_choices(1) == (1,)
    assert tp_choices(4) == (1, 2, 4) and tp_choices(8) == (1, 2, 4, 8)
    assert tp_choices(6) == (1, 2, 6)  # powers of two that divide, and all of them as one instance
    assert tp_choices(3) == (1, 3)
    assert tp_choices(8, cpx=True) == (1,)  # a CPX partition runs TP 1
    assert tp_choices(8, heads=64) == (1, 2, 4, 8)
    assert tp_choices(8, heads=12) == (1, 2, 4)  # 12 heads do not split over 8 GPUs
    assert tp_choices(6, heads=28) == (1, 2)
    # the preset's own TP when allowed; else one instance over every GPU given; else the largest
    assert default_tp(2, (1, 2, 4), 4) == 2 and default_tp(8, (1, 2, 4), 4) == 4 and default_tp(8, (1, 2), 6) == 2


def test_the_tp_field_replaces_a_tp_override():
    refuse_tp_override({"max_model_len": "4096"})
    for key in ("tp", "tensor_parallel_size", "tensor-parallel-size", "--tensor-parallel-size"):
        with pytest.raises(FormError, match=f"overrides: {key}=2: the TP field sets the tensor-parallel size"):
            refuse_tp_override({key: "2"})


def test_replicas_field_reads_as_the_cli_flags():
    assert parse_replicas_field("") is None and parse_replicas_field("  ") is None
    assert parse_replicas_field("4") == ReplicaAsk(4) and ReplicaAsk(4).cli() == "--replicas 4"
    assert parse_replicas_field("per GPU") == ReplicaAsk(PER_GPU)
    assert parse_replicas_field("per-gpu") == ReplicaAsk(PER_GPU)
    two = parse_replicas_field("2 per GPU")
    assert two == ReplicaAsk(PER_GPU, 2) and two.cli() == "--replicas per-gpu --per-gpu 2"
    assert parse_replicas_field("4, 2 per GPU").cli() == "--replicas 4 --per-gpu 2"
    for bad, why in (("x", "expected a number or per-gpu"), ("0", "expected 1 to 512"), ("0 per GPU", "at least 1")):
        with pytest.raises(FormError, match=f"replicas: '{bad}': {why}"):
            parse_replicas_field(bad)


def test_models_are_marked_on_or_off_the_node_with_their_size():
    held = {"amd/Llama-3.1-8B-Instruct-FP8-KV": True, "amd/Llama-3.1-70B-Instruct-FP8-KV": False}
    sizes = {"meta-llama/Llama-3.1-70B-Instruct": 141_124_812_800}
    assert model_mark("amd/Llama-3.1-8B-Instruct-FP8-KV", held, sizes) == " · on the node"
    assert model_mark("amd/Llama-3.1-70B-Instruct-FP8-KV", held, sizes) == " · partly on the node"
    assert model_mark("meta-llama/Llama-3.1-70B-Instruct", held, sizes) == " · not on the node, 141.1 GB"
    assert model_mark("tiny-llama", held, sizes) == " · not on the node"
