"""What a partition log derives from its batch headers — the idempotent producers' state and
each segment's timestamps — and how it gets them back without replaying the whole log.

* **On open** the segments are indexed in one pass (kraft.log's SegmentedLog walks every
  batch header anyway); `LoadingFormat` is the batch format for that pass and also collects,
  per segment, the timestamps the retention and roll rules need, and applies every batch from
  the latest producer snapshot on (broker/log/producer_snapshots.py) to the snapshot's state.
  Recovery may cut the log after that pass (a torn tail, a stale batch); the log then takes
  the slow path, `replay` from a snapshot.
* **After a truncation** the state comes back from the latest checkpoint at or below the new
  end — a copy in memory, taken every CHECKPOINT_BATCHES appended batches, or a snapshot file
  — and only the headers from there to the new end are replayed (a truncation used to replay
  the whole log on the event loop: 0.25 s for 50,000 batches, issue 28).
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from broker.log.producer_state import ProducerEntry, ProducerState
from broker.records import (
    CONTROL_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    KafkaBatchFormat,
    RecordBatchHeader,
    parse_header,
)
from kraft.log.base import CorruptRecordError
from kraft.log.codec import BatchHeader, ByteSource
from kraft.log.segmented import SegmentedLog, SegmentView

# An in-memory checkpoint of the derived state every this many appended batches, the last
# CHECKPOINTS_KEPT of them: a truncation replays at most that many headers past one.
CHECKPOINT_BATCHES = 4096
CHECKPOINTS_KEPT = 4
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta.
_FRAME = struct.Struct(">qiibIhi")
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35


class SegmentTimes:
    """What the retention and roll rules and ListOffsets need of a segment's timestamps."""

    __slots__ = ("created_ms", "empty", "first_ms", "max_ms", "max_ms_batch")

    def __init__(self, first_ms: int, created_ms: int) -> None:
        self.first_ms = first_ms  # the first batch's max timestamp, -1 if none (roll by time)
        # When the first batch came: -1 for a segment opened from disk until the roll rule
        # asks (the file's mtime then: a stat per segment of thousands of logs at start).
        self.created_ms = created_ms
        self.empty = True
        self.max_ms = -1  # the largest batch max timestamp (retention by time)
        self.max_ms_batch = -1  # base offset of the first batch with that timestamp

    def add(self, base_offset: int, max_timestamp: int) -> None:
        self.empty = False
        if max_timestamp > self.max_ms:
            self.max_ms = max_timestamp
            self.max_ms_batch = base_offset

    def copy(self) -> SegmentTimes:
        copied = SegmentTimes(self.first_ms, self.created_ms)
        copied.empty, copied.max_ms, copied.max_ms_batch = (
            self.empty, self.max_ms, self.max_ms_batch)
        return copied


def file_mtime_ms(path: str) -> int:
    try:
        return int(os.stat(path).st_mtime * 1000)
    except OSError:
        return int(time.time() * 1000)


class LoadingFormat(KafkaBatchFormat):
    """Kafka's batch format for one open of a log (module docstring). Batches that end at or
    below `trusted_below` (the recovery point; all of them after a clean shutdown) are framed
    without a CRC check (broker/log/log_files.py); the log keeps the format, so the open sets
    `trusted_below` back to 0 once the segments are indexed."""

    def __init__(self, trusted_below: int, producers: ProducerState, replay_from: int,
                 start_offset: int) -> None:
        self.trusted_below = trusted_below
        self.producers = producers
        self.replay_from = replay_from  # the producer snapshot's offset (0: none)
        self.start_offset = start_offset  # the log start checkpoint's (batches below: none)
        self.times: dict[str, SegmentTimes] = {}  # by segment file
        self.scanned_end = -1  # where the last batch indexed ends
        self.replayed = 0

    def scan_prefix(
        self, data: ByteSource, path: str | None = None, base_position: int = 0
    ) -> tuple[list[BatchHeader], int, CorruptRecordError | None]:
        # No memoryview of an mmap: SegmentedLog closes the map after the scan.
        source = data if isinstance(data, bytes | mmap.mmap) else bytes(data)
        headers, stop = self._trusted(source, base_position)
        error = None
        if stop < len(source):
            rest, more, error = super().scan_prefix(bytes(source[stop:]), path,
                                                    base_position + stop)
            headers += rest
            stop += more
        if headers and base_position == 0 and path is not None:
            self._digest(source, headers, path)
        return headers, stop, error

    def _trusted(self, source: bytes | mmap.mmap, base_position: int
                 ) -> tuple[list[BatchHeader], int]:
        below = self.trusted_below
        end = len(source)
        pos = 0
        headers: list[BatchHeader] = []
        append = headers.append
        unpack = _FRAME.unpack_from
        make = tuple.__new__
        while below > 0 and end - pos >= HEADER_SIZE:
            base, length, epoch, magic, crc, attributes, delta = unpack(source, pos)
            size = length + LOG_OVERHEAD
            if (size < HEADER_SIZE or pos + size > end or magic != MAGIC or base < 0
                    or epoch < 0 or delta < 0 or base + delta + 1 > below):
                break  # the strict scan takes over here
            append(make(BatchHeader, (base, epoch, delta + 1, base_position + pos, size,
                                      bool(attributes & CONTROL_BIT), crc)))
            pos += size
        return headers, pos

    def _digest(self, source: bytes | mmap.mmap, headers: list[BatchHeader], path: str) -> None:
        """The segment's times, and its batches from the snapshot on applied to producers."""
        max_at = _MAX_TIMESTAMP.unpack_from
        first = headers[0]
        times = self.times[path] = SegmentTimes(max_at(source, first[3] + _MAX_TIMESTAMP_AT)[0],
                                                -1)
        replay_from, start = self.replay_from, self.start_offset
        producers = self.producers
        for header in headers:
            base, position = header[0], header[3]
            max_timestamp = max_at(source, position + _MAX_TIMESTAMP_AT)[0]
            times.add(base, max_timestamp)
            if base >= replay_from and base + header[2] > start:
                producers.update(parse_header(source, position), base, max_timestamp)
                self.replayed += 1
        last = headers[-1]
        self.scanned_end = last[0] + last[2]


