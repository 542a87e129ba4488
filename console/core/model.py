"""Records shared by every layer: frozen, slotted, stdlib only."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from console.core.health import HealthReading, HealthVerdict

# ---------------------------------------------------------------- profiles


@dataclass(frozen=True, slots=True)
class SimulateSpec:
    """Run the node's agent against the simulated amdsmi, or NVML for H100/H200 (console/sim)."""

    gpu: str = "MI300X"  # MI300X | MI325X | MI355X | H100 | H200
    count: int = 8  # physical GPUs
    compute_partition: str = "SPX"
    memory_partition: str = "NPS1"
    seed: int = 0
    busy: tuple[int, ...] = ()  # logical GPUs with a simulated workload from the start
    mig: tuple[int, ...] = ()  # NVIDIA: physical GPUs in MIG mode (four instances each)
    # The simulated node's user is root (True), is not (False), or is who runs it (None): the
    # demo sets True so its partition switches work for a user who is not root here.
    root: bool | None = None


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    host: str
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None  # None = the user's ~/.ssh/known_hosts, strict
    jump: str | None = None  # ProxyJump host: "user@host:port" or a Host alias
    python: str = "python3"
    sudo: bool = False
    state_dir: str = "~/.rocm-console"
    transport: str = "ssh"  # ssh | local
    simulate: SimulateSpec | None = None
    vllm: str = "vllm"
    source: str = ""  # profile file the node came from (for error messages)
    telemetry: str = "ssh"  # ssh (the node agent) | prometheus (DME via the site's Prometheus)
    prometheus_host: str | None = None  # DME's hostname label, when it differs from host
    allow_kill_foreign: bool = False  # "end process" may end other users' processes (as nvitop's option)
    # models on the node (issue Q): a hub mirror, the HF_HOME the cache lives in, extra model folders;
    # None / () = the profile's [models] table
    hf_endpoint: str | None = None
    hf_home: str | None = None
    model_dirs: tuple[str, ...] = ()
    # the profile's [models] max_packing_sum, given to each node as the profile loads (None: 0.95)
    max_packing_sum: float | None = None


@dataclass(frozen=True, slots=True)
class ServePreset:
    name: str
    model: str
    tp: int = 1
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    runtime: str = "host"  # host | docker
    # env that only some vLLM releases know: (range like "<0.12", pairs); serve/rules.env_for_vllm
    env_by_vllm: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    image: str | None = None
    port: int | None = None
    served_model_name: str | None = None
    source: str = ""
    # multi-node on Ray (console/core/multinode.py): parallel sizes, nodes (head
    # first), the Ray head's port and address as workers reach it, extra `ray start` args
    pp: int = 1
    dp: int = 1
    dp_local: int | None = None
    nodes: tuple[str, ...] = ()
    ray_port: int | None = None
    head_address: str | None = None
    ray_args: tuple[str, ...] = ()
    # the variable in the console's environment that holds the API key the instance requires:
    # handed to vLLM as VLLM_API_KEY (environment, never argv) and sent by the console's own calls
    api_key_env: str | None = None
    # the address vLLM binds on the node (--host); None: every address, vLLM's default
    host: str | None = None


