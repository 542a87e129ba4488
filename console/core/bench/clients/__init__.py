"""Outside serving-benchmark clients (issue B2): GuideLLM and AIPerf, beside `vllm bench serve`.

Each module parses one client's real output (progress lines, result files) into the result
object vLLM's client writes, so a run of any client is stored, compared and checked the same
way. ``client_of`` names the client of a parsed JSON document (for `results import`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from console.core.bench.clients import aiperf, guidellm
from console.core.bench.output_events import BenchProgress
from console.core.node_json import loads_document

__all__ = ["OUTSIDE", "as_vllm_text", "client_of", "client_of_argv", "outside_results", "progress_of"]

OUTSIDE = (guidellm.NAME, aiperf.NAME)
_COUNT_RE = re.compile(r"kind=max_requests,count=(\d+)")  # GuideLLM's request count in its argv


def client_of(obj: object) -> str | None:
    """Name "guidellm" / "aiperf" when obj is that client's result file as JSON, else None."""
    if guidellm.is_result(obj):
        return guidellm.NAME
    if aiperf.is_result(obj):
        return aiperf.NAME
    return None


def outside_results(obj: object) -> list[dict] | None:
    """vLLM-shaped result objects of an outside client's result file (None: not one)."""
    client = client_of(obj)
    if client == guidellm.NAME:
        return guidellm.results(obj)  # type: ignore[arg-type]
    if client == aiperf.NAME:
        return aiperf.results(obj)  # type: ignore[arg-type]
    return None


def client_of_argv(argv: Sequence[str]) -> tuple[str, int | None] | None:
    """(client, requests asked) when a run's argv starts an outside client (by its executable's
    name and subcommand, first or after an interpreter and a script: the demo's simulated
    GuideLLM is `python3 <sim>/vllm guidellm run ...`), else None; GuideLLM prints no total, so
    it is read from the argv."""
    for at in (0, 2):
        if len(argv) < at + 2:
            return None
        exe = argv[at].rsplit("/", 1)[-1]
        if exe.startswith(guidellm.NAME) and argv[at + 1] == "run":
            total = next((int(m.group(1)) for a in argv if (m := _COUNT_RE.search(a))), None)
            return guidellm.NAME, total
        if exe.startswith(aiperf.NAME) and argv[at + 1] == "profile":
            return aiperf.NAME, None
    return None


def progress_of(client: str, line: str, total: int | None = None) -> BenchProgress | None:
    """The live panel's progress from one line of an outside client's log (None: not progress)."""
    elapsed = None
    if client == aiperf.NAME:
        found = aiperf.progress(line)
        if found is None:
            return None
        done, total = found
    else:
        seen = guidellm.progress(line)
        if seen is None:
            return None
        done, elapsed = seen
    total = total or 0
    pct = 100.0 * done / total if total else 0.0
    return BenchProgress(done, total, pct, elapsed, None, None, line[-200:], desc=client)


def as_vllm_text(text: str | None) -> str | None:
    """An outside client's result file as the JSON vLLM's client writes (the last benchmark of a
    GuideLLM sweep: one run, one result); None when there is none or it is no such file."""
    if text is None:
        return None
    try:
        found = outside_results(loads_document(text))
    except ValueError:
        return None
    return json.dumps(found[-1]) if found else None
