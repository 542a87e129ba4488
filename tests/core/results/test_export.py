"""JSON, CSV and Markdown exports."""

from __future__ import annotations

import csv
import io
import math
import re

from console.core.results.export import export_csv, export_json, export_markdown
from console.core.results.record import run_from_dict
from tests.core.results.results_helpers import CPU, make_run, parse, strict_json


def test_csv_export_is_well_formed():
    a = make_run(
        "a",
        {"completed": 10.0, "output_throughput": 123.456},
        label='with, comma "and quotes"',
        setup={"request_rate": math.inf, "dataset": "random"},
    )
    b = make_run("b", {"completed": 10.0, "p99.9_itl_ms": 5.0})
    rows = list(csv.reader(io.StringIO(export_csv([a, b]))))
    head = rows[0]
    assert len(rows) == 3 and all(len(r) == len(head) for r in rows)
    assert len(set(head)) == len(head)
    first = dict(zip(head, rows[1]))
    second = dict(zip(head, rows[2]))
    assert first["label"] == 'with, comma "and quotes"'
    assert first["request_rate"] == "inf" and first["output_throughput"] == "123.456" and first["completed"] == "10"
    assert first["p99.9_itl_ms"] == "" and second["p99.9_itl_ms"] == "5"
    assert head.index("completed") < head.index("output_throughput") < head.index("p99.9_itl_ms")


def test_markdown_export_is_well_formed():
    a = make_run("a", {"completed": 10.0, "output_throughput": 100.0}, label="x|y")
    b = make_run("b", {"completed": 10.0, "output_throughput": 110.0})
    text = export_markdown([a, b])
    tables = [block for block in text.split("\n\n") if block.lstrip().startswith("|")]
    assert len(tables) == 2
    for table in tables:
        lines = table.strip().splitlines()
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in lines}
        assert len(widths) == 1, lines
        assert re.fullmatch(r"\|(---:?\|)+", lines[1])
    assert "x\\|y" in text
    assert "| Output token throughput (tok/s) | 100.00 | 110.00 | +10.00 (+10.0%) |" in text


def test_json_export_is_strict():
    (run,) = parse((CPU / "bench_result.json").read_bytes()).runs
    doc = strict_json(export_json([run]))
    assert doc["format"].startswith("rocm-console-result/") and doc["runs"][0]["id"] == run.id
    assert run_from_dict(doc["runs"][0]) == run
