"""model_pull.py's own rules: the run's name, the hub's reason in one line, the bytes a pull has
on the disk (finished blobs and partial files), the space refusal, rate and ETA."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SOURCE = Path(__file__).resolve().parents[2] / "console" / "agent" / "model_pull.py"
_spec = importlib.util.spec_from_file_location("model_pull_under_test", _SOURCE)
assert _spec is not None and _spec.loader is not None
model_pull = importlib.util.module_from_spec(_spec)  # the node-side file, as the node loads it
_spec.loader.exec_module(model_pull)


def test_pull_names_are_supervisor_names():
    assert model_pull.pull_name("amd/Llama-3.1-8B-Instruct-FP8-KV") == "pull-amd--Llama-3.1-8B-Instruct-FP8-KV"
    long = model_pull.pull_name("org/" + "x" * 100)
    other = model_pull.pull_name("org/" + "x" * 99 + "y")
    assert len(long) <= 64 and long != other and long.startswith("pull-org--xxx")


def test_the_hubs_reason_is_one_line():
    class GatedRepoError(Exception):
        pass

    class ConnectError(Exception):
        pass

    gated = GatedRepoError(
        "401 Client Error. (Request ID: x)\n\nCannot access gated repo for url u.\nFor more details, see"
    )
    assert model_pull.hub_reason(gated) == (
        "gated model (request access on the hub, then set HF_TOKEN): 401 Client Error. (Request ID: x) "
        "Cannot access gated repo for url u."
    )
    assert model_pull.hub_reason(ConnectError("[Errno 111] Connection refused"), "http://m:1") == (
        "the hub http://m:1 is unreachable: [Errno 111] Connection refused"
    )
    assert model_pull.scrub("bad token hf_abc", "hf_abc") == "bad token ***"


def _pull(tmp_path: Path) -> dict:
    files = [
        {"path": "config.json", "size": 10, "blob": "a" * 40},
        {"path": "model.safetensors", "size": 1000, "blob": "b" * 64},
    ]
    return {"repo": "org/m", "cache_dir": str(tmp_path), "files": files, "total_bytes": 1010, "local_dir": None}


def test_bytes_on_disk_count_finished_blobs_and_partial_files(tmp_path):
    pull = _pull(tmp_path)
    blobs = tmp_path / "models--org--m" / "blobs"
    blobs.mkdir(parents=True)
    assert model_pull.present_bytes(pull) == (0, 0)
    (blobs / ("a" * 40)).write_bytes(b"x" * 10)
    (blobs / (("b" * 64) + ".1234abcd.incomplete")).write_bytes(b"x" * 300)
    assert model_pull.present_bytes(pull) == (10, 300)
    history: list = []
    first = model_pull.progress_record(pull, history, 100.0)
    assert first["bytes"] == 310 and first["rate"] is None and first["eta"] is None
    (blobs / (("b" * 64) + ".1234abcd.incomplete")).write_bytes(b"x" * 500)
    later = model_pull.progress_record(pull, history, 102.0)
    assert later["rate"] == pytest.approx(100.0) and later["eta"] == pytest.approx(5.0)
    # a killed pull's partial file is removed before it runs again (never reused)
    model_pull.remove_stale_partials(pull)
    assert model_pull.present_bytes(pull) == (10, 0)


def test_space_refusal_counts_what_is_still_missing(tmp_path):
    pull = _pull(tmp_path)
    assert model_pull.space_refusal(pull, lambda p: (2000, p)) is None
    line = model_pull.space_refusal(pull, lambda p: (500, "/mnt/small"))
    assert line == "model org/m needs 1.0 kB more (1.0 kB in all), /mnt/small has 500 B free"
    blobs = tmp_path / "models--org--m" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / ("b" * 64)).write_bytes(b"x" * 1000)  # the weights are there: only 10 B to fetch
    assert model_pull.space_refusal(pull, lambda p: (500, p)) is None
