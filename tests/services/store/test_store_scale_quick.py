"""tests/perf/store_scale.py runs end to end (--quick) and prints its figures with issue Y's
budgets; no budget is asserted here (tests/perf/README.md holds the full run's figures)."""

from __future__ import annotations

import pytest

from tests.perf.test_perf_smoke import number, run_quick


@pytest.mark.timeout(240)
def test_store_scale_quick():
    r = run_quick("store_scale.py")
    assert r["engine"] == "sqlite" and r["runs"] == 2000 and r["events"] == 20000
    assert r["list_newest_page"]["rows"] == 50 and r["import"]["imported"] == r["import"]["files"] == 200
    assert {"list_newest_page_s", "list_node_since_7d_s", "events_since_1h_s", "import_files_s"} <= set(r["budgets"])
    assert number(r["list_newest_page"]["peak_rss_mb"]) and number(r["events_since_1h"]["query_s"])


@pytest.mark.timeout(300)
def test_store_scale_quick_on_postgresql():
    """--engine postgresql starts its own private server, measures the same rows on both
    engines and budgets PostgreSQL's figures at 2x SQLite's."""
    from tests.services.store.pg_server import find_bin

    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[test]')")
    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; scripts/test-all does)")
    r = run_quick("store_scale.py", timeout=280, extra=("--engine", "postgresql"))
    assert (
        r["engine"] == "postgresql" and r["list_newest_page"]["rows"] == r["sqlite"]["list_newest_page"]["rows"] == 50
    )
    assert r["import"]["imported"] == r["sqlite"]["import"]["imported"] == 200
    assert r["list_node_since_7d"]["rows"] == r["sqlite"]["list_node_since_7d"]["rows"]  # the same rows
    assert r["events_since_1h"]["rows"] == r["sqlite"]["events_since_1h"]["rows"]
    assert r["budgets"]["list_newest_page_query_s_vs_sqlite"]["budget"].startswith("<= 2x SQLite")
    # the fresh processes: both stores in alternation, judged on the medians
    for name in ("list_newest_page_s", "list_node_since_7d_s", "events_since_1h_s"):
        both = r["side_by_side"][name]
        assert 0 < both["sqlite"]["min"] <= both["sqlite"]["median"] and 0 < both["postgresql"]["min"]
        assert r["budgets"][f"{name}_vs_sqlite"]["figure"] == both["ratio_of_medians"]
