"""A simulated AMD Device Metrics Exporter (DME) for a fleet of simulated nodes.

Serves DME's Prometheus text format on 127.0.0.1 only, with the values of the
simulated amdsmi (console/sim/amdsmi/, one instance per node, each with its
own state folder), so a real Prometheus can scrape it for the demo and the
tests. Metric and label names follow DME (docs/prometheus.md).

    python3 -m console.sim.dme_exporter --fleet 4 --prefix sim- --state-dir /tmp/x
    python3 console/sim/dme_exporter.py --nodes fleet.json --port 0

Paths: /nodes/<hostname>/metrics (one node, as if it were that node's own
exporter on port 5000) and /metrics (every node). The first line on stdout is
JSON: {"port": N, "nodes": [...]}; the process runs until it is stopped.

stdlib only, Python >= 3.8, never imports console (it may run on a node).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HERE = os.path.dirname(os.path.abspath(__file__))
_PARTITIONS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 8}

# (metric, help): help texts are ours; the names are DME's.
FAMILIES = (
    ("gpu_nodes_total", "Number of GPUs on the node"),
    ("gpu_gfx_activity", "GFX engine activity in percent"),
    ("gpu_umc_activity", "Memory controller activity in percent"),
    ("gpu_used_vram", "VRAM in use, MB"),
    ("gpu_total_vram", "VRAM size, MB"),
    ("gpu_package_power", "Socket power, W"),
    ("gpu_power_usage", "GPU power, W"),
    ("gpu_junction_temperature", "Hotspot temperature, Celsius"),
    ("gpu_memory_temperature", "Memory temperature, Celsius"),
    ("gpu_clock", "Clock frequencies, MHz"),
)


def _load_amdsmi(name):
    """A private copy of the simulated amdsmi package: its library state is per copy."""
    folder = os.path.join(_HERE, "amdsmi")
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its modules import each other relatively, as name.<module>
    spec.loader.exec_module(module)
    return module


def _num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _fmt(value):
    return "{:g}".format(value) if value is not None else "NaN"


def _esc(text):
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class SimNode:
    """One simulated node and the DME text of its GPUs."""

    def __init__(self, hostname, spec, state_dir, index):
        self.hostname = hostname
        self.lock = threading.Lock()
        self.m = _load_amdsmi("_dme_sim_amdsmi_{}".format(index))
        self.folder, self.spec = os.path.join(state_dir, hostname), spec
        self.modes = ()  # (compute, memory) per physical GPU, as last enumerated
        self._init_library()
        self._enumerate()
        self.page = b""  # the latest rendered /metrics page

    def _enumerate(self):
        """The logical GPUs and their labels (again after a partition switch, as DME does)."""
        self.handles = self.m.amdsmi_get_processor_handles()
        self.labels = []  # per logical GPU: its label text without the braces
        self.primary = {}  # physical -> primary handle
        for h in self.handles:
            if h.partition == 0:
                self.primary[h.phys] = h
        for h in self.handles:
            primary = self.primary[h.phys]
            asic = self.m.amdsmi_get_gpu_asic_info(primary)
            compute = str(self.m.amdsmi_get_gpu_compute_partition(primary))
            memory = str(self.m.amdsmi_get_gpu_memory_partition(primary))
            pairs = (
                ("card_model", asic.get("market_name")),
                ("gpu_compute_partition_type", compute.lower()),
                ("gpu_id", h.index),
                ("gpu_memory_partition_type", memory.lower()),
                ("gpu_partition_id", h.partition),
                ("hostname", self.hostname),
                # a partition reports its parent's serial, like DME
                ("serial_number", asic.get("asic_serial")),
            )
            self.labels.append(",".join('{}="{}"'.format(k, _esc(v)) for k, v in pairs))
        self.modes = self._modes()

    def _modes(self):
        """(compute, memory) partition of every physical GPU, as the library reads them now."""
        m = self.m
        try:
            return tuple(
                (str(m.amdsmi_get_gpu_compute_partition(h)), str(m.amdsmi_get_gpu_memory_partition(h)))
                for h in self.primary.values()
            )
        except m.AmdSmiException:
            return self.modes

    def _init_library(self):
        """amdsmi_init with this node's simulator folder and spec (read from the environment)."""
        m = self.m
        saved = {k: os.environ.get(k) for k in (m.ENV_DIR, m.ENV_SPEC)}
        os.environ[m.ENV_DIR] = self.folder
        os.environ[m.ENV_SPEC] = json.dumps(self.spec)
        try:
            m.amdsmi_init()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def _reinit(self):
        self.m.amdsmi_shut_down()
        self._init_library()
        self._enumerate()

    def refresh(self):
        if self._modes() != self.modes:  # switched by the node's agent: the GPUs are others now
            self._reinit()
        text = self._render()
        with self.lock:
            self.page = text.encode("utf-8")

    def values(self):
        """Per logical GPU: {metric: value}; clocks as gfx_clock / mem_clock."""
        m = self.m
        physical = {}
        for phys, h in self.primary.items():
            try:
                physical[phys] = m.amdsmi_get_gpu_metrics_info(h)
            except m.AmdSmiException:
                physical[phys] = {}
        out = []
        for h in self.handles:
            raw = physical.get(h.phys) or {}
            try:
                usage = m.amdsmi_get_gpu_vram_usage(h)
            except m.AmdSmiException:
                usage = {}
            xcps = raw.get("xcp_stats.gfx_busy_inst") or []
            if h.num_partitions == 1:
                util = _num(raw.get("average_gfx_activity"))
            else:
                cells = xcps[h.partition] if h.partition < len(xcps) else []
                row = [v for v in cells if _num(v) is not None and 0 <= v <= 100]  # "N/A" pads unused XCCs
                util = sum(row) / float(len(row)) if row else None
            power = _num(raw.get("current_socket_power"))
            out.append(
                {
                    "gpu_gfx_activity": util,
                    "gpu_umc_activity": _num(raw.get("average_umc_activity")),
                    "gpu_used_vram": _num(usage.get("vram_used")),
                    "gpu_total_vram": _num(usage.get("vram_total")),
                    "gpu_package_power": power,
                    "gpu_power_usage": power,
                    "gpu_junction_temperature": _num(raw.get("temperature_hotspot")),
                    "gpu_memory_temperature": _num(raw.get("temperature_mem")),
                    "gfx_clock": _num(raw.get("current_gfxclk")),
                    "mem_clock": _num(raw.get("current_uclk")),
                }
            )
        return out

    def _render(self):
        values = self.values()
        lines = []
        for metric, help_text in FAMILIES:
            lines.append("# HELP {} {}".format(metric, help_text))
            lines.append("# TYPE {} gauge".format(metric))
            if metric == "gpu_nodes_total":
                lines.append('gpu_nodes_total{{hostname="{}"}} {}'.format(_esc(self.hostname), len(self.handles)))
                continue
            for labels, row in zip(self.labels, values):
                if metric == "gpu_clock":
                    for index, kind, key in (
                        (0, "GPU_CLOCK_TYPE_SYSTEM", "gfx_clock"),
                        (8, "GPU_CLOCK_TYPE_MEMORY", "mem_clock"),
                    ):
                        if row[key] is not None:
                            lines.append(
                                'gpu_clock{{{},clock_index="{}",clock_type="{}"}} {}'.format(
                                    labels, index, kind, _fmt(row[key])
                                )
                            )
                elif row[metric] is not None:
                    lines.append("{}{{{}}} {}".format(metric, labels, _fmt(row[metric])))
        return "\n".join(lines) + "\n"


