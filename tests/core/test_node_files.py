"""One rule for a node's file name: the baselines' folders, the node-versions files and the
database store's dump all name node `gpu node/7` the same way."""

from __future__ import annotations

from console.core.node_files import node_file_stem
from console.services.baseline import BaselineStore
from console.services.node_versions import VersionsBook


def test_every_file_per_node_uses_one_name_rule(tmp_path):
    assert node_file_stem("gpu node/7") == "gpu_node_7" and node_file_stem("mi300x-07.lab_a") == "mi300x-07.lab_a"
    assert BaselineStore(tmp_path).path("gpu node/7", "demo") == tmp_path / "gpu_node_7" / "demo.json"
    assert VersionsBook(tmp_path)._path("../etc/x") == tmp_path / f"{node_file_stem('../etc/x')}.json"
