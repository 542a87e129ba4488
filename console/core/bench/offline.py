"""Offline benchmarks: `vllm bench latency|throughput` and the older
benchmarks/benchmark_latency.py / benchmark_throughput.py scripts.

Pure: presets (profiles/offline_presets.toml), the argv for the node's vLLM
version, progress and fatal lines from their output, metrics from their
`--output-json` (the source of truth). Facts: tests/fixtures/vllm-0.32-cpu/OFFLINE.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from console.core import bounds
from console.core.bench.output_events import BenchProgress
from console.core.bench.progress import parse_progress, strip_ansi
from console.core.profiles import PROFILES_DIR
from console.core.serve.log import FatalLine, parse_serve_line
from console.core.serve.rules import parse_version

KINDS = ("latency", "throughput")
PRESETS_PATH = PROFILES_DIR / "offline_presets.toml"  # shipped presets
CLIENTS = ("auto", "subcommand", "script")
# The seeds' images keep vLLM's source tree at /app/vllm (seeds 000, 001).
DEFAULT_SCRIPTS_DIR = "/app/vllm/benchmarks"
# benchmarks/benchmark_*.py went with benchmark_serving.py (vllm-formats.md §2: 0.6.3-0.9.x).
SUBCOMMAND_FROM = (0, 10, 0)

# Flags the console sets from the preset's own keys (or itself): never in `args`.
_OWN_FLAGS = {
    "--model": "model",
    "--tensor-parallel-size": "tp",
    "-tp": "tp",
    "--batch-size": "batch_size",
    "--input-len": "input_len",
    "--output-len": "output_len",
    "--num-prompts": "num_prompts",
    "--num-iters": "num_iters",
    "--num-iters-warmup": "num_iters_warmup",
    "--output-json": "(the console's result file)",
    "--random-input-len": "input_len",
    "--random-output-len": "output_len",
}
_INT_KEYS = ("tp", "batch_size", "input_len", "output_len", "num_prompts", "num_iters", "num_iters_warmup")
_PRESET_KEYS = ("model", *_INT_KEYS, "args", "env", "note")
OVERRIDE_KEYS = ("model", *_INT_KEYS)
# What each kind's command takes (build_offline_argv): another key would be dropped without a word.
KIND_KEYS = {
    "latency": ("model", "tp", "batch_size", "input_len", "output_len", "num_iters", "num_iters_warmup"),
    "throughput": ("model", "tp", "input_len", "output_len", "num_prompts"),
}


class OfflineError(ValueError):
    """A preset or an override that cannot make a command: one line."""


@dataclass(frozen=True, slots=True)
class OfflinePreset:
    """One seed command: `kind` is latency or throughput; `args` the engine flags
    copied flag for flag (FP8, --kv-cache-dtype, --max-model-len, ...)."""

    name: str
    kind: str
    model: str
    tp: int = 1
    batch_size: int | None = None  # latency
    input_len: int | None = None
    output_len: int | None = None
    num_prompts: int | None = None  # throughput
    num_iters: int | None = None  # latency
    num_iters_warmup: int | None = None  # latency
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    note: str | None = None
    source: str = ""


# ---------------------------------------------------------------- presets file


def load_offline_presets(path: str | Path) -> tuple[OfflinePreset, ...]:
    """`[latency.NAME]` / `[throughput.NAME]` tables. Strict: an unknown key, a
    wrong type or a flag the console sets is a ProfileError naming file, table, key."""
    from console.core.toml_source import TomlContext, parse_toml, read_text  # shared TOML errors

    path = Path(path)
    ctx = TomlContext(str(path), read_text(path, str(path)))
    data = parse_toml(ctx)
    out: list[OfflinePreset] = []
    for kind, tables in data.items():
        if kind not in KINDS:
            raise ctx.error(None, (kind,), "unknown table (expected [latency.<name>] or [throughput.<name>])")
        if not isinstance(tables, Mapping):
            raise ctx.error(None, (kind,), f"expected tables [{kind}.<name>]")
        for name, body in tables.items():
            table = (kind, name)
            if not isinstance(body, Mapping):
                raise ctx.error(table, (), "expected a table")
            values: dict = {}
            for key, value in body.items():
                if key not in _PRESET_KEYS:
                    raise ctx.error(table, (key,), f"unknown key (known: {', '.join(_PRESET_KEYS)})")
                try:
                    values[key] = _preset_value(key, value)
                except OfflineError as exc:
                    raise ctx.error(table, (key,), str(exc)) from None
            if "model" not in values:
                raise ctx.error(table, ("model",), "missing")
            preset = OfflinePreset(name=name, kind=kind, source=str(path), **values)
            try:
                check_preset(preset)
            except OfflineError as exc:
                raise ctx.error(table, ("args",), str(exc)) from None
            out.append(preset)
    return tuple(out)


def _preset_value(key: str, value: object) -> object:
    if key in _INT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise OfflineError(f"expected a positive integer, got {value!r}")
        if value > bounds.OFFLINE[key]:
            raise OfflineError(f"must be at most {bounds.OFFLINE[key]}, got {value}")
        return value
    if key in ("model", "note"):
        if not isinstance(value, str) or not value.strip():
            raise OfflineError(f"expected a non-empty string, got {value!r}")
        return value
    if key == "args":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise OfflineError("expected a list of strings (one argv item each)")
        return tuple(value)
    if key == "env":
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise OfflineError('expected a table of NAME = "value"')
        return tuple((str(k), str(v)) for k, v in value.items())
    raise AssertionError(key)


def check_preset(preset: OfflinePreset) -> None:
    """Refuse flags in `args` that the console sets from the preset's keys."""
    if preset.kind not in KINDS:
        raise OfflineError(f"kind {preset.kind!r} is not one of {', '.join(KINDS)}")
    for arg in preset.args:
        flag = _flag_name(arg)
        if flag in _OWN_FLAGS:
            raise OfflineError(f"{flag} is set by the console: use the key {_OWN_FLAGS[flag]!r}")


