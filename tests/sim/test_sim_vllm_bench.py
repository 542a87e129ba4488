"""`vllm.py bench serve`: the simulated vLLM 0.32 benchmark client, run as a subprocess against
the simulated server (also a subprocess), compared with real 0.32 captures."""

import ast
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "console" / "sim" / "vllm"  # a folder, run like on a node
SAMPLES = Path("/work/shared/samples/vllm-0.32-cpu")
FIXTURES = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu"
MODEL = "/srv/models/tiny-llama"

TQDM = re.compile(
    r"^ *(\d+)%\|([ \u2588-\u258f]*)\| (\d+)/(\d+) \[(\d\d:\d\d)<(\d\d:\d\d|\?), +"
    r"(\?|\d+\.\d\d)(it/s|s/it)\] *$"
)
ROW = re.compile(r"^(.{40}) (\S+) *$")


def sample(name):
    """Text of a real vLLM 0.32 capture: the shared samples, else the copy in tests/fixtures."""
    for folder in (SAMPLES, FIXTURES):
        if (folder / name).exists():
            return (folder / name).read_bytes().decode("utf-8")
    pytest.skip(f"real capture {name} not available")


def _clean_env(tmp_path, extra=None):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ROCM_CONSOLE_SIM", "VLLM_", "CUDA_VISIBLE", "HIP_VISIBLE", "OPENAI_API_KEY"))
    }
    env.update(
        {
            "ROCM_CONSOLE_SIM_VLLM_SPEEDUP": "20",
            "ROCM_CONSOLE_SIM_DIR": str(tmp_path / "node"),
            "CUDA_VISIBLE_DEVICES": "0",
        }
    )
    env.update(extra or {})
    return env


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # even if our parent ignores SIGINT


class Proc:
    def __init__(self, popen, out, err):
        self.popen = popen
        self.out_path = out
        self.err_path = err

    @property
    def pid(self):
        return self.popen.pid

    def stdout(self):
        return self.out_path.read_bytes().decode("utf-8", "replace")  # keep the \r of tqdm redraws

    def stderr(self):
        return self.err_path.read_bytes().decode("utf-8", "replace")

    def wait(self, timeout=60):
        return self.popen.wait(timeout=timeout)


@pytest.fixture
def procs(tmp_path):
    """Starts `vllm.py` subprocesses (serve or bench); kills what is left by pid at the end."""
    started = []

    def start(*argv, env=None, name=None):
        name = name or f"p{len(started)}"
        out, err = tmp_path / (name + ".out"), tmp_path / (name + ".err")
        with open(out, "wb") as fo, open(err, "wb") as fe:
            popen = subprocess.Popen(
                [sys.executable, str(SIM)] + [str(a) for a in argv],
                stdout=fo,
                stderr=fe,
                env=_clean_env(tmp_path, env),
                start_new_session=True,
                preexec_fn=_default_sigint,
            )  # noqa: PLW1509 (no threads here)
        proc = Proc(popen, out, err)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.popen.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.popen.wait(timeout=10)


@pytest.fixture
def server(procs):
    """A ready fake `vllm serve` of a tiny model on a free port of 127.0.0.1."""

    def start(*extra):
        port = free_port()
        srv = procs("serve", MODEL, "--host", "127.0.0.1", "--port", port, *extra, name=f"serve-{port}")
        srv.port = port
        srv.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while "Application startup complete." not in srv.stderr() + srv.stdout():
            assert srv.popen.poll() is None and time.monotonic() < deadline, srv.stdout()[-2000:]
            time.sleep(0.02)
        return srv

    return start


def bench(procs, *args, name=None, env=None):
    return procs("bench", "serve", *args, name=name, env=env)


def finished(proc, timeout=90):
    rc = proc.wait(timeout)
    return rc, proc.stdout(), proc.stderr()


# ------------------------------------------------------------------------ parsing


def block_rows(stdout):
    """{label: value text} of the result block."""
    start = stdout.index("============ Serving Benchmark Result ============")
    rows = {}
    for line in stdout[start:].split("\n")[1:]:
        if line.startswith("=" * 50):
            break
        m = ROW.match(line)
        if m:
            rows[m.group(1).rstrip()] = m.group(2)
    return rows


