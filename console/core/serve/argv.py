"""argv builders for `vllm serve` (runtime host) and `docker run … vllm serve` (runtime docker).

Everything is an argv tuple, never a shell string: model names, JSON flag values
and environment values reach the process exactly as written. Secrets never enter
an argv: with docker, `-e HF_TOKEN` names the variable and docker copies its
value from the environment of the `docker` client.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from console.core import bounds
from console.core.model import ServePreset

__all__ = [
    "API_KEY_VAR",
    "DOCKER_RUN_FLAGS",
    "ServeCommand",
    "apply_overrides",
    "build_docker_argv",
    "api_key_from",
    "build_serve_argv",
    "check_serve_overrides",
    "looks_secret",
    "redact",
    "take_tp",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})
MASK = "***"
# vLLM's own variable for its API key (`args.api_key or envs.VLLM_API_KEY`, api_server.py):
# the console passes a key through the environment, never as --api-key in argv.
API_KEY_VAR = "VLLM_API_KEY"

# The seeds' `docker run` flags for ROCm GPUs (seeds 000/001/002), minus -it/--rm:
# the container runs detached and is kept after exit so its status can be read.
DOCKER_RUN_FLAGS: tuple[str, ...] = (
    "--ipc=host",
    "--network=host",
    "--group-add",
    "render",
    "--device=/dev/kfd",
    "--device=/dev/dri",
    "--security-opt",
    "seccomp=unconfined",
    "--cap-add=SYS_PTRACE",
)

# NVIDIA nodes (NVIDIA container toolkit): every GPU in the container, CUDA_VISIBLE_DEVICES
# picks the instance's; the image is vLLM's own CUDA build unless the preset names another.
NVIDIA_DOCKER_RUN_FLAGS: tuple[str, ...] = ("--ipc=host", "--network=host", "--gpus", "all")
NVIDIA_VLLM_IMAGE = "vllm/vllm-openai:latest"


def image_for(vendor: str, image: str | None) -> str | None:
    """The image a node of ``vendor`` runs: a ROCm image on an NVIDIA node becomes vLLM's CUDA one."""
    if vendor == "nvidia" and (not image or image.startswith("rocm/")):
        return NVIDIA_VLLM_IMAGE
    return image


# Flags the console sets itself; a copy in overrides/extra args would clash.
_OWNED_FLAGS = {
    "--host": "the preset's host (where vLLM listens on the node)",
    "--port": "--port or the preset's port",
    "--tensor-parallel-size": "the preset's tp",
    "-tp": "the preset's tp",
    "--tp": "the preset's tp",
    "--served-model-name": "the preset's served_model_name",
    "--model": "the preset's model",
    # multi-node keys (console/core/multinode.py): on one node they would use GPUs it was not given
    "--pipeline-parallel-size": "the preset's pp (a multi-node preset)",
    "-pp": "the preset's pp (a multi-node preset)",
    "--data-parallel-size": "the preset's dp (a multi-node preset)",
    "-dp": "the preset's dp (a multi-node preset)",
    "--data-parallel-size-local": "the preset's dp_local",
    "--data-parallel-address": "the preset's head_address",
}
# Flags whose value is a secret: keep them out of argv (ps shows argv to every user).
_SECRET_FLAGS = ("--api-key", "--hf-token")
_SECRET_ENV_HINT = {
    "--api-key": "name the variable that holds the key with the preset's api_key_env",
    "--hf-token": "export HF_TOKEN instead",
}
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CONTAINER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_KEY_RE = re.compile(r"-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*\Z")
_NUMBER_RE = re.compile(r"-\d")


