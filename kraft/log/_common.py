"""Rules the log implementations share: which batches a read returns, what a follower may
append (kept here so MemoryLog and SegmentedLog cannot drift apart), the directory fsync
the segment and snapshot files both need, and the read of a small file."""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Sequence

from kraft.log.base import LogAppendError
from kraft.log.codec import BatchHeader


def select_batches(
    bases: Sequence[int],
    positions: Sequence[int],
    lo: int,
    hi: int,
    end_offset: int,
    end_position: int,
    offset: int,
    max_offset: int,
    budget: int,
    at_least_one: bool,
) -> tuple[int, int]:
    """Pick the batches [i, j) of the run bases[lo:hi] that a read returns.

    The run covers offsets [bases[lo], end_offset) and bytes [positions[lo], end_position);
    `offset` must lie in it and be below `max_offset`. i is the batch containing `offset`;
    batches are taken while they end at or before `max_offset` and their bytes fit `budget`,
    but when `at_least_one` the first batch is taken whatever its size. O(log n).
    """
    i = bisect_right(bases, offset, lo, hi) - 1
    # First batch starting above max_offset; the one before it ends above max_offset unless
    # it is the run's last batch and the run ends by max_offset.
    k = bisect_right(bases, max_offset, i, hi)
    last = hi if k == hi and end_offset <= max_offset else k - 1
    if last <= i:
        return i, i
    limit = positions[i] + max(budget, 0)
    if last == hi and end_position <= limit:
        return i, hi
    # positions[j] is where batch j-1 ends: the largest j with positions[j] <= limit.
    j = bisect_right(positions, limit, i, min(last, hi - 1) + 1) - 1
    if j == i and at_least_one:
        j = i + 1
    return i, j


def check_follower_batches(headers: list[BatchHeader], end_offset: int, last_epoch: int) -> int:
    """Raise LogAppendError unless `headers` continue the log at `end_offset` with contiguous
    offsets and non-decreasing epochs ≥ `last_epoch`; return the number of records."""
    expected = end_offset
    epoch = last_epoch
    for header in headers:
        if header.base_offset != expected:
            kind = "gap" if header.base_offset > expected else "overlap"
            raise LogAppendError(
                f"{kind}: batch at byte {header.position} starts at offset "
                f"{header.base_offset}, expected {expected}"
            )
        if header.epoch < epoch:
            raise LogAppendError(
                f"batch at offset {header.base_offset} has epoch {header.epoch}, "
                f"below epoch {epoch}"
            )
        epoch = header.epoch
        expected += header.record_count
    return expected - end_offset


def fsync_dir(path: str) -> None:
    """Make a directory's entries (a created, renamed or deleted file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: str, limit: int = -1) -> bytes:
    """The bytes of a small file (at most `limit` when it is not negative), read without a
    buffered file object, which costs a broker reading a few files of each of thousands of
    logs at start more than the reads do. OSError as open() raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        left = limit
        while left != 0:
            chunk = os.read(fd, 65536 if left < 0 else min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk) if left > 0 else 0
        return b"".join(chunks)
    finally:
        os.close(fd)
