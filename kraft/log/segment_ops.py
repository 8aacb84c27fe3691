"""The file operations of a SegmentedLog (kraft/log/segmented.py): what a roll, a truncation
or a deletion queues for the next flush job (kraft/log/segment_flush.py), and write-through
mode, which performs the queue at once on the caller's thread, without fsync, and leaves the
job only the syncs. Also the segments' descriptors, which a job in flight may still use.
"""

from __future__ import annotations

import errno
import os

from kraft.log.segment_files import (
    CREATE,
    DELETE,
    TRUNCATE,
    WRITE,
    FileOp,
    LogFaults,
    Segment,
    segment_path,
    write_buffers,
)
from kraft.log.segment_flush import RecoveryPoint, SegmentFlushJob
from kraft.log.segment_state import SegmentLogState


class SegmentFileOps(SegmentLogState):
    """SegmentedLog's queue of file operations and the descriptors of its segments."""

    _ops: list[FileOp]  # for the next flush job, in order
    _cut_to: int | None  # lowest offset the queued operations cut the log to
    _job: SegmentFlushJob | None  # the job begun and not yet completed
    _recovery_point: RecoveryPoint
    # Write-through bookkeeping: files changed since the last job began, and descriptors
    # of deleted segments a job in flight may still sync (closed when it completes).
    _unsynced: dict[int, None]
    _unsynced_dir: bool
    _deferred_close: list[int]
    faults: LogFaults

    def _roll(self, base: int) -> Segment:
        segment = Segment(base, segment_path(self._directory, base), None)
        segment.create_queued = True
        self._ops.append(FileOp(CREATE, segment))
        self._segments.append(segment)
        self._segment_bases.append(base)
        return segment

    def _note_cut(self, offset: int) -> None:
        """The next job cuts the log to `offset`: it lowers the recovery point first. A
        write-through log cuts its files at once, so it lowers the recovery point now (and
        stops a job in flight from raising it past the cut)."""
        if not self._write_through:
            self._cut_to = offset if self._cut_to is None else min(self._cut_to, offset)
            return
        recovery_point = self._recovery_point
        with recovery_point.lock:
            if self._job is not None:
                self._job.cap_recovery_point(offset)
            recovery_point.lower(offset)

    def _apply_now(self) -> None:
        """Write-through: perform the queued file operations on this thread, without fsync;
        the next flush job syncs what they touched."""
        if not self._write_through or not self._ops:
            return
        ops = self._ops
        self._ops = []
        try:
            for op in ops:
                self._perform_now(op)
        except OSError as exc:
            # The view already holds what the files lack: nothing written since may be trusted
            # (Kafka takes the log directory offline for the same reason).
            self._failed = exc
            raise

    def _perform_now(self, op: FileOp) -> None:
        segment = op.segment
        if op.kind == WRITE:
            assert segment.fd is not None, segment.path
            if self.faults.disk_full:
                raise OSError(errno.ENOSPC, "No space left on device (injected fault)")
            write_buffers(segment.fd, op.buffers, op.position)
            self._unsynced[segment.fd] = None
        elif op.kind == TRUNCATE:
            assert segment.fd is not None, segment.path
            os.ftruncate(segment.fd, op.position)
            self._unsynced[segment.fd] = None
        elif op.kind == DELETE:
            if segment.fd is not None:
                self._unsynced.pop(segment.fd, None)
                if self._job is not None:  # the job may be syncing it right now
                    self._deferred_close.append(segment.fd)
                else:
                    os.close(segment.fd)
                segment.fd = None
            os.unlink(segment.path)
            self._unsynced_dir = True
        else:
            segment.fd = os.open(
                segment.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644
            )
            segment.create_queued = False
            self._unsynced_dir = True

    def _drop_segment(self, segment: Segment) -> None:
        # Its queued writes are pointless; a file not yet created needs no DELETE either.
        self._ops = [op for op in self._ops if op.segment is not segment]
        if not segment.create_queued:
            self._ops.append(FileOp(DELETE, segment))

    def _truncate_segment(self, segment: Segment, batch: int) -> None:
        position = segment.positions[batch]
        # Trim queued writes first; only bytes that reach the file need an ftruncate.
        covered = segment.size
        ops = self._ops
        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if op.segment is not segment:
                continue
            if op.kind != WRITE or op.position + op.size != covered:
                break
            if op.position >= position:
                del ops[i]
                covered = op.position
                continue
            kept = op.position
            for count, buffer in enumerate(op.buffers):
                if kept == position:
                    del op.buffers[count:]
                    break
                kept += len(buffer)
            op.size = position - op.position
            covered = position
            break
        if covered > position:
            ops.append(FileOp(TRUNCATE, segment, position))
        del segment.bases[batch:]
        del segment.positions[batch:]
        segment.size = position

    def _close_deferred(self) -> None:
        for fd in self._deferred_close:
            os.close(fd)
        self._deferred_close = []

    def _close_fds(self) -> None:
        self._close_deferred()
        queued = self._ops + (self._job.ops if self._job is not None else [])
        doomed = [op.segment for op in queued if op.kind == DELETE]
        for segment in [*self._segments, *doomed]:
            if segment.fd is not None:
                os.close(segment.fd)
                segment.fd = None
        self._ops = []
        os.close(self._dir_fd)
