"""Contract with AMD's Device Metrics Exporter: every metric name, label key and label
value the reader asks for or the simulator writes is one DME defines.

DME's names come from its published metric list and label documentation, kept as
data in tests/fixtures/dme/dme_published_names.toml (with the source of each part).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

from console.core import dme
from console.sim.dme_exporter import Fleet

PUBLISHED = tomllib.loads((Path(__file__).parents[1] / "fixtures" / "dme" / "dme_published_names.toml").read_text())
NAMES = {name.lower() for name in PUBLISHED["metrics"]}
INDEX_LABELS = {label for labels in PUBLISHED["index_labels"].values() for label in labels}
LABELS = set(PUBLISHED["labels"]["always"]) | set(PUBLISHED["labels"]["optional"]) | INDEX_LABELS
VALUES = PUBLISHED["values"]
CLOCK_TYPES = set(VALUES["clock_type"]) | set(VALUES["clock_type_enum"])
SERIES_RE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
PLANS = {
    "nothing known yet": dme.DmePlan(),
    "every family, no prefix": dme.make_plan(set(dme.READ_FAMILIES), ts_family={"a": "gpu_nodes_total", "b": "*"}),
    "amd_ prefix": dme.make_plan({"amd_" + f for f in dme.READ_FAMILIES}, ts_family={"a": "gpu_total_vram"}),
}


def test_the_fixture_is_dmes_list():
    # a few names any reader of DME knows, so a broken extraction cannot pass silently
    assert {"gpu_gfx_activity", "gpu_package_power", "gpu_edge_temperature", "pcie_tx", "gpu_prof_sm_active"} <= NAMES
    assert {"hostname", "gpu_id", "gpu_partition_id", "card_series", "deployment_mode", "job_user"} <= LABELS
    assert PUBLISHED["index_labels"]["gpu_clock"] == ["clock_index", "clock_type"]
    assert all(
        url.startswith("https://github.com/ROCm/device-metrics-exporter/") for url in PUBLISHED["source"].values()
    )


def test_every_family_the_reader_reads_is_a_dme_metric():
    unknown = sorted(set(dme.READ_FAMILIES) - NAMES)
    assert not unknown, f"not DME metrics: {unknown}"


def _queries() -> dict[str, str]:
    hosts = ["gpu-1", "gpu-2.example.org"]
    out = {
        "names": dme.names_match("hostname", hosts),
        "nodes": dme.nodes_query("hostname", hosts),
        "layout": dme.layout_query("hostname", hosts),
        "layout, every family": dme.layout_query("hostname", hosts, every_family=True, exact=True),
        "hosts": dme.hosts_match("hostname"),
    }
    for what, plan in PLANS.items():
        for tag, query in dme.value_queries("hostname", hosts, plan=plan).items():
            out[f"{what}: {tag}"] = query
    return out


@pytest.mark.parametrize(("what", "query"), sorted(_queries().items()))
def test_every_name_label_and_value_in_the_readers_queries_is_dmes(what, query):
    # metric names: plain ones and the alternatives of __name__ regexes
    names = set(re.findall(r"(?<![\w\"|])((?:amd_)?(?:gpu|pcie)_[a-z0-9_]+)\{", query))
    for regex in re.findall(r'__name__=~"([^"]*)"', query):
        for alternative in regex.replace("(gpu|pcie)_.+", "*").replace("\\\\", "").split("|"):
            if not alternative.endswith("*"):  # "*": every gpu_/pcie_ family
                names.add(alternative)
    unknown = sorted(n for n in names if n.removeprefix("amd_") not in NAMES)
    assert not unknown, f"{what}: not DME metrics: {unknown}"
    # label keys in matchers and in by (...)
    labels = set(re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)\s*\"", query))
    for group in re.findall(r"by \(([^)]*)\)", query):
        labels |= {part.strip() for part in group.split(",")}
    labels -= {"__name__"}
    assert not sorted(labels - LABELS), f"{what}: not DME labels: {sorted(labels - LABELS)}"
    # label values the reader matches
    for key, regex in re.findall(r"(clock_type|gpu_compute_partition_type)\s*(?:=~|!~)\s*\"([^\"]*)\"", query):
        known = CLOCK_TYPES if key == "clock_type" else set(VALUES["gpu_compute_partition_type"])
        unknown = sorted(v for v in regex.split("|") if v and v not in known)
        assert not unknown, f"{what}: {key} values DME never writes: {unknown}"


@pytest.fixture(scope="module")
def sim_pages(tmp_path_factory):
    """The simulator's /metrics for every kind of node it can be: SPX, DPX, CPX, MI2xx, a prefix."""
    nodes = [
        {"hostname": "spx", "gpu": "MI300X", "count": 1, "seed": 1},
        {"hostname": "cpx", "gpu": "MI355X", "count": 1, "compute_partition": "DPX", "memory_partition": "NPS2"},
        {"hostname": "old", "gpu": "MI300X", "count": 1, "dme_platform": "mi2xx", "card_series": "AMD Instinct MI210"},
        {"hostname": "pre", "gpu": "MI325X", "count": 1, "compute_partition": "CPX", "metric_prefix": "amd_"},
    ]
    fleet = Fleet(nodes, str(tmp_path_factory.mktemp("dme-sim")))
    fleet.render_all()
    return {host: node.page.decode() for host, node in fleet.nodes.items()}


def test_the_simulator_writes_only_dme_names_labels_and_values(sim_pages):
    seen_labels: set[str] = set()
    for host, page in sim_pages.items():
        prefix = "amd_" if host == "pre" else ""
        for line in page.splitlines():
            if line.startswith("#"):
                assert line.split()[2].startswith(prefix), line
                continue
            found = SERIES_RE.match(line)
            assert found, line
            name = found["name"]
            assert name.startswith(prefix) and name[len(prefix) :] in NAMES, f"{host}: not a DME metric: {name}"
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found["labels"]))
            assert list(labels) == sorted(labels), f"{host}: labels not in DME's (sorted) order: {line}"
            unknown = sorted(set(labels) - LABELS)
            assert not unknown, f"{host}: not DME labels: {unknown}"
            extra = set(labels) - set(PUBLISHED["labels"]["always"]) - set(PUBLISHED["labels"]["optional"])
            assert extra <= set(PUBLISHED["index_labels"].get(name[len(prefix) :], ())), f"{host}: {line}"
            seen_labels |= set(labels)
            if "clock_type" in labels:
                assert labels["clock_type"] in VALUES["clock_type"], line
            if "gpu_compute_partition_type" in labels:
                assert labels["gpu_compute_partition_type"] in VALUES["gpu_compute_partition_type"], line
                assert labels["gpu_memory_partition_type"] in VALUES["gpu_memory_partition_type"], line
                assert labels["deployment_mode"] in VALUES["deployment_mode"], line
    # DME's always-present labels are all there
    assert set(PUBLISHED["labels"]["always"]) <= seen_labels
