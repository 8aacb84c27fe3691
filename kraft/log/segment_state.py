"""The state a SegmentedLog's parts share (kraft/log/segmented.py).

`SegmentLogState` declares it; `SegmentedLog.__init__` sets it. Its subclasses are the parts:
recovery on open (kraft/log/segment_recovery.py), the reads and the read cache
(kraft/log/segment_reads.py), the queue of file operations (kraft/log/segment_ops.py), and
`SegmentedLog` itself (appends, truncation, group commit), which inherits all of them. Each
part declares the state only it and `SegmentedLog` use.
"""

from __future__ import annotations

import errno

from kraft.log.batch_format import KRAFT_FORMAT, BatchFormat
from kraft.log.epoch_cache import EpochCache
from kraft.log.segment_files import Segment


class SegmentLogState:
    """The segments, offsets and modes every part of the log reads."""

    _directory: str
    _dir_fd: int  # the directory, open for fsync
    _format: BatchFormat
    _write_through: bool  # file changes performed at once (kraft/log/segmented.py)
    _synced_at_open: bool  # the caller made the files durable before the open
    _segments: list[Segment]
    _segment_bases: list[int]  # each segment's base offset, for bisects
    _epoch_cache: EpochCache
    _start_offset: int
    _end_offset: int
    _flushed: int  # flushed_offset
    _failed: BaseException | None  # a failed flush job or write-through write poisons the log
    _closed: bool

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
