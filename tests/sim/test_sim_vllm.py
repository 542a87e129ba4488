"""The simulated `vllm` command, run as a subprocess like the node agent runs it."""

import ast
import glob
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import free_port

SIM = Path(__file__).resolve().parents[2] / "console" / "sim" / "vllm"  # a folder, run like on a node
MiB = 1 << 20

TTFT_LE = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
]
ITL_LE = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
REQUEST_LE = [
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
]
LINE = re.compile(
    r"^\((APIServer|EngineCore|Worker|Worker_TP\d+) pid=\d+\) (INFO|WARNING|ERROR) "
    r"\d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+\.py:\d+\] "
)


class Served:
    def __init__(self, proc, port, log_path, sim_dir):
        self.proc = proc
        self.port = port
        self.log_path = log_path
        self.sim_dir = sim_dir

    def log(self):
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, text, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return True
            if self.proc.poll() is not None:
                return text in self.log()
            time.sleep(0.02)
        return False

    def wait_ready(self):
        assert self.wait_for("Application startup complete."), self.log()[-3000:]
        return self

    def wait_exit(self, timeout=15.0):
        return self.proc.wait(timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            hdrs = {"content-type": "application/json"} if data is not None else {}
            hdrs.update(headers or {})
            conn.request(method, path, data, hdrs)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def json(self, method, path, body=None):
        status, _, raw = self.request(method, path, body)
        return status, json.loads(raw)

    def metrics(self):
        status, headers, raw = self.request("GET", "/metrics")
        assert status == 200
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        return {f.name: f for f in text_string_to_metric_families(raw.decode())}

    def processes(self):
        path = self.sim_dir / "processes.json"
        return json.loads(path.read_text()) if path.exists() else []

    def mine(self):
        return [e for e in self.processes() if e.get("pid") == self.proc.pid]


@pytest.fixture
def serve(tmp_path):
    """Start `vllm.py serve` on a free port; every process started is killed by pid at the end."""
    procs = []

    def start(
        *args,
        model="/srv/models/tiny-llama",
        env=None,
        port=None,
        speedup="20",
        cvd="0",
        python=sys.executable,
        command="serve",
        host="127.0.0.1",
    ):
        port = port or free_port()
        log_path = tmp_path / ("serve-%d.log" % len(procs))
        full_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ROCM_CONSOLE_SIM", "VLLM_", "CUDA_VISIBLE", "HIP_VISIBLE"))
        }
        full_env.update(
            {
                "ROCM_CONSOLE_SIM_VLLM_SPEEDUP": speedup,
                "ROCM_CONSOLE_SIM_DIR": str(tmp_path / "node"),
                "CUDA_VISIBLE_DEVICES": cvd,
            }
        )
        full_env.update(env or {})
        argv = [python, str(SIM), command]
        if command == "serve":
            argv += [model, "--host", host, "--port", str(port)]
        argv += list(args)
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
        procs.append(proc)
        return Served(proc, port, log_path, tmp_path / "node")

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def sse(raw):
    events = [block for block in raw.decode().split("\n\n") if block.strip()]
    assert all(e.startswith("data: ") for e in events), events
    payloads = [e[len("data: ") :] for e in events]
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def sample_value(families, family, sample_name, **labels):
    for s in families[family].samples:
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError((family, sample_name, labels))


def les(families, family):
    return [
        float(s.labels["le"])
        for s in families[family].samples
        if s.name == family + "_bucket" and s.labels["le"] != "+Inf"
    ]


# ------------------------------------------------------------------------- the file


def test_package_is_self_contained_python38():
    """Every module parses as Python 3.8, imports only the stdlib and its siblings (never console)."""
    sources = sorted(SIM.glob("*.py"))
    assert {"__init__.py", "__main__.py", "cli.py", "server.py"} <= {p.name for p in sources}
    siblings = {p.stem for p in sources}
    modules = set()
    for path in sources:
        tree = ast.parse(path.read_text(), feature_version=(3, 8))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.level == 1 and node.module in siblings, (path.name, node.module)
                else:
                    modules.add(node.module.split(".")[0])
    assert "console" not in modules
    assert modules <= set(sys.stdlib_module_names), modules - set(sys.stdlib_module_names)