@dataclass(frozen=True, slots=True)
class ServeCommand:
    """What to exec: argv, plus environment variables to add to the process's own."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def display(self) -> str:
        """One shell-quoted line for showing (secrets masked); never for executing."""
        safe = redact(self)
        assigns = [f"{k}={v if v == MASK else shlex.quote(v)}" for k, v in safe.env]
        return " ".join([*assigns, shlex.join(safe.argv)])


# ---------------------------------------------------------------- flags


def _norm(flag: str) -> str:
    """'--gpu_memory_utilization=0.9' -> '--gpu-memory-utilization' (vLLM accepts both)."""
    name = flag.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def _is_flag(item: str) -> bool:
    return item.startswith("-") and len(item) > 1 and not _NUMBER_RE.match(item)


def _units(args: Sequence[str]) -> list[tuple[str | None, list[str]]]:
    """Group argv into (normalized flag, items): ['--x', '1'], ['--x=1'], ['--bare']."""
    units: list[tuple[str | None, list[str]]] = []
    i = 0
    while i < len(args):
        item = args[i]
        if not _is_flag(item):
            units.append((None, [item]))
            i += 1
            continue
        if "=" in item or i + 1 >= len(args) or _is_flag(args[i + 1]):
            units.append((_norm(item), [item]))
            i += 1
        else:
            units.append((_norm(item), [item, args[i + 1]]))
            i += 2
    return units


def _override_flag(key: str) -> str:
    if not key or not _KEY_RE.match(key):
        raise ValueError(f"--set {key!r}: not a flag name (letters, digits, _ and -)")
    if key.startswith("-"):
        return key  # given as a flag: keep its spelling
    return "--" + key.replace("_", "-")


def _refuse_flag(flag: str, where: str, shown: str | None = None) -> None:
    norm = _norm(flag)
    owner = _OWNED_FLAGS.get(norm)
    shown = shown or flag
    if owner:
        raise ValueError(f"{where} {shown}: the console sets it from {owner}")
    if norm in _SECRET_FLAGS:
        raise ValueError(f"{where} {shown}: secrets stay out of argv; {_SECRET_ENV_HINT[norm]}")


def apply_overrides(args: Sequence[str], overrides: Mapping[str, str]) -> tuple[str, ...]:
    """`--set max_model_len=4096`: replace or append `--max-model-len 4096`.

    Keys name a flag with or without dashes (underscores become dashes). A value
    replaces the first occurrence in place, keeping its form (`--flag v` or
    `--flag=v`) and spelling, and drops later repeats; "true" makes it a bare flag,
    "false" removes it. Setting `x` also drops a `--no-x` (and `no_x` drops `--x`).
    """
    units = _units(args)
    for key, value in overrides.items():
        flag = _override_flag(key)
        _refuse_flag(flag, "--set", key)
        norm = _norm(flag)
        if value is None or str(value) == "":
            raise ValueError(f"--set {key}: empty value (use {key}=false to drop the flag)")
        value = str(value)
        word = value.strip().lower()
        if norm.startswith("--no-"):
            opposite = "--" + norm[5:]
        else:
            opposite = "--no-" + norm[2:]
        placed = False
        out: list[tuple[str | None, list[str]]] = []
        for unit_flag, items in units:
            if unit_flag == opposite:
                continue
            if unit_flag != norm:
                out.append((unit_flag, items))
                continue
            if placed or word == "false":
                continue
            name = items[0].split("=", 1)[0]
            if word == "true":
                new = [name]
            elif "=" in items[0]:
                new = [f"{name}={value}"]
            else:
                new = [name, value]
            out.append((norm, new))
            placed = True
        if not placed and word != "false":
            out.append((norm, [flag] if word == "true" else [flag, value]))
        units = out
    return tuple(item for _, items in units for item in items)


def api_key_from(variable: str, environ: Mapping[str, str], what: str) -> str:
    """The API key in `variable` of the console's environment (a preset's api_key_env);
    ValueError naming the variable (never a value) when it is unset or empty."""
    value = environ.get(variable, "")
    if not value.strip():
        raise ValueError(f"{what}: api_key_env {variable} is not set in this environment (export it first)")
    return value


TP_KEYS = ("tp", "tensor_parallel_size")


def take_tp(overrides: Mapping[str, str]) -> tuple[int | None, dict[str, str]]:
    """`--set tp=2` (or tensor_parallel_size=2): the TP asked for, and the other overrides.

    TP is the console's own key (it picks that many GPUs), never a flag passed through."""
    tp = None
    rest: dict[str, str] = {}
    for key, value in overrides.items():
        if key.lstrip("-").replace("-", "_") in TP_KEYS:
            text = str(value).strip()
            if not (text.isascii() and text.isdigit()) or int(text) < 1:
                raise ValueError(f"--set {key}={value}: the tensor-parallel size is a whole number >= 1")
            if len(text) > 9 or int(text) > bounds.PARALLEL:  # len first: int() of 5000 digits raises
                raise ValueError(f"--set {key}={value}: the tensor-parallel size must be at most {bounds.PARALLEL}")
            tp = int(text)
        else:
            rest[key] = value
    return tp, rest


