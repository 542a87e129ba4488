"""vLLM instances in the UI, against simulated local nodes: the real agent and instance service
over LocalTransport, the simulator's fake `vllm serve` (sped up), a state folder per node.

Every instance a test starts is stopped afterwards (the `stop_all` fixture), whatever happens.
"""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Log, Select

from console.core.model import Profile, ServePreset
from console.services.instances import InstanceService, InstanceState
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.ui.app import ConsoleApp
from console.ui.messages import InstanceProgressed
from console.ui.screens.confirm import ConfirmScreen
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.instances import InstancesScreen
from console.ui.screens.log_viewer import LogScreen
from console.ui.screens.start_dialog import StartDialog
from console.ui.widgets.gpu_table import GpuTable
from tests.helpers import free_port

from .conftest import screen_text, wait_for

TINY = ServePreset(name="tiny", model="tiny-llama", tp=1, args=("--dtype", "float32", "--max-model-len", "2048"))
TINY_TP2 = ServePreset(
    name="tiny-tp2", model="tiny-llama", tp=2, args=("--dtype", "float32", "--max-model-len", "2048")
)
RUNNING = (InstanceState.STARTING, InstanceState.LOADING, InstanceState.READY)


@pytest.fixture(autouse=True)
def fast_sim_vllm(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.fixture
def node(sim_node, tmp_path):
    """A simulated 8-GPU node with its own state folder."""
    return sim_node("n1", seed=5, state_dir=str(tmp_path / "n1"))


@pytest.fixture
async def stop_all(node):
    """Stops whatever still runs on the test's node once the test is over."""
    yield
    service = InstanceService(TransportPool())
    try:
        for view in await service.list(node):
            if view.state in RUNNING:
                await service.stop(node, view.name, int_timeout=5, term_timeout=2)
    finally:
        await service.pool.close()


def make_app(*nodes, **kwargs) -> ConsoleApp:
    profile = Profile(nodes=nodes, serve_presets=(TINY, TINY_TP2))
    return ConsoleApp(
        profile,
        interval=0.2,
        notify_health=False,
        cursor_blink=False,
        redraw_interval=0.05,
        instance_poll_interval=0.3,
        **kwargs,
    )


def gpu_line(app, gpu: int) -> str:
    """The fleet table's line of one GPU of a one-node fleet, as shown."""
    for line in screen_text(app).splitlines():
        if line[:8].replace("✓", "").strip() == str(gpu):
            return line
    return ""


def toasts(app) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def until_live(pilot, app, gpus: int = 8) -> GpuTable:
    table = app.screen.query_one(GpuTable)
    assert await wait_for(pilot, lambda: len(table.rows) == gpus + 1 and app.board.polled_once, timeout=30)
    return table


async def open_dialog(pilot, app, table: GpuTable, *gpus: int) -> StartDialog:
    """Mark GPUs with space on the fleet table, then s."""
    for gpu in gpus:
        assert table.select(("n1", gpu))
        await pilot.press("space")
    await pilot.press("s")
    assert isinstance(app.screen, StartDialog)
    return app.screen


async def submit(pilot, dialog: StartDialog, **fields: str) -> None:
    """Fill fields by id suffix (port, name, overrides, env, gpus), then the action key (ctrl+s)."""
    for key, value in fields.items():
        dialog.query_one(f"#start-{key}", Input).value = value
    dialog.query_one("#start-port", Input).focus()
    await pilot.press("ctrl+s")


async def test_start_from_dialog_shows_loading_then_ready(node, stop_all, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "4")  # ~1.5 s of loading: long enough to see
    app = make_app(node)
    seen: list[str] = []
    async with app.run_test(
        size=(140, 40),
        notifications=True,
        message_hook=lambda m: seen.append(m.view.state.value) if isinstance(m, InstanceProgressed) else None,
    ) as pilot:
        table = await until_live(pilot, app)
        dialog = await open_dialog(pilot, app, table, 2)
        assert table.selection == ("n1", (2,))
        assert dialog.query_one("#start-gpus", Input).value == "2"  # preselected from the mark
        assert dialog.query_one("#start-preset", Select).value == "tiny"  # TP 1 fits one GPU
        await submit(pilot, dialog, port=str(free_port()), name="ui-a")
        assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), timeout=15), dialog.query_one(
            "#start-error"
        ).render()
        assert table.selection == (None, ())  # the marks are used up
        # Loading, with the stage, in the GPU's vLLM cell ...
        assert await wait_for(pilot, lambda: "◐ ui-a" in gpu_line(app, 2), timeout=15), gpu_line(app, 2)
        # ... then ready, in the table, the node header and a toast.
        assert await wait_for(pilot, lambda: "● ui-a ready" in gpu_line(app, 2), timeout=30), gpu_line(app, 2)
        assert await wait_for(pilot, lambda: any("ui-a on n1 is ready" in t for t in toasts(app)), timeout=15)
        assert seen[0] == "loading" and seen[-1] == "ready"  # what the start worker reported
        assert "1 instance ready" in screen_text(app)
        assert gpu_line(app, 3).rstrip().endswith("SPX/NPS1")  # other GPUs show nothing

        await pilot.press("i")
        assert isinstance(app.screen, InstancesScreen)
        assert await wait_for(pilot, lambda: "ui-a" in screen_text(app))
        row = next(line for line in screen_text(app).splitlines() if "ui-a" in line)
        assert "n1" in row and "● ready" in row and " 2 " in row and "tiny-llama" in row


