"""Recovery on open for a SegmentedLog (kraft/log/segmented.py; the rules are in
docs/log-format.md, "Recovery on open", and kraft/log/recovery.py).

Opening a log indexes every segment file from its batch headers, each CRC verified, and
fdatasyncs what a crashed process left in the page cache before counting it. Damage is cut as
a torn tail or refused with CorruptRecordError, as `damage_is_torn_tail` decides: only the
last segment can hold a torn tail, since a flush job syncs a segment before it creates the
next. A write-through log syncs an old segment after its roll, not before, so there damage
past the recovery point may lie in any segment: the log is cut there and every later segment
deleted.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from array import array

from kraft.log.base import CorruptRecordError
from kraft.log.codec import BatchHeader
from kraft.log.recovery import damage_is_torn_tail
from kraft.log.segment_files import Segment, list_segments
from kraft.log.segment_state import SegmentLogState

# The log's own name: its warnings read as they did before the log was split into modules.
logger = logging.getLogger("kraft.log.segmented")
# Segment files up to this size are read on open rather than mapped.
_READ_MAX = 1 << 16


class SegmentRecovery(SegmentLogState):
    """SegmentedLog's recovery on open: load every segment, cut or refuse damage."""

    def _load_segments(self, recovery_point: int | None, listing: list[str] | None) -> None:
        """Index the directory's segments (among `listing`, its names, when given) in order,
        deleting those past a cut."""
        entries = list_segments(self._directory, listing)
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
        segment = Segment(base, path, fd)
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
            # A small file is read: a map and unmap cost more than the copy (and a broker opens
            # thousands of small segments at start).
            with (contextlib.nullcontext(os.pread(fd, size, 0)) if size <= _READ_MAX
                  else mmap.mmap(fd, size, access=mmap.ACCESS_READ)) as mapped:
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
