"""The stored run: its record, its JSON form (and back), its fingerprint and id."""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import overload

from console.core.bench.prefix_cache import warning_of
from console.core.bench.result import BenchResult

FORMAT = "rocm-console-result/1"

# Context of a run, in display order. Every key is present in a StoredRun (None = unknown).
CONTEXT_KEYS: tuple[str, ...] = (
    "node",
    "gpu_model",
    "compute_partition",
    "memory_partition",
    "instance",
    "serve_preset",
    "serve_args",  # list of str, secrets masked
    "env",  # dict, secrets masked
    "vllm_version",
    "bench_preset",
    "client_argv",  # list of str, secrets masked
    "sweep_id",
    "sweep_point",
    "run_kind",  # None/"serving", "latency", "throughput" (offline engine), "accuracy" (lm_eval)
)
# Setup keys always present (None = unknown), in display order; others follow when known.
SETUP_KEYS: tuple[str, ...] = (
    "model",
    "backend",
    "dataset",
    "input_len",
    "output_len",
    "num_prompts",
    "request_rate",
    "max_concurrency",
    "burstiness",
    "seed",
)
SETUP_NUMERIC_KEYS = ("request_rate", "burstiness", "range_ratio")
# A run's time: epoch seconds from 1970 to the end of 9999, what time.localtime and strftime
# take on every platform (1e300, NaN or -1e18 in a file is refused, naming the field).
MIN_TIME = 0.0
MAX_TIME = 253402300799.0
_ID_PART_RE = re.compile(r"[^A-Za-z0-9.]+")


@dataclass(frozen=True)
class StoredRun:
    """One benchmark run as stored. Treat the dicts as read-only.

    origin: "console" (run by the console) or "import" (read from a file);
    source: the imported file's path, else None; created: epoch seconds of the run
    (console) or of the import; metrics: result-JSON metric key -> float; result:
    vLLM's JSON object as written (per-request arrays kept), None for text
    imports; live: the live series summary, None when there was none;
    fingerprint: sha256 of the canonical content (dedupe).
    """

    id: str
    created: float
    origin: str
    source: str | None = None
    label: str | None = None
    context: dict = field(default_factory=dict, hash=False)
    setup: dict = field(default_factory=dict, hash=False)
    metrics: dict = field(default_factory=dict, hash=False)
    result: dict | None = field(default=None, hash=False, repr=False)
    live: dict | None = field(default=None, hash=False, repr=False)
    fingerprint: str = ""
    # Issue P: the run's energy summary (ENERGY_KEYS + per physical GPU), its GPUs' telemetry
    # (RunTelemetry.to_json) and the client check (ClientCheck.to_json + pitfalls); None = not recorded.
    energy: dict | None = field(default=None, hash=False, repr=False)
    telemetry: dict | None = field(default=None, hash=False, repr=False)
    client_check: dict | None = field(default=None, hash=False, repr=False)
    # Issue B2: the prefix cache over the run (prefix_cache.prefix_cache_json) and the goodput
    # against the preset's SLO (goodput.goodput_json); None = not measured (older records).
    prefix_cache: dict | None = field(default=None, hash=False, repr=False)
    goodput: dict | None = field(default=None, hash=False, repr=False)

    @property
    def node(self) -> str | None:
        return self.context.get("node")

    @property
    def model(self) -> str | None:
        return self.setup.get("model")

    def energy_value(self, key: str) -> float | None:
        """One of ENERGY_KEYS' numbers (energy_j, avg_power_w, tokens_per_joule, ...); None when unknown."""
        value = (self.energy or {}).get(key)
        return as_number(value)

    @property
    def energy_j(self) -> float | None:
        return self.energy_value("energy_j")

    @property
    def avg_power_w(self) -> float | None:
        return self.energy_value("avg_power_w")

    @property
    def tokens_per_joule(self) -> float | None:
        return self.energy_value("tokens_per_joule")

    @property
    def throttled_pct(self) -> float | None:
        return self.energy_value("throttled_pct")

    @property
    def client_bound(self) -> bool | None:
        """True: the benchmark client, not the server, set the numbers; None: not judged."""
        value = (self.client_check or {}).get("client_bound")
        return value if isinstance(value, bool) else None

    @property
    def prefix_cache_hit_pct(self) -> float | None:
        """Prompt tokens served from vLLM's prefix cache over the run, in percent."""
        return as_number((self.prefix_cache or {}).get("hit_pct"))

    @property
    def prefix_cache_warning(self) -> str | None:
        """'X % of prompt tokens came from the prefix cache: ...' for a cold run that was not."""
        return warning_of(self.prefix_cache)

    @property
    def goodput_pct(self) -> float | None:
        return as_number((self.goodput or {}).get("goodput_pct"))

    @property
    def good_rps(self) -> float | None:
        return as_number((self.goodput or {}).get("good_rps"))

    @property
    def client(self) -> str:
        """The benchmark client that made the run (issue B2): "guidellm" / "aiperf" as their
        results say; "vllm" for vLLM's own client and every record older than the field."""
        value = self.context.get("client") or (self.result or {}).get("client")
        return value if isinstance(value, str) and value else "vllm"

    @property
    def client_version(self) -> str | None:
        value = self.context.get("client_version") or (self.result or {}).get("client_version")
        return value if isinstance(value, str) and value else None

    def headline(self) -> dict:
        """The flat keys a run's --json and stored record carry (issue P, B2)."""
        return {
            "client": self.client,
            "client_version": self.client_version,
            "energy_j": self.energy_j,
            "avg_power_w": self.avg_power_w,
            "tokens_per_joule": self.tokens_per_joule,
            "throttled_pct": self.throttled_pct,
            "client_bound": self.client_bound,
            "prefix_cache_hit_pct": self.prefix_cache_hit_pct,
            "prefix_cache_warning": self.prefix_cache_warning,
            "goodput_pct": self.goodput_pct,
            "good_rps": self.good_rps,
        }


