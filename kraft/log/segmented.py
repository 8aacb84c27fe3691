"""SegmentedLog: the durable log on files, with group commit (docs/log-format.md).

Appends and truncations change the in-memory view at once and queue file operations; a flush
job performs the queue in order with one fdatasync per touched file. The event loop therefore
never waits on a disk, and the Raft core learns of durability through `flushed_offset`.

Three invariants keep reads and the worker thread apart:
* every batch below `flushed_offset` is on disk exactly as the log holds it, and a running job
  only touches file bytes at or above what was flushed when its operations were queued;
* the read cache is a suffix of the log that holds at least every unflushed batch, so data
  that is pending or in a running job is served from memory, never from a file being written;
* only batches below `flushed_offset` are evicted from the cache and read with os.pread.

The log is parameterized by a batch format (kraft/log/batch_format.py): the Raft log's own
batches by default, Kafka's record batches for a broker's partition logs. A partition log runs
in write-through mode, as Kafka's log does: every append, truncation and segment change is
performed on the files at once, on the caller's thread (a write into the page cache, no
fsync), and a flush job only fdatasyncs what changed since the previous job and raises the
recovery point. In that mode everything in the log is in its files, so the read cache is a
plain cache and recovery accepts a torn tail in any segment past the recovery point (an old
segment is synced after its roll, not before).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import re
import threading
import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kraft.log._common import check_follower_batches, fsync_dir, select_batches
from kraft.log.base import Batch, CorruptRecordError, FlushJob, LogAppendError, OffsetAndEpoch
from kraft.log.batch_format import KRAFT_FORMAT, BatchFormat, scan_all
from kraft.log.codec import BatchHeader, decode_batches, encode_batch
from kraft.log.epoch_cache import EpochCache
from kraft.log.recovery import (
    damage_is_torn_tail,
    read_recovery_point,
    write_recovery_point,
)

logger = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_CACHE_BYTES = 64 << 20
# How often a flush job may raise the recovery point: an atomic file replace with its own
# fdatasync, which in every job took the single-writer commit p50 from 1.0 to ~2.5 ms here
# (docs/log-format.md). Lowering it before a cut never waits. See kraft/log/recovery.py.
DEFAULT_RECOVERY_POINT_INTERVAL_MS = 1000
_READ_CHUNK = 1 << 20
_NAME = re.compile(r"(\d{20})\.log")
try:
    _IOV_MAX = max(16, os.sysconf("SC_IOV_MAX"))
except (ValueError, OSError):
    _IOV_MAX = 1024

_CREATE, _DELETE, _TRUNCATE, _WRITE = range(4)


class DiskFullError(OSError):
    """A flush job could not write for want of space; nothing is lost and nothing counted as
    flushed. Run the same job again once space returns."""


def segment_path(directory: str, base_offset: int) -> str:
    """Path of the segment whose first batch starts at `base_offset`."""
    return os.path.join(directory, f"{base_offset:020d}.log")


def list_segments(directory: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """(base_offset, path) of every segment file in `directory`, oldest first."""
    directory = os.fspath(directory)
    found = []
    for name in os.listdir(directory):
        match = _NAME.fullmatch(name)
        if match:
            found.append((int(match.group(1)), os.path.join(directory, name)))
    found.sort()
    return found


class SegmentView(NamedTuple):
    """A segment as callers see it: offsets [base_offset, end_offset), bytes in its file."""

    base_offset: int
    end_offset: int
    size: int
    path: str


class _Segment:
    """One file: batch base offsets and byte positions (array('q')), its logical size."""

    __slots__ = ("base_offset", "bases", "create_queued", "fd", "path", "positions", "size")

    def __init__(self, base_offset: int, path: str, fd: int | None) -> None:
        self.base_offset = base_offset
        self.path = path
        self.fd = fd  # None until a flush job creates the file
        self.bases = array("q")
        self.positions = array("q")
        self.size = 0
        self.create_queued = False  # its CREATE op is still in the pending queue


class _Op:
    """A queued file operation: CREATE, DELETE, TRUNCATE (to `position`) or WRITE (`buffers`
    at `position`, `size` bytes in all)."""

    __slots__ = ("buffers", "kind", "position", "segment", "size")

    def __init__(
        self, kind: int, segment: _Segment, position: int = 0, buffers: list[bytes] | None = None,
        size: int = 0,
    ) -> None:
        self.kind = kind
        self.segment = segment
        self.position = position
        self.buffers = buffers if buffers is not None else []
        self.size = size


@dataclass
class LogFaults:
    """Faults a test or the chaos tool injects into flush jobs: a full disk (writes fail with
    ENOSPC) and slow fsyncs."""

    disk_full: bool = False
    fsync_delay_s: float = 0.0


# A write refused for want of space changed nothing that a retry would not redo: positional
# writes are idempotent. Any failed fsync, by contrast, poisons the log (fsyncgate).
_RETRYABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class _RecoveryPoint:
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
                 "_fsync_failed", "_ops", "_raise_recovery_point", "_recovery_point",
                 "_truncated", "actions", "bytes_written", "done", "end_offset", "error",
                 "retryable", "running", "syncs")

    def __init__(
        self, ops: list[_Op], dir_fd: int, end_offset: int, faults: LogFaults | None = None,
        recovery_point: _RecoveryPoint | None = None, cut_to: int | None = None,
        raise_recovery_point: bool = False, actions: list[Callable[[], None]] | None = None,
    ) -> None:
        self._ops = ops
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
        if self._ops or self._cut_to is not None or self.done or self.running:
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
        for index in range(self._done_ops, len(self._ops)):
            try:
                self._perform(self._ops[index])
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

    def _perform(self, op: _Op) -> None:
        segment = op.segment
        kind = op.kind
        if kind == _WRITE:
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
        elif kind == _TRUNCATE:
            if self._dir_dirty:
                self._barrier()
            fd = segment.fd
            assert fd is not None, segment.path
            os.ftruncate(fd, op.position)
            self._dirty[fd] = None
            self._truncated.add(fd)
        elif kind == _DELETE:
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


def write_buffers(fd: int, buffers: list[bytes], position: int) -> int:
    """pwritev `buffers` at `position`, finishing short writes; return the bytes written."""
    total = 0
    for start in range(0, len(buffers), _IOV_MAX):
        chunk = buffers[start : start + _IOV_MAX]
        want = sum(map(len, chunk))
        done = os.pwritev(fd, chunk, position)
        if done < want:  # short write (rare on regular files): finish with pwrite
            rest = memoryview(b"".join(chunk))[done:]
            while rest:
                written = os.pwrite(fd, rest, position + done)
                rest = rest[written:]
                done += written
        position += want
        total += want
    return total


class SegmentedLog:
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
        kraft/log/recovery.py); the next flush job raises it."""
        if segment_bytes < 1 or cache_bytes < 0:
            raise ValueError("segment_bytes must be positive and cache_bytes not negative")
        if synced and not write_through:
            raise ValueError("only a write-through log may be opened as synced")
        self._synced_at_open = synced
        self._format = batch_format
        self._write_through = write_through
        # Write-through bookkeeping: files changed since the last job began, and descriptors
        # of deleted segments a job in flight may still sync (closed when it completes).
        self._unsynced: dict[int, None] = {}
        self._unsynced_dir = False
        self._deferred_close: list[int] = []
        self._directory = os.fspath(directory)
        self._segment_bytes = segment_bytes
        self._cache_bytes = cache_bytes
        self._segments: list[_Segment] = []
        self._segment_bases: list[int] = []
        self._epoch_cache = EpochCache()
        self._start_offset = 0
        self._start_epoch = 0
        self._end_offset = 0
        # Read cache: a suffix of the log from index _cache_head; positions are a running count.
        self._cache_bases: list[int] = []
        self._cache_positions: list[int] = []
        self._cache_blobs: list[bytes] = []
        self._cache_head = 0
        self._cache_end = 0
        self._cache_held = 0
        self._ops: list[_Op] = []
        self._cut_to: int | None = None  # lowest offset the queued operations cut the log to
        self._actions: list[Callable[[], None]] = []  # for the next job's complete_flush
        self._job: SegmentFlushJob | None = None
        self._job_min_end = 0
        self._failed: BaseException | None = None
        self._closed = False
        self.faults = LogFaults()  # injected by tests and the chaos tool only
        if not os.path.isdir(self._directory):
            os.makedirs(self._directory, exist_ok=True)
            fsync_dir(os.path.dirname(os.path.abspath(self._directory)))
        self._dir_fd = os.open(self._directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._recovery_point = _RecoveryPoint(
            self._directory, self._dir_fd, recovery_point_interval_ms
        )
        try:
            recovery_point = read_recovery_point(self._directory)
            entries = list_segments(self._directory)
            for index, (base, path) in enumerate(entries):
                last = index == len(entries) - 1
                if self._segments and base != self._end_offset and self._torn_past(
                    recovery_point
                ):
                    # A write-through log lost the end of an unsynced segment: what follows
                    # was never durable either.
                    self._delete_unsynced(entries[index:], recovery_point)
                    break
                if not self._load_segment(base, path, last, recovery_point):
                    self._delete_unsynced(entries[index + 1 :], recovery_point)
                    break
            # Every segment is synced now: all of it is durable, whatever the file said.
            self._recovery_point.value = recovery_point
            if recovery_point != self._end_offset and not synced:
                self._recovery_point.write(self._end_offset, durable=True)
        except BaseException:
            self._close_fds()
            raise
        self._flushed = self._end_offset

    # -- recovery --------------------------------------------------------------------------

    def _torn_past(self, recovery_point: int | None) -> bool:
        """Whether damage where the log now ends may be cut (write-through logs only)."""
        return (
            self._write_through and recovery_point is not None
            and self._end_offset >= recovery_point
        )

    def _delete_unsynced(self, entries: list[tuple[int, str]], recovery_point: int | None) -> None:
        for _, path in entries:
            os.unlink(path)
            logger.warning("deleted %s: it follows damage past the recovery point %s", path,
                           recovery_point)
        if entries:
            os.fsync(self._dir_fd)

    def _load_segment(self, base: int, path: str, last: bool, recovery_point: int | None) -> bool:
        """Index one segment file; False when its tail was cut before the last segment, so
        that every later segment goes."""
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        segment = _Segment(base, path, fd)
        self._segments.append(segment)  # now owned: closed by _close_fds on failure
        self._segment_bases.append(base)
        size = os.fstat(fd).st_size
        if len(self._segments) == 1:
            self._start_offset = self._end_offset = base
        elif base != self._end_offset:
            raise CorruptRecordError(
                f"segment starts at offset {base} but the log before it ends at "
                f"{self._end_offset}",
                0,
                path,
            )
        error: CorruptRecordError | None = None
        torn = False
        headers: list[BatchHeader] = []
        stop = 0
        if size:
            with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped:
                headers, stop, error = self._format.scan_prefix(mapped, path)
                if error is not None:
                    reached = headers[-1].next_offset if headers else base
                    torn = damage_is_torn_tail(
                        mapped, stop, reached, recovery_point, last, self._format.is_torn_tail,
                        self._write_through,
                    )
        expected = base
        epoch = self._epoch_cache.last_epoch
        for index, header in enumerate(headers):
            problem = None
            if header.base_offset != expected:
                problem = f"batch starts at offset {header.base_offset}, expected {expected}"
            elif header.epoch < epoch:
                problem = f"batch epoch {header.epoch} is below the previous epoch {epoch}"
            if problem is not None:
                if not (self._write_through and recovery_point is not None
                        and expected >= recovery_point):
                    raise CorruptRecordError(problem, header.position, path)
                # Write-through: an old batch where a truncation cut the file before a power
                # loss undid the cut; past the recovery point, so cut like a torn tail.
                error = CorruptRecordError(problem, header.position, path)
                stop = header.position
                torn = True
                del headers[index:]
                break
            epoch = header.epoch
            expected = header.next_offset
            self._epoch_cache.assign(epoch, header.base_offset)
        if error is not None:
            if not torn:
                if last and recovery_point is not None:
                    raise CorruptRecordError(
                        f"{error.reason}; the records from offset {expected} up to the "
                        f"recovery point {recovery_point} were durable", error.position, path,
                    )
                raise error
            os.ftruncate(fd, stop)
            os.fsync(fd)
            logger.warning(
                "cut the torn tail of %s at byte %d (%d bytes dropped, offsets from %d on; "
                "recovery point %s): %s",
                path, stop, size - stop, expected,
                "none" if recovery_point is None else recovery_point, error.reason,
            )
            size = stop
        cut_before_last = error is not None and not last
        if not headers and not last and not cut_before_last:
            if not self._torn_past(recovery_point):
                raise CorruptRecordError("empty segment before the last one", 0, path)
            cut_before_last = True  # a write-through roll whose data never reached the disk
        # What a crashed process left in the page cache is made durable before we count it.
        if not self._synced_at_open:
            os.fdatasync(fd)
        segment.bases = array("q", [h.base_offset for h in headers])
        segment.positions = array("q", [h.position for h in headers])
        segment.size = size
        self._end_offset = expected
        return not cut_before_last

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
        if ops and (op := ops[-1]).segment is segment and op.kind == _WRITE:
            op.buffers.append(blob)
            op.size += size
        else:
            ops.append(_Op(_WRITE, segment, position, [blob], size))
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

    def _roll(self, base: int) -> _Segment:
        segment = _Segment(base, segment_path(self._directory, base), None)
        segment.create_queued = True
        self._ops.append(_Op(_CREATE, segment))
        self._segments.append(segment)
        self._segment_bases.append(base)
        return segment

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

    def _perform_now(self, op: _Op) -> None:
        segment = op.segment
        if op.kind == _WRITE:
            assert segment.fd is not None, segment.path
            if self.faults.disk_full:
                raise OSError(errno.ENOSPC, "No space left on device (injected fault)")
            write_buffers(segment.fd, op.buffers, op.position)
            self._unsynced[segment.fd] = None
        elif op.kind == _TRUNCATE:
            assert segment.fd is not None, segment.path
            os.ftruncate(segment.fd, op.position)
            self._unsynced[segment.fd] = None
        elif op.kind == _DELETE:
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

    def _drop_segment(self, segment: _Segment) -> None:
        # Its queued writes are pointless; a file not yet created needs no DELETE either.
        self._ops = [op for op in self._ops if op.segment is not segment]
        if not segment.create_queued:
            self._ops.append(_Op(_DELETE, segment))

    def _truncate_segment(self, segment: _Segment, batch: int) -> None:
        position = segment.positions[batch]
        # Trim queued writes first; only bytes that reach the file need an ftruncate.
        covered = segment.size
        ops = self._ops
        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if op.segment is not segment:
                continue
            if op.kind != _WRITE or op.position + op.size != covered:
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
            ops.append(_Op(_TRUNCATE, segment, position))
        del segment.bases[batch:]
        del segment.positions[batch:]
        segment.size = position

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
        self._cache_bases = []
        self._cache_positions = []
        self._cache_blobs = []
        self._cache_head = self._cache_end = self._cache_held = 0
        self._apply_now()

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
    def _pread(segment: _Segment, position: int, length: int) -> bytes:
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
            if op.kind == _CREATE:
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

    def _close_deferred(self) -> None:
        for fd in self._deferred_close:
            os.close(fd)
        self._deferred_close = []

    def _close_fds(self) -> None:
        self._close_deferred()
        queued = self._ops + (self._job._ops if self._job is not None else [])
        doomed = [op.segment for op in queued if op.kind == _DELETE]
        for segment in [*self._segments, *doomed]:
            if segment.fd is not None:
                os.close(segment.fd)
                segment.fd = None
        self._ops = []
        os.close(self._dir_fd)

    def _check_kraft_format(self) -> None:
        if self._format is not KRAFT_FORMAT:
            raise TypeError(f"a log of {self._format.name} batches is appended to and read as "
                            "encoded batches only")

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"the log in {self._directory} is closed")
        if self._write_through and self._failed is not None:
            # An OSError, as the failed write was: callers map both to a storage error.
            raise OSError(errno.EIO, f"a write to the log in {self._directory} failed; it "
                          "cannot be trusted") from self._failed

    def __repr__(self) -> str:
        return (
            f"SegmentedLog({self._directory!r}, start={self._start_offset}, "
            f"end={self._end_offset}, flushed={self._flushed}, segments={len(self._segments)})"
        )

