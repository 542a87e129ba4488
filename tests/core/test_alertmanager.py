"""The [alertmanager] table and the v2 API's JSON built from alert notices (pure)."""

from __future__ import annotations

import pytest

from console.core.alertmanager import alert_key, notice_alert
from console.core.alerts import AlertEngine, AlertNotice, AlertRule, parse_condition
from console.core.errors import ProfileError
from console.core.profiles import load_profile


def _rule(when: str = "health == fail", **kw) -> AlertRule:
    return AlertRule(kw.pop("name", "sick"), parse_condition(when), **kw)


def test_a_firing_and_its_clearing_carry_the_same_labels_and_the_clearing_ends_it():
    rule = _rule(severity="fail")
    fired = notice_alert(AlertNotice(rule, "fired", 1000.0, "node-a", 3, since=990.0))
    cleared = notice_alert(AlertNotice(rule, "cleared", 1060.5, "node-a", 3, since=990.0))
    assert fired is not None and cleared is not None
    assert fired["labels"] == {"alertname": "sick", "node": "node-a", "gpu": "3", "severity": "critical"}
    # the same label set: Alertmanager resolves the alert it has, not a new "info" one
    assert cleared["labels"] == fired["labels"]
    assert fired["startsAt"] == "1970-01-01T00:16:30.000Z" and "endsAt" not in fired
    assert cleared["endsAt"] == "1970-01-01T00:17:40.500Z"
    assert fired["annotations"]["summary"] == "FIRED sick: node-a GPU 3: health == fail"
    assert "health == fail" in fired["annotations"]["description"]
    assert fired["generatorURL"].startswith("https://")


def test_labels_say_nothing_of_who_posts_two_posters_build_the_same_alert():
    rule = _rule("temp_junction_c > 95 for 30s")
    a = notice_alert(AlertNotice(rule, "fired", 1000.0, "n", 0, value=97.0, since=970.0))
    b = notice_alert(AlertNotice(rule, "fired", 1000.7, "n", 0, value=98.0, since=970.2))
    assert a is not None and b is not None
    assert alert_key(a["labels"]) == alert_key(b["labels"])
    assert set(a["labels"]) == {"alertname", "node", "gpu", "severity"}


def test_an_event_alert_ends_by_itself_and_a_test_notice_is_not_posted():
    rule = _rule("event gpu.xid", name="xid")
    engine = AlertEngine([rule])
    from console.core.events import Event

    (notice,) = engine.observe_event(Event(500.0, "gpu.xid", "n", 2, message="xid 79"))
    alert = notice_alert(notice)
    assert alert is not None and alert["endsAt"] == "1970-01-01T00:13:20.000Z"  # 500 + 300 s
    assert notice_alert(AlertNotice(rule, "test", 1.0)) is None


def _load(tmp_path, body: str):
    path = tmp_path / "p.toml"
    path.write_text(f"[alertmanager]\n{body}\n")
    return load_profile([path])


def test_the_table_loads_url_and_token_env(tmp_path):
    spec = _load(tmp_path, 'url = "http://am.example:9093/"\ntoken_env = "AM_TOKEN"\nresend_interval = 30').alertmanager
    assert (spec.url, spec.token_env, spec.resend_interval) == ("http://am.example:9093", "AM_TOKEN", 30.0)
    assert load_profile([]).alertmanager is None


@pytest.mark.parametrize(
    ("body", "key", "words"),
    [
        ('url = "http://alice:s3cret@am:9093"', "url", "credentials in the URL"),
        ('url = "http://alice@am:9093"', "url", "credentials in the URL"),
        ('url = "am:9093"', "url", "http:// or https://"),
        ("token_env = 'X'", "url", "missing required key"),
        ('url = "http://am:9093"\ntoken = "abc"', "token", "token_env names the variable"),
        ('url = "http://am:9093"\nresend_interval = 600', "resend_interval", "resolve_timeout"),
        ('url = "http://am:9093"\ntoken_env = "A B"', "token_env", "environment variable"),
    ],
)
def test_bad_tables_are_one_line_naming_file_table_and_key(tmp_path, body, key, words):
    with pytest.raises(ProfileError) as info:
        _load(tmp_path, body)
    text = str(info.value)
    assert "\n" not in text and "p.toml" in text and "[alertmanager]" in text and f"key '{key}'" in text
    assert words in text
    assert "s3cret" not in text
