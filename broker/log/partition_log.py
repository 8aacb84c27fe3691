"""PartitionLog: one replica's log of Kafka record batches, `<log.dir>/<topic>-<partition>`.

The batches live in kraft.log's SegmentedLog in write-through mode with Kafka's batch format
(broker/records.py): an append is in the segment file (the page cache) before it returns, as in
Kafka, and fsync happens by policy (`flush.messages`, `flush.ms`; by default never on the
produce path), always for a rolled segment and at a clean close, in flush jobs that the
LogManager runs in a worker thread. What an acks=all answer guarantees is therefore Kafka's:
the batch is in the page cache of every ISR member; durability is replication.

Around the segments this module keeps what Kafka's UnifiedLog keeps: the log start offset
(retention, DeleteRecords), the leader-epoch cache and its checkpoint file, the idempotent
producers' state (broker/log/producer_state.py), each segment's timestamps (retention by time,
roll by time, ListOffsets by timestamp) and the partition.metadata file.

Every method runs on the caller's thread (the event loop): appends and reads are page-cache
I/O; only `flush` (and the flush job's `run`) waits for a disk.

The class is split along its seams: its state and view (broker/log/partition_state.py, which
also says why creating a log and assigning an epoch need no fsync on the caller's thread), the
open and recovery (partition_open.py), the reads (partition_reads.py), truncation, retention
and compaction (partition_retention.py); appends, leader epochs, flushing and closing are here.
"""

from __future__ import annotations

import errno
import os
import uuid
from dataclasses import dataclass

from broker.log.config import LogConfig
from broker.log.log_files import DELETED_SUFFIX, PartitionFlushJob, never_synced, remove_deleted
from broker.log.log_state import SegmentTimes, StateCheckpoint
from broker.log.partition_open import open_log
from broker.log.partition_reads import LogReads
from broker.log.partition_state import (
    OffsetOutOfRange,
    PartitionMetadataError,
    _index_at_or_below,
    _now_ms,
    parse_partition_dir,
)
from broker.log.partition_txn import LogTxns
from broker.log.producer_txn import ABORT, COMMIT, marker_batch
from broker.log.validator import validate_records
from broker.records import (
    AppendError,
    RecordBatchHeader,
    parse_header,
    scan_batches,
    set_log_append_time,
    stamp,
    validate_client_batch,
)
from kraft.errors import Errors
from kraft.log.base import FlushJob, LogAppendError
from kraft.log.codec import BatchHeader

__all__ = [
    "AppendError",
    "LeaderAppend",
    "OffsetOutOfRange",
    "PartitionLog",
    "PartitionMetadataError",
    "never_synced",
    "parse_partition_dir",
    "remove_deleted",
]


