import json

import pytest

from console.core.model import AgentFailure, AgentHello, ProbeInfo, StaticInfo, TelemetryFrame
from console.core.telemetry import AgentProtocolError, parse_agent_line


def line(obj) -> str:
    return json.dumps(obj)


def test_hello_marks_simulated_source():
    msg = parse_agent_line(
        line({"kind": "hello", "source": "amdsmi", "simulated": True, "hostname": "n1", "interval": 0.5, "note": None})
    )
    assert isinstance(msg, AgentHello)
    assert msg.source == "amdsmi (simulated)"
    assert msg.interval == 0.5


def test_hello_keeps_fallback_note():
    msg = parse_agent_line(
        line(
            {
                "kind": "hello",
                "source": "amd-smi",
                "hostname": "n1",
                "note": "amdsmi module unavailable (KeyError: 'libamd_smi.so')",
            }
        )
    )
    assert msg.source == "amd-smi"
    assert "KeyError" in msg.note


def test_static_and_sample_with_nulls():
    st = parse_agent_line(
        line(
            {
                "kind": "static",
                "ts": 1.0,
                "gpus": [
                    {
                        "index": 0,
                        "physical": 0,
                        "partition_id": 0,
                        "bdf": "0000:0c:00.0",
                        "model": "AMD Instinct MI300X",
                        "vram_total_mib": 24574,
                        "compute_partition": "CPX",
                        "memory_partition": "NPS1",
                        "memory_caps": ["NPS1", "NPS4"],
                    },
                    {"index": 1, "physical": 0, "partition_id": 1, "bdf": "0000:0c:00.1"},
                ],
            }
        )
    )
    assert isinstance(st, StaticInfo)
    assert [g.partition_id for g in st.gpus] == [0, 1]
    assert st.gpus[0].memory_caps == ("NPS1", "NPS4")
    fr = parse_agent_line(
        line(
            {
                "kind": "sample",
                "ts": 2.0,
                "seq": 7,
                "gpus": [
                    {
                        "index": 0,
                        "util_pct": 55,
                        "power_w": 512.5,
                        "power_cap_w": 750.0,
                        "temp_junction_c": 61,
                        "processes": [{"pid": 42, "name": "python3", "vram_mib": 1024.0}],
                    },
                    {"index": 1, "util_pct": None, "power_w": None, "temp_junction_c": None},
                ],
            }
        )
    )
    assert isinstance(fr, TelemetryFrame)
    assert fr.seq == 7
    assert fr.gpus[0].power_w == 512.5 and fr.gpus[0].processes[0].pid == 42
    # Secondary partitions report N/A: they stay None, never zero.
    assert fr.gpus[1].power_w is None and fr.gpus[1].util_pct is None


def test_probe_and_error():
    pr = parse_agent_line(line({"kind": "probe", "hostname": "h", "rocm": "7.0.2\n", "vllm": None}))
    assert isinstance(pr, ProbeInfo) and pr.rocm == "7.0.2" and pr.vllm is None
    er = parse_agent_line(line({"kind": "error", "message": "no telemetry source"}))
    assert isinstance(er, AgentFailure) and "no telemetry" in er.message


@pytest.mark.parametrize(
    "bad, why",
    [
        ("", "empty"),
        ("not json at all", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"kind": "bogus"}', "unknown kind"),
        ('{"kind": "sample", "ts": 1, "seq": 1}', "bad sample"),
        ('{"kind": "sample", "ts": 1, "seq": 1, "gpus": [{"index": 0, "util_pct": "12%"}]}', "bad sample"),
        ('{"kind": "sample", "ts": 1, "seq": true, "gpus": []}', "bad sample"),
        ('{"kind": "static", "ts": 1, "gpus": [{"index": "0", "physical": 0}]}', "bad static"),
    ],
)
def test_bad_lines_are_protocol_errors(bad, why):
    with pytest.raises(AgentProtocolError, match=why):
        parse_agent_line(bad)


def test_nan_and_inf_become_none():
    fr = parse_agent_line('{"kind":"sample","ts":1,"seq":1,"gpus":[{"index":0,"power_w":NaN,"util_pct":Infinity}]}')
    assert fr.gpus[0].power_w is None and fr.gpus[0].util_pct is None


def test_sample_carries_energy_and_throttled_of_the_physical_gpu():
    line = (
        '{"kind":"sample","ts":1.0,"seq":0,"gpus":['
        '{"index":0,"energy_j":123456.5,"throttled":true},{"index":1,"energy_j":null,"throttled":null}]}'
    )
    frame = parse_agent_line(line)
    assert (frame.gpus[0].energy_j, frame.gpus[0].throttled) == (123456.5, True)
    assert (frame.gpus[1].energy_j, frame.gpus[1].throttled) == (None, None)


def test_sample_with_a_non_boolean_throttled_is_a_protocol_error():
    with pytest.raises(AgentProtocolError, match="throttled|true, false"):
        parse_agent_line('{"kind":"sample","ts":1.0,"seq":0,"gpus":[{"index":0,"throttled":"yes"}]}')


def test_every_metric_lands_in_its_own_field_and_non_finite_numbers_are_na():
    """The decoder reads a GPU's numbers in one pass (it is the hot path) and unpacks them by
    position: each key of a sample must come out under its own name."""
    import dataclasses

    from console.core.model import GpuMetrics

    names = [f.name for f in dataclasses.fields(GpuMetrics) if f.name not in ("index", "processes", "throttled")]
    entry = {name: float(100 + i) for i, name in enumerate(names)}
    entry.update(index=5, throttled=False, processes=[{"pid": 7, "name": "vllm", "vram_mib": 10}])
    frame = parse_agent_line(json.dumps({"kind": "sample", "ts": 1.0, "seq": 1, "gpus": [entry]}))
    [m] = frame.gpus
    assert {name: getattr(m, name) for name in names} == {name: float(100 + i) for i, name in enumerate(names)}
    assert (m.index, m.throttled, [p.pid for p in m.processes]) == (5, False, [7])

    text = json.dumps({"kind": "sample", "ts": 1.0, "seq": 1, "gpus": [{"index": 0}]})
    text = text.replace(
        '{"index": 0}', '{"index": 0, "util_pct": NaN, "umc_pct": Infinity, "power_w": -Infinity, "temp_mem_c": 41}'
    )
    [m] = parse_agent_line(text).gpus
    assert (m.util_pct, m.umc_pct, m.power_w, m.temp_mem_c) == (None, None, None, 41.0)


def test_a_gpu_entry_that_is_not_an_object_is_a_bad_sample_line():
    for entry in ('"gpu0"', "[1, 2]", "7", "null"):
        text = '{"kind": "sample", "ts": 1.0, "seq": 1, "gpus": [%s]}' % entry
        with pytest.raises(AgentProtocolError, match="^bad sample line: a GPU entry is not an object"):
            parse_agent_line(text)