class Fleet:
    """The nodes, re-rendered by one background thread every ``period`` seconds (or
    back to back when a pass takes longer): a scrape only copies bytes, so it never
    times out however big the fleet, and the values are at most one pass old."""

    def __init__(self, nodes, state_dir, period=1.0):
        self.period = period
        self.nodes = {}
        for i, node in enumerate(nodes):
            spec = dict(node)
            hostname = spec.pop("hostname")
            self.nodes[hostname] = SimNode(hostname, spec, state_dir, i)
        self.pass_seconds = 0.0  # how long the last full render pass took
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._render_loop, name="dme-render", daemon=True)

    def render_all(self):
        t0 = time.monotonic()
        for node in self.nodes.values():
            node.refresh()
        self.pass_seconds = time.monotonic() - t0

    def _render_loop(self):
        while not self._stop.is_set():
            self.render_all()
            self._stop.wait(max(0.0, self.period - self.pass_seconds))

    def start(self):
        self.render_all()
        self._thread.start()

    def stop(self):
        self._stop.set()

    def page(self, hostname=None):
        if hostname is not None:
            node = self.nodes.get(hostname)
            return None if node is None else node.page
        return b"".join(n.page for n in self.nodes.values())


def _handler(fleet):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: Prometheus reuses a connection per target

        def do_GET(self):  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            data = None
            if path == "/metrics":
                data = fleet.page()
            elif path.startswith("/nodes/") and path.endswith("/metrics"):
                data = fleet.page(path[len("/nodes/") : -len("/metrics")])
            if data is None:
                self.send_error(404, "no such node")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):  # noqa: A002 - http.server's signature
            pass  # a scrape per node per second would flood the log

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A scraper that gave up mid-answer is its business, not a traceback on stderr.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            ThreadingHTTPServer.handle_error(self, request, client_address)


