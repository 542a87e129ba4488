"""The profile's [health] table and [[alert]] rules (console/core/health_profile.py),
read through the profile loader as a user's file is."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.errors import ProfileError
from console.core.health import HealthRules
from console.core.health_profile import health_settings
from console.core.profiles import load_profile

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
[nodes.a]
transport = "local"

[health]
interval = 5
throttle_share = 0.4
ecc_window = "2h"
fault_window = 600

[health.severity]
throttle = "off"
pcie_degraded = "fail"

[[alert]]
name = "gpu-hot"
when = "temp_junction_c > 95 for 30s"
command = ["/usr/bin/logger", "-t", "rocm-console"]
timeout = "5s"

[[alert]]
name = "sick"
when = "health == fail"
webhook = "https://chat.example.org/hooks/abc"
token_env = "CHAT_TOKEN"
nodes = ["a"]
severity = "fail"
repeat_after = "10m"
"""


def write(tmp_path: Path, text: str, name: str = "lab.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as err:
        load_profile([path])
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}:")
    return message.removeprefix(f"{path}")


def test_good_tables(tmp_path):
    path = write(tmp_path, GOOD)
    profile = load_profile([path])
    assert [n.name for n in profile.nodes] == ["a"]
    settings = health_settings(profile)
    assert settings.rules == HealthRules(
        interval=5.0,
        throttle_share=0.4,
        ecc_window=7200.0,
        fault_window=600.0,
        severity=(("throttle", "off"), ("pcie_degraded", "fail")),
    )
    hot, sick = settings.alerts
    assert (hot.name, hot.condition.duration, hot.command, hot.timeout, hot.line) == (
        "gpu-hot",
        30.0,
        ("/usr/bin/logger", "-t", "rocm-console"),
        5.0,
        14,
    )
    assert (sick.webhook, sick.token_env, sick.nodes, sick.severity, sick.repeat_after, sick.line) == (
        "https://chat.example.org/hooks/abc",
        "CHAT_TOKEN",
        ("a",),
        "fail",
        600.0,
        20,
    )
    assert hot.source == str(path) and settings.alert("sick") is sick


def test_no_tables_means_the_defaults(tmp_path):
    settings = health_settings(load_profile([write(tmp_path, '[nodes.a]\nhost = "x"\n')]))
    assert settings.rules == HealthRules() and settings.alerts == ()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ('when = "temp_junction_c > 95 for 30s"', 'when = "temp_junc > 95 for 30s"'),
            ":16: [[alert]] key 'when': rule 'gpu-hot': unknown metric 'temp_junc'; did you mean 'temp_junction_c'?",
        ),
        (
            ('when = "health == fail"', 'when = "health == sick"'),
            ":22: [[alert]] key 'when': rule 'sick': unknown health state 'sick'",
        ),
        (
            ('command = ["/usr/bin/logger", "-t", "rocm-console"]', 'command = "/usr/bin/logger -t x"'),
            ":17: [[alert]] key 'command': rule 'gpu-hot': expected an array of strings (argv, run without a shell)",
        ),
        (
            ('token_env = "CHAT_TOKEN"', 'token = "xoxb-123"'),
            ":24: [[alert]] key 'token': rule 'sick': secrets do not belong in profiles",
        ),
        (
            ('webhook = "https://chat.example.org/hooks/abc"', 'webhook = "https://me:pw@chat.example.org/"'),
            ":23: [[alert]] key 'webhook': rule 'sick': a user or password in the URL",
        ),
        (
            ('webhook = "https://chat.example.org/hooks/abc"', 'webhook = "ftp://chat.example.org/"'),
            ":23: [[alert]] key 'webhook': rule 'sick': expected an http:// or https:// URL",
        ),
        (('name = "sick"', 'name = "gpu-hot"'), ":21: [[alert]] key 'name': rule 'gpu-hot' is also defined at line 14"),
        (('name = "sick"\n', ""), ":20: [[alert]] key 'name': rule 2: missing required key"),
        (
            ('timeout = "5s"', 'timeout = "forever"'),
            ":18: [[alert]] key 'timeout': rule 'gpu-hot': 'forever' is not a duration",
        ),
        (
            ('severity = "fail"', 'severity = "page"'),
            ":26: [[alert]] key 'severity': rule 'sick': must be one of: info, warn, fail",
        ),
        (('nodes = ["a"]', 'nodes = "a"'), ":25: [[alert]] key 'nodes': rule 'sick': expected an array of node names"),
        (('timeout = "5s"', "retries = 3"), ":18: [[alert]] key 'retries': rule 'gpu-hot': unknown key"),
        (("throttle_share = 0.4", "throttle_share = 25"), ":6: [health] key 'throttle_share': must be >= 0 and < 1"),
        (("throttle_share = 0.4", "throttle_shar = 0.4"), ":6: [health] key 'throttle_shar': unknown key"),
        (('ecc_window = "2h"', "ecc_window = 5"), ":7: [health] key 'ecc_window': must be between 1m and 30d, got 5s"),
        (("interval = 5", 'interval = "often"'), ":5: [health] key 'interval': 'often' is not a duration"),
        (
            ('throttle = "off"', 'throttle = "quiet"'),
            ":11: [health.severity] key 'throttle': must be one of: fail, warn, off",
        ),
        (('throttle = "off"', 'thermal = "off"'), ":11: [health.severity] key 'thermal': unknown rule"),
    ],
)
def test_mistakes_name_file_line_table_key_and_rule(tmp_path, change, expected):
    old, new = change
    assert old in GOOD
    message = error_of(tmp_path, GOOD.replace(old, new, 1))
    assert message.startswith(expected), message


def test_alert_must_be_an_array_of_tables(tmp_path):
    message = error_of(tmp_path, '[alert]\nname = "x"\nwhen = "health == fail"\n')
    assert message == ":1: [alert]: write each rule as [[alert]] (an array of tables)"


def test_webhook_rules(tmp_path):
    both = GOOD.replace('token_env = "CHAT_TOKEN"', 'webhook_env = "HOOK"')
    assert "give webhook or webhook_env, not both" in error_of(tmp_path, both)
    lone = GOOD.replace('command = ["/usr/bin/logger", "-t", "rocm-console"]', 'token_env = "T"')
    assert "token_env is sent to a webhook; this rule has none" in error_of(tmp_path, lone)


def test_files_merge(tmp_path):
    first = write(tmp_path, GOOD, "a.toml")
    second = write(
        tmp_path,
        '[health]\nthrottle_share = 0.1\n\n[[alert]]\nname = "down"\nwhen = "node down for 60s"\n',
        "b.toml",
    )
    settings = health_settings(load_profile([first, second]))
    assert settings.rules.throttle_share == 0.1 and settings.rules.interval == 5.0  # later keys win
    assert [a.name for a in settings.alerts] == ["gpu-hot", "sick", "down"]
    third = write(tmp_path, '[[alert]]\nname = "sick"\nwhen = "health == warn"\n', "c.toml")
    with pytest.raises(ProfileError) as err:
        health_settings(load_profile([first, third]))
    assert str(err.value) == f"{third}:1: [[alert]] key 'name': rule 'sick' is also defined in {first}"


def test_shipped_example_profile_has_health_and_alerts():
    settings = health_settings(load_profile([REPO / "profiles" / "example.toml"]))
    assert settings.rules.throttle_share == 0.25 and settings.rules.ecc_window == 3600.0
    assert [a.name for a in settings.alerts] == ["gpu-hot", "gpu-sick", "node-down"]
    assert settings.alert("gpu-sick").webhook_env == "GPU_ALERTS_WEBHOOK"
