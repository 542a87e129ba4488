"""The `vllm` command line: serve, bench serve, --version."""

import asyncio
import atexit
import logging
import os
import signal
import sys
import time

from .bench_args import BenchArgError, parse_bench_args
from .bench_run import BenchRun
from .constants import VERSION
from .lifeline import watch as watch_lifeline
from .serve_args import parse_serve_args
from .server import Sim

BENCH_HELP = """usage: vllm bench serve [options]

Benchmark the online serving throughput (rocm-console's vLLM simulator %s: the random and
sharegpt datasets and the vllm, openai and openai-chat backends are simulated; every other
flag of vLLM 0.32 is accepted).
"""


def bench_main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write("usage: vllm bench [-h] {latency,mm-processor,serve,startup,sweep,throughput} ...\n")
        return 0 if argv else 2
    if argv[0] in ("latency", "throughput"):
        from .offline_bench import run_latency, run_throughput  # the demo's offline benchmarks

        return (run_latency if argv[0] == "latency" else run_throughput)(argv[1:])
    if argv[0] != "serve":
        sys.stderr.write("vllm bench %s: not simulated yet (rocm-console's vLLM simulator %s)\n" % (argv[0], VERSION))
        return 2
    try:
        args = parse_bench_args(argv[1:])
    except BenchArgError:
        return 2
    if args.help_requested:
        sys.stdout.write(BENCH_HELP % VERSION)
        return 0
    return BenchRun(args).run()


TOP_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."


def _console_gone():
    # As if stopped: the server shuts down as on SIGTERM (and unregisters its GPUs);
    # whatever does not end by itself within a few seconds is ended here.
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    os._exit(1)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    watch_lifeline(_console_gone)  # only under a demo console (ROCM_CONSOLE_LIFELINE)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(
            TOP_USAGE + "\n\nvLLM CLI (rocm-console simulator %s): serve and bench serve are simulated.\n" % VERSION
        )
        return 0 if argv else 2
    command = argv[0]
    if command in ("-v", "--version"):
        sys.stdout.write(VERSION + "\n")
        return 0
    if command == "bench":
        return bench_main(argv[1:])
    if command == "guidellm":  # the demo's GuideLLM (guidellm_sim.py): `vllm guidellm run ...`
        from .guidellm_sim import main as guidellm_main

        return guidellm_main(argv[1:])
    if command == "ray":  # the simulated `ray` CLI of multi-node instances (ray_sim.py)
        from .ray_sim import main as ray_main

        return ray_main(argv[1:])
    if command != "serve":
        sys.stderr.write(
            "%s\nvllm: error: argument subparser: invalid choice: %r (choose from 'chat', "
            "'complete', 'serve', 'bench', 'collect-env', 'run-batch')\n" % (TOP_USAGE, command)
        )
        return 2
    parser, args = parse_serve_args(argv[1:])
    sim = Sim(parser, args)
    atexit.register(sim.registry.unregister)
    try:
        return asyncio.run(sim.main())
    except KeyboardInterrupt:
        return 0
    finally:
        sim.registry.unregister()
