"""What the TUI does to and with a vLLM instance: stopping and forgetting it (the question first,
then the service in a worker that reports through InstanceSettled / InstanceActionFailed:
workers never touch widgets), and the benchmark dialogs (serving against an instance, offline on
a node's free GPUs). A mixin of ConsoleApp, kept apart so that app.py stays about the app's
clock and flow."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from textual.app import App

from console.core.instance_view import InstanceError, InstanceState, InstanceView
from console.core.text import one_line
from console.transport.base import TransportError
from console.ui.messages import InstanceActionFailed, InstanceSettled
from console.ui.model.instance_board import ACTIVE, ENDED, InstanceBoard
from console.ui.workers import run_named

if TYPE_CHECKING:
    from console.core.model import Profile
    from console.services.fleet import FleetTelemetry
    from console.ui.model.bench_form import BenchRequest
    from console.ui.model.instance_source import InstanceSource
    from console.ui.model.offline_form import OfflineRequest


class InstanceActions(App[int]):
    """What ConsoleApp gives these actions (set in its __init__)."""

    board: InstanceBoard
    instances: InstanceSource
    fleet: FleetTelemetry
    profile: Profile
    clock: Callable[[], float]
    cursor_blink: bool
    _dirty: bool

    def confirm_stop(self, node: str, name: str) -> None:
        from console.ui.screens.confirm import ConfirmScreen

        view = self.board.find(node, name)
        refusal = _stop_refusal(view, node, name)
        if refusal:
            self.notify(refusal, markup=False)
            return
        assert view is not None  # _stop_refusal said so
        gpus = ",".join(map(str, view.gpus))
        question = (
            f"Stop {name} on {node}?\n{view.model or '?'} on GPU {gpus}, port {view.port or '?'}.\n"
            "vLLM gets SIGINT, then SIGTERM after 30 s, then SIGKILL."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop_instance(node, name)

        self.push_screen(ConfirmScreen("Stop instance", question, "Stop"), answered)

    def stop_instance(self, node: str, name: str) -> None:
        view = self.board.find(node, name)
        if view is not None:
            self.board.progress(replace(view, state=InstanceState.STOPPING))
            self._dirty = True
        run_named(self, self._run_stop(node, name), f"stop:{node}:{name}", exclusive=True)

    async def _run_stop(self, node: str, name: str) -> None:
        try:
            view = await self.instances.stop(self.fleet.spec(node), name)
        except (InstanceError, TransportError) as exc:
            self.post_message(InstanceActionFailed(node, name, "stop", one_line(exc)))
        else:
            self.post_message(InstanceSettled(view, "stop"))

    def confirm_forget(self, node: str, name: str) -> None:
        from console.ui.screens.confirm import ConfirmScreen

        view = self.board.find(node, name)
        if view is None or view.state not in ENDED:
            self.notify(
                f"{name} is still running: stop it first (x)" if view else f"no instance {name} on {node}", markup=False
            )
            return

        def answered(yes: bool | None) -> None:
            if yes:
                run_named(self, self._run_forget(view), f"forget:{node}:{name}")

        self.push_screen(
            ConfirmScreen(
                "Forget instance",
                f"Forget {name} on {node}?\nIts log and exit status are deleted on the node.",
                "Forget",
            ),
            answered,
        )

    async def _run_forget(self, view: InstanceView) -> None:
        try:
            await self.instances.remove(self.fleet.spec(view.node), view.name)
        except (InstanceError, TransportError) as exc:
            self.post_message(InstanceActionFailed(view.node, view.name, "forget", one_line(exc)))
        else:
            self.post_message(InstanceSettled(view, "forget"))

    def open_bench_dialog(self, instance: InstanceView | None = None) -> None:
        """b: pick a benchmark preset for a ready instance, then watch it on the bench screen."""
        from console.services.runs.serving import BenchRunner
        from console.ui.results_store import result_store
        from console.ui.screens.bench import BenchScreen
        from console.ui.screens.bench_start import StartBenchDialog

        ready = [v for v in self.board.views() if v.state == InstanceState.READY and v.port]
        if not ready:
            self.notify("no ready vLLM instance to benchmark (s starts one)", markup=False)
            return
        if not self.profile.bench_presets:
            self.notify("no benchmark presets in the profile ([bench.NAME] tables)", severity="warning", markup=False)
            return
        if instance is not None and instance.state != InstanceState.READY:
            # the dialog would preselect another instance: say why instead
            self.notify(
                f"{instance.name} on {instance.node} is {instance.state.value}: not ready to benchmark", markup=False
            )
            return
        key = (instance.node, instance.name) if instance is not None else None

        def chosen(request: BenchRequest | None) -> None:
            if request is not None:
                self.push_screen(
                    BenchScreen.from_request(
                        request,
                        fleet=self.fleet,
                        runner=BenchRunner(self.fleet.pool),
                        store=result_store(self),
                        clock=self.clock,
                    )
                )

        self.push_screen(
            StartBenchDialog(self.profile.bench_presets, ready, instance=key, cursor_blink=self.cursor_blink), chosen
        )

    def open_offline_dialog(self, node: str) -> None:
        """Palette: `vllm bench latency|throughput` on the node's free GPUs (no instance needed)."""
        from console.core.bench.offline import PRESETS_PATH, load_offline_presets
        from console.core.errors import ProfileError
        from console.core.results.reference import load_reference_numbers
        from console.services.runs.offline import OfflineRunner
        from console.ui.model.compare_view import REFERENCE_PATH
        from console.ui.results_store import result_store
        from console.ui.screens.offline_bench import OfflineBenchDialog, OfflineBenchScreen

        spec = self.profile.node(node)
        if spec is None:
            return
        try:
            presets = load_offline_presets(PRESETS_PATH)
            references = load_reference_numbers(REFERENCE_PATH)
        except ProfileError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return

        def chosen(request: OfflineRequest | None) -> None:
            if request is not None:
                self.push_screen(
                    OfflineBenchScreen(
                        spec,
                        request,
                        runner=OfflineRunner(self.fleet.pool),
                        store=result_store(self),
                        reference_rows=references,
                    )
                )

        self.push_screen(OfflineBenchDialog(node, presets, cursor_blink=self.cursor_blink), chosen)


def _stop_refusal(view: InstanceView | None, node: str, name: str) -> str | None:
    if view is None:
        return f"no instance {name} on {node}"
    if view.state == InstanceState.UNMANAGED:
        pid = f" (kill -INT {view.pid} on the node)" if view.pid else ""
        return f"{name} was started outside the console: stop it on {node}{pid}"
    if view.state == InstanceState.STOPPING:
        return f"{name} is already stopping"
    if view.state not in ACTIVE:
        return f"{name} has already ended ({view.state.value}); d in the instances panel forgets it"
    return None