def shape(line):
    """A stdout line without its numbers or install paths: the label of a result row, else the line."""
    if len(line) >= 51 and line[40] == " " and line[:40].rstrip().endswith(":"):
        return line[:40].rstrip()
    line = re.sub(r'File "[^"]*/(?:site|dist)-packages/', 'File "SITE/', line)
    line = re.sub(r'File "[^"]*/python3\.\d+/', 'File "PYLIB/', line)
    return re.sub(r"\d+", "N", line)


def report_shape(stdout):
    """The lines from `Starting initial single prompt test run...` to the block's end."""
    lines = stdout.replace("\r\n", "\n").split("\n")
    first = lines.index("Starting initial single prompt test run...")
    last = max(i for i, line in enumerate(lines) if line == "=" * 50)
    keep = [
        line
        for line in lines[first : last + 1]
        if not line.startswith("\r") and TQDM.match(line) is None and line.strip()
    ]
    return [shape(line) for line in keep]


def namespace_keys(stdout):
    line = next(line for line in stdout.split("\n") if line.startswith("Namespace("))
    return re.findall(r"(?:\(|, )([a-z_]+)=", line)


def tqdm_frames(stderr):
    assert stderr.startswith("\r"), repr(stderr[:80])
    frames = [f.rstrip("\n") for f in stderr.split("\r")[1:]]
    parsed = []
    for frame in frames:
        m = TQDM.match(frame)
        assert m, repr(frame)
        parsed.append((int(m.group(3)), int(m.group(4))))
    return frames, parsed


ATTRS = {"TTFT": "ttft", "TPOT": "tpot", "ITL": "itl", "E2EL": "e2el"}
SCALARS = {
    "Successful requests:": "completed",
    "Failed requests:": "failed",
    "Maximum request concurrency:": "max_concurrency",
    "Benchmark duration (s):": "duration",
    "Total input tokens:": "total_input_tokens",
    "Total generated tokens:": "total_output_tokens",
    "Request throughput (req/s):": "request_throughput",
    "Request goodput (req/s):": "request_goodput",
    "Output token throughput (tok/s):": "output_throughput",
    "Peak output token throughput (tok/s):": "max_output_tokens_per_s",
    "Peak concurrent requests:": "max_concurrent_requests",
    "Total token throughput (tok/s):": "total_token_throughput",
    "Request rate configured (RPS):": "request_rate",
}


def assert_block_matches_json(rows, result):
    """Every printed value is the JSON value at the printed precision."""
    for label, text in rows.items():
        m = re.match(r"^(Mean|Median|P[\d.]+) (\w+) \(ms\):$", label)
        if m:
            kind = m.group(1)
            key = (
                f"{kind.lower()}_{ATTRS[m.group(2)]}_ms"
                if kind in ("Mean", "Median")
                else f"p{kind[1:]}_{ATTRS[m.group(2)]}_ms"
            )
        else:
            key = SCALARS[label]
        value = result[key]
        expected = f"{value:.2f}" if "." in text else str(value)
        assert text == expected, (label, text, value)


def peak_metrics(result):
    """vLLM's max_output_tokens_per_s / max_concurrent_requests from the detailed arrays."""
    ok = [i for i, e in enumerate(result["errors"]) if not e]
    t0 = min(result["start_times"][i] for i in ok)
    end = max(result["start_times"][i] + result["latencies"][i] for i in ok)
    n = math.ceil(end - t0) + 1
    tokens, conc = [0] * n, [0] * n
    for i in ok:
        t = result["start_times"][i] + result["ttfts"][i]
        times = [t]
        for gap in result["itls"][i]:
            t += gap
            times.append(t)
        for t in times:
            if 0 <= int(t - t0) < n:
                tokens[int(t - t0)] += 1
        s = result["start_times"][i] - t0
        for sec in range(int(s), int(s + result["latencies"][i]) + 1):
            conc[sec] += 1
    return float(max(tokens)), max(conc)


def max_overlap(result):
    """Most requests in flight at once, from their start times and latencies."""
    events = []
    for s, lat, err in zip(result["start_times"], result["latencies"], result["errors"]):
        if not err:
            events += [(s, 1), (s + lat, -1)]
    best = cur = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):
        cur += d
        best = max(best, cur)
    return best


# -------------------------------------------------------------------------- tests


def test_file_is_still_python38_syntax():
    for path in SIM.glob("*.py"):
        ast.parse(path.read_text(), feature_version=(3, 8))


def test_checkers_accept_the_real_capture():
    """The consistency checks used below hold for the real 0.32 stdout and result JSON pair."""
    raw = sample("bench_serve_stdout.raw")
    result = json.loads(sample("bench_result.json"))
    assert_block_matches_json(block_rows(raw), result)
    assert "Total token throughput (tok/s):" in block_rows(raw)  # lower-case t in 0.32


