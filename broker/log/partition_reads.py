"""A partition log's reads (PartitionLog, broker/log/partition_log.py): batches from an
offset for consumers and followers, and the ListOffsets lookups by timestamp."""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.log import cleaner_core
from broker.log.partition_state import OffsetOutOfRange, PartitionLogState
from broker.records import RecordBatchHeader, decode_records
from kraft.log.base import CorruptRecordError

logger = logging.getLogger(__name__)


class LogReads(PartitionLogState):
    """The reads of PartitionLog."""

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool = True
    ) -> bytes:
        """Whole batches as stored, from the batch that contains `offset`, up to `max_offset`
        (exclusive: the HW for consumers, the LEO for followers; a batch is returned only
        when all of it lies below it) and `max_bytes`, except that with `min_one_batch` the
        first batch comes whole even when larger. b"" when there is nothing yet.
        OffsetOutOfRange when `offset` < start_offset or > end_offset."""
        self._check_open()
        end = self._log.end_offset
        if offset < self._start_offset or offset > end:
            raise OffsetOutOfRange(offset, self._start_offset, end)
        if offset >= end or offset >= max_offset:
            return b""
        data = self._log.read(offset, max_bytes, max_offset, min_one_batch)
        # A compacted range's filler may start below `offset` (a lagging follower's log end
        # inside it): it is served from `offset`, as Kafka's batch boundaries would be.
        return cleaner_core.trim_filler(data, offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp ≥ `timestamp_ms` (Kafka's
        ListOffsets by time); None when there is none. Exact for uncompressed batches; for a
        compressed one, its first offset and max timestamp."""
        self._check_open()
        for view in self._log.segments():
            times = self._times.get(view.base_offset)
            if times is None or times.max_ms < timestamp_ms:
                continue
            for header in self._headers(max(view.base_offset, self._start_offset)):
                if header.max_timestamp >= timestamp_ms:
                    return self._record_at_timestamp(header, lambda ts: ts >= timestamp_ms)
        return None

    def max_timestamp_offset(self, max_offset: int | None = None) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3,
        KIP-734) among batches below `max_offset` (the HW); None for an empty log."""
        self._check_open()
        limit = self._log.end_offset if max_offset is None else max_offset
        best: RecordBatchHeader | None = None
        for view in self._log.segments():
            times = self._times.get(view.base_offset)
            if times is None or times.max_ms_batch < 0:
                continue
            if view.end_offset <= limit and view.base_offset >= self._start_offset:
                if best is None or times.max_ms > best.max_timestamp:
                    best = next(self._headers(times.max_ms_batch))
                continue
            for header in self._headers(max(view.base_offset, self._start_offset)):
                if header.next_offset > limit or header.base_offset >= view.end_offset:
                    break
                if best is None or header.max_timestamp > best.max_timestamp:
                    best = header
        if best is None:
            return None
        target = best.max_timestamp
        return self._record_at_timestamp(best, lambda ts: ts == target)

    def _record_at_timestamp(
        self, header: RecordBatchHeader, wanted: Callable[[int], bool]
    ) -> tuple[int, int]:
        if header.compression == 0 and not header.log_append_time:
            batch = self._log.read(header.base_offset, header.size, header.next_offset)
            try:
                for record in decode_records(batch[: header.size]):
                    if record.offset >= self._start_offset and wanted(record.timestamp_ms):
                        return record.offset, record.timestamp_ms
            except CorruptRecordError as exc:
                logger.warning("%s: batch at offset %d: %s", self._directory,
                               header.base_offset, exc)
        return max(header.base_offset, self._start_offset), header.max_timestamp
