"""Parse the output of a vLLM serving benchmark client, vLLM 0.6.3 -> 0.33.

Clients: `vllm bench serve` and benchmarks/benchmark_serving.py. Their stdout
carries the setup lines (`Namespace(...)`, `Traffic request rate: ...`), the
result block between `==== Serving Benchmark Result ====` and a line of 50 `=`,
and failure lines; stderr carries tqdm progress redrawn with `\\r`. The two
streams may arrive merged (a PTY, `2>&1`), with ANSI colour codes, CRLF line
ends, and a progress redraw glued to the front of a stdout line.

- `parse_progress(text)`: the last tqdm progress state in a piece of text.
- `BenchStreamParser`: fed raw chunks (bytes or str) as they arrive; returns
  typed events: BenchProgress, SetupLine, BenchResultBlock, BenchError.
- `parse_result_blocks(text)`: every result block of a whole captured file,
  each with the setup it ran with (nearest preceding Namespace / command line /
  pre-run lines) and its line span.

Block values use the keys of the `--save-result` JSON (`completed`,
`total_output_tokens`, `p99.9_itl_ms`, ...), see vllm-formats.md §2.

The parts live in modules of their own: output_events.py (the records),
progress.py (tqdm), client_setup.py (Namespace, command line, pre-run lines),
result_table.py (the result block's labels) and output_parser.py (the stream
parser). This module keeps the names importable from one place.
"""

from __future__ import annotations

from console.core.bench import output_events as _events
from console.core.bench.client_setup import parse_namespace
from console.core.bench.output_parser import BenchStreamParser, iter_events, parse_result_blocks
from console.core.bench.progress import parse_progress, strip_ansi
from console.core.bench.result_table import block_key

BenchError = _events.BenchError
BenchProgress = _events.BenchProgress
BenchResultBlock = _events.BenchResultBlock
OtherLine = _events.OtherLine
ParsedBlock = _events.ParsedBlock
SetupLine = _events.SetupLine

__all__ = [
    "BenchError",
    "BenchProgress",
    "BenchResultBlock",
    "BenchStreamParser",
    "OtherLine",
    "ParsedBlock",
    "SetupLine",
    "block_key",
    "iter_events",
    "parse_namespace",
    "parse_progress",
    "parse_result_blocks",
    "strip_ansi",
]