def fleet_specs(count, prefix, gpu, gpus, compute, memory, seed=0):
    return [
        {
            "hostname": "{}{:03d}".format(prefix, i),
            "gpu": gpu,
            "count": gpus,
            "compute_partition": compute,
            "memory_partition": memory,
            "seed": seed + i,
        }
        for i in range(count)
    ]


def _watch_parent(pid, server):
    while True:
        time.sleep(1.0)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            server.shutdown()  # serve_forever returns; main cleans up
            return
        except PermissionError:
            pass


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", help='JSON file: [{"hostname", "gpu", "count", "compute_partition", ...}]')
    parser.add_argument("--fleet", type=int, default=0, help="this many generated nodes")
    parser.add_argument("--prefix", default="sim-node-", help="host name prefix of generated nodes")
    parser.add_argument("--gpu", default="MI300X")
    parser.add_argument("--gpus", type=int, default=8, help="physical GPUs per generated node")
    parser.add_argument("--compute", default="SPX", choices=sorted(_PARTITIONS))
    parser.add_argument("--memory", default="NPS1")
    parser.add_argument("--state-dir", required=True, help="folder for the nodes' simulator state")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free one)")
    parser.add_argument(
        "--period", type=float, default=1.0, help="seconds between render passes (back to back when a pass is longer)"
    )
    parser.add_argument("--parent-pid", type=int, help="exit when this process is gone (no orphan exporter)")
    args = parser.parse_args(argv)
    nodes = []
    if args.nodes:
        with open(args.nodes) as f:
            nodes = json.load(f)
    nodes += fleet_specs(args.fleet, args.prefix, args.gpu, args.gpus, args.compute, args.memory)
    if not nodes:
        parser.error("no nodes: give --nodes or --fleet")
    fleet = Fleet(nodes, args.state_dir, args.period)
    fleet.start()
    server = _Server(("127.0.0.1", args.port), _handler(fleet))
    if args.parent_pid:
        threading.Thread(target=_watch_parent, args=(args.parent_pid, server), daemon=True).start()
    sys.stdout.write(json.dumps({"port": server.server_address[1], "nodes": list(fleet.nodes)}) + "\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        fleet.stop()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
