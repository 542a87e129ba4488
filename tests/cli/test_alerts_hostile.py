"""`rocm-console alerts list|test` given what a careless operator or an attacker gives it
(issue W2 items 4, 5, 9, 12, 13; U2's alert newline): malformed webhook URLs in the
environment, credentials in them, secrets of other rules, escape sequences, absurd
durations, unknown nodes, `--demo --profile`. Run as a user does, against real commands
and a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.cli.cli_helpers import one_line_error, run
from tests.services.webhook_receiver import Receiver

TOKEN = "tok-4b2f9e1d7c3a-secret"


@pytest.fixture
def env(tmp_path) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    return {
        "HOME": str(home),
        "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }


def toml_list(argv: list[str]) -> str:
    return "[" + ", ".join(json.dumps(a) for a in argv) + "]"


def pager(tmp_path: Path, out: Path) -> list[str]:
    """A command that keeps the alert it reads on stdin."""
    script = tmp_path / "pager.py"
    script.write_text(f"import sys\nopen({str(out)!r}, 'w').write(sys.stdin.read())\n")
    return [sys.executable, str(script)]


def base_url(receiver: Receiver) -> str:
    return receiver.url.rsplit("/hooks", 1)[0]


# ---------------------------------------------------------------- item 4: malformed URLs


@pytest.mark.parametrize(
    "url",
    [
        "http://u:p@127.0.0.1:99999/",  # a port out of range (and credentials)
        "http://[::1",  # an unclosed bracket
        "ftp://127.0.0.1/hook",  # not http
        "file:///etc/passwd",
        "http://127.0.0.1:0/",  # port 0
        "http://exa mple.com/",  # a space
    ],
)
def test_a_malformed_webhook_url_from_the_environment_is_one_fail_line(tmp_path, env, url):
    out = tmp_path / "pager.json"
    with Receiver() as receiver:
        profile = tmp_path / "alerts.toml"
        profile.write_text(
            f"""
[[alert]]
name = "gpu-sick"
when = "health == fail"
command = {toml_list(pager(tmp_path, out))}
webhook_env = "SICK_HOOK"

