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
