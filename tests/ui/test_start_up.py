"""The TUI's start-up hold (console/ui/start_up.py): the collector is off until the first frame
and back on after it; dataclass methods compiled at one start are reused by the next, and a
class made from the cache behaves as one made without it."""

import dataclasses  # no `from __future__ import annotations` here: the annotations are objects
import gc
import os

import pytest

from console.ui import start_up


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    yield tmp_path
    start_up.release()  # a failed test must not leave the collector off for the next ones


def _make_record():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Record:
        name: str
        gpus: tuple[int, ...] = ()

    return Record


def _behaviour(cls) -> tuple:
    a, b = cls("n1", (0, 1)), cls("n1", (0, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "n2"
    return (repr(a), a == b, hash(a) == hash(b), cls.__init__.__annotations__, cls.__slots__)


def test_collector_is_off_during_the_start_and_on_after_the_first_frame(cache_home):
    assert gc.isenabled()
    start_up.hold()
    assert not gc.isenabled()
    start_up.release(first_frame=True)
    assert gc.isenabled()
    start_up.release()  # a second release (the entry's, after the app) changes nothing
    assert gc.isenabled()


def test_the_next_start_reuses_the_compiled_methods_and_they_behave_the_same(cache_home):
    plain = _behaviour(_make_record())
    start_up.hold()
    first = _behaviour(_make_record())
    start_up.release(first_frame=True)
    assert os.path.getsize(start_up.cache_path()) > 0
    start_up.hold()
    second = _behaviour(_make_record())
    assert not start_up._state["missed"]  # every method came from the cache
    start_up.release(first_frame=True)
    assert plain == first == second
    assert plain[3]["name"] is str  # annotations stay objects, as dataclasses makes them


def test_a_damaged_cache_is_compiled_anew_and_rewritten(cache_home):
    path = start_up.cache_path()
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"not marshal data")
    start_up.hold()
    record = _make_record()
    start_up.release(first_frame=True)
    assert _behaviour(record) == _behaviour(_make_record())
    start_up.hold()
    _make_record()
    assert not start_up._state["missed"]
    start_up.release()


def test_a_command_ends_the_hold_without_writing_the_cache(cache_home):
    start_up.hold()
    _make_record()
    start_up.release()  # not the TUI: no first frame
    assert gc.isenabled()
    assert not os.path.exists(start_up.cache_path())
    assert "exec" not in vars(dataclasses)


def test_a_namedtuple_made_from_the_cache_is_the_same(cache_home):
    from collections import namedtuple

    def make():
        return namedtuple("Gpu", ["index", "name"], defaults=["MI300X"])

    start_up.hold()
    make()
    start_up.release(first_frame=True)
    start_up.hold()
    cached = make()
    assert not start_up._state["missed"]
    start_up.release(first_frame=True)
    plain = make()
    assert cached(1) == plain(1) == (1, "MI300X")
    assert repr(cached(2, "H200")) == repr(plain(2, "H200")) == "Gpu(index=2, name='H200')"
    assert "eval" not in vars(__import__("collections"))


def test_without_a_home_nothing_is_kept_and_the_start_goes_on(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda p: p)  # as with no HOME and no passwd entry
    monkeypatch.chdir(tmp_path)
    try:
        start_up.hold()
        record = _make_record()
        start_up.release(first_frame=True)
    finally:
        start_up.release()
    assert _behaviour(record) == _behaviour(_make_record())
    assert start_up.cache_path() == "" and not list(tmp_path.iterdir())  # no "~" folder made here
