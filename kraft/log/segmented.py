"""SegmentedLog: the durable log on files, with group commit (docs/log-format.md).

Appends and truncations change the in-memory view at once and queue file operations; a flush
job performs the queue in order with one fdatasync per touched file. The event loop therefore
never waits on a disk, and the Raft core learns of durability through `flushed_offset`.

Three invariants keep reads and the worker thread apart. The first is kept here: every batch
below `flushed_offset` is on disk exactly as the log holds it, and a running job only touches
file bytes at or above what was flushed when its operations were queued (a truncation also caps
what the job in flight may count as flushed, `_job_min_end`). The other two, on the read
cache, are kept by kraft/log/segment_reads.py.

The log is parameterized by a batch format (kraft/log/batch_format.py): the Raft log's own
batches by default, Kafka's record batches for a broker's partition logs. A partition log runs
in write-through mode, as Kafka's log does: every append, truncation and segment change is
performed on the files at once, on the caller's thread (a write into the page cache, no
fsync), and a flush job only fdatasyncs what changed since the previous job and raises the
recovery point. In that mode everything in the log is in its files, so the read cache is a
plain cache and recovery accepts a torn tail in any segment past the recovery point (an old
segment is synced after its roll, not before).

The class is split along its seams: the file format pieces (kraft/log/segment_files.py), the
flush job and the recovery-point file (segment_flush.py), the state the parts share
(segment_state.py), recovery on open (segment_recovery.py), the reads and the read cache
(segment_reads.py), the queue of file operations and write-through mode (segment_ops.py).
Appends, truncation, the log start, group commit and closing are here. Every name callers
import from this module is still here.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence

from kraft.log._common import check_follower_batches, fsync_dir
from kraft.log.base import FlushJob, LogAppendError, OffsetAndEpoch
from kraft.log.batch_format import KRAFT_FORMAT, BatchFormat, scan_all
from kraft.log.codec import BatchHeader, encode_batch
from kraft.log.epoch_cache import EpochCache
from kraft.log.recovery import read_recovery_point
from kraft.log.segment_files import (
    CREATE,
    DEFAULT_SEGMENT_BYTES,
    WRITE,
    DiskFullError,
    FileOp,
    LogFaults,
    SegmentView,
    list_segments,
    segment_path,
    write_buffers,
)
from kraft.log.segment_flush import (
    DEFAULT_RECOVERY_POINT_INTERVAL_MS,
    RecoveryPoint,
    SegmentFlushJob,
)
from kraft.log.segment_ops import SegmentFileOps
from kraft.log.segment_reads import DEFAULT_CACHE_BYTES, SegmentReads
from kraft.log.segment_recovery import SegmentRecovery

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_RECOVERY_POINT_INTERVAL_MS",
    "DEFAULT_SEGMENT_BYTES",
    "DiskFullError",
    "LogFaults",
    "SegmentFlushJob",
    "SegmentView",
    "SegmentedLog",
    "list_segments",
    "segment_path",
    "write_buffers",
]

logger = logging.getLogger(__name__)


class SegmentedLog(SegmentRecovery, SegmentReads, SegmentFileOps):
    """The durable log: `%020d.log` segment files in one directory, group-committed."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        recovery_point_interval_ms: int = DEFAULT_RECOVERY_POINT_INTERVAL_MS,
        batch_format: BatchFormat = KRAFT_FORMAT,
        write_through: bool = False,
        synced: bool = False,
        listing: list[str] | None = None,
    ) -> None:
        """Open (or create) the log in `directory`, verifying every batch CRC. A torn tail of
        the last segment is cut (damage at or past the recovery point; without one, damage
        that looks like an interrupted write); any other damage raises CorruptRecordError.
        Flush jobs raise the recovery point at most once per `recovery_point_interval_ms`
        (0: every job). `batch_format` frames the batches (kraft's by default);
        `write_through` performs file changes at once (see the module docstring).
        `synced` (write-through logs only): the caller made every file in `directory` durable
        before this open (a clean shutdown's flush, a syncfs after a crash), so no segment is
        fdatasynced again and the recovery-point file is left as it is (a stale value is safe,
        kraft/log/recovery.py); the next flush job raises it. `listing`: the names in
        `directory`, when the caller has just listed it (a broker opening thousands of logs)."""
        if segment_bytes < 1 or cache_bytes < 0:
            raise ValueError("segment_bytes must be positive and cache_bytes not negative")
        if synced and not write_through:
            raise ValueError("only a write-through log may be opened as synced")
        self._synced_at_open = synced
        self._format = batch_format
        self._write_through = write_through
        self._unsynced = {}
        self._unsynced_dir = False
        self._deferred_close = []
        self._directory = os.fspath(directory)
        self._segment_bytes = segment_bytes
        self._cache_bytes = cache_bytes
        self._segments = []
        self._segment_bases = []
        self._epoch_cache = EpochCache()
        self._start_offset = 0
        self._start_epoch = 0
        self._end_offset = 0
        self._clear_cache()
        self._ops = []
        self._cut_to = None
        self._actions: list[Callable[[], None]] = []  # for the next job's complete_flush
        self._job = None
        self._job_min_end = 0
        self._failed = None
        self._closed = False
        self.faults = LogFaults()  # injected by tests and the chaos tool only
        if listing is None and not os.path.isdir(self._directory):
            os.makedirs(self._directory, exist_ok=True)
            fsync_dir(os.path.dirname(os.path.abspath(self._directory)))
        self._dir_fd = os.open(self._directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._recovery_point = RecoveryPoint(
            self._directory, self._dir_fd, recovery_point_interval_ms
        )
        try:
            recovery_point = read_recovery_point(self._directory)
            self._load_segments(recovery_point, listing)
            # Every segment is synced now: all of it is durable, whatever the file said.
            self._recovery_point.value = recovery_point
            if recovery_point != self._end_offset and not synced:
                self._recovery_point.write(self._end_offset, durable=True)
        except BaseException:
            self._close_fds()
            raise
        self._flushed = self._end_offset

    # -- the core's view -------------------------------------------------------------------

    @property
    def directory(self) -> str:
        """The directory holding the segment files."""
        return self._directory

    @property
    def start_offset(self) -> int:
        """First offset held by the log: the first segment's base offset, or where a snapshot
        moved it (`advance_start`, `reset_to`)."""
        return self._start_offset

    @property
    def start_epoch(self) -> int:
        """Epoch of the snapshot the log starts from (0 when it starts at offset 0)."""
        return self._start_epoch

    @property
    def segment_bytes(self) -> int:
        """The size past which the next append rolls a new segment."""
        return self._segment_bytes

    @segment_bytes.setter
    def segment_bytes(self, value: int) -> None:
        if value < 1:
            raise ValueError("segment_bytes must be positive")
        self._segment_bytes = value

    @property
    def size_in_bytes(self) -> int:
        """Bytes in the segment files still part of the log (the first counted whole)."""
        return sum(segment.size for segment in self._segments)

    @property
    def end_offset(self) -> int:
        """One past the last record, flushed or not."""
        return self._end_offset

    @property
    def flushed_offset(self) -> int:
        """One past the last record that is durable and still part of the log."""
        return self._flushed

    def epoch_entries(self) -> list[tuple[int, int]]:
        """(epoch, first offset) of each epoch in the batches, oldest first."""
        return self._epoch_cache.entries()

    @property
    def last_epoch(self) -> int:
        """Epoch of the last batch; the start epoch when the log holds none."""
        return self._epoch_cache.last_epoch if len(self._epoch_cache) else self._start_epoch

    def append_as_leader(
        self, records: Sequence[bytes], epoch: int, timestamp_ms: int, control: bool = False
    ) -> int:
        """Encode and append one batch at end_offset; return its base offset. No syscall
        (kraft's format only)."""
        if not records:
            raise ValueError("cannot append an empty batch")
        self._check_open()
        self._check_kraft_format()
        last = self.last_epoch
        if epoch < last:
            raise LogAppendError(f"epoch {epoch} is below the last epoch {last}")
        base = self._end_offset
        blob = encode_batch(base, epoch, records, timestamp_ms, control)
        self._push(base, epoch, blob, base + len(records))
        self._apply_now()
        return base

    def append_as_follower(self, data: bytes) -> int:
        """Append the leader's encoded batches as-is (CRC checked, records not split); return
        the number of records."""
        self._check_open()
        if not isinstance(data, bytes):
            data = bytes(data)
        return self.append_verified(data, scan_all(self._format, data))

    def append_verified(self, data: bytes, headers: Sequence[BatchHeader]) -> int:
        """Append batches `data` whose frames and CRCs the caller already checked with this
        log's format (`headers`, positions relative to `data`): the CRC is computed once per
        batch. Offsets must continue the log and epochs not go back (LogAppendError); return
        the number of offsets appended."""
        self._check_open()
        count = check_follower_batches(list(headers), self._end_offset, self.last_epoch)
        push = self._push
        if len(headers) == 1 and headers[0].size == len(data):
            base, epoch, records, _, _, _, _ = headers[0]
            push(base, epoch, data, base + records)
        else:
            for base, epoch, records, position, size, _, _ in headers:
                push(base, epoch, data[position : position + size], base + records)
        self._apply_now()
        return count

    def _push(self, base: int, epoch: int, blob: bytes, next_offset: int) -> None:
        size = len(blob)
        segments = self._segments
        segment = segments[-1] if segments else None
        if segment is None or (segment.size and segment.size + size > self._segment_bytes):
            segment = self._roll(base)
        position = segment.size
        segment.bases.append(base)
        segment.positions.append(position)
        segment.size = position + size
        ops = self._ops
        if ops and (op := ops[-1]).segment is segment and op.kind == WRITE:
            op.buffers.append(blob)
            op.size += size
        else:
            ops.append(FileOp(WRITE, segment, position, [blob], size))
        self._cache_bases.append(base)
        self._cache_positions.append(self._cache_end)
        self._cache_blobs.append(blob)
        self._cache_end += size
        self._cache_held += size
        self._epoch_cache.assign(epoch, base)
        self._end_offset = next_offset
        if self._cache_held > self._cache_bytes:
            self._evict()

    def roll(self) -> None:
        """Start a new, empty segment at end_offset now (unless the last one is empty): a roll
        by time, or before retention deletes every segment."""
        self._check_open()
        if self._segments and self._segments[-1].size == 0:
            return
        self._roll(self._end_offset)
        self._apply_now()

    @property
    def active_segment_base(self) -> int | None:
        """Base offset of the segment appends go to (None before the first)."""
        return self._segments[-1].base_offset if self._segments else None

    def segments(self) -> list[SegmentView]:
        """Every segment still part of the log, oldest first."""
        views = []
        count = len(self._segments)
        for index, segment in enumerate(self._segments):
            end = (
                self._segments[index + 1].base_offset if index + 1 < count else self._end_offset
            )
            views.append(SegmentView(segment.base_offset, end, segment.size, segment.path))
        return views

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above `offset` (a batch boundary) from the view at once;
        the files follow in the next flush job."""
        self._check_open()
        if offset < self._start_offset:
            raise ValueError(f"cannot truncate to {offset}, below the log start")
        if offset >= self._end_offset:
            return
        index = bisect_right(self._segment_bases, offset) - 1
        segment = self._segments[index]
        batch = bisect_left(segment.bases, offset)
        if batch == len(segment.bases) or segment.bases[batch] != offset:
            raise ValueError(f"offset {offset} is inside a batch")
        # The first segment is emptied rather than deleted: its name keeps the start offset.
        keep = index if batch > 0 or index == 0 else index - 1
        for doomed in reversed(self._segments[keep + 1 :]):
            self._drop_segment(doomed)
        del self._segments[keep + 1 :]
        del self._segment_bases[keep + 1 :]
        if keep == index:
            self._truncate_segment(segment, batch)
        self._epoch_cache.truncate_from(offset)
        self._end_offset = offset
        self._note_cut(offset)
        self._flushed = min(self._flushed, offset)
        self._job_min_end = min(self._job_min_end, offset)
        self._truncate_cache(offset)
        self._apply_now()

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch ≤ `epoch` in the log and where it ends."""
        return self._epoch_cache.end_offset_for(
            epoch, self._end_offset, self._start_offset, self._start_epoch
        )

    def advance_start(self, offset: int, epoch: int) -> None:
        """Move the log start to a snapshot's end offset; whole segments below it are deleted
        in the next flush job (the segment holding `offset` stays, its prefix unread)."""
        self._check_open()
        if offset <= self._start_offset:
            if offset == self._start_offset:
                self._start_epoch = epoch
            return
        # A write-through log's files hold everything: any offset up to the end will do.
        limit = self._end_offset if self._write_through else self._flushed
        if offset > limit:
            raise ValueError(
                f"cannot start the log at {offset}, beyond what is flushed ({self._flushed})"
            )
        index = len(self._segments) - 1
        if offset < self._end_offset:
            index = bisect_right(self._segment_bases, offset) - 1
            bases = self._segments[index].bases
            batch = bisect_left(bases, offset)
            if batch == len(bases) or bases[batch] != offset:
                raise ValueError(f"offset {offset} is inside a batch")
        for doomed in self._segments[:index]:
            self._drop_segment(doomed)
        del self._segments[:index]
        del self._segment_bases[:index]
        self._epoch_cache.truncate_before(offset)
        self._start_offset = offset
        self._start_epoch = epoch
        self._apply_now()

    def reset_to(self, offset: int, epoch: int) -> None:
        """Drop every record and restart empty at `offset` (a loaded snapshot replaces them).
        The old segments are deleted in the next flush job; the next append creates a segment
        named after `offset`."""
        self._check_open()
        for doomed in reversed(self._segments):
            self._drop_segment(doomed)
        self._segments = []
        self._segment_bases = []
        self._epoch_cache.clear()
        self._note_cut(offset)
        self._start_offset = self._end_offset = offset
        self._start_epoch = epoch
        # The snapshot is durable; a job still running for the old log must not raise this.
        self._flushed = offset
        self._job_min_end = offset
        self._clear_cache()
        self._apply_now()

    # -- group commit ---------------------------------------------------------------------

    def begin_flush(self) -> SegmentFlushJob | None:
        """Take every queued file operation (None when there is none)."""
        self._check_open()
        if self._failed is not None:
            raise RuntimeError("an earlier flush failed; the log cannot be trusted") from (
                self._failed
            )
        if self._job is not None:
            raise RuntimeError("a flush job is already in flight")
        if not (self._ops or self._actions or self._unsynced or self._unsynced_dir or (
                # Opened as synced, its recovery point file may lag the durable end.
                self._synced_at_open and self._recovery_point.value != self._end_offset)):
            return None
        ops = self._ops
        self._ops = []
        for op in ops:
            if op.kind == CREATE:
                op.segment.create_queued = False
        self._job = SegmentFlushJob(
            ops, self._dir_fd, self._end_offset, self.faults, self._recovery_point,
            self._cut_to, self._recovery_point.due(self._end_offset), self._actions,
        )
        if self._write_through:
            self._job.sync_also(self._unsynced, self._unsynced_dir)
            self._unsynced = {}
            self._unsynced_dir = False
        self._cut_to = None
        self._actions = []
        self._job_min_end = self._end_offset
        return self._job

    def complete_flush(self, job: FlushJob) -> None:
        """Advance flushed_offset to what the job made durable and still is in the log. A job
        that failed poisons the log: the page cache can no longer be trusted (fsyncgate).
        A job refused for want of space stays pending (DiskFullError): run it again."""
        if job is not self._job or not isinstance(job, SegmentFlushJob):
            raise RuntimeError("complete_flush got a job this log did not begin")
        if job.error is not None and job.retryable:
            raise DiskFullError(f"{self._directory}: {job.error}") from job.error
        if job.error is not None:
            self._job = None
            self._failed = job.error
            raise RuntimeError("the flush job failed; the log cannot be trusted") from job.error
        if not job.done:
            raise RuntimeError("complete_flush before the job ran")
        self._job = None
        self._close_deferred()
        self._flushed = max(self._flushed, min(job.end_offset, self._job_min_end))
        if self._cache_held > self._cache_bytes:
            self._evict()
        actions, job.actions = job.actions, []
        for action in actions:
            action()

    def after_flush(self, action: Callable[[], None]) -> None:
        """Run `action` once everything queued so far (appends, truncations, a reset) is on
        disk: from `complete_flush` of the next job, which `begin_flush` starts for it even
        when nothing else is queued. A crash forgets it. `action` must not raise."""
        self._check_open()
        self._actions.append(action)

    def flush(self) -> None:
        """begin + run + complete in the calling thread. A job begun earlier and abandoned
        (say its task was cancelled at shutdown) is finished first, so nothing is lost."""
        pending = self._job
        if pending is not None:
            if pending.running:
                raise RuntimeError("a flush job is running in another thread")
            if not pending.done and (pending.error is None or pending.retryable):
                pending.run()
            self.complete_flush(pending)
        job = self.begin_flush()
        if job is not None:
            try:
                job.run()
            finally:
                self.complete_flush(job)

    @property
    def recovery_point(self) -> int | None:
        """The offset in the recovery-point checkpoint on disk (None: no readable file)."""
        return self._recovery_point.value

    def close(self) -> None:
        """Close every file. Does not flush: what was not flushed is lost, as in a crash. A
        log with nothing pending (the driver flushed it) first brings its recovery point up
        to date, so that the next start checks everything it wrote."""
        if self._closed:
            return
        if self._job is not None and self._job.running:
            raise RuntimeError("cannot close while a flush job is running")
        if (
            self._job is None and not self._ops and self._failed is None
            and not self._unsynced and not self._unsynced_dir
            and self._recovery_point.value != self._end_offset
        ):
            try:
                self._recovery_point.write(self._end_offset, durable=True)
            except OSError as exc:
                logger.warning("cannot update the recovery point in %s: %s", self._directory,
                               exc)
        self._close_fds()
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"SegmentedLog({self._directory!r}, start={self._start_offset}, "
            f"end={self._end_offset}, flushed={self._flushed}, segments={len(self._segments)})"
        )