def _flag_name(arg: str) -> str:
    """'--batch_size=8' -> '--batch-size' (vLLM reads both spellings)."""
    name = arg.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def check_extra_args(extra_args: Sequence[str]) -> None:
    """`--arg` items: an engine flag the console sets from a key (a second copy would win,
    argparse keeps the last), an empty or multi-line item: OfflineError naming it."""
    for arg in extra_args:
        if not arg.strip():
            raise OfflineError("--arg '': an empty argument")
        if any(c in arg for c in "\n\r\0"):
            raise OfflineError(f"--arg {arg.splitlines()[0]!r}: must be a single line")
        flag = _flag_name(arg)
        if flag in _OWN_FLAGS:
            key = _OWN_FLAGS[flag]
            hint = "" if key.startswith("(") else f"; use --set {key}=..."
            raise OfflineError(f"--arg {arg}: the console sets {flag}{hint}")


def apply_offline_overrides(preset: OfflinePreset, overrides: Mapping[str, str]) -> OfflinePreset:
    """`--set input_len=64 tp=1 ...`; unknown keys, keys the preset's kind does not take
    (batch_size for throughput, num_prompts for latency) and bad numbers raise OfflineError."""
    changes: dict = {}
    allowed = KIND_KEYS.get(preset.kind, OVERRIDE_KEYS)
    for key, text in overrides.items():
        norm = key.lstrip("-").replace("-", "_")
        if norm not in allowed:
            what = "not used by" if norm in OVERRIDE_KEYS else "unknown key for"
            raise OfflineError(f"--set {key}: {what} bench {preset.kind} (keys: {', '.join(allowed)})")
        if norm == "model":
            if not text.strip():
                raise OfflineError("--set model: empty")
            changes[norm] = text
            continue
        try:
            number = int(text.strip())
        except ValueError:
            raise OfflineError(f"--set {key}={text}: expected a positive integer") from None
        if number < 1:
            raise OfflineError(f"--set {key}={text}: expected a positive integer")
        if number > bounds.OFFLINE[norm]:
            raise OfflineError(f"--set {key}={text}: must be at most {bounds.OFFLINE[norm]}")
        changes[norm] = number
    return replace(preset, **changes) if changes else preset


# ---------------------------------------------------------------- argv


