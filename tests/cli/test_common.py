"""What every command shares: profile loading, node choice, KEY=VALUE pairs, one-line errors."""

from __future__ import annotations

import pytest

from console.cli.common import UsageError, parse_pairs, pick_node, select_nodes
from console.core.profiles import load_profile
from tests.cli.cli_helpers import one_line_error, run


def test_bad_profile_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[nodes.a]\nhost = "h"\nprot = 22\n')
    proc = run("status", "--profile", str(bad))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "bad.toml" in line and "[nodes.a]" in line and "'prot'" in line


def test_no_nodes_says_what_to_do(tmp_path):
    proc = run("status", cwd=tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert proc.returncode == 2
    assert "--demo" in one_line_error(proc)


@pytest.fixture
def two_nodes(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text('[nodes.a]\nhost = "a.lab"\n\n[nodes.b]\nhost = "b.lab"\n')
    return load_profile([path])


def test_pick_node_needs_a_name_when_the_profile_has_several(two_nodes):
    assert pick_node(two_nodes, "b").name == "b"
    with pytest.raises(UsageError, match=r"--node is needed: the profile has 2 nodes \(a, b\)"):
        pick_node(two_nodes, None)
    with pytest.raises(UsageError, match=r"unknown node 'c' \(known: a, b\)"):
        pick_node(two_nodes, "c")


def test_select_nodes_keeps_each_named_node_once(two_nodes):
    assert [n.name for n in select_nodes(two_nodes, None)] == ["a", "b"]
    assert [n.name for n in select_nodes(two_nodes, ["b", "a", "b"])] == ["b", "a"]


def test_parse_pairs():
    assert parse_pairs(["max_model_len=4096", "x=a=b"], "--set") == {"max_model_len": "4096", "x": "a=b"}
    with pytest.raises(UsageError, match=r"--env '=1': expected KEY=VALUE"):
        parse_pairs(["=1"], "--env")


@pytest.mark.parametrize(
    ("items", "flag", "message"),
    [
        (["x=1", "x=2"], "--set", "--set x: given twice; give each key once"),
        (
            ["max-model-len=1", "--max_model_len=2"],
            "--set",
            "--set --max_model_len: given twice (also as max-model-len)",
        ),
        (["A=1", "A=2"], "--env", "--env A: given twice"),
        (["1A=1"], "--env", "--env 1A: not an environment variable name"),
        (["A B=1"], "--env", "--env A B: not an environment variable name"),
        (["a b=1"], "--set", "--set 'a b': not a key name"),
        (["novalue"], "--set", "--set 'novalue': expected KEY=VALUE"),
        ([" =1"], "--set", "--set ' =1': expected KEY=VALUE"),
    ],
)
def test_parse_pairs_refuses_what_a_command_cannot_honour(items, flag, message):
    with pytest.raises(UsageError) as info:
        parse_pairs(items, flag)
    assert str(info.value).startswith(message)
