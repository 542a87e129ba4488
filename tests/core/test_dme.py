"""DME series from Prometheus -> the same GPU rows the SSH agent gives."""

from __future__ import annotations

import json
import re

import pytest

from console.core.dme import (
    AUTO_PREFIXES,
    VALUE_FAMILIES,
    DmePlan,
    DmeResponseError,
    clean_text,
    frame_gpus,
    host_selector,
    hosts_match,
    layout_query,
    make_plan,
    match_hosts,
    names_match,
    nodes_query,
    parse_history,
    parse_hosts,
    parse_layout,
    parse_names,
    parse_values,
    partition_of,
    ts_query,
    unmatched_hosts,
    value_queries,
)

EVAL_TS = 1_764_000_000.5


def layout_series(
    host, gpu, *, serial="S0", part="0", compute="spx", memory="nps1", model="102-G30211-0C", series=None, vram="196592"
):
    labels = {
        "hostname": host,
        "gpu_id": str(gpu),
        "gpu_partition_id": str(part),
        "serial_number": serial,
        "card_model": model,
        "gpu_compute_partition_type": compute,
        "gpu_memory_partition_type": memory,
    }
    if series is not None:
        labels["card_series"] = series
    return {"metric": labels, "value": [EVAL_TS, vram]}


def value_series(host, gpu, tag, value):
    """(field tag, one series of its answer)."""
    labels = {"hostname": host}
    if gpu is not None:
        labels["gpu_id"] = str(gpu)
    return tag, {"metric": labels, "value": [EVAL_TS, value]}


def vector(items):
    return {"status": "success", "data": {"resultType": "vector", "result": items}}


def answers(tagged):
    """Value-query answers, one vector per field tag."""
    out: dict = {}
    for tag, item in tagged:
        out.setdefault(tag, vector([]))["data"]["result"].append(item)
    return out


def test_spx_layout_and_values_make_the_agents_rows():
    layout = parse_layout(vector([layout_series("gpu-01", 0, series="AMD Instinct MI300X OAM")]))
    (static,) = layout["gpu-01"]
    assert (static.index, static.physical, static.partition_id) == (0, 0, 0)
    assert (static.compute_partition, static.memory_partition) == ("SPX", "NPS1")
    # the market name (card_series), not the board part number (card_model)
    assert static.model == "AMD Instinct MI300X OAM" and static.vram_total_mib == 196592 and static.serial == "S0"
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


def test_the_part_number_is_the_model_only_when_dme_gives_no_market_name():
    rows = parse_layout(
        vector(
            [
                layout_series("h", 0, model="102-G30213-0C"),  # older DME: no card_series label
                layout_series("h", 1, serial="S1", model="", series="Aqua Vanjaram [Instinct MI300X VF]"),
                layout_series("h", 2, serial="S2", model="", series=""),
                layout_series("h", 3, serial="N/A", model="N/A", series="AMD Instinct\x1b[31m MI210\n"),
            ]
        )
    )["h"]
    assert [g.model for g in rows] == [
        "102-G30213-0C",
        "Aqua Vanjaram [Instinct MI300X VF]",
        None,
        "AMD Instinct [31m MI210",
    ]
    assert [g.serial for g in rows] == ["S0", "S1", "S2", None]  # "N/A" is no serial


@pytest.mark.parametrize("raw", ["NA", "4294967295", "", None])
def test_na_and_uint_max_partition_ids_are_no_partition(raw):
    labels = {"gpu_id": "3"} if raw is None else {"gpu_id": "3", "gpu_partition_id": raw}
    assert partition_of(labels) is None
    item = {"metric": {"hostname": "h", **labels, "gpu_compute_partition_type": "none"}, "value": [1, "1"]}
    (gpu,) = parse_layout(vector([item]))["h"]
    assert (gpu.index, gpu.physical, gpu.partition_id, gpu.compute_partition) == (3, 0, 0, None)


def test_nan_zero_sentinels_and_huge_numbers_are_na_and_a_gpu_without_values_is_all_na():
    layout = parse_layout(vector([layout_series("h", 0), layout_series("h", 1, serial="S1")]))["h"]
    payload = answers(
        [
            value_series("h", 0, "u", "NaN"),
            value_series("h", 0, "j", "+Inf"),
            value_series("h", 0, "p", "0"),  # DME's "not available"
            value_series("h", 0, "t", "65535"),
            value_series("h", 0, "v", "4294967295"),
            value_series("h", 0, "m", "250"),  # over 100 %
            value_series("h", 0, "g", 10**400),  # a JSON number no float holds
            value_series("h", 0, "c", "1e999"),
        ]
    )
    values = parse_values(payload)["h"]
    first, second = frame_gpus(layout, values.gpus)
    assert first.index == 0 and all(
        v is None
        for v in (
            first.util_pct,
            first.temp_junction_c,
            first.power_w,
            first.temp_mem_c,
            first.vram_used_mib,
            first.umc_pct,
            first.gfx_clock_mhz,
            first.mem_clock_mhz,
        )
    )
    assert second.index == 1 and second.util_pct is None
    assert values.sample_ts is None


