"""DME series from Prometheus -> the same GPU rows the SSH agent gives."""

from __future__ import annotations

import json
import re

import pytest

from console.core.dme import (
    VALUE_FAMILIES,
    DmeResponseError,
    frame_gpus,
    host_selector,
    layout_query,
    match_hosts,
    parse_history,
    parse_hosts,
    parse_layout,
    parse_values,
    unmatched_hosts,
    value_queries,
)

EVAL_TS = 1_764_000_000.5


def layout_series(host, gpu, total="196592", *, serial="S0", part=0, compute="spx", memory="nps1"):
    labels = {
        "hostname": host,
        "gpu_id": str(gpu),
        "gpu_partition_id": str(part),
        "serial_number": serial,
        "card_model": "AMD Instinct MI300X",
        "gpu_compute_partition_type": compute,
        "gpu_memory_partition_type": memory,
    }
    return {"metric": labels, "value": [EVAL_TS, total]}


def value_series(host, gpu, tag, value):
    """(family key, one series of its answer)."""
    labels = {"hostname": host}
    if gpu is not None:
        labels["gpu_id"] = str(gpu)
    return tag, {"metric": labels, "value": [EVAL_TS, value]}


def vector(items):
    return {"status": "success", "data": {"resultType": "vector", "result": items}}


def answers(tagged):
    """Value-query answers, one vector per family key."""
    out: dict = {}
    for tag, item in tagged:
        out.setdefault(tag, vector([]))["data"]["result"].append(item)
    return out


def test_spx_layout_and_values_make_the_agents_rows():
    layout = parse_layout(vector([layout_series("gpu-01", 0)]))
    (static,) = layout["gpu-01"]
    assert (static.index, static.physical, static.partition_id) == (0, 0, 0)
    assert (static.compute_partition, static.memory_partition) == ("SPX", "NPS1")
    assert static.model == "AMD Instinct MI300X" and static.vram_total_mib == 196592 and static.serial == "S0"
    payload = answers(
        [
            value_series("gpu-01", 0, "u", "87"),
            value_series("gpu-01", 0, "m", "12"),
            value_series("gpu-01", 0, "v", "150000"),
            value_series("gpu-01", 0, "p", "612"),
            value_series("gpu-01", 0, "j", "71"),
            value_series("gpu-01", 0, "t", "55"),
            value_series("gpu-01", 0, "g", "2100"),
            value_series("gpu-01", 0, "c", "1300"),
            value_series("gpu-01", None, "s", "1763999999.25"),
        ]
    )
    values = parse_values(payload)["gpu-01"]
    assert values.sample_ts == 1763999999.25  # the scrape time, not the query's evaluation time
    (m,) = frame_gpus(layout["gpu-01"], values.gpus)
    assert (m.util_pct, m.umc_pct, m.vram_used_mib, m.vram_total_mib) == (87, 12, 150000, 196592)
    assert (m.power_w, m.temp_junction_c, m.temp_mem_c, m.gfx_clock_mhz, m.mem_clock_mhz) == (612, 71, 55, 2100, 1300)
    assert m.power_cap_w is None  # DME has no power-cap family


def test_nan_is_na_and_a_gpu_without_values_is_all_na():
    layout = parse_layout(vector([layout_series("h", 0), layout_series("h", 1, serial="S1")]))["h"]
    values = parse_values(answers([value_series("h", 0, "u", "NaN"), value_series("h", 0, "j", "+Inf")]))["h"]
    first, second = frame_gpus(layout, values.gpus)
    assert first.util_pct is None and first.temp_junction_c is None
    assert second.index == 1 and second.util_pct is None and second.vram_total_mib == 196592
    assert values.sample_ts is None


def test_cpx_partitions_are_grouped_by_the_physical_gpus_serial():
    items = []
    # Two MI300X in CPX: gpu_id 0-7 share serial B (sorts after A on purpose), 8-15 serial A.
    for gpu in range(16):
        serial = "B-serial" if gpu < 8 else "A-serial"
        items.append(layout_series("cpx", gpu, "24574", serial=serial, part=gpu % 8, compute="cpx"))
    static = parse_layout(vector(list(reversed(items))))["cpx"]
    assert [s.index for s in static] == list(range(16))
    assert [s.physical for s in static] == [0] * 8 + [1] * 8  # ordered by lowest gpu_id, not serial
    assert [s.partition_id for s in static] == list(range(8)) * 2
    assert {s.compute_partition for s in static} == {"CPX"}


