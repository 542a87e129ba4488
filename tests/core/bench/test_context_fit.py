from console.core.bench.context_fit import context_refusal, longest_request
from console.core.model import BenchPreset


def preset(**kw) -> BenchPreset:
    return BenchPreset(name="long", dataset="random", input_len=4096, output_len=512, **kw)


def test_a_request_over_max_model_len_is_refused_with_both_numbers():
    line = context_refusal(preset(), 2048, "tiny-b")
    assert line == (
        "long: requests of up to 4096 + 512 = 4608 tokens do not fit instance tiny-b's max_model_len 2048; "
        "lower input_len/output_len (--set input_len=...) or serve with a larger --max-model-len"
    )


def test_the_range_ratio_widens_the_longest_request():
    assert longest_request(preset(range_ratio=0.5)) == (6144, 768)
    assert context_refusal(preset(range_ratio=0.5), 4608, "x") is not None
    assert context_refusal(preset(), 4608, "x") is None  # exactly fits


def test_unknown_lengths_or_limit_are_not_refused():
    assert context_refusal(preset(), None, "x") is None
    assert context_refusal(BenchPreset(name="sharegpt", dataset="sharegpt"), 128, "x") is None