def test_cpx_partitions_are_grouped_by_the_physical_gpus_serial():
    items = []
    # Two MI300X in CPX: gpu_id 0-7 share serial B (sorts after A on purpose), 8-15 serial A.
    for gpu in range(16):
        serial = "B-serial" if gpu < 8 else "A-serial"
        items.append(layout_series("cpx", gpu, serial=serial, part=gpu % 8, compute="cpx"))
    static = parse_layout(vector(list(reversed(items))))["cpx"]
    assert [s.index for s in static] == list(range(16))
    assert [s.physical for s in static] == [0] * 8 + [1] * 8  # ordered by lowest gpu_id, not serial
    assert [s.partition_id for s in static] == list(range(8)) * 2
    assert {s.compute_partition for s in static} == {"CPX"}


def test_partitions_without_a_serial_join_the_gpu_before_them():
    # A VF-like node: no serials; partitions 0-1 of two devices, and a lone partition 6.
    parts = [(0, 0), (1, 1), (2, 0), (3, 1), (14, 6)]
    items = [layout_series("h", gpu, serial="", part=part, compute="dpx") for gpu, part in parts]
    static = parse_layout(vector(items))["h"]
    assert [(g.index, g.physical, g.partition_id) for g in static] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 1, 1),
        (14, 2, 6),
    ]


def test_malformed_series_are_skipped():
    items = [
        value_series("h", 0, "u", "5"),
        value_series("h", "x", "u", "6"),
        value_series("h", 1, "zz", "7"),
        ("u", {"metric": {"hostname": "h"}, "value": [1, "3"]}),
        ("u", "junk"),
        ("u", {"metric": {}, "value": "x"}),
        ("u", {"metric": {"hostname": ["h"], "gpu_id": "2"}, "value": [1, "3"]}),
        ("u", {"metric": {"hostname": "h", "gpu_id": ["2"]}, "value": [1, "3"]}),
        ("u", {"metric": {"hostname": "h", "gpu_id": "9" * 40}, "value": [1, "3"]}),
        ("u", {"metric": {"hostname": "h", "gpu_id": "\u00b2"}, "value": [1, "3"]}),  # a digit int() refuses
        ("u", {"metric": ["h"], "value": [1, "3"]}),
    ]
    values = parse_values(answers(items))["h"]
    assert values.gpus == {0: {"util_pct": 5.0}}
    bad_layout = [
        {"metric": {"hostname": 7, "gpu_id": "0"}},
        {"metric": {"hostname": "h", "gpu_id": "-1"}},
        {"metric": {"hostname": "h", "gpu_id": "1", "card_model": {"x": 1}, "gpu_partition_id": ["0"]}},
        "junk",
    ]
    (only,) = parse_layout(vector(bad_layout))["h"]
    assert (only.index, only.model, only.partition_id) == (1, None, 0)


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}, "bad_data: parse error"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "expected a vector"),
        ([], "not a JSON object"),
        ({"status": "success"}, "no data"),
        ({"status": "error", "error": "line1\nline2\x1b[2J" + "x" * 500}, "error: line1 line2 [2J"),
    ],
)
def test_bad_answers_raise_one_clear_error(payload, fragment):
    for parse in (parse_layout, parse_hosts, lambda p: parse_values({"u": p})):
        with pytest.raises(DmeResponseError, match=re.escape(fragment)) as info:
            parse(payload)
        assert "\n" not in str(info.value) and "\x1b" not in str(info.value) and len(str(info.value)) < 300


def test_clean_text_keeps_one_printable_line():
    assert clean_text("a\r\nb\tc\x1b[0m\x9bd") == "a b c [0m d"
    assert len(clean_text("y" * 1000)) == 120


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


def names_of(query: str) -> set[str]:
    """The metric names a query can select (from its __name__ regexes and plain names)."""
    out = set(re.findall(r"\b((?:amd_)?(?:gpu|pcie)_[a-z_]+)\{", query))
    for regex in re.findall(r'__name__=~"([^"]*)"', query):
        out |= set(regex.replace("\\\\", "").split("|"))
    return out


