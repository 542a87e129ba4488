"""The records a benchmark client's output parses into (console/core/bench/output_parser.py):
tqdm progress, setup lines, errors, result blocks, any other line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BenchProgress:
    """One tqdm redraw: ` 45%|████▌     | 450/1000 [00:12<00:15, 36.20it/s]`."""

    n: int
    total: int
    pct: float  # as printed (tqdm rounds it to an integer)
    elapsed_s: float | None
    remaining_s: float | None  # None while tqdm prints `?`
    rate: float | None  # items per second; `s/it` is converted; None for `?it/s`
    raw: str
    desc: str = ""  # tqdm's description, if any (vLLM's bars have none)
    phase: str = "main"  # stream parser: "warmup" between the warm-up lines

    @property
    def fraction(self) -> float:
        return self.n / self.total if self.total > 0 else 0.0


@dataclass(frozen=True, slots=True)
class SetupLine:
    """A line that says how the run is set up or where it is.

    kind: namespace, command, request_rate, burstiness, max_concurrency,
    ramp_up_strategy, ramp_up, probe_request_rate, initial_test_start,
    initial_test_done, ready_check_wait, ready_check_skipped, warmup_start,
    warmup_done, main_start. value: the parsed value (a dict for namespace and
    command, a float/int/None for the numbers, else None).
    """

    kind: str
    text: str
    value: object = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class BenchError:
    """kind: initial_test_failed | all_failed | failed_requests | request_error | exception.

    For request_error (`Error N: ...`), index is N, message the line's text or,
    for a traceback, its last exception line, and detail the whole text (capped).
    """

    kind: str
    message: str
    index: int | None = None
    detail: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class OtherLine:
    """Any other line (only emitted with BenchStreamParser(emit_other=True))."""

    text: str
    line: int = 0


@dataclass(frozen=True, slots=True)
class BenchResultBlock:
    """One `Serving Benchmark Result` block.

    metrics: result-JSON key -> value; printed: the same keys -> the text as
    printed (so a comparison can use the printed precision); unknown: labels this
    parser has no key for -> value; setup: what the run was set up with (keys
    model, backend, endpoint, base_url, dataset_name, dataset_path, num_prompts,
    request_rate (inf when unlimited), burstiness, max_concurrency (None = no
    limit), input_len, output_len, seed, ..., only those that were found);
    args: the full Namespace / command-line arguments it came from; start_line /
    end_line: 1-based line numbers (counting `\\n`) of the two `=` rulers;
    complete: False when the stream ended (or another block began) before the
    closing ruler.
    """

    metrics: Mapping[str, float] = field(default_factory=dict, hash=False)
    printed: Mapping[str, str] = field(default_factory=dict, hash=False)
    unknown: Mapping[str, float] = field(default_factory=dict, hash=False)
    setup: Mapping[str, object] = field(default_factory=dict, hash=False)
    args: Mapping[str, object] = field(default_factory=dict, hash=False)
    start_line: int = 0
    end_line: int = 0
    complete: bool = True

    @property
    def span(self) -> tuple[int, int]:
        return (self.start_line, self.end_line)


# parse_result_blocks returns the same record: metrics, setup and line span.
ParsedBlock = BenchResultBlock

Event = BenchProgress | SetupLine | BenchError | BenchResultBlock | OtherLine
