"""The stored runs' shared rules (console/core/results/ids.py): the file store and the database
store list runs in one order and give a taken id the same kind of fresh id."""

from __future__ import annotations

import re
from dataclasses import replace

from console.core.results.ids import other_id, run_order
from tests.core.results.results_helpers import make_run


def test_runs_of_one_import_keep_their_order_in_the_file():
    base = make_run("r", {})
    parts = [
        replace(base, id=f"r{i}", context={**base.context, "source_part": f"block {i} (lines {i * 10}-{i * 10 + 5})"})
        for i in (10, 2, 1)
    ]
    ordered = sorted(parts, key=run_order)
    assert [r.context["source_part"].split()[1] for r in ordered] == ["1", "2", "10"]  # numbers, not text


def test_a_taken_id_gets_new_hex_on_the_same_head():
    fresh = other_id("20261118-000000-mi300x-abcdef")
    assert re.fullmatch(r"20261118-000000-mi300x-[0-9a-f]{6}", fresh) and fresh != "20261118-000000-mi300x-abcdef"
    assert re.fullmatch(r"hand-made-[0-9a-f]{6}", other_id("hand-made"))  # no hex tail: one is added
