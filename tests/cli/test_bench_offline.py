"""`rocm-console bench latency|throughput|accuracy` as a user runs them on a simulated
node: stored runs, detach/attach, busy GPUs refused by name, bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.cli_helpers import one_line_error, run
from tests.helpers import free_port


@pytest.fixture
def lab(tmp_path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11, busy = [5] }}
""")
    return path


def _env(tmp_path: Path) -> dict:
    return {"ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}


def test_latency_preset_runs_on_free_gpus_and_is_stored(lab, tmp_path):
    proc = run(
        "bench",
        "latency",
        "--profile",
        str(lab),
        "--gpus",
        "0,1,2,3",
        "--preset",
        "seed001-405b-fp8-kv-tp8",
        "--json",
        env=_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    node_json = json.loads((tmp_path / "state" / "runs" / doc["context"]["offline_run"] / "result.json").read_text())
    assert doc["result"] == node_json and doc["metrics"]["latency_s"] == node_json["avg_latency"]
    assert doc["context"]["run_kind"] == "latency" and doc["context"]["gpus"] == [0, 1, 2, 3]
    assert doc["context"]["gpu_model"] == "AMD Instinct MI300X" and doc["setup"]["tp"] == 4  # TP = the GPUs given
    argv = doc["context"]["client_argv"]
    assert argv[argv.index("bench") + 1] == "latency"
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8" and argv[argv.index("--tensor-parallel-size") + 1] == "4"
    listing = run("results", "list", env=_env(tmp_path))
    assert "seed001-405b-fp8-kv-tp8: latency bs1 128/2048 = " in listing.stdout


def test_detach_then_attach_stores_the_run(lab, tmp_path):
    common = ["--profile", str(lab), "--gpus", "6", "--set", "model=/m/tiny-llama", "--set", "input_len=64"]
    common += ["--set", "output_len=32", "--set", "num_prompts=40"]
    start = run("bench", "throughput", *common, "--detach", env=_env(tmp_path))
    assert start.returncode == 0, start.stderr
    name = start.stdout.split()[1]
    assert f"follow: bench throughput --attach {name}" in start.stdout
    runs = run("bench", "runs", "--profile", str(lab), "--json")
    assert name in [r["name"] for r in json.loads(runs.stdout)["runs"]]
    listed = run("bench", "runs", "--profile", str(lab)).stdout
    assert next(line for line in listed.splitlines() if line.startswith(name)).endswith("throughput gpus 6")
    attach = run("bench", "throughput", "--profile", str(lab), "--attach", name, "--json", env=_env(tmp_path))
    assert attach.returncode == 0, attach.stderr
    doc = json.loads(attach.stdout)
    assert doc["setup"]["input_len"] == 64 and doc["setup"]["num_prompts"] == 40  # the preset it started with
    assert doc["metrics"]["throughput_tok_s"] == doc["result"]["tokens_per_second"]
    wrong = run("bench", "latency", "--profile", str(lab), "--attach", name)
    assert wrong.returncode == 2 and one_line_error(wrong) == f"rocm-console: sim: {name} is not a latency run"


def test_busy_gpus_are_refused_naming_what_holds_them(lab, tmp_path):
    tiny = ["--set", "model=/m/tiny-llama"]
    proc = run("bench", "latency", "--profile", str(lab), "--gpus", "4,5", *tiny)
    assert proc.returncode == 1
    assert one_line_error(proc).startswith("rocm-console: sim: GPU 5 is busy: process ")
    start = run(
        "serve",
        "start",
        "--profile",
        str(lab),
        "--preset",
        "tiny",
        "--gpus",
        "2",
        "--port",
        str(free_port()),
        "--name",
        "b",
    )
    assert start.returncode == 0, start.stderr
    try:
        proc = run("bench", "throughput", "--profile", str(lab), "--gpus", "2", "--per-gpu", *tiny, "--set=input_len=8")
        assert proc.returncode == 2  # the lengths are checked before the node is asked
        proc = run("bench", "latency", "--profile", str(lab), "--gpus", "1,2", *tiny)
        assert proc.returncode == 1
        assert one_line_error(proc) == "rocm-console: sim: GPU 2 already serves instance b"
    finally:
        run("serve", "stop", "b", "--profile", str(lab))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("latency", "--preset", "seed000-405b-fp8-tp8"),
            "bench latency: --gpus LIST is needed (the GPUs must be free)",
        ),
        (("latency", "--gpus", "0"), "bench latency: give --preset NAME or --set model=MODEL"),
        (
            ("latency", "--gpus", "0", "--preset", "nope"),
            "unknown latency preset 'nope' (known: seed000-405b-fp8-tp8, ",
        ),
        (
            ("latency", "--gpus", "0", "--set", "model=m", "--set", "batch_size=x"),
            "--set batch_size=x: expected a positive integer",
        ),
        (("throughput", "--gpus", "0", "--set", "model=m"), "bench throughput: --set input_len=N --set output_len=N"),
        (("latency", "--gpus", "0,0", "--set", "model=m"), "--gpus '0,0': expected distinct non-negative GPU indices"),
        (
            ("accuracy", "--instance", "x", "--limit", "0"),
            "rocm-console bench accuracy: argument --limit: '0': expected a whole number >= 1",
        ),
        (
            ("latency", "--gpus", "0", "--set", "model=m", "--set", "num_prompts=5"),
            "--set num_prompts: not used by bench latency (keys: model, tp, batch_size,",
        ),
        (
            ("latency", "--gpus", "0,1", "--set", "model=m", "--set", "tp=1"),
            "--set tp=1: --gpus 0,1 gives 2 (TP is the number of GPUs)",
        ),
        (
            ("latency", "--gpus", "0", "--set", "model=m", "--arg=--tensor_parallel_size=2"),
            "--arg --tensor_parallel_size=2: the console sets --tensor-parallel-size; use --set tp=...",
        ),
        (
            ("latency", "--attach", "r1", "--gpus", "0"),
            "--attach follows a run that is already started: --gpus does not apply",
        ),
        (
            ("latency", "--gpus", "0", "--set", "model=m", "--client", "subcommand", "--scripts-dir", "/x"),
            "--scripts-dir is where",
        ),
        (
            ("latency", "--gpus", "0", "--set", "model=m", "--label", "a", "--no-store"),
            "--label is stored with the result",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(lab, args, message):
    proc = run("bench", *args, "--profile", str(lab))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    if not message.startswith("rocm-console"):
        message = "rocm-console: " + message
    assert one_line_error(proc).startswith(message)


def test_accuracy_against_a_missing_instance_is_one_line(lab, tmp_path):
    proc = run("bench", "accuracy", "--profile", str(lab), "--instance", "ghost", "--lm-eval", "/bin/true")
    assert proc.returncode == 1
    assert one_line_error(proc) == "rocm-console: sim: no instance named ghost"


def test_list_presets_names_the_seed_commands():
    proc = run("bench", "throughput", "--list-presets")
    assert proc.returncode == 0
    assert "seed000-cpx-8b-fp8" in proc.stdout and "amd/Llama-3.1-8B-Instruct-FP8-KV  TP1  4096/512 n100" in proc.stdout


def test_offline_run_is_compared_with_the_seeds_table(profile, tmp_path):
    proc = run(
        "bench",
        "latency",
        "--profile",
        str(profile),
        "--gpus",
        "0,1,2,3,4,5,6,7",
        "--preset",
        "seed000-405b-fp8-tp8",
        "--set",
        "num_iters=3",
        env=_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert "  seed 000 reference (MI300X TP8): 48.453 latency_s" in proc.stdout
    run_id = next(line.split()[-1] for line in proc.stdout.splitlines() if "stored as" in line)
    compare = run("results", "compare", run_id, "--reference", "--json", env=_env(tmp_path))
    doc = json.loads(compare.stdout)
    assert [r["id"] for r in doc["references"]] == ["seed000-latency-llama3.1-405b-fp8-tp8-bs1-128-2048"]
    rows = {r["key"]: r for r in doc["rows"]}
    assert rows["latency_s"]["values"][1] == 48.453 and rows["batch_size"]["values"] == [1, 1]
    assert rows["run_kind"]["values"] == ["latency", "latency"]


def test_old_vllm_runs_the_seed_script_with_the_seed_flags(profile, tmp_path):
    """--client script (what a node with vLLM < 0.10 gets): `python3 DIR/benchmark_throughput.py` with the
    seed's own flags, --num-scheduler-steps included. The stand-in script records its argv and writes
    the 0.6.3 JSON keys."""
    scripts = tmp_path / "benchmarks"
    scripts.mkdir()
    (scripts / "benchmark_throughput.py").write_text(
        "import json, sys\n"
        "out = sys.argv[sys.argv.index('--output-json') + 1]\n"
        "print('Throughput: 1.00 requests/s, 2176.00 tokens/s')\n"
        "json.dump({'elapsed_time': 100.0, 'num_requests': 100, 'total_num_tokens': 217600,\n"
        "           'requests_per_second': 1.0, 'tokens_per_second': 2176.0, 'argv': sys.argv[1:]}, open(out, 'w'))\n"
    )
    proc = run(
        "bench",
        "throughput",
        "--profile",
        str(profile),
        "--gpus",
        "3",
        "--preset",
        "seed000-cpx-8b-fp8",
        "--client",
        "script",
        "--scripts-dir",
        str(scripts),
        "--json",
        env=_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    argv = doc["result"]["argv"]
    assert argv[argv.index("--num-scheduler-steps") + 1] == "10"  # kept for the old script
    assert argv[argv.index("--input-len") + 1] == "4096" and "--random-input-len" not in argv
    assert doc["setup"]["client"] == "script" and doc["metrics"]["throughput_tok_s"] == 2176.0


def test_an_offline_run_title_names_its_overrides(lab, tmp_path):
    proc = run(
        "bench", "latency", "--profile", str(lab), "--gpus", "0,1,2,3", "--preset", "seed001-405b-fp8-kv-tp8",
        "--set", "batch_size=2", "--json", env=_env(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["context"]["bench_overrides"] == {"batch_size": "2"}
    title = doc["context"]["title"]
    assert title.startswith("seed001-405b-fp8-kv-tp8 · ") and "2" in title.split(" · ", 1)[1]
