"""The stored record: strict JSON round trip and run ids."""

from __future__ import annotations

import json
import math
import re

import pytest

from console.core.results.record import new_run_id, run_from_dict, run_to_dict
from tests.core.results.results_helpers import CPU, NOW, parse, strict_json


def test_round_trip_is_strict_json():
    (run,) = parse((CPU / "bench_result.json").read_bytes(), label="x").runs
    text = json.dumps(run_to_dict(run), allow_nan=False)
    data = strict_json(text)
    assert data["setup"]["request_rate"] == "inf"
    back = run_from_dict(data)
    assert back == run
    assert back.setup["request_rate"] == math.inf
    with pytest.raises(ValueError, match="without 'id'"):
        run_from_dict({"created": 1, "origin": "import"})
    with pytest.raises(ValueError, match="not a rocm-console result"):
        run_from_dict({"format": "other", "id": "a", "created": 1, "origin": "import"})


def test_run_ids():
    assert re.fullmatch(r"\d{8}-\d{6}-import-abcdef", new_run_id(NOW, None, "abcdef0123"))
    assert new_run_id(NOW, "lab node/1", "abcdef").split("-")[2:] == ["lab", "node", "1", "abcdef"]
