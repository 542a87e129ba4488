"""DME series from Prometheus -> the same GPU rows the SSH agent gives."""

from __future__ import annotations

import json
import re

import pytest

from console.core.dme import (
    FAMILIES,
    DmeResponseError,
    fleet_query,
    host_selector,
    match_hosts,
    parse_fleet,
    parse_history,
    parse_hosts,
    unmatched_hosts,
)

EVAL_TS = 1_764_000_000.5


def series(host, gpu, field, value, *, serial="S0", part=0, compute="spx", memory="nps1", **extra):
    labels = {
        "hostname": host,
        "gpu_id": str(gpu),
        "gpu_partition_id": str(part),
        "serial_number": serial,
        "card_model": "AMD Instinct MI300X",
        "gpu_compute_partition_type": compute,
        "gpu_memory_partition_type": memory,
        "console_field": field,
        **extra,
    }
    return {"metric": labels, "value": [EVAL_TS, value]}


def vector(items):
    return {"status": "success", "data": {"resultType": "vector", "result": items}}


def test_spx_host_fields_units_and_sample_time():
    payload = vector(
        [
            series("gpu-01", 0, "util_pct", "87"),
            series("gpu-01", 0, "umc_pct", "12"),
            series("gpu-01", 0, "vram_used_mib", "150000"),
            series("gpu-01", 0, "vram_total_mib", "196592"),
            series("gpu-01", 0, "power_w", "612"),
            series("gpu-01", 0, "power_usage_w", "500"),
            series("gpu-01", 0, "temp_junction_c", "71"),
            series("gpu-01", 0, "temp_mem_c", "55"),
            series("gpu-01", 0, "gfx_clock_mhz", "2100"),
            series("gpu-01", 0, "mem_clock_mhz", "1300"),
            series("gpu-01", 0, "ts", "1763999999.25"),
        ]
    )
    host = parse_fleet(payload)["gpu-01"]
    assert host.sample_ts == 1763999999.25  # the scrape time, not the query's evaluation time
    (static,) = host.static
    assert (static.index, static.physical, static.partition_id) == (0, 0, 0)
    assert (static.compute_partition, static.memory_partition) == ("SPX", "NPS1")
    assert static.model == "AMD Instinct MI300X" and static.vram_total_mib == 196592
    (m,) = host.gpus
    assert (m.util_pct, m.umc_pct, m.vram_used_mib, m.vram_total_mib) == (87, 12, 150000, 196592)
    assert m.power_w == 612  # gpu_package_power wins over gpu_power_usage
    assert (m.temp_junction_c, m.temp_mem_c, m.gfx_clock_mhz, m.mem_clock_mhz) == (71, 55, 2100, 1300)
    assert m.power_cap_w is None  # DME has no power-cap family


def test_power_usage_is_the_fallback_and_nan_is_not_a_number():
    payload = vector(
        [
            series("h", 0, "power_usage_w", "450"),
            series("h", 0, "util_pct", "NaN"),
            series("h", 0, "temp_junction_c", "+Inf"),
        ]
    )
    (m,) = parse_fleet(payload)["h"].gpus
    assert m.power_w == 450
    assert m.util_pct is None and m.temp_junction_c is None


def test_cpx_partitions_are_grouped_by_the_physical_gpus_serial():
    items = []
    # Two MI300X in CPX: gpu_id 0-7 share serial B (listed second on purpose), 8-15 serial A.
    for gpu in range(16):
        serial = "B-serial" if gpu < 8 else "A-serial"
        items.append(series("cpx", gpu, "util_pct", str(gpu), serial=serial, part=gpu % 8, compute="cpx"))
    payload = vector(list(reversed(items)))
    host = parse_fleet(payload)["cpx"]
    assert [s.index for s in host.static] == list(range(16))
    assert [s.physical for s in host.static] == [0] * 8 + [1] * 8  # ordered by lowest gpu_id, not serial
    assert [s.partition_id for s in host.static] == list(range(8)) * 2
    assert {s.compute_partition for s in host.static} == {"CPX"}
    assert [m.util_pct for m in host.gpus] == [float(g) for g in range(16)]


def test_series_without_hostname_gpu_id_or_field_are_ignored():
    good = series("h", 0, "util_pct", "5")
    no_gpu = series("h", 0, "util_pct", "6")
    no_gpu["metric"]["gpu_id"] = ""
    no_field = series("h", 1, "util_pct", "7")
    del no_field["metric"]["console_field"]
    hosts = parse_fleet(vector([good, no_gpu, no_field, "junk", {"metric": {}, "value": "x"}]))
    assert [m.util_pct for m in hosts["h"].gpus] == [5]


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
    with pytest.raises(DmeResponseError, match=re.escape(fragment)):
        parse_fleet(payload)


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


def test_fleet_query_is_one_expression_over_every_family():
    query = fleet_query("hostname", ["n1", "n2"])
    assert query.count(" or ") == len(FAMILIES)  # the families plus the timestamp, joined
    for metric, _ in FAMILIES.values():
        assert f"{metric}{{" in query
    assert "max by (hostname, gpu_id, gpu_partition_id, serial_number" in query
    assert "timestamp(gpu_total_vram" in query
    assert 'clock_type=~"GPU_CLOCK_TYPE_SYSTEM|system"' in query


def test_parse_hosts_and_history():
    hosts = vector([{"metric": {"hostname": "b"}, "value": [1, "8"]}, {"metric": {"hostname": "a"}, "value": [1, "8"]}])
    assert parse_hosts(hosts) == ["a", "b"]
    labels = series("h", 3, "util_pct", "0")["metric"]
    power = {**labels, "console_field": "power_w"}
    stamp = {**labels, "console_field": "ts"}
    matrix = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": power, "values": [[101, "300"], [100, "200"]]},
                {"metric": labels, "values": [[100, "10"], [101, "20"]]},
                {"metric": stamp, "values": [[100, "99"]]},
            ],
        },
    }
    history = parse_history(matrix)
    assert list(history) == [3]
    assert [(ts, m.util_pct, m.power_w) for ts, m in history[3]] == [(100, 10, 200), (101, 20, 300)]


def test_device_values_go_on_the_first_partition_only_like_the_agent():
    items = []
    for gpu in range(4):
        common = {"serial": "S", "part": gpu % 4, "compute": "qpx"}
        items += [series("q", gpu, "power_w", "600", **common), series("q", gpu, "util_pct", str(10 * gpu), **common)]
        items += [
            series("q", gpu, "temp_junction_c", "70", **common),
            series("q", gpu, "vram_used_mib", "100", **common),
        ]
    gpus = parse_fleet(vector(items))["q"].gpus
    assert [m.power_w for m in gpus] == [600, None, None, None]
    assert [m.temp_junction_c for m in gpus] == [70, None, None, None]
    assert [m.util_pct for m in gpus] == [0, 10, 20, 30]  # per-partition values stay
    assert [m.vram_used_mib for m in gpus] == [100] * 4