def test_value_queries_read_the_right_family_per_partition_and_lean_labels():
    names = {"gpu_nodes_total", "gpu_gfx_activity", "gpu_gfx_busy_instantaneous", "gpu_clock", "pcie_tx"}
    plan = make_plan(names, ts_family={"n1": "gpu_nodes_total"})
    assert plan.prefixes == ("",) and plan.ts_groups == (("gpu_nodes_total", ("n1",)),)
    queries = value_queries("hostname", ["n1", "n2"], plan=plan)
    assert set(queries) == {"u", "g", "c", "s"}  # fields no present family gives are not asked
    sel = 'hostname=~"n1(\\\\..*)?|n2(\\\\..*)?"'
    # a partitioned GPU: each partition's own busy (averaged over its XCCs); else gfx_activity
    assert queries["u"] == (
        f'avg by (hostname, gpu_id) (gpu_gfx_busy_instantaneous{{{sel}, gpu_compute_partition_type!~"spx|none|"}} <= 100)'
        f" or max by (hostname, gpu_id) (gpu_gfx_activity{{{sel}}})"
    )
    # device-wide values from the physical GPU's own series: partition 0, or no partition at all
    assert queries["g"] == (
        f'max by (hostname, gpu_id) (gpu_clock{{{sel}, gpu_partition_id=~"0|NA|4294967295", '
        f'clock_type=~"GPU_CLOCK_TYPE_SYSTEM|system"}})'
    )
    assert queries["s"] == f"max by (hostname) (timestamp(gpu_nodes_total{{{sel}}}))"
    assert not any("serial_number" in q for q in queries.values())  # identity labels come from the layout


def test_power_and_temperature_fall_back_over_zero_and_mi2xx_families():
    names = {"gpu_package_power", "gpu_power_usage", "gpu_junction_temperature"}
    names |= {"gpu_average_package_power", "gpu_edge_temperature", "gpu_total_vram"}
    plan = make_plan(names, ts_family={"b": "gpu_total_vram", "a": "*"})
    queries = value_queries("hostname", ["a", "b"], plan=plan)
    assert re.findall(r"\((gpu_[a-z_]+)\{[^}]*\} > 0\)", queries["p"]) == [
        "gpu_package_power",
        "gpu_average_package_power",
    ]  # gpu_power_usage, which DME writes beside them, only for a fleet that has neither
    only_usage = value_queries("hostname", ["a"], plan=make_plan({"gpu_power_usage"}))
    assert re.findall(r"\((gpu_[a-z_]+)\{[^}]*\} > 0\)", only_usage["p"]) == ["gpu_power_usage"]
    assert re.findall(r"\((gpu_[a-z_]+)\{[^}]*\} > 0\)", queries["j"]) == [
        "gpu_junction_temperature",
        "gpu_edge_temperature",
    ]
    # scrape time: "b" through gpu_total_vram, "a" (which has none) through any family it has
    assert plan.ts_groups == (("gpu_total_vram", ("b",)), ("*", ("a",)))
    ts = ts_query("hostname", ["a", "b"], plan)
    assert ts.startswith("max by (hostname) (timestamp(gpu_total_vram{")
    # several names under one timestamp(): each keeps its name in a label of its own, no collision
    keep = '"dme_metric", "$1", "__name__", "(.+)"'
    assert ts.endswith(
        f'max by (hostname) (timestamp(label_replace({{__name__=~"(gpu|pcie)_.+", hostname=~"a"}}, {keep})))'
    )


def test_prefix_is_detected_from_the_names_prometheus_holds_or_taken_from_the_profile():
    assert make_plan({"amd_gpu_nodes_total", "amd_gpu_gfx_activity"}).prefixes == ("amd_",)
    assert make_plan({"gpu_gfx_activity", "amd_gpu_gfx_activity"}).prefixes == ("", "amd_")
    assert make_plan(set()).prefixes == AUTO_PREFIXES and make_plan(set()).families is None
    site = make_plan({"site_gpu_gfx_activity"}, configured_prefix="site_")
    assert site.prefixes == ("site_",) and site.families == frozenset({"gpu_gfx_activity"})
    queries = value_queries("hostname", ["a"], plan=site)
    assert "site_gpu_gfx_activity{" in queries["u"] and "gpu_gfx_busy" not in queries["u"]
    both = value_queries("hostname", ["a"], plan=make_plan({"gpu_gfx_activity", "amd_gpu_gfx_activity"}))
    assert names_of(both["u"]) == {"gpu_gfx_activity", "amd_gpu_gfx_activity"}


