"""`rocm-console serve start|list|stop|logs` as a user runs it."""

from __future__ import annotations

import json

from tests.cli.cli_helpers import one_line_error, run
from tests.helpers import free_port


def test_bad_flags(profile):
    proc = run("serve", "start", "--profile", str(profile), "--preset", "nope")
    assert proc.returncode == 2 and "unknown serve preset 'nope'" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "a,b")
    assert proc.returncode == 2 and "--gpus 'a,b'" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--set", "oops")
    assert proc.returncode == 2 and "expected KEY=VALUE" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "0", "--set", "port=1234")
    assert proc.returncode == 2 and "--set port: the console sets it" in one_line_error(proc)


def test_serve_lifecycle_on_the_simulator(profile):
    port = str(free_port())
    start = run(
        "serve",
        "start",
        "--profile",
        str(profile),
        "--preset",
        "tiny",
        "--gpus",
        "3",
        "--port",
        port,
        "--name",
        "t",
        "--wait",
        "--timeout",
        "60",
    )
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert "t: ready" in start.stdout
        listing = run("serve", "list", "--profile", str(profile), "--json")
        [inst] = [i for i in json.loads(listing.stdout)["instances"] if i["name"] == "t"]
        assert inst["state"] == "ready" and inst["gpus"] == [3] and inst["port"] == int(port)
        logs = run("serve", "logs", "t", "--profile", str(profile), "--lines", "50")
        assert "Application startup complete." in logs.stdout
        status = json.loads(run("status", "--profile", str(profile), "--json", "--no-probe").stdout)
        gpu3 = status["nodes"][0]["gpus"][3]
        assert [p["pid"] for p in gpu3["processes"]] == [inst["pid"]]
    finally:
        stop = run("serve", "stop", "t", "--profile", str(profile))
    assert stop.returncode == 0 and "t: stopped" in stop.stdout
    # The stop is on the timeline, as a stop from the TUI is.
    timeline = run("events", "--profile", str(profile), "--json", "--kind", "instance.stopped")
    assert timeline.returncode == 0, timeline.stderr
    stops = json.loads(timeline.stdout)
    assert [e["instance"] for e in stops] == ["t"], timeline.stdout
    proc = run("serve", "stop", "t", "--profile", str(profile))
    assert proc.returncode == 0  # stopping a stopped instance is not an error
    proc = run("serve", "logs", "ghost", "--profile", str(profile))
    assert proc.returncode == 1 and "no instance named ghost" in one_line_error(proc)