def test_run_looks_like_the_real_032_client(procs, server, tmp_path):
    srv = server()
    results = tmp_path / "results"
    proc = bench(
        procs,
        "--backend",
        "vllm",
        "--base-url",
        srv.url,
        "--model",
        MODEL,
        "--dataset-name",
        "random",
        "--random-input-len",
        64,
        "--random-output-len",
        16,
        "--num-prompts",
        24,
        "--max-concurrency",
        4,
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--ignore-eos",
        "--save-result",
        "--result-dir",
        results,
    )
    rc, out, err = finished(proc)
    assert rc == 0, err[-3000:]
    raw = sample("bench_serve_stdout.raw")

    # stdout: the same Namespace fields in the same order, the same lines and rows in the same order
    assert namespace_keys(out) == namespace_keys(raw)
    assert report_shape(out) == report_shape(raw)
    assert re.search(
        r"^\(MainProcess pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[utils\.py:88\] Sampling input_len "
        r"from \[64, 64\] and output_len from \[16, 16\]$",
        out,
        re.MULTILINE,
    )
    assert "WARNING: vllm bench serve no longer sets temperature==0 (greedy)" in out
    for line in out.split("\n"):
        if ROW.match(line) and line.split(":")[0] in ("Successful requests", "Mean TTFT (ms)"):
            assert len(line) == 51  # "{:<40} {:<10}"

    # stderr: only tqdm, redrawn with \r, counting up to n/total, then a newline
    assert err.endswith("\n") and err.count("\n") == 1
    frames, parsed = tqdm_frames(err)
    assert parsed[0] == (0, 24) and frames[0] == "  0%|          | 0/24 [00:00<?, ?it/s]"
    assert parsed[-1] == (24, 24) and frames[-1].startswith("100%|" + "\u2588" * 10 + "| 24/24 [")
    assert [n for n, _ in parsed] == sorted(n for n, _ in parsed)

    # the result JSON: 0.32's key set and order, values consistent with the block
    files = list(results.iterdir())
    assert len(files) == 1
    assert re.match(r"^vllm-infqps-concurrency4-tiny-llama-\d{8}-\d{6}\.json$", files[0].name), files[0].name
    result = json.loads(files[0].read_text())
    real = json.loads(sample("bench_result.json"))
    assert list(result) == list(real)
    for key, value in real.items():
        assert type(result[key]) is type(value) or {type(result[key]), type(value)} <= {int, float}, key
    assert_block_matches_json(block_rows(out), result)
    assert result["completed"] == 24 and result["failed"] == 0
    assert result["total_input_tokens"] == 24 * 64 and result["total_output_tokens"] == 24 * 16
    assert result["request_rate"] == "inf" and result["max_concurrency"] == 4 and result["label"] is None
    assert result["model_id"] == result["tokenizer_id"] == MODEL
    assert result["endpoint_type"] == result["backend"] == "vllm"
    assert len(result["latencies"]) == len(result["queue_times"]) == 24
    assert result["date"] in files[0].name


def test_concurrency_limit_and_peak_metrics(procs, server, tmp_path):
    srv = server()
    out_file = tmp_path / "r.json"
    proc = bench(
        procs,
        "--base-url",
        srv.url,
        "--model",
        MODEL,
        "--random-input-len",
        32,
        "--random-output-len",
        24,
        "--num-prompts",
        30,
        "--max-concurrency",
        3,
        "--save-result",
        "--save-detailed",
        "--result-filename",
        out_file,
    )
    rc, out, err = finished(proc)
    assert rc == 0, err[-3000:]
    result = json.loads(out_file.read_text())
    assert result["completed"] == 30
    assert_block_matches_json(block_rows(out), result)
    assert max_overlap(result) <= 3  # never more than --max-concurrency requests in flight
    assert all(len(itl) == 23 for itl in result["itls"]) and result["output_lens"] == [24] * 30
    # peak tok/s: vLLM's per-second buckets; "Peak concurrent requests": the true peak in flight,
    # never above --max-concurrency (vLLM's buckets showed 34 at concurrency 8 in a real capture)
    assert result["max_output_tokens_per_s"] == peak_metrics(result)[0]
    assert result["max_concurrent_requests"] == max_overlap(result) <= 3
    # TPOT = (e2el - ttft) / (output tokens - 1), as the block's mean
    tpots = [(lat - ttft) / 23 for lat, ttft in zip(result["latencies"], result["ttfts"])]
    assert result["mean_tpot_ms"] == pytest.approx(sum(tpots) / len(tpots) * 1000)
    assert result["input_lens"] == [32] * 30
    assert all(q >= 0 for q in result["queue_times"])