[[alert]]
name = "node-down"
when = "node down for 60s"
webhook = "{receiver.url}"
"""
        )
        proc = run("alerts", "test", "--profile", str(profile), env={**env, "SICK_HOOK": url})
        got = receiver.wait_for(1)
    assert proc.returncode == 1, proc.stderr
    line = one_line_error(proc)  # one line, no traceback
    assert line.startswith("FAIL  gpu-sick  webhook: webhook_env SICK_HOOK "), line
    assert url not in line and "u:p" not in line  # a URL from the environment is a secret
    # The same rule's command and the other rule's webhook still ran and said so.
    assert proc.stdout.splitlines() == [
        f"ok    gpu-sick  command: {sys.executable} exited with 0",
        f"ok    node-down  webhook: {base_url(receiver)}: HTTP 200",
    ]
    assert json.loads(out.read_text())["alert"] == "gpu-sick"
    assert [g.json()["alert"] for g in got] == ["node-down"]


def test_alerts_list_warns_of_a_malformed_webhook_url(tmp_path, env):
    profile = tmp_path / "alerts.toml"
    profile.write_text('[[alert]]\nname = "gpu-sick"\nwhen = "health == fail"\nwebhook_env = "SICK_HOOK"\n')
    proc = run("alerts", "list", "--profile", str(profile), env={**env, "SICK_HOOK": "http://[::1"})
    assert proc.returncode == 0
    assert one_line_error(proc) == (
        "rocm-console: warning: alert gpu-sick: webhook_env SICK_HOOK holds no valid URL (invalid ipv6 url);"
        " its webhook is not sent"
    )
    assert proc.stdout.splitlines() == ["gpu-sick  health == fail  -> webhook $SICK_HOOK"]


# ---------------------------------------------------------------- item 12: credentials in the URL


def test_credentials_in_a_webhook_url_are_refused_and_the_token_is_what_arrives(tmp_path, env):
    with Receiver() as receiver:
        profile = tmp_path / "alerts.toml"
        profile.write_text(
            '[[alert]]\nname = "gpu-sick"\nwhen = "health == fail"\n'
            'webhook_env = "SICK_HOOK"\ntoken_env = "SICK_TOKEN"\n'
        )
        port = receiver.server.server_address[1]
        with_user = f"http://alice:hunter22@127.0.0.1:{port}/hooks/alerts"
        proc = run(
            "alerts", "test", "--profile", str(profile), env={**env, "SICK_HOOK": with_user, "SICK_TOKEN": TOKEN}
        )
        assert proc.returncode == 1
        assert one_line_error(proc) == (
            "FAIL  gpu-sick  webhook: webhook_env SICK_HOOK holds a user or password in the URL:"
            " give the token in token_env instead"
        )
        assert receiver.received == []  # nothing sent: Basic auth would have replaced the token
        proc = run(
            "alerts", "test", "--profile", str(profile), env={**env, "SICK_HOOK": receiver.url, "SICK_TOKEN": TOKEN}
        )
        got = receiver.wait_for(1)
    assert proc.returncode == 0, proc.stderr
    assert [g.headers["authorization"] for g in got] == [f"Bearer {TOKEN}"]
    assert "hunter22" not in proc.stdout + proc.stderr and TOKEN not in proc.stdout + proc.stderr

    # In the profile itself, a URL with credentials is refused at load, naming the file and rule.
    profile.write_text(
        f'[[alert]]\nname = "gpu-sick"\nwhen = "health == fail"\nwebhook = "{with_user}"\ntoken_env = "SICK_TOKEN"\n'
    )
    proc = run("alerts", "list", "--profile", str(profile), env=env)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"rocm-console: {profile}:4: [[alert]] key 'webhook': rule 'gpu-sick': a user or password")
    assert "hunter22" not in line


# ---------------------------------------------------------------- item 5: no secrets in a command's environment


def test_no_alert_command_gets_any_rules_webhook_or_token(tmp_path, env):
    seen = tmp_path / "env.json"
    dump = [sys.executable, "-c", f"import json, os; json.dump(dict(os.environ), open({str(seen)!r}, 'w'))"]
    profile = tmp_path / "alerts.toml"
    profile.write_text(
        f"""
[serve.llama]
model = "m"
api_key_env = "VLLM_KEY"

[[alert]]
name = "gpu-sick"
when = "health == fail"
command = {toml_list(dump)}

[[alert]]
name = "node-down"
when = "node down for 60s"
webhook_env = "DOWN_HOOK"
token_env = "DOWN_TOKEN"
"""
    )
    secrets = {"DOWN_HOOK": "http://127.0.0.1:9/x", "DOWN_TOKEN": TOKEN, "VLLM_KEY": "vllm-key-123456"}
    proc = run(
        "alerts", "test", "--profile", str(profile), "--rule", "gpu-sick", env={**env, **secrets, "PAGER_TEAM": "gpu"}
    )
    assert proc.returncode == 0, proc.stderr
    child = json.loads(seen.read_text())
    assert child["PAGER_TEAM"] == "gpu"  # the environment is passed on ...
    assert not set(secrets) & set(child)  # ... but not any rule's (or preset's) secret
    assert TOKEN not in json.dumps(child)


# ---------------------------------------------------------------- U2: one alert a line


@pytest.mark.skipif(shutil.which("tee") is None, reason="needs tee")
def test_alerts_appended_by_tee_are_one_a_line(tmp_path, env):
    log = tmp_path / "alerts.jsonl"
    profile = tmp_path / "alerts.toml"
    profile.write_text(
        f'[[alert]]\nname = "gpu-sick"\nwhen = "health == fail"\ncommand = {toml_list([shutil.which("tee") or "tee", "-a", str(log)])}\n'
    )
    for _ in range(2):
        assert run("alerts", "test", "--profile", str(profile), env=env).returncode == 0
    lines = log.read_text().splitlines()
    assert [json.loads(line)["alert"] for line in lines] == ["gpu-sick", "gpu-sick"]
    assert log.read_text().endswith("}\n")


# ---------------------------------------------------------------- item 9: escape sequences


def test_escape_sequences_from_a_command_and_a_rule_are_shown_not_sent(tmp_path, env):
    noisy = [
        sys.executable,
        "-c",
        "import sys; sys.stdout.write('\\x1b]0;PWNED\\x07\\x1b[2J'); sys.stderr.write('boom \\x1b]0;TITLE\\x07\\x07'); sys.exit(3)",
    ]
    profile = tmp_path / "alerts.toml"
    profile.write_text(
        f"""