def choose_client(version: str | None, wanted: str = "auto") -> str:
    """ "subcommand" (`vllm bench latency`) from 0.10, "script" before; unknown -> subcommand."""
    if wanted not in CLIENTS:
        raise OfflineError(f"client {wanted!r} is not one of {', '.join(CLIENTS)}")
    if wanted != "auto":
        return wanted
    parsed = parse_version(version)
    if parsed is not None and parsed < SUBCOMMAND_FROM:
        return "script"
    return "subcommand"


@dataclass(frozen=True, slots=True)
class OfflineCommand:
    """What runs on the node. notes: flags the node's vLLM would refuse, and what
    the console did with them (dropped, or rewritten to the new spelling)."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    client: str = "subcommand"
    notes: tuple[str, ...] = field(default=())


def _take_value(args: Sequence[str], i: int) -> tuple[str | None, int]:
    """The value of the flag at i (`--f v` or `--f=v`) and the index after it."""
    arg = args[i]
    if "=" in arg and arg.startswith("--"):
        return arg.split("=", 1)[1], i + 1
    if i + 1 < len(args) and not args[i + 1].startswith("--"):
        return args[i + 1], i + 2
    return None, i + 1


def translate_engine_args(args: Sequence[str], version: str | None) -> tuple[list[str], list[str]]:
    """The seeds' engine flags in the spelling of the `vllm bench` subcommand.

    Checked against 0.32's `--help=all`: --num-scheduler-steps (gone after 0.9.x),
    --use-v2-block-manager and --max-seq-len-to-capture are dropped;
    --speculative-model/--num-speculative-tokens become --speculative-config JSON;
    `--enable-chunked-prefill False` becomes --no-enable-chunked-prefill.
    Returns (args, notes)."""
    out: list[str] = []
    notes: list[str] = []
    spec: dict[str, object] = {}
    shown = f"vLLM {version}" if version else "the node's vLLM (0.10+)"
    i = 0
    while i < len(args):
        arg = args[i]
        flag = arg.split("=", 1)[0]
        if flag in ("--num-scheduler-steps", "--max-seq-len-to-capture", "--num_scheduler-steps"):
            value, i = _take_value(args, i)
            notes.append(f"{flag} {value} dropped: {shown} no longer accepts it")
            continue
        if flag == "--use-v2-block-manager":
            i += 1
            notes.append(f"{flag} dropped: {shown} has only that block manager")
            continue
        if flag in ("--speculative-model", "--num-speculative-tokens"):
            value, i = _take_value(args, i)
            if flag == "--speculative-model":
                spec["model"] = value
            else:
                try:
                    spec["num_speculative_tokens"] = int(value or "")
                except ValueError:
                    raise OfflineError(f"{flag} {value!r}: expected a number") from None
            continue
        if flag == "--enable-chunked-prefill":
            value, nxt = _take_value(args, i)
            if value is not None and value.lower() in ("false", "true"):
                out.append("--enable-chunked-prefill" if value.lower() == "true" else "--no-enable-chunked-prefill")
                i = nxt
                continue
        out.append(arg)
        i += 1
    if spec:
        if "model" not in spec:
            raise OfflineError("--num-speculative-tokens without --speculative-model")
        out += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
        notes.append("--speculative-model/--num-speculative-tokens passed as --speculative-config")
    return out, notes


def build_offline_argv(
    preset: OfflinePreset,
    *,
    output_json: str,
    vllm_cmd: Sequence[str] = ("vllm",),
    python: str = "python3",
    scripts_dir: str = DEFAULT_SCRIPTS_DIR,
    client: str = "subcommand",
    version: str | None = None,
    extra_args: Sequence[str] = (),
) -> OfflineCommand:
    """The command for one run. The subcommand gets the new spellings (see
    translate_engine_args) and, for throughput, `--dataset-name random
    --random-input-len/--random-output-len`: 0.32 ignores --input-len/--output-len
    for its random dataset. The script gets the seed's flags as they are."""
    check_preset(preset)
    check_extra_args(extra_args)
    engine = list(preset.args) + list(extra_args)
    notes: list[str] = []
    if client == "subcommand":
        argv = [*vllm_cmd, "bench", preset.kind]
        engine, notes = translate_engine_args(engine, version)
    elif client == "script":
        argv = [python, f"{scripts_dir.rstrip('/')}/benchmark_{preset.kind}.py"]
    else:
        raise OfflineError(f"client {client!r} is not subcommand or script")
    argv += ["--model", preset.model, "--tensor-parallel-size", str(preset.tp)]
    if preset.kind == "latency":
        for flag, value in (
            ("--batch-size", preset.batch_size),
            ("--input-len", preset.input_len),
            ("--output-len", preset.output_len),
            ("--num-iters-warmup", preset.num_iters_warmup),
            ("--num-iters", preset.num_iters),
        ):
            if value is not None:
                argv += [flag, str(value)]
    else:
        if preset.input_len is None or preset.output_len is None:
            raise OfflineError(f"throughput preset {preset.name}: input_len and output_len are needed")
        if client == "subcommand":
            argv += [
                "--dataset-name",
                "random",
                "--random-input-len",
                str(preset.input_len),
                "--random-output-len",
                str(preset.output_len),
            ]
        else:
            argv += ["--input-len", str(preset.input_len), "--output-len", str(preset.output_len)]
        if preset.num_prompts is not None:
            argv += ["--num-prompts", str(preset.num_prompts)]
    argv += engine
    argv += ["--output-json", output_json]
    return OfflineCommand(tuple(argv), preset.env, client, tuple(notes))


