"""Outside serving-benchmark clients (GuideLLM, AIPerf) run like `vllm bench serve` (issue B2).

The serving kind (serving.py) starts, follows and collects the run as for vLLM's client; this
module gives it the client's run spec: its argv (console/core/bench/clients/argv.py, the
preset's client_path else the client's name on the node's PATH), its environment, and the
refusal on a simulated node (whose simulator has a GuideLLM, not AIPerf). The serving reader turns the client's progress lines and result
file into vLLM's (console/core/bench/clients) before it measures the run: the client check
against the server's /metrics, the prefix-cache share and goodput are one code for every client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

from console.core.bench.clients import aiperf, client_of_argv, guidellm
from console.core.bench.clients.argv import outside_argv
from console.core.bench.result import normalize_result
from console.core.model import BenchPreset, NodeSpec
from console.services.agent_bundle import AgentCommand
from console.services.runs import run as run_api
from console.transport.base import RESULT_FILE_LIMIT, TransportError

__all__ = ["client_command", "refusal", "simulated", "spec_for", "with_records"]

OutcomeT = TypeVar("OutcomeT", bound=run_api.Outcome)

# The environment AIPerf 0.13 must not get: with HF_HUB_OFFLINE set it looks a local tokenizer
# folder up as a hub repo id and fails (tests/fixtures/clients/README.md).
_AIPERF_DROP_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def simulated(node: NodeSpec) -> bool:
    """A node whose `vllm` is the console's simulator (the demo's nodes)."""
    return node.simulate is not None and node.vllm == "vllm"


def refusal(node: NodeSpec, preset: BenchPreset) -> str | None:
    """One line when the node cannot run the preset's client: the simulator has a GuideLLM of
    its own (sim/vllm/guidellm_sim.py), not AIPerf."""
    if preset.client == aiperf.NAME and simulated(node) and preset.client_path is None:
        return f'{node.name}: client {preset.client} does not run on a simulated node (use client = "vllm-bench")'
    return None


def client_command(node: NodeSpec, cmd: AgentCommand, preset: BenchPreset) -> tuple[str, ...]:
    """The client's command: the preset's client_path, else the simulator's GuideLLM on a
    simulated node, else the client's name on the node's PATH."""
    if preset.client_path:
        return (preset.client_path,)
    if preset.client == guidellm.NAME and simulated(node):
        return (*cmd.vllm, "guidellm")
    return (preset.client,)


def spec_for(
    node: NodeSpec,
    cmd: AgentCommand,
    preset: BenchPreset,
    *,
    name: str,
    base_url: str,
    model: str,
    tokenizer: str | None,
    max_concurrency: int | None,
    instance: str,
    extra_env: Mapping[str, str] | None,
) -> run_api.RunSpec:
    """The run spec of GuideLLM / AIPerf; ValueError naming what it cannot honour (the node, a
    preset key)."""
    refused = refusal(node, preset)
    if refused is not None:
        raise ValueError(refused)
    argv = outside_argv(
        preset,
        client_cmd=client_command(node, cmd, preset),
        base_url=base_url,
        model=model,
        result_dir=run_api.NodeRuns.folder(cmd, name),
        max_concurrency=max_concurrency,
        tokenizer=tokenizer,
    )
    env = {**cmd.env_dict(), **(extra_env or {}), "COLUMNS": "100", "PYTHONUNBUFFERED": "1"}
    if preset.client == aiperf.NAME:
        for key in _AIPERF_DROP_ENV:
            env.pop(key, None)
    keys = {"instance": instance, "preset": preset.name, "max_concurrency": max_concurrency, "client": preset.client}
    return run_api.RunSpec(name, tuple(argv), env, keys)


async def with_records(node_runs: run_api.NodeRuns, node: NodeSpec, outcome: OutcomeT) -> OutcomeT:
    """An AIPerf run's outcome with its per-request figures (result.jsonl, beside the summary the
    run collected) in its result, so goodput is counted from them as for the other clients; any
    other outcome, or one whose records cannot be read, as it was."""
    found = client_of_argv(outcome.argv)
    result_json = outcome.result_json
    if found is None or found[0] != aiperf.NAME or not isinstance(result_json, dict):
        return outcome
    try:
        cmd = await node_runs.agent(node)
        path = f"{run_api.NodeRuns.folder(cmd, outcome.run)}/result.jsonl"
        read = await node_runs.pool.get(node).run(["cat", path], timeout=60, max_output=RESULT_FILE_LIMIT)
    except TransportError:
        return outcome
    records = aiperf.per_request(read.stdout) if read.ok else []
    if not records:
        return outcome
    full = {**result_json, **aiperf.records_arrays(records)}
    return dataclasses.replace(outcome, result_json=full, result=normalize_result(full))  # type: ignore[call-arg]  # RunOutcome has result
