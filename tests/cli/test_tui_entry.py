"""The TUI's short way in: a line with TUI options only loads no command group (start-up time),
and it reads the same options as the full parser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from console.cli import build_parser
from console.cli.tui import tui_args

ROOT = Path(__file__).resolve().parents[2]


def test_tui_options_only_take_the_short_way():
    args = tui_args(["--demo", "--interval", "0.5"])
    assert args is not None and args.demo and args.interval == 0.5
    assert tui_args([]) is not None
    assert tui_args(["--profile", "status"]) is not None  # a file named like a command
    for line in (["status"], ["--demo", "bench", "runs"], ["--help"], ["-h"], ["--version"], ["--interval", "x"]):
        assert tui_args(line) is None, line  # the full parser answers these (and their errors)


def test_the_short_way_reads_the_root_options_of_the_full_parser():
    def options(parser):
        return {s for a in parser._actions for s in a.option_strings} - {"-h", "--help", "--version"}

    from console.cli.tui import _QuietParser, add_tui_options

    short = _QuietParser(add_help=False)
    add_tui_options(short)
    assert options(short) == options(build_parser())


def test_the_tui_start_imports_no_command_group():
    code = (
        "import sys, console.cli as c, console.cli.tui as t\n"
        "t.run_tui = lambda a: print(sorted(m for m in sys.modules if m.startswith(('console.cli.', 'console.core.results'))))\n"
        "c.main(['--demo'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "['console.cli.common', 'console.cli.tui']", out.stdout + out.stderr


def test_bad_interval_is_one_line_exit_2_either_way():
    for line in (["--interval", "50"], ["--demo", "--interval", "50"]):
        out = subprocess.run(
            [sys.executable, "-m", "console", *line], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2
        assert out.stderr.strip() == "rocm-console: --interval 50: must be between 0.1 and 10 seconds"


def test_bad_loop_pace_is_one_line_exit_2_before_anything_starts(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), ROCM_CONSOLE_LOOP_PACE_MS="fast")
    env.pop("ROCM_CONSOLE_DATA_DIR", None)
    out = subprocess.run(
        [sys.executable, "-m", "console", "--demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "rocm-console: ROCM_CONSOLE_LOOP_PACE_MS='fast': expected milliseconds from 0 to 1000 (0: no pacing)"
    )
    assert not list(tmp_path.iterdir())  # no demo state made, no agent started


def test_an_alert_rule_for_a_node_the_profile_lacks_is_said_at_start(tmp_path, monkeypatch, capsys):
    """W2: `nodes = ["nosuch"]` was accepted without a word; the console says it at start, on
    the terminal and in its own start notes, as `alerts list` does."""
    import console.services.early_agents as early
    import console.ui.launch as launch
    from console.cli.tui import run_tui

    profile = tmp_path / "lab.toml"
    profile.write_text(
        f'[nodes.sim]\ntransport = "local"\nstate_dir = "{tmp_path / "state"}"\n'
        'simulate = { gpu = "MI300X", count = 8, compute_partition = "SPX" }\n\n'
        '[[alert]]\nname = "hot"\nwhen = "health == fail"\nnodes = ["sim", "nosuch"]\ncommand = ["true"]\n'
    )
    seen = {}
    monkeypatch.setattr(early, "start_local_agents", lambda *a, **k: None)
    monkeypatch.setattr(launch, "run_app", lambda profile, **kw: seen.setdefault("notes", kw["notes"]) and 0)
    args = tui_args(["--profile", str(profile)])
    assert args is not None
    run_tui(args)
    [note] = seen["notes"]
    assert "rule 'hot': nodes 'nosuch' not in the profile (nodes: sim)" in note
    assert note in capsys.readouterr().err