def _python38():
    candidates = [shutil.which("python3.8")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    for exe in candidates:
        if not exe:
            continue
        try:
            out = subprocess.run(
                [exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, timeout=20
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 8)":
            return exe
    return None


def test_runs_on_python38(serve):
    exe = _python38()
    if exe is None:
        pytest.skip("no Python 3.8 interpreter here")
    srv = serve(python=exe).wait_ready()
    status, body = srv.json("POST", "/v1/completions", {"prompt": "on an old node", "max_tokens": 4})
    assert status == 200 and body["usage"]["completion_tokens"] == 4
    srv.proc.send_signal(signal.SIGINT)
    assert srv.wait_exit(10) == 0


# ------------------------------------------------------------------------ startup


def test_refuses_connections_while_loading_then_ready(serve):
    srv = serve(speedup="3")
    assert srv.wait_for("Starting to load model")
    assert "Application startup complete." not in srv.log()
    # the port is bound already (as vLLM does) but nobody listens: connections are refused
    with socket.socket() as probe:
        with pytest.raises(OSError):
            probe.bind(("127.0.0.1", srv.port))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
    srv.wait_ready()
    status, headers, body = srv.request("GET", "/health")
    assert (status, body) == (200, b"")
    assert headers["content-length"] == "0"


def test_startup_log_has_vllm_032_stages(serve):
    srv = serve("--max-model-len", "1024", "--served-model-name", "tiny").wait_ready()
    log = srv.log()
    lines = log.splitlines()
    assert LINE.match(lines[0]) and lines[0].endswith("[api_utils.py:347] ")
    assert "version 0.32.0+sim" in lines[2]
    assert lines[3].endswith("model   /srv/models/tiny-llama")
    assert (
        "non-default args: {'model_tag': '/srv/models/tiny-llama', 'host': '127.0.0.1', 'port': %d, "
        "'model': '/srv/models/tiny-llama', 'max_model_len': 1024, 'served_model_name': ['tiny']}" % srv.port
    ) in log
    expected = [
        "Resolved architecture: LlamaForCausalLM",
        "Using max model len 1024",
        "Initializing a V1 LLM engine (v0.32.0+sim) with config: model='/srv/models/tiny-llama'",
        "Starting to load model /srv/models/tiny-llama...",
        "Loading safetensors checkpoint shards: 100% Completed | 1/1",
        "Model loading took ",
        "GPU KV cache size: ",
        "Maximum concurrency for 1,024 tokens per request: ",
        "Graph capturing finished in ",
        "init engine (profile, create kv cache, warmup model) took ",
        "Starting vLLM server on http://127.0.0.1:%d" % srv.port,
        "Route: /v1/completions, Methods: POST",
        "INFO:     Started server process [%d]" % srv.proc.pid,
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
    ]
    positions = [log.find(text) for text in expected]
    assert -1 not in positions, [t for t, p in zip(expected, positions) if p < 0]
    assert positions == sorted(positions)
    assert re.search(r"Model loading took \d+\.\d\d GiB memory and \d+\.\d{6} seconds", log)
    assert re.search(
        r"GPU KV cache size: [\d,]+ tokens, Maximum concurrency for 1,024 tokens per request: "
        r"[\d.]+x",
        log,
    )
    assert re.search(r"Graph capturing finished in \d+ secs, took \d+\.\d\d GiB", log)
    for line in lines:
        if line.startswith("("):
            assert LINE.match(line), line


def test_enforce_eager_skips_graph_capture(serve):
    srv = serve("--enforce-eager").wait_ready()
    log = srv.log()
    assert "Enforce eager set" in log
    assert "Graph capturing finished" not in log
    assert "init engine (profile, create kv cache, warmup model) took" in log


# ------------------------------------------------------------------------- HTTP API


def test_models_and_version(serve):
    srv = serve("--served-model-name", "tiny", "other", "--max-model-len", "1024").wait_ready()
    status, body = srv.json("GET", "/v1/models")
    assert status == 200 and body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["tiny", "other"]
    model = body["data"][0]
    assert model["root"] == "/srv/models/tiny-llama"
    assert model["max_model_len"] == 1024
    assert model["owned_by"] == "vllm" and model["permission"][0]["object"] == "model_permission"
    assert srv.json("GET", "/version") == (200, {"version": "0.32.0+sim"})
    status, body = srv.json("POST", "/v1/completions", {"model": "nope", "prompt": "x"})
    assert status == 404 and body["error"]["type"] == "NotFoundError"
    assert srv.json("GET", "/nothing-here")[0] == 404
    assert srv.request("POST", "/health")[0] == 405


def test_streamed_completion_is_sse_like_vllm(serve):
    srv = serve().wait_ready()
    status, headers, raw = srv.request(
        "POST",
        "/v1/completions",
        {
            "prompt": "Once upon a time",
            "max_tokens": 12,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    chunks = sse(raw)
    tokens, usage = chunks[:-1], chunks[-1]
    assert len(tokens) == 12
    for chunk in tokens:
        assert list(chunk) == ["id", "object", "created", "model", "choices"]
        assert chunk["object"] == "text_completion" and chunk["id"].startswith("cmpl-")
        assert list(chunk["choices"][0]) == [
            "index",
            "text",
            "logprobs",
            "finish_reason",
            "stop_reason",
            "prompt_token_ids",
            "token_ids",
        ]
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 11 + ["length"]
    assert len({c["id"] for c in chunks}) == 1
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 12
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 12
    assert usage["system_fingerprint"].startswith("vllm-0.32.0")


def test_streamed_chat_is_sse_like_vllm(serve):
    srv = serve().wait_ready()
    status, _, raw = srv.request(
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "Say something about GPUs"}],
            "max_tokens": 8,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert status == 200
    chunks = sse(raw)
    first, tokens, usage = chunks[0], chunks[1:-1], chunks[-1]
    assert first["object"] == "chat.completion.chunk" and first["id"].startswith("chatcmpl-")
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len(tokens) == 8
    assert all("content" in c["choices"][0]["delta"] for c in tokens)
    assert tokens[-1]["choices"][0]["finish_reason"] == "length"
    assert usage["usage"]["completion_tokens"] == 8
    # without include_usage there is no usage chunk
    status, _, raw = srv.request(
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True, "ignore_eos": True},
    )
    assert all("usage" not in c for c in sse(raw))


def test_non_stream_usage_counts(serve):
    srv = serve().wait_ready()
    prompt = "the quick brown fox jumps over the lazy dog " * 5
    status, body = srv.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 20, "ignore_eos": True})
    assert status == 200
    usage = body["usage"]
    assert usage["completion_tokens"] == 20
    assert usage["prompt_tokens"] == max(45, (len(prompt) + 3) // 4) == 55  # max(words, chars / 4)
    assert usage["total_tokens"] == 75
    assert body["choices"][0]["finish_reason"] == "length" and body["choices"][0]["text"]
    status, body = srv.json(
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 5, "ignore_eos": True},
    )
    assert status == 200 and body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["completion_tokens"] == 5
    # the same prompt gives the same text (deterministic pseudo-words)
    again = srv.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 20, "ignore_eos": True})[1]
    first = srv.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 20, "ignore_eos": True})[1]
    assert again["choices"][0]["text"] == first["choices"][0]["text"]
    # without ignore_eos a long request may stop early, never beyond max_tokens
    body = srv.json("POST", "/v1/completions", {"prompt": "tell me", "max_tokens": 1000})[1]
    assert body["usage"]["completion_tokens"] <= 1000
    assert body["choices"][0]["finish_reason"] == ("length" if body["usage"]["completion_tokens"] == 1000 else "stop")


