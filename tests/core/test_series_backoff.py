import pytest

from console.core.backoff import backoff_delay
from console.core.series import RingSeries, capacity_for


def test_ring_series_is_bounded_and_ordered():
    s = RingSeries(3)
    for i in range(10):
        s.append(float(i), i * 10.0)
    assert len(s) == 3
    assert s.values() == [70.0, 80.0, 90.0]
    assert s.times() == [7.0, 8.0, 9.0]
    assert s.latest() == 90.0
    assert s.values(last=2) == [80.0, 90.0]
    assert s.since(8.5) == [(9.0, 90.0)]


def test_ring_series_keeps_gaps():
    s = RingSeries(4)
    s.append(1.0, None)
    assert s.values() == [None] and s.latest() is None


def test_capacity_for_window():
    assert capacity_for(600, 1.0) == 601
    assert capacity_for(1, 10) == 2
    with pytest.raises(ValueError):
        RingSeries(0)


def test_backoff_doubles_then_caps():
    delays = [backoff_delay(i, base=0.5, cap=10) for i in range(8)]
    assert delays == [0.5, 1, 2, 4, 8, 10, 10, 10]
    assert backoff_delay(10_000, cap=30) == 30
    with pytest.raises(ValueError):
        backoff_delay(-1)


def test_ring_series_wraps_many_times_and_keeps_order():
    s = RingSeries(5)
    for i in range(23):
        s.append(float(i), None if i % 4 == 0 else float(i))
    assert s.times() == [18.0, 19.0, 20.0, 21.0, 22.0]
    assert s.values() == [18.0, 19.0, None, 21.0, 22.0]
    assert list(s)[2] == (20.0, None)
    assert s.values(last=0) == [] and s.latest() == 22.0


def test_last_values_across_the_wrap_point():
    s = RingSeries(600)
    for i in range(700):
        s.append(float(i), float(i))
    assert s.values(150) == [float(i) for i in range(550, 700)]
    assert s.values(3) == [697.0, 698.0, 699.0]
    assert s.values(10_000) == [float(i) for i in range(100, 700)]
