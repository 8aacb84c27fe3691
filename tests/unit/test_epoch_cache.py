"""The epoch cache on its own (the logs' end_offset_for_epoch is tested in test_log_contract)."""

from __future__ import annotations

import pytest

from kraft.log import EpochCache, OffsetAndEpoch


def example() -> EpochCache:
    """Leader epochs 1, 3, 5 starting at offsets 0, 3, 6 (log end 9)."""
    cache = EpochCache()
    for epoch, start in ((1, 0), (1, 1), (3, 3), (3, 5), (5, 6)):
        cache.assign(epoch, start)
    return cache


def test_assign_keeps_the_first_start_of_each_epoch() -> None:
    cache = example()
    assert cache.entries() == [(1, 0), (3, 3), (5, 6)]
    assert cache.last_epoch == 5
    assert len(cache) == 3


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(0, (0, 0)), (1, (1, 3)), (2, (1, 3)), (3, (3, 6)), (4, (3, 6)), (5, (5, 9)), (9, (5, 9))],
)
def test_end_offset_for(epoch: int, expected: tuple[int, int]) -> None:
    assert example().end_offset_for(epoch, log_end=9, log_start=0) == OffsetAndEpoch(
        offset=expected[1], epoch=expected[0]
    )


def test_end_offset_for_an_epoch_older_than_all_uses_the_log_start() -> None:
    cache = EpochCache()
    cache.assign(4, 20)
    assert cache.end_offset_for(3, log_end=25, log_start=20) == OffsetAndEpoch(20, 0)
    assert EpochCache().end_offset_for(7, 0, 0) == OffsetAndEpoch(0, 0)


def test_truncate_from() -> None:
    cache = example()
    cache.truncate_from(7)
    assert cache.entries() == [(1, 0), (3, 3), (5, 6)]
    cache.truncate_from(6)
    assert cache.entries() == [(1, 0), (3, 3)]
    assert cache.end_offset_for(5, log_end=6, log_start=0) == OffsetAndEpoch(6, 3)
    cache.truncate_from(0)
    assert cache.entries() == [] and cache.last_epoch == 0


def test_rejects_going_backwards() -> None:
    cache = example()
    with pytest.raises(ValueError):
        cache.assign(4, 10)
    with pytest.raises(ValueError):
        cache.assign(6, 6)
    assert cache.entries() == [(1, 0), (3, 3), (5, 6)]


def test_clear() -> None:
    cache = example()
    cache.clear()
    assert len(cache) == 0 and cache.last_epoch == 0
