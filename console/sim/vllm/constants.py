"""Names, sizes and bucket bounds shared by the simulated server and the bench client."""

from .statefiles import SIM_DIR_ENV

VERSION = "0.32.0+sim"
FINGERPRINT = "vllm-0.32.0+sim-5ac2b1de"
SITE = "/usr/local/lib/python3.12/dist-packages"
PYLIB = "/usr/lib/python3.12"

ENV_SPEEDUP = "ROCM_CONSOLE_SIM_VLLM_SPEEDUP"
ENV_FAIL = "ROCM_CONSOLE_SIM_VLLM_FAIL"
ENV_DIR = SIM_DIR_ENV
ENV_VRAM = "ROCM_CONSOLE_SIM_GPU_VRAM_MB"
DEFAULT_VRAM_MB = 196592
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

HBM_BYTES_PER_S = 3.2e12
FLOPS = 6.0e14

# vLLM's histogram bounds in seconds, kept as rows (fmt: off) to read as the tables they are.
# fmt: off
TTFT_BUCKETS = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
]
ITL_BUCKETS = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
]
# fmt: on
REQUEST_BUCKETS = [
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
ITERATION_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")

ROUTES = [
    ("/openapi.json", "GET, HEAD"),
    ("/docs", "GET, HEAD"),
    ("/docs/oauth2-redirect", "GET, HEAD"),
    ("/redoc", "GET, HEAD"),
    ("/load", "GET"),
    ("/version", "GET"),
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/tokenize", "POST"),
    ("/detokenize", "POST"),
    ("/v1/models", "GET"),
    ("/ping", "GET"),
    ("/ping", "POST"),
    ("/invocations", "POST"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
    ("/v1/responses", "POST"),
    ("/v1/responses/{response_id}", "GET"),
    ("/v1/responses/{response_id}/cancel", "POST"),
    ("/v1/messages", "POST"),
    ("/v1/messages/count_tokens", "POST"),
]

VOCAB = (
    " the",
    " of",
    " and",
    " to",
    " in",
    " a",
    " is",
    " that",
    " for",
    " it",
    " with",
    " as",
    " on",
    " by",
    " this",
    " from",
    " at",
    " which",
    " be",
    " are",
    " each",
    " more",
    " when",
    " model",
    " GPU",
    " memory",
    " token",
    " batch",
    " cache",
    " kernel",
    " layer",
    " tensor",
    " request",
    " latency",
    " throughput",
    " node",
    " partition",
    " compute",
    " serve",
    " data",
    " value",
    " time",
    " block",
    " queue",
    " stream",
    " weight",
    " graph",
    " rate",
    "ing",
    "ed",
    "s",
    "er",
    "ly",
    ",",
    ".",
    ",",
    ".",
    " AMD",
    " Instinct",
    " ROCm",
    " vLLM",
    " HIP",
    " bandwidth",
    " prefill",
    " decode",
    " scheduler",
    " engine",
    "\n",
)

REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Request Entity Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
