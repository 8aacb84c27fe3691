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

Creating a log and assigning a leader epoch cost no fsync on the caller's thread (a broker
creates thousands of logs from one metadata image, and every leader change assigns an epoch).
`open` of a new directory creates it, `partition.metadata` and a recovery point of 0 (the
kraft.log file SegmentedLog would otherwise write durably), and the leader-epoch checkpoint is
rewritten on each change, all without fsync; each such file and directory is remembered as
unsynced, `on_metadata_unsynced` tells the LogManager, and its background round fsyncs them in
a worker thread. The flush job of this class always fsyncs those files and directories
*before* it fsyncs any data of the log, and so do `flush` and `close`. Why that is safe:
* A process crash (kill -9) loses nothing: every file is complete in the page cache.
* A power loss before the first round can lose the new directory or any of its files. A lost
  directory is recreated from the metadata image and refetched from the leader, as for a
  replica that never existed; a directory without `partition.metadata` is skipped on start and
  opened again (the file rewritten) when the replica manager asks for the log.
* An existing directory's files are marked unsynced again on open (a process crash may have
  left them only in the page cache), so the ordering holds across restarts.
* No data of the log was ever fsynced before its creation was (the ordering above), so a
  partition directory whose recovery-point file is missing or empty holds nothing that was
  ever durable: `open` gives it a recovery point of 0, under which recovery cuts any damage as
  a torn tail instead of refusing to open (after the first round the file always exists: it is
  only ever replaced by rename). A recovery-point file with other garbage is still recovery's
  strict case.
* The leader-epoch checkpoint is rebuilt from the batches on open; see
  broker/log/leader_epochs.py for what a lost write of it can lose, and why that is harmless.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import takewhile

from broker.log import checkpoints, cleaner_core, cleaner_swap
from broker.log import producer_snapshots as snapshots
from broker.log.config import LogConfig
from broker.log.leader_epochs import UNDEFINED, LeaderEpochCache
from broker.log.log_files import (
    DELETED_SUFFIX,
    TRUST_ALL,
    PartitionFlushJob,
    never_synced,
    open_segments,
    plain_segments,
    recovery_point,
    remove_deleted,
    write_recovery_point_zero,
)
from broker.log.log_state import (
    Checkpoints,
    LoadingFormat,
    SegmentTimes,
    StateCheckpoint,
    reload,
    replay,
    restore_loaded,
)
from broker.log.producer_state import ProducerState
from broker.log.validator import validate_records
from broker.records import (
    HEADER_SIZE,
    AppendError,
    RecordBatchHeader,
    decode_records,
    parse_header,
    scan_batches,
    set_log_append_time,
    stamp,
    validate_client_batch,
)
from kraft.errors import Errors
from kraft.log.base import CorruptRecordError, FlushJob, LogAppendError
from kraft.log.codec import BatchHeader
from kraft.log.recovery import RECOVERY_POINT_FILE
from kraft.log.segmented import LogFaults, SegmentedLog, SegmentView

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

logger = logging.getLogger(__name__)

_DIR_NAME = re.compile(r"(.+)-(\d+)")


