"""The console at fleet scale: N nodes x 8 MI300X in CPX (64 logical GPUs each) at 1 Hz.

    python tests/perf/fleet_scale.py [--nodes 64] [--seconds 60] [--size 120x36] [--quick]
    python tests/perf/fleet_scale.py --source prometheus --nodes 256 --layout cpx
    python tests/perf/fleet_scale.py --source both --nodes 512 --layout spx   # SSH and Prometheus, side by side

--source prometheus: the telemetry comes through a real Prometheus (Debian's
package, tests/integration/prometheus_server.py) on 127.0.0.1 that scrapes the
simulated DME exporter (console/sim/dme_exporter.py: one target per node, every
--interval seconds), read by the console's PrometheusSource (one values query
per refresh for the whole fleet). The exporter's and Prometheus's CPU are
measured too (they share this machine with the console). Sample-to-screen is
then scrape time -> screen. --source both runs each source in its own process
(so each has its own peak RSS) and prints both.

Prints one JSON object; asserts nothing (the budgets are printed beside the figures).

What runs is the real console: FleetTelemetry (parsing, history, health), the
instance poller, and the real ConsoleApp with its fleet screen, headless, in this
process. What is simulated is the far end of each node's link: 64 agent processes
would measure the agents, not the console, so every node replays the agent lines
recorded against the simulated CPX node (tests/fixtures/traces/mi300x-cpx.jsonl:
hello, static, then 30 samples of 64 logical GPUs, looped) at 1 Hz, each line
stamped with a fresh agent timestamp when it is "sent"; each node has its own
random phase in the second (seeded), as real agents do. With the agents in their own
process (the default), they send health lines too, as the agent does (--health: far_agents.py). The instance list every
node is polled for is answered empty.

Headless Textual skips turning a frame into terminal bytes; this script does
that step for every frame (CompositorUpdate.render_segments), so the paint cost
is the one a real terminal run pays.

Phases after every node is live (plus a short settle):
- steady (2/3 of --seconds): the user watches; every --visit seconds the view
  moves on to the next node (one `]`), so the latency is sampled on many nodes
  with different phases. Console CPU % of one core (process time / wall time:
  the app, the services and the replay's string formatting), sample-to-screen
  latency (agent timestamp -> the frame that repaints that node's rows is
  rendered to terminal bytes, or the redraw that rebuilt them and found them
  reading as on screen already, nothing to paint; only samples that arrived
  while their node was already on screen count), redraw time per frame.
- keys (1/3): a key every 0.5 s (down/up, ]/[ between nodes, PgDn/PgUp), as
  the driver delivers them; key-to-repaint = key sent -> first frame that shows
  the moved cursor rendered to terminal bytes.
Peak RSS is the process's maximum resident set (ru_maxrss) over the whole run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import os
import platform
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402

from console.agent.sampling import SendRate  # noqa: E402
from console.core.model import (  # noqa: E402
    NodeHealth,
    NodeSpec,
    Profile,
    PrometheusSpec,
    SimulateSpec,
    StaticInfo,
    TelemetryFrame,
)
from console.services.fleet import FleetTelemetry, TelemetryReceived  # noqa: E402
from console.services.transports import TransportPool  # noqa: E402
from console.transport.base import MAX_LINE_BYTES, READ_CHUNK, CommandResult, LineSplitter, decode  # noqa: E402
from console.transport.replay import ReplayTrace, ReplayTransport, _is_sample  # noqa: E402
from console.ui.app import ConsoleApp  # noqa: E402
from console.ui.paced_loop import PACE_S, PacedSelector, run_on  # noqa: E402

TRACES = {layout: ROOT / "tests" / "fixtures" / "traces" / f"mi300x-{layout}.jsonl" for layout in ("cpx", "spx")}
BUDGETS = {  # name: (comparison, limit)
    "cpu_percent": ("<=", 20.0),
    "peak_rss_mb": ("<=", 250.0),
    "sample_to_screen_p95_ms": ("<=", 1500.0),
    "key_to_repaint_p95_ms": ("<=", 100.0),
    # issue V: nodes on screen show a sample under 2 s old; every node is heard from within the
    # 3 s after which the console marks it stale (stale_after at 1 Hz): off screen its agent
    # sends a tick line every 2 s (OFFSCREEN_TICK_S), so a silent node is found as soon on
    # screen as off it
    "sample_age_on_screen_max_s": ("<=", 2.0),
    "heard_age_max_s": ("<=", 3.0),
    "history_seconds_per_gpu": (">=", 300.0),
}
# issue V's targets where they are tighter (or looser) than the ones above, by (source, layout):
# 1,024 x 8 SPX over SSH: CPU <= 10 %; 1,024 x 64 CPX through Prometheus answers: RSS <= 400 MB.
SOURCE_BUDGETS = {
    ("ssh", "spx"): {"cpu_percent": ("<=", 10.0)},
    ("answers", "cpx"): {"peak_rss_mb": ("<=", 400.0)},
}
KEYS = [
    ("down", None),
    ("right_square_bracket", "]"),
    ("down", None),
    ("pagedown", None),
    ("up", None),
    ("left_square_bracket", "["),
    ("pageup", None),
    ("right_square_bracket", "]"),
]


class AgentReplay(ReplayTransport):
    """What the replayed agents of both kinds share: no vLLM instances, and the agent's start
    (hello, as the agent this console ships says it, and static)."""

    accepts_control = True

    async def run(self, argv, *, env=None, input=None, timeout=None, max_output=None) -> CommandResult:
        argv = list(argv)
        if "instance" in argv and "list" in argv:
            return CommandResult(0, "", "")  # no vLLM instances on the node
        return await super().run(argv, env=env, input=input, timeout=timeout, max_output=max_output)

    def _control(self, data: bytes) -> None:
        raise NotImplementedError

    def start_lines(self, control):
        """The link checked, the console's control bound; hello and static, as the agent starts."""
        self._check_link()
        if control is not None:
            control.bind(self._control)
        for line in self.trace.stream:
            if _is_sample(line):
                continue
            if '"kind":"hello"' in line.replace(" ", "") and '"control"' not in line:
                line = json.dumps({**json.loads(line), "control": ["rate"]})  # the agent this console ships
            yield line