async def test_rules_refusal_is_one_line_in_the_dialog(node, stop_all):
    app = make_app(node)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        table = await until_live(pilot, app)
        dialog = await open_dialog(pilot, app, table, 4)
        dialog.query_one("#start-preset", Select).value = "tiny-tp2"
        await pilot.pause()
        # one GPU marked: the TP field offers TP 1 only, and says the preset wanted 2 (no guessed override)
        tp = dialog.query_one("#start-tp", Select)
        assert [value for _, value in tp._options] == [1] and tp.value == 1
        assert "preset tiny-tp2 is TP 2; the 1 GPU given allows TP 1" in str(
            dialog.query_one("#start-preview").render()
        )
        error = dialog.query_one("#start-error")
        # the packing rule of `serve start --replicas per-gpu --per-gpu 2`, refused by the group service in one line
        await submit(pilot, dialog, port=str(free_port()), replicas="2 per GPU")
        assert await wait_for(pilot, lambda: "--per-gpu 2" in str(error.render()), timeout=15)
        text = str(error.render())
        assert text.startswith("--per-gpu 2: each replica must set --gpu-memory-utilization") and "\n" not in text
        assert app.screen is dialog  # still open: nothing typed is lost
        assert any("start refused" in t and "--per-gpu 2" in t for t in toasts(app))
        # A form error never reaches the node, and never shows a traceback either.
        await submit(pilot, dialog, gpus="2,x", replicas="")
        assert "GPUs: '2,x' is not a GPU index" in str(error.render()) or "GPUs: 'x'" in str(error.render())
        await submit(pilot, dialog, gpus="4", overrides="max_model_len")
        assert str(error.render()).startswith("overrides: 'max_model_len' is not KEY=VALUE")
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        assert app.board.views("n1") == []


async def test_instance_started_outside_is_found_and_its_gpu_refused(node, stop_all):
    service = InstanceService(TransportPool())
    try:
        snap = await sample_node(service.pool, node, probe=False)
        await service.start(node, TINY, gpus=[3], snapshot=snap, port=free_port(), name="outside")
        app = make_app(node)
        async with app.run_test(size=(140, 40), notifications=True) as pilot:
            table = await until_live(pilot, app)
            # the poller finds it, /health marks it ready
            assert await wait_for(pilot, lambda: "● outside ready" in gpu_line(app, 3), timeout=30), gpu_line(app, 3)
            dialog = await open_dialog(pilot, app, table, 3)
            assert "GPU 3 already serves an instance" in str(dialog.query_one("#start-preview").render())
            await submit(pilot, dialog, port=str(free_port()))
            error = dialog.query_one("#start-error")
            assert await wait_for(pilot, lambda: "already serves instance outside" in str(error.render()), timeout=15)
            assert str(error.render()) == "n1: GPU 3 already serves instance outside"
    finally:
        await service.pool.close()


async def test_override_that_vllm_refuses_ends_failed_with_its_reason(node, stop_all):
    app = make_app(node)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        table = await until_live(pilot, app)
        dialog = await open_dialog(pilot, app, table, 1)
        await submit(pilot, dialog, port=str(free_port()), name="too-long", overrides="max_model_len=999999")
        assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), timeout=15)
        assert await wait_for(pilot, lambda: "✖ too-long failed" in gpu_line(app, 1), timeout=30), gpu_line(app, 1)
        view = app.board.find("n1", "too-long")
        assert view.state == InstanceState.FAILED and view.reason.startswith("max_model_len too large")
        # the poller may see the exit first; the start worker's toast follows with vLLM's own line
        assert await wait_for(
            pilot,
            lambda: any("too-long on n1 failed" in t and "max_model_len too large" in t for t in toasts(app)),
            timeout=15,
        ), toasts(app)
        await pilot.press("i")
        assert await wait_for(pilot, lambda: "max_model_len too large" in screen_text(app))
        assert "✖ failed" in screen_text(app)
        # x on an ended instance says so; d forgets it after a confirmation
        await pilot.press("x")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        assert await wait_for(pilot, lambda: app.board.find("n1", "too-long") is None, timeout=15)


async def test_log_viewer_follows_the_log_with_the_stage(node, stop_all):
    app = make_app(node)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        table = await until_live(pilot, app)
        dialog = await open_dialog(pilot, app, table, 5)
        await submit(pilot, dialog, port=str(free_port()), name="logged")
        assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), timeout=15)
        assert table.select(("n1", 5))
        await pilot.press("l")
        screen = app.screen
        assert isinstance(screen, LogScreen)
        log = screen.query_one(Log)
        assert await wait_for(
            pilot, lambda: any("Application startup complete." in line for line in log.lines), timeout=30
        )
        assert await wait_for(pilot, lambda: "stage: ready" in screen_text(app))
        text = screen_text(app)
        assert "logged on n1" in text and "follow on" in text
        assert log.max_lines is not None  # bounded
        await pilot.press("f")
        assert not screen.follow and not log.auto_scroll
        assert await wait_for(pilot, lambda: "follow off" in screen_text(app))
        await pilot.press("f")
        assert log.auto_scroll
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        # closing the screen ended its stream worker
        assert await wait_for(pilot, lambda: not [w for w in app.workers if w.name.startswith("log:")])