@dataclass(frozen=True, slots=True)
class BenchPreset:
    name: str
    client: str = "vllm-bench"  # vllm-bench | benchmark_serving | guidellm | aiperf (console/core/bench/clients)
    backend: str = "vllm"
    endpoint: str | None = None
    dataset: str = "random"
    dataset_path: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    range_ratio: float | None = None
    num_prompts: int = 100
    request_rate: float | None = None  # None = inf
    max_concurrency: tuple[int, ...] = ()  # several values = a sweep
    burstiness: float | None = None
    seed: int | None = None
    ignore_eos: bool = False
    percentile_metrics: str | None = None
    metric_percentiles: str | None = None
    extra_args: tuple[str, ...] = ()
    source: str = ""
    # Issue B2 (console/core/bench/prefix_cache.py, goodput.py): whether the workload is meant to
    # be cold (None: random datasets are), a cold start asked for ("reset"), and an SLO in ms.
    cold: bool | None = None
    cold_start: str | None = None
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_itl_ms: float | None = None
    slo_e2e_ms: float | None = None
    # Issue B2 trace replay (console/core/bench/trace.py): a kept arrival trace (a file under
    # profiles/traces/ or a path) converted for vLLM's timed_trace dataset and uploaded with the run.
    trace: str | None = None
    trace_max_input: int | None = None  # the trace's longest prompt scaled down to at most this
    trace_speedup: float | None = None  # arrivals this many times faster than recorded
    # Issue B2 outside clients: the client's executable on the node (None: `guidellm` / `aiperf`
    # on its PATH) and conversation turns, each carrying the history (multi-turn; those clients only).
    client_path: str | None = None
    turns: int | None = None


@dataclass(frozen=True, slots=True)
class PrometheusSpec:
    """The site's Prometheus that scrapes AMD's Device Metrics Exporter (docs/prometheus.md)."""

    url: str
    token_env: str | None = None  # environment variable holding a bearer token
    ca_file: str | None = None  # CA bundle for https
    scrape_interval: float | None = None  # hint, seconds
    hostname_label: str = "hostname"
    metric_prefix: str | None = None  # DME's MetricsFieldPrefix; None: detected ("" or "amd_")
    source: str = ""


@dataclass(frozen=True, slots=True)
class AlertmanagerSpec:
    """[alertmanager]: where every [[alert]] rule's firing is posted (docs/watch.md)."""

    url: str  # the base URL, e.g. http://alertmanager:9093 (never with credentials)
    token_env: str | None = None  # environment variable holding a bearer token
    resend_interval: float = 60.0  # seconds between re-sends of an active alert
    timeout: float = 10.0  # seconds one POST may take
    source: str = ""


@dataclass(frozen=True, slots=True)
class ModelsConfig:
    """The profile's [models] table; a node's own keys of the same names win."""

    hf_endpoint: str | None = None  # a Hugging Face mirror (HF_ENDPOINT)
    hf_home: str | None = None  # HF_HOME on the nodes (the cache is HF_HOME/hub)
    model_dirs: tuple[str, ...] = ()  # folders of plain model folders, listed by `models list`
    max_packing_sum: float = 0.95  # the most the --gpu-memory-utilization shares on one GPU may add up to


@dataclass(frozen=True, slots=True)
class Profile:
    nodes: tuple[NodeSpec, ...] = ()
    serve_presets: tuple[ServePreset, ...] = ()
    bench_presets: tuple[BenchPreset, ...] = ()
    keys: tuple[tuple[str, str], ...] = ()  # [keys] table: binding id -> key(s)
    files: tuple[str, ...] = ()  # the files it was read from, in order
    prometheus: PrometheusSpec | None = None  # [prometheus]: telemetry = "prometheus" nodes read it
    models: ModelsConfig | None = None  # [models]: pulls, model folders, the packing limit (issue Q)
    alertmanager: AlertmanagerSpec | None = None  # [alertmanager]: alerts posted there too
    store_url: str | None = None  # [store] url: a team's PostgreSQL (docs/store.md); None: SQLite

    def node(self, name: str) -> NodeSpec | None:
        return next((n for n in self.nodes if n.name == name), None)


# ---------------------------------------------------------------- telemetry


class NodeHealth(str, enum.Enum):
    CONNECTING = "connecting"
    LIVE = "live"
    STALE = "stale"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    name: str
    vram_mib: float | None = None