@dataclass(slots=True)
class StateCheckpoint:
    """The derived state as it stood after every batch below `offset`."""

    offset: int
    producers: ProducerState
    segment_base: int  # the segment holding the batches just below `offset`
    times: SegmentTimes | None  # that segment's times up to `offset`


class Checkpoints:
    """The last CHECKPOINTS_KEPT in-memory checkpoints of a log, oldest first."""

    __slots__ = ("_kept", "since")

    def __init__(self) -> None:
        self._kept: deque[StateCheckpoint] = deque(maxlen=CHECKPOINTS_KEPT)
        self.since = 0  # batches appended since the last checkpoint

    def due(self, batches: int) -> bool:
        self.since += batches
        return self.since >= CHECKPOINT_BATCHES

    def take(self, checkpoint: StateCheckpoint) -> None:
        self._kept.append(checkpoint)
        self.since = 0

    def at_or_below(self, offset: int) -> StateCheckpoint | None:
        """The latest checkpoint at or below `offset`; those above it are dropped (the log was
        truncated there)."""
        while self._kept and self._kept[-1].offset > offset:
            self._kept.pop()
        return self._kept[-1] if self._kept else None

    def clear(self) -> None:
        self._kept.clear()
        self.since = 0


def replay(
    headers: Iterable[RecordBatchHeader],
    producers: ProducerState,
    producers_from: int,
    start_offset: int,
    times: dict[int, SegmentTimes],
    segments: list[SegmentView],
    times_from: int,
    mtime: Callable[[str], int] = file_mtime_ms,
) -> int:
    """Apply `headers` (ascending): to `producers` those from `producers_from` that end past
    `start_offset`, to their segment's entry in `times` those from `times_from` (an entry
    missing is started, with the file's mtime); every segment left without an entry gets
    one. Returns the number of batches applied to `producers`."""
    bases = [view.base_offset for view in segments]
    index = 0
    applied = 0
    for header in headers:
        base = header.base_offset
        if base >= producers_from and header.next_offset > start_offset:
            producers.update(header, base, header.max_timestamp)
            applied += 1
        if base < times_from:
            continue
        while index + 1 < len(bases) and base >= bases[index + 1]:
            index += 1
        entry = times.get(bases[index])
        if entry is None:
            entry = times[bases[index]] = SegmentTimes(header.max_timestamp,
                                                       mtime(segments[index].path))
        entry.add(base, header.max_timestamp)
    for view in segments:
        if view.base_offset not in times:
            times[view.base_offset] = SegmentTimes(-1, mtime(view.path))
    return applied


def restore_loaded(loaded: LoadingFormat, log: SegmentedLog, start_offset: int
                   ) -> tuple[ProducerState, dict[int, SegmentTimes], int] | None:
    """(producers, times by segment, batches replayed) as the open's pass collected them;
    None when recovery cut the log after that pass, or the snapshot lies past the end."""
    end = log.end_offset
    scanned = loaded.scanned_end
    if loaded.replay_from > end or (scanned >= 0 and scanned != end) or (
            scanned < 0 and end != log.start_offset):
        return None
    loaded.producers.remove_before(start_offset)
    times = {}
    for view in log.segments():
        # created_ms stays -1: the file's mtime is read if the roll rule needs it.
        times[view.base_offset] = loaded.times.get(view.path) or SegmentTimes(-1, -1)
    return loaded.producers, times, loaded.replayed


def reload(
    log: SegmentedLog,
    start_offset: int,
    times: dict[int, SegmentTimes],
    found: StateCheckpoint | tuple[int, list[ProducerEntry]] | None,
    all_times: bool,
    headers: Callable[[int], Iterator[RecordBatchHeader]],
) -> tuple[ProducerState, int]:
    """The producer state as of the log end from `found` (an in-memory checkpoint, a
    snapshot file's (offset, entries), or nothing: from the log start) and the headers after
    it; `times` loses the entries of segments gone and has the last segment's (with
    `all_times` every segment's) rebuilt. Returns (producers, batches replayed)."""
    segments = log.segments()
    last = segments[-1].base_offset if segments else log.end_offset
    producers = ProducerState()
    producers_from = log.start_offset
    times_from = log.start_offset if all_times else last
    kept = {} if all_times else {view.base_offset: times[view.base_offset]
                                 for view in segments[:-1] if view.base_offset in times}
    times.clear()
    times.update(kept)
    if isinstance(found, StateCheckpoint):
        producers, producers_from = found.producers.copy(), found.offset
        if not all_times and found.times is not None and found.segment_base == last < found.offset:
            times[last] = found.times.copy()  # the segment's times up to the checkpoint
            times_from = found.offset
    elif found is not None:
        producers_from = found[0]
        producers.restore(found[1])
    replayed = replay(headers(min(producers_from, times_from)), producers, producers_from,
                      start_offset, times, segments, times_from)
    producers.remove_before(start_offset)
    return producers, replayed
