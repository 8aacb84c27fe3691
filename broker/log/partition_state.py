"""The state a partition log keeps around its segments (broker/log/partition_log.py's
PartitionLog is built on it): the log start offset, the leader-epoch cache and its checkpoint
file, the idempotent producers' state and its snapshot files, each segment's timestamps, and
the metadata files written without fsync; the read-only view of the log.

Creating a log and assigning a leader epoch cost no fsync on the caller's thread (a broker
creates thousands of logs from one metadata image, and every leader change assigns an epoch).
`open` of a new directory creates it, `partition.metadata` and a recovery point of 0 (the
kraft.log file SegmentedLog would otherwise write durably), all without fsync; each such file
and directory is remembered as unsynced, `on_metadata_unsynced` tells the LogManager, and its
background round fsyncs them in a worker thread. A change of the leader epochs is not even
written on the caller's thread: the flush job writes the checkpoint (the entries as they were
when it began) in its worker thread, then fsyncs it. The flush job of this class always writes
and fsyncs those files and directories *before* it fsyncs any data of the log, and so do
`flush` and `close`. Why that is safe:
* A process crash (kill -9) loses nothing but a leader-epoch checkpoint not written yet:
  every other file is complete in the page cache.
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
  broker/log/leader_epochs.py for what a lost or late write of it can lose, and why that is
  harmless.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator

from broker.log import checkpoints
from broker.log import producer_snapshots as snapshots
from broker.log.config import LogConfig
from broker.log.leader_epochs import UNDEFINED, LeaderEpochCache
from broker.log.log_files import PartitionFlushJob
from broker.log.log_state import (
    Checkpoints,
    LoadingFormat,
    SegmentTimes,
    reload,
    restore_loaded,
)
from broker.log.producer_state import ProducerState
from broker.records import HEADER_SIZE, RecordBatchHeader, parse_header
from kraft.log.segmented import LogFaults, SegmentedLog

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




def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a directory named `<topic>-<partition>`; topics may hold dashes.
    None for any other name (`__cluster_metadata-0` is a partition name too: callers skip
    it)."""
    match = _DIR_NAME.fullmatch(name)
    if match is None:
        return None
    return match.group(1), int(match.group(2))



class PartitionLogState:
    """What PartitionLog keeps besides its segments, and its view; not opened by itself."""

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
        self._epochs_unwritten = False  # the checkpoint lags the cache: the next job writes it
        self._metadata_failed: BaseException | None = None
        # Called when a file above needs the background round: the LogManager's.
        self.on_metadata_unsynced: Callable[[PartitionLogState], None] | None = None
        self._epochs = self._new_epochs()
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._rolled = False  # a segment was rolled since the last flush job began
        self._closed = False
        # Called when the flush policy (or a roll) wants a flush job soon: the LogManager's.
        self.on_flush_due: Callable[[PartitionLogState], None] | None = None
        # Called with the new log end after a truncation: the LogManager's (the cleaner's
        # checkpoint must not stay above it, as in Kafka).
        self.on_truncated: Callable[[PartitionLogState, int], None] | None = None
        if loaded is None or not self._restore_loaded(loaded):
            self._reload(log.end_offset, all_times=True)
            self._load_epochs(LeaderEpochCache(directory, log.epoch_entries()))

    # -- metadata files written without fsync ------------------------------------------------

    def _new_epochs(self, entries: list[tuple[int, int]] | None = None) -> LeaderEpochCache:
        epochs = LeaderEpochCache(self._directory, entries)
        epochs.on_change = self._epochs_changed
        return epochs

    def _epochs_changed(self) -> None:
        self._epochs_unwritten = True
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
        files, dirs, epochs = self._take_unsynced()
        job = PartitionFlushJob(files, dirs, None, epochs)
        try:
            job.run()
        except BaseException as exc:
            self._metadata_failed = exc
            raise

    def _take_unsynced(
        self,
    ) -> tuple[list[str], list[str], tuple[str, list[tuple[int, int]]] | None]:
        """The files and directories to fsync, and the leader-epoch checkpoint to write first
        (its directory and entries) when it lags the cache."""
        if self._metadata_failed is not None:
            raise OSError(errno.EIO, f"an fsync of a file in {self._directory} failed; its "
                          "metadata cannot be trusted") from self._metadata_failed
        files, self._unsynced_files = list(self._unsynced_files), {}
        dirs, self._unsynced_dirs = list(self._unsynced_dirs), {}
        epochs = (self._directory, self._epochs.entries()) if self._epochs_unwritten else None
        self._epochs_unwritten = False
        return files, dirs, epochs

    def _untake_unsynced(self, files: list[str], directories: list[str],
                         epochs: tuple[str, list[tuple[int, int]]] | None) -> None:
        """A job that was not begun after all: its work waits for the next one."""
        self._epochs_unwritten = self._epochs_unwritten or epochs is not None
        self._unsynced(files, directories)

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
        only an epoch assigned with no record written (KAFKA-7415), which starts at the log end
        (any other entry the batches lack is stale: broker/log/leader_epochs.py)."""
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
            if start == end and epoch > epochs.latest_epoch and start >= _last_start(epochs):
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
