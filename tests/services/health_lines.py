"""Health lines as the agent writes them (contract section 1), for tests that feed the console
before (or besides) the agent's own health reader: real amdsmi function names and keys."""

from __future__ import annotations

import json


def amd_entry(physical: int, *, uncorrectable: int = 0, pending: int = 0) -> dict:
    return {
        "physical": physical,
        "vendor": "amd",
        "source": "amdsmi",
        "results": {
            "amdsmi_get_gpu_total_ecc_count": {
                "correctable_count": 0,
                "uncorrectable_count": uncorrectable,
                "deferred_count": 0,
            },
            "amdsmi_get_gpu_bad_page_info": [{"page_address": 4096 * i, "status": 1} for i in range(pending)],
            "amdsmi_get_pcie_info": {
                "pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 32000},
                "pcie_metric": {"pcie_width": 16, "pcie_speed": 32000, "pcie_replay_count": 0},
            },
        },
        "events": [],
    }


def health_line(ts: float, entries: list, interval: float = 1.0) -> str:
    return json.dumps({"kind": "health", "ts": ts, "interval": interval, "gpus": entries})
