"""U2: the GPU detail's health panel at 80x24: its verdict is not cut off, and the rows below
ECC (throttle, PCIe, XGMI, energy) come on screen with the keys; the node detail's process
list scrolls the same way."""

from __future__ import annotations

from tests.ui.scenes.registry import SCENES

from .conftest import screen_text, wait_for


async def test_gpu_health_scrolls_to_xgmi_at_80x24():
    app, prepare = SCENES["gpu-health-fail"].make()
    async with app.run_test(size=(80, 24)) as pilot:
        await prepare(pilot)
        text = screen_text(app)
        # the title, then its reasons in full (wrapped), never "…"
        assert "Health ✖ fail for 1m00s" in text
        assert "2 uncorrectable ECC errors; 1 bad page pending" in text and "retirement" in text
        assert "XGMI links" not in text and "PCIe link" not in text  # below the fold
        await pilot.press(*["down"] * 12)
        assert await wait_for(pilot, lambda: "XGMI links" in screen_text(app))
        lines = screen_text(app).splitlines()
        assert any("XGMI links" in line and "7 up" in line for line in lines)
        assert any("PCIe link" in line and "gen 5 x16" in line for line in lines)
        await pilot.press("home")
        assert await wait_for(pilot, lambda: "Health ✖ fail for 1m00s" in screen_text(app))
        await pilot.press("pagedown")
        assert await wait_for(pilot, lambda: "Throttle now" in screen_text(app))
        await pilot.press("right")  # left/right stay the previous/next GPU
        assert await wait_for(pilot, lambda: "GPU 6" in screen_text(app).splitlines()[1])


async def test_node_detail_process_list_scrolls():
    app, prepare = SCENES["node-detail"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        assert "52017" not in screen_text(app)  # the CPX node's 11th process, below the fold
        await pilot.press("end")
        assert await wait_for(pilot, lambda: "52017" in screen_text(app))
