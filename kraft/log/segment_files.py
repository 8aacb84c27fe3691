"""The segment files of a SegmentedLog (kraft/log/segmented.py, docs/log-format.md): their
names, the in-memory index of one file, the file operations a log queues for its flush jobs,
the faults tests inject into those jobs, and the vectored write both modes use."""

from __future__ import annotations

import os
import re
from array import array
from dataclasses import dataclass
from typing import NamedTuple

DEFAULT_SEGMENT_BYTES = 1 << 30
_NAME = re.compile(r"(\d{20})\.log")
try:
    _IOV_MAX = max(16, os.sysconf("SC_IOV_MAX"))
except (ValueError, OSError):
    _IOV_MAX = 1024

# The kinds of queued file operation (FileOp.kind).
CREATE, DELETE, TRUNCATE, WRITE = range(4)


class DiskFullError(OSError):
    """A flush job could not write for want of space; nothing is lost and nothing counted as
    flushed. Run the same job again once space returns."""


def segment_path(directory: str, base_offset: int) -> str:
    """Path of the segment whose first batch starts at `base_offset`."""
    return os.path.join(directory, f"{base_offset:020d}.log")


def list_segments(
    directory: str | os.PathLike[str], names: list[str] | None = None
) -> list[tuple[int, str]]:
    """(base_offset, path) of every segment file in `directory` (or among `names`, its
    listing when the caller has it), oldest first."""
    directory = os.fspath(directory)
    found = []
    for name in os.listdir(directory) if names is None else names:
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


class Segment:
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


class FileOp:
    """A queued file operation: CREATE, DELETE, TRUNCATE (to `position`) or WRITE (`buffers`
    at `position`, `size` bytes in all)."""

    __slots__ = ("buffers", "kind", "position", "segment", "size")

    def __init__(
        self, kind: int, segment: Segment, position: int = 0, buffers: list[bytes] | None = None,
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