def test_too_long_request_is_rejected(serve):
    srv = serve().wait_ready()
    status, body = srv.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 5000})
    assert status == 400
    assert "maximum context length is 2048 tokens" in body["error"]["message"]
    assert srv.json("POST", "/v1/completions", b"{not json")[0] == 400


def test_keep_alive_and_expect_continue(serve):
    srv = serve().wait_ready()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    for _ in range(3):
        conn.request("GET", "/health")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.read() == b""
    conn.close()
    clients = re.findall(r'INFO:     (127\.0\.0\.1:\d+) - "GET /health HTTP/1\.1" 200 OK', srv.log())
    assert len(clients) == 3 and len(set(clients)) == 1
    body = json.dumps({"prompt": "word " * 400, "max_tokens": 2}).encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        assert s.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert json.loads(payload)["usage"]["completion_tokens"] == 2


# --------------------------------------------------------------------------- metrics


def test_metrics_parse_and_grow(serve):
    srv = serve().wait_ready()
    before = srv.metrics()
    labels = {"model_name": "/srv/models/tiny-llama", "engine": "0"}
    assert sample_value(before, "vllm:num_requests_running", "vllm:num_requests_running", **labels) == 0
    assert sample_value(before, "vllm:prompt_tokens", "vllm:prompt_tokens_total", **labels) == 0
    assert les(before, "vllm:time_to_first_token_seconds") == TTFT_LE
    assert les(before, "vllm:inter_token_latency_seconds") == ITL_LE
    assert les(before, "vllm:e2e_request_latency_seconds") == REQUEST_LE
    assert les(before, "vllm:request_queue_time_seconds") == REQUEST_LE
    assert "vllm:prompt_tokens_created" in before
    assert "vllm:time_to_first_token_seconds_created" in before
    for reason in ("stop", "length", "abort"):
        assert (
            sample_value(before, "vllm:request_success", "vllm:request_success_total", finished_reason=reason, **labels)
            == 0
        )

    srv.json("POST", "/v1/completions", {"prompt": "a b c d e f g h", "max_tokens": 10, "ignore_eos": True})
    srv.request(
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "stream": True, "ignore_eos": True},
    )
    after = srv.metrics()
    assert sample_value(after, "vllm:generation_tokens", "vllm:generation_tokens_total", **labels) == 16
    assert sample_value(after, "vllm:prompt_tokens", "vllm:prompt_tokens_total", **labels) > 8
    assert (
        sample_value(after, "vllm:request_success", "vllm:request_success_total", finished_reason="length", **labels)
        == 2
    )
    for family, count in (
        ("vllm:time_to_first_token_seconds", 2),
        ("vllm:inter_token_latency_seconds", 14),
        ("vllm:e2e_request_latency_seconds", 2),
        ("vllm:request_queue_time_seconds", 2),
    ):
        assert sample_value(after, family, family + "_count", **labels) == count
        assert sample_value(after, family, family + "_bucket", le="+Inf", **labels) == count
        assert sample_value(after, family, family + "_sum", **labels) > 0 or family.endswith("queue_time_seconds")
    itl_sum = sample_value(after, "vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_sum")
    assert 0.001 < itl_sum / 14 < 0.1  # a few ms per token for the tiny model
    assert sample_value(after, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc", **labels) == 0
    info = after["vllm:cache_config_info"].samples[0]
    assert info.labels["block_size"] == "16" and "model_name" not in info.labels


def test_queueing_beyond_max_num_seqs(serve):
    srv = serve("--max-num-seqs", "1").wait_ready()
    results = []

    def one():
        results.append(srv.json("POST", "/v1/completions", {"prompt": "q", "max_tokens": 25, "ignore_eos": True}))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    waiting_seen = 0
    while any(t.is_alive() for t in threads):
        m = srv.metrics()
        waiting_seen = max(waiting_seen, sample_value(m, "vllm:num_requests_waiting", "vllm:num_requests_waiting"))
        assert sample_value(m, "vllm:num_requests_running", "vllm:num_requests_running") <= 1
        time.sleep(0.01)
    for t in threads:
        t.join()
    assert [r[0] for r in results] == [200, 200, 200]
    m = srv.metrics()
    assert sample_value(m, "vllm:request_queue_time_seconds", "vllm:request_queue_time_seconds_sum") > 0.05
    assert waiting_seen >= 1


def test_periodic_stats_line(serve):
    srv = serve(env={"VLLM_LOG_STATS_INTERVAL": "0.3"}).wait_ready()
    srv.json("POST", "/v1/completions", {"prompt": "stats please", "max_tokens": 30, "ignore_eos": True})
    assert srv.wait_for("Engine 000: Avg prompt throughput: ", timeout=5)
    assert re.search(
        r"\(APIServer pid=\d+\) INFO [\d\- :]+ \[loggers\.py:\d+\] Engine 000: Avg prompt "
        r"throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s, Running: \d+ "
        r"reqs, Waiting: \d+ reqs, GPU KV cache usage: [\d.]+%, Prefix cache hit rate: [\d.]+%",
        srv.log(),
    )


# --------------------------------------------------------------- GPUs and shutdown


def test_gpu_footprint_in_processes_json_and_sigint(serve, tmp_path):
    node = tmp_path / "node"
    node.mkdir()
    foreign = {"pid": 4000, "name": "python3 (sim workload)", "gpu": 5, "vram_bytes": 1 << 30, "sticky": True}
    (node / "processes.json").write_text(json.dumps([foreign]))
    srv = serve(
        "-tp", "2", "--gpu-memory-utilization", "0.5", cvd="2,3", env={"ROCM_CONSOLE_SIM_GPU_VRAM_MB": "65536"}
    ).wait_ready()
    mine = srv.mine()
    assert sorted(e["gpu"] for e in mine) == [2, 3]
    for e in mine:
        assert e["name"] == "python3"
        assert e["vram_bytes"] == int(0.5 * 65536 * MiB)
        assert e["started"] <= time.time()
    assert foreign in srv.processes()
    assert "(Worker_TP1 pid=" in srv.log()
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGINT)
    assert srv.wait_exit(10) == 0
    assert time.monotonic() - t0 < 2.0
    assert srv.mine() == []
    assert srv.processes() == [foreign]
    log = srv.log()
    for text in (
        "[shutdown] API server: shutdown triggered",
        "[shutdown] Process manager: send sigterm to process EngineCore",
        "[shutdown] EngineCore: trigger received signal=SIGTERM",
        "[shutdown] Executor: waiting for worker exit count=2",
        "[shutdown] API server: shutting down FastAPI HTTP server",
        "INFO:     Application shutdown complete.",
    ):
        assert text in log
    assert "EngineDeadError" not in log


