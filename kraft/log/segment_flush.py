"""The flush job of a SegmentedLog (kraft/log/segmented.py): the worker-thread side of group
commit, and the recovery-point checkpoint file it raises (kraft/log/recovery.py).

`SegmentedLog.begin_flush` hands a job the file operations queued since the last one; `run`
performs them in any thread with one fdatasync per touched file, and `complete_flush` (back on
the event loop) advances `flushed_offset`. A running job only touches file bytes at or above
what was flushed when its operations were queued, so the log keeps serving those bytes from its
read cache (kraft/log/segment_reads.py) while the job writes them.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable

from kraft.log.recovery import write_recovery_point
from kraft.log.segment_files import DELETE, TRUNCATE, WRITE, FileOp, LogFaults, write_buffers

# The log's own name: its warnings read as they did before the log was split into modules.
logger = logging.getLogger("kraft.log.segmented")

# How often a flush job may raise the recovery point: an atomic file replace with its own
# fdatasync, which in every job took the single-writer commit p50 from 1.0 to ~2.5 ms here
# (docs/log-format.md). Lowering it before a cut never waits. See kraft/log/recovery.py.
DEFAULT_RECOVERY_POINT_INTERVAL_MS = 1000

# A write refused for want of space changed nothing that a retry would not redo: positional
# writes are idempotent. Any failed fsync, by contrast, poisons the log (fsyncgate).
_RETRYABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class RecoveryPoint:
    """The log's recovery-point checkpoint file and the value it holds on disk. Only the open
    path, the flush job (one at a time) and close write it, never two at once."""

    __slots__ = ("dir_fd", "directory", "interval_s", "lock", "value", "warned", "writes",
                 "written_at")

    def __init__(self, directory: str, dir_fd: int, interval_ms: int) -> None:
        # A write-through log lowers the checkpoint on the caller's thread while a job may be
        # raising it in a worker: the lock orders the two.
        self.lock = threading.Lock()
        self.directory = directory
        self.dir_fd = dir_fd
        self.interval_s = interval_ms / 1000
        self.value: int | None = None  # None: no readable file (recovery's strict rules)
        self.written_at = time.monotonic()
        self.writes = 0
        self.warned = False

    def due(self, end_offset: int) -> bool:
        """Whether a job ending at `end_offset` should raise the checkpoint to it."""
        return end_offset != self.value and (
            self.interval_s <= 0 or time.monotonic() - self.written_at >= self.interval_s
        )

    def write(self, offset: int, durable: bool, sync: bool = True) -> None:
        write_recovery_point(self.directory, self.dir_fd, offset, durable, sync)
        self.value = offset
        self.written_at = time.monotonic()
        self.writes += 1

    def lower(self, offset: int) -> None:
        """Before the files are cut below the checkpoint: make it `offset`, durably."""
        if self.value is not None and offset < self.value:
            self.write(offset, durable=True)

    def raise_to(self, offset: int, sync: bool = True) -> None:
        """After a barrier made everything below `offset` durable. A failure only leaves an
        older value, which is safe: logged once, retried by later jobs."""
        try:
            self.write(offset, durable=False, sync=sync)
        except OSError as exc:
            if not self.warned:
                self.warned = True
                logger.warning("cannot update the recovery point in %s (%s); it stays at %s",
                               self.directory, exc, self.value)


class SegmentFlushJob:
    """The queued operations of one group commit; `run` performs them in any thread. A run
    that fails because the disk is full (`retryable`) may be run again: it resumes at the
    operation that failed and still syncs everything the job touched."""

    __slots__ = ("_cap", "_cut_to", "_dir_dirty", "_dir_fd", "_dirty", "_done_ops", "_faults",
                 "_fsync_failed", "_raise_recovery_point", "_recovery_point", "_truncated",
                 "actions", "bytes_written", "done", "end_offset", "error", "ops", "retryable",
                 "running", "syncs")

    def __init__(
        self, ops: list[FileOp], dir_fd: int, end_offset: int, faults: LogFaults | None = None,
        recovery_point: RecoveryPoint | None = None, cut_to: int | None = None,
        raise_recovery_point: bool = False, actions: list[Callable[[], None]] | None = None,
    ) -> None:
        self.ops = ops  # in queue order; a log closed before the job ran closes their files
        self._dir_fd = dir_fd
        self._faults = faults or LogFaults()
        self._recovery_point = recovery_point
        self._cut_to = cut_to  # the lowest offset this job's truncations cut the log to
        self._raise_recovery_point = raise_recovery_point
        self.actions = actions if actions is not None else []  # run by complete_flush
        self.end_offset = end_offset
        self.done = False
        self.running = False
        self.error: BaseException | None = None
        self.retryable = False
        self.bytes_written = 0
        self.syncs = 0  # fdatasync + directory fsync calls
        self._done_ops = 0
        self._dirty: dict[int, None] = {}  # fds changed since the last barrier, in order
        self._truncated: set[int] = set()  # fds cut since the last barrier
        self._dir_dirty = False
        self._fsync_failed = False
        self._cap = end_offset  # a write-through truncation during the run lowers it

    def sync_also(self, fds: dict[int, None], directory: bool) -> None:
        """Files (and the directory) written through before the job began: its barrier
        fdatasyncs them (a write-through log's job has no operations of its own)."""
        self._dirty.update(fds)
        self._dir_dirty = self._dir_dirty or directory

    def cap_recovery_point(self, offset: int) -> None:
        """The log was cut to `offset` on the caller's thread while this job was in flight:
        never raise the recovery point past it. Call with the recovery point's lock held."""
        self._cap = min(self._cap, offset)

    def run(self) -> None:
        """Write, truncate, create and delete in queue order; then fdatasync each touched file
        once. A file is synced before a later segment is created, deletions reach the
        directory before the surviving files change, and a cut file is synced before it is
        written again, so a crash at any point leaves a prefix of some earlier state of the
        log, followed at most by a torn tail."""
        if self.done or self.running or (self.error is not None and not self.retryable):
            raise RuntimeError("a flush job runs once (again only after a full disk)")
        self.running = True
        self.error = None
        self.retryable = False
        try:
            self._run()
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.running = False
        self.done = True

    def run_synced(self) -> None:
        """`run` for a write-through log's job (no queued operations) whose files the caller
        made durable after `begin_flush` (a syncfs of their filesystem): nothing is
        fdatasynced, and the recovery point is raised by a rename whose file is not synced
        either, so the caller syncs the filesystem again before relying on it."""
        if self.ops or self._cut_to is not None or self.done or self.running:
            raise RuntimeError("only a fresh write-through job runs as synced")
        self._dirty.clear()
        self._truncated.clear()
        self._dir_dirty = False
        recovery_point = self._recovery_point
        if recovery_point is not None and self._raise_recovery_point:
            with recovery_point.lock:
                recovery_point.raise_to(min(self.end_offset, self._cap), sync=False)
        self.done = True

    def _run(self) -> None:
        recovery_point = self._recovery_point
        if recovery_point is not None and self._cut_to is not None:
            # Bytes below the checkpoint are about to be cut (and maybe written again without a
            # sync yet): the checkpoint comes down first, or a power loss would leave damage
            # "before the recovery point" that nobody acknowledged.
            try:
                recovery_point.lower(self._cut_to)
            except OSError as exc:
                self.retryable = exc.errno in _RETRYABLE_ERRNOS
                raise
        for index in range(self._done_ops, len(self.ops)):
            try:
                self._perform(self.ops[index])
            except OSError as exc:
                self.retryable = exc.errno in _RETRYABLE_ERRNOS and not self._fsync_failed
                raise
            self._done_ops = index + 1
        self._barrier()
        if recovery_point is not None and self._raise_recovery_point:
            with recovery_point.lock:
                recovery_point.raise_to(min(self.end_offset, self._cap))

    def _barrier(self) -> None:
        """fdatasync every file changed since the last barrier, then the directory if a file
        was created or deleted. A failed fsync is never retryable."""
        if self._faults.fsync_delay_s:
            time.sleep(self._faults.fsync_delay_s)
        try:
            for fd in self._dirty:
                os.fdatasync(fd)
                self.syncs += 1
            if self._dir_dirty:
                os.fsync(self._dir_fd)
                self.syncs += 1
        except OSError:
            self._fsync_failed = True
            raise
        self._dirty.clear()
        self._truncated.clear()
        self._dir_dirty = False

    def _perform(self, op: FileOp) -> None:
        segment = op.segment
        kind = op.kind
        if kind == WRITE:
            fd = segment.fd
            assert fd is not None, segment.path
            if self._dir_dirty or fd in self._truncated:
                # A cut reaches the disk before new bytes land where old ones were
                # (truncations are rare: leader changes only).
                self._barrier()
            if self._faults.disk_full:
                raise OSError(errno.ENOSPC, "No space left on device (injected fault)")
            self._write(fd, op.buffers, op.position)
            self._dirty[fd] = None
        elif kind == TRUNCATE:
            if self._dir_dirty:
                self._barrier()
            fd = segment.fd
            assert fd is not None, segment.path
            os.ftruncate(fd, op.position)
            self._dirty[fd] = None
            self._truncated.add(fd)
        elif kind == DELETE:
            if segment.fd is not None:
                self._dirty.pop(segment.fd, None)
                os.close(segment.fd)
                segment.fd = None
            os.unlink(segment.path)
            self._dir_dirty = True
        else:
            self._barrier()
            segment.fd = os.open(
                segment.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644
            )
            self._dir_dirty = True

    def _write(self, fd: int, buffers: list[bytes], position: int) -> None:
        self.bytes_written += write_buffers(fd, buffers, position)

