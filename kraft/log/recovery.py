"""The recovery point: how far the log's files are known to be durable, and what recovery on
open may therefore cut (docs/log-format.md, "Recovery on open").

A power loss can leave anything in the bytes a flush job wrote but had not yet fdatasynced:
pages written back out of order (a zeroed page followed by written ones), a page torn at a
sector boundary, garbage in blocks whose data never arrived. None of it was acknowledged. So
the log keeps a checkpoint, `recovery-point-offset-checkpoint` (Kafka's name for the same
idea), holding an offset below which every record was durable when it was written. Recovery
cuts damage at or past that offset as a torn tail and refuses damage before it.

The checkpoint may lag behind the durable end (it is written lazily): a stale recovery point
is safe, because what a power loss damages always lies past the true durable end, which is at
or past any recovery point ever written. It must never run ahead: it is raised only after the
fdatasync that made the records durable, and lowered, durably, before a truncation or a reset
cuts the files below it (`SegmentFlushJob`).

`damage_is_torn_tail` is the one decision both logs use: `SegmentedLog` when it opens its
files, `MemoryLog.reopen` when the simulator models a power loss.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from kraft.log._common import read_file
from kraft.log.codec import ByteSource, is_torn_tail

logger = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
_TMP_SUFFIX = ".tmp"
_VERSION = "0"


def damage_is_torn_tail(
    data: ByteSource,
    position: int,
    next_offset: int,
    recovery_point: int | None,
    last_segment: bool,
    looks_torn: Callable[[ByteSource, int], bool] = is_torn_tail,
    rolls_unsynced: bool = False,
) -> bool:
    """Whether a bad frame at byte `position` of `data` (a segment's bytes) is a torn tail to
    cut (True) or damage to refuse (False). `next_offset` is where the valid batches before
    the bad frame end.

    * Only the last segment can hold a torn tail: a flush job fdatasyncs a segment before it
      creates the next one, so damage in an earlier segment is damage to durable data.
    * With a recovery point, damage at or past it (`next_offset >= recovery_point`) lies in
      bytes that were never known durable: cut, whatever it looks like (a zeroed frame
      followed by written bytes, a bad CRC, garbage). Damage before it is refused.
    * Without one (no checkpoint file: the first start after an upgrade, or an unreadable
      one), only damage that looks like an interrupted write is cut: a frame that runs past
      the end of the file, the last frame, or a frame followed by nothing but zeros
      (`looks_torn`, the batch format's test).
    * `rolls_unsynced` (a write-through log, whose old segment is synced after the roll, not
      before it, as Kafka does): damage past the recovery point may lie in any segment; the
      caller cuts there and deletes every later segment.
    """
    if not last_segment:
        return rolls_unsynced and recovery_point is not None and next_offset >= recovery_point
    if recovery_point is not None:
        return next_offset >= recovery_point
    return looks_torn(data, position)


def recovery_point_path(directory: str) -> str:
    return os.path.join(directory, RECOVERY_POINT_FILE)


def read_recovery_point(directory: str) -> int | None:
    """The offset in the directory's checkpoint; None when there is none or it is unreadable
    (logged as one warning line): recovery then falls back to the rules without one, which
    refuse more and cut less, never the other way round."""
    path = recovery_point_path(directory)
    try:
        raw = read_file(path, 256)
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read the recovery point %s (%s): recovering by the rules "
                       "without one", path, exc)
        return None
    value = parse_recovery_point(raw)
    if value is None:
        logger.warning(
            "the recovery point %s is damaged (%r): recovering by the rules without one "
            "(a torn tail only at the end of the last segment); it is rewritten after recovery",
            path, raw[:40],
        )
    return value


def parse_recovery_point(raw: bytes) -> int | None:
    """`b"0\\n<offset>\\n"` (format version 0, then the offset in decimal) -> the offset."""
    try:
        lines = raw.decode("ascii").split("\n")
    except UnicodeDecodeError:
        return None
    if len(lines) != 3 or lines[0] != _VERSION or lines[2] != "" or not lines[1].isdigit():
        return None
    return int(lines[1])


def write_recovery_point(
    directory: str, dir_fd: int, offset: int, durable: bool, sync: bool = True
) -> None:
    """Replace the checkpoint atomically: write a temporary file, fdatasync it, rename it over
    the old one. With `durable` the directory is fsynced too, so the new value survives a power
    loss; without it (a raise, where an older value is still safe) a power loss may leave the
    old value, never a damaged file. Without `sync` the caller has made the log durable and
    syncs the whole filesystem next (a broker's clean shutdown, thousands of logs at once), so
    the file is overwritten in place: a rename over it is a journaled metadata update (1.5 ms
    here), a write of a few bytes in its one sector is not; until that sync a power loss
    leaves the old value or the new one, both durable, or a file that does not parse (a size
    change not yet committed), which `read_recovery_point` treats as none."""
    path = recovery_point_path(directory)
    data = f"{_VERSION}\n{offset}\n".encode()
    if not sync:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if os.pwrite(fd, data, 0) != len(data):
                raise OSError(f"short write to {path}")
            if os.fstat(fd).st_size > len(data):
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        return
    tmp = path + _TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        if os.write(fd, data) != len(data):
            raise OSError(f"short write to {tmp}")
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        os.fsync(dir_fd)
