import math

import pytest

from console.core.series import RingSeries, SeriesBlock


def test_block_columns_read_like_ring_series():
    block, rings = SeriesBlock(5, 3), [RingSeries(5) for _ in range(3)]
    for i in range(13):
        row = (float(i), None if i % 4 == 0 else i * 10.0, 24574.0 + i)
        block.append(1000.0 + i, row)
        for ring, value in zip(rings, row):
            ring.append(1000.0 + i, value)
    assert len(block) == 5 and block.capacity == 5 and block.width == 3
    for k, ring in enumerate(rings):
        col = block.column(k)
        assert len(col) == len(ring) and col.capacity == ring.capacity
        assert col.times() == ring.times()
        assert col.values() == ring.values()
        assert col.values(2) == ring.values(2) and col.values(0) == []
        assert col.latest() == ring.latest()
        assert list(col) == list(ring)
        assert col.since(1010.5) == ring.since(1010.5)
    assert block.column(1).values() == [None, 90.0, 100.0, 110.0, None]  # i = 8..12, gaps at 8 and 12


def test_block_column_is_a_view_and_empty_block_has_no_latest():
    block = SeriesBlock(3, 2)
    col = block.column(0)
    assert len(col) == 0 and col.latest() is None and col.values() == [] and col.times() == []
    block.append(1.0, (5.0, None))
    assert col.values() == [5.0] and block.column(1).latest() is None


def test_block_values_are_float32():
    block = SeriesBlock(2, 1)
    block.append(1.0, (45.3,))
    assert block.column(0).latest() == pytest.approx(45.3, rel=1e-6)
    block.append(2.0, (1e40,))  # beyond float32: infinite, never an error
    assert math.isinf(block.column(0).latest())


def test_block_rejects_empty_shapes():
    with pytest.raises(ValueError):
        SeriesBlock(0, 1)
    with pytest.raises(ValueError):
        SeriesBlock(1, 0)


def test_resized_keeps_the_newest_samples_and_goes_on_as_a_ring():
    block = SeriesBlock(5, 2)
    for i in range(8):  # wrapped: holds 3..7
        block.append(float(i), (i, None if i == 6 else 10 * i))
    small = block.resized(3)
    assert small.capacity == 3 and len(small) == 3
    assert small.column(0).times() == [5.0, 6.0, 7.0]
    assert small.column(1).values() == [50.0, None, 70.0]
    small.append(8.0, (8, 80))
    assert small.column(0).values() == [6.0, 7.0, 8.0]
    assert small.nbytes == 3 * (8 + 4 * 2)
    bigger = small.resized(10)
    assert len(bigger) == 3 and bigger.column(1).values() == [None, 70.0, 80.0]