@overload
def jsonable(value: Mapping) -> dict: ...


@overload
def jsonable(value: object) -> object: ...


def jsonable(value: object) -> object:
    """Plain strict-JSON data: non-finite floats -> "inf"/"-inf"/"nan", tuples ->
    lists, mapping keys -> str, anything else unknown -> its str()."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, BenchResult):
        return jsonable(dict(value.raw))
    if isinstance(value, Mapping):
        return {(k if isinstance(k, str) else str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v) for v in items]
    return str(value)


def as_number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        return float(value) if abs(value) < 1 << 1000 else None  # float() of a longer int overflows
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _canonical(value: object) -> str:
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def fingerprint_of(result: Mapping | None, metrics: Mapping, setup: Mapping) -> str:
    """sha256 of what identifies a run's content (not its label, node or import time).

    With vLLM's JSON object: the object (the legacy `request_goodput:` key read as
    `request_goodput`), so the same result saved by the console and imported from
    its file is one run. Without one (a text block): the metrics and the setup.
    """
    if result is not None:
        data = {("request_goodput" if k == "request_goodput:" else k): v for k, v in result.items()}
        if "request_goodput:" in result and "request_goodput" in result:
            data["request_goodput"] = result["request_goodput"]
        content = {"result": data}
    else:
        content = {"metrics": dict(metrics), "setup": {k: v for k, v in setup.items() if v is not None}}
    return hashlib.sha256(_canonical(content).encode("utf-8")).hexdigest()


def new_run_id(created: float, node: str | None, fingerprint: str) -> str:
    """`20261121-083012-<node or import>-<6 hex>` (local time of `created`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(created))
    part = _ID_PART_RE.sub("-", node or "import").strip("-.") or "import"
    hex6 = (fingerprint or hashlib.sha256(repr(created).encode()).hexdigest())[:6]
    return f"{stamp}-{part[:40]}-{hex6}"


