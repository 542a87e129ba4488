"""Two or three examples at the end of each command group's --help (and of the top level).

Kept in one place so every group has them and a test can parse each one with the real parser
(tests/cli/test_help_examples.py): an example that stops being valid fails the tests.
"""

from __future__ import annotations

import argparse

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "rocm-console --demo                          # the TUI on four simulated nodes",
        "rocm-console --profile lab.toml              # the TUI on your nodes",
        "rocm-console status --demo --json",
    ),
    "baseline": (
        "rocm-console baseline check demo --demo --node mi300x-spx    # against the seeded baseline",
        "rocm-console baseline save lab --node mi300-a --suite profiles/suites/vllm-cpu-tiny.toml",
        "rocm-console baseline check --all --json",
    ),
    "status": (
        "rocm-console status --demo",
        "rocm-console status --profile lab.toml --node mi300-a --json",
    ),
    "serve": (
        "rocm-console serve start --demo --node mi300x-spx --preset llama-3.1-8b-fp8 --gpus 4 --wait",
        "rocm-console serve plan amd/Llama-3.1-8B-Instruct-FP8-KV --demo --node mi300x-cpx",
        "rocm-console serve list --demo --json",
    ),
    "models": (
        "rocm-console models list --demo",
        "rocm-console models list --demo --node mi300x-cpx --json",
        "rocm-console models pull amd/Llama-3.1-70B-Instruct-FP8-KV --demo --node mi300x-cpx",
    ),
    "partition": (
        "rocm-console partition show --demo --node mi300x-cpx",
        "rocm-console partition set --demo --node mi300x-cpx --gpus 0 --compute SPX",
    ),
    "bench": (
        "rocm-console bench run --demo --node mi300x-spx --instance llama-3.1-8b-fp8-g4 --preset random-4096-512-rate1",
        "rocm-console bench sweep --demo --node mi300x-spx --instance llama-3.1-8b-fp8-g4"
        " --preset random-4096-512-rate1 --concurrency 4,16",
        "rocm-console bench find-max --demo --node mi300x-spx --instance llama-3.1-8b-fp8-g4"
        " --preset random-4096-512-rate1 --budget p99_ttft_ms=2000",
    ),
    "results": (
        "rocm-console results list --demo",
        "rocm-console results compare --demo RUN_A RUN_B",
        "rocm-console results export --demo --format md --out runs.md",
    ),
    "doctor": (
        "rocm-console doctor --demo",
        "rocm-console doctor --profile lab.toml --node mi300-a --json",
    ),
    "experiment": (
        "rocm-console experiment check profiles/experiments/demo-layouts.toml --demo",
        "rocm-console experiment run profiles/experiments/demo-layouts.toml --demo",
        "rocm-console experiment report profiles/experiments/demo-layouts.toml --demo",
    ),
    "web": (
        "rocm-console web --demo",
        "rocm-console web --profile lab.toml --port 8600 --token-file ~/.config/rocm-console/web-token",
    ),
    "events": (
        "rocm-console events --demo --since 1h",
        "rocm-console events --node mi300-a --kind gpu.health --follow",
    ),
    "alerts": (
        "rocm-console alerts list --profile lab.toml",
        "rocm-console alerts test --profile lab.toml --rule gpu-sick",
    ),
    "store": (
        "rocm-console store info",
        "rocm-console store dump ~/rocm-console-backup",
        "rocm-console store load ~/rocm-console-backup",
    ),
    "watch": (
        "rocm-console watch --profile lab.toml",
        "rocm-console watch --install-systemd --user --profile lab.toml",
    ),
}


def epilog(group: str) -> str:
    lines = EXAMPLES.get(group, ())
    return "examples:\n" + "\n".join(f"  {line}" for line in lines) if lines else ""


def add_examples(root: argparse.ArgumentParser, groups: dict[str, argparse.ArgumentParser]) -> None:
    """Put each group's examples at the end of its --help (the layout kept as written)."""
    for name, parser in (("", root), *groups.items()):
        text = epilog(name)
        if text:
            parser.epilog = text
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
