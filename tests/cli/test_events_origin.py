"""A team's timeline says where each event came from: `rocm-console events` shows a FROM column
(which console or watcher wrote it) once any event names one, and an event moved in from an old log shows '-'."""

from __future__ import annotations

import time

from console.core.events import Event
from console.services.history import History
from tests.cli.cli_helpers import run


def test_events_from_several_writers_say_which_and_the_cli_names_itself(tmp_path):
    data = tmp_path / "data"
    env = {"HOME": str(tmp_path), "ROCM_CONSOLE_DATA_DIR": str(data), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    now = time.time()
    for origin, message in (("watch@db1", "ECC uncorrectable"), ("tui@ws2", "SPX -> CPX"), (None, "from an old log")):
        history = History(None, data, origin=origin)
        history.events.append(Event(now, "gpu.health", "mi300x-07", gpu=3, message=message))
        history.close()
    proc = run("events", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    head, *rows = proc.stdout.splitlines()
    assert head.split() == ["TIME", "SEVERITY", "KIND", "NODE", "GPU", "INSTANCE", "FROM", "MESSAGE"]
    by_message = {r.split("  ")[-1].strip(): r.split() for r in rows}
    assert by_message["ECC uncorrectable"][-3] == "watch@db1"
    assert by_message["SPX -> CPX"][-4] == "tui@ws2"
    assert "-" in by_message["from an old log"]