def run_to_dict(run: StoredRun) -> dict:
    """Strict JSON data (non-finite numbers as "inf"/"nan" strings)."""
    return {
        "format": FORMAT,
        "id": run.id,
        "created": run.created,
        "created_iso": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(run.created)),
        "origin": run.origin,
        "source": run.source,
        "label": run.label,
        "context": jsonable(run.context),
        "setup": jsonable(run.setup),
        "metrics": jsonable(run.metrics),
        "result": jsonable(run.result) if run.result is not None else None,
        "live": jsonable(run.live) if run.live is not None else None,
        "fingerprint": run.fingerprint,
        # Derived from the three objects below (read back from them, never from these keys).
        **jsonable(run.headline()),
        "energy": jsonable(run.energy) if run.energy is not None else None,
        "client_check": jsonable(run.client_check) if run.client_check is not None else None,
        "telemetry": jsonable(run.telemetry) if run.telemetry is not None else None,
        "prefix_cache": jsonable(run.prefix_cache) if run.prefix_cache is not None else None,
        "goodput": jsonable(run.goodput) if run.goodput is not None else None,
    }


def _kind(value: object) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, (list, tuple)) else "an object"


def run_time(value: object, key: str = "created") -> float:
    """A stored run's time field as epoch seconds; ValueError naming the field when it is not
    a number or not a time any clock shows (MIN_TIME..MAX_TIME, finite)."""
    number = as_number(value)
    if number is None:
        raise ValueError(f"stored run '{key}' is {_kind(value)}, not a number")
    if not (math.isfinite(number) and MIN_TIME <= number <= MAX_TIME):
        shown = "NaN" if math.isnan(number) else f"{number:g}"
        raise ValueError(f"stored run '{key}' {shown} is not a time (epoch seconds from 1970 to 9999)")
    return number


def _optional_text(data: Mapping, key: str) -> str | None:
    """A field that is text or null (label, source); ValueError naming it for anything else,
    so a label that is a JSON object is one line at import, never a TypeError when shown."""
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"stored run '{key}' is {_kind(value)}, not a string")
    return value


def run_from_dict(data: Mapping) -> StoredRun:
    """The inverse of run_to_dict. Raises ValueError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored run is a JSON object, not {type(data).__name__}")  # noqa: TRY004
    fmt = data.get("format", FORMAT)
    if not isinstance(fmt, str) or not fmt.startswith("rocm-console-result/"):
        raise ValueError(f"not a rocm-console result (format {fmt!r})")
    for key in ("id", "created", "origin"):
        if key not in data:
            raise ValueError(f"stored run without '{key}'")
    if not isinstance(data["id"], str) or not data["id"]:
        raise ValueError("stored run 'id' is not a string")
    created = run_time(data["created"])
    for key in ("origin", "fingerprint"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ValueError(f"stored run '{key}' is {_kind(data[key])}, not a string")
    label, source = _optional_text(data, "label"), _optional_text(data, "source")
    for key in ("context", "setup", "metrics"):
        if data.get(key) is not None and not isinstance(data[key], Mapping):
            raise ValueError(f"stored run '{key}' is not an object")
    metrics = {}
    for key, value in (data.get("metrics") or {}).items():
        number = as_number(value)
        if number is not None:
            metrics[str(key)] = number
    setup = dict(data.get("setup") or {})
    for key in SETUP_NUMERIC_KEYS:
        if isinstance(setup.get(key), str):
            number = as_number(setup[key])
            if number is not None:
                setup[key] = number
    context = dict.fromkeys(CONTEXT_KEYS)
    context.update(data.get("context") or {})
    result = data.get("result")
    live = data.get("live")
    extras = {}
    for key in ("energy", "telemetry", "client_check", "prefix_cache", "goodput"):
        value = data.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise ValueError(f"stored run '{key}' is not an object")
        extras[key] = dict(value) if value is not None else None
    return StoredRun(
        id=data["id"],
        created=created,
        origin=str(data["origin"]),
        source=source,
        label=label,
        context=context,
        setup=setup,
        metrics=metrics,
        result=dict(result) if isinstance(result, Mapping) else None,
        live=dict(live) if isinstance(live, Mapping) else None,
        fingerprint=str(data.get("fingerprint") or ""),
        **extras,
    )
