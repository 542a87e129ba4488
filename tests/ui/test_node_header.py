"""The node header at 80×24: what the node is (GPU model, partition mode) comes before the
change mark (Δ) of versions changed since it was last seen, which comes before the versions."""

from __future__ import annotations

import json

from console.services.events import EventLog

from .conftest import screen_text, wait_for


def _marked(data, node: str, line: str) -> None:
    """A record an earlier console left: the node's ROCm changed, not acknowledged yet."""
    folder = data / "node-versions"
    folder.mkdir(parents=True)
    doc = {"versions": {"node": node, "rocm": "7.1.0-21"}, "gpus_counted": "physical", "pending": [line]}
    (folder / f"{node}.json").write_text(json.dumps(doc))


async def test_model_and_mode_come_before_the_change_mark_at_80x24(live_app, tmp_path):
    _marked(tmp_path, "mi300x-cpx", "ROCm: 7.0.2-56 -> 7.1.0-21")
    app = live_app(events=EventLog(tmp_path / "events.jsonl"))
    async with app.run_test(size=(80, 24)) as pilot:

        def header() -> str:
            return next((ln for ln in screen_text(app).splitlines() if "mi300x-cpx" in ln and "live" in ln), "")

        assert await wait_for(pilot, lambda: "Δ" in header() and "CPX" in header()), screen_text(app)
        line = header()
        assert line.index("MI300X") < line.index("CPX") < line.index("Δ"), line