async def test_stop_with_confirmation_from_the_panel(node, stop_all):
    app = make_app(node)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        table = await until_live(pilot, app)
        dialog = await open_dialog(pilot, app, table, 6)
        await submit(pilot, dialog, port=str(free_port()), name="to-stop")
        assert await wait_for(pilot, lambda: "● to-stop ready" in gpu_line(app, 6), timeout=30), gpu_line(app, 6)
        await pilot.press("i")
        panel = app.screen
        assert isinstance(panel, InstancesScreen)
        assert await wait_for(pilot, lambda: panel.select("n1", "to-stop"))
        await pilot.press("enter")  # its log
        assert isinstance(app.screen, LogScreen) and app.screen.instance_name == "to-stop"
        await pilot.press("escape")
        assert app.screen is panel
        await pilot.press("x")
        assert isinstance(app.screen, ConfirmScreen)
        assert "Stop to-stop on n1?" in screen_text(app)
        await pilot.press("n")  # cancelled: still running
        assert app.screen is panel and app.board.find("n1", "to-stop").state == InstanceState.READY
        await pilot.press("x", "y")
        assert app.screen is panel
        assert await wait_for(
            pilot,
            lambda: app.board.find("n1", "to-stop").state in (InstanceState.STOPPED, InstanceState.EXITED),
            timeout=30,
        )
        assert await wait_for(
            pilot, lambda: any("vLLM stopped" in t and "to-stop on n1: stopped" in t for t in toasts(app)), timeout=30
        ), toasts(app)

        def row() -> str:
            return next((line for line in screen_text(app).splitlines() if "to-stop" in line), "")

        assert await wait_for(pilot, lambda: "○ stopped" in row() or "○ exited" in row()), row()
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: "to-stop" not in gpu_line(app, 6))  # the GPU is free again


async def test_fleet_keys_without_an_instance_say_so(node, stop_all):
    app = make_app(node)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        table = await until_live(pilot, app)
        assert table.select(("n1", 0))
        await pilot.press("l", "x")
        assert isinstance(app.screen, FleetScreen)
        # the two identical answers are one toast with a count (console/ui/toasts.py)
        said = [t for t in toasts(app) if "no vLLM instance on n1 GPU 0" in t]
        assert len(said) == 1 and said[0].endswith("no vLLM instance on n1 GPU 0 (x2)"), toasts(app)
        # space on a node header marks all its GPUs; again unmarks them; Esc drops marks
        assert table.select(("n1", None))
        await pilot.press("space")
        assert table.selection == ("n1", tuple(range(8)))
        await pilot.press("space")
        assert table.selection == (None, ())
        await pilot.press("space", "escape")
        assert table.selection == (None, ())
        # s on a node header: the dialog picks free GPUs itself (the GPUs field is blank)
        await pilot.press("s")
        assert isinstance(app.screen, StartDialog)
        assert app.screen.query_one("#start-gpus", Input).value == ""
        request, _ = app.screen.read_form()
        assert request.gpus == (0,)
        await pilot.press("escape")
        await pilot.press("i")
        assert "No vLLM instances yet" in screen_text(app)
        assert isinstance(app.screen.query_one(DataTable), DataTable)


async def test_palette_has_start_stop_and_log_commands():
    """Per node 'start PRESET', per instance 'stop' and 'logs', from the fixed demo list (no processes)."""
    from console.ui.commands import InstanceCommands
    from console.ui.model.protocols import console_host
    from tests.ui.scenes.registry import SCENES

    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        provider = InstanceCommands(app.screen)
        commands = list(provider.commands(console_host(app)))
        names = [name for name, _, _ in commands]
        assert "mi300x-cpx: start llama-3.1-8b-fp8-cpx" in names
        assert "cpx-g12 on mi300x-cpx: stop" in names and "cpx-g12 on mi300x-cpx: logs" in names
        assert "cpx-g13 on mi300x-cpx: stop" not in names  # failed: nothing to stop
        assert not [n for n in names if n.startswith("pid-63000")]  # unmanaged: not ours to stop
        # 'start' opens the dialog on that node with that preset, GPUs left to the console
        dict(zip(names, (cb for _, cb, _ in commands)))["mi355x: start tiny"]()
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, StartDialog)
        assert dialog.query_one("#start-node", Select).value == "mi355x"
        assert dialog.query_one("#start-preset", Select).value == "tiny"
        # every GPU of mi355x holds the unmanaged server: no free one for 'auto'
        from console.ui.model.start_form import FormError

        with pytest.raises(FormError, match="TP 1 needs 1 free GPU, mi355x has 0"):
            dialog.read_form()