def test_no_server_every_request_fails_like_the_capture(procs):
    port = free_port()
    proc = bench(
        procs,
        "--backend",
        "vllm",
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--model",
        MODEL,
        "--random-input-len",
        64,
        "--random-output-len",
        16,
        "--num-prompts",
        5,
    )
    rc, out, err = finished(proc)
    assert rc == 0  # like vLLM: failed requests do not fail the command
    raw = sample("bench_fail_no_server.raw")
    assert namespace_keys(out) == namespace_keys(raw)
    sim_shape = report_shape(out)
    real_shape = [
        line
        for line in report_shape(raw)
        if "UserWarning" not in line and not line.startswith("  metrics, actual_output_lens")
    ]
    assert sim_shape == real_shape
    assert "WARNING: /tokenize unavailable, skipping alignment." in out
    assert out.count("\nError ") == 5
    assert (
        "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host "
        f"127.0.0.1:{port} ssl:default [Connect call failed ('127.0.0.1', {port})]"
    ) in out
    rows = block_rows(out)
    assert rows["Successful requests:"] == "0" and rows["Failed requests:"] == "5"
    assert "tip: install termplotlib" not in out
    assert "UserWarning: All requests failed." in err


def test_ready_check_failure_is_initial_test_run_failed(procs):
    port = free_port()
    proc = bench(
        procs,
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--model",
        MODEL,
        "--num-prompts",
        3,
        "--random-input-len",
        16,
        "--ready-check-timeout-sec",
        1,
    )
    rc, out, err = finished(proc)
    assert rc == 1
    assert "Waiting for endpoint to become up in 1 seconds" in out
    assert "[ready_checker.py:71] Endpoint is not ready. Error='aiohttp.client_exceptions.ClientConnectorError" in out
    assert "Starting main benchmark run..." not in out
    tail = err[err.index("Traceback (most recent call last):") :]
    assert tail.startswith('Traceback (most recent call last):\n  File "/usr/local/bin/vllm"')
    assert (
        "ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. "
        "Error: Traceback (most recent call last):"
    ) in tail
    assert tail.rstrip().endswith(f"[Connect call failed ('127.0.0.1', {port})]")


def test_ready_check_success_and_warmups(procs, server):
    srv = server()
    proc = bench(
        procs,
        "--base-url",
        srv.url,
        "--model",
        MODEL,
        "--num-prompts",
        6,
        "--random-input-len",
        16,
        "--random-output-len",
        4,
        "--ready-check-timeout-sec",
        10,
        "--num-warmups",
        2,
        "--metric-percentiles",
        "50,90,99.9",
        "--percentile-metrics",
        "e2el,ttft",
    )
    rc, out, err = finished(proc)
    assert rc == 0, err[-2000:]
    lines = out.split("\n")
    seq = [
        "Starting initial single prompt test run...",
        "Waiting for endpoint to become up in 10 seconds",
        "Initial test run completed.",
        "Warming up with 2 requests...",
        "Warmup run completed.",
        "Starting main benchmark run...",
    ]
    assert [line for line in lines if line in seq] == seq
    rows = block_rows(out)
    assert [k for k in rows if "(ms)" in k] == [
        "Mean TTFT (ms):",
        "Median TTFT (ms):",
        "P50 TTFT (ms):",
        "P90 TTFT (ms):",
        "P99.9 TTFT (ms):",
        "Mean E2EL (ms):",
        "Median E2EL (ms):",
        "P50 E2EL (ms):",
        "P90 E2EL (ms):",
        "P99.9 E2EL (ms):",
    ]
    assert "| 2/2 [" in err and "| 6/6 [" in err and " elapsed, " in err