def test_malformed_series_are_skipped():
    items = [
        value_series("h", 0, "u", "5"),
        value_series("h", "x", "u", "6"),
        value_series("h", 1, "zz", "7"),
        ("u", {"metric": {"hostname": "h"}, "value": [1, "3"]}),
        ("u", "junk"),
        ("u", {"metric": {}, "value": "x"}),
    ]
    values = parse_values(answers(items))["h"]
    assert values.gpus == {0: {"util_pct": 5.0}}


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}, "bad_data: parse error"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "expected a vector"),
        ([], "not a JSON object"),
        ({"status": "success"}, "no data"),
    ],
)
def test_bad_answers_raise_one_clear_error(payload, fragment):
    for parse in (parse_layout, parse_hosts, lambda p: parse_values({"u": p})):
        with pytest.raises(DmeResponseError, match=re.escape(fragment)):
            parse(payload)


def test_match_hosts_exact_then_short_name():
    found = ["gpu-01.dc.example.org", "gpu-02", "GPU-03.example.org", "other"]
    wanted = {"a": "gpu-01", "b": "gpu-02.dc.example.org", "c": "gpu-03.example.org", "d": "gpu-09"}
    assert match_hosts(wanted, found) == {"a": "gpu-01.dc.example.org", "b": "gpu-02", "c": "GPU-03.example.org"}
    assert unmatched_hosts(wanted.values(), found) == ["other"]


def test_host_selector_matches_short_and_full_names_only():
    selector = host_selector("hostname", ["gpu-1.dc.org", "gpu-2"])
    pattern = json.loads(selector.split("=~", 1)[1])  # the PromQL string literal
    rx = re.compile(pattern)
    for name in ("gpu-1", "gpu-1.dc.org", "gpu-2", "gpu-2.x"):
        assert rx.fullmatch(name), name  # Prometheus anchors regex matchers
    for name in ("gpu-10", "xgpu-2", "gpu-3"):
        assert not rx.fullmatch(name), name
    assert host_selector("hostname", None) == 'hostname!=""'


def test_value_queries_one_per_family_with_lean_labels():
    queries = value_queries("hostname", ["n1", "n2"])
    assert set(queries) == {*VALUE_FAMILIES, "s"}  # each family plus the scrape time
    sel = 'hostname=~"n1(\\\\..*)?|n2(\\\\..*)?"'
    assert queries["u"] == f"max by (hostname, gpu_id) (gpu_gfx_activity{{{sel}}})"  # every partition
    assert queries["p"] == (
        f'max by (hostname, gpu_id) (gpu_package_power{{{sel}, gpu_partition_id="0"}})'
        f' or max by (hostname, gpu_id) (gpu_power_usage{{{sel}, gpu_partition_id="0"}})'
    )
    assert queries["g"].endswith(
        f'gpu_clock{{{sel}, gpu_partition_id="0", clock_type=~"GPU_CLOCK_TYPE_SYSTEM|system"}})'
    )
    assert queries["s"] == f"max by (hostname) (timestamp(gpu_total_vram{{{sel}}}))"
    assert not any("serial_number" in q for q in queries.values())  # identity labels come from the layout
    layout = layout_query("hostname", ["n1"])
    assert layout.startswith("max by (hostname, gpu_id, gpu_partition_id, serial_number, card_model, ")


def test_parse_hosts_and_history():
    hosts = vector([{"metric": {"hostname": "b"}, "value": [1, "8"]}, {"metric": {"hostname": "a"}, "value": [1, "8"]}])
    assert parse_hosts(hosts) == ["a", "b"]
    gpu3 = {"hostname": "h", "gpu_id": "3"}

    def matrix(*items):
        return {"status": "success", "data": {"resultType": "matrix", "result": list(items)}}

    history = parse_history(
        {
            "p": matrix({"metric": gpu3, "values": [[101, "300"], [100, "200"]]}),
            "u": matrix({"metric": gpu3, "values": [[100, "10"], [101, "20"]]}),
            "s": matrix({"metric": {"hostname": "h"}, "values": [[100, "99"]]}),
        }
    )
    assert list(history) == [3]
    assert history[3] == [(100, {"util_pct": 10, "power_w": 200}), (101, {"util_pct": 20, "power_w": 300})]
