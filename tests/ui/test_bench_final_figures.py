"""Issue U2: once a benchmark ended, every figure on the benchmark screen is vLLM's own (the
stored result's, which is its printed table's); live figures are labelled live, and no
`running N` stays on screen after the end."""

from __future__ import annotations

import re

from console.services.fleet import FleetTelemetry
from console.services.results import ResultStore
from console.services.transports import TransportPool
from console.ui.widgets.bench_plots import LivePlot

from .conftest import screen_text, wait_for
from .test_bench_ui import BenchHost, bench_screen, fast_sim_and_temp_data, node  # noqa: F401 (fixtures)


async def test_the_header_after_the_end_shows_vllms_figures_not_the_last_live_sample(node, served):  # noqa: F811
    view, pool = served
    fleet = FleetTelemetry([node], TransportPool(), interval=0.5)
    screen = bench_screen(node, view, pool, points=[4], fleet=fleet)
    app = BenchHost(screen, fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        live_seen = await wait_for(pilot, lambda: bool(screen.session.current and screen.session.current.live), 60)
        if live_seen and screen.session.running:
            screen.draw_now()
            await pilot.pause()
            header = str(screen.query_one("#bench-live-text").render())
            assert header.startswith("live: "), header  # a live figure says so
        assert await wait_for(pilot, lambda: not screen.session.running, timeout=90)
        assert await wait_for(pilot, lambda: screen.session.current.stored_id is not None, timeout=10)
        screen.draw_now()
        await pilot.pause()
        header = str(screen.query_one("#bench-live-text").render())
        requests_title = str(screen.query_one("#chart-requests", LivePlot).border_title)
        tokens_title = str(screen.query_one("#chart-tokens", LivePlot).border_title)
        text = screen_text(app)
        log_text = "\n".join(screen.query_one("#bench-log").lines)
        stored_id = screen.session.current.stored_id

    stored = ResultStore().get(stored_id)
    table = re.search(r"Output token throughput \(tok/s\):\s+([\d.]+)", log_text)
    assert table is not None, log_text[-2000:]
    printed = table.group(1)  # vLLM's own table, as the client printed it
    assert f"{stored.metrics['output_throughput']:.2f}" == printed
    assert header.startswith("vLLM's result:"), header
    assert f"output {printed} tok/s" in header, header
    assert f"TTFT p50 {stored.metrics['median_ttft_ms']:.2f} ms" in header
    assert "running" not in header and "waiting" not in header
    # the charts: vLLM's throughput in the title, no request count left from the last sample
    assert tokens_title == f"Output {printed} tok/s · vLLM"
    assert not re.search(r"running \d", requests_title) and "run ended" in requests_title
    assert f"output {printed} tok/s" in text  # the result table, to the same digits
