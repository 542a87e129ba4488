"""PrometheusClient / collect_prometheus_status failures: one line per node, never a secret."""

from __future__ import annotations

import asyncio

from console.core.model import NodeHealth, NodeSpec, PrometheusSpec
from console.services.prometheus import PrometheusClient, collect_prometheus_status
from tests.integration.sshd import free_port

NODES = [NodeSpec(name="a", host="a", telemetry="prometheus"), NodeSpec(name="b", host="b", telemetry="prometheus")]


def status(spec: PrometheusSpec, environ=None):
    client = PrometheusClient(spec, environ=environ or {}, timeout=5)
    return asyncio.run(collect_prometheus_status(spec, NODES, timeout=5, client=client))


def test_nothing_listening_is_connection_refused_for_every_node():
    url = f"http://127.0.0.1:{free_port()}"
    snaps = status(PrometheusSpec(url=url))
    assert [(s.name, s.health, s.error) for s in snaps] == [
        ("a", NodeHealth.DOWN, f"a: prometheus {url}: connection refused"),
        ("b", NodeHealth.DOWN, f"b: prometheus {url}: connection refused"),
    ]


def test_missing_ca_file_is_named():
    spec = PrometheusSpec(url="https://127.0.0.1:9", ca_file="/nonexistent/site-ca.pem", source="site.toml")
    snaps = status(spec)
    assert {s.health for s in snaps} == {NodeHealth.DOWN}
    assert snaps[0].error == "a: prometheus: ca_file /nonexistent/site-ca.pem: No such file or directory"


def test_unset_token_variable_is_named_and_a_set_one_never_shown():
    spec = PrometheusSpec(url="http://127.0.0.1:9", token_env="SITE_PROM_TOKEN", source="site.toml")
    snaps = status(spec)
    assert snaps[0].error == "a: prometheus: $SITE_PROM_TOKEN (token_env in site.toml) is not set"
    client = PrometheusClient(spec, environ={"SITE_PROM_TOKEN": "tok-123"})
    assert client.redact("Authorization: Bearer tok-123") == "Authorization: Bearer ***"
    assert "tok-123" not in client.describe()
    asyncio.run(client.aclose())
