"""A simulated AMD Device Metrics Exporter (DME) for a fleet of simulated nodes.

Serves DME's Prometheus text format on 127.0.0.1 only, with the values of the
simulated amdsmi (console/sim/amdsmi/, one instance per node, each with its
own state folder), so a real Prometheus can scrape it for the demo and the
tests. Metric and label names follow DME as it is (docs/prometheus.md; checked
against DME's published list by tests/core/test_dme_contract.py):

* every metric name may carry a prefix (DME's MetricsFieldPrefix, e.g. amd_);
* labels: DME's always-present set (hostname, gpu_id, gpu_partition_id,
  serial_number, card_model (part number), gpu_*_partition_type,
  deployment_mode, pod, namespace, container, job_*) plus card_series (market
  name, on in DME's example config), sorted as DME's Go client writes them;
* a partitioned GPU's device values (gfx and memory activity, temperatures,
  clocks) only on its partition 0, power 0 on the others; each partition's own
  load in gpu_gfx_busy_instantaneous, one series per XCC (xcc_index);
* gpu_clock with lower-case clock_type, one system clock per XCD (clock_index
  0..n-1), then memory, soc, video, data;
* a node spec's "dme_platform": "mi2xx" exports as DME does on MI2xx:
  gpu_partition_id "NA", partition types "none", gpu_edge_temperature and
  gpu_average_package_power instead of the junction and package power, no
  per-XCC busy.

    python3 -m console.sim.dme_exporter --fleet 4 --prefix sim- --state-dir /tmp/x
    python3 console/sim/dme_exporter.py --nodes fleet.json --port 0 --metric-prefix amd_

Paths: /nodes/<hostname>/metrics (one node, as if it were that node's own
exporter on port 5000) and /metrics (every node). The first line on stdout is
JSON: {"port": N, "nodes": [...]}; the process runs until it is stopped.
Node spec keys besides the simulator's own: metric_prefix, dme_platform,
card_series, card_model.

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

# (metric, help): help texts are ours; the names are DME's. Written in this order.
FAMILIES = (
    ("gpu_nodes_total", "Number of GPUs on the node"),
    ("gpu_gfx_activity", "GFX engine activity in percent (device, on partition 0)"),
    ("gpu_gfx_busy_instantaneous", "GFX busy in percent, per partition and XCC"),
    ("gpu_umc_activity", "Memory controller activity in percent (device, on partition 0)"),
    ("gpu_used_vram", "VRAM in use, MB"),
    ("gpu_total_vram", "VRAM size, MB"),
    ("gpu_package_power", "Socket power, W (partition 0; 0 on the others)"),
    ("gpu_average_package_power", "Average socket power, W"),
    ("gpu_power_usage", "GPU power, W (partition 0; 0 on the others)"),
    ("gpu_junction_temperature", "Hotspot temperature, Celsius"),
    ("gpu_edge_temperature", "Edge temperature, Celsius"),
    ("gpu_memory_temperature", "Memory temperature, Celsius"),
    ("gpu_clock", "Clock frequencies, MHz"),
)
# Health families (docs/prometheus.md, "DME health families"), on a physical GPU's first
# partition; the values of the simulated amdsmi's health calls, so the faults of faults.json
# (console/sim/faults.py) show in them. ECC per block for the blocks the simulator has RAS on.
ECC_BLOCKS = ("umc", "sdma", "gfx", "mmhub")
ECC_KEYS = (("correct", "correctable_count"), ("uncorrect", "uncorrectable_count"), ("deferred", "deferred_count"))
HEALTH_FAMILIES = tuple(
    (
        "gpu_ecc_{}_{}".format(kind, block),
        "ECC {} count, {}".format(kind + "able" if kind != "deferred" else kind, block),
    )
    for block in ("total",) + ECC_BLOCKS
    for kind, _ in ECC_KEYS
) + (
    ("pcie_speed", "PCIe link speed now, GT/s"),
    ("pcie_max_speed", "PCIe link speed at most, GT/s"),
    ("pcie_replay_count", "PCIe replays"),
    ("pcie_recovery_count", "PCIe L0 to recovery transitions"),
    ("gpu_violation_current_accumulated_counter", "Violation accumulator clock"),
    ("gpu_violation_ppt_residency_accumulated", "Power (PPT) throttle residency, accumulated"),
    ("gpu_violation_socket_thermal_residency_accumulated", "Socket thermal throttle residency, accumulated"),
    ("gpu_violation_vr_thermal_residency_accumulated", "VR thermal throttle residency, accumulated"),
    ("gpu_violation_hbm_thermal_residency_accumulated", "HBM thermal throttle residency, accumulated"),
    ("gpu_violation_processor_hot_residency_accumulated", "PROCHOT throttle residency, accumulated"),
    ("gpu_energy_consumed", "Energy consumed, uJ"),
)
# amdsmi_get_violation_status accumulator -> DME family
_VIOLATION_KEYS = (
    ("acc_counter", "gpu_violation_current_accumulated_counter"),
    ("acc_ppt_pwr", "gpu_violation_ppt_residency_accumulated"),
    ("acc_socket_thrm", "gpu_violation_socket_thermal_residency_accumulated"),
    ("acc_vr_thrm", "gpu_violation_vr_thermal_residency_accumulated"),
    ("acc_hbm_thrm", "gpu_violation_hbm_thermal_residency_accumulated"),
    ("acc_prochot_thrm", "gpu_violation_processor_hot_residency_accumulated"),
)
# MI2xx: DME has no PCIe replay / recovery or violation counters there (metricslist.md: MI3xx)
MI3XX_HEALTH = frozenset(name for _, name in _VIOLATION_KEYS) | {"pcie_replay_count", "pcie_recovery_count"}
MI2XX_ONLY = ("gpu_edge_temperature", "gpu_average_package_power")
# The health families are read again every HEALTH_PERIOD_S, or at once when the node's
# faults.json changed: they change slowly, and reading them doubled a render pass.
HEALTH_PERIOD_S = 5.0
MI3XX_ONLY = ("gpu_junction_temperature", "gpu_package_power", "gpu_gfx_busy_instantaneous")


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
    if value is None:
        return "NaN"
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else "{:g}".format(value)


def _esc(text):
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs):
    """Label text in DME's order (sorted by name, as its Go client writes them)."""
    return ",".join('{}="{}"'.format(k, _esc(v)) for k, v in sorted(pairs))


