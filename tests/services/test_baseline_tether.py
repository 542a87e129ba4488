"""A baseline run on a node that is not local ties its instance to the node's tether (W2): the
instance carries the tether's lifeline, and a tether lost mid-run (the link dropped) ends the
instance on the node and the run in one line naming the node, never with the numbers of a
half-run suite. The node is a simulated one under an SSH node's spec, reached through the local
transport: the real agent, supervisor, tether and simulated vLLM."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path

import pytest

from console.cli.common import PRESETS_PATH
from console.core.baseline.suite import parse_suite
from console.core.profiles import load_profile
from console.services.baseline import BaselineError, BaselineRunner
from console.services.demo import ENV
from console.services.transports import TransportPool
from console.transport.local import LocalTransport
from tests.agent.test_supervisor import alive, wait_until

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SUITE = """
[suite]
repeats = 3
[serve]
preset = "tiny"
[[point]]
name = "c2"
preset = "tiny"
concurrency = 2
num_prompts = 4
"""


@pytest.mark.timeout(120)
async def test_a_run_whose_tether_is_lost_ends_its_instance_and_says_so(sim_node, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    monkeypatch.delenv(ENV, raising=False)  # this process ties nothing: only the node's tether does
    node = sim_node("far", transport="ssh", host="far.example", state_dir=str(tmp_path / "far"), seed=3)
    profile = dataclasses.replace(load_profile([PRESETS_PATH]), nodes=(node,))
    folder = tmp_path / "far" / "instances" / "baseline-small"
    runner = BaselineRunner(TransportPool(lambda n: LocalTransport(n.name)))
    seen: dict[str, int] = {}

    def say(line: str) -> None:
        if line.endswith("baseline-small ready") and not seen:
            seen["instance"] = int((folder / "pid").read_text())
            token = json.loads((folder / "spec.json").read_text())["env"][ENV]
            seen["tether"] = int(token.split(":")[0])
            assert seen["tether"] != os.getpid()
            os.kill(seen["tether"], signal.SIGKILL)  # as if the link to the node had dropped

    try:
        with pytest.raises(BaselineError) as err:
            await runner.run(node, parse_suite(SUITE, "small.toml"), profile, suite_text=SUITE, say=say)
    finally:
        await runner.pool.close()
    assert seen, "the suite's instance never came up"
    assert str(err.value).startswith("far: the link to the node was lost (")
    assert str(err.value).endswith("the node stopped what this command started")
    assert wait_until(lambda: not alive(seen["instance"]), timeout=8)
