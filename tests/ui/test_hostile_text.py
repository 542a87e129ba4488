"""Text from a node reaches the screen as visible text: no escape sequence, bell, carriage return
or bidi override acts on the terminal, and Rich markup in it is shown as it is, never applied
(and never breaks a redraw: "[/]" with nothing to close is an error for a markup parser).

The node is this machine (LocalTransport); its python3 runs a stand-in agent that writes valid
lines whose GPU model, process name, hostname and versions carry all of that
(tests/integration/hostile_node.py).
"""

from __future__ import annotations

import logging
import re

from console.core.model import NodeSpec, Profile, SimulateSpec
from console.ui.app import ConsoleApp
from tests.integration.hostile_node import EVIL_SHOWN, HOSTILE_PROBE, HOSTILE_TELEMETRY, hostile_python

from .conftest import screen_text, wait_for

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_node(tmp_path) -> NodeSpec:
    (tmp_path / "telemetry.jsonl").write_bytes(HOSTILE_TELEMETRY)
    (tmp_path / "probe.jsonl").write_bytes(HOSTILE_PROBE)
    python = hostile_python(
        tmp_path / "hostile",
        {
            "telemetry": ("write_hold", str(tmp_path / "telemetry.jsonl")),
            "probe": ("write", str(tmp_path / "probe.jsonl")),
        },
    )
    return NodeSpec(
        name="evil",
        host="localhost",
        transport="local",
        python=python,
        state_dir=str(tmp_path / "state"),
        simulate=SimulateSpec(gpu="MI300X", count=1),
    )


async def test_fleet_and_detail_show_node_text_as_visible_escapes(tmp_path):
    app = ConsoleApp(Profile(nodes=(hostile_node(tmp_path),)), interval=0.5, notify_health=False, cursor_blink=False)
    async with app.run_test(size=(200, 30)) as pilot:
        assert await wait_for(pilot, lambda: "evil  live" in screen_text(app), timeout=20), screen_text(app)
        assert await wait_for(pilot, lambda: app.fleet.snapshot("evil").probe is not None, timeout=20)
        await pilot.pause(0.3)
        text = screen_text(app)
        assert not RAW_CONTROL.search(text), repr(text)
        assert "MI300X\\x1b[2J\\x07\\r" in text  # the GPU row's model, cut to its column

        app.open_detail("evil", 0)
        assert await wait_for(pilot, lambda: "Processes (1)" in screen_text(app), timeout=10), screen_text(app)
        text = screen_text(app)
        assert not RAW_CONTROL.search(text), repr(text)
        assert "[red]boom[/]" in text  # markup shown as it is, not applied
        assert ("evil" + EVIL_SHOWN)[:20] in text  # the process name

        await app.pop_screen()
        await pilot.pause(0.2)
        app.open_detail("evil", None)  # the node's facts: hostname and versions from the probe
        await pilot.pause(0.5)
        text = screen_text(app)
        assert not RAW_CONTROL.search(text), repr(text)
        assert "0.32[/]" in text, text


async def test_a_transport_warning_is_a_notification_not_lost_under_the_app(tmp_path):
    """The SSH transport says a node's login banner once through logging; under the app that
    must be a notification (stderr is not on the screen)."""
    app = ConsoleApp(Profile(nodes=(hostile_node(tmp_path),)), interval=0.5, notify_health=False, cursor_blink=False)
    async with app.run_test(size=(160, 30)) as pilot:
        logging.getLogger("console.transport").warning(
            "warning: %s: its login prints 1 line on stdout before every command (%r); the console skips it",
            "evil",
            "Welcome\x1b[2J",
        )
        assert await wait_for(pilot, lambda: len(app._notifications) > 0, timeout=5)
        [note] = list(app._notifications)
        assert note.message.startswith("evil: its login prints 1 line") and note.severity == "warning"
        assert "Welcome\\x1b[2J" in note.message
        assert not RAW_CONTROL.search(note.message)
    assert not logging.getLogger("console.transport").handlers  # removed with the app
