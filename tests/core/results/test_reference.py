"""Reference numbers: equal to the seeds' blocks, a strict loader, matching runs."""

from __future__ import annotations

import pytest

from console.core.bench.output_parser import parse_result_blocks
from console.core.errors import ProfileError
from console.core.results.build import run_from_console
from console.core.results.compare import compare_table
from console.core.results.reference import (
    load_reference_numbers,
    reference_as_run,
    reference_matches,
)
from tests.core.results.results_helpers import NOW, REFERENCE, SEED_002, SEED_004, parse


def test_reference_numbers_equal_the_seeds_blocks():
    rows = load_reference_numbers(REFERENCE)
    serving = [r for r in rows if r.kind == "serving"]
    seed004 = [r for r in serving if r.seed == "004"]
    blocks = parse_result_blocks(SEED_004.read_bytes())
    assert len(seed004) == len(blocks) == 9
    for row, block in zip(seed004, blocks):
        assert row.metrics == {k: float(v) for k, v in block.printed.items()}, row.id
        assert row.max_concurrency == block.setup["max_concurrency"]
        assert f"lines {block.start_line}-{block.end_line}" in row.section
        assert row.gpu == "MI300X" and row.dataset == "sharegpt" and row.num_prompts == 1024
    assert [r.tp for r in seed004] == [4, 4, 4, 4, 4, 4, 4, 2, 1]
    assert [r.quantization for r in seed004][-3:] == ["fp8"] * 3
    seed002 = [r for r in serving if r.seed == "002"]
    for row, block in zip(seed002, parse_result_blocks(SEED_002.read_bytes()), strict=True):
        assert row.metrics == {k: float(v) for k, v in block.printed.items() if k != "max_concurrency"}
        assert (row.gpu, row.tp, row.input_len, row.output_len, row.max_concurrency) == ("MI355X", 1, 8192, 1024, 64)
    offline = {r.id: r for r in rows if r.kind != "serving"}
    assert len(offline) == 8 + 32
    assert offline["seed000-throughput-llama3.1-70b-fp8-tp8-128-2048"].metrics == {"throughput_tok_s": 12638.9}
    assert offline["seed000-latency-llama3.1-405b-fp8-tp8-bs128-2048-2048"].metrics == {"latency_s": 125.471}


_HEAD = '[reference.a]\nseed = "1"\nsection = "s"\nkind = "serving"\ngpu = "MI300X"\nmodel = "m"\n'


@pytest.mark.parametrize(
    "body, table, key",
    [
        (_HEAD + "tp = 1\nconcurrency = 4\nmetrics = { completed = 1 }\n", "[reference.a]", "'concurrency'"),
        (_HEAD + "tp = 1\n[reference.a.metrics]\nthroughput = 1\n", "[reference.a.metrics]", "'throughput'"),
        (_HEAD + 'tp = "4"\nmetrics = { completed = 1 }\n', "[reference.a]", "'tp'"),
        (_HEAD + "metrics = { completed = 1 }\n", "[reference.a]", "'tp'"),
        ('[refs.a]\nseed = "1"\n', None, "'refs'"),
    ],
)
def test_reference_loader_is_strict(tmp_path, body, table, key):
    path = tmp_path / "ref.toml"
    path.write_text(body)
    with pytest.raises(ProfileError) as err:
        load_reference_numbers(path)
    text = str(err.value)
    assert str(path) in text and key in text and "\n" not in text
    if table:
        assert table in text


def test_reference_matches():
    rows = load_reference_numbers(REFERENCE)
    imported = parse(SEED_004.read_bytes()).runs
    matches = reference_matches(imported[0], rows)  # c128, nothing about the server known
    assert [m.row.id for m in matches] == ["seed004-bf16-tp4-c128", "seed004-bf16-tp4-seqs4096-c128"]
    assert all(m.unverified == ("gpu", "tp") for m in matches)

    def console_run(serve_args, gpu, conc, model="/models/meta-llama/Llama-3.1-70B-Instruct/", **setup):
        return run_from_console(
            {"gpu_model": gpu, "serve_args": serve_args},
            {"model_id": model, "completed": 1, "max_concurrency": conc, "request_rate": "inf"},
            setup={"dataset": "sharegpt", **setup},
            created=NOW,
        )

    exact = reference_matches(console_run(["--tensor-parallel-size", "4"], "AMD Instinct MI300X", 256), rows)
    assert [m.row.id for m in exact] == ["seed004-bf16-tp4-c256", "seed004-bf16-tp4-seqs4096-c256"]
    assert all(m.exact for m in exact)
    fp8 = reference_matches(console_run(["-tp", "1", "--quantization", "fp8"], "AMD Instinct MI300X", 512), rows)
    assert [m.row.id for m in fp8] == ["seed004-fp8-tp1-32k-c512"]
    assert reference_matches(console_run(["-tp", "4"], "AMD Instinct MI355X", 256), rows) == []
    assert reference_matches(console_run(["-tp", "4"], "AMD Instinct MI300X", 64), rows) == []
    mi355 = console_run(
        ["--tensor-parallel-size=1"],
        "AMD Instinct MI355X",
        64,
        model="/data/pretrained-models/amd/Llama-3.3-70B-Instruct-FP8-KV/",
        dataset="random",
        input_len=8192,
        output_len=1024,
    )
    assert [(m.row.id, m.exact) for m in reference_matches(mi355, rows)] == [("seed002-llama3.3-70b-fp8-tp1-c64", True)]
    other_len = console_run(
        ["-tp", "1"],
        "MI355X",
        64,
        model="amd/Llama-3.3-70B-Instruct-FP8-KV",
        dataset="random",
        input_len=1024,
        output_len=1024,
    )
    assert reference_matches(other_len, rows) == []
    as_run = reference_as_run(exact[0].row)
    assert as_run.metrics == exact[0].row.metrics and as_run.id == "ref:seed004-bf16-tp4-c256"
    assert compare_table([imported[1], as_run])[-1]["delta"] == [None, 0.0]