def test_sigterm_shutdown(serve):
    srv = serve().wait_ready()
    assert len(srv.mine()) == 1
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.wait_exit(10) == 0
    assert srv.mine() == []
    log = srv.log()
    assert "EngineDeadError: EngineCore encountered an issue." in log
    assert log.rstrip().endswith("INFO:     Application shutdown complete.")


def test_sigint_while_loading(serve):
    srv = serve(speedup="2")
    assert srv.wait_for("Starting to load model")
    srv.proc.send_signal(signal.SIGINT)
    assert srv.wait_exit(10) == 0
    assert "Application startup complete." not in srv.log()
    assert srv.mine() == []


def test_no_sim_dir_means_no_registration(serve, tmp_path):
    srv = serve(env={"ROCM_CONSOLE_SIM_DIR": ""}).wait_ready()
    assert srv.request("GET", "/health")[0] == 200
    assert not (tmp_path / "node").exists()


# --------------------------------------------------------------------------- failures


def _failed(srv):
    assert srv.wait_exit(20) == 1, srv.log()[-3000:]
    assert srv.mine() == []
    log = srv.log()
    assert "Application startup complete." not in log
    return log


def test_max_model_len_over_the_limit(serve):
    log = _failed(serve("--max-model-len", "4096"))
    assert "non-default args:" in log
    assert "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig" in log
    assert (
        "Value error, User-specified max_model_len (4096) is greater than the derived max_model_len "
        "(max_position_embeddings=2048.0 or model_max_length=None in model's config.json)"
    ) in log
    assert "Initializing a V1 LLM engine" not in log


