"""Integer (and rate) settings have documented upper bounds (console/core/bounds.py,
docs/benchmarks.md): past one, `--set`, `--concurrency` or a preset file is one line naming
the key and the bound, exit 2, before any node is asked (issue W2 item 10:
`--set num_prompts=99999999999999999999999` was accepted and ran until cancelled)."""

from __future__ import annotations

import pytest

from console.core import bounds
from tests.cli.cli_helpers import one_line_error, run

HUGE = "99999999999999999999999"


@pytest.fixture
def env(tmp_path) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(home / "c")}


BENCH = ["bench", "run", "--demo", "--node", "mi300x-spx", "--instance", "any", "--preset", "tiny"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*BENCH, "--set", f"num_prompts={HUGE}"], f"--set num_prompts={HUGE}: must be at most 1000000, got {HUGE}"),
        ([*BENCH, "--set", "input_len=2000000"], "--set input_len=2000000: must be at most 1048576, got 2000000"),
        ([*BENCH, "--set", f"random_output_len={HUGE}"], f"--set random_output_len={HUGE}: must be at most 1048576"),
        ([*BENCH, "--set", "max_concurrency=70000"], "--set max_concurrency=70000: must be at most 65536"),
        ([*BENCH, "--set", "seed=4294967296"], "--set seed=4294967296: must be at most 4294967295"),
        ([*BENCH, "--set", "request_rate=1e9"], "--set request_rate=1e9: must be at most 1e+06"),
        ([*BENCH, "--set", "burstiness=5000"], "--set burstiness=5000: must be at most 1000"),
        ([*BENCH, "--concurrency", HUGE], f"--concurrency {HUGE}: must be at most 65536"),
        (
            ["bench", "sweep", *BENCH[2:], "--concurrency", f"1,4,{HUGE}"],
            f"--concurrency '1,4,{HUGE}': must be at most 65536",
        ),
        (
            ["bench", "throughput", "--demo", "--node", "mi300x-spx", "--gpus", "0", "--set", "model=/m"]
            + ["--set", "input_len=128", "--set", "output_len=128", "--set", f"num_prompts={HUGE}"],
            f"--set num_prompts={HUGE}: must be at most 1000000",
        ),
        (
            ["serve", "start", "--demo", "--node", "mi300x-spx", "--preset", "tiny", "--set", f"tp={HUGE}"],
            f"--set tp={HUGE}: the tensor-parallel size must be at most 1024",
        ),
    ],
)
def test_a_value_past_its_bound_is_one_line_exit_2(env, args, message):
    proc = run(*args, env=env)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"rocm-console: {message}"), line


def test_a_value_at_its_bound_is_accepted(env):
    """The bound itself is allowed: the run goes on to look for the instance."""
    proc = run(*BENCH, "--set", f"num_prompts={bounds.NUM_PROMPTS}", "--set", f"seed={bounds.SEED}", env=env)
    assert "must be at most" not in proc.stderr


def test_a_preset_file_past_a_bound_names_the_file_and_key(tmp_path, env):
    lab = tmp_path / "lab.toml"
    lab.write_text(
        f'[nodes.sim]\ntransport = "local"\nsimulate = {{ gpu = "MI300X", count = 8 }}\n\n'
        f"[bench.big]\nnum_prompts = {HUGE}\ninput_len = 128\noutput_len = 128\n"
    )
    proc = run("bench", "run", "--profile", str(lab), "--instance", "x", "--preset", "big", env=env)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"rocm-console: {lab}:6: [bench.big] key 'num_prompts': must be at most 1000000, got {HUGE}"
    )