class LiveReplay(AgentReplay):
    """A node whose agent 'sends' the recorded samples at 1 Hz with fresh timestamps.

    The lines are prepared once as templates (only ts and seq change), so the
    replay costs a string format per line, not a JSON encode: what the console
    measures is the console's own work on the received line. It honours the
    console's rate control as the agent does (the agent's own SendRate: off screen,
    a full sample every N ticks and a `tick` line every K between; back on screen, the
    newest sample at once).
    """

    def __init__(
        self, name: str, trace: ReplayTrace, gpu_json: list[str], *, phase: float, interval: float = 1.0
    ) -> None:
        super().__init__(name, trace, end="hold")
        self.gpu_json = gpu_json
        self.phase = phase
        self.interval = interval
        self.sent = 0  # full sample lines
        self.ticks = 0  # kept-back samples' tick lines
        self.rate = SendRate()
        self._wake: asyncio.Future | None = None

    def _control(self, data: bytes) -> None:
        """A control line the console wrote to the agent's stdin."""
        for line in data.splitlines():
            if self.rate.apply(json.loads(line)) and self._wake is not None and not self._wake.done():
                self._wake.set_result(True)  # back on screen: the newest sample now

    async def stream_lines(self, argv, *, env=None, control=None):
        for line in self.start_lines(control):
            yield line
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.phase
        seq = 0
        while True:
            delay = deadline - loop.time()
            if delay > 0:
                self._wake = wake = loop.create_future()
                timer = loop.call_later(delay, _settle, wake)
                if await wake:  # woken early: send the newest sample now
                    timer.cancel()
                    self.rate.sent()
                    self.sent += 1
                    gpus = self.gpu_json[(seq - 1) % len(self.gpu_json)]
                    yield f'{{"kind":"sample","ts":{time.time()!r},"seq":{seq - 1},"gpus":{gpus}}}'
                    continue
            kind = self.rate.line()
            if kind == "sample":
                gpus = self.gpu_json[seq % len(self.gpu_json)]
                self.sent += 1
                yield f'{{"kind":"sample","ts":{time.time()!r},"seq":{seq},"gpus":{gpus}}}'
            elif kind == "tick":
                self.ticks += 1
                yield f'{{"kind":"tick","ts":{time.time()!r},"seq":{seq}}}'
            seq += 1
            deadline += self.interval
            now = loop.time()
            if deadline <= now:  # missed ticks are skipped, as the agent does
                deadline += ((now - deadline) // self.interval + 1) * self.interval


class PipeReplay(AgentReplay):
    """A node whose agent runs in the far-end process (far_agents.py): its lines come through
    a real pipe, read as LocalTransport reads an agent's stdout (chunks, the transport's own
    line splitter and decoding); its control lines go back through the far end's control pipe."""

    def __init__(self, name: str, trace: ReplayTrace, index: int, fd: int, control_fd: int) -> None:
        super().__init__(name, trace, end="hold")
        self.index, self.fd, self.control_fd = index, fd, control_fd
        self.sent = 0  # full sample lines received
        self.ticks = 0  # tick lines received
        self.health = 0  # health lines received

    def _control(self, data: bytes) -> None:
        prefix = f"{self.index} ".encode()
        os.write(self.control_fd, b"".join(prefix + line + b"\n" for line in data.splitlines()))

    async def stream_lines(self, argv, *, env=None, control=None):
        for line in self.start_lines(control):
            yield line
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        pipe = os.fdopen(self.fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        lines = LineSplitter(MAX_LINE_BYTES)
        try:
            while True:
                chunk = await reader.read(READ_CHUNK)
                if not chunk:
                    return
                for raw, _cut in lines.feed(chunk):
                    line = decode(raw).rstrip("\r")
                    if line.startswith('{"kind":"tick"'):
                        self.ticks += 1
                    elif line.startswith('{"kind":"health"'):
                        self.health += 1
                    else:
                        self.sent += 1
                    yield line
        finally:
            transport.close()


class FarEnd:
    """far_agents.py: every node's agent in one process of its own, a pipe per node. ``health``:
    far_agents.py's --health (delta: as the agent sends them; full: every entry in full; none),
    ``health_change`` the share of GPUs whose entries change at every reading."""

    def __init__(
        self, nodes: int, interval: float, seed: int, layout: str, health: str = "none", health_change: float = 0.0
    ) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        need = 2 * nodes + 256
        if soft < need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, need), hard))
        pipes = [os.pipe() for _ in range(nodes)]
        control_r, self.control_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("far_agents.py")), str(TRACES[layout]), str(interval)]
            + [str(seed), str(control_r), ",".join(str(w) for _r, w in pipes)]
            + ["--health", health, "--health-change", str(health_change)],
            pass_fds=[control_r, *(w for _r, w in pipes)],
            start_new_session=True,
        )
        os.close(control_r)
        for _r, w in pipes:
            os.close(w)
        self.read_fds = [r for r, _w in pipes]

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc.pid)

    def stop(self) -> None:
        try:
            os.close(self.control_w)  # its control pipe closes: it ends by itself
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the session it was started in: ours
            self.proc.wait()


