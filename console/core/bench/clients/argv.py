"""The argv of an outside client (GuideLLM, AIPerf) for one run of a bench preset.

What maps (docs/benchmarks.md "Clients"):

| preset key        | GuideLLM 0.8 (`guidellm run`)                  | AIPerf 0.13 (`aiperf profile`)          |
|-------------------|------------------------------------------------|-----------------------------------------|
| max_concurrency   | --profile kind=concurrent,streams=N            | --concurrency N                         |
| request_rate      | --profile kind=poisson,rate=R (no concurrency) | --request-rate R                        |
| num_prompts       | --constraint kind=max_requests,count=N         | --request-count N                       |
| input_len         | --data ...,prompt_tokens=N                     | --prompt-input-tokens-mean N, stddev 0  |
| output_len        | --data ...,output_tokens=N                     | --prompt-output-tokens-mean N, stddev 0 |
| turns             | --data ...,turns=N (each turn carries history) | --conversation-turn-mean N, stddev 0    |
| seed              | --seed kind=static,value=S                     | --random-seed S                         |
| ignore_eos        | (GuideLLM asks for exactly output_tokens)      | --extra-inputs ignore_eos:true          |
| endpoint          | backend request_format (chat by default)       | --endpoint-type chat / completions      |
| extra_args        | appended as given                              | appended as given                       |

The dataset is each client's synthetic text (`random` in vLLM's terms); other datasets are
refused. The result lands in the run's folder as result.json (GuideLLM's `--output kind=json`,
AIPerf's `--profile-export-prefix result`, which also writes result.jsonl, per request).
"""

from __future__ import annotations

from collections.abc import Sequence

from console.core.bench.clients import aiperf, guidellm
from console.core.model import BenchPreset

__all__ = ["check_outside", "outside_argv"]

CHAT = "/v1/chat/completions"


def check_outside(preset: BenchPreset, max_concurrency: int | None) -> None:
    """What the client could not run as asked, as ValueError (one line naming the key)."""
    if max_concurrency is None and preset.max_concurrency:
        max_concurrency = preset.max_concurrency[0]
    outside_argv(preset, client_cmd=(preset.client,), base_url="http://127.0.0.1:8000", model="m",
                 result_dir="/tmp/check", max_concurrency=max_concurrency)  # fmt: skip


def _lengths(preset: BenchPreset) -> tuple[int, int]:
    if preset.dataset != "random":
        raise ValueError(
            f"bench preset {preset.name!r}: client {preset.client} runs its own synthetic prompts "
            f'(dataset = "random"), not dataset {preset.dataset!r}'
        )
    if preset.input_len is None or preset.output_len is None:
        raise ValueError(f"bench preset {preset.name!r}: client {preset.client} needs input_len and output_len")
    return preset.input_len, preset.output_len


def outside_argv(
    preset: BenchPreset,
    *,
    client_cmd: Sequence[str],
    base_url: str,
    model: str,
    result_dir: str,
    max_concurrency: int | None,
    tokenizer: str | None = None,
) -> list[str]:
    """The client's argv; ValueError naming the preset key it cannot honour."""
    cmd = list(client_cmd)
    if not cmd or not all(isinstance(a, str) and a for a in cmd):
        raise ValueError(f"client command must be a non-empty sequence of strings, got {client_cmd!r}")
    isl, osl = _lengths(preset)
    rate = preset.request_rate
    if max_concurrency is None and rate is None:
        raise ValueError(f"bench preset {preset.name!r}: client {preset.client} needs max_concurrency or request_rate")
    chat = (preset.endpoint or CHAT).rstrip("/").endswith("chat/completions")
    turns = preset.turns
    if preset.client == guidellm.NAME:
        return _guidellm(cmd, preset, base_url, model, result_dir, max_concurrency, rate, isl, osl, turns, chat)
    if preset.client == aiperf.NAME:
        return _aiperf(cmd, preset, base_url, model, result_dir, max_concurrency, rate, isl, osl, turns, chat,
                       tokenizer)  # fmt: skip
    raise ValueError(f"bench preset {preset.name!r}: {preset.client!r} is not an outside client")


def _guidellm(cmd, preset, base_url, model, result_dir, conc, rate, isl, osl, turns, chat) -> list[str]:
    backend = f"kind=openai_http,target={base_url},model={model}"
    if not chat:
        backend += ",request_format=/v1/completions"
    profile = f"kind=concurrent,streams={conc}" if conc is not None else f"kind=poisson,rate={rate:g}"
    data = f"kind=synthetic_text,prompt_tokens={isl},output_tokens={osl}"
    if turns is not None and turns > 1:
        data += f",turns={turns}"
    argv = cmd + ["run", "--backend", backend, "--profile", profile]
    argv += ["--constraint", f"kind=max_requests,count={preset.num_prompts}", "--data", data]
    if preset.seed is not None:
        argv += ["--seed", f"kind=static,value={preset.seed}"]
    argv += ["--output", f"kind=json,path={result_dir}/result.json", "--disable-progress"]
    return argv + list(preset.extra_args)


def _aiperf(cmd, preset, base_url, model, result_dir, conc, rate, isl, osl, turns, chat, tokenizer) -> list[str]:
    argv = cmd + ["profile", "--model", model, "--url", base_url]
    argv += ["--endpoint-type", "chat" if chat else "completions", "--streaming"]
    argv += ["--tokenizer", tokenizer or model]
    if conc is not None:
        argv += ["--concurrency", str(conc)]
    if rate is not None:
        argv += ["--request-rate", f"{rate:g}"]
    argv += ["--request-count", str(preset.num_prompts)]
    argv += ["--prompt-input-tokens-mean", str(isl), "--prompt-input-tokens-stddev", "0"]
    argv += ["--prompt-output-tokens-mean", str(osl), "--prompt-output-tokens-stddev", "0"]
    if turns is not None and turns > 1:
        argv += ["--conversation-turn-mean", str(turns), "--conversation-turn-stddev", "0"]
    if preset.ignore_eos:
        argv += ["--extra-inputs", "ignore_eos:true"]
    if preset.seed is not None:
        argv += ["--random-seed", str(preset.seed)]
    argv += ["--output-artifact-dir", result_dir, "--profile-export-prefix", "result", "--ui-type", "simple"]
    return argv + list(preset.extra_args)
