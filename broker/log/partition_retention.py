"""A partition log's truncation, log start, retention and compaction hooks (PartitionLog,
broker/log/partition_log.py): what removes batches from a log, from its end (a follower's
truncation) or its start (DeleteRecords, retention, the cleaner's segment swap)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from itertools import takewhile

from broker.log import cleaner_swap
from broker.log.log_files import TRUST_ALL, plain_segments
from broker.log.log_state import replay
from broker.log.partition_state import PartitionLogState, _index_at_or_below
from broker.log.producer_state import ProducerState
from kraft.log.segmented import SegmentView

logger = logging.getLogger(__name__)


class LogRetention(PartitionLogState):
    """The truncation, retention and compaction methods of PartitionLog."""

    # -- truncation and the log start --------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every offset at or above `offset` (a batch that contains it goes whole), with
        the epochs that start there; producer state is rebuilt. Below the first segment the
        log starts over empty at `offset`."""
        self._check_open()
        log = self._log
        if offset >= log.end_offset:
            # Epochs with no record that start at `offset` still go (KAFKA-10706): a follower
            # that was a leader for a moment, or kept a stale entry after a power loss, must
            # not tell its leader the same diverging epoch forever.
            self._epochs.truncate_from_end(offset)
            return
        if offset < log.start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        base = next(log.batch_prefixes(offset, 0))[0]
        log.truncate_to(base)
        self._epochs.truncate_from_end(base)
        if self._start_offset > base:
            self._start_offset = base
        self._reload(base)
        if self.on_truncated is not None:
            self.on_truncated(self, base)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at `offset` (a follower far behind its leader's
        log start)."""
        self._check_open()
        self._log.reset_to(offset, 0)
        self._log.roll()  # the new segment's name keeps the start offset across a restart
        self._start_offset = offset
        self._epochs.clear()
        self._checkpoints.clear()
        self._reload(offset, all_times=True)
        if self.on_truncated is not None:
            self.on_truncated(self, offset)

    def advance_start_offset(self, offset: int) -> None:
        """Move the log start offset up to `offset` (DeleteRecords, or a follower learning its
        leader's): reads below it fail, and segments wholly below it are deleted now."""
        self._check_open()
        if offset <= self._start_offset:
            return
        if offset > self._log.end_offset:
            raise ValueError(f"cannot start {self._directory} at {offset}, past its end "
                             f"{self._log.end_offset}")
        self._start_offset = offset
        bases = [view.base_offset for view in self._log.segments()]
        if bases:
            self._delete_segments_below(bases[_index_at_or_below(bases, offset)])
        self._epochs.truncate_from_start(offset)
        self._producers.remove_before(offset)
        self._drop_snapshots(lambda snapshot: snapshot < offset)

    def _delete_segments_below(self, base: int) -> None:
        if base > self._log.start_offset:
            self._log.advance_start(base, 0)
            for old in [b for b in self._times if b < base]:
                del self._times[old]

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Kafka's retention pass: delete whole segments, oldest first, past retention.ms (by
        their largest timestamp), beyond retention.bytes, or wholly below the log start; never
        a segment with offsets at or above `high_watermark`. If every segment would go, an
        empty one is rolled first. Return how many segments were deleted."""
        self._check_open()
        config = self._config
        deleted = 0

        def by_time(view_base: int, _size: int) -> bool:
            times = self._times.get(view_base)
            if times is None:
                return False
            # Kafka's largestTimestamp: the file's mtime when no batch has a timestamp.
            largest = times.max_ms if times.max_ms >= 0 else self._segment_mtime(
                self._segment_path(view_base))
            return now_ms - largest > config.retention_ms

        if config.retention_ms >= 0 and config.delete:
            deleted += self._delete_while(by_time, high_watermark)
        if config.retention_bytes >= 0 and config.delete:
            excess = [self._log.size_in_bytes - config.retention_bytes]

            def by_size(_base: int, size: int) -> bool:
                if excess[0] - size < 0:
                    return False
                excess[0] -= size
                return True

            deleted += self._delete_while(by_size, high_watermark)
        start = self._start_offset
        deleted += self._delete_while(lambda _b, _s: False, high_watermark, below=start)
        return deleted

    def _delete_while(
        self, predicate: Callable[[int, int], bool], high_watermark: int, below: int = -1
    ) -> int:
        views = self._log.segments()
        count = 0
        for index, view in enumerate(views):
            last = index == len(views) - 1
            if (last and view.size == 0) or view.end_offset > high_watermark:
                break
            if below >= 0:
                deletable = not last and view.end_offset <= below
            else:
                deletable = predicate(view.base_offset, view.size)
            if not deletable:
                break
            count += 1
        if count == 0:
            return 0
        if count == len(views):
            self._log.roll()
        new_start = self._log.segments()[count].base_offset
        logger.info("%s: retention deletes %d segment(s); the log now starts at %d",
                    self._directory, count, new_start)
        self._delete_segments_below(new_start)
        if new_start > self._start_offset:
            self._start_offset = new_start
            self._epochs.truncate_from_start(new_start)
            self._producers.remove_before(new_start)
            self._drop_snapshots(lambda snapshot: snapshot < new_start)
        return count

    # -- compaction (broker/log/cleaner.py) ------------------------------------------------

    def segment_views(self) -> list[SegmentView]:
        """The segments, oldest first; the last is the active one."""
        self._check_open()
        return self._log.segments()

    def segment_timestamps(self, base: int) -> tuple[int, int]:
        """(the first batch's max timestamp, the largest timestamp) of the segment starting at
        `base`; the file's mtime stands in for a segment without timestamps (Kafka's)."""
        times = self._times.get(base)
        if times is None or times.max_ms < 0:
            mtime = self._segment_mtime(self._segment_path(base))
            return mtime, mtime
        return (times.first_ms if times.first_ms >= 0 else times.max_ms), times.max_ms

    def producer_last_offsets(self) -> dict[int, int]:
        """Producer id -> the last offset of its last batch (the cleaner keeps that batch)."""
        return self._producers.last_offsets()

    def replace_segments(self, swaps: list[tuple[str, list[SegmentView]]]) -> None:
        """Install the cleaner's segments: each `.cleaned` file replaces the run of segments
        listed with it, which must be in the log unchanged and below the active segment
        (ValueError otherwise, and nothing changes). Crash-safe as Kafka's swap: each file
        becomes `.swap` (the commit point, see broker/log/cleaner_swap.py), the old
        segments go, the swap becomes the segment. The segments are then opened again (a
        recovery of the whole log, on this thread); the swapped segments' times are rebuilt,
        the producer state, leader epochs and log start stay: the producers' last batches
        are kept by the cleaner, and a replay of the cleaned log would forget the earlier
        batches an idempotent retry is answered from (as Kafka, which keeps its state)."""
        self._check_swaps(swaps)
        committed = [(cleaner_swap.commit(path), old) for path, old in swaps]
        faults = self._log.faults
        self._log.close()
        try:
            for swap, old in committed:
                cleaner_swap.install(swap, [view.path for view in old])
        finally:
            self._log = plain_segments(self._directory, self._config)
            self._log.faults = faults
        self._checkpoints.clear()  # they may hold the times of a replaced segment
        for _, old in swaps:
            self._rebuild_times(old[0].base_offset, old[-1].end_offset)

    def _check_swaps(self, swaps: list[tuple[str, list[SegmentView]]]) -> None:
        """ValueError unless every segment the swaps replace is in the log, unchanged and
        below the active segment."""
        self._check_open()
        current = self._log.segments()
        active = current[-1] if current else None
        for _, old in swaps:
            for view in old:
                if view not in current or view == active:
                    raise ValueError(f"{view.path} changed while it was being cleaned")

    def _rebuild_times(self, first: int, end: int) -> None:
        """The times of the segments now holding offsets [first, end) (a swap replaced the
        segments there), from their batch headers; the other segments' stay."""
        for base in [base for base in self._times if first <= base < end]:
            del self._times[base]
        segments = [view for view in self._log.segments() if first <= view.base_offset < end]
        if segments:
            headers = takewhile(lambda header: header.base_offset < end, self._headers(first))
            replay(headers, ProducerState(), TRUST_ALL, 0, self._times, segments, first)
