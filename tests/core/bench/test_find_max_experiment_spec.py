"""`find_max = true` in an experiment file: one find-max point per layout instead of load
points, the budget named or the only one; every bad key one line naming the file and key."""

from __future__ import annotations

import pytest

from console.core.experiment.spec import ExperimentError, load_experiment, plan_points

HEAD = """
[experiment]
name = "fm"
serve = "tiny"
bench = "tiny"
layouts = ["SPX tp8 x1", "SPX tp1 x8"]
"""
BUDGETS = """
[[budget]]
name = "interactive"
p99_ttft_ms = 2000
p99_itl_ms = 50

[[budget]]
name = "batch"
p99_e2el_ms = 60000
"""


def load(tmp_path, text: str):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path, load_experiment(path)


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    return [p.replace(str(path), "FILE") for p in info.value.problems]


def test_find_max_replaces_the_load_points_with_one_search_per_layout(tmp_path):
    _, exp = load(
        tmp_path,
        HEAD + 'find_max = true\nfind_max_budget = "batch"\nfind_max_by = "rate"\nfind_max_max = 64\n' + BUDGETS,
    )
    assert exp.find_max is not None and exp.find_max.budget.name == "batch"
    assert exp.find_max.by == "rate" and exp.find_max.max_load == 64 and exp.find_max.start is None
    points = plan_points(exp)
    assert [p.id for p in points] == ["spx-tp8-x1@find-max", "spx-tp1-x8@find-max"]
    assert all(p.find_max and p.concurrency is None and p.rate is None for p in points)


def test_the_only_budget_needs_no_name(tmp_path):
    _, exp = load(tmp_path, HEAD + "find_max = true\n[[budget]]\nname = 'only'\np99_ttft_ms = 100\n")
    assert exp.find_max is not None and exp.find_max.budget.name == "only" and exp.find_max.by == "concurrency"


def test_without_find_max_nothing_changes(tmp_path):
    _, exp = load(tmp_path, HEAD + "concurrency = [8, 16]\n" + BUDGETS)
    assert exp.find_max is None and [p.id for p in plan_points(exp)][:2] == ["spx-tp8-x1@c8", "spx-tp8-x1@c16"]


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        ("find_max = true\n", "FILE: [experiment] key 'find_max_budget': 2 budgets (interactive, batch): name the one"),
        (
            "find_max = true\nconcurrency = [8]\n",
            "FILE: [experiment] key 'find_max': a search replaces the load points",
        ),
        ('find_max = "yes"\n', "FILE: [experiment] key 'find_max': expected true or false, got 'yes'"),
        (
            'find_max = true\nfind_max_budget = "fast"\n',
            "FILE: [experiment] key 'find_max_budget': no [[budget]] named 'fast'",
        ),
        ('find_max = true\nfind_max_budget = "batch"\nfind_max_by = "speed"\n', "key 'find_max_by': expected"),
        (
            'find_max = true\nfind_max_budget = "batch"\nfind_max_start = 1.5\n',
            "key 'find_max_start': a concurrency is a whole",
        ),
        (
            'find_max = true\nfind_max_budget = "batch"\nfind_max_max = -4\n',
            "key 'find_max_max': expected a load above 0",
        ),
        (
            'find_max = true\nfind_max_budget = "batch"\nfind_max_start = 8\nfind_max_max = 4\n',
            "key 'find_max_max': 4 is below",
        ),
        (
            'find_max = true\nfind_max_budget = "batch"\nfind_max_tolerance = 2\n',
            "key 'find_max_tolerance': expected a fraction",
        ),
        ("concurrency = [8]\nfind_max_max = 4\n", "FILE: [experiment] key 'find_max_max': only with find_max = true"),
    ],
)
def test_each_bad_key_is_one_line_naming_it(tmp_path, extra, line):
    found = problems(tmp_path, HEAD + extra + BUDGETS)
    assert any(p.startswith(line) or line in p for p in found), found
    assert all("\n" not in p for p in found)


def test_a_search_needs_a_budget(tmp_path):
    assert problems(tmp_path, HEAD + "find_max = true\n") == [
        "FILE: [experiment] key 'find_max': a search needs a latency budget: add a [[budget]] table"
    ]
