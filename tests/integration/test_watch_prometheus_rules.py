"""`rocm-console alerts export --prometheus-rules FILE` against the real programs: Debian's
`promtool check rules` accepts the file, and a real Prometheus that scrapes a real DME capture
(tests/fixtures/dme, Kaiwo's MI300X lines: tw038 GPU 0 at 100 % gfx activity) evaluates the
exported rule with no console running: the alert goes pending, then firing, for that GPU only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from console.cli.entry import main
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer, StaticMetrics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dme"
CAPTURE = "dme_mi300x_kaiwo_lines.prom"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

pytestmark = pytest.mark.skipif(
    not os.path.exists(PROMETHEUS) and not os.environ.get("CI"),
    reason="prometheus not installed (scripts/test-all installs Debian's package)",
)

PROFILE = """\
telemetry = "prometheus"

[prometheus]
url = "http://127.0.0.1:9"

[nodes.tw038]
host = "tw038"

[nodes.tw009]
host = "tw009"

[[alert]]
name = "gpu-busy"
when = "util_pct >= 90 for 4s"
severity = "fail"

[[alert]]
name = "hot"
when = "temp_junction_c > 95"

[[alert]]
name = "sick"
when = "health == fail"

[[alert]]
name = "xid"
when = "event gpu.xid"
"""


class RulesPrometheus(PrometheusServer):
    """The suite's Prometheus, with a rule file and a 1 s evaluation interval."""

    rules: Path

    def write_config(self) -> Path:
        path = super().write_config()
        config = json.loads(path.read_text())
        config["global"]["evaluation_interval"] = "1s"
        config["rule_files"] = [str(self.rules)]
        path.write_text(json.dumps(config, indent=1))
        return path


def _export(tmp_path: Path, capsys) -> tuple[Path, int, str]:
    profile = tmp_path / "site.toml"
    profile.write_text(PROFILE)
    rules = tmp_path / "rules.yml"
    code = main(["alerts", "export", "--profile", str(profile), "--prometheus-rules", str(rules)])
    return rules, code, capsys.readouterr().err


def _alerts(server: PrometheusServer) -> list[dict]:
    with urllib.request.urlopen(f"{server.url}/api/v1/alerts", timeout=10) as reply:
        return json.loads(reply.read())["data"]["alerts"]


def test_the_exported_rules_pass_promtool_and_name_what_they_leave_out(tmp_path, capsys):
    rules, code, err = _export(tmp_path, capsys)
    assert code == 1  # a rule was left out: said, and the exit says so
    assert err.count("\n") == 1 and "rule 'xid' (event gpu.xid): not written" in err
    checked = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 3 rules found" in checked.stdout


def test_prometheus_evaluates_the_rule_over_a_real_dme_capture_pending_then_firing(tmp_path, capsys):
    rules, _, _ = _export(tmp_path, capsys)
    captures = StaticMetrics(FIXTURES, [CAPTURE])
    captures.start()
    server = RulesPrometheus(tmp_path / "prom", captures.targets())
    server.rules = rules
    try:
        server.start()
        states: list[str] = []
        firing: list[dict] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not firing:
            busy = [a for a in _alerts(server) if a["labels"].get("alertname") == "gpu_busy"]
            states += [a["state"] for a in busy if not states or states[-1] != a["state"]]
            firing = [a for a in busy if a["state"] == "firing"]
            time.sleep(0.2)
        assert "pending" in states and firing, states
        assert len(firing) == 1  # tw038 GPU 0 (100 %); its GPU 2 and tw009's GPU 47 read 0
        labels = firing[0]["labels"]
        assert (labels["hostname"], labels["gpu_id"]) == ("tw038", "0")
        assert labels["severity"] == "fail" and labels["rule"] == "gpu-busy"
        assert "tw038 GPU 0" in firing[0]["annotations"]["summary"]
        assert not [a for a in _alerts(server) if a["labels"].get("alertname") in ("hot", "sick")]
    finally:
        server.stop()
        captures.stop()