_OTHER_CLOCKS = ("current_uclk", "current_socclk", "current_vclk0", "current_dclk0")
_OTHER_KINDS = ("memory", "soc", "video", "data")
_EXTRAS = {}  # type: dict  # index label texts, made once


def _xcc(i):
    text = _EXTRAS.get(("xcc", i))
    if text is None:
        text = _EXTRAS[("xcc", i)] = 'xcc_index="{}"'.format(i)
    return text


def _clock(i, kind):
    text = _EXTRAS.get((kind, i))
    if text is None:
        text = _EXTRAS[(kind, i)] = 'clock_index="{}",clock_type="{}"'.format(i, kind)
    return text


_SPLITS = {}  # type: dict  # (label text, first extra key) -> (labels before it, labels after it)


def _with(labels, extra):
    """Label text with the index labels in their sorted place (DME sorts every label)."""
    key = extra.split("=", 1)[0]
    split = _SPLITS.get((labels, key))
    if split is None:
        if len(_SPLITS) > 100000:  # bounded: partition switches make new label texts
            _SPLITS.clear()
        parts = labels.split(",")
        at = sum(1 for part in parts if part.split("=", 1)[0] < key)
        split = _SPLITS[(labels, key)] = (",".join(parts[:at]), ",".join(parts[at:]))
    head, tail = split
    return ",".join(part for part in (head, extra, tail) if part)