def test_max_model_len_limit_for_big_models(serve):
    log = _failed(serve("--max-model-len", "200000", model="meta-llama/Llama-3.1-8B-Instruct"))
    assert (
        "User-specified max_model_len (200000) is greater than the derived max_model_len "
        "(max_position_embeddings=131072.0" in log
    )


def test_oom_405b_full_utilization(serve):
    srv = serve(
        "-tp", "4", "--gpu-memory-utilization", "0.99", model="meta-llama/Llama-3.1-405B-Instruct-FP8", cvd="0,1,2,3"
    )
    log = _failed(srv)
    assert "Model loading took" in log
    assert re.search(
        r"torch\.OutOfMemoryError: HIP out of memory\. Tried to allocate [\d.]+ GiB\. GPU 0 has a "
        r"total capacity of [\d.]+ GiB",
        log,
    )
    assert "EngineCore failed to start." in log
    assert "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}" in log


def test_405b_on_eight_gpus_starts(serve):
    srv = serve(
        "-tp",
        "8",
        "--gpu-memory-utilization",
        "0.99",
        "--max-model-len",
        "8192",
        model="meta-llama/Llama-3.1-405B-Instruct-FP8",
        cvd="0,1,2,3,4,5,6,7",
    ).wait_ready()
    assert sorted(e["gpu"] for e in srv.mine()) == list(range(8))