def check_serve_overrides(overrides: Mapping[str, str], extra_args: Sequence[str] = ()) -> None:
    """What `apply_overrides` and the builders would refuse, checked before anything starts:
    a key that is no flag name, a flag the console sets itself, a secret, an empty value;
    an empty or owned extra argument. One line each (ValueError)."""
    for key, value in overrides.items():
        flag = _override_flag(key)
        _refuse_flag(flag, "--set", key)
        text = "" if value is None else str(value)
        if not text.strip():
            raise ValueError(f"--set {key}: empty value (give a value, true for a bare flag, false to drop it)")
        if any(c in text for c in "\n\r\0"):
            raise ValueError(f"--set {key}: the value must be a single line")
    for item in extra_args:
        if not item.strip():
            raise ValueError("--arg '': an empty argument (vLLM would read it as a second model)")
        if any(c in item for c in "\n\r\0"):
            raise ValueError(f"--arg {item.splitlines()[0] if item.strip() else ''!r}: must be a single line")
        if _is_flag(item):
            _refuse_flag(item, "--arg")


# ---------------------------------------------------------------- builders


def _check_common(preset: ServePreset, port: int, host: str, gpus: Sequence[int]) -> None:
    if not preset.model:
        raise ValueError(f"serve preset {preset.name!r} has no model")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is out of range (1-65535)")
    if not host or any(c.isspace() for c in host):
        raise ValueError(f"host {host!r} is not an address")
    seen: set[int] = set()
    for gpu in gpus:
        if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
            raise ValueError(f"GPU index {gpu!r} is not a non-negative integer")
        if gpu in seen:
            raise ValueError(f"GPU {gpu} is selected twice")
        seen.add(gpu)


def _check_env_names(env: Iterable[str]) -> None:
    for name in env:
        if not _ENV_NAME_RE.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")


def _command(text: str, what: str) -> list[str]:
    words = shlex.split(text)
    if not words:
        raise ValueError(f"empty {what} command")
    return words


def _serve_tail(
    preset: ServePreset,
    *,
    vllm: str,
    port: int,
    host: str,
    overrides: Mapping[str, str],
    extra_args: Sequence[str],
) -> list[str]:
    for item in extra_args:
        if _is_flag(item):
            _refuse_flag(item, "extra argument")
    argv = [*_command(vllm, "vllm"), "serve", preset.model, "--host", host, "--port", str(port)]
    argv += ["--tensor-parallel-size", str(preset.tp)]
    if preset.served_model_name:
        argv += ["--served-model-name", preset.served_model_name]
    argv += apply_overrides(preset.args, overrides)
    argv += list(extra_args)
    return argv


def _visible(gpus: Sequence[int], devices: Sequence[str] | None = None) -> str:
    """CUDA_VISIBLE_DEVICES: GPU indices, or the device names given (a MIG instance's "MIG-…" UUID)."""
    return ",".join(devices) if devices else ",".join(str(g) for g in gpus)


def build_serve_argv(
    preset: ServePreset,
    *,
    vllm: str,
    port: int,
    host: str = "0.0.0.0",
    gpus: Sequence[int],
    overrides: Mapping[str, str] = _EMPTY,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] = _EMPTY,
    devices: Sequence[str] | None = None,
) -> ServeCommand:
    """`vllm serve MODEL --host H --port P --tensor-parallel-size N …` for runtime host.

    env = preset env, then extra_env (same names replaced), then
    CUDA_VISIBLE_DEVICES from gpus (ROCm vLLM reads it). HIP_VISIBLE_DEVICES is
    never added; it only appears when the preset or extra_env gives it. With no
    GPUs (a CPU run) CUDA_VISIBLE_DEVICES is left alone.
    """
    _check_common(preset, port, host, gpus)
    _check_env_names(extra_env)
    argv = _serve_tail(preset, vllm=vllm, port=port, host=host, overrides=overrides, extra_args=extra_args)
    env = dict(preset.env)
    env.update(extra_env)
    if gpus:
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env["CUDA_VISIBLE_DEVICES"] = _visible(gpus, devices)
    return ServeCommand(tuple(argv), tuple(env.items()))


