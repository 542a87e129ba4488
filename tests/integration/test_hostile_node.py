"""A node that sends what no agent should, or never answers, over the real sshd on 127.0.0.1.

Whatever an agent's line holds (nesting a hundred thousand deep, a number of a hundred thousand
digits, 200 MB without a newline, control characters, bytes that are not UTF-8), `rocm-console
status` and the fleet mark the node down with one printable line naming it; and when the
console gives up on a node command (a hung agent), nothing of that command is left on the node.
The node's python3 is a wrapper (tests/integration/hostile_node.py) that runs a hostile stand-in
in one agent mode and the real agent in every other.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.model import NodeHealth, SimulateSpec
from console.services.fleet import FleetTelemetry
from console.services.instances import InstanceService
from console.services.partitions import PartitionService
from console.services.transports import TransportPool
from tests.integration.hostile_node import (
    EVIL_SHOWN,
    HOSTILE_PROBE,
    HOSTILE_TELEMETRY,
    group_members,
    hostile_python,
    recorded_pids,
)
from tests.integration.sshd import pid_alive

ROOT = Path(__file__).resolve().parents[2]
# Raw C0/C1 controls but the newline that ends a line: none may reach the terminal.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def write_profile(path: Path, sshd, python: str) -> Path:
    path.write_text(
        f"""
[nodes.ssh-node]
host = "{sshd.host}"
port = {sshd.port}
user = "{sshd.user}"
identity_file = "{sshd.identity_file}"
known_hosts = "{sshd.known_hosts}"
python = "{python}"
state_dir = "{path.parent / "node-state"}"
simulate = {{ gpu = "MI300X", count = 2, compute_partition = "SPX", memory_partition = "NPS1", seed = 4 }}
"""
    )
    return path


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def assert_nothing_left(folder: Path, *, expect: int = 1) -> None:
    """Every hung stand-in that started, its child and its whole process group are gone."""
    pids = recorded_pids(folder)
    assert len(pids) >= expect, "the hung agent never started"
    deadline = time.monotonic() + 10.0  # a killed process may need a moment to be reaped by sshd
    while time.monotonic() < deadline:
        left = [p for pid, _g, child in pids for p in (pid, child) if pid_alive(p)]
        left += [p for _pid, group, _c in pids for p in group_members(group)]
        if not left:
            return
        time.sleep(0.05)
    raise AssertionError(f"left running on the node: {sorted(set(left))}")


# ---------------------------------------------------------------- hostile lines

DEEP = b'{"kind":"sample","ts":1,"seq":1,"gpus":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
HUGE_INT = b'{"kind":"sample","ts":1,"seq":1' + b"0" * 100_000 + b',"gpus":[]}\n'
BINARY = b"\x00\x1b[2J\x1b]52;c;SGVsbG8=\x07\xff\xfe\x9b31m\r\n"
ERROR_LINE = b'{"kind":"error","message":"amdsmi failed \\u001b[2J\\u0007\\r\\u202e [red]x[/]"}\n'

CASES = {
    "deep nesting": (("write", DEEP), "JSON nested deeper than 64 levels"),
    "huge integer": (("write", HUGE_INT), "number of over 64 digits"),
    "control characters and binary": (("write", BINARY), "not JSON"),
    "not an object": (("write", b"[1, 2]\n"), "not a JSON object"),
    "wrong types": (("write", b'{"kind":"sample","ts":1,"seq":1,"gpus":"x"}\n'), "bad sample line"),
    "unknown kind": (("write", b'{"kind":"\\u001b[2Jboom"}\n'), "unknown kind"),
    "agent error with escapes": (("write", ERROR_LINE), "amdsmi failed"),
    "200 MB without a newline": (("flood", 200 * 1024 * 1024), "wrote over 16 MiB of output"),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", list(CASES))
def test_status_marks_a_hostile_agent_down_in_one_line(sshd, tmp_path, case):
    (what, payload), reason = CASES[case]
    if what == "write":
        payload_file = tmp_path / "payload.bin"
        payload_file.write_bytes(payload)
        payload = str(payload_file)
    python = hostile_python(tmp_path / "hostile", {"telemetry": (what, payload)})
    profile = write_profile(tmp_path / "lab.toml", sshd, python)
    # Run through a parent that reports the CLI's peak memory: a 200 MB line is never held.
    probe_rss = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "sys.stdout.buffer.write(p.stdout); sys.stderr.buffer.write(p.stderr)\n"
        "print('RSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(p.returncode)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe_rss, sys.executable, "-m", "console", "status", "--profile", str(profile)],
        cwd=ROOT,
        capture_output=True,
        timeout=240,
    )
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    rss_mib = int(re.search(r"RSS_KIB (\d+)", err).group(1)) / 1024
    err = re.sub(r"RSS_KIB \d+\n?", "", err)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err and not err.strip(), err
    first = out.splitlines()[0]
    assert first.startswith("ssh-node  DOWN  ssh-node: "), out
    assert reason in first, first
    assert not RAW_CONTROL.search(out), repr(out)
    assert len(first) < 400, first  # one readable line, not the payload
    assert rss_mib < 200, f"status peaked at {rss_mib:.0f} MiB"
    if case == "agent error with escapes":
        assert "\\x1b[2J\\x07\\r\\u202e [red]x[/]" in first  # shown, never acted on


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["200 MB without a newline", "deep nesting", "control characters and binary"])
def test_fleet_marks_a_hostile_stream_down_never_connecting(sshd, tmp_path, case):
    """The TUI's path: the agent's telemetry stream (a line is capped at 4 MiB, not held)."""
    (what, payload), reason = CASES[case]
    if what == "write":
        (tmp_path / "payload.bin").write_bytes(payload)
        payload = str(tmp_path / "payload.bin")
    python = hostile_python(tmp_path / "hostile", {"telemetry": (what, payload)})
    node = sshd.node_spec(
        python=python,
        state_dir=str(tmp_path / "node-state"),
        simulate=SimulateSpec(gpu="MI300X", count=2, compute_partition="SPX", memory_partition="NPS1"),
    )
    if case == "200 MB without a newline":
        reason = "wrote a line over 4 MiB"

    async def scenario() -> tuple[NodeHealth, str | None]:
        fleet = FleetTelemetry([node], interval=0.5, backoff_cap=30.0)
        await fleet.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                snap = fleet.snapshot("ssh-node")
                if snap.health == NodeHealth.DOWN:
                    return snap.health, snap.error
                await asyncio.sleep(0.1)
            return fleet.snapshot("ssh-node").health, None
        finally:
            await fleet.stop()

    health, error = asyncio.run(scenario())
    assert health == NodeHealth.DOWN
    assert error is not None and error.startswith("ssh-node: ") and reason in error, error
    assert not RAW_CONTROL.search(error), repr(error)


# ---------------------------------------------------------------- no orphan


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stubborn", [False, True], ids=["hung", "hung-ignoring-SIGTERM"])
def test_status_timeout_leaves_nothing_on_the_node(sshd, tmp_path, stubborn):
    python = hostile_python(tmp_path / "hostile", {"telemetry": ("hang", stubborn)})
    profile = write_profile(tmp_path / "lab.toml", sshd, python)
    proc = run_cli("status", "--profile", str(profile), "--timeout", "10", "--no-probe")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.startswith("ssh-node  DOWN  ssh-node: no answer within 10 s"), proc.stdout
    assert_nothing_left(tmp_path / "hostile")


@pytest.mark.timeout(180)
def test_status_timeout_in_the_probe_leaves_nothing(sshd, tmp_path):
    python = hostile_python(tmp_path / "hostile", {"probe": ("hang", False)})
    profile = write_profile(tmp_path / "lab.toml", sshd, python)
    proc = run_cli("status", "--profile", str(profile), "--timeout", "10")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "no answer within 10 s" in proc.stdout
    assert_nothing_left(tmp_path / "hostile")


@pytest.mark.timeout(180)
def test_doctor_timeout_leaves_nothing(sshd, tmp_path):
    python = hostile_python(tmp_path / "hostile", {"doctor": ("hang", False)})
    profile = write_profile(tmp_path / "lab.toml", sshd, python)
    proc = run_cli("doctor", "--profile", str(profile), "--timeout", "10")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "ssh-node  FAIL" in proc.stdout and "10 s" in proc.stdout, proc.stdout
    assert_nothing_left(tmp_path / "hostile")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["instance", "partition", "telemetry-stream"])
def test_services_giving_up_leave_nothing(sshd, tmp_path, mode):
    """The instance list, the partition query and the fleet's stream, each given up on."""
    agent_mode = "telemetry" if mode == "telemetry-stream" else mode
    python = hostile_python(tmp_path / "hostile", {agent_mode: ("hang", False)})
    node = sshd.node_spec(
        python=python,
        state_dir=str(tmp_path / "node-state"),
        simulate=SimulateSpec(gpu="MI300X", count=2, compute_partition="SPX", memory_partition="NPS1"),
    )

    async def scenario() -> None:
        pool = TransportPool()
        try:
            if mode == "instance":
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(InstanceService(pool).list(node), 10)
            elif mode == "partition":
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(PartitionService(pool).show(node), 10)
            else:
                fleet = FleetTelemetry([node], pool, interval=0.5)
                await fleet.start()
                deadline = time.monotonic() + 20
                while not recorded_pids(tmp_path / "hostile") and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await fleet.stop()  # closes the pool too
        finally:
            await pool.close()

    asyncio.run(scenario())
    assert_nothing_left(tmp_path / "hostile")