def test_weights_larger_than_the_gpu(serve):
    log = _failed(serve(model="meta-llama/Llama-3.1-405B-Instruct"))
    assert "WorkerProc failed to start." in log
    assert "torch.OutOfMemoryError: HIP out of memory." in log
    assert "Model loading took" not in log


@pytest.mark.parametrize(
    "mode,text",
    [
        ("oom", "torch.OutOfMemoryError: HIP out of memory. Tried to allocate"),
        ("kv", "ValueError: To serve at least one request with the model's max seq len (2048), ("),
    ],
)
def test_forced_failures(serve, mode, text):
    log = _failed(serve(env={"ROCM_CONSOLE_SIM_VLLM_FAIL": mode}))
    assert text in log
    assert "EngineCore failed to start." in log
    assert "RuntimeError: Engine core initialization failed. See root cause above." in log
    if mode == "kv":
        assert re.search(
            r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory "
            r"\(([\d.]+) GiB\)\. Based on the available memory, the estimated maximum model length "
            r"is \d+\.",
            log,
        )


def test_kv_cache_too_small_for_the_context(serve):
    # 70B in bf16 on one 192 GB GPU leaves ~30 GiB of KV: not enough for 131072 tokens
    log = _failed(serve(model="meta-llama/Llama-3.1-70B-Instruct"))
    assert "To serve at least one request with the model's max seq len (131072)" in log


def test_busy_gpu_leaves_too_little_free_memory(serve, tmp_path):
    node = tmp_path / "node"
    node.mkdir()
    (node / "processes.json").write_text(
        json.dumps([{"pid": 4000, "name": "python3", "gpu": 0, "vram_bytes": 100 << 30, "sticky": True}])
    )
    log = _failed(serve())
    assert re.search(
        r"ValueError: Free memory on device \([\d.]+/[\d.]+ GiB\) on startup is less than desired "
        r"GPU memory utilization \(0\.9, [\d.]+ GiB\)",
        log,
    )


def test_crash_after_ready(serve):
    srv = serve(env={"ROCM_CONSOLE_SIM_VLLM_FAIL": "crash"}).wait_ready()
    assert len(srv.mine()) == 1
    assert srv.wait_exit(10) == 1
    log = srv.log()
    assert "EngineCore encountered a fatal error." in log
    assert "HIP error: an illegal memory access was encountered" in log
    assert "vllm.v1.engine.exceptions.EngineDeadError" in log
    assert srv.mine() == []


def test_port_in_use(serve):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        srv = serve(port=taken.getsockname()[1])
        log = _failed(srv)
    assert "non-default args:" in log
    assert "sock.bind(addr)" in log
    assert log.rstrip().endswith("OSError: [Errno 98] Address already in use")


