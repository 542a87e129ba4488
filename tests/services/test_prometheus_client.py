"""PrometheusClient / collect_prometheus_status failures: one line per node, never a secret."""

from __future__ import annotations

import asyncio

import pytest

from console.core.model import NodeHealth, NodeSnapshot, NodeSpec, PrometheusSpec
from console.services.prometheus import PrometheusClient, collect_prometheus_status, plaintext_token_warning
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


@pytest.mark.parametrize(
    ("url", "token_env", "warns"),
    [
        ("http://prom.example.org:9090", "PROM_TOKEN", True),
        ("http://10.1.2.3:9090/prom", "PROM_TOKEN", True),
        ("http://[2001:db8::1]:9090", "PROM_TOKEN", True),
        ("https://prom.example.org:9090", "PROM_TOKEN", False),  # encrypted
        ("http://prom.example.org:9090", None, False),  # no token to leak
        ("http://127.0.0.1:9090", "PROM_TOKEN", False),  # a tunnel: the token stays on this machine
        ("http://127.8.9.10:9090", "PROM_TOKEN", False),
        ("http://localhost:19090", "PROM_TOKEN", False),
        ("http://[::1]:9090", "PROM_TOKEN", False),
    ],
)
def test_a_token_over_plain_http_to_another_host_warns(url, token_env, warns):
    line = plaintext_token_warning(PrometheusSpec(url=url, token_env=token_env, source="site.toml"))
    if not warns:
        assert line is None
        return
    assert line is not None and "\n" not in line
    assert line.startswith("warning: [prometheus] url in site.toml is plain http to ")
    assert "token_env = PROM_TOKEN" in line and "https://" in line


def test_the_cli_warns_once_per_process(tmp_path, capsys, monkeypatch):
    from console.cli.entry import main
    from console.services import prometheus

    async def no_prometheus(spec, nodes, **_):  # the warning is the CLI's, before any query
        return [NodeSnapshot(n.name, NodeHealth.DOWN, error=f"{n.name}: (not asked)") for n in nodes]

    monkeypatch.setattr(prometheus, "collect_prometheus_status", no_prometheus)
    monkeypatch.setattr(prometheus, "_warned", set())
    monkeypatch.setenv("K_TOKEN", "secret-value-1")
    path = tmp_path / "site.toml"
    path.write_text(
        'telemetry = "prometheus"\n[prometheus]\nurl = "http://prom.site.example:9090"\ntoken_env = "K_TOKEN"\n'
        '[nodes.a]\nhost = "a"\n'
    )
    assert main(["status", "--profile", str(path), "--json"]) == 1
    assert main(["status", "--profile", str(path), "--json"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "warning:" in line]
    assert lines == [
        f"rocm-console: warning: [prometheus] url in {path} is plain http to prom.site.example: the bearer token "
        "(token_env = K_TOKEN) is sent unencrypted; use https:// or a tunnel to 127.0.0.1"
    ]
    assert "secret-value-1" not in err
