"""`rocm-console baseline`: bad input is one line naming the thing at fault (exit 2); the demo
lists its seeded baseline; a check on the demo node whose simulated ROCm was upgraded since
runs the suite again (its own instance, stopped after), judges every metric and names the
upgrade in its diff."""

from __future__ import annotations

import json

import pytest

from .cli_helpers import one_line_error, run


@pytest.fixture
def env(tmp_path) -> dict:
    return {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}


def test_bad_input_is_one_line_exit_2(env, profile, tmp_path):
    missing = run("baseline", "save", "x", "--suite", str(tmp_path / "nope.toml"), "--profile", str(profile), env=env)
    assert missing.returncode == 2 and "nope.toml" in one_line_error(missing)

    bad = tmp_path / "bad.toml"
    bad.write_text('[serve]\npreset = "lama"\n\n[[point]]\npreset = "tiny"\nconcurrency = 4\n')
    wrong = run("baseline", "save", "x", "--suite", str(bad), "--profile", str(profile), env=env)
    line = one_line_error(wrong)
    assert wrong.returncode == 2 and "bad.toml:2: [serve] key 'preset': no [serve.lama] preset" in line, line

    name = run("baseline", "save", "no/slash", "--suite", str(bad), "--profile", str(profile), env=env)
    assert name.returncode == 2 and "baseline name 'no/slash'" in one_line_error(name)
    # W2: names that break a path (or hide a file, or read as an option) are refused, saved or checked
    for bad_name in ("..", ".", ".hidden", "-x", "", "a/../b", "x" * 65):
        for line in (("save", "--suite", str(bad)), ("check", "--node", "sim")):
            proc = run("baseline", line[0], "--profile", str(profile), *line[1:], "--", bad_name, env=env)
            msg = one_line_error(proc)
            assert proc.returncode == 2, (bad_name, line, msg)
            assert f"baseline name {bad_name!r}" in msg or (bad_name == "" and "needs a NAME" in msg), msg
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.json"))

    absent = run("baseline", "check", "nosuch", "--node", "sim", "--profile", str(profile), env=env)
    assert absent.returncode == 2
    assert one_line_error(absent) == "rocm-console: no baseline 'nosuch' for node sim (save one with `baseline save`)"

    both = run("baseline", "check", "x", "--all", "--profile", str(profile), env=env)
    assert both.returncode == 2 and "NAME or --all" in one_line_error(both)


@pytest.mark.timeout(300)
def test_demo_check_all_against_the_seeded_baseline_names_the_rocm_upgrade(env):
    listing = run("baseline", "list", "--demo", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    [seeded] = json.loads(listing.stdout)["baselines"]
    assert (seeded["name"], seeded["node"]) == ("demo", "mi300x-spx")

    # --all: every node's baselines, one node at a time (the demo has the one)
    check = run("baseline", "check", "--all", "--demo", "--json", env=env, timeout=280)
    assert check.returncode in (0, 1), check.stderr
    [summary] = json.loads(check.stdout)["checks"]
    assert (summary["node"], summary["baseline"]) == ("mi300x-spx", "demo")
    assert summary["changes"] == ["ROCm: 7.0.2-56 -> 7.1.0-21"]
    report = summary["report"]
    assert [c["line"] for c in report["changes"]] == ["ROCm: 7.0.2-56 -> 7.1.0-21"]
    points = {m["point"] for m in report["metrics"]}
    assert points == {"tiny-c4", "tiny-c16", "offline-throughput"}
    unjudged = [m for m in report["metrics"] if m["verdict"] not in ("same", "improved", "regressed")]
    assert not unjudged, unjudged
    short = [m for m in report["metrics"] if m["n_now"] != 3 or m["noise_band_pct"] is None]
    assert not short, short
    assert report["exit_code"] == check.returncode
    # the suite's instance is gone
    served = json.loads(run("serve", "list", "--demo", "--node", "mi300x-spx", "--json", env=env).stdout)
    assert not [i for i in served["instances"] if i["name"].startswith("baseline-")]
