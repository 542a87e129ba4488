"""The final table of a serving benchmark: the labels of the `Serving Benchmark Result` block
(`Mean TTFT (ms)`, `P99.9 ITL (ms)`, ...) as the keys of the `--save-result` JSON
(`mean_ttft_ms`, `p99.9_itl_ms`), and the lines that frame it, vLLM 0.6.3 -> 0.33."""

from __future__ import annotations

import re

RESULT_HEADER_RE = re.compile(r"=+\s*Serving Benchmark Result\s*=+")
RULER_RE = re.compile(r"^={10,}$")
SECTION_RE = re.compile(r"^-{2,}.*-{2,}$|^-+$")
_VALUE = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)|None"
METRIC_LINE_RE = re.compile(rf"^\s*(?P<label>\S.*?):\s+(?P<value>{_VALUE})\s*$", re.IGNORECASE)

# Fixed labels (case-insensitive, spaces collapsed, no colon) -> JSON key.
_LABELS = {
    "successful requests": "completed",
    "failed requests": "failed",
    "maximum request concurrency": "max_concurrency",
    "request rate configured (rps)": "request_rate",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "input throughput (inputs/s)": "input_sequence_throughput",
    "request goodput (req/s)": "request_goodput",
    "input token throughput (tok/s)": "input_throughput",  # pre-0.6 scripts
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "rtfx (inverse real-time factor)": "rtfx",
    "total token throughput (tok/s)": "total_token_throughput",
    # 0.33 probe requests
    "probe requests completed": "probe_completed",
    "probe requests failed": "probe_failed",
    "median probe e2el (ms)": "probe_median_e2el_ms",
    "p99 probe e2el (ms)": "probe_p99_e2el_ms",
    "max probe e2el (ms)": "probe_max_e2el_ms",
    # 0.33 speculative decoding
    "acceptance rate (%)": "spec_decode_acceptance_rate",
    "acceptance length": "spec_decode_acceptance_length",
    "drafts": "spec_decode_num_drafts",
    "draft tokens": "spec_decode_draft_tokens",
    "accepted tokens": "spec_decode_accepted_tokens",
    # diffusion decoding
    "committed throughput (tok/s)": "diffusion_committed_throughput",
    "denoising steps per canvas": "diffusion_steps_per_canvas",
    "committed per denoising step": "diffusion_committed_per_step",
    "committed tokens": "diffusion_committed_tokens",
    "denoising steps": "diffusion_denoising_steps",
    "canvas positions evaluated": "diffusion_canvas_positions",
}
# `Mean TTFT (ms)`, `P99.9 ITL (ms)`, ... metric names -> JSON attribute names.
_STAT_RE = re.compile(r"^(?P<stat>mean|median|std|p(?P<p>\d+(?:\.\d+)?))\s+(?P<name>.+?)\s+\(ms\)$")
_STAT_NAMES = {
    "ttft": "ttft",
    "tpot": "tpot",
    "itl": "itl",
    "e2el": "e2el",
    "client queue time": "client_queue_time",
    "e2el incl. client queue": "e2el_including_client_queue",
}


def norm_label(label: str) -> str:
    return " ".join(label.strip().rstrip(":").split()).casefold()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "_", text.casefold()).strip("_")


def block_key(label: str) -> str | None:
    """The result-JSON key for a result-block label, e.g. `P99.9 ITL (ms)` -> `p99.9_itl_ms`.

    None for labels that carry no single value (e.g. `  Position 0`).
    """
    norm = norm_label(label)
    if norm in _LABELS:
        return _LABELS[norm]
    stat = _STAT_RE.match(norm)
    if stat:
        name = _STAT_NAMES.get(stat["name"], _slug(stat["name"]))
        if stat["p"] is not None:
            p = stat["p"]
            if "." in p:
                number = float(p)
                p = str(int(number)) if number == int(number) else repr(number)
            return f"p{p}_{name}_ms"
        return f"{stat['stat']}_{name}_ms"
    return None


def printed_number(text: str) -> float | None:
    if text.casefold() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        return None