def test_port_taken_before_the_bind_moves_on_when_the_supervisor_allows(serve, tmp_path):
    # The supervisor found the port free and allowed a move (ROCM_CONSOLE_PORT_FILE); another
    # program (or another demo) bound it before this server did: the server takes the next free
    # one, says so in its log (never a fatal line), and writes where it listens for the supervisor.
    port_file = tmp_path / "port"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        asked = taken.getsockname()[1]
        srv = serve(port=asked, env={"ROCM_CONSOLE_PORT_FILE": str(port_file)}).wait_ready()
        moved = int(port_file.read_text())
        assert moved != asked
        srv.port = moved
        assert srv.request("GET", "/health")[0] == 200
    log = srv.log()
    assert f"rocm-console: port {asked} was taken on this node as the server started; listening on {moved}" in log
    assert "Address already in use" not in log and "Errno 98" not in log
    assert f"Starting vLLM server on http://127.0.0.1:{moved}" in log


def test_servers_started_together_on_one_port_all_come_up_on_their_own(serve, tmp_path):
    # Demos started together are given the same free port. With SO_REUSEADDR, Linux lets them all
    # bind it while none listens yet; only the listen tells the losers (three demos started together
    # lost a baseline check to "Address already in use"). Each must move on and come up.
    asked = free_port()
    servers = [
        serve(port=asked, cvd=str(k), env={"ROCM_CONSOLE_PORT_FILE": str(tmp_path / f"port-{k}")}) for k in range(4)
    ]
    ports = set()
    for k, srv in enumerate(servers):
        srv.wait_ready()
        moved = tmp_path / f"port-{k}"
        srv.port = int(moved.read_text()) if moved.exists() else asked
        assert srv.request("GET", "/health")[0] == 200
        assert "Errno 98" not in srv.log()
        ports.add(srv.port)
    assert len(ports) == 4


def test_unknown_flag_is_an_argparse_error(serve):
    srv = serve("--foo", "--enforce-eager")
    assert srv.wait_exit(10) == 2
    assert "vllm serve: error: unrecognized arguments: --foo" in srv.log()


def test_bad_choice_is_an_argparse_error(serve):
    srv = serve("--kv-cache-dtype", "int3")
    assert srv.wait_exit(10) == 2
    assert "argument --kv-cache-dtype: invalid choice: 'int3'" in srv.log()


def test_accepts_the_flags_we_use(serve):
    srv = serve(
        "--tensor-parallel-size",
        "1",
        "--max-model-len",
        "2k",
        "--gpu-memory-utilization",
        "0.85",
        "--kv-cache-dtype",
        "fp8",
        "--max-num-batched-tokens",
        "4096",
        "--max-num-seqs",
        "64",
        "--served-model-name",
        "t",
        "--dtype",
        "bfloat16",
        "--block-size",
        "32",
        "--async-scheduling",
        "--compilation-config",
        '{"cudagraph_mode": "FULL_AND_PIECEWISE"}',
        "--quantization",
        "fp8",
        "--swap-space",
        "16",
        "--distributed-executor-backend",
        "mp",
        "--trust-remote-code",
        "--disable-log-requests",
        "--load-format",
        "dummy",
        "--num-scheduler-steps",
        "10",
        "--max_num_seqs=64",
    ).wait_ready()
    log = srv.log()
    assert "'max_model_len': 2000" in log
    assert "'compilation_config': {'cudagraph_mode': 'FULL_AND_PIECEWISE'}" in log
    assert "--num-scheduler-steps is not used by the V1 engine" in log
    assert srv.json("GET", "/v1/models")[1]["data"][0]["id"] == "t"


def test_other_bench_types_are_not_simulated(serve):
    srv = serve("sweep", command="bench")
    assert srv.wait_exit(10) == 2
    assert "not simulated yet" in srv.log()


def test_model_name_is_echoed_literally(serve):
    name = """my "odd" model's $HOME `name` 8B"""
    srv = serve(model=name, env={"ROCM_CONSOLE_SIM_GPU_VRAM_MB": "196592"}).wait_ready()
    log = srv.log()
    assert ("model   " + name) in log
    assert ("Starting to load model %s..." % name) in log
    assert srv.json("GET", "/v1/models")[1]["data"][0]["id"] == name
    running = srv.metrics()["vllm:num_requests_running"].samples
    assert running[0].labels["model_name"] == name
