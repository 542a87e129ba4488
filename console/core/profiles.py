"""TOML profiles -> Profile, with strict validation.

Every problem is a ProfileError whose one-line text names the file, the line
(best effort), the table and the key, so a typo never turns into a silent default.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from console.core import bounds
from console.core.errors import ProfileError
from console.core.model import BenchPreset, ModelsConfig, NodeSpec, Profile, PrometheusSpec, ServePreset, SimulateSpec
from console.core.partition_rules import VALID_NPS
from console.core.serve.rules import parse_vllm_range
from console.core.toml_source import Invalid, TomlContext, describe, fmt_path, parse_toml, read_text

if TYPE_CHECKING:
    from console.core.model import AlertmanagerSpec

__all__ = [
    "COMPUTE_PARTITIONS",
    "GPU_MODELS",
    "MEMORY_PARTITIONS",
    "PROFILES_DIR",
    "SAMPLE_PROFILES",
    "demo_profile_path",
    "discover_profile_paths",
    "load_profile",
]

GPU_MODELS = ("MI300X", "MI325X", "MI355X", "H100", "H200")  # the last two: simulated NVML (console/sim/pynvml.py)
COMPUTE_PARTITIONS = ("SPX", "DPX", "QPX", "CPX")
MEMORY_PARTITIONS = ("NPS1", "NPS2", "NPS4")
# Compute modes the driver accepts under each memory mode (reference/amdsmi.md).
# Shipped samples in profiles/: loaded only via --profile / --demo, never found by
# discovery, so running from the repo never dials the example's hosts.
SAMPLE_PROFILES = ("example.toml", "demo.toml", "demo-multinode.toml")
# The other data files shipped in profiles/: read by their own loaders, never as a profile
# (the presets are loaded before every profile anyway).
SHIPPED_DATA = ("presets.toml", "offline_presets.toml", "reference_numbers.toml")

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+\Z")
# Names of nodes and presets end up in paths (state dirs, run ids), argv and file names:
# a letter, digit or _ first (never `..`, `.hidden` or `-flag`), at most 64 characters.
_TABLE_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SECRET_MSG = "secrets do not belong in profiles; export it in the environment"
# Flags that carry secrets on a vllm command line.
_SECRET_FLAGS = ("--hf-token", "--api-key")
# Serve flags the console sets itself from dedicated keys; a second copy in args
# would silently win or clash, so point at the key instead.
_OWNED_SERVE_FLAGS = {
    "-tp": "tp",
    "--tensor-parallel-size": "tp",
    "--port": "port",
    "--served-model-name": "served_model_name",
    "--host": "host",
    # multi-node (console/core/multinode.py)
    "-pp": "pp",
    "--pipeline-parallel-size": "pp",
    "-dp": "dp",
    "--data-parallel-size": "dp",
    "--data-parallel-size-local": "dp_local",
    "--data-parallel-address": "head_address",
}
_PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")


# ---------------------------------------------------------------- public API


def _profiles_dir() -> Path:
    """The shipped data (presets, the demo profile, reference numbers, demo results).

    A checkout or an editable install reads the top-level profiles/ folder; an installed
    wheel (pip, pipx) carries the same files as data files, under
    <prefix>/share/rocm-console/profiles (pyproject.toml, [tool.setuptools.data-files])."""
    source = Path(__file__).resolve().parents[2] / "profiles"
    if (source / "presets.toml").is_file():
        return source
    import site
    import sys

    for base in (sys.prefix, sys.exec_prefix, site.getuserbase()):
        installed = Path(base) / "share" / "rocm-console" / "profiles"
        if (installed / "presets.toml").is_file():
            return installed
    return source


PROFILES_DIR = _profiles_dir()


def demo_profile_path() -> Path:
    """The shipped profiles/demo.toml (four simulated local nodes: three Instinct, one H100)."""
    return PROFILES_DIR / "demo.toml"


def discover_profile_paths(explicit: Sequence[str], cwd: Path, config_dir: Path | None) -> list[Path]:
    """Which profile files to load, in order.

    Explicit paths win outright. Otherwise cwd/profiles/*.toml (minus the shipped
    samples), then config_dir/*.toml; each group sorted by name.
    """
    if explicit:
        found: list[Path] = []
        for raw in explicit:
            path = Path(raw).expanduser()
            if not path.is_absolute():
                path = cwd / path
            if not path.exists():
                raise ProfileError(str(raw), None, None, None, "no such profile file")
            found.append(path)
        return _unique(found)
    shipped = (*SAMPLE_PROFILES, *SHIPPED_DATA)
    found = [p for p in _toml_files(cwd / "profiles") if p.name not in shipped]
    if config_dir is not None:
        found += _toml_files(config_dir)
    return _unique(found)


def load_profile(paths: Sequence[str | Path]) -> Profile:
    """Read, validate and merge profile files in order. Raises ProfileError."""
    merged = _Merged()
    for path in _unique([Path(p) for p in paths]):
        file = str(path)
        ctx = TomlContext(file, read_text(path, file))
        _merge_file(merged, ctx, parse_toml(ctx))
    return Profile(
        # every start on a node (CLI, TUI, groups) applies the profile's packing limit
        nodes=tuple(replace(n, max_packing_sum=merged.models.max_packing_sum) for n, _ in merged.nodes.values())
        if merged.models is not None
        else tuple(n for n, _ in merged.nodes.values()),
        serve_presets=tuple(s for s, _ in merged.serve.values()),
        bench_presets=tuple(b for b, _ in merged.bench.values()),
        keys=tuple(merged.keys.items()),
        files=tuple(merged.files),
        prometheus=_check_prometheus_nodes(merged),
        models=merged.models,
        alertmanager=merged.alertmanager,
        store_url=merged.store[0] if merged.store else None,
    )


# ---------------------------------------------------------------- files


def _toml_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.toml") if p.is_file())


def _unique(paths: list[Path]) -> list[Path]:
    """Drop repeats of the same file (e.g. config_dir == cwd/profiles)."""
    seen: set[Path] = set()
    out = []
    for path in paths:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            out.append(path)
    return out


# ---------------------------------------------------------------- value checks

_Check = Callable[[object], object]


def _expected(what: str, value: object) -> Invalid:
    return Invalid(f"expected {what}, got {describe(value)}")


def _is_int(value: object) -> bool:
    return type(value) is int  # bool is an int subclass; TOML true is not 1


def _is_number(value: object) -> bool:
    return _is_int(value) or type(value) is float


def _text(value: object) -> str:
    """A non-empty, single-line string (it may end up on a command line)."""
    if not isinstance(value, str):
        raise _expected("a string", value)
    if not value.strip():
        raise Invalid("must not be empty")
    if any(c in value for c in "\n\r\0"):
        raise Invalid("must be a single line")
    return value


def _token(value: object) -> str:
    """A non-empty string without spaces (host names, users, images)."""
    text = _text(value)
    if any(c.isspace() for c in text):
        raise Invalid(f"must not contain spaces, got {describe(text)}")
    return text


def _token_matching(value: object, pattern: re.Pattern[str], expected: str) -> str:
    """A token the pattern matches in full; `expected` names what it must be."""
    text = _token(value)
    if not pattern.match(text):
        raise Invalid(f"expected {expected}, got {describe(text)}")
    return text


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _expected("true or false", value)
    return value


def _integer(value: object) -> int:
    if not _is_int(value):
        raise _expected("an integer", value)
    return value  # type: ignore[return-value]


def _int_range(low: int, high: int | None = None) -> Callable[[object], int]:
    def check(value: object) -> int:
        number = _integer(value)
        if number < low or (high is not None and number > high):
            bounds = f"{low}..{high}" if high is not None else f">= {low}"
            raise Invalid(f"must be {bounds}, got {number}")
        return number

    return check


_port = _int_range(1, 65535)


def _int_up_to(low: int, high: int) -> Callable[[object], int]:
    """An integer >= low with a documented upper bound (console/core/bounds.py), each said apart."""
    at_least = _int_range(low)

    def check(value: object) -> int:
        number = at_least(value)
        if number > high:
            raise Invalid(f"must be at most {high}, got {number}")
        return number

    return check


def _number(value: object) -> float:
    if not _is_number(value):
        raise _expected("a number", value)
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise Invalid(f"must be a finite number, got {value}")
    return number


def _positive(value: object) -> float:
    number = _number(value)
    if number <= 0:
        raise Invalid(f"must be > 0, got {value}")
    return number


def _range_ratio(value: object) -> float:
    number = _number(value)
    if not 0 <= number < 1:  # vLLM's random dataset asserts 0 <= ratio < 1
        raise Invalid(f"must be >= 0 and < 1, got {value}")
    return number


def _choice(*choices: str) -> _Check:
    """One of choices, matched without regard to case, stored as spelled here."""
    by_fold = {c.casefold(): c for c in choices}

    def check(value: object) -> str:
        if not isinstance(value, str):
            raise _expected("a string", value)
        if value.casefold() not in by_fold:
            raise Invalid(f"must be one of: {', '.join(choices)} (got {describe(value)})")
        return by_fold[value.casefold()]

    return check


def _string_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _expected("an array of strings", value)
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise Invalid(f"item {i}: expected a string, got {describe(item)}")
    return tuple(value)


def _args(value: object) -> tuple[str, ...]:
    args = _string_list(value)
    for arg in args:
        if _flag(arg) in _SECRET_FLAGS:
            raise Invalid(f"{arg.split('=', 1)[0]}: {_SECRET_MSG}")
    return args


def _flag(arg: str) -> str:
    """'--tensor_parallel_size=8' -> '--tensor-parallel-size' (vLLM accepts both)."""
    name = arg.split("=", 1)[0]
    return name[:2] + name[2:].replace("_", "-") if name.startswith("--") else name


def _looks_secret(name: str) -> bool:
    """HF_TOKEN, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, OPENAI_API_KEY...

    Word-wise so TOKENIZERS_PARALLELISM or MAX_TOKENS stay allowed.
    """
    words = re.split(r"[_\-.]+", name.upper())
    if any(w.endswith("TOKEN") or "SECRET" in w or "PASSW" in w for w in words):
        return True
    return name.upper().replace("-", "_").endswith(("API_KEY", "APIKEY"))


def _env(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _expected('a table of NAME = "value"', value)
    pairs = []
    for name, item in value.items():
        if _looks_secret(name):
            raise Invalid(_SECRET_MSG, (name,))
        if not _ENV_NAME_RE.match(name):
            raise Invalid("not a valid environment variable name", (name,))
        if not isinstance(item, str):
            hint = f'; write "{item}"' if _is_number(item) else ""
            raise Invalid(f"expected a string, got {describe(item)}{hint}", (name,))
        pairs.append((name, item))
    return tuple(pairs)


def _env_by_vllm(value: object) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """{ "<0.12" = { VLLM_USE_TRITON_FLASH_ATTN = "0" } }: env only the vLLM releases in a range know."""
    if not isinstance(value, dict):
        raise _expected('a table of "<0.12" = { NAME = "value" }', value)
    out = []
    for spec, table in value.items():
        try:
            parse_vllm_range(spec)
        except ValueError as exc:
            raise Invalid(str(exc), (spec,)) from None
        try:
            pairs = _env(table)
        except Invalid as exc:
            raise Invalid(exc.message, (spec, *exc.key)) from None
        out.append((spec, pairs))
    return tuple(out)


_BIND_ADDRESSES = ("127.0.0.1", "0.0.0.0")


def _bind_address(value: object) -> str:
    """Where vLLM listens on the node: 127.0.0.1 (the node only; the console and its benchmark
    clients reach it there, through SSH) or 0.0.0.0 (every address). Another address would leave
    the console's own health checks and clients, which dial 127.0.0.1 on the node, outside."""
    text = _token(value)
    if text not in _BIND_ADDRESSES:
        raise Invalid(
            f"expected 127.0.0.1 (the node only, reached through SSH) or 0.0.0.0 (every address), got {describe(text)}"
        )
    return text


def _variable_name(value: object) -> str:
    """The name of an environment variable (that holds a secret), never the secret itself."""
    return _token_matching(value, _ENV_NAME_RE, "the name of an environment variable (e.g. VLLM_API_KEY)")


def _request_rate(value: object) -> float | None:
    """Requests per second; "inf" (or TOML inf) = all at once, stored as None."""
    if isinstance(value, str) and value.strip().casefold() == "inf":
        return None
    if type(value) is float and math.isinf(value) and value > 0:
        return None
    if isinstance(value, str):
        raise Invalid(f'expected a number or "inf", got {describe(value)}')
    return _positive_up_to(bounds.REQUEST_RATE)(value)


def _positive_up_to(high: float) -> Callable[[object], float]:
    def check(value: object) -> float:
        number = _positive(value)
        if number > high:
            raise Invalid(f"must be at most {high:g}, got {value}")
        return number

    return check


def _concurrency(value: object) -> tuple[int, ...]:
    """One limit, or a list of them for a sweep."""
    check = _int_up_to(1, bounds.CONCURRENCY)
    if not isinstance(value, list):
        if not _is_int(value):
            raise _expected("an integer or an array of integers", value)
        return (check(value),)
    if not value:
        raise Invalid("must list at least one value")
    out = []
    for i, item in enumerate(value, 1):
        try:
            out.append(check(item))
        except Invalid as exc:
            raise Invalid(f"item {i}: {exc.message}") from None
    return tuple(out)


def _percentile_metrics(value: object) -> str:
    text = _token(value)
    bad = [m for m in text.split(",") if m not in _PERCENTILE_METRICS]
    if bad:
        raise Invalid(f"unknown metric {bad[0]!r} (comma-separated, from: {', '.join(_PERCENTILE_METRICS)})")
    return text


def _metric_percentiles(value: object) -> str:
    text = _token(value)
    for part in text.split(","):
        try:
            number = float(part)
        except ValueError:
            number = math.nan
        if not 0 < number <= 100:
            raise Invalid(f"expected comma-separated percentiles in (0, 100], got {part!r}")
    return text


# ---------------------------------------------------------------- tables


def _check_fields(data: Mapping[str, object], fields: Mapping[str, _Check]) -> dict:
    """Check each key of a table in file order; unknown keys are errors."""
    out = {}
    for key, value in data.items():
        check = fields.get(key)
        if check is None:
            raise Invalid(_SECRET_MSG if _looks_secret(key) else _unknown(key, fields), (key,))
        try:
            out[key] = check(value)
        except Invalid as exc:
            raise Invalid(exc.message, (key, *exc.key)) from None
    return out


def _unknown(key: str, known: Sequence[str] | Mapping[str, object], what: str = "key") -> str:
    names = list(known)
    message = f"unknown {what} (expected one of: {', '.join(names)})"
    close = difflib.get_close_matches(key, names, n=1)
    return f"{message}; did you mean '{close[0]}'?" if close else message


def _table(value: object) -> dict:
    if not isinstance(value, dict):
        raise _expected("a table", value)
    return value


def _gpu_indices(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise _expected("an array of GPU indices", value)
    check = _int_range(0, 1023)
    return tuple(check(v) for v in value)


_SIMULATE_FIELDS: dict[str, _Check] = {
    "gpu": _choice(*GPU_MODELS),
    "count": _int_range(1, 16),
    "compute_partition": _choice(*COMPUTE_PARTITIONS),
    "memory_partition": _choice(*MEMORY_PARTITIONS),
    "seed": _integer,
    # logical GPUs that carry a simulated workload from the start (the demo's load)
    "busy": _gpu_indices,
    "mig": _gpu_indices,  # NVIDIA only: physical GPUs in MIG mode
    "root": _boolean,  # the simulated user is root whoever runs it (the demo)
}


def _simulate(value: object) -> SimulateSpec | None:
    """`simulate = true` means the defaults; a table sets them; false = off."""
    if isinstance(value, bool):
        return SimulateSpec() if value else None
    if not isinstance(value, dict):
        raise _expected("true, false or a table", value)
    spec = SimulateSpec(**_check_fields(value, _SIMULATE_FIELDS))
    if spec.memory_partition not in VALID_NPS[spec.compute_partition]:
        allowed = "/".join(VALID_NPS[spec.compute_partition])
        raise Invalid(
            f"{spec.compute_partition} needs {allowed}, not {spec.memory_partition}",
            ("memory_partition",),
        )
    return spec


def _existing_file(value: object) -> str:
    """A file on this machine (~ expanded, relative to the working folder, as SSH reads it)."""
    text = _text(value)
    path = os.path.expanduser(text)
    if not os.path.exists(path):
        raise Invalid(f"no such file: {os.path.abspath(path)}")
    if not os.path.isfile(path):
        raise Invalid(f"not a file: {os.path.abspath(path)}")
    return text


def _jump(value: object) -> str:
    """One ProxyJump hop: a Host alias, host, user@host, host:port or [v6addr]:port."""
    text = _token(value)
    if "," in text:
        raise Invalid(
            f"one jump host only, got {describe(text)}: for a chain, put ProxyJump in ~/.ssh/config "
            "and name its Host alias here"
        )
    rest = text.rsplit("@", 1)[-1] if "@" in text else text
    if "@" in text and not text.rsplit("@", 1)[0]:
        raise Invalid(f"empty user in {describe(text)}")
    port_text: str | None = None
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep or (tail and not tail.startswith(":")):
            raise Invalid(f"expected [address]:port, got {describe(text)}")
        port_text = tail[1:] if tail else None
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    elif ":" in rest:
        raise Invalid(f"an IPv6 address goes in brackets ([::1]:22), got {describe(text)}")
    else:
        host = rest
    if not host:
        raise Invalid(f"no host in {describe(text)}")
    if port_text is not None and (not port_text.isdigit() or not 1 <= int(port_text) <= 65535):
        raise Invalid(f"port {port_text!r} in {describe(text)}: expected 1..65535")
    return text


_NODE_FIELDS: dict[str, _Check] = {
    "host": _token,
    "port": _port,
    "user": _token,
    "identity_file": _existing_file,  # checked now: a missing key is a bad profile, not a failed login
    "known_hosts": _existing_file,  # strict host keys: without the file every connection is refused
    "jump": _jump,  # ProxyJump: one hop, a Host alias or user@host:port
    "python": _text,
    "sudo": _boolean,
    "allow_kill_foreign": _boolean,  # the console may end other users' GPU processes (services/processes.py)
    "state_dir": _text,
    "transport": _choice("ssh", "local"),
    "vllm": _text,  # may hold spaces, e.g. "/opt/venv/bin/vllm" or "uv run vllm"
    "simulate": _simulate,
    "telemetry": _choice("ssh", "prometheus"),  # where the fleet screen's numbers come from
    "prometheus_host": _token,  # DME's hostname label, when it is not host
    "hf_endpoint": lambda v: _url(v),  # issue Q: this node's Hugging Face mirror
    "hf_home": _text,
    "model_dirs": _string_list,
}


def _node_names(value: object) -> tuple[str, ...]:
    """Nodes of a multi-node preset, head first: distinct [nodes.NAME] names."""
    names = _string_list(value)
    for i, name in enumerate(names, 1):
        if not _TABLE_NAME_RE.match(name):
            raise Invalid(f"item {i}: {name!r} is not a node name")
        if name in names[: i - 1]:
            raise Invalid(f"item {i}: node {name!r} is listed twice")
    return names


_SERVE_FIELDS: dict[str, _Check] = {
    "model": _text,
    "tp": _int_up_to(1, bounds.PARALLEL),
    "args": _args,
    "env": _env,
    "env_by_vllm": _env_by_vllm,  # env per vLLM release range (core/serve/rules.py env_for_vllm)
    "runtime": _choice("host", "docker"),
    "image": _token,
    "port": _port,
    "served_model_name": _text,
    # multi-node on Ray (console/core/multinode.py)
    "pp": _int_up_to(1, bounds.PARALLEL),
    "dp": _int_up_to(1, bounds.PARALLEL),
    "dp_local": _int_up_to(1, bounds.PARALLEL),
    "nodes": _node_names,
    "ray_port": _port,
    "head_address": _token,
    "ray_args": _string_list,
    # the name of the variable holding vLLM's API key, never the key (console/core/serve/argv.py)
    "api_key_env": _variable_name,
    "host": _bind_address,  # where vLLM listens on the node, e.g. "127.0.0.1": reached through SSH only
}

BENCH_FIELDS: dict[str, _Check] = {
    "client": _choice("vllm-bench", "benchmark_serving"),
    "backend": _token,
    "endpoint": _token,
    "dataset": _token,
    "dataset_path": _text,
    "input_len": _int_up_to(1, bounds.TOKENS),  # upper bounds: console/core/bounds.py
    "output_len": _int_up_to(1, bounds.TOKENS),
    "range_ratio": _range_ratio,
    "num_prompts": _int_up_to(1, bounds.NUM_PROMPTS),
    "request_rate": _request_rate,
    "max_concurrency": _concurrency,
    "burstiness": _positive_up_to(bounds.BURSTINESS),
    "seed": _int_up_to(0, bounds.SEED),
    "ignore_eos": _boolean,
    "percentile_metrics": _percentile_metrics,
    "metric_percentiles": _metric_percentiles,
    "extra_args": _args,
    "cold": _boolean,  # issue B2: the workload is meant to be cold (prefix-cache warning)
    "cold_start": _choice("reset"),  # vLLM's /reset_prefix_cache before the run, else a fresh seed
    "slo_ttft_ms": _positive,
    "slo_tpot_ms": _positive,
    "slo_itl_ms": _positive,
    "slo_e2e_ms": _positive,
    "trace": _text,  # issue B2 trace replay: a file under profiles/traces/ or a path
    "trace_max_input": _int_up_to(1, bounds.TOKENS),
    "trace_speedup": _positive_up_to(1e6),
}

_SECTIONS = ("nodes", "serve", "bench", "keys", "prometheus", "health", "alert", "models", "alertmanager", "store")


def _packing_sum(value: object) -> float:
    number = _number(value)
    if not 0 < number <= 1:
        raise Invalid(f"expected a fraction above 0 and at most 1, got {value!r}")
    return number


_MODELS_FIELDS: dict[str, _Check] = {  # [models] (issue Q, docs/models.md)
    "hf_endpoint": lambda v: _url(v),
    "hf_home": _text,
    "model_dirs": _string_list,
    "max_packing_sum": _packing_sum,
}


def _models_dict(config: ModelsConfig | None) -> dict:
    if config is None:
        return {}
    return {k: getattr(config, k) for k in _MODELS_FIELDS}


def _node(name: str, data: dict, file: str) -> NodeSpec:
    values = _check_fields(data, _NODE_FIELDS)
    if "host" not in values:
        if values.get("transport") != "local":
            raise Invalid(
                'missing required key (the SSH host; only transport = "local" may omit it)',
                ("host",),
            )
        values["host"] = "localhost"
    return NodeSpec(name=name, source=file, **values)


def _serve(name: str, data: dict, file: str) -> ServePreset:
    values = _check_fields(data, _SERVE_FIELDS)
    if "model" not in values:
        raise Invalid("missing required key (the model to serve)", ("model",))
    for arg in values.get("args", ()):
        owner = _OWNED_SERVE_FLAGS.get(_flag(arg))
        if owner:
            raise Invalid(f"remove {arg!r} from args and set {owner} = ... instead", ("args",))
    docker = values.get("runtime") == "docker"
    if docker and "image" not in values:
        raise Invalid('missing required key (runtime = "docker" needs an image)', ("image",))
    if not docker and "image" in values:
        raise Invalid('image is only used with runtime = "docker"', ("image",))
    if "dp_local" in values and values["dp_local"] > values.get("dp", 1):
        raise Invalid(f"dp_local {values['dp_local']} is more than dp {values.get('dp', 1)}", ("dp_local",))
    return ServePreset(name=name, source=file, **values)


def _bench(name: str, data: dict, file: str) -> BenchPreset:
    return BenchPreset(name=name, source=file, **_check_fields(data, BENCH_FIELDS))


def _keys(data: dict) -> dict[str, str]:
    out = {}
    for binding, key in data.items():
        if not _NAME_RE.match(binding):
            raise Invalid("invalid binding id (letters, digits, '_', '.', '-')", (binding,))
        try:
            out[binding] = _text(key)
        except Invalid as exc:
            raise Invalid(exc.message, (binding,)) from None
    return out


# ---------------------------------------------------------------- merging


class _Merged:
    """What the files loaded so far define, with the file each name came from."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[NodeSpec, str]] = {}
        self.serve: dict[str, tuple[ServePreset, str]] = {}
        self.bench: dict[str, tuple[BenchPreset, str]] = {}
        self.keys: dict[str, str] = {}
        self.files: list[str] = []
        self.prometheus: tuple[PrometheusSpec, str] | None = None
        self.models: ModelsConfig | None = None  # [models]: later files override keys
        self.alertmanager: AlertmanagerSpec | None = None  # [alertmanager] (docs/watch.md)
        self.store: tuple[str, str] | None = None  # [store] url and its file (docs/store.md)
        # (file, line) of each node's effective telemetry = "prometheus", for the check at the end
        self.prometheus_users: dict[str, tuple[str, str | None, int | None]] = {}


_BUILDERS = {
    "nodes": ("node", _node, _NODE_FIELDS),
    "serve": ("serve preset", _serve, _SERVE_FIELDS),
    "bench": ("bench preset", _bench, BENCH_FIELDS),
}


def _merge_file(merged: _Merged, ctx: TomlContext, data: dict) -> None:
    file_telemetry = _file_telemetry(ctx, data)
    for section, value in data.items():
        if section == "telemetry":
            continue  # read above: it applies to this file's nodes wherever it stands
        if section in ("health", "alert"):  # imported only when a file has them (start-up time)
            from console.core.health_profile import check_section

            check_section(ctx.file, ctx.text, section, value)
            continue
        if section not in _SECTIONS:
            if _looks_secret(section):
                raise ctx.error(None, (section,), _SECRET_MSG)
            raise ctx.error((section,), (), _unknown(section, _SECTIONS, "table"))
        try:
            body = _table(value)
        except Invalid as exc:
            raise ctx.error((section,), (), exc.message) from None
        if section == "keys":
            try:
                merged.keys.update(_keys(body))  # later files override bindings
            except Invalid as exc:
                raise ctx.error(("keys",), exc.key, exc.message) from None
            continue
        if section == "prometheus":
            _merge_prometheus(merged, ctx, body)
            continue
        if section == "alertmanager":
            from console.core.alertmanager import alertmanager_table

            merged.alertmanager = alertmanager_table(ctx, body, merged.alertmanager)
            continue
        if section == "store":
            from console.core.store.profile_table import store_url

            merged.store = store_url(ctx, body, merged.store)
            continue
        if section == "models":
            try:
                merged.models = ModelsConfig(**{**_models_dict(merged.models), **_check_fields(body, _MODELS_FIELDS)})
            except Invalid as exc:
                raise ctx.error(("models",), exc.key, exc.message) from None
            continue
        _merge_named(merged, ctx, section, body, file_telemetry)
    merged.files.append(ctx.file)


def _merge_named(
    merged: _Merged, ctx: TomlContext, section: str, body: dict, file_telemetry: str | None = None
) -> None:
    what, build, fields = _BUILDERS[section]
    target: dict = getattr(merged, section)
    for name, value in body.items():
        table = (section, name)
        if not _TABLE_NAME_RE.match(name):
            raise ctx.error(
                table,
                (),
                f"invalid {what} name (letters, digits, '_', '.', '-'; a letter, digit or _ first; at most 64)",
            )
        try:
            _check_dotted_name(section, name, value, fields)
            item = build(name, _table(value), ctx.file)
        except Invalid as exc:
            raise ctx.error(table, exc.key, exc.message) from None
        if name in target:
            earlier = target[name][1]
            raise ctx.error(table, (), f"{what} '{name}' is also defined in {earlier}")
        if isinstance(item, NodeSpec):
            item = _apply_file_telemetry(merged, ctx, item, value, file_telemetry)
        target[name] = (item, ctx.file)


def _check_dotted_name(section: str, name: str, value: object, fields: Mapping) -> None:
    """[serve.llama-3.1-8b] is the table "llama-3" holding "1-8b": say so plainly."""
    if not isinstance(value, dict):
        return
    for key, inner in value.items():
        if key in fields or not isinstance(inner, dict):
            continue
        parts = [name, key]
        while len(inner) == 1 and not any(k in fields for k in inner):
            ((sub, nested),) = inner.items()
            if not isinstance(nested, dict):
                break
            parts.append(sub)
            inner = nested
        if not any(k in fields for k in inner):
            continue  # a plain unknown key (e.g. a misspelt env table), said elsewhere
        full = ".".join(parts)
        raise Invalid(
            f"unknown key; a name with dots must be quoted: [{section}.{json.dumps(full)}]",
            (key,),
        )


# ---------------------------------------------------------------- prometheus telemetry

_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")  # Prometheus label names


def _url(value: object) -> str:
    text = _token(value)
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"expected an http:// or https:// URL, got {describe(text)}")
    if parts.password is not None:
        raise Invalid(f"a password in the URL: {_SECRET_MSG} (token_env names the variable)")
    if parts.query or parts.fragment:
        raise Invalid("expected the server's base URL, without ?query or #fragment")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise Invalid(f"bad port in {describe(text)}") from None
    return text.rstrip("/")


def _env_name(value: object) -> str:
    return _token_matching(value, _ENV_NAME_RE, "the name of an environment variable")


def _label_name(value: object) -> str:
    return _token_matching(value, _LABEL_RE, "a Prometheus label name")


def _scrape_interval(value: object) -> float:
    number = _positive(value)
    if number > 3600:
        raise Invalid(f"must be at most 3600 seconds, got {value}")
    return number


_PREFIX_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")  # what Prometheus accepts at a metric name's start


def _metric_prefix(value: object) -> str:
    """DME's MetricsFieldPrefix as the site set it; "" says "no prefix" (unset: detected)."""
    if value == "":
        return ""
    return _token_matching(value, _PREFIX_RE, 'the start of a Prometheus metric name (e.g. "amd_")')


_PROMETHEUS_FIELDS: dict[str, _Check] = {
    "url": _url,
    "token_env": _env_name,
    "ca_file": _text,
    "scrape_interval": _scrape_interval,
    "hostname_label": _label_name,
    "metric_prefix": _metric_prefix,
}


def _merge_prometheus(merged: _Merged, ctx: TomlContext, body: dict) -> None:
    try:
        values = _check_fields(body, _PROMETHEUS_FIELDS)
        if "url" not in values:
            raise Invalid("missing required key (the Prometheus server, e.g. http://prometheus:9090)", ("url",))
    except Invalid as exc:
        raise ctx.error(("prometheus",), exc.key, exc.message) from None
    if merged.prometheus is not None:
        raise ctx.error(("prometheus",), (), f"[prometheus] is also defined in {merged.prometheus[1]}")
    merged.prometheus = (PrometheusSpec(source=ctx.file, **values), ctx.file)


def _file_telemetry(ctx: TomlContext, data: dict) -> str | None:
    if "telemetry" not in data:
        return None
    try:
        return str(_NODE_FIELDS["telemetry"](data["telemetry"]))
    except Invalid as exc:
        raise ctx.error(None, ("telemetry",), exc.message) from None


def _apply_file_telemetry(
    merged: _Merged, ctx: TomlContext, node: NodeSpec, data: object, file_telemetry: str | None
) -> NodeSpec:
    """A node's own telemetry key wins over the file's; remember who needs [prometheus]."""
    own = isinstance(data, dict) and "telemetry" in data
    if not own and file_telemetry is not None:
        node = replace(node, telemetry=file_telemetry)
    if node.telemetry == "prometheus":
        where: tuple[str | None, int | None]
        if own:
            where = (fmt_path(("nodes", node.name)), ctx.locator.find(("nodes", node.name, "telemetry")))
        else:
            where = (None, ctx.locator.find(("telemetry",)))
        merged.prometheus_users[node.name] = (ctx.file, *where)
    return node


def _check_prometheus_nodes(merged: _Merged) -> PrometheusSpec | None:
    if merged.prometheus is None and merged.prometheus_users:
        name, (file, table, line) = next(iter(merged.prometheus_users.items()))
        raise ProfileError(
            file,
            table,
            "telemetry",
            line,
            f'node {name!r}: telemetry = "prometheus" needs a [prometheus] table with a url',
        )
    return merged.prometheus[0] if merged.prometheus else None
