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
    assert parse_pairs(["max_model_len=4096", "x=a=b", "x=c"], "--set") == {"max_model_len": "4096", "x": "c"}
    with pytest.raises(UsageError, match=r"--env '=1': expected KEY=VALUE"):
        parse_pairs(["=1"], "--env")