def test_server_stopping_mid_run(procs, server, tmp_path):
    srv = server()
    out_file = tmp_path / "r.json"
    proc = bench(
        procs,
        "--base-url",
        srv.url,
        "--model",
        MODEL,
        "--random-input-len",
        32,
        "--random-output-len",
        64,
        "--num-prompts",
        40,
        "--max-concurrency",
        4,
        "--save-result",
        "--save-detailed",
        "--result-filename",
        out_file,
    )
    deadline = time.monotonic() + 30
    while True:
        done = [int(n) for n in re.findall(r"\| (\d+)/40 \[", proc.stderr())]
        if done and max(done) >= 6:
            break
        assert proc.popen.poll() is None and time.monotonic() < deadline, proc.stderr()[-2000:]
        time.sleep(0.02)
    os.kill(srv.pid, signal.SIGTERM)
    srv.wait(15)
    rc, out, err = finished(proc)
    assert rc == 0
    result = json.loads(out_file.read_text())
    assert result["completed"] >= 6 and result["failed"] > 0
    assert result["completed"] + result["failed"] == 40
    errors = [e for e in result["errors"] if e]
    assert len(errors) == result["failed"]
    assert all(
        ("ClientPayloadError: Response payload is not completed" in e)
        or ("ClientConnectorError: Cannot connect to host" in e)
        for e in errors
    )
    assert "Failed requests during benchmark run detected (capping to 10):" in out
    assert len(re.findall(r"^Error \d+: Traceback", out, re.MULTILINE)) == min(10, result["failed"])
    assert out.index("Failed requests during benchmark run") < out.index("Serving Benchmark Result")
    assert_block_matches_json(block_rows(out), result)
    assert "| 40/40 [" in err and "UserWarning" not in err


def test_disable_tqdm(procs, server):
    srv = server()
    proc = bench(
        procs,
        "--base-url",
        srv.url,
        "--model",
        MODEL,
        "--num-prompts",
        4,
        "--random-input-len",
        16,
        "--random-output-len",
        4,
        "--disable-tqdm",
    )
    rc, out, err = finished(proc)
    assert rc == 0 and err == ""
    assert block_rows(out)["Successful requests:"] == "4"


def test_model_from_server_chat_rate_goodput_metadata(procs, server, tmp_path):
    srv = server("--served-model-name", "tiny")
    results = tmp_path / "res"
    proc = bench(
        procs,
        "--base-url",
        srv.url,
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--num-prompts",
        8,
        "--random-input-len",
        24,
        "--random-output-len",
        6,
        "--request-rate",
        40,
        "--burstiness",
        0.5,
        "--goodput",
        "ttft:5000",
        "e2el:10000",
        "--metadata",
        "team=amd",
        "tp=1",
        "--label",
        "chatrun",
        "--save-result",
        "--result-dir",
        results,
    )
    rc, out, err = finished(proc)
    assert rc == 0, err[-2000:]
    assert "Model not specified, fetching first model from server...\n" in out
    assert f"First model name: tiny, first model id: {MODEL}\n" in out
    assert (
        "Traffic request rate: 40.0\nBurstiness factor: 0.5 (Gamma distribution)\n"
        "Maximum request concurrency: None\n" in out
    )
    rows = block_rows(out)
    assert rows["Request rate configured (RPS):"] == "40.00"
    assert "Maximum request concurrency:" not in rows
    assert list(rows).index("Request goodput (req/s):") == list(rows).index("Request throughput (req/s):") + 1
    (path,) = list(results.iterdir())
    assert re.match(r"^chatrun-40\.0qps-tiny-llama-\d{8}-\d{6}\.json$", path.name)
    result = json.loads(path.read_text())
    keys = list(result)
    assert keys[:10] == [
        "date",
        "endpoint_type",
        "backend",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "team",
        "tp",
        "request_rate",
    ]
    assert result["team"] == "amd" and result["tp"] == "1" and result["label"] == "chatrun"
    assert result["request_rate"] == 40.0 and result["burstiness"] == 0.5 and result["max_concurrency"] is None
    assert result["backend"] == "openai-chat" and result["model_id"] == MODEL
    assert result["completed"] == 8 and result["total_output_tokens"] == 48
    assert result["request_goodput"] == pytest.approx(result["request_throughput"])
    assert_block_matches_json(rows, result)
    assert "input_lens" not in result and "latencies" in result  # per-request arrays need --save-detailed


