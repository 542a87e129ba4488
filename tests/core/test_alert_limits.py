"""The limits of alert rules in the pure core (issue W2 items 4, 12, 13): the longest 'for',
the webhook URLs that are never sent to, the nodes a rule names that the profile lacks."""

from __future__ import annotations

import pytest

from console.core.alerts import (
    MAX_DURATION,
    AlertRule,
    ConditionError,
    parse_condition,
    unknown_nodes,
    webhook_problem,
)


def test_for_is_bounded_but_a_week_is_fine():
    assert parse_condition("node down for 7d").duration == MAX_DURATION
    for text in ("node down for 8d", "node down for 999999999d", "health == fail for " + "9" * 400 + "d"):
        with pytest.raises(ConditionError, match="longer than the longest duration, 7d|too long"):
            parse_condition(text)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "is empty"),
        ("http://u:p@127.0.0.1:99999/", "holds no valid URL (port out of range 0-65535)"),
        ("http://[::1", "holds no valid URL (invalid ipv6 url)"),
        ("http://h:-1/", "holds no valid URL (port could not be cast to integer value as '-1')"),
        ("ftp://h/x", "holds no http(s) URL"),
        ("http:///x", "holds no http(s) URL"),
        ("http://h\x1b]0;t\x07/", "holds a URL with spaces or control characters"),
        ("http://alice:secret@h/x", "holds a user or password in the URL: give the token in token_env instead"),
        ("http://alice@h/x", "holds a user or password in the URL: give the token in token_env instead"),
        ("http://h:0/", "holds a URL with port 0"),
        ("https://hooks.example.com/services/T0/B0", None),
        ("http://127.0.0.1:8080/a?b=c", None),
    ],
)
def test_webhook_problem_never_quotes_the_url(url, problem):
    said = webhook_problem(url)
    assert said == problem
    if said and url:
        assert url not in said and "secret" not in said


def test_unknown_nodes_are_named_with_the_rule():
    rule = AlertRule("hot", parse_condition("health == fail"), nodes=("a", "nosuch"), source="lab.toml", line=4)
    assert unknown_nodes([rule], ["a", "b"]) == [
        "lab.toml:4: [[alert]] rule 'hot': nodes 'nosuch' not in the profile (nodes: a, b); the rule never fires for it"
    ]
    assert unknown_nodes([rule], ["a", "nosuch"]) == []
    assert unknown_nodes([rule], []) == []  # a file of rules alone: nothing to judge by
