"""`rocm-console alerts list|test`: the profile's [[alert]] rules, and a test firing.

    rocm-console alerts list [--json]
    rocm-console alerts test [--rule NAME] [--json]

`test` sends a test alert (state "test") through each rule's actions, or one rule's:
its command gets the alert as JSON on stdin, its webhook the same JSON by POST.  It
prints one line per action (a webhook by scheme and host only; tokens never), records
the test as an `alert.fired` event, and exits 1 when an action failed, 2 on bad input
(no rules, an unknown rule, a bad profile).  A rule needs no node: a profile holding
only [[alert]] tables will do.
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
from console.core.profiles import demo_profile_path, discover_profile_paths, load_profile

if TYPE_CHECKING:
    from console.core.health_profile import HealthSettings

TEST_RETRIES = 2  # a test says quickly whether the receiver works


def add_parser(sub) -> list[argparse.ArgumentParser]:
    ops = add_actions(sub, "alerts", help="the profile's [[alert]] rules: list them, fire a test alert")
    lst = ops.add_parser("list", help="the rules: name, condition, actions")
    test = ops.add_parser("test", help="fire a test alert through the rules' actions")
    test.add_argument("--rule", metavar="NAME", help="only this rule")
    add_command_options([lst, test])
    return [lst, test]


def _settings(args: argparse.Namespace) -> tuple[HealthSettings, list[Path]]:
    from console.core.health_profile import health_settings

    builtin = [PRESETS_PATH] if PRESETS_PATH.exists() else []
    if getattr(args, "demo", False):
        paths = [demo_profile_path()]
    else:
        paths = discover_profile_paths(getattr(args, "profile", None) or [], Path.cwd(), user_config_dir())
    profile = load_profile([*builtin, *paths])
    return health_settings(profile), paths


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
    settings, paths = _settings(args)
    if not settings.alerts:
        searched = ", ".join(str(p) for p in paths) or "./profiles/*.toml, " + str(user_config_dir())
        raise UsageError(f"no [[alert]] rules in the profile (searched {searched})")
    if args.alerts_command == "list":
        return _list(args, settings)
    return _test(args, settings)


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
        print(f"{r.name.ljust(width)}  {r.condition.text}  -> {_actions_text(r)}")
    return EXIT_OK


def _test(args: argparse.Namespace, settings: HealthSettings) -> int:
    from console.core.alerts import notice_for_test
    from console.services.alerts import AlertDispatcher
    from console.services.events import EventLog

    rules = list(settings.alerts)
    if args.rule is not None:
        rule = settings.alert(args.rule)
        if rule is None:
            known = ", ".join(r.name for r in rules)
            raise UsageError(f"--rule {args.rule!r}: no such rule (known: {known})")
        rules = [rule]

    # The lines below say every outcome; the dispatcher's own log lines would repeat them.
    logging.getLogger("console.alerts").addHandler(logging.NullHandler())
    logging.getLogger("console.alerts").propagate = False

    async def fire() -> list:
        dispatcher = AlertDispatcher(backoff_base=0.5, backoff_cap=2.0)
        try:
            out = []
            for rule in rules:
                notice = notice_for_test(rule, time.time())
                out.append((notice, await dispatcher.deliver(notice, retries=TEST_RETRIES)))
            return out
        finally:
            await dispatcher.close()

    outcomes = asyncio.run(fire())
    log = EventLog()
    log.append([notice.event() for notice, _ in outcomes])
    failed = False
    report = []
    for notice, deliveries in outcomes:
        if not deliveries:
            report.append({"rule": notice.rule.name, "action": None, "ok": True, "detail": "no action: event only"})
        for d in deliveries:
            failed = failed or not d.ok
            report.append({"rule": d.rule, "action": d.action, "ok": d.ok, "detail": d.detail, "attempts": d.attempts})
    if args.json:
        print(json.dumps({"ok": not failed, "results": report, "events": str(log.path)}, indent=2))
    else:
        for row in report:
            status = "ok  " if row["ok"] else "FAIL"
            action = row["action"] or "-"
            line = f"{status}  {row['rule']}  {action}: {row['detail']}"
            print(line, file=sys.stdout if row["ok"] else sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