def _settle(wake: asyncio.Future) -> None:
    if not wake.done():
        wake.set_result(False)


def build(
    nodes: int,
    interval: float,
    seed: int = 0,
    layout: str = "cpx",
    prometheus: PrometheusSpec | None = None,
    far: FarEnd | None = None,
) -> tuple[Profile, FleetTelemetry, dict]:
    trace = ReplayTrace.load(TRACES[layout])
    gpu_json = [
        json.dumps(json.loads(line)["gpus"], separators=(",", ":")) for line in trace.stream if _is_sample(line)
    ]
    names = [f"{layout}-{i:03d}" for i in range(nodes)]
    # With Prometheus the replay only answers the instance polls (SSH stays for those).
    telemetry = "prometheus" if prometheus else "ssh"
    specs = tuple(
        NodeSpec(name=n, host=n, transport="local", simulate=SimulateSpec(), telemetry=telemetry) for n in names
    )
    rng = random.Random(seed)
    transports: dict
    if far is not None:
        transports = {n: PipeReplay(n, trace, i, far.read_fds[i], far.control_w) for i, n in enumerate(names)}
    else:
        transports = {
            n: LiveReplay(n, trace, gpu_json, phase=rng.uniform(0, interval), interval=interval) for n in names
        }
    pool = TransportPool(lambda spec: transports[spec.name])
    fleet = FleetTelemetry(specs, pool, interval=interval, prometheus=prometheus)
    return Profile(nodes=specs, prometheus=prometheus), fleet, transports


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process we started, in seconds (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PrometheusSide:
    """The simulated DME exporter and a real Prometheus scraping it, on 127.0.0.1."""

    def __init__(self, args) -> None:
        from console.sim.dme_exporter import fleet_specs
        from tests.integration.prometheus_server import DmeExporter, PrometheusServer

        self.work = Path(tempfile.mkdtemp(prefix="fleet-scale-prom-"))
        specs = fleet_specs(args.nodes, f"{args.layout}-", "MI300X", 8, args.layout.upper(), "NPS1")
        t0 = time.monotonic()
        self.exporter = DmeExporter.start(self.work / "dme", specs, period=args.exporter_period)
        self.server = PrometheusServer(self.work / "prometheus", self.exporter.targets(), args.interval)
        per_node = 8 * (8 if args.layout == "cpx" else 1)
        self.gpus = args.nodes * per_node
        try:
            self.server.start()
            self.server.wait_for_series(self.gpus, timeout=args.ready_timeout)
        except BaseException:
            self.stop()
            raise
        self.ready_after_s = round(time.monotonic() - t0, 1)
        self.spec = PrometheusSpec(url=self.server.url, scrape_interval=args.interval)
        self.refresh_ms: list[float] = []  # wall time of a refresh (queries in flight included)
        self.refresh_cpu_ms: list[float] = []  # the console's CPU in it: JSON decode, parse, fleet update

    def instrument(self, fleet: FleetTelemetry) -> None:
        source = fleet.prometheus
        assert source is not None
        refresh = source.refresh

        async def timed_refresh() -> None:
            t = time.perf_counter()
            cpu0 = source.client.decode_cpu_s + source.apply_cpu_s
            await refresh()
            self.refresh_ms.append((time.perf_counter() - t) * 1000)
            self.refresh_cpu_ms.append((source.client.decode_cpu_s + source.apply_cpu_s - cpu0) * 1000)

        source.refresh = timed_refresh  # type: ignore[method-assign]

    def cpu(self) -> tuple[float, float]:
        return proc_cpu_s(self.exporter.proc.pid), proc_cpu_s(self.server.pid or 0)

    def scrape_health(self) -> dict:
        """What Prometheus says of its own scraping: targets up, scrape durations."""
        out = {}
        for name, expr in (
            ("targets", 'count(up{job="dme"})'),
            ("targets_up", 'sum(up{job="dme"})'),
            # targets whose last scrape is older than 3 intervals: Prometheus not keeping up
            (
                "targets_behind",
                f'count(time() - timestamp(up{{job="dme"}}) > {3 * self.spec.scrape_interval:g}) or vector(0)',
            ),
            ("scrape_duration_p95_ms", 'quantile(0.95, scrape_duration_seconds{job="dme"}) * 1000'),
            ("samples_per_scrape_round", 'sum(scrape_samples_scraped{job="dme"})'),
        ):
            try:
                result = self.server.query(expr)["data"]["result"]
                out[name] = round(float(result[0]["value"][1]), 1) if result else None
            except (OSError, ValueError, KeyError, IndexError):
                out[name] = None
        return out

    def stop(self) -> None:
        self.server.stop()
        self.exporter.stop()
        shutil.rmtree(self.work, ignore_errors=True)


class AnswersSide:
    """Prometheus-fed nodes whose answers are simulated (--source answers): what PrometheusSource
    does with a refresh once Prometheus's JSON is parsed, on its schedule (the nodes on screen
    every interval, the whole fleet every SWEEP_EVERY-th, yielding every _NODES_PER_SLICE nodes):
    a frame per node into FleetTelemetry.ingest, the CPX trace's values with fresh timestamps.
    For fleets too big for a real Prometheus on this machine: the console's own cost after
    the parse (history, snapshots, the table, keys, memory). The HTTP answer's decode and
    parse are not in it (--source prometheus measures them: `steady.prometheus`)."""

    def __init__(self, args) -> None:
        from console.core.telemetry import parse_agent_line

        trace = ReplayTrace.load(TRACES[args.layout])
        parsed = [parse_agent_line(line) for line in trace.stream]
        self.static = next(m.gpus for m in parsed if isinstance(m, StaticInfo))
        self.frames = [m for m in parsed if isinstance(m, TelemetryFrame)]
        self.gpus = args.nodes * len(self.static)
        # the fleet takes Prometheus-fed nodes only with a [prometheus] table; nothing is asked of it
        self.spec = PrometheusSpec(url="http://127.0.0.1:9", scrape_interval=args.interval)
        self.refresh_cpu_ms: list[float] = []
        self.refreshes = 0

    def instrument(self, fleet: FleetTelemetry) -> None:
        fleet._start_prometheus = lambda: self._start(fleet)  # type: ignore[method-assign]

    def _start(self, fleet: FleetTelemetry) -> None:
        if fleet._prometheus_task is None:
            fleet._prometheus_task = asyncio.create_task(self._run(fleet), name="telemetry:answers")

    async def _run(self, fleet: FleetTelemetry) -> None:
        from console.services.prometheus import _NODES_PER_SLICE, SWEEP_EVERY

        loop = asyncio.get_running_loop()
        next_at = loop.time()
        names = fleet.node_names
        seq = 0
        while True:
            t0 = time.thread_time()
            sweep = seq % SWEEP_EVERY == 0 or not fleet._watched
            nodes = names if sweep else [n for n in fleet._watched if n in fleet._tracks]
            now = time.time()
            template = self.frames[seq % len(self.frames)]
            frame = dataclasses.replace(template, ts=now, seq=seq)
            for n, node in enumerate(nodes):
                if n and n % _NODES_PER_SLICE == 0:
                    await asyncio.sleep(0)
                fleet.ingest(
                    node, frame, static=self.static, source="prometheus (simulated answers)", interval=fleet.interval,
                    sample_at=now,
                )  # fmt: skip
                if fleet.snapshot(node).health != NodeHealth.LIVE:
                    fleet.set_node_health(node, NodeHealth.LIVE, None)
            self.refresh_cpu_ms.append((time.thread_time() - t0) * 1000)
            self.refreshes += 1
            seq += 1
            next_at += fleet.interval
            delay = next_at - loop.time()
            if delay <= 0:
                next_at, delay = loop.time() + fleet.interval, fleet.interval
            await asyncio.sleep(delay)

    def stop(self) -> None:
        return None


def summary(values: list[float], digits: int = 1) -> dict:
    if not values:
        return {"n": 0}
    s = sorted(values)

    def pct(p: float) -> float:
        return round(s[min(len(s) - 1, int(round(p * (len(s) - 1))))], digits)

    return {"p50": round(statistics.median(s), digits), "p95": pct(0.95), "max": round(s[-1], digits), "n": len(s)}


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Probe:
    """Instrumentation around the real app: which frames were painted, with what."""

    def __init__(self, app: ConsoleApp, fleet: FleetTelemetry) -> None:
        self.app = app
        self.recording = False
        self.received: dict[str, dict[float, float]] = {}  # node -> agent ts -> received at
        self.counted: dict[str, float] = {}  # node -> agent ts already counted
        self.visible_since: dict[str, float] = {}
        self.rendered: set[str] = set()  # nodes with a row rendered since the last frame
        self.refreshed = False  # the table asked for a repaint in the redraw running now
        self.sample_to_screen: list[float] = []
        self.paint_ms: list[float] = []  # compositor render + terminal bytes, per frame
        self.clock_redraw_ms: list[float] = []  # the app's clock redraw (data -> widgets)
        self.frames = 0
        self.key: tuple[float, tuple, asyncio.Future] | None = None
        fleet.subscribe(self._on_event)

    def _on_event(self, event) -> None:
        if isinstance(event, TelemetryReceived):
            seen = self.received.setdefault(event.node, {})
            seen[event.frame.ts] = event.received_at
            if len(seen) > 8:
                del seen[next(iter(seen))]

    def install(self) -> None:
        app = self.app
        screen = app.screen
        self.table = table = screen.query_one("GpuTable")
        render_line, display = table.render_line, app._display
        compositor_refresh, redraw_now = screen._compositor_refresh, app.redraw_now

        def timed_render_line(y: int):
            index = int(table.scroll_offset.y) + y - 1
            if y > 0 and 0 <= index < len(table.rows):
                self.rendered.add(table.rows[index].node)
            return render_line(y)

        def timed_display(scr, renderable) -> None:
            display(scr, renderable)
            if renderable is None or scr is not app.screen:
                return
            renderable.render_segments(app.console)  # what a real terminal run writes
            self._painted(time.time(), time.perf_counter())

        def timed_compositor_refresh() -> None:
            t = time.perf_counter()
            compositor_refresh()
            if self.recording:
                self.paint_ms.append((time.perf_counter() - t) * 1000)

        def timed_redraw_now(now=None) -> None:
            t = time.perf_counter()
            self.refreshed = False
            redraw_now(now)
            if self.recording:
                self.clock_redraw_ms.append((time.perf_counter() - t) * 1000)
            if not self.refreshed and self.rendered:
                # The node's lines were rebuilt for the new sample and read the same as on
                # screen (nothing to paint): the screen shows the sample now.
                self._painted(time.time(), time.perf_counter(), displayed=False)

        def timed_refresh(*regions, **kwargs):
            self.refreshed = True
            return refresh(*regions, **kwargs)

        refresh = table.refresh
        table.refresh = timed_refresh
        table.render_line = timed_render_line
        app._display = timed_display
        screen._compositor_refresh = timed_compositor_refresh
        app.redraw_now = timed_redraw_now

    def _state(self) -> tuple:
        return (self.table._cursor, int(self.table.scroll_offset.y))

    def _painted(self, wall: float, perf: float, displayed: bool = True) -> None:
        table = self.table
        if self.recording and displayed:
            self.frames += 1
        for node in self.rendered:
            snap = table._snapshots.get(node)
            if snap is None or snap.latest is None:
                continue
            ts = snap.latest.ts
            if self.counted.get(node) == ts:
                continue
            self.counted[node] = ts
            received = self.received.get(node, {}).get(ts)
            since = self.visible_since.get(node)
            # Only samples that arrived while the node was on screen: a node scrolled
            # into view shows its latest sample at once, that is not a sample's latency.
            if self.recording and received is not None and since is not None and since <= received:
                self.sample_to_screen.append((wall - ts) * 1000)
        self.rendered = set()
        top = int(table.scroll_offset.y)
        visible = {r.node for r in table.rows[top : top + max(0, table.size.height - 1)]}
        for node in visible:
            self.visible_since.setdefault(node, wall)
        for node in [n for n in self.visible_since if n not in visible]:
            del self.visible_since[node]
        if self.key is not None and displayed:
            t0, before, done = self.key
            if self._state() != before and not done.done():
                done.set_result((perf - t0) * 1000)

    async def press(self, key: str, char: str | None, timeout: float = 2.0) -> float | None:
        done = asyncio.get_running_loop().create_future()
        event = events.Key(key, char)
        event.set_sender(self.app)
        self.key = (time.perf_counter(), self._state(), done)
        self.app._driver.send_message(event)  # as the terminal driver delivers a key
        try:
            return await asyncio.wait_for(done, timeout)
        except asyncio.TimeoutError:
            return None  # the key moved nothing (end of the table)
        finally:
            self.key = None


def gc_figures() -> dict:
    """What the app's gc.freeze() (at settle) saves: a full collection with the long-lived
    objects frozen, as the app runs, and with them back in the collector's sight."""
    t = time.perf_counter()
    gc.collect()
    frozen_ms = (time.perf_counter() - t) * 1000
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    tracked = len(gc.get_objects())
    t = time.perf_counter()
    gc.collect()
    unfrozen_ms = (time.perf_counter() - t) * 1000
    gc.freeze()
    return {
        "tracked_objects": tracked,
        "frozen_objects": frozen,
        "full_collection_ms": {"frozen": round(frozen_ms, 1), "unfrozen": round(unfrozen_ms, 1)},
    }


def sample_ages(fleet: FleetTelemetry, table) -> dict:
    """Seconds since each node's newest sample (on screen: what the rows show) and since its
    newest line of any kind (an off-screen agent's tick lines: alive and on time)."""
    now = fleet._clock()
    top = int(table.scroll_offset.y)
    visible = {r.node for r in table.rows[top : top + max(0, table.size.height - 1)]}
    sample, heard, shown = [], [], []
    for name in fleet.node_names:
        snap, track = fleet.snapshot(name), fleet._tracks[name]
        if snap.last_sample_ts is None:
            continue
        age = now - snap.last_sample_ts
        sample.append(age)
        heard.append(now - max(snap.last_sample_ts, track.heard_at or 0.0))
        if name in visible:
            shown.append(age)
    top_of = lambda xs: round(max(xs), 2) if xs else None  # noqa: E731
    return {
        "sample_age_max_s": {"on_screen": top_of(shown), "all_nodes": top_of(sample)},
        "heard_age_max_s": top_of(heard),
        "nodes_sending_less": sum(1 for n in fleet.node_names if fleet.sample_every(n) > 1),
    }


def check(name: str, value: float | None, where: tuple[str, str] = ("", "")) -> dict:
    op, limit = SOURCE_BUDGETS.get(where, {}).get(name) or BUDGETS[name]
    met = None if value is None else (value <= limit if op == "<=" else value >= limit)
    return {"figure": value, "budget": f"{op} {limit:g}", "met": met}


async def measure(
    args,
    side: PrometheusSide | AnswersSide | None = None,
    far: FarEnd | None = None,
    selector: PacedSelector | None = None,
) -> dict:
    width, height = (int(x) for x in args.size.lower().split("x"))
    profile, fleet, transports = build(
        args.nodes, args.interval, args.seed, args.layout, side.spec if side else None, far=far
    )
    answers = side if isinstance(side, AnswersSide) else None
    if answers:
        answers.instrument(fleet)  # before the app starts the fleet
        side = None
    app = ConsoleApp(profile, fleet=fleet)
    probe = Probe(app, fleet)
    frames = [0]
    fleet.subscribe(lambda e: frames.__setitem__(0, frames[0] + 1) if isinstance(e, TelemetryReceived) else None)
    out: dict = {}
    async with app.run_test(size=(width, height)):
        if side:
            # The app starts the fleet after its first frame: wait for the Prometheus source (bounded).
            deadline = time.monotonic() + 30
            while fleet.prometheus is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            side.instrument(fleet)
        t_start = time.monotonic()
        while not all(fleet.frames_received(n) > 0 for n in fleet.node_names):
            if time.monotonic() - t_start > 120:
                raise SystemExit("nodes did not all go live within 120 s")
            await asyncio.sleep(0.05)
        out["all_live_after_s"] = round(time.monotonic() - t_start, 2)
        probe.install()
        await asyncio.sleep(args.settle)
        gc.collect()
        if side:
            side.refresh_ms.clear()
            side.refresh_cpu_ms.clear()
            side_cpu0 = side.cpu()

        steady_s = args.seconds * 2 / 3
        keys_s = args.seconds - steady_s
        probe.recording = True
        sent0 = frames[0] if side or answers else sum(t.sent for t in transports.values())
        cpu0, wall0 = time.process_time(), time.monotonic()
        far0 = far.cpu_s() if far else 0.0
        wakes0 = selector.wakes if selector else 0
        visited = 1
        while (left := steady_s - (time.monotonic() - wall0)) > 0:
            await asyncio.sleep(min(args.visit, left))
            if steady_s - (time.monotonic() - wall0) > 1.0 and await probe.press("right_square_bracket", "]"):
                visited += 1
        cpu1, wall1 = time.process_time(), time.monotonic()
        sent1 = frames[0] if side or answers else sum(t.sent for t in transports.values())
        ages = sample_ages(fleet, probe.table)
        steady = {
            "seconds": round(wall1 - wall0, 1),
            "cpu_percent": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 1),
            "samples_per_s": round((sent1 - sent0) / (wall1 - wall0), 1),
            "frames_per_s": round(probe.frames / (wall1 - wall0), 2),
            "loop_wakes_per_s": round((selector.wakes - wakes0) / (wall1 - wall0), 1) if selector else None,
            "nodes_watched": visited,
            "sample_to_screen_ms": summary(probe.sample_to_screen),
            "clock_redraw_ms": summary(probe.clock_redraw_ms, 2),
            "paint_ms": summary(probe.paint_ms, 2),
            "rss_mb": round(rss_mb(), 1),
            **ages,
        }
        if answers:
            steady["answers"] = {
                "refresh_cpu_ms": summary(answers.refresh_cpu_ms[-int(steady_s) :], 1),
                "refreshes": answers.refreshes,
            }
        elif not side:
            steady["tick_lines_per_s"] = round(sum(t.ticks for t in transports.values()) / (wall1 - wall0), 1)
        if far:  # the agents' own work, in their process (not in the console's figure)
            steady["far_end_cpu_percent"] = round(100 * (far.cpu_s() - far0) / (wall1 - wall0), 1)
        if side:
            exp1, prom1 = side.cpu()
            span = wall1 - wall0
            steady["prometheus"] = {
                "console_refresh_ms": summary(side.refresh_ms, 1),
                "console_refresh_cpu_ms": summary(side.refresh_cpu_ms, 1),
                "refreshes_per_s": round(len(side.refresh_ms) / span, 2),
                # what the console's own refresh work would cost at one refresh a second
                "refresh_cpu_percent_at_1hz": round(statistics.fmean(side.refresh_cpu_ms) / 10, 1)
                if side.refresh_cpu_ms
                else None,
                "prometheus_cpu_percent": round(100 * (prom1 - side_cpu0[1]) / span, 1),
                "exporter_cpu_percent": round(100 * (exp1 - side_cpu0[0]) / span, 1),
                **side.scrape_health(),
            }

        key_ms: list[float] = []
        no_effect = 0
        cpu2, wall2 = time.process_time(), time.monotonic()
        i = 0
        while time.monotonic() - wall2 < keys_s:
            key, char = KEYS[i % len(KEYS)]
            i += 1
            t = time.monotonic()
            ms = await probe.press(key, char)
            if ms is None:
                no_effect += 1
            else:
                key_ms.append(ms)
            await asyncio.sleep(max(0.0, 0.5 - (time.monotonic() - t)))
        cpu3, wall3 = time.process_time(), time.monotonic()
        probe.recording = False
        keys = {
            "seconds": round(wall3 - wall2, 1),
            "cpu_percent": round(100 * (cpu3 - cpu2) / (wall3 - wall2), 1),
            "presses": i,
            "no_effect": no_effect,
            "key_to_repaint_ms": summary(key_ms),
        }
        out["rows"] = len(probe.table.rows)
        out["gc"] = gc_figures()
        # The rings are preallocated: what they take now is what they take after 10 min.
        out["history"] = {
            "samples_per_gpu": fleet.history_capacity(),
            "seconds_per_gpu": round(fleet.history_capacity() * args.interval),
            "mb": round(fleet.history_bytes() / 2**20, 1),
        }
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.update(steady=steady, keys=keys, peak_rss_mb=round(peak, 1))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--source", choices=("ssh", "prometheus", "answers", "both"), default="ssh")
    parser.add_argument("--layout", choices=("cpx", "spx"), default="cpx", help="8 MI300X per node in CPX or SPX")
    parser.add_argument("--ready-timeout", type=float, default=300.0, help="seconds for Prometheus to have every GPU")
    parser.add_argument(
        "--exporter-period",
        type=float,
        default=1.0,
        help="--source prometheus: seconds between the simulated exporter's render passes",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="measured time (steady 2/3, keys 1/3)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between a node's samples")
    parser.add_argument("--size", default="120x36", help="terminal COLSxROWS")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after all nodes are live")
    parser.add_argument("--visit", type=float, default=4.0, help="seconds on one node in the steady phase")
    parser.add_argument("--seed", type=int, default=0, help="of the nodes' phases")
    parser.add_argument("--quick", action="store_true", help="smoke run: 15 s measured, 1 s settle")
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=PACE_S * 1000,
        help="the console loop's pace (console/ui/paced_loop.py); 0: a wake-up for every line, as before 2026-11-27",
    )
    parser.add_argument(
        "--agents",
        choices=("process", "inline"),
        default="process",
        help="--source ssh: the replayed agents in a process of their own, lines over pipes (default), "
        "or in the console's own process (their timers and formatting then count in its CPU)",
    )
    parser.add_argument(
        "--health",
        choices=("delta", "full", "none"),
        default="delta",
        help="--agents process: the agents' health lines (far_agents.py): as the agent sends them, "
        "every entry in full (the agent before `same`), or none (as before 2026-11-29)",
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.settle = min(args.seconds, 15.0), 1.0
    if args.source == "both":
        return run_both(args)
    load0 = os.getloadavg()
    # A `timeout` or ^C must not leave the exporter and Prometheus behind: SIGTERM
    # becomes SystemExit, so the finally below stops them by PID.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    side: PrometheusSide | AnswersSide | None = None
    if args.source == "prometheus":
        side = PrometheusSide(args)
    elif args.source == "answers":
        side = AnswersSide(args)
    far = (
        FarEnd(args.nodes, args.interval, args.seed, args.layout, health=args.health)
        if args.source == "ssh" and args.agents == "process"
        else None
    )
    # the console's own loop (console/ui/paced_loop.py): paced, as `rocm-console` runs it
    selector = PacedSelector(args.pace_ms / 1000)
    try:
        m = run_on(selector, measure(args, side, far, selector))
    finally:
        if side:
            side.stop()
        if far:
            far.stop()
    steady, keys = m["steady"], m["keys"]
    result = {
        "script": "fleet_scale",
        "health_lines": args.health if far else "none",
        "source": {
            "prometheus": "real Prometheus scraping simulated DME",
            "answers": "simulated Prometheus answers, after the parse (AnswersSide)",
        }.get(
            args.source,
            "replayed agent traces, from a process of their own over pipes (far_agents.py)"
            if args.agents == "process"
            else "replayed agent traces, in the console's process (--agents inline)",
        ),
        "layout": args.layout,
        "quick": args.quick,
        "loop_pace_ms": args.pace_ms,
        "nodes": args.nodes,
        "logical_gpus": m["rows"] - args.nodes,
        "sample_interval_s": args.interval,
        "terminal": args.size,
        "seconds": args.seconds,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "all_live_after_s": m["all_live_after_s"],
        "cpu_percent": steady["cpu_percent"],
        "peak_rss_mb": m["peak_rss_mb"],
        "history": m["history"],
        "gc": m["gc"],
        "sample_to_screen_ms": steady["sample_to_screen_ms"],
        "key_to_repaint_ms": keys["key_to_repaint_ms"],
        "redraw_ms_per_frame": {"clock_redraw": steady["clock_redraw_ms"], "paint": steady["paint_ms"]},
        "steady": steady,
        "keys": keys,
    }
    if isinstance(side, PrometheusSide):
        result["prometheus_ready_after_s"] = side.ready_after_s
    where = (args.source, args.layout)
    budgets = {
        "cpu_percent": check("cpu_percent", steady["cpu_percent"], where),
        "peak_rss_mb": check("peak_rss_mb", m["peak_rss_mb"], where),
        "sample_to_screen_p95_ms": check("sample_to_screen_p95_ms", steady["sample_to_screen_ms"].get("p95")),
        "key_to_repaint_p95_ms": check("key_to_repaint_p95_ms", keys["key_to_repaint_ms"].get("p95")),
        "history_seconds_per_gpu": check("history_seconds_per_gpu", m["history"]["seconds_per_gpu"]),
    }
    if args.source == "ssh":
        ages = steady["sample_age_max_s"]
        budgets["sample_age_on_screen_max_s"] = check("sample_age_on_screen_max_s", ages["on_screen"])
        budgets["heard_age_max_s"] = check("heard_age_max_s", steady["heard_age_max_s"])
    result["budgets"] = budgets
    result["budgets_met"] = all(b["met"] for b in budgets.values())
    print(json.dumps(result))
    return 0


def run_both(args) -> int:
    """Each source in its own process (own peak RSS), then both figures side by side."""
    out = {}
    for source in ("ssh", "prometheus"):
        argv = [sys.executable, __file__, "--source", source, "--nodes", str(args.nodes), "--layout", args.layout]
        argv += ["--seconds", str(args.seconds), "--interval", str(args.interval), "--size", args.size]
        argv += ["--settle", str(args.settle), "--visit", str(args.visit), "--seed", str(args.seed)]
        argv += ["--exporter-period", str(args.exporter_period), "--ready-timeout", str(args.ready_timeout)]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            out[source] = {"error": proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
            continue
        out[source] = json.loads(proc.stdout)
    keys = ("cpu_percent", "peak_rss_mb", "sample_to_screen_ms", "key_to_repaint_ms")
    side_by_side = {k: {s: out[s].get(k) for s in out} for k in keys}
    print(
        json.dumps(
            {"script": "fleet_scale", "nodes": args.nodes, "layout": args.layout, "side_by_side": side_by_side, **out}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
