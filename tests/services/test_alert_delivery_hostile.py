"""The running console's alert delivery (AlertService -> AlertDispatcher) given a malformed
webhook URL from the environment, other rules' secrets and a failing action: each action's
outcome is kept, none is lost to another's error (issue W2 items 4, 5, 12)."""

from __future__ import annotations

import json
import logging
import os
import sys

from console.core.alerts import AlertRule, parse_condition
from console.services.alerts import AlertDispatcher, AlertService
from tests.services.webhook_receiver import Receiver

TOKEN = "tok-77aa55cc33ee-secret"


def rule(**kw) -> AlertRule:
    return AlertRule(name=kw.pop("name", "gpu-sick"), condition=parse_condition(kw.pop("when", "health == fail")), **kw)


async def test_a_malformed_url_costs_only_its_own_webhook_in_the_running_console(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="console.alerts")
    out = tmp_path / "got.json"
    keep = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"]
    with Receiver() as receiver:
        rules = [
            rule(command=tuple(keep), webhook_env="SICK_HOOK"),
            rule(name="also-sick", webhook=receiver.url),
        ]
        env = {**os.environ, "SICK_HOOK": "http://u:p@127.0.0.1:99999/"}
        service = AlertService(rules, dispatcher=AlertDispatcher(env=env, retries=0))
        try:
            events = service.observe_gpu(1000.0, "mi300-a", 3, {}, "fail")
            assert await service.dispatcher.drain(timeout=20)
        finally:
            await service.dispatcher.close()
        got = receiver.wait_for(1)
    assert len(events) == 2
    outcome = {(d.rule, d.action): d for d in service.dispatcher.results}
    assert outcome[("gpu-sick", "command")].ok  # not lost to the webhook's error
    assert json.loads(out.read_text())["alert"] == "gpu-sick"
    webhook = outcome[("gpu-sick", "webhook")]
    assert not webhook.ok and webhook.detail.startswith("webhook_env SICK_HOOK holds no valid URL")
    assert outcome[("also-sick", "webhook")].ok and [g.json()["alert"] for g in got] == ["also-sick"]
    # Said once when the rules were loaded, naming the rule, never the URL.
    said = [r.getMessage() for r in caplog.records if "SICK_HOOK" in r.getMessage()]
    assert said[0] == (
        "alert gpu-sick: webhook_env SICK_HOOK holds no valid URL (port out of range 0-65535); its webhook is not sent"
    )
    assert not any("u:p@" in r.getMessage() for r in caplog.records)


async def test_an_action_that_raises_is_a_failure_of_its_own(tmp_path):
    """A bug in one action (here: the webhook) is that action's failed outcome; the command's stays."""
    out = tmp_path / "got.json"
    keep = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"]
    dispatcher = AlertDispatcher(env={"SICK_HOOK": "http://127.0.0.1:9/"})

    async def broken(*_args, **_kw):
        raise RuntimeError("a bug")

    dispatcher.post_webhook = broken  # type: ignore[method-assign]
    try:
        results = await dispatcher.deliver(
            service_notice(rule(command=tuple(keep), webhook_env="SICK_HOOK")), retries=0
        )
    finally:
        await dispatcher.close()
    assert [(d.action, d.ok, d.detail) for d in results] == [
        ("command", True, f"{sys.executable} exited with 0"),
        ("webhook", False, "unexpected RuntimeError"),
    ]
    assert out.exists()


def service_notice(r: AlertRule):
    from console.core.alerts import AlertEngine

    return AlertEngine([r]).observe_gpu(1000.0, "mi300-a", 3, {}, "fail")[0]


async def test_the_service_keeps_every_rules_secrets_from_every_command(tmp_path):
    seen = tmp_path / "env.json"
    dump = [sys.executable, "-c", f"import json, os; json.dump(dict(os.environ), open({str(seen)!r}, 'w'))"]
    rules = [
        rule(command=tuple(dump)),
        rule(name="other", when="node down", webhook_env="OTHER_HOOK", token_env="OTHER_TOKEN"),
    ]
    env = {**os.environ, "OTHER_HOOK": "http://127.0.0.1:9/x", "OTHER_TOKEN": TOKEN, "KEPT": "1"}
    service = AlertService(rules, dispatcher=AlertDispatcher(env=env))
    try:
        service.observe_gpu(1000.0, "mi300-a", 3, {}, "fail")
        assert await service.dispatcher.drain(timeout=20)
    finally:
        await service.dispatcher.close()
    child = json.loads(seen.read_text())
    assert child["KEPT"] == "1"
    assert "OTHER_HOOK" not in child and "OTHER_TOKEN" not in child