# ---------------------------------------------------------------- output


@dataclass(frozen=True, slots=True)
class OfflineProgress:
    """phase: warmup | bench (latency iterations), render | generate (throughput
    prompts), load (checkpoint shards); progress: the tqdm state."""

    phase: str
    progress: BenchProgress


_PHASES = (
    ("Warmup iterations", "warmup"),
    ("Bench iterations", "bench"),
    ("Processed prompts", "generate"),
    ("Rendering prompts", "render"),
    ("Adding requests", "render"),
    ("Loading safetensors checkpoint shards", "load"),
)
_SUMMARY_RES = (
    ("avg_latency", re.compile(r"^Avg latency:\s*(\S+)\s*seconds")),
    ("requests_per_second", re.compile(r"^Throughput:\s*([\d.]+)\s*requests/s")),
    ("tokens_per_second", re.compile(r"^Throughput:.*?([\d.]+)\s*(?:total\s+)?tokens/s")),
)
_TQDM_LOAD_RE = re.compile(r"Loading safetensors checkpoint shards:\s*(\d+)%\s*Completed\s*\|\s*(\d+)/(\d+)")


def _phase_of(text: str) -> str | None:
    for marker, phase in _PHASES:
        if marker in text:
            return phase
    return None


class OfflineStreamParser:
    """Lines of a run's log -> progress events, the printed summary and the fatal line.

    The fatal line: a specific rule of the serve log (port, memory, arguments, ...)
    wins; else the last uncaught exception line (the traceback's end); else the
    first generic one (engine failed/died)."""

    def __init__(self) -> None:
        self.printed: dict[str, float] = {}
        self._specific: FatalLine | None = None
        self._uncaught: FatalLine | None = None
        self._generic: FatalLine | None = None
        self.last: OfflineProgress | None = None

    def feed(self, line: str) -> list[OfflineProgress]:
        events: list[OfflineProgress] = []
        text = strip_ansi(line.replace("\r", "\n"))
        for segment in text.split("\n"):
            if not segment.strip():
                continue
            phase = _phase_of(segment)
            if phase is not None:
                progress = parse_progress(segment)
                if progress is None and phase == "load":
                    m = _TQDM_LOAD_RE.search(segment)
                    if m:
                        progress = BenchProgress(int(m[2]), int(m[3]), float(m[1]), None, None, None, m[0])
                if progress is not None:
                    event = OfflineProgress(phase, progress)
                    if event != self.last:
                        self.last = event
                        events.append(event)
                continue
            for key, pattern in _SUMMARY_RES:
                m = pattern.search(segment.strip())
                if m:
                    try:
                        self.printed[key] = float(m.group(1))
                    except ValueError:
                        pass
            found = parse_serve_line(segment)
            if isinstance(found, FatalLine):
                self._note_fatal(found)
        return events

    def _note_fatal(self, fatal: FatalLine) -> None:
        if fatal.specific:
            if self._specific is None:
                self._specific = fatal
        elif fatal.reason.startswith("uncaught ") or fatal.reason == "invalid configuration":
            self._uncaught = fatal  # the last one: the traceback's own end
        elif self._generic is None:
            self._generic = fatal

    @property
    def fatal(self) -> FatalLine | None:
        return self._specific or self._uncaught or self._generic