@dataclass(frozen=True, slots=True)
class GpuStatic:
    """Facts that change only with a partition switch or a driver reload."""

    index: int  # logical GPU index on the node (amdsmi handle order)
    physical: int  # physical GPU the logical one belongs to
    partition_id: int  # 0 on the primary partition
    bdf: str | None = None
    model: str | None = None  # market name, e.g. "AMD Instinct MI300X"
    serial: str | None = None
    vbios: str | None = None
    vram_total_mib: float | None = None
    compute_partition: str | None = None  # SPX | DPX | QPX | CPX
    memory_partition: str | None = None  # NPS1 | NPS2 | NPS4 (NVIDIA: compute "MIG", memory the profile)
    memory_caps: tuple[str, ...] = ()
    uuid: str | None = None  # NVIDIA: "GPU-…" / "MIG-…", what CUDA_VISIBLE_DEVICES names a MIG instance by
    mig_mode: str | None = None  # NVIDIA: "off", "on", "off (on after a GPU reset)"; None: no MIG / AMD


@dataclass(frozen=True, slots=True)
class GpuMetrics:
    """One tick of one logical GPU. None = the device reported N/A."""

    index: int
    util_pct: float | None = None
    umc_pct: float | None = None
    vram_used_mib: float | None = None
    vram_total_mib: float | None = None
    power_w: float | None = None
    power_cap_w: float | None = None
    temp_junction_c: float | None = None
    temp_mem_c: float | None = None
    gfx_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    # Physical GPU's figures, on its first partition's row only (None on the others):
    energy_j: float | None = None  # the energy counter, cumulative joules
    throttled: bool | None = None  # power/thermal/VR/HBM throttling during the last tick


@dataclass(frozen=True, slots=True)
class AgentHello:
    source: str  # amdsmi | amdsmi (simulated) | amd-smi | rocm-smi | NVIDIA nvml | NVIDIA nvidia-smi
    hostname: str
    interval: float
    note: str | None = None  # why a fallback source was chosen
    agent_version: str = ""
    control: tuple[str, ...] = ()  # control lines the agent reads on stdin ("rate": SendRate)


@dataclass(frozen=True, slots=True)
class StaticInfo:
    ts: float
    gpus: tuple[GpuStatic, ...]


@dataclass(frozen=True, slots=True)
class TelemetryFrame:
    ts: float  # agent clock, epoch seconds
    seq: int
    gpus: tuple[GpuMetrics, ...]


@dataclass(frozen=True, slots=True)
class AgentFailure:
    message: str


@dataclass(frozen=True, slots=True)
class ProbeInfo:
    hostname: str | None = None
    python: str | None = None
    rocm: str | None = None
    amdsmi: str | None = None
    vllm: str | None = None
    numa_balancing: str | None = None
    source: str | None = None
    uid: int | None = None  # of the agent's user: 0 means partition switches need no sudo


@dataclass(frozen=True, slots=True)
class HealthFrame:
    """The agent's ``health`` line: readings of the physical GPUs it read this tick."""

    ts: float
    interval: float
    readings: tuple[HealthReading, ...]
    notes: tuple[str, ...] = ()  # GPU entries skipped as unreadable, one line each naming the GPU
    same: tuple[tuple[int, float], ...] = ()  # (physical, read time): read then, unchanged
    # (physical, n) of the full entries read (the agent's count), and of the `same` items: the
    # full entry they say is unchanged (a console that lacks it asks again)
    numbered: tuple[tuple[int, int], ...] = ()
    same_of: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """One physical GPU's health as the console judges it now."""

    physical: int
    verdict: HealthVerdict
    reading: HealthReading | None = None
    since: float | None = None  # when the current state began (unix seconds)


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """What the console knows about a node at one instant."""

    name: str
    health: NodeHealth
    error: str | None = None
    source: str | None = None
    last_sample_ts: float | None = None  # console clock when the last frame arrived
    static: tuple[GpuStatic, ...] = ()
    latest: TelemetryFrame | None = None
    probe: ProbeInfo | None = None
    interval: float = 1.0
    extra: dict = field(default_factory=dict, compare=False)
    gpu_health: tuple[GpuHealth, ...] = ()  # per physical GPU, sorted; empty until the first health line

    def health_of(self, physical: int) -> GpuHealth | None:
        return next((h for h in self.gpu_health if h.physical == physical), None)
