"""The reads of a SegmentedLog (kraft/log/segmented.py) and its read cache.

A read is served from the segment files with os.pread up to where the read cache starts, and
from the cache after that. Two of the invariants that keep reads and a flush job's worker thread
apart (the third: kraft/log/segmented.py) are kept here:
* the read cache is a suffix of the log that holds at least every unflushed batch, so data
  that is pending or in a running job is served from memory, never from a file being written;
* only batches below `flushed_offset` are evicted from the cache (`_evict`) and read with
  os.pread.
In write-through mode everything in the log is in its files, so the cache is a plain cache.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from kraft.log._common import select_batches
from kraft.log.base import Batch, CorruptRecordError
from kraft.log.codec import decode_batches
from kraft.log.segment_files import Segment
from kraft.log.segment_state import SegmentLogState

DEFAULT_CACHE_BYTES = 64 << 20
_READ_CHUNK = 1 << 20


class SegmentReads(SegmentLogState):
    """SegmentedLog's reads, and the read cache they and the appends share."""

    # The cache: a suffix of the log from index _cache_head; positions are a running count.
    _cache_bytes: int  # the budget past which flushed batches are evicted
    _cache_bases: list[int]
    _cache_positions: list[int]
    _cache_blobs: list[bytes]
    _cache_head: int
    _cache_end: int
    _cache_held: int  # bytes of the blobs from _cache_head on

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool = True
    ) -> bytes:
        """Encoded batches from the one containing `offset` (see ReplicatedLog.read); without
        `min_one_batch` a first batch larger than `max_bytes` is not returned either."""
        self._check_open()
        if offset < self._start_offset:
            raise ValueError(f"offset {offset} is below the log start {self._start_offset}")
        if offset >= self._end_offset or offset >= max_offset:
            return b""
        parts = self._collect(offset, max_offset, max_bytes, min_one_batch)
        if len(parts) == 1:
            return parts[0][0]
        return b"".join(part[0] for part in parts)

    def batches(self, start: int, end: int) -> Iterator[Batch]:
        """Decoded batches covering offsets [start, end), read in chunks of about 1 MiB
        (kraft's format only)."""
        self._check_open()
        self._check_kraft_format()
        if start < self._start_offset:
            raise ValueError(f"offset {start} is below the log start {self._start_offset}")
        offset = start
        while offset < end and offset < self._end_offset:
            parts = self._collect(offset, self._end_offset, _READ_CHUNK)
            for data, path, position in parts:
                for batch in decode_batches(data, path, position):
                    if batch.base_offset >= end:
                        return
                    yield batch
                    offset = batch.next_offset

    def _collect(
        self, offset: int, max_offset: int, budget: int, at_least_one: bool = True
    ) -> list[tuple[bytes, str | None, int]]:
        """(bytes, path or None for the cache, file position) runs that make up a read."""
        out: list[tuple[bytes, str | None, int]] = []
        cache_start = self._cache_start()
        if offset < cache_start:
            index = bisect_right(self._segment_bases, offset) - 1
            while True:
                segment = self._segments[index]
                bases = segment.bases
                positions = segment.positions
                hi = len(bases)
                run_end = (
                    self._segment_bases[index + 1]
                    if index + 1 < len(self._segments)
                    else self._end_offset
                )
                end_position = segment.size
                if cache_start < run_end:  # the rest of this segment is served by the cache
                    hi = bisect_left(bases, cache_start)
                    run_end = cache_start
                    end_position = positions[hi]
                i, j = select_batches(
                    bases, positions, 0, hi, run_end, end_position, offset, max_offset, budget,
                    at_least_one,
                )
                if j > i:
                    start = positions[i]
                    stop = positions[j] if j < len(bases) else segment.size
                    out.append((self._pread(segment, start, stop - start), segment.path, start))
                    budget -= stop - start
                    at_least_one = False
                if j < hi:
                    return out
                offset = run_end
                if offset >= max_offset or offset >= cache_start:
                    break
                index += 1
        if offset < self._end_offset and offset < max_offset:
            blobs = self._cache_blobs
            i, j = select_batches(
                self._cache_bases, self._cache_positions, self._cache_head, len(blobs),
                self._end_offset, self._cache_end, offset, max_offset, budget, at_least_one,
            )
            if j > i:
                out.append((blobs[i] if j == i + 1 else b"".join(blobs[i:j]), None, 0))
        return out

    @staticmethod
    def _pread(segment: Segment, position: int, length: int) -> bytes:
        fd = segment.fd
        assert fd is not None, segment.path
        data = os.pread(fd, length, position)
        while len(data) < length:  # very large reads come back in pieces
            more = os.pread(fd, length - len(data), position + len(data))
            if not more:
                raise CorruptRecordError(
                    "segment file is shorter than its index", position + len(data), segment.path
                )
            data += more
        return data

    def batch_prefixes(self, start: int, length: int) -> Iterator[tuple[int, bytes]]:
        """(base offset, first `length` bytes) of every batch from the one containing `start`
        to the end: header scans (timestamps, producer ids) without reading whole batches.
        The log must not change while the iterator is in use."""
        self._check_open()
        if start >= self._end_offset:
            return
        cache_start = self._cache_start()
        index = max(bisect_right(self._segment_bases, start) - 1, 0)
        for segment in self._segments[index:]:
            bases = segment.bases
            first = max(bisect_right(bases, start) - 1, 0)
            for i in range(first, len(bases)):
                base = bases[i]
                if base >= cache_start:
                    break
                yield base, self._pread(segment, segment.positions[i], length)
        head = self._cache_head
        first_cached = max(bisect_right(self._cache_bases, start, head) - 1, head)
        for i in range(first_cached, len(self._cache_bases)):
            yield self._cache_bases[i], self._cache_blobs[i][:length]

    # -- the read cache --------------------------------------------------------------------

    def _cache_start(self) -> int:
        head = self._cache_head
        return self._cache_bases[head] if head < len(self._cache_bases) else self._end_offset

    def _evict(self) -> None:
        """Drop flushed batches from the front while the cache is over budget."""
        bases = self._cache_bases
        blobs = self._cache_blobs
        count = len(bases)
        head = self._cache_head
        while self._cache_held > self._cache_bytes and head < count:
            next_offset = bases[head + 1] if head + 1 < count else self._end_offset
            if next_offset > self._flushed and not self._write_through:
                break
            self._cache_held -= len(blobs[head])
            blobs[head] = b""  # free the bytes now; the slot goes at the next compaction
            head += 1
        self._cache_head = head
        if head >= 1024 and head * 2 >= count:
            del bases[:head], self._cache_positions[:head], blobs[:head]
            self._cache_head = 0

    def _truncate_cache(self, offset: int) -> None:
        index = bisect_left(self._cache_bases, offset, self._cache_head)
        if index < len(self._cache_bases):
            position = self._cache_positions[index]
            self._cache_held -= self._cache_end - position
            self._cache_end = position
            del self._cache_bases[index:], self._cache_positions[index:]
            del self._cache_blobs[index:]

    def _clear_cache(self) -> None:
        self._cache_bases = []
        self._cache_positions = []
        self._cache_blobs = []
        self._cache_head = self._cache_end = self._cache_held = 0