class OffsetOutOfRange(Exception):
    """A read below the log start offset or past the log end offset (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, start: int, end: int) -> None:
        super().__init__(f"offset {offset} is outside the log [{start}, {end}]")
        self.offset = offset
        self.start_offset = start
        self.end_offset = end


class PartitionMetadataError(Exception):
    """A partition directory that belongs to another topic (a deleted and recreated topic),
    or whose partition.metadata does not parse."""


@dataclass(frozen=True, slots=True)
class LeaderAppend:
    """The outcome of a leader's append: the offsets the batch holds, the time the leader
    stamped (-1 unless the topic uses LogAppendTime), and whether it was an idempotent
    producer's retry of a batch already in the log (nothing written, original offsets)."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int = -1
    duplicate: bool = False


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a directory named `<topic>-<partition>`; topics may hold dashes.
    None for any other name (`__cluster_metadata-0` is a partition name too: callers skip
    it)."""
    match = _DIR_NAME.fullmatch(name)
    if match is None:
        return None
    return match.group(1), int(match.group(2))


class PartitionLog:
    """A replica's log. Create with `PartitionLog.open`."""

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        topic_id: str,
        config: LogConfig,
        log: SegmentedLog,
        log_start_offset: int | None,
        now_ms: int,
        new_directory: bool = False,
        loaded: LoadingFormat | None = None,
        snapshot_offsets: list[int] | None = None,
    ) -> None:
        self._directory = directory
        self._new_directory = new_directory  # created by open: no file to read in it
        self._topic = topic
        self._partition = partition
        self._topic_id = topic_id
        self._config = config
        self._log = log
        self._start_offset = log.start_offset
        if log_start_offset is not None:
            self._start_offset = max(self._start_offset, min(log_start_offset, log.end_offset))
        self._producers = ProducerState()
        self._times: dict[int, SegmentTimes] = {}
        # Producer snapshot files (broker/log/producer_snapshots.py) by offset, ascending; the
        # in-memory checkpoints of the derived state (broker/log/log_state.py).
        self._snapshots = snapshot_offsets or []
        self._checkpoints = Checkpoints()
        self._since_snapshot = 0  # batches a restart would replay (none in a snapshot)
        # Files and directories written without fsync since the last flush job began.
        self._unsynced_files: dict[str, None] = {}
        self._unsynced_dirs: dict[str, None] = {}
        self._metadata_failed: BaseException | None = None
        # Called when a file above needs the background round: the LogManager's.
        self.on_metadata_unsynced: Callable[[PartitionLog], None] | None = None
        self._epochs = self._new_epochs()
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._rolled = False  # a segment was rolled since the last flush job began
        self._closed = False
        # Called when the flush policy (or a roll) wants a flush job soon: the LogManager's.
        self.on_flush_due: Callable[[PartitionLog], None] | None = None
        # Called with the new log end after a truncation: the LogManager's (the cleaner's
        # checkpoint must not stay above it, as in Kafka).
        self.on_truncated: Callable[[PartitionLog, int], None] | None = None
        if loaded is None or not self._restore_loaded(loaded):
            self._reload(log.end_offset, all_times=True)
            self._load_epochs(LeaderEpochCache(directory, log.epoch_entries()))

    # -- opening ---------------------------------------------------------------------------

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
    ) -> PartitionLog:
        """Create or recover the partition directory `directory` (named
        `<topic>-<partition>`): recovery CRC-checks from the recovery point (after a
        `clean_shutdown`, nothing), cuts a torn tail, and raises CorruptRecordError (path, byte
        offset) for damage below it. The directory's partition.metadata must name `topic_id`
        (PartitionMetadataError otherwise); a new directory gets one. `log_start_offset` is the
        log-start-offset checkpoint's value, if any. `synced`: the caller made the files of
        the log dir durable (a clean shutdown, a syncfs), so none is synced again
        (broker/log/log_files.py); `metadata_read`: `topic_id` is what the directory's
        partition.metadata holds (the loader read it)."""
        directory = os.path.abspath(directory)
        parsed = parse_partition_dir(os.path.basename(directory))
        if parsed is None:
            raise ValueError(f"{directory} is not named <topic>-<partition>")
        topic, partition = parsed
        unsynced_files: list[str] = []
        unsynced_dirs: list[str] = []
        existed = os.path.isdir(directory)
        if not existed:
            os.makedirs(directory)  # fsynced by the first flush job (module docstring)
            unsynced_dirs += [directory, os.path.dirname(directory)]
        try:
            stored = None if not existed else topic_id if metadata_read else (
                checkpoints.read_partition_metadata(directory))
        except checkpoints.CheckpointError as exc:
            if not never_synced(directory):
                raise PartitionMetadataError(str(exc)) from None
            # Written without fsync and never synced: a power loss damaged it.
            logger.warning("%s; the log was never synced: writing it again", exc)
            stored = None
        if stored is None:
            checkpoints.write_partition_metadata(directory, topic_id, durable=False)
            unsynced_files.append(os.path.join(directory, checkpoints.PARTITION_METADATA_FILE))
        elif stored != topic_id:
            raise PartitionMetadataError(
                f"{directory} holds topic id {stored}, not {topic_id}: a topic of the same "
                "name was deleted and created again; delete the directory to start over"
            )
        if not existed or never_synced(directory):
            # A new log, or one whose creation a power loss undid before any fsync: nothing in
            # it was ever durable (module docstring). Without this file SegmentedLog would
            # write it durably, on this thread.
            unsynced_files.append(write_recovery_point_zero(directory))
        if existed and not synced:
            # What a crashed process left may still be only in the page cache (kill -9 keeps
            # it, a power loss later would not): the first flush job syncs it all again.
            unsynced_files = [os.path.join(directory, name) for name in (
                checkpoints.PARTITION_METADATA_FILE, RECOVERY_POINT_FILE,
                checkpoints.LEADER_EPOCH_FILE)]
            unsynced_dirs = [directory, os.path.dirname(directory)]
        elif existed and unsynced_files:
            unsynced_dirs = [directory]
        names = os.listdir(directory) if existed else []
        if existed:
            cleaner_swap.recover(directory, names)  # a cleaner swap a crash interrupted
        offsets = snapshots.list_snapshots(directory, names)
        found = snapshots.read_latest(directory, offsets, TRUST_ALL) if offsets else None
        producers = ProducerState()
        if found is not None:
            producers.restore(found[1])
        loading = LoadingFormat(TRUST_ALL if clean_shutdown else recovery_point(directory),
                                producers, found[0] if found else 0, log_start_offset or 0)
        log = open_segments(directory, config, loading, synced)
        try:
            now = _now_ms() if now_ms is None else now_ms
            opened = cls(directory, topic, partition, topic_id, config, log, log_start_offset,
                         now, new_directory=not existed, loaded=loading,
                         snapshot_offsets=offsets)
        except BaseException:
            log.close()
            raise
        opened._unsynced(unsynced_files, unsynced_dirs)
        return opened

    # -- metadata files written without fsync ------------------------------------------------

    def _new_epochs(self, entries: list[tuple[int, int]] | None = None) -> LeaderEpochCache:
        epochs = LeaderEpochCache(self._directory, entries)
        epochs.on_save = self._epochs_saved
        return epochs

    def _epochs_saved(self) -> None:
        self._unsynced([os.path.join(self._directory, checkpoints.LEADER_EPOCH_FILE)],
                       [self._directory])

    def _unsynced(self, files: list[str], directories: list[str]) -> None:
        if not files and not directories:
            return
        for path in files:
            self._unsynced_files[path] = None
        for path in directories:
            self._unsynced_dirs[path] = None
        if self.on_metadata_unsynced is not None:
            self.on_metadata_unsynced(self)

    @property
    def metadata_unsynced(self) -> bool:
        """Whether files of this log (partition.metadata, the leader-epoch checkpoint, a new
        recovery point) or its directory wait for the next flush job's fsync."""
        return bool(self._unsynced_files or self._unsynced_dirs)

    def _sync_metadata(self) -> None:
        """fsync the unsynced files and directories on this thread."""
        files, dirs = self._take_unsynced()
        job = PartitionFlushJob(files, dirs, None)
        try:
            job.run()
        except BaseException as exc:
            self._metadata_failed = exc
            raise

    def _take_unsynced(self) -> tuple[list[str], list[str]]:
        if self._metadata_failed is not None:
            raise OSError(errno.EIO, f"an fsync of a file in {self._directory} failed; its "
                          "metadata cannot be trusted") from self._metadata_failed
        files, self._unsynced_files = list(self._unsynced_files), {}
        dirs, self._unsynced_dirs = list(self._unsynced_dirs), {}
        return files, dirs

    def _headers(self, start: int) -> Iterator[RecordBatchHeader]:
        for _, prefix in self._log.batch_prefixes(start, HEADER_SIZE):
            yield parse_header(prefix)

    def _restore_loaded(self, loaded: LoadingFormat) -> bool:
        """The state the open's one pass collected; False when recovery cut the log after
        that pass, or the snapshot lies past the end (broker/log/log_state.py)."""
        restored = restore_loaded(loaded, self._log, self._start_offset)
        if restored is None:
            return False
        self._producers, self._times, self._since_snapshot = restored
        self._load_epochs(LeaderEpochCache(self._directory, self._log.epoch_entries()))
        return True

    def _reload(self, end: int, all_times: bool = False) -> None:
        """The producer state as of `end` (the log end, after a truncation or a cut), and the
        times of the last segment (`all_times`: of every segment), from the latest checkpoint
        at or below `end` (log_state.reload)."""
        self._drop_snapshots(lambda offset: offset > end)
        found = self._checkpoints.at_or_below(end) or snapshots.read_latest(
            self._directory, self._snapshots, end)
        self._producers, self._since_snapshot = reload(
            self._log, self._start_offset, self._times, found, all_times, self._headers)

    def _drop_snapshots(self, doomed: Callable[[int], bool]) -> None:
        gone = [offset for offset in self._snapshots if doomed(offset)]
        if gone:
            snapshots.delete(self._directory, gone)
            self._snapshots = [offset for offset in self._snapshots if not doomed(offset)]

    def _take_snapshot(self) -> None:
        """A producer snapshot at the log end (a roll, a clean shutdown), without fsync: the
        log's next flush job syncs it with its other metadata files."""
        end = self._log.end_offset
        if end in self._snapshots:
            return
        try:
            path = snapshots.write(self._directory, end, self._producers)
        except OSError as exc:  # costs a longer replay at most; the flush will fail loudly
            logger.warning("cannot write a producer snapshot in %s: %s", self._directory, exc)
            return
        self._snapshots.append(end)
        self._since_snapshot = 0
        self._unsynced([path], [self._directory])

    def snapshot_if_due(self, min_batches: int) -> bool:
        """Write a producer snapshot at the log end if a restart would replay at least
        `min_batches` batches without one (a clean shutdown's choice)."""
        self._check_open()
        if self._since_snapshot < min_batches:
            return False
        self._take_snapshot()
        return True

    def _load_epochs(self, from_batches: LeaderEpochCache) -> None:
        """The checkpoint reconciled with the batches: the batches are the truth; the file adds
        epochs assigned with no record written (KAFKA-7415) at the log end."""
        path = os.path.join(self._directory, checkpoints.LEADER_EPOCH_FILE)
        try:
            stored = (None if self._new_directory
                      else checkpoints.read_leader_epochs(self._directory))
        except checkpoints.CheckpointError as exc:
            logger.warning("%s; rebuilding the leader epochs from the batches", exc)
            stored = None
        epochs = self._new_epochs(from_batches.entries())
        end = self._log.end_offset
        for epoch, start in stored or ():
            if start <= end and epoch > epochs.latest_epoch and start >= _last_start(epochs):
                epochs.assign(epoch, start, save=False)
        # A new log with no epoch has no file to write (a missing file is an empty cache).
        if epochs.entries() != (stored or []):
            if stored:
                logger.info("%s reconciled with the log: %s -> %s", path, stored,
                            epochs.entries())
            epochs.save()
        self._epochs = epochs
        if self._start_offset > self._log.start_offset:
            self._epochs.truncate_from_start(self._start_offset)

    def _segment_path(self, base: int) -> str:
        for view in self._log.segments():
            if view.base_offset == base:
                return view.path
        return ""

    @staticmethod
    def _segment_mtime(path: str) -> int:
        try:
            return int(os.stat(path).st_mtime * 1000)
        except OSError:
            return _now_ms()

    # -- the view ----------------------------------------------------------------------------

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    @property
    def topic_id(self) -> str:
        return self._topic_id

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def start_offset(self) -> int:
        """The log start offset: the first offset a consumer may read."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next record gets."""
        return self._log.end_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below it is fsynced (the recovery point checkpoint)."""
        value = self._log.recovery_point
        return self._log.start_offset if value is None else value

    @property
    def flushed_offset(self) -> int:
        return self._log.flushed_offset

    @property
    def latest_epoch(self) -> int:
        """The latest leader epoch in the epoch cache, -1 when there is none."""
        return self._epochs.latest_epoch

    @property
    def size_in_bytes(self) -> int:
        return self._log.size_in_bytes

    @property
    def segment_count(self) -> int:
        return len(self._log.segments())

    def epoch_entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs of the epoch cache, oldest first."""
        return self._epochs.entries()

    def use_faults(self, faults: LogFaults) -> None:
        """Share the log manager's injected faults (tests and the chaos tool only)."""
        self._log.faults = faults

    def update_config(self, config: LogConfig) -> None:
        """The topic's configs changed (they apply from the next append or retention run)."""
        self._config = config
        self._log.segment_bytes = config.segment_bytes

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
        self._producers.update(header, base, max_timestamp)
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
        for header in headers:
            self._assign_epoch(header.partition_leader_epoch, header.base_offset)
            self._producers.update(header, header.base_offset, header.max_timestamp)
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
        with its log end even when it writes nothing: KAFKA-7415). The checkpoint is written at
        once, without fsync; the next flush job fsyncs it (module docstring)."""
        self._check_open()
        self._assign_epoch(epoch, start_offset)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        if epoch >= 0 and epoch != self._epochs.latest_epoch:
            self._epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(the largest epoch ≤ `epoch`, the start of the next higher epoch or the LEO for the
        latest) as Kafka's OffsetsForLeaderEpoch answers it; (-1, -1) when undefined."""
        return self._epochs.end_offset_for(epoch, self._log.end_offset)

    # -- reads -----------------------------------------------------------------------------

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
        self._check_open()
        current = self._log.segments()
        active = current[-1] if current else None
        for _, old in swaps:
            for view in old:
                if view not in current or view == active:
                    raise ValueError(f"{view.path} changed while it was being cleaned")
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

    def _rebuild_times(self, first: int, end: int) -> None:
        """The times of the segments now holding offsets [first, end) (a swap replaced the
        segments there), from their batch headers; the other segments' stay."""
        for base in [base for base in self._times if first <= base < end]:
            del self._times[base]
        segments = [view for view in self._log.segments() if first <= view.base_offset < end]
        if segments:
            headers = takewhile(lambda header: header.base_offset < end, self._headers(first))
            replay(headers, ProducerState(), TRUST_ALL, 0, self._times, segments, first)

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
        files, dirs = self._take_unsynced()
        try:
            segment_job = self._log.begin_flush()
        except BaseException:
            self._unsynced(files, dirs)
            raise
        self._rolled = False
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms
        if segment_job is None and not files and not dirs:
            return None
        return PartitionFlushJob(files, dirs, segment_job)

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

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"the log in {self._directory} is closed")

    def __repr__(self) -> str:
        return (f"PartitionLog({self._topic}-{self._partition}, start={self._start_offset}, "
                f"end={self._log.end_offset}, epoch={self.latest_epoch})")


def _index_at_or_below(bases: list[int], offset: int) -> int:
    return max(bisect_right(bases, offset) - 1, 0)


def _last_start(epochs: LeaderEpochCache) -> int:
    entries = epochs.entries()
    return entries[-1][1] if entries else UNDEFINED


def _now_ms() -> int:
    return int(time.time() * 1000)