def fatal_text(fatal: FatalLine) -> str:
    """vLLM's own line, without the process/log prefix: `ValueError: ...`."""
    text = fatal.line.strip()
    m = re.search(r"\]\s+(.*)$", text) if text.startswith("(") or re.match(r"^[A-Z]+ \d", text) else None
    return (m.group(1) if m else text).strip()


# ---------------------------------------------------------------- result JSON

LATENCY_PERCENTILES = ("10", "25", "50", "75", "90", "99")


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def offline_metrics(kind: str, obj: Mapping[str, object]) -> dict[str, float]:
    """Metrics of an `--output-json` object, named like the seeds' tables
    (reference_numbers.toml): latency_s = avg_latency, throughput_tok_s =
    tokens_per_second; each value is the JSON's own number."""
    if not isinstance(obj, Mapping):
        raise OfflineError("the result file is not a JSON object")
    out: dict[str, float] = {}
    if kind == "latency":
        avg = _num(obj.get("avg_latency"))
        if avg is None:
            raise OfflineError("the latency result has no avg_latency")
        out["latency_s"] = avg
        pct = obj.get("percentiles")
        if isinstance(pct, Mapping):
            for p in LATENCY_PERCENTILES:
                value = _num(pct.get(p))
                if value is not None:
                    out[f"latency_p{p}_s"] = value
        lat = obj.get("latencies")
        if isinstance(lat, list):
            out["iterations"] = float(len(lat))
        return out
    if kind == "throughput":
        tps = _num(obj.get("tokens_per_second"))
        if tps is None:
            raise OfflineError("the throughput result has no tokens_per_second")
        out["throughput_tok_s"] = tps
        for src, dst in (
            ("requests_per_second", "request_throughput"),
            ("elapsed_time", "duration"),
            ("num_requests", "completed"),
            ("total_num_tokens", "total_tokens"),
        ):
            value = _num(obj.get(src))
            if value is not None:
                out[dst] = value
        return out
    raise OfflineError(f"kind {kind!r} is not one of {', '.join(KINDS)}")


def offline_setup(preset: OfflinePreset, client: str) -> dict:
    """The setup keys of a stored offline run."""
    values: dict = {
        "model": preset.model,
        "input_len": preset.input_len,
        "output_len": preset.output_len,
        "tp": preset.tp,
        "client": client,
    }
    if preset.kind == "latency":
        values.update(
            batch_size=preset.batch_size, num_iters=preset.num_iters, num_iters_warmup=preset.num_iters_warmup
        )
    else:
        values.update(dataset="random", num_prompts=preset.num_prompts)
    return {k: v for k, v in values.items() if v is not None}


def offline_headline(kind: str, result: Mapping[str, object] | None) -> tuple[list[str], str | None]:
    """A finished run's numbers as its reader says them: (the figures, a note after them).

    latency: ['avg latency 0.1234 s', 'p50 0.1200 s', 'p99 0.1500 s'] and '(30 iterations)';
    throughput: ['1234.5 tokens/s', '4.56 requests/s', '200 requests in 43.86 s'] and None.
    The CLI and the TUI join them their own way.
    """
    r = result or {}

    def num(key: str, source: Mapping[str, object] = r) -> float:
        value = source.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")

    if kind == "latency":
        pct = r.get("percentiles")
        pct = pct if isinstance(pct, Mapping) else {}
        latencies = r.get("latencies")
        count = len(latencies) if isinstance(latencies, list) else 0
        return (
            [f"avg latency {num('avg_latency'):.4f} s", f"p50 {num('50', pct):.4f} s", f"p99 {num('99', pct):.4f} s"],
            f"({count} iterations)",
        )
    return (
        [
            f"{num('tokens_per_second'):.1f} tokens/s",
            f"{num('requests_per_second'):.2f} requests/s",
            f"{r.get('num_requests')} requests in {num('elapsed_time'):.2f} s",
        ],
        None,
    )
