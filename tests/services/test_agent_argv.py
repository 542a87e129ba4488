"""Every value the console sends the node agent arrives as that value, whatever it starts with.

W2: a model id, revision or `--to` value that started with `-` reached the agent's own option
parser (`models pull ... -- --help` printed the agent's help). These tests walk the agent's real
argparse tree, every mode and op, and send a dash-leading value for each string option and
positional through the console's argv builder (AgentCommand.argv) into that parser.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.services.agent_bundle import AGENT_FLAGS, AGENT_OP_MODES, AGENT_VALUE_OPTIONS, AgentCommand

AGENT_DIR = Path(__file__).resolve().parents[2] / "console" / "agent"
AMDSMI_MODES = ("telemetry", "probe", "partition", "doctor", "models")  # the builder adds --amdsmi-path to these


def _agent_parser() -> argparse.ArgumentParser:
    if str(AGENT_DIR) not in sys.path:  # the agent imports its modules by file name
        sys.path.insert(0, str(AGENT_DIR))
    spec = importlib.util.spec_from_file_location("node_agent_argv_test", AGENT_DIR / "node_agent.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build_parser()


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = (), chain: tuple = ()
) -> Iterator[tuple[tuple[str, ...], tuple[argparse.ArgumentParser, ...]]]:
    """(the words that name a command, e.g. ("instance", "stop"), the parsers from the mode down)."""
    sub = _subparsers(parser)
    if sub is None:
        yield words, chain
        return
    for name, child in sub.choices.items():
        yield from _leaves(child, (*words, name), (*chain, child))


def _actions(chain: tuple[argparse.ArgumentParser, ...]) -> Iterator[argparse.Action]:
    for parser in chain:
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            yield action


def _takes_value(action: argparse.Action) -> bool:
    return bool(action.option_strings) and action.nargs != 0


LEAVES = list(_leaves(_agent_parser()))


def test_the_builders_grammar_is_the_agents():
    """The console's table of value options, flags and op modes is the agent's own, every mode."""
    values, flags = set(), set()
    for _words, chain in LEAVES:
        for action in _actions(chain):
            longest = max(action.option_strings, key=len) if action.option_strings else None
            if longest is None:
                continue
            (values if _takes_value(action) else flags).add(longest)
    assert values == set(AGENT_VALUE_OPTIONS)
    assert flags == set(AGENT_FLAGS)
    op_modes = {words[0] for words, _chain in LEAVES if len(words) > 1}
    assert op_modes == set(AGENT_OP_MODES)
    assert len(LEAVES) >= 18  # every op of instance (6), partition (2), process, models (5), the plain modes


def _value_for(action: argparse.Action, dash: str) -> tuple[str, object]:
    """(what to send, what the agent must get): a dash-leading string where the option takes one."""
    if action.choices:
        choice = sorted(action.choices)[0]
        return choice, choice
    convert = action.type or str
    try:
        return dash, convert(dash)  # type: ignore[operator]
    except (argparse.ArgumentTypeError, TypeError, ValueError):
        return "1", convert("1")  # type: ignore[operator]  # a number: the console formats it


@pytest.mark.parametrize("words,chain", LEAVES, ids=[" ".join(w) for w, _ in LEAVES])
def test_dash_values_arrive_as_values_in_every_subcommand(words, chain):
    parser = _agent_parser()
    dash_values = ("-h", "--help", "-x", "--state-dir=/elsewhere")
    command = AgentCommand("/b/node_agent.py", ("-amdsmi",), "python3", (), "/st")
    for dash in dash_values:
        mode, ops = words[0], words[1:]
        head: list[str] = []  # the mode's own options come before its op
        body: list[str] = []
        positionals: list[tuple[str, str]] = []
        expected: dict[str, object] = {}
        for depth, p in enumerate(chain):
            for action in p._actions:
                if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                    continue
                if not action.option_strings:
                    positionals.append((action.dest, dash))
                    continue
                if not _takes_value(action):
                    continue
                sent, got = _value_for(action, dash)
                target = head if depth == 0 and ops else body
                target += [max(action.option_strings, key=len), sent]
                expected[action.dest] = got
        # the positionals marked as such (`"--"`), as the console's callers send them
        marked = ["--", *[v for _, v in positionals]] if positionals else []
        argv = command.argv(mode, *head, *ops, *body, *marked)
        assert argv[:3] == ["python3", "/b", mode]
        ns = parser.parse_args(argv[2:])
        for dest, got in expected.items():
            value = getattr(ns, dest)
            if isinstance(value, list):
                assert got in value, (argv, dest)
            else:
                assert value == got, (argv, dest)
        for dest, sent in positionals:
            assert getattr(ns, dest) == sent, (argv, dest)
        if mode in AMDSMI_MODES:
            assert "-amdsmi" in ns.amdsmi_path, argv


def test_an_explicit_separator_keeps_a_flag_named_positional():
    """A caller that marks its positional (`"--"`) gets it through even when it spells a flag."""
    parser = _agent_parser()
    command = AgentCommand("/b/node_agent.py", (), "python3", (), "/st")
    argv = command.argv("models", "pull", "--state-dir", "-s", "--", "--cancel")
    ns = parser.parse_args(argv[2:])
    assert ns.model == "--cancel" and ns.cancel is False and ns.state_dir == "-s"


@pytest.mark.parametrize("name", ["-h", "--help", "-x", "-"])
def test_an_unmarked_positional_is_still_no_option(name):
    """A caller that gives a name in place (`"stop", name, "--int-timeout", "30"`) still gets it
    through: an item that is neither the op nor an agent option is a positional."""
    parser = _agent_parser()
    command = AgentCommand("/b/node_agent.py", (), "python3", (), "/st")
    argv = command.argv("instance", "--state-dir", "/st", "stop", name, "--int-timeout", "30")
    ns = parser.parse_args(argv[2:])
    assert (ns.op, ns.name, ns.int_timeout, ns.state_dir) == ("stop", name, 30.0, "/st")
