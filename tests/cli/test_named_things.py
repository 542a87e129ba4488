"""Every command that acts on a named thing fails (exit != 0, one line naming it) when the thing
is not there: instances, groups, benchmark runs, stored results, GPUs, experiment states.
On a simulated node here; serve stop / bench cancel over the real sshd in tests/integration."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.cli_helpers import one_line_error, run

EXPERIMENT = Path(__file__).resolve().parents[2] / "profiles" / "experiments" / "llama-3.1-8b-layouts.toml"


@pytest.fixture
def env(tmp_path) -> dict:
    return {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("serve", "stop", "ghost"), 1, "sim: no instance named ghost"),
        (("serve", "logs", "ghost"), 1, "sim: no instance named ghost"),
        (("serve", "stop", "--group", "ghosts"), 2, "no group named ghosts on sim"),
        (("bench", "cancel", "ghost-run"), 1, "sim: no benchmark run named ghost-run (bench runs lists them)"),
        (("bench", "latency", "--attach", "ghost-run"), 2, "sim: no benchmark run named ghost-run"),
        (("results", "fetch", "ghost-run"), 1, "sim: no benchmark run named ghost-run (bench runs lists them)"),
        (
            ("partition", "set", "--node", "sim", "--gpus", "9", "--compute", "CPX", "--yes"),
            2,
            "--gpus '9': no physical GPU 9 (the node has 8)",
        ),
        (("bench", "run", "--instance", "ghost", "--preset", "tiny"), 2, "sim: no instance named ghost"),
    ],
)
def test_a_name_the_node_does_not_know(profile, env, args, code, message):
    proc = run(*args, "--profile", str(profile), env=env)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert one_line_error(proc) == f"rocm-console: {message}"


@pytest.mark.parametrize("action", [("show",), ("export", "--format", "json"), ("delete",), ("compare",)])
def test_a_stored_run_that_does_not_exist(env, action):
    proc = run(
        "results", action[0], "zzz-no-run", *action[1:], *(["zzz-other"] if action[0] == "compare" else []), env=env
    )
    assert proc.returncode == 2
    assert one_line_error(proc) == "rocm-console: no stored run 'zzz-no-run' (results list shows the ids)"


def test_delete_checks_every_id_before_deleting_any(env, tmp_path):
    imported = run(
        "results",
        "import",
        str(Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu" / "bench_result.json"),
        env=env,
    )
    assert imported.returncode == 0, imported.stderr
    [run_id] = [line.split()[1] for line in imported.stdout.splitlines() if line.startswith("imported ")]
    typo = run("results", "delete", run_id, "zzz-typo", env=env)
    assert typo.returncode == 2 and "no stored run 'zzz-typo'" in one_line_error(typo)
    assert run_id in run("results", "list", env=env).stdout  # nothing half-deleted
    gone = run("results", "delete", run_id, env=env)
    assert gone.returncode == 0 and gone.stdout == f"deleted {run_id}\n"
    assert run("results", "delete", run_id, env=env).returncode == 2


def test_an_experiment_report_without_a_state(profile, env, tmp_path):
    proc = run("experiment", "report", str(EXPERIMENT), "--demo", "--state", str(tmp_path / "none.json"), env=env)
    assert proc.returncode == 2
    assert one_line_error(proc).startswith(f"rocm-console: {tmp_path / 'none.json'}: no state: run ")
