"""`rocm-console watch --demo --metrics-port PORT` scraped by a real Prometheus (Debian's
package, on 127.0.0.1): its API answers the watcher's node states and the newest stored
benchmark; every metric name the shipped Grafana dashboard (docs/grafana-rocm-console.json)
asks for is in the scrape."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from console.services.metrics_export import METRIC_NAMES
from tests.helpers import free_port, wait_until
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana-rocm-console.json"

pytestmark = pytest.mark.skipif(
    not os.path.exists(PROMETHEUS) and not os.environ.get("CI"),
    reason="prometheus not installed (scripts/test-all installs Debian's package)",
)


def _stored_run(data: Path) -> None:
    results = data / "demo" / "results"
    results.mkdir(parents=True, exist_ok=True)
    doc = {
        "id": "20261129-010000-mi300x-spx-aaaaaa",
        "created": time.time() - 60,
        "origin": "console",
        "context": {"node": "mi300x-spx", "instance": "llama-8b", "bench_preset": "chat-short"},
        "metrics": {"output_throughput": 1234.5, "median_ttft_ms": 50.0, "p99_ttft_ms": 200.0},
        "energy": {"tokens_per_joule": 2.5},
    }
    (results / f"{doc['id']}.json").write_text(json.dumps(doc))


def _dashboard_names() -> set[str]:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    assert exprs and all(t.get("refId") for p in doc["panels"] for t in p["targets"])
    return {name for e in exprs for name in re.findall(r"\brocm_console_[a-z0-9_]+", e)}


def _scraped_names(text: str) -> set[str]:
    names = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    names |= {n + "_total" for n in re.findall(r"^# TYPE (\S+) counter", text, re.M)}
    return names


def test_prometheus_scrapes_the_watcher_and_the_dashboard_asks_only_for_its_series(tmp_path):
    data = tmp_path / "data"
    _stored_run(data)
    port = free_port()
    env = {**os.environ, "ROCM_CONSOLE_DATA_DIR": str(data), "HOME": str(tmp_path)}
    watch = subprocess.Popen(
        [sys.executable, "-m", "console", "watch", "--demo", "--metrics-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    server = PrometheusServer(tmp_path / "prom", [(f"127.0.0.1:{port}", "/metrics")])
    try:
        server.start()
        assert wait_until(
            lambda: len(server.query('rocm_console_node_state{state="live"} == 1')["data"]["result"]) == 4,
            timeout=90,
        ), server.query("rocm_console_node_state")
        got = server.query("rocm_console_bench_output_tokens_per_second")["data"]["result"]
        assert [(r["metric"]["preset"], r["metric"]["vllm_instance"], r["value"][1]) for r in got] == [
            ("chat-short", "llama-8b", "1234.5")
        ]
        ttft = server.query('rocm_console_bench_ttft_seconds{quantile="0.99"}')["data"]["result"]
        assert float(ttft[0]["value"][1]) == 0.2
        assert server.query("rocm_console_watcher_loop_lag_seconds")["data"]["result"]

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            scraped = _scraped_names(reply.read().decode())
        wanted = _dashboard_names()
        assert wanted - scraped == set()
        assert wanted <= set(METRIC_NAMES)
        assert len(wanted) >= 12  # health, nodes, alerts, loop, instances, benchmarks
    finally:
        server.stop()
        if watch.poll() is None:
            os.kill(watch.pid, signal.SIGTERM)
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "Traceback" not in err