# ---------------------------------------------------------------- hostile text, shown not acted on


@pytest.mark.timeout(180)
def test_status_shows_a_nodes_escape_sequences_as_visible_text(sshd, tmp_path):
    (tmp_path / "telemetry.jsonl").write_bytes(HOSTILE_TELEMETRY)
    (tmp_path / "probe.jsonl").write_bytes(HOSTILE_PROBE)
    python = hostile_python(
        tmp_path / "hostile",
        {"telemetry": ("write", str(tmp_path / "telemetry.jsonl")), "probe": ("write", str(tmp_path / "probe.jsonl"))},
    )
    profile = write_profile(tmp_path / "lab.toml", sshd, python)
    proc = run_cli("status", "--profile", str(profile))
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert not RAW_CONTROL.search(proc.stdout), repr(proc.stdout)
    assert proc.stdout.startswith("ssh-node  LIVE  amdsmi"), proc.stdout
    assert "MI300X\\x1b[2J\\x07" in proc.stdout  # the model column (cut to its width)

    proc = run_cli("status", "--profile", str(profile), "--json")
    [node] = json.loads(proc.stdout)["nodes"]
    assert node["gpus"][0]["model"] == "MI300X" + EVIL_SHOWN
    assert node["gpus"][0]["processes"][0]["name"] == "evil" + EVIL_SHOWN
    assert node["probe"]["hostname"] == "host" + EVIL_SHOWN and node["probe"]["vllm"] == "0.32[/]"