@dataclass(frozen=True, slots=True)
class LeaderAppend:
    """The outcome of a leader's append: the offsets the batch holds, the time the leader
    stamped (-1 unless the topic uses LogAppendTime), and whether it was an idempotent
    producer's retry of a batch already in the log (nothing written, original offsets)."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int = -1
    duplicate: bool = False



class PartitionLog(LogReads, LogTxns):
    """A replica's log. Create with `PartitionLog.open`."""

    @classmethod
    def open(
        cls,
        directory: str,
        topic_id: str,
        config: LogConfig,
        log_start_offset: int | None = None,
        now_ms: int | None = None,
        *,
        clean_shutdown: bool = False,
        synced: bool = False,
        metadata_read: bool = False,
        listing: list[str] | None = None,
    ) -> PartitionLog:
        """Create or recover the partition directory `directory` (named
        `<topic>-<partition>`): recovery CRC-checks from the recovery point (after a
        `clean_shutdown`, nothing), cuts a torn tail, and raises CorruptRecordError (path, byte
        offset) for damage below it. The directory's partition.metadata must name `topic_id`
        (PartitionMetadataError otherwise); a new directory gets one. `log_start_offset` is the
        log-start-offset checkpoint's value, if any. `synced`: the caller made the files of
        the log dir durable (a clean shutdown, a syncfs), so none is synced again
        (broker/log/log_files.py); `metadata_read`: `topic_id` is what the directory's
        partition.metadata holds (the loader read it); `listing`: the directory's names (the
        loader listed it)."""
        return open_log(cls, directory, topic_id, config, log_start_offset, now_ms,
                        clean_shutdown=clean_shutdown, synced=synced,
                        metadata_read=metadata_read, listing=listing)

    # -- appends ---------------------------------------------------------------------------

    def append_as_leader(self, batch: bytes, leader_epoch: int, now_ms: int) -> LeaderAppend:
        """Validate a producer's batch (one, magic 2), check its producer sequence, stamp
        the offsets and `leader_epoch` and write it. AppendError (nothing written) for every
        refusal; an idempotent retry of one of the producer's last 5 batches writes nothing
        and answers the original offsets."""
        self._check_open()
        config = self._config
        header = validate_client_batch(batch, config.max_message_bytes, config.segment_bytes)
        batch, header = validate_records(batch, header, config, self._topic, self._partition)
        duplicate = self._producers.check(header)
        if duplicate is not None:
            return LeaderAppend(
                duplicate.first_offset, duplicate.last_offset,
                duplicate.timestamp_ms if config.log_append_time else -1, duplicate=True,
            )
        return self._append_stamped(batch, header, leader_epoch, now_ms, None)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, leader_epoch: int, now_ms: int) -> LeaderAppend:
        """Write a transaction's COMMIT or ABORT marker (WriteTxnMarkers): the producer's
        transaction on this partition ends; an aborted one enters the aborted-transaction
        index. AppendError for a fenced marker (LogTxns.check_marker) or a failed write."""
        self._check_open()
        self.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        return self._append_stamped(batch, parse_header(batch), leader_epoch, now_ms,
                                    (COMMIT if commit else ABORT, coordinator_epoch))

    def _append_stamped(self, batch: bytes, header: RecordBatchHeader, leader_epoch: int,
                        now_ms: int, marker: tuple[int, int] | None) -> LeaderAppend:
        config = self._config
        latest = self._epochs.latest_epoch
        if leader_epoch < latest:
            raise AppendError(Errors.FENCED_LEADER_EPOCH,
                              f"leader epoch {leader_epoch} is below the log's epoch {latest}")
        base = self._log.end_offset
        buffer = bytearray(batch)
        stamp(buffer, base, leader_epoch)
        append_time = -1
        max_timestamp = header.max_timestamp
        crc = header.crc
        if config.log_append_time:
            set_log_append_time(buffer, now_ms)
            append_time = max_timestamp = now_ms
            crc = parse_header(buffer).crc
        self._assign_epoch(leader_epoch, base)
        active = self._log.active_segment_base
        self._maybe_roll(max_timestamp, now_ms)
        span = header.last_offset_delta + 1
        data = bytes(buffer)
        frame = BatchHeader(base, leader_epoch, span, 0, len(data), False, crc)
        try:
            self._log.append_verified(data, [frame])
        except (OSError, RuntimeError) as exc:
            raise AppendError(Errors.KAFKA_STORAGE_ERROR,
                              f"cannot write to {self._directory}: {exc}") from exc
        if header.transactional:
            self._before_txn_batch()
        completed = self._producers.update(header, base, max_timestamp)
        if completed is not None:
            self._txn_completed(completed, marker)
        self._after_append(active, [(base, max_timestamp)], span, now_ms)
        return LeaderAppend(base, base + span - 1, append_time)

    def append_as_follower(self, data: bytes, now_ms: int | None = None) -> int:
        """Append batches as the leader sent them (CRC checked, offsets continuing the log,
        epochs not going back); return the number of offsets appended. CorruptRecordError for
        bad bytes, AppendError (OFFSET_OUT_OF_RANGE) for a gap or overlap; on error nothing is
        appended."""
        self._check_open()
        if not data:
            return 0
        if not isinstance(data, bytes):
            data = bytes(data)
        frames = scan_batches(data)
        if frames and self._log.start_offset == self._log.end_offset:
            first = frames[0]
            end = self._log.end_offset
            if first.base_offset < end < first.base_offset + first.record_count:
                # An empty log started inside the leader's first batch (its log start fell in
                # a batch, by DeleteRecords): start the files at the batch, keep the log start
                # (Kafka's Partition.appendRecordsToFollowerOrFutureReplica does the same).
                start = self._start_offset
                self.truncate_fully_and_start_at(first.base_offset)
                self._start_offset = start
        if frames and frames[0].base_offset != self._log.end_offset:
            raise AppendError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"batches start at offset {frames[0].base_offset}, not at the log end "
                f"{self._log.end_offset}",
            )
        now = _now_ms() if now_ms is None else now_ms
        headers = [parse_header(data, frame.position) for frame in frames]
        active = self._log.active_segment_base
        if frames:
            self._maybe_roll(max(h.max_timestamp for h in headers), now)
        try:
            count = self._log.append_verified(data, frames)
        except LogAppendError as exc:
            raise AppendError(Errors.OFFSET_OUT_OF_RANGE, str(exc)) from exc
        except (OSError, RuntimeError) as exc:
            raise AppendError(Errors.KAFKA_STORAGE_ERROR,
                              f"cannot write to {self._directory}: {exc}") from exc
        for frame, header in zip(frames, headers, strict=True):
            self._assign_epoch(header.partition_leader_epoch, header.base_offset)
            if header.transactional:
                self._before_txn_batch()
            completed = self._producers.update(header, header.base_offset, header.max_timestamp)
            if completed is not None:
                self._txn_completed(completed, self._follower_marker(data, frame.position,
                                                                     frame.size))
        self._after_append(active, [(h.base_offset, h.max_timestamp) for h in headers], count,
                           now)
        return count

    def _maybe_roll(self, incoming_ms: int, now_ms: int) -> None:
        """Kafka's roll by time (LogSegment.timeWaitedForRoll): the incoming batch's max
        timestamp is segment.ms past the active segment's first batch's, or, with no
        timestamps, the segment's first batch came segment.ms ago."""
        active = self._log.active_segment_base
        if active is None or active == self._log.end_offset:
            return
        times = self._times.get(active)
        if times is None:
            return
        has_timestamp = times.first_ms >= 0
        if not has_timestamp and times.created_ms < 0:  # opened from disk (SegmentTimes)
            times.created_ms = self._segment_mtime(self._segment_path(active))
        waited = incoming_ms - times.first_ms if has_timestamp else now_ms - times.created_ms
        if waited > self._config.segment_ms:
            self._log.roll()

    def _after_append(
        self, active_before: int | None, batches: list[tuple[int, int]], offsets: int,
        now_ms: int,
    ) -> None:
        active = self._log.active_segment_base
        assert active is not None, "an append leaves a segment"
        rolled = active_before is not None and active != active_before
        bases = [view.base_offset for view in self._log.segments()] if rolled else [active]
        for base, max_timestamp in batches:
            segment_base = bases[_index_at_or_below(bases, base)]
            times = self._times.get(segment_base)
            if times is None:
                times = self._times[segment_base] = SegmentTimes(max_timestamp, now_ms)
            elif times.empty:  # a segment rolled ahead of its first batch
                times.first_ms = max_timestamp
                times.created_ms = now_ms
            times.add(base, max_timestamp)
        if rolled:
            self._rolled = True  # the old segment is synced soon after its roll
            self._take_snapshot()  # as Kafka: a restart replays from the new segment on
        self._since_snapshot += len(batches)
        if self._checkpoints.due(len(batches)):
            segment = self._times.get(active)
            self._checkpoints.take(StateCheckpoint(
                self._log.end_offset, self._producers.copy(), active,
                None if segment is None else segment.copy()))
        self._unflushed_messages += offsets
        if self.on_flush_due is not None and self.flush_due(now_ms):
            self.on_flush_due(self)

    # -- leader epochs ---------------------------------------------------------------------

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that leader epoch `epoch` starts at `start_offset` (a new leader calls it
        with its log end even when it writes nothing: KAFKA-7415). The checkpoint is written by
        the log's next flush job, in a worker thread, which fsyncs it (partition_state.py)."""
        self._check_open()
        self._assign_epoch(epoch, start_offset)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        if epoch >= 0 and epoch != self._epochs.latest_epoch:
            self._epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(the largest epoch ≤ `epoch`, the start of the next higher epoch or the LEO for the
        latest) as Kafka's OffsetsForLeaderEpoch answers it; (-1, -1) when undefined."""
        return self._epochs.end_offset_for(epoch, self._log.end_offset)

    # -- flushing ----------------------------------------------------------------------------

    def flush_due(self, now_ms: int) -> bool:
        """Whether the flush policy asks for a flush job now: a segment was rolled,
        flush.messages records are unflushed, or the oldest unflushed one is flush.ms old."""
        if self._rolled:
            return True
        if self._unflushed_messages <= 0:
            return False
        config = self._config
        return (self._unflushed_messages >= config.flush_messages
                or now_ms - self._last_flush_ms >= config.flush_ms)

    def begin_flush(self, now_ms: int | None = None) -> PartitionFlushJob | None:
        """Take what was written since the last job: the job's `run` (any thread) fsyncs the
        unsynced metadata files and directories, then the data, and raises the recovery
        point; hand it back to `complete_flush`. None when the files are in sync. One job at a
        time."""
        self._check_open()
        files, dirs, epochs = self._take_unsynced()
        try:
            segment_job = self._log.begin_flush()
        except BaseException:
            self._untake_unsynced(files, dirs, epochs)
            raise
        self._rolled = False
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms
        if segment_job is None and not files and not dirs:
            return None
        return PartitionFlushJob(files, dirs, segment_job, epochs)

    def complete_flush(self, job: FlushJob) -> None:
        if not isinstance(job, PartitionFlushJob):
            raise RuntimeError("complete_flush got a job this log did not begin")
        if job.error is not None:
            self._metadata_failed = job.error
        if job.segment_job is not None:
            self._log.complete_flush(job.segment_job)
        if job.error is not None:
            raise OSError(errno.EIO, f"an fsync of a file in {self._directory} failed: "
                          f"{job.error}") from job.error

    def flush(self) -> None:
        """fsync everything now, on this thread (tests, tools, a clean close): the metadata
        files and directories first, then the data."""
        self._check_open()
        self._sync_metadata()
        self._log.flush()
        self._rolled = False
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms()

    # -- closing -----------------------------------------------------------------------------

    def close(self, flush: bool = True) -> None:
        """Close the files, after an fsync of everything unless `flush` is False (which
        leaves the files as a crash would, for tests)."""
        if self._closed:
            return
        try:
            if flush:
                self._sync_metadata()
                self._log.flush()
        finally:
            self._closed = True
            self._log.close()

    def delete(self) -> str:
        """Close the log and rename its directory out of the way (topic deletion deletes
        data): `<dir>.<random>-delete`, as Kafka does, so the name is free for a new topic at
        once and no start-up ever loads it. Returns the new path; `remove_deleted` removes
        it, off the event loop (thousands of partitions may go in one image)."""
        self.close(flush=False)
        tombstone = f"{self._directory}.{uuid.uuid4().hex}{DELETED_SUFFIX}"
        os.rename(self._directory, tombstone)
        return tombstone
