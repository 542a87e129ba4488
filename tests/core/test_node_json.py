"""The one decoder for JSON from nodes: limits checked before parsing, one error type."""

from __future__ import annotations

import time

import pytest

from console.core.node_json import (
    MAX_LINE_CHARS,
    NodeJsonError,
    check_limits,
    loads,
    loads_document,
    loads_object,
    object_lines,
)
from console.core.telemetry import AgentProtocolError, parse_agent_line


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        ('{"a":' * 65 + "1" + "}" * 65, "nested deeper than 64 levels"),
        ("1" + "0" * 100_000, "number of over 64 digits"),
        ('{"n": -1' + "0" * 64 + "}", "number of over 64 digits"),
        ('{"f": 1.' + "5" * 70 + "}", "number of over 64 digits"),
        ("x" * (MAX_LINE_CHARS + 1), "over the limit"),
        ("\x00\x1b[2J\x07", "not JSON"),
        ('{"a": 1', "not JSON"),
        ("", "not JSON"),
    ],
)
def test_refused_with_one_line(text, why):
    with pytest.raises(NodeJsonError) as caught:
        loads(text)
    message = str(caught.value)
    assert why in message and "\n" not in message and "\x1b" not in message and len(message) < 200


def test_what_is_within_limits_decodes():
    # brackets, long digit runs and escapes inside strings are text, not structure or numbers
    text = '{"s": "[[[[' + "[" * 200 + '", "d": "' + "9" * 500 + '", "q": "a\\"[[[", "n": 12345678901234567890}'
    assert loads(text)["n"] == 12345678901234567890
    assert loads('{"a":' * 64 + "1" + "}" * 64)  # exactly the depth limit
    assert loads(b'{"b": "\xff"}') == {"b": "\ufffd"}  # bytes that are not UTF-8: replaced


def test_objects_and_lines():
    with pytest.raises(NodeJsonError, match="not a JSON object"):
        loads_object("[1, 2]")
    out = 'warning: something\n{"a": 1}\n{bad\n{"b": 2}\n'
    assert object_lines(out, skip_bad=True) == [{"a": 1}, {"b": 2}]
    with pytest.raises(NodeJsonError):
        object_lines(out)
    assert loads_document('{"x": [' + "1," * 3_000_000 + "1]}")["x"][-1] == 1  # a big result file


def test_agent_lines_go_through_it():
    with pytest.raises(AgentProtocolError, match="nested deeper"):
        parse_agent_line('{"kind":"sample","ts":1,"seq":1,"gpus":' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(AgentProtocolError, match="digits"):
        parse_agent_line('{"kind":"sample","ts":1,"seq":1' + "0" * 5000 + ',"gpus":[]}')


def test_checking_costs_little_next_to_decoding():
    gpu = '{"index":%d,"util_pct":12.5,"vram_used_mib":1024.0,"power_w":320,"name":"gpu [x] \\"q\\"","p":[1,2,3]}'
    line = '{"kind":"sample","ts":1.5,"seq":7,"gpus":[' + ",".join(gpu % i for i in range(64)) + "]}"
    start = time.perf_counter()
    for _ in range(200):
        check_limits(line)
    per_line = (time.perf_counter() - start) / 200
    assert per_line < 0.002, f"{per_line * 1e3:.2f} ms per 64-GPU line"