def test_sharegpt_dataset(procs, server, tmp_path):
    missing = tmp_path / "nope.json"
    rc, _, err = finished(bench(procs, "--model", MODEL, "--dataset-name", "sharegpt", "--dataset-path", missing))
    assert rc == 1
    assert err.rstrip().endswith(f"FileNotFoundError: [Errno 2] No such file or directory: {str(missing)!r}")
    assert 'with open(self.dataset_path, encoding="utf-8") as f:' in err
    data = [
        {
            "conversations": [
                {"from": "human", "value": f"tell me about the {n} GPU and its memory"},
                {"from": "gpt", "value": "it has a lot of fast memory for big models " * 2},
            ]
        }
        for n in ("MI300X", "MI325X", "MI355X")
    ]
    data.append({"conversations": [{"from": "human", "value": "too short"}]})
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    srv = server()
    rc, out, err = finished(
        bench(
            procs,
            "--base-url",
            srv.url,
            "--model",
            MODEL,
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            path,
            "--num-prompts",
            5,
        )
    )
    assert rc == 0, err[-2000:]
    assert "[datasets.py:324] Oversampled requests to reach 5 total samples." in out
    assert "/tokenize" not in out  # alignment is for the random dataset only
    assert block_rows(out)["Successful requests:"] == "5"


def test_argument_errors(procs):
    rc, out, err = finished(bench(procs, "--num-prompts", 3, "--bogus", "x"))
    assert rc == 2 and out == ""
    assert err.endswith("vllm: error: unrecognized arguments: --bogus x\n")
    assert err.startswith("usage: vllm [-h] [-v]\n")
    rc, out, err = finished(bench(procs, "--num-prompts", "many"))
    assert rc == 2
    assert err == (
        "usage: vllm bench serve [options]\nvllm bench <bench_type> [options] serve: error: argument "
        "--num-prompts: invalid int value: 'many'\n"
    )
    rc, out, err = finished(bench(procs, "--backend", "tgi"))
    assert rc == 2 and "argument --backend: invalid choice: 'tgi'" in err
    rc, out, err = finished(bench(procs, "--max-concurrency", 0))
    assert rc == 1 and out.startswith("Namespace(")
    assert err.endswith(
        '    raise ValueError("--max-concurrency must be greater than 0")\n'
        "ValueError: --max-concurrency must be greater than 0\n"
    )


def test_flags_the_console_uses_are_accepted(procs, server):
    srv = server()
    proc = bench(
        procs,
        "--backend",
        "openai",
        "--host",
        "127.0.0.1",
        "--port",
        srv.port,
        "--endpoint",
        "/v1/completions",
        "--tokenizer",
        MODEL,
        "--dataset-name",
        "random",
        "--random-input-len",
        16,
        "--random-output-len",
        4,
        "--random-range-ratio",
        0.5,
        "--random-prefix-len",
        4,
        "--num-prompts",
        6,
        "--request-rate",
        "inf",
        "--burstiness",
        1.0,
        "--max-concurrency",
        2,
        "--seed",
        7,
        "--ignore-eos",
        "--percentile-metrics",
        "ttft,tpot,itl",
        "--metric-percentiles",
        99,
        "--ready-check-timeout-sec",
        0,
        "--num-warmups",
        0,
        "--temperature",
        0,
        "--save-detailed",
        "--request-id-prefix",
        "rc-",
    )
    rc, out, err = finished(proc)
    assert rc == 0, err[-2000:]
    assert "Sampling input_len from [8, 24] and output_len from [2, 6]" in out
    assert "no longer sets temperature==0" not in out  # --temperature given
    assert ", model=None, " in out and f"tokenizer='{MODEL}'" in out and "request_id_prefix='rc-'" in out
    assert f"First model name: {MODEL}, first model id: {MODEL}\n" in out
    assert block_rows(out)["Successful requests:"] == "6"


def test_sigint_stops_like_keyboard_interrupt(procs, server):
    srv = server()
    proc = bench(
        procs,
        "--base-url",
        srv.url,
        "--model",
        MODEL,
        "--random-input-len",
        32,
        "--random-output-len",
        1500,
        "--num-prompts",
        16,
        "--max-concurrency",
        4,
    )
    deadline = time.monotonic() + 30
    while "| 0/16 [" not in proc.stderr():
        assert proc.popen.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGINT)
    rc, out, err = finished(proc, 20)
    assert rc == 130
    assert "Serving Benchmark Result" not in out
    assert out.rstrip().endswith("Maximum request concurrency: 4")
    assert err.count("Traceback (most recent call last):") == 2
    assert (
        "\nasyncio.exceptions.CancelledError\n\nDuring handling of the above exception, another exception "
        "occurred:\n" in err
    )
    assert "\nKeyboardInterrupt\n\r  0%|          | 0/16 [" in err
    assert err.endswith(
        "\nUnclosed client session\nclient_session: <aiohttp.client.ClientSession object at " + err.rsplit(" at ", 1)[1]
    )
    assert "Task was destroyed" not in err and "Exception ignored" not in err


