"""Issue B2: doctor says where the node's PATH has GuideLLM and AIPerf (optional clients)."""

from __future__ import annotations

from console.agent import doctor
from tests.agent.test_doctor import NoAgent, host, make_sysroot


def test_doctor_names_the_bench_clients_on_path_and_what_to_do_without_them(tmp_path):
    root = make_sysroot(tmp_path)
    h = host(root, which=lambda name: "/opt/g/bin/guidellm" if name == "guidellm" else None)
    facts: dict = {}
    checks = {c["id"]: c for c in doctor.check_versions(NoAgent(), h, ["vllm"], facts)}
    c = checks["bench-clients"]
    assert c["level"] == "ok"  # optional: never a failure
    assert c["detail"] == "guidellm at /opt/g/bin/guidellm; aiperf not on PATH"
    assert "client_path" in c["fix"]
    assert facts["bench_clients"] == {"guidellm": "/opt/g/bin/guidellm", "aiperf": None}
