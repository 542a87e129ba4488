"""Profiles: telemetry = "prometheus" per node or per file, and the [prometheus] table."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from console.core.errors import ProfileError
from console.core.profiles import load_profile


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def fail(tmp_path: Path, text: str) -> tuple[ProfileError, Path]:
    path = write(tmp_path, "site.toml", text)
    with pytest.raises(ProfileError) as info:
        load_profile([path])
    return info.value, path


def test_file_level_telemetry_applies_to_its_nodes_and_a_node_can_opt_out(tmp_path):
    site = write(
        tmp_path,
        "site.toml",
        """
        telemetry = "prometheus"

        [prometheus]
        url = "https://prom.example.org:9090/prom/"
        token_env = "PROM_TOKEN"
        ca_file = "/etc/ssl/site.pem"
        scrape_interval = 15
        hostname_label = "instance_host"
        metric_prefix = "amd_"

        [nodes.gpu-001]
        host = "gpu-001.example.org"
        prometheus_host = "gpu001"

        [nodes.gpu-002]
        host = "gpu-002.example.org"
        telemetry = "ssh"
        """,
    )
    lab = write(tmp_path, "lab.toml", '[nodes.lab]\nhost = "lab"\n')
    profile = load_profile([site, lab])
    prom = profile.prometheus
    assert prom is not None
    assert prom.url == "https://prom.example.org:9090/prom"  # trailing slash dropped
    assert (prom.token_env, prom.ca_file, prom.scrape_interval, prom.hostname_label, prom.metric_prefix) == (
        "PROM_TOKEN",
        "/etc/ssl/site.pem",
        15.0,
        "instance_host",
        "amd_",
    )
    by_name = {n.name: n for n in profile.nodes}
    assert by_name["gpu-001"].telemetry == "prometheus"
    assert by_name["gpu-001"].prometheus_host == "gpu001"
    assert by_name["gpu-002"].telemetry == "ssh"
    assert by_name["lab"].telemetry == "ssh"  # another file's setting does not leak


def test_per_node_telemetry_with_prometheus_in_another_file(tmp_path):
    prom = write(tmp_path, "a.toml", '[prometheus]\nurl = "http://127.0.0.1:9090"\n')
    nodes = write(tmp_path, "b.toml", '[nodes.n1]\nhost = "n1"\ntelemetry = "prometheus"\n')
    profile = load_profile([prom, nodes])
    assert profile.nodes[0].telemetry == "prometheus"
    assert profile.prometheus is not None and profile.prometheus.hostname_label == "hostname"
    assert profile.prometheus.metric_prefix is None  # unset: detected from what Prometheus holds


def test_an_empty_metric_prefix_means_none(tmp_path):
    path = write(tmp_path, "a.toml", '[prometheus]\nurl = "http://127.0.0.1:9090"\nmetric_prefix = ""\n')
    prom = load_profile([path]).prometheus
    assert prom is not None and prom.metric_prefix == ""


@pytest.mark.parametrize(
    ("text", "line", "table", "key", "fragment"),
    [
        ('[prometheus]\nurl = "ftp://x"\n', 2, "prometheus", "url", "expected an http:// or https:// URL"),
        ('[prometheus]\nurl = "http://u:pw@x:9090"\n', 2, "prometheus", "url", "secrets do not belong"),
        ('[prometheus]\nurl = "http://x:99999"\n', 2, "prometheus", "url", "bad port"),
        ('[prometheus]\nurl = "http://x/?a=1"\n', 2, "prometheus", "url", "without ?query"),
        ('[prometheus]\ntoken_env = "T"\n', 1, "prometheus", "url", "missing required key"),
        ('[prometheus]\nurl = "http://x"\ntoken = "abc"\n', 3, "prometheus", "token", "secrets do not belong"),
        ('[prometheus]\nurl = "http://x"\ntoken_env = "MY-TOKEN"\n', 3, "prometheus", "token_env", "environment"),
        ('[prometheus]\nurl = "http://x"\nscrape_interval = 0\n', 3, "prometheus", "scrape_interval", "must be > 0"),
        (
            '[prometheus]\nurl = "http://x"\nscrape_intervall = 5\n',
            3,
            "prometheus",
            "scrape_intervall",
            "did you mean 'scrape_interval'",
        ),
        ('[prometheus]\nurl = "http://x"\nhostname_label = "host-name"\n', 3, "prometheus", "hostname_label", "label"),
        ('[prometheus]\nurl = "http://x"\nmetric_prefix = "amd-"\n', 3, "prometheus", "metric_prefix", "metric name"),
        ('[prometheus]\nurl = "http://x"\nmetric_prefix = 1\n', 3, "prometheus", "metric_prefix", "expected"),
        ('telemetry = "snmp"\n', 1, None, "telemetry", "must be one of: ssh, prometheus"),
        ('[nodes.a]\nhost = "a"\ntelemetry = "dme"\n', 3, "nodes.a", "telemetry", "must be one of: ssh, prometheus"),
        ('[nodes.a]\nhost = "a"\ntelemetry = "prometheus"\n', 3, "nodes.a", "telemetry", "needs a [prometheus] table"),
        ('telemetry = "prometheus"\n[nodes.a]\nhost = "a"\n', 1, None, "telemetry", "needs a [prometheus] table"),
    ],
    ids=[
        "scheme",
        "password",
        "port",
        "query",
        "no-url",
        "token-in-file",
        "token-env-name",
        "interval",
        "typo",
        "label",
        "prefix-dash",
        "prefix-number",
        "file-telemetry",
        "node-telemetry",
        "node-without-prometheus",
        "file-without-prometheus",
    ],
)
def test_bad_prometheus_settings_name_file_table_and_key(tmp_path, text, line, table, key, fragment):
    err, path = fail(tmp_path, text)
    assert (err.file, err.line, err.table, err.key) == (str(path), line, table, key)
    assert fragment in err.message
    assert "\n" not in str(err)
    assert "abc" not in str(err) and "pw" not in str(err)  # a secret value is never echoed


def test_prometheus_twice_names_both_files(tmp_path):
    a = write(tmp_path, "a.toml", '[prometheus]\nurl = "http://a"\n')
    b = write(tmp_path, "b.toml", '[prometheus]\nurl = "http://b"\n')
    with pytest.raises(ProfileError) as info:
        load_profile([a, b])
    assert info.value.file == str(b)
    assert str(a) in info.value.message