class SimNode:
    """One simulated node and the DME text of its GPUs."""

    def __init__(self, hostname, spec, state_dir, index, prefix=""):
        self.hostname = hostname
        self.lock = threading.Lock()
        self.prefix = spec.pop("metric_prefix", prefix) or ""
        self.platform = str(spec.pop("dme_platform", "mi3xx")).lower()
        self.card_series = spec.pop("card_series", None)
        self.card_model = spec.pop("card_model", None)
        self.m = _load_amdsmi("_dme_sim_amdsmi_{}".format(index))
        self.folder, self.spec = os.path.join(state_dir, hostname), spec
        self.modes = ()  # (compute, memory) per physical GPU, as last enumerated
        self._init_library()
        self._enumerate()
        self.page = b""  # the latest rendered /metrics page
        self._health_rows = {}  # physical -> its health families, as last read
        self._health_key = None  # (faults.json's stat, when read)

    def _enumerate(self):
        """The logical GPUs and their labels (again after a partition switch, as DME does)."""
        self.handles = self.m.amdsmi_get_processor_handles()
        self.labels = []  # per logical GPU: its label text without the braces
        self._heads = {}  # (gpu, metric, index labels) -> the series' text before its value
        self.primary = {}  # physical -> primary handle
        for h in self.handles:
            if h.partition == 0:
                self.primary[h.phys] = h
        mi2xx = self.platform == "mi2xx"
        for h in self.handles:
            primary = self.primary[h.phys]
            asic = self.m.amdsmi_get_gpu_asic_info(primary)
            board = self.m.amdsmi_get_gpu_board_info(primary)
            compute = "none" if mi2xx else str(self.m.amdsmi_get_gpu_compute_partition(primary)).lower()
            memory = "none" if mi2xx else str(self.m.amdsmi_get_gpu_memory_partition(primary)).lower()
            pairs = [
                ("card_model", self.card_model or board.get("model_number") or ""),
                ("card_series", self.card_series or asic.get("market_name") or ""),
                ("container", ""),
                ("deployment_mode", "baremetal"),
                ("gpu_compute_partition_type", compute),
                ("gpu_id", h.index),
                ("gpu_memory_partition_type", memory),
                ("gpu_partition_id", "NA" if mi2xx else h.partition),
                ("hostname", self.hostname),
                ("job_id", ""),
                ("job_partition", ""),
                ("job_user", ""),
                ("namespace", ""),
                ("pod", ""),
                # a partition reports its parent's serial, like DME
                ("serial_number", asic.get("asic_serial")),
            ]
            self.labels.append(_labels(pairs))
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
        """Per logical GPU: {metric: [(extra label text, value), ...]}, as DME exports them."""
        m = self.m
        physical = {}
        for phys, h in self.primary.items():
            try:
                physical[phys] = m.amdsmi_get_gpu_metrics_info(h)
            except m.AmdSmiException:
                physical[phys] = {}
        mi2xx = self.platform == "mi2xx"
        out = []
        for h in self.handles:
            raw = physical.get(h.phys) or {}
            try:
                usage = m.amdsmi_get_gpu_vram_usage(h)
            except m.AmdSmiException:
                usage = {}
            first = h.partition == 0
            power = _num(raw.get("current_socket_power"))
            row = {
                "gpu_used_vram": [("", _num(usage.get("vram_used")))],
                "gpu_total_vram": [("", _num(usage.get("vram_total")))],
                # device power on partition 0, 0 on the others (no per-partition sensor)
                "gpu_power_usage": [("", power if first else 0.0)],
            }
            if mi2xx:
                row["gpu_average_package_power"] = [("", power)]
            else:
                row["gpu_package_power"] = [("", power if first else 0.0)]
                xcps = raw.get("xcp_stats.gfx_busy_inst") or []
                cells = xcps[h.partition] if h.partition < len(xcps) else []
                # "N/A" pads the XCC slots a partition does not have
                busy = [v for v in cells if _num(v) is not None and 0 <= v <= 100]
                row["gpu_gfx_busy_instantaneous"] = [(_xcc(i), float(v)) for i, v in enumerate(busy)]
            if first:
                row.update(self._health_of(h))
                row["gpu_gfx_activity"] = [("", _num(raw.get("average_gfx_activity")))]
                row["gpu_umc_activity"] = [("", _num(raw.get("average_umc_activity")))]
                hot = _num(raw.get("temperature_hotspot"))
                row["gpu_edge_temperature" if mi2xx else "gpu_junction_temperature"] = [("", hot)]
                row["gpu_memory_temperature"] = [("", _num(raw.get("temperature_mem")))]
                row["gpu_clock"] = self._clocks(raw)
            out.append(row)
        return out

    def _health_of(self, h):
        """The health families of a physical GPU, read again when faults.json changed or
        HEALTH_PERIOD_S passed since the last read."""
        try:
            st = os.stat(os.path.join(self.folder, "faults.json"))
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        now = time.monotonic()
        key = self._health_key
        if key is None or key[0] != stamp or now - key[1] >= HEALTH_PERIOD_S:
            self._health_rows = {}
            self._health_key = (stamp, now)
        rows = self._health_rows.get(h.phys)
        if rows is None:
            rows = self._health_rows[h.phys] = self._health(h)
        return rows

    def _health(self, h):
        """The health families of one physical GPU (its primary handle): {family: [("", value)]}."""
        m = self.m
        out = {}

        def call(name, *args):
            try:
                return getattr(m, name)(h, *args)
            except m.AmdSmiException:
                return None

        total = call("amdsmi_get_gpu_total_ecc_count") or {}
        for kind, key in ECC_KEYS:
            out["gpu_ecc_{}_total".format(kind)] = _num(total.get(key))
        for block in ECC_BLOCKS:
            counts = call("amdsmi_get_gpu_ecc_count", getattr(m.AmdSmiGpuBlock, block.upper())) or {}
            for kind, key in ECC_KEYS:
                out["gpu_ecc_{}_{}".format(kind, block)] = _num(counts.get(key))
        pcie = call("amdsmi_get_pcie_info") or {}
        now, most = pcie.get("pcie_metric") or {}, pcie.get("pcie_static") or {}
        speed, top = _num(now.get("pcie_speed")), _num(most.get("max_pcie_speed"))
        out["pcie_speed"] = speed / 1000.0 if speed is not None else None  # DME: GT/s, amdsmi: MT/s
        out["pcie_max_speed"] = top / 1000.0 if top is not None else None
        if self.platform != "mi2xx":
            out["pcie_replay_count"] = _num(now.get("pcie_replay_count"))
            out["pcie_recovery_count"] = _num(now.get("pcie_l0_to_recovery_count"))
            violation = call("amdsmi_get_violation_status") or {}
            for key, family in _VIOLATION_KEYS:
                out[family] = _num(violation.get(key))
        energy = call("amdsmi_get_energy_count") or {}
        acc, resolution = _num(energy.get("energy_accumulator")), _num(energy.get("counter_resolution"))
        out["gpu_energy_consumed"] = acc * resolution if acc is not None and resolution is not None else None
        return dict((family, [("", value)]) for family, value in out.items())

    @staticmethod
    def _clocks(raw):
        """One system clock per XCD, then memory, soc, video, data: clock_index in that order."""
        gfx = [c for c in (raw.get("current_gfxclks") or [raw.get("current_gfxclk")]) if _num(c) is not None]
        values = gfx + [raw.get(key) for key in _OTHER_CLOCKS]
        kinds = ("system",) * len(gfx) + _OTHER_KINDS
        out = []
        for i, (kind, value) in enumerate(zip(kinds, values)):
            number = _num(value)
            if number is not None:
                out.append((_clock(i, kind), number))
        return out

    def _render(self):
        values = self.values()
        pre = self.prefix
        skip = MI3XX_ONLY if self.platform == "mi2xx" else MI2XX_ONLY
        lines = []
        for metric, help_text in FAMILIES + HEALTH_FAMILIES:
            if metric in skip or (self.platform == "mi2xx" and metric in MI3XX_HEALTH):
                continue
            name = pre + metric
            lines.append("# HELP {} {}".format(name, help_text))
            lines.append("# TYPE {} gauge".format(name))
            if metric == "gpu_nodes_total":
                lines.append('{}{{hostname="{}"}} {}'.format(name, _esc(self.hostname), len(self.handles)))
                continue
            heads = self._heads
            for gpu, (labels, row) in enumerate(zip(self.labels, values)):
                for extra, value in row.get(metric, ()):
                    if value is None:
                        continue
                    key = (gpu, metric, extra)
                    head = heads.get(key)
                    if head is None:  # "name{labels} ", made once per series (a pass only adds values)
                        text = _with(labels, extra) if extra else labels
                        head = heads[key] = "{}{{{}}} ".format(name, text)
                    lines.append(head + _fmt(value))
        return "\n".join(lines) + "\n"


class Fleet:
    """The nodes, re-rendered by one background thread every ``period`` seconds (or
    back to back when a pass takes longer): a scrape only copies bytes, so it never
    times out however big the fleet, and the values are at most one pass old."""

    def __init__(self, nodes, state_dir, period=1.0, prefix=""):
        self.period = period
        self.nodes = {}
        for i, node in enumerate(nodes):
            spec = dict(node)
            hostname = spec.pop("hostname")
            self.nodes[hostname] = SimNode(hostname, spec, state_dir, i, prefix)
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
    parser.add_argument("--metric-prefix", default="", help="DME's MetricsFieldPrefix for every node, e.g. amd_")
    parser.add_argument("--parent-pid", type=int, help="exit when this process is gone (no orphan exporter)")
    args = parser.parse_args(argv)
    nodes = []
    if args.nodes:
        with open(args.nodes) as f:
            nodes = json.load(f)
    nodes += fleet_specs(args.fleet, args.prefix, args.gpu, args.gpus, args.compute, args.memory)
    if not nodes:
        parser.error("no nodes: give --nodes or --fleet")
    fleet = Fleet(nodes, args.state_dir, args.period, args.metric_prefix)
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