def test_sigterm_ends_the_process_like_the_real_client(procs, server):
    srv = server()
    proc = bench(
        procs,
        "--base-url",
        srv.url,
        "--model",
        MODEL,
        "--random-input-len",
        32,
        "--random-output-len",
        1500,
        "--num-prompts",
        8,
    )
    deadline = time.monotonic() + 30
    while "| 0/8 [" not in proc.stderr():
        assert proc.popen.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(10) == -signal.SIGTERM  # no handler: killed by the signal, exit status 143


# ------------------------------------------------------------------------ prefix cache (issue B2)


def _metrics(url):
    import urllib.request

    from console.services.live_metrics import scrape_samples

    with urllib.request.urlopen(url + "/metrics", timeout=10) as reply:  # noqa: S310 (127.0.0.1)
        return scrape_samples(reply.read().decode("utf-8"))


def _post(url, path, env_note=""):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url + path, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 (127.0.0.1)
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


PREFIX_ARGS = (
    "--dataset-name", "prefix_repetition",
    "--prefix-repetition-prefix-len", 512, "--prefix-repetition-suffix-len", 16,
    "--prefix-repetition-num-prefixes", 2, "--prefix-repetition-output-len", 8,
    "--num-prompts", 16, "--max-concurrency", 1, "--seed", 7,
)  # fmt: skip


def _bench_run(procs, srv, tmp_path, name, *args):
    from console.core.bench.prefix_cache import prefix_cache_window

    out_file = tmp_path / f"{name}.json"
    before = _metrics(srv.url)
    proc = bench(
        procs, "--base-url", srv.url, *args,
        "--save-result", "--save-detailed", "--result-filename", out_file, name=name,
    )  # fmt: skip
    rc, out, err = finished(proc)
    assert rc == 0, err[-3000:]
    window = prefix_cache_window(before, _metrics(srv.url))
    return json.loads(out_file.read_text()), window, out


def _big_server(procs, env=None):
    """A simulated 70B model: its prefill takes long enough to see a cache hit in TTFT."""
    port = free_port()
    env = {"ROCM_CONSOLE_SIM_VLLM_SPEEDUP": "1", **(env or {})}
    srv = procs(
        "serve",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--max-model-len",
        4096,
        "--host",
        "127.0.0.1",
        "--port",
        port,
        env=env,
        name=f"big-{port}",
    )
    srv.url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while "Application startup complete." not in srv.stderr() + srv.stdout():
        assert srv.popen.poll() is None and time.monotonic() < deadline, srv.stdout()[-2000:]
        time.sleep(0.05)
    return srv


def test_prefix_repetition_hits_the_cache_and_answers_faster(procs, server, tmp_path):
    """The simulated server caches prompt prefixes: a prefix_repetition run (2 shared 512-token
    prefixes) is counted as hits in /metrics with vLLM 0.32's names and its TTFT is lower than a
    random run's of the same length; a random run hits nothing."""
    srv = _big_server(procs)
    cold, cold_window, _ = _bench_run(
        procs, srv, tmp_path, "random",
        "--random-input-len", 528, "--random-output-len", 8, "--num-prompts", 16, "--max-concurrency", 1,
    )  # fmt: skip
    assert cold_window is not None and cold_window.metric == "vllm:prefix_cache_queries"
    assert cold_window.hit_pct is not None and cold_window.hit_pct <= 5.0
    warm, window, out = _bench_run(procs, srv, tmp_path, "prefix", *PREFIX_ARGS)
    assert warm["completed"] == 16 and warm["input_lens"] == [528] * 16
    # 14 of 16 requests find their 512-token prefix (32 blocks of 16): 14 * 512 / (16 * 528) = 85 %
    assert window is not None and window.hit_pct >= 80.0
    assert warm["median_ttft_ms"] < cold["median_ttft_ms"] * 0.7
    # the same prompts again (the same seed): every full block is cached now
    _, again, _ = _bench_run(procs, srv, tmp_path, "again", *PREFIX_ARGS)
    assert again.hit_pct >= 95.0


