"""`rocm-console bench run|sweep` as a user runs it: results stored, bad input is exit 2."""

from __future__ import annotations

import json

import pytest

from tests.cli.cli_helpers import one_line_error, run
from tests.helpers import free_port


def test_bench_run_and_sweep_store_results(profile, tmp_path):
    env = {"ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    start = run(
        "serve",
        "start",
        "--profile",
        str(profile),
        "--preset",
        "tiny",
        "--gpus",
        "2",
        "--port",
        str(free_port()),
        "--name",
        "b",
        "--wait",
        "--timeout",
        "60",
    )
    assert start.returncode == 0, start.stderr
    try:
        one = run("bench", "run", "--profile", str(profile), "--instance", "b", "--preset", "tiny", "--json", env=env)
        assert one.returncode == 0, one.stderr
        doc = json.loads(one.stdout)
        assert doc["metrics"]["completed"] == 20 and doc["context"]["instance"] == "b"
        assert doc["context"]["compute_partition"] == "SPX" and doc["context"]["gpu_model"] == "AMD Instinct MI300X"
        # issue P: the run's GPU 2 over the run, its energy and the client's self-check
        assert doc["energy"]["gpus"][0]["gpu"] == 2 and doc["energy_j"] > 0 and doc["avg_power_w"] > 0
        assert doc["tokens_per_joule"] == pytest.approx(
            doc["result"]["total_output_tokens"] / doc["energy_j"], rel=1e-5
        )
        assert doc["client_check"]["requests"]["client"] == 20 and doc["client_bound"] is False
        assert "throttled_pct" in doc and doc["telemetry"]["gpus"][0]["gpu"] == 2
        sweep = run(
            "bench",
            "sweep",
            "--profile",
            str(profile),
            "--instance",
            "b",
            "--preset",
            "tiny",
            "--concurrency",
            "1,2",
            "--set",
            "num_prompts=6",
            env=env,
        )
        assert sweep.returncode == 0, sweep.stderr
        assert "concurrency  output tok/s" in sweep.stdout
        listed = run("results", "list", "--json", env=env)
        assert len(json.loads(listed.stdout)["runs"]) == 3
        bad = run("bench", "run", "--profile", str(profile), "--instance", "nope", "--preset", "tiny", env=env)
        assert bad.returncode == 2 and "no instance named nope" in one_line_error(bad)
        bad = run("bench", "sweep", "--profile", str(profile), "--instance", "b", "--preset", "tiny", env=env)
        assert bad.returncode == 2 and "--concurrency" in one_line_error(bad)
        # U: requests longer than the instance's --max-model-len 2048: refused before any request
        # (it used to be a stored run of 20 "400 Bad Request"), both numbers in one line
        long = run("bench", "run", "--profile", str(profile), "--instance", "b", "--preset", "tiny",
                   "--set", "input_len=2000", "--set", "output_len=100", env=env)  # fmt: skip
        assert long.returncode != 0
        assert one_line_error(long).endswith(
            "tiny: requests of up to 2000 + 100 = 2100 tokens do not fit instance b's max_model_len 2048; "
            "lower input_len/output_len (--set input_len=...) or serve with a larger --max-model-len"
        )
        assert len(json.loads(run("results", "list", "--json", env=env).stdout)["runs"]) == 3  # nothing stored
    finally:
        run("serve", "stop", "b", "--profile", str(profile))
