"""The start dialog's Env example (issue U2, seen in tmux on the demo): it read
`VLLM_USE_TRITON_FLASH_ATTN=0`, the variable vLLM 0.32 no longer has and the console warns
about on a start; a new user copying the example got that warning. The example is one that
holds on every vLLM."""

from __future__ import annotations

from console.ui.screens.start_dialog import StartDialog
from console.ui.widgets.gpu_table import GpuTable

from .conftest import screen_text, wait_for


async def test_the_env_example_names_no_variable_gone_from_vllm(live_app):
    app = live_app(("mi300x-spx",), presets=True)
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: len(table.rows) == 9)
        await pilot.press("down", "s")
        assert await wait_for(pilot, lambda: isinstance(app.screen, StartDialog))
        await pilot.pause()
        env = next(line for line in screen_text(app).splitlines() if " Env " in line)
    assert "HF_TOKEN comes from your environment" in env, env
    assert "VLLM_USE_TRITON_FLASH_ATTN" not in env, env