[[alert]]
name = "noisy"
when = "health == fail"
command = {toml_list(noisy)}

[[alert]]
name = "odd-program"
when = "health == fail"
command = ["/nonexistent/\\u001b]0;X\\u0007pager"]
"""
    )
    proc = run("alerts", "test", "--profile", str(profile), env=env)
    assert proc.returncode == 1
    everything = proc.stdout + proc.stderr
    assert "\x1b" not in everything and "\x07" not in everything
    lines = proc.stderr.splitlines()
    assert f"FAIL  noisy  command: {sys.executable} exited with 3: boom \\x1b]0;TITLE\\x07\\x07" in lines
    assert any(
        line.startswith("FAIL  odd-program  command: cannot run /nonexistent/\\x1b]0;X\\x07pager") for line in lines
    )
    listed = run("alerts", "list", "--profile", str(profile), env=env)
    assert listed.returncode == 0 and "\x1b" not in listed.stdout + listed.stderr
    assert "command /nonexistent/\\x1b]0;X\\x07pager" in listed.stdout


# ---------------------------------------------------------------- item 13: said, not swallowed


def test_an_absurd_duration_is_refused(tmp_path, env):
    profile = tmp_path / "alerts.toml"
    profile.write_text('[[alert]]\nname = "slow"\nwhen = "node down for 999999999d"\n')
    for command in ("list", "test"):
        proc = run("alerts", command, "--profile", str(profile), env=env)
        assert proc.returncode == 2
        assert one_line_error(proc) == (
            f"rocm-console: {profile}:3: [[alert]] key 'when': rule 'slow': 'for 999999999d' is longer than the"
            " longest duration, 7d (in 'node down for 999999999d')"
        )


def test_a_rule_for_a_node_the_profile_lacks_is_warned(tmp_path, env, profile):
    text = profile.read_text() + '\n[[alert]]\nname = "sick"\nwhen = "health == fail"\nnodes = ["sim", "nosuch"]\n'
    profile.write_text(text)
    proc = run("alerts", "list", "--profile", str(profile), env=env)
    assert proc.returncode == 0
    line = one_line_error(proc)
    assert line.startswith("rocm-console: warning: ") and line.endswith(
        "[[alert]] rule 'sick': nodes 'nosuch' not in the profile (nodes: sim); the rule never fires for it"
    )


def test_demo_with_a_profile_applies_its_rules(tmp_path, env):
    out = tmp_path / "pager.json"
    mine = tmp_path / "mine.toml"
    mine.write_text(
        f'[[alert]]\nname = "mine-hot"\nwhen = "temp_junction_c > 95 for 30s"\nnodes = ["mi300x-spx"]\n'
        f"command = {toml_list(pager(tmp_path, out))}\n"
    )
    proc = run("alerts", "list", "--demo", "--profile", str(mine), env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # mi300x-spx is a demo node: nothing to warn of
    assert proc.stdout.splitlines() == [f"mine-hot  temp_junction_c > 95 for 30s  -> command {sys.executable}"]
    proc = run("alerts", "test", "--demo", "--profile", str(mine), env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"ok    mine-hot  command: {sys.executable} exited with 0"]
    assert json.loads(out.read_text())["alert"] == "mine-hot"
