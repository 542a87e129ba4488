"""The one reader for user-named files: devices, FIFOs, /proc and oversized files end in one line."""

from __future__ import annotations

import errno
import os
import pickle
import threading
import time
from pathlib import Path

import pytest

from console.core.bounded_file import (
    FileLimitError,
    describe_limit,
    read_bounded,
)
from console.core.errors import ConsoleError

LIMIT = 1 << 20


def _refused(path: str | Path) -> FileLimitError:
    started = time.monotonic()
    with pytest.raises(FileLimitError) as info:
        read_bounded(path, LIMIT, "result file")
    assert time.monotonic() - started < 1.0
    err = info.value
    assert isinstance(err, ConsoleError) and isinstance(err, OSError)
    assert str(err).startswith(f"{path}: ") and "\n" not in str(err)
    assert "1 MiB" in str(err) and "result file" in str(err)
    return err


def test_a_character_device_is_refused_without_reading_it():
    assert "character device" in str(_refused("/dev/zero"))


def test_a_fifo_is_refused_and_never_blocks(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = threading.Event()

    def guard() -> None:  # if the read blocked, a writer ends it (the test then fails on time)
        if not done.wait(5):
            with open(fifo, "wb") as fh:
                fh.write(b"x")

    threading.Thread(target=guard, daemon=True).start()
    try:
        assert "FIFO" in str(_refused(fifo))
    finally:
        done.set()


def test_a_sparse_file_over_the_limit_is_refused_by_its_size(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(300 << 20)
    err = _refused(big)
    assert err.errno == errno.EFBIG and "300 MiB" in str(err)


def test_a_proc_file_that_says_size_0_is_read_within_the_limit():
    assert b"Name:" in read_bounded("/proc/self/status", LIMIT, "file")
    with pytest.raises(FileLimitError, match="over the limit of 16 bytes"):
        read_bounded("/proc/self/status", 16, "file")


def test_a_regular_file_within_the_limit_is_read_whole(tmp_path):
    f = tmp_path / "r.json"
    f.write_bytes(b"x" * LIMIT)
    assert read_bounded(f, LIMIT, "result file") == b"x" * LIMIT
    f.write_bytes(b"x" * (LIMIT + 1))
    _refused(f)


def test_a_folder_and_a_missing_file_are_the_usual_os_errors(tmp_path):
    with pytest.raises(IsADirectoryError):
        read_bounded(tmp_path, LIMIT, "file")
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "nope", LIMIT, "file")


def test_the_error_pickles_and_sizes_read_well():
    err = pickle.loads(pickle.dumps(FileLimitError("/x", "why")))
    assert str(err) == "/x: why" and err.strerror == "why"
    assert describe_limit(4 << 20) == "4 MiB"
    assert describe_limit(64 << 10) == "64 KiB"
    assert describe_limit(300) == "300 bytes"