def test_busy_alone_gives_utilization_and_a_host_with_no_known_family_is_timed_by_any():
    plan = make_plan({"gpu_gfx_busy_instantaneous"}, ts_family={"pcie-only": "*"})
    assert plan.ts_groups == (("*", ("pcie-only",)),)
    queries = value_queries("hostname", ["a", "pcie-only"], plan=plan)
    assert queries["u"].count("gpu_gfx_busy_instantaneous") == 2  # partitioned or not
    assert queries["s"].startswith('max by (hostname) (timestamp(label_replace({__name__=~"(gpu|pcie)_.+", hostname=~')


def test_layout_names_nodes_and_discovery_queries():
    by = "hostname, gpu_id, gpu_partition_id, serial_number, card_model, card_series, "
    by += "gpu_compute_partition_type, gpu_memory_partition_type"
    layout = layout_query("hostname", ["n1"])
    assert layout.startswith(f'max by ({by}) ({{__name__=~"gpu_total_vram|amd_gpu_total_vram", hostname=~')
    every = layout_query("hostname", ["n1.x"], ("",), every_family=True, exact=True)
    assert every.startswith(f'max by ({by}) ({{__name__=~"(gpu|pcie)_.+", gpu_id!="", hostname=~')
    for query in (every, hosts_match("hostname")):
        regex = json.loads(re.search(r'__name__=~("[^"]*")', query).group(1))
        for name in ("gpu_total_vram", "pcie_tx"):
            assert re.fullmatch(regex, name), name
        assert not re.fullmatch(regex, "node_cpu_seconds_total") and not re.fullmatch(regex, "DCGM_FI_DEV_GPU_UTIL")
    discover = json.loads(re.search(r'__name__=~("[^"]*")', hosts_match("hostname")).group(1))
    assert re.fullmatch(discover, "amd_pcie_speed")
    assert names_of(names_match("hostname", ["n1"], ("",))) >= {"gpu_nodes_total", "gpu_gfx_busy_instantaneous"}
    assert nodes_query("hostname", ["n1"], ("amd_",)).startswith("count by (hostname) (amd_gpu_nodes_total{hostname=~")


def test_parse_names_hosts_and_history():
    answer = {"status": "success", "data": ["gpu_clock", 3, "", None, "gpu_nodes_total"]}
    assert parse_names(answer) == {"gpu_clock", "gpu_nodes_total"}
    for bad in ({"status": "success", "data": {"a": 1}}, [], {"status": "error", "error": "x"}):
        with pytest.raises(DmeResponseError):
            parse_names(bad)
    hosts = vector([{"metric": {"hostname": "b"}, "value": [1, "8"]}, {"metric": {"hostname": "a"}, "value": [1, "8"]}])
    assert parse_hosts(hosts) == ["a", "b"]
    gpu3 = {"hostname": "h", "gpu_id": "3"}

    def matrix(*items):
        return {"status": "success", "data": {"resultType": "matrix", "result": list(items)}}

    history = parse_history(
        {
            "p": matrix({"metric": gpu3, "values": [[101, "300"], [100, "200"], [102, "0"]]}),
            "u": matrix({"metric": gpu3, "values": [[100, "10"], [101, "20"], [10**400, "1"]]}),
            "s": matrix({"metric": {"hostname": "h"}, "values": [[100, "99"]]}),
        }
    )
    assert list(history) == [3]
    assert history[3] == [
        (100, {"util_pct": 10, "power_w": 200}),
        (101, {"util_pct": 20, "power_w": 300}),
        (102, {"power_w": None}),
    ]


def test_every_field_has_a_query_when_nothing_is_known_yet():
    queries = value_queries("hostname", ["n1"], plan=DmePlan())
    assert set(queries) == {*VALUE_FAMILIES, "s"}


def test_per_partition_busy_is_asked_only_when_some_gpu_is_partitioned():
    names = {"gpu_gfx_activity", "gpu_gfx_busy_instantaneous"}
    spx = value_queries("hostname", ["a"], plan=make_plan(names, partitioned=False))["u"]
    cpx = value_queries("hostname", ["a"], plan=make_plan(names, partitioned=True))["u"]
    assert "gpu_gfx_busy_instantaneous" not in spx and "gpu_gfx_activity" in spx
    assert cpx.index("gpu_gfx_busy_instantaneous") < cpx.index("gpu_gfx_activity")
