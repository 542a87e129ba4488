"""`rocm-console status` as a user runs it: exit codes, one-line errors, JSON."""

from __future__ import annotations

import json

from tests.cli.cli_helpers import one_line_error, run


def test_status_demo_json_schema():
    proc = run("status", "--demo", "--json", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    nodes = json.loads(proc.stdout)["nodes"]
    assert [n["name"] for n in nodes] == ["mi300x-spx", "mi300x-cpx", "mi355x", "h100"]
    assert [len(n["gpus"]) for n in nodes] == [8, 64, 8, 11]  # h100: 7 GPUs + GPU 7's four MIG instances
    assert nodes[3]["source"] == "NVIDIA nvml (simulated)"


def test_unknown_node(profile):
    proc = run("status", "--profile", str(profile), "--node", "nope")
    assert proc.returncode == 2 and "unknown node 'nope'" in one_line_error(proc)
