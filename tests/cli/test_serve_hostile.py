"""`rocm-console serve list` over an agent whose instance records are hostile: their text is
shown as visible escapes, and a record without what an instance has is one line, never a
traceback. The node is this machine; its python3 runs a stand-in for `instance` (see
tests/integration/hostile_node.py)."""

from __future__ import annotations

import re

import pytest

from tests.cli.cli_helpers import one_line_error, run
from tests.integration.hostile_node import EVIL, EVIL_SHOWN, hostile_python

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def profile_with(tmp_path, records: str):
    (tmp_path / "records.jsonl").write_text(records)
    python = hostile_python(tmp_path / "hostile", {"instance": ("write", str(tmp_path / "records.jsonl"))})
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
python = "{python}"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}
""")
    return path


def test_instance_text_is_shown_not_acted_on(tmp_path):
    record = (
        '{"kind":"instance","name":"llama' + EVIL + '","state":"exited","exit_code":1,"pid":4242,'
        '"spec":{"model":"org/m' + EVIL + '","gpus":[0],"port":8000,"preset":"p' + EVIL + '"}}\n'
    )
    proc = run("serve", "list", "--profile", str(profile_with(tmp_path, record)))
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert not RAW_CONTROL.search(proc.stdout), repr(proc.stdout)
    assert f"llama{EVIL_SHOWN}" in proc.stdout and f"org/m{EVIL_SHOWN}" in proc.stdout


@pytest.mark.parametrize(
    ("records", "why"),
    [
        ('{"kind":"instance"}\n', "a record without what an instance has"),
        ('{"kind":"instance","name":"x","state":"running","spec":"nope"}\n', "a record without what an instance has"),
        ('{"kind":"instance","name":' + "[" * 50_000 + "]" * 50_000 + "}\n", "nested deeper than 64 levels"),
        ('{"kind":"error","message":"no state dir \\u001b[2J\\u0007"}\n', "no state dir \\x1b[2J\\x07"),
    ],
    ids=["no fields", "spec not an object", "deep nesting", "agent error with escapes"],
)
def test_a_record_the_console_cannot_use_is_one_line(tmp_path, records, why):
    proc = run("serve", "list", "--profile", str(profile_with(tmp_path, records)))
    assert proc.returncode == 1
    line = one_line_error(proc)
    assert line.startswith("rocm-console: sim: ") and why in line and not RAW_CONTROL.search(line), line