def build_docker_argv(
    preset: ServePreset,
    *,
    name: str,
    port: int,
    gpus: Sequence[int],
    host: str = "0.0.0.0",
    image: str | None = None,
    vllm: str = "vllm",
    overrides: Mapping[str, str] = _EMPTY,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] = _EMPTY,
    pass_env: Sequence[str] = ("HF_TOKEN",),
    volumes: Sequence[str] = (),
    shm_size: str = "16G",
    docker: str = "docker",
    vendor: str = "amd",
    devices: Sequence[str] | None = None,
) -> ServeCommand:
    """`docker run -d --name NAME <ROCm flags> -e K=V … IMAGE vllm serve …` for runtime docker.

    vendor "nvidia": `--gpus all` instead of the ROCm device flags, and vLLM's CUDA
    image where the preset names a ROCm one or none (``image_for``).

    Plain variables go in as `-e K=V`. Secret-looking ones (HF_TOKEN, *_API_KEY…)
    and every name in pass_env go in as `-e NAME`: docker copies the value from
    its own environment, which is what the returned `env` holds (only secrets given
    in extra_env; the rest come from the node's environment, if set there).
    `vllm` is the command inside the image. `volumes` are `-v` specs ("/data:/data").
    """
    _check_common(preset, port, host, gpus)
    _check_env_names(extra_env)
    _check_env_names(pass_env)
    if not _CONTAINER_RE.match(name):
        raise ValueError(f"container name {name!r}: use letters, digits, '_', '.', '-'")
    image = image_for(vendor, image or preset.image)
    if not image:
        raise ValueError(f"serve preset {preset.name!r} has no docker image")
    if not shm_size or any(c.isspace() for c in shm_size):
        raise ValueError(f"shm size {shm_size!r} is not a size")

    plain = dict(preset.env)
    secret_values: dict[str, str] = {}
    for key, value in extra_env.items():
        if looks_secret(key):
            secret_values[key] = value
            plain.pop(key, None)
        else:
            plain[key] = value
    if gpus:
        plain.pop("CUDA_VISIBLE_DEVICES", None)
        plain["CUDA_VISIBLE_DEVICES"] = _visible(gpus, devices)
    by_name = [n for n in dict.fromkeys([*pass_env, *secret_values]) if n not in plain]

    flags = NVIDIA_DOCKER_RUN_FLAGS if vendor == "nvidia" else DOCKER_RUN_FLAGS
    argv = [*_command(docker, "docker"), "run", "-d", "--name", name, *flags]
    argv += ["--shm-size", shm_size]
    for volume in volumes:
        argv += ["-v", volume]
    for key, value in plain.items():
        argv += ["-e", f"{key}={value}"]
    for key in by_name:
        argv += ["-e", key]
    argv.append(image)
    argv += _serve_tail(preset, vllm=vllm, port=port, host=host, overrides=overrides, extra_args=extra_args)
    return ServeCommand(tuple(argv), tuple(secret_values.items()))


# ---------------------------------------------------------------- redaction


def looks_secret(name: str) -> bool:
    """HF_TOKEN, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, OPENAI_API_KEY…

    Word-wise, so TOKENIZERS_PARALLELISM and MAX_TOKENS stay visible.
    """
    upper = name.upper().replace("-", "_")
    words = re.split(r"[_.]+", upper)
    if any(w.endswith("TOKEN") or "SECRET" in w or "PASSW" in w for w in words):
        return True
    return upper.endswith(("API_KEY", "APIKEY"))


_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)
_TEXT_FLAG_RE = re.compile(r"(--(?:api[-_]key|hf[-_]token))([= ]+)(\S+)")
_TEXT_ASSIGN_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\S+)")


def _redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    mask_next = False
    for item in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        if _is_flag(item) and _norm(item) in _SECRET_FLAGS:
            if "=" in item:
                out.append(item.split("=", 1)[0] + "=" + MASK)
            else:
                out.append(item)
                mask_next = True
            continue
        found = _ASSIGN_RE.match(item)
        if found and looks_secret(found.group(1)):
            out.append(f"{found.group(1)}={MASK}")
            continue
        out.append(item)
    return tuple(out)


def _redact_text(text: str) -> str:
    text = _TEXT_FLAG_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _TEXT_ASSIGN_RE.sub(lambda m: f"{m.group(1)}={MASK}" if looks_secret(m.group(1)) else m.group(0), text)


def redact(value):
    """Mask secret values for display.

    - ServeCommand -> ServeCommand with argv and env masked;
    - argv (sequence of str): `--api-key X` / `--hf-token X` / `--api-key=X` and
      `NAME=value` items with a secret-looking NAME (`-e HF_TOKEN=…`);
    - env (mapping, or sequence of (name, value) pairs): values of secret-looking names;
    - str: the same rules applied to free text (a log line, a shell line).
    """
    if isinstance(value, ServeCommand):
        return ServeCommand(_redact_argv(value.argv), redact(value.env))
    if isinstance(value, str):
        return _redact_text(value)
    if isinstance(value, Mapping):
        return {k: (MASK if looks_secret(k) else v) for k, v in value.items()}
    items = tuple(value)
    if items and all(isinstance(i, tuple) and len(i) == 2 for i in items):
        return tuple((k, MASK if looks_secret(k) else v) for k, v in items)
    return _redact_argv(items)
