"""Upper bounds of the numeric settings a bench preset, a serve preset's parallel sizes,
an offline preset and `--set` take (docs/benchmarks.md lists them).

Each is far past any real run, so it never stands in the way of one; past it a value is a
typo (`--set num_prompts=99999999999999999999999` used to be accepted and run until
cancelled), refused in one line naming the key and the bound. Both the profile loader
(console/core/profiles.py) and `--set` (console/core/bench/argv.py, offline.py,
serve/argv.py) check through these, so a preset file and the command line agree.
"""

from __future__ import annotations

NUM_PROMPTS = 1_000_000  # num_prompts: prompts of one run
TOKENS = 1_048_576  # input_len, output_len: 2**20 tokens, past any model's context window
CONCURRENCY = 65_536  # max_concurrency: requests in flight (each one a socket)
REQUEST_RATE = 1_000_000.0  # request_rate: requests per second ("inf" sends all at once)
BURSTINESS = 1_000.0  # burstiness: the gamma distribution's shape factor
SEED = 2**32 - 1  # seed: the benchmark seeds numpy, whose seeds are 0 .. 2**32 - 1
PARALLEL = 1_024  # tp, pp, dp, dp_local: GPUs (or nodes) one instance spans
BATCH_SIZE = 65_536  # batch_size (offline latency)
ITERATIONS = 100_000  # num_iters, num_iters_warmup (offline latency)

# The bound of each integer key of an offline preset (console/core/bench/offline.py).
OFFLINE = {
    "tp": PARALLEL,
    "batch_size": BATCH_SIZE,
    "input_len": TOKENS,
    "output_len": TOKENS,
    "num_prompts": NUM_PROMPTS,
    "num_iters": ITERATIONS,
    "num_iters_warmup": ITERATIONS,
}
