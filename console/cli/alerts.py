"""`rocm-console alerts list|test|export`: the profile's [[alert]] rules, a test firing, and
the rules as Prometheus alerting rules (`export --prometheus-rules FILE`, docs/watch.md).

    rocm-console alerts list [--json]
    rocm-console alerts test [--rule NAME] [--json]
    rocm-console alerts export --prometheus-rules FILE [--json]

`test` sends a test alert (state "test") through each rule's actions, or one rule's:
its command gets the alert as JSON on stdin, its webhook the same JSON by POST.  It
prints one line per action (a webhook by scheme and host only; tokens never), records
the test as an `alert.fired` event, and exits 1 when an action failed, 2 on bad input
(no rules, an unknown rule, a bad profile).  A rule needs no node: a profile holding
only [[alert]] tables will do.  With --demo, --profile files add their rules to the demo's
(as everywhere else).  A rule naming a node the profile lacks, or a webhook_env holding a
URL that will not be sent to, is one warning line each on stderr.

Everything printed that came from outside (a command's stderr, a rule's text, a URL's
host) goes through console.core.text.printable: escape sequences show, never act.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    PRESETS_PATH,
    UsageError,
    add_actions,
    add_command_options,
    user_config_dir,
)
from console.core.profiles import discover_profile_paths, load_profile
from console.core.text import printable

if TYPE_CHECKING:
    from console.core.health_profile import HealthSettings
    from console.core.model import Profile

TEST_RETRIES = 2  # a test says quickly whether the receiver works


def add_parser(sub) -> list[argparse.ArgumentParser]:
    ops = add_actions(sub, "alerts", help="the profile's [[alert]] rules: list them, fire a test alert")
    lst = ops.add_parser("list", help="the rules: name, condition, actions")
    test = ops.add_parser("test", help="fire a test alert through the rules' actions")
    test.add_argument("--rule", metavar="NAME", help="only this rule")
    export = ops.add_parser(
        "export", help="write the rules as Prometheus alerting rules over DME's series (docs/watch.md)"
    )
    export.add_argument(
        "--prometheus-rules", metavar="FILE", required=True, help="the rule file to write ('-': standard output)"
    )
    add_command_options([lst, test, export])
    return [lst, test, export]


def _settings(args: argparse.Namespace) -> tuple[HealthSettings, Profile, list[Path]]:
    from console.core.alerts import unknown_nodes
    from console.core.health_profile import health_settings

    builtin = [PRESETS_PATH] if PRESETS_PATH.exists() else []
    explicit = getattr(args, "profile", None) or []
    if getattr(args, "demo", False):
        from console.services.demo import demo_profile

        # The README's promise: `--demo --profile mine.toml` applies mine.toml's [[alert]] rules.
        profile, note = demo_profile(explicit, builtin)
        if note:
            _warn(note)
        paths = [Path(f) for f in profile.files]
    else:
        paths = discover_profile_paths(explicit, Path.cwd(), user_config_dir())
        profile = load_profile([*builtin, *paths])
    settings = health_settings(profile)
    for line in unknown_nodes(settings.alerts, [n.name for n in profile.nodes]):
        _warn(line)
    return settings, profile, paths


def _warn(line: str) -> None:
    print(f"rocm-console: warning: {printable(line)}", file=sys.stderr)


def _secret_names(settings: HealthSettings, profile: Profile) -> set[str]:
    """Every variable the profile names as holding a secret: no alert command gets them."""
    from console.services.alerts import secret_env

    names = secret_env(settings.alerts)
    names.update(p.api_key_env for p in profile.serve_presets if p.api_key_env)
    if profile.prometheus is not None and profile.prometheus.token_env:
        names.add(profile.prometheus.token_env)
    return names


def _actions_text(rule) -> str:
    from console.services.alerts import receiver_name

    parts = []
    if rule.command:
        parts.append("command " + rule.command[0])
    if rule.webhook:
        parts.append("webhook " + receiver_name(rule.webhook))
    if rule.webhook_env:
        parts.append(f"webhook ${rule.webhook_env}")
    return ", ".join(parts) or "event only"


def run(args: argparse.Namespace) -> int:
    import os

    from console.services.alerts import env_url_problems

    settings, profile, paths = _settings(args)
    if not settings.alerts:
        searched = ", ".join(str(p) for p in paths) or "./profiles/*.toml, " + str(user_config_dir())
        raise UsageError(f"no [[alert]] rules in the profile (searched {searched})")
    if args.alerts_command == "export":
        return _export(args, settings, profile)
    if args.alerts_command == "list":
        for line in env_url_problems(settings.alerts, os.environ):
            _warn(line)
        return _list(args, settings)
    return _test(args, settings, _secret_names(settings, profile), profile)


def _list(args: argparse.Namespace, settings: HealthSettings) -> int:
    if args.json:
        rows = [
            {
                "name": r.name,
                "when": r.condition.text,
                "actions": list(r.actions),
                "nodes": list(r.nodes),
                "severity": r.severity,
                "source": f"{r.source}:{r.line}" if r.line else r.source,
            }
            for r in settings.alerts
        ]
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max(len(r.name) for r in settings.alerts)
    for r in settings.alerts:
        print(printable(f"{r.name.ljust(width)}  {r.condition.text}  -> {_actions_text(r)}"))
    return EXIT_OK


def _test(args: argparse.Namespace, settings: HealthSettings, secrets: set[str], profile: Profile) -> int:
    from console.cli.history_arg import command_history
    from console.core.alerts import notice_for_test
    from console.services.alerts import AlertDispatcher

    rules = list(settings.alerts)
    if args.rule is not None:
        rule = settings.alert(args.rule)
        if rule is None:
            known = ", ".join(r.name for r in rules)
            raise UsageError(f"--rule {printable(args.rule)!r}: no such rule (known: {known})")
        rules = [rule]

    # The lines below say every outcome; the dispatcher's own log lines would repeat them.
    logging.getLogger("console.alerts").addHandler(logging.NullHandler())
    logging.getLogger("console.alerts").propagate = False

    async def fire() -> list:
        dispatcher = AlertDispatcher(backoff_base=0.5, backoff_cap=2.0, hide_env=secrets)
        try:
            out = []
            for rule in rules:
                notice = notice_for_test(rule, time.time())
                out.append((notice, await dispatcher.deliver(notice, retries=TEST_RETRIES)))
            return out
        finally:
            await dispatcher.close()

    outcomes = asyncio.run(fire())
    # On the timeline (the store; the data folder's events.jsonl while it cannot be opened).
    history = command_history(profile=profile)
    try:
        history.events.append([notice.event() for notice, _ in outcomes])
        written_to = history.where if history.is_open else str(history.data_dir / "events.jsonl")
    finally:
        history.close()
    failed = False
    report = []
    for notice, deliveries in outcomes:
        if not deliveries:
            report.append({"rule": notice.rule.name, "action": None, "ok": True, "detail": "no action: event only"})
        for d in deliveries:
            failed = failed or not d.ok
            report.append({"rule": d.rule, "action": d.action, "ok": d.ok, "detail": d.detail, "attempts": d.attempts})
    if args.json:
        print(json.dumps({"ok": not failed, "results": report, "events": written_to}, indent=2))
    else:
        for row in report:
            status = "ok  " if row["ok"] else "FAIL"
            action = row["action"] or "-"
            line = printable(f"{status}  {row['rule']}  {action}: {row['detail']}")
            print(line, file=sys.stdout if row["ok"] else sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _export(args: argparse.Namespace, settings: HealthSettings, profile: Profile) -> int:
    """Exit 0: every rule written; 1: the file is written, and the rules that have no series
    to evaluate are named on stderr, one line each (or the file could not be written)."""
    import os

    from console.core.prom_rules import rules_yaml, translate

    prom = profile.prometheus
    done = translate(
        settings.alerts,
        prefix=prom.metric_prefix if prom is not None else None,
        host_label=prom.hostname_label if prom is not None else "hostname",
        node_hosts={n.name: n.host for n in profile.nodes},
        throttle_window=settings.rules.throttle_window,
    )
    for line in done.skipped:
        _warn(line)
    text = rules_yaml(done, header=["written by rocm-console alerts export: the profile's [[alert]] rules"])
    target = args.prometheus_rules
    if target == "-":
        sys.stdout.write(text)
    else:
        path = Path(target).expanduser()
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            print(f"rocm-console: {path}: cannot write: {exc.strerror or type(exc).__name__}", file=sys.stderr)
            return EXIT_FAILED
        if args.json:
            print(json.dumps({"file": str(path), "written": len(done.rules), "skipped": list(done.skipped)}))
        else:
            print(f"wrote {len(done.rules)} rule{'s'[: len(done.rules) != 1]} to {path}")
    return EXIT_FAILED if done.skipped else EXIT_OK