def test_reset_prefix_cache_is_a_dev_route(procs, server, tmp_path):
    """POST /reset_prefix_cache: 404 as on a real server without VLLM_SERVER_DEV_MODE=1; with
    it the cache is emptied and the same prompts miss again."""
    srv = server()
    assert _post(srv.url, "/reset_prefix_cache")[0] == 404
    dev = procs(
        "serve", MODEL, "--host", "127.0.0.1", "--port", (port := free_port()), name="dev",
        env={"VLLM_SERVER_DEV_MODE": "1", "CUDA_VISIBLE_DEVICES": "1"},  # GPU 0 is the first server's
    )  # fmt: skip
    dev.url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while "Application startup complete." not in dev.stderr() + dev.stdout():
        assert dev.popen.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    _, first, _ = _bench_run(procs, dev, tmp_path, "one", *PREFIX_ARGS)
    assert _post(dev.url, "/reset_prefix_cache") == (200, {"success": True})
    _, after_reset, _ = _bench_run(procs, dev, tmp_path, "two", *PREFIX_ARGS)
    assert after_reset.hit_pct == pytest.approx(first.hit_pct)  # as cold as the first time, not 95+ %


def test_goodput_flag_and_the_consoles_count_agree(procs, server, tmp_path):
    """`--goodput` like the real client: request_goodput in the result, the same number the
    console counts from the per-request figures (one rule for every client)."""
    from console.core.bench.goodput import Slo, goodput_of
    from console.core.bench.result import normalize_result

    srv = server()
    result, _, out = _bench_run(
        procs, srv, tmp_path, "slo",
        "--random-input-len", 64, "--random-output-len", 8, "--num-prompts", 12, "--max-concurrency", 4,
        "--goodput", "ttft:1000", "e2el:5000",
    )  # fmt: skip
    assert "Request goodput (req/s):" in out
    mine = goodput_of(normalize_result(result), Slo(ttft_ms=1000, e2e_ms=5000))
    assert mine is not None and mine.source == "per-request"
    assert mine.good_rps == pytest.approx(result["request_goodput"])
    assert mine.goodput_pct == 100.0


def test_a_cache_salt_keeps_earlier_runs_blocks_from_matching(procs, server, tmp_path):
    """vLLM hashes a request's cache_salt into its first block: the same prompts under a fresh
    salt (`--extra-body`, the console's cold start) miss what an earlier run cached, as after a
    reset, while the run's own repeats still hit; the same salt again finds them all."""
    srv = server()
    _, first, _ = _bench_run(procs, srv, tmp_path, "one", *PREFIX_ARGS)
    salt = ("--extra-body", '{"cache_salt":"0a1b2c"}')
    _, salted, _ = _bench_run(procs, srv, tmp_path, "salted", *PREFIX_ARGS, *salt)
    assert salted.hit_pct == pytest.approx(first.hit_pct)  # as cold as the first time, not 95+ %
    _, again, _ = _bench_run(procs, srv, tmp_path, "again", *PREFIX_ARGS, *salt)
    assert again.hit_pct >= 95.0


def _post_json(url, path, body):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310 (127.0.0.1)
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_bad_cache_salt_is_vllms_400(procs, server):
    srv = server()
    status, body = _post_json(srv.url, "/v1/completions", {"prompt": "hi there", "max_tokens": 2, "cache_salt": "a/b"})
    assert status == 400 and "'cache_salt' must be at most 128 characters" in body["error"]["message"]
    status, body = _post_json(srv.url, "/v1/completions", {"prompt": "hi", "max_tokens": 2, "cache_salt": ""})
    assert status == 400 and "must be a non-empty string" in body["error"]["message"]


def test_a_conversations_next_turn_hits_on_its_history(procs, server):
    """Multi-turn chat (GuideLLM's and AIPerf's turns): each turn carries the conversation so far,
    and the simulated server finds that history in its prefix cache, as vLLM does."""
    srv = server()
    history = [{"role": "user", "content": " ".join(f"w{i}" for i in range(400))}]
    hits = []
    for turn in range(3):
        before = _metrics(srv.url)
        status, body = _post_json(srv.url, "/v1/chat/completions", {"messages": history, "max_tokens": 4})
        assert status == 200, body
        from console.core.bench.prefix_cache import prefix_cache_window

        hits.append(prefix_cache_window(before, _metrics(srv.url)).hits)
        reply = body["choices"][0]["message"]["content"]
        history = [*history, {"role": "assistant", "content": reply}, {"role": "user", "content": f"and then {turn}"}]
    assert hits[0] == 0  # a new conversation: nothing cached
    assert hits[1] >= 384 and hits[2] > hits[1]  # the 400-word first turn, then more of the history
