"""TOML profiles -> Profile, with strict validation.

Every problem is a ProfileError whose one-line text names the file, the line
(best effort), the table and the key, so a typo never turns into a silent default.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from console.core import bounds
from console.core.errors import ProfileError
from console.core.model import BenchPreset, ModelsConfig, NodeSpec, Profile, PrometheusSpec, ServePreset, SimulateSpec
from console.core.partition_rules import VALID_NPS
from console.core.profile_paths import SAMPLE_PROFILES, SHIPPED_DATA, discover_profile_paths, unique_paths
from console.core.profile_values import (
    ENV_NAME_RE,
    SECRET_MSG,
    Check,
    arg_list,
    as_number,
    as_text,
    bind_address,
    boolean,
    choice,
    concurrency,
    env,
    env_by_vllm,
    expected_error,
    flag,
    int_range,
    int_up_to,
    integer,
    looks_secret,
    metric_percentiles,
    percentile_metrics,
    port,
    positive,
    positive_up_to,
    range_ratio,
    request_rate,
    string_list,
    token,
    token_matching,
    variable_name,
)
from console.core.toml_source import Invalid, TomlContext, describe, fmt_path, parse_toml, read_text

if TYPE_CHECKING:
    from console.core.model import AlertmanagerSpec

__all__ = [
    "COMPUTE_PARTITIONS",
    "GPU_MODELS",
    "MEMORY_PARTITIONS",
    "PROFILES_DIR",
    "SAMPLE_PROFILES",
    "SHIPPED_DATA",
    "demo_profile_path",
    "discover_profile_paths",
    "load_profile",
]

GPU_MODELS = ("MI300X", "MI325X", "MI355X", "H100", "H200")  # the last two: simulated NVML (console/sim/pynvml.py)
COMPUTE_PARTITIONS = ("SPX", "DPX", "QPX", "CPX")
MEMORY_PARTITIONS = ("NPS1", "NPS2", "NPS4")

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+\Z")
# Names of nodes and presets end up in paths (state dirs, run ids), argv and file names:
# a letter, digit or _ first (never `..`, `.hidden` or `-flag`), at most 64 characters.
_TABLE_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")
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


def load_profile(paths: Sequence[str | Path]) -> Profile:
    """Read, validate and merge profile files in order. Raises ProfileError."""
    merged = _Merged()
    for path in unique_paths([Path(p) for p in paths]):
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


# ---------------------------------------------------------------- tables


def _check_fields(data: Mapping[str, object], fields: Mapping[str, Check]) -> dict:
    """Check each key of a table in file order; unknown keys are errors."""
    out = {}
    for key, value in data.items():
        check = fields.get(key)
        if check is None:
            raise Invalid(SECRET_MSG if looks_secret(key) else _unknown(key, fields), (key,))
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
        raise expected_error("a table", value)
    return value


def _gpu_indices(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise expected_error("an array of GPU indices", value)
    check = int_range(0, 1023)
    return tuple(check(v) for v in value)


_SIMULATE_FIELDS: dict[str, Check] = {
    "gpu": choice(*GPU_MODELS),
    "count": int_range(1, 16),
    "compute_partition": choice(*COMPUTE_PARTITIONS),
    "memory_partition": choice(*MEMORY_PARTITIONS),
    "seed": integer,
    # logical GPUs that carry a simulated workload from the start (the demo's load)
    "busy": _gpu_indices,
    "mig": _gpu_indices,  # NVIDIA only: physical GPUs in MIG mode
    "root": boolean,  # the simulated user is root whoever runs it (the demo)
}


def _simulate(value: object) -> SimulateSpec | None:
    """`simulate = true` means the defaults; a table sets them; false = off."""
    if isinstance(value, bool):
        return SimulateSpec() if value else None
    if not isinstance(value, dict):
        raise expected_error("true, false or a table", value)
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
    text = as_text(value)
    path = os.path.expanduser(text)
    if not os.path.exists(path):
        raise Invalid(f"no such file: {os.path.abspath(path)}")
    if not os.path.isfile(path):
        raise Invalid(f"not a file: {os.path.abspath(path)}")
    return text


def _jump(value: object) -> str:
    """One ProxyJump hop: a Host alias, host, user@host, host:port or [v6addr]:port."""
    text = token(value)
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


_NODE_FIELDS: dict[str, Check] = {
    "host": token,
    "port": port,
    "user": token,
    "identity_file": _existing_file,  # checked now: a missing key is a bad profile, not a failed login
    "known_hosts": _existing_file,  # strict host keys: without the file every connection is refused
    "jump": _jump,  # ProxyJump: one hop, a Host alias or user@host:port
    "python": as_text,
    "sudo": boolean,
    "allow_kill_foreign": boolean,  # the console may end other users' GPU processes (services/processes.py)
    "state_dir": as_text,
    "transport": choice("ssh", "local"),
    "vllm": as_text,  # may hold spaces, e.g. "/opt/venv/bin/vllm" or "uv run vllm"
    "simulate": _simulate,
    "telemetry": choice("ssh", "prometheus"),  # where the fleet screen's numbers come from
    "prometheus_host": token,  # DME's hostname label, when it is not host
    "hf_endpoint": lambda v: _url(v),  # issue Q: this node's Hugging Face mirror
    "hf_home": as_text,
    "model_dirs": string_list,
}


def _node_names(value: object) -> tuple[str, ...]:
    """Nodes of a multi-node preset, head first: distinct [nodes.NAME] names."""
    names = string_list(value)
    for i, name in enumerate(names, 1):
        if not _TABLE_NAME_RE.match(name):
            raise Invalid(f"item {i}: {name!r} is not a node name")
        if name in names[: i - 1]:
            raise Invalid(f"item {i}: node {name!r} is listed twice")
    return names


_SERVE_FIELDS: dict[str, Check] = {
    "model": as_text,
    "tp": int_up_to(1, bounds.PARALLEL),
    "args": arg_list,
    "env": env,
    "env_by_vllm": env_by_vllm,  # env per vLLM release range (core/serve/rules.py env_for_vllm)
    "runtime": choice("host", "docker"),
    "image": token,
    "port": port,
    "served_model_name": as_text,
    # multi-node on Ray (console/core/multinode.py)
    "pp": int_up_to(1, bounds.PARALLEL),
    "dp": int_up_to(1, bounds.PARALLEL),
    "dp_local": int_up_to(1, bounds.PARALLEL),
    "nodes": _node_names,
    "ray_port": port,
    "head_address": token,
    "ray_args": string_list,
    # the name of the variable holding vLLM's API key, never the key (console/core/serve/argv.py)
    "api_key_env": variable_name,
    "host": bind_address,  # where vLLM listens on the node, e.g. "127.0.0.1": reached through SSH only
}

BENCH_FIELDS: dict[str, Check] = {
    "client": choice("vllm-bench", "benchmark_serving", "guidellm", "aiperf"),  # B2: the last two outside
    "backend": token,
    "endpoint": token,
    "dataset": token,
    "dataset_path": as_text,
    "input_len": int_up_to(1, bounds.TOKENS),  # upper bounds: console/core/bounds.py
    "output_len": int_up_to(1, bounds.TOKENS),
    "range_ratio": range_ratio,
    "num_prompts": int_up_to(1, bounds.NUM_PROMPTS),
    "request_rate": request_rate,
    "max_concurrency": concurrency,
    "burstiness": positive_up_to(bounds.BURSTINESS),
    "seed": int_up_to(0, bounds.SEED),
    "ignore_eos": boolean,
    "percentile_metrics": percentile_metrics,
    "metric_percentiles": metric_percentiles,
    "extra_args": arg_list,
    "cold": boolean,  # issue B2: the workload is meant to be cold (prefix-cache warning)
    "cold_start": choice("reset"),  # vLLM's /reset_prefix_cache before the run, else a cache_salt or a fresh seed
    "slo_ttft_ms": positive,
    "slo_tpot_ms": positive,
    "slo_itl_ms": positive,
    "slo_e2e_ms": positive,
    "trace": as_text,  # issue B2 trace replay: a file under profiles/traces/ or a path
    "trace_max_input": int_up_to(1, bounds.TOKENS),
    "trace_speedup": positive_up_to(1e6),
    "client_path": as_text,  # issue B2: the outside client's executable (default: its name on PATH)
    "turns": int_up_to(1, 100),  # issue B2: multi-turn conversations (guidellm / aiperf)
}

_SECTIONS = ("nodes", "serve", "bench", "keys", "prometheus", "health", "alert", "models", "alertmanager", "store")


def _packing_sum(value: object) -> float:
    number = as_number(value)
    if not 0 < number <= 1:
        raise Invalid(f"expected a fraction above 0 and at most 1, got {value!r}")
    return number


_MODELS_FIELDS: dict[str, Check] = {  # [models] (issue Q, docs/models.md)
    "hf_endpoint": lambda v: _url(v),
    "hf_home": as_text,
    "model_dirs": string_list,
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
        owner = _OWNED_SERVE_FLAGS.get(flag(arg))
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
            out[binding] = as_text(key)
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
            if looks_secret(section):
                raise ctx.error(None, (section,), SECRET_MSG)
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
    text = token(value)
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"expected an http:// or https:// URL, got {describe(text)}")
    if parts.password is not None:
        raise Invalid(f"a password in the URL: {SECRET_MSG} (token_env names the variable)")
    if parts.query or parts.fragment:
        raise Invalid("expected the server's base URL, without ?query or #fragment")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise Invalid(f"bad port in {describe(text)}") from None
    return text.rstrip("/")


def _env_name(value: object) -> str:
    return token_matching(value, ENV_NAME_RE, "the name of an environment variable")


def _label_name(value: object) -> str:
    return token_matching(value, _LABEL_RE, "a Prometheus label name")


def _scrape_interval(value: object) -> float:
    number = positive(value)
    if number > 3600:
        raise Invalid(f"must be at most 3600 seconds, got {value}")
    return number


_PREFIX_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")  # what Prometheus accepts at a metric name's start


def _metric_prefix(value: object) -> str:
    """DME's MetricsFieldPrefix as the site set it; "" says "no prefix" (unset: detected)."""
    if value == "":
        return ""
    return token_matching(value, _PREFIX_RE, 'the start of a Prometheus metric name (e.g. "amd_")')


_PROMETHEUS_FIELDS: dict[str, Check] = {
    "url": _url,
    "token_env": _env_name,
    "ca_file": as_text,
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
