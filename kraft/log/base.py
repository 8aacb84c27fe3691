"""The contract between the Raft core and a replicated log.

The core reads and appends through this interface but never waits on a disk: appends land in
memory at once and become durable only when the driver runs a flush job (group commit). The
core learns of durability through `flushed_offset`; it never ships or counts what is not flushed.

Offsets are record offsets. A batch holds one or more records with consecutive offsets, all
written in one leader epoch; batches are the unit of CRC, of shipping and of truncation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol


class CorruptRecordError(Exception):
    """Bytes that do not decode as valid batches. `position` is the byte offset of the bad batch
    within the buffer or file named by `path` (None for an in-memory buffer)."""

    def __init__(self, reason: str, position: int, path: str | None = None) -> None:
        self.reason = reason
        self.position = position
        self.path = path
        where = f"{path} at byte {position}" if path else f"byte {position}"
        super().__init__(f"corrupt record batch in {where}: {reason}")


class LogAppendError(Exception):
    """An append that would break the log's invariants (a gap, an overlap, a lower epoch)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One decoded record batch."""

    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    first_timestamp_ms: int
    max_timestamp_ms: int
    control: bool
    crc: int
    size_in_bytes: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """Ordered by epoch first, then offset (Kafka's OffsetAndEpoch.compareTo)."""

    offset: int
    epoch: int

    def key(self) -> tuple[int, int]:
        return (self.epoch, self.offset)


class ReplicatedLog(Protocol):
    """What the Raft core needs from a log. Implementations: `SegmentedLog` (files) and
    `MemoryLog` (the simulator's, which loses unflushed data on a crash)."""

    @property
    def start_offset(self) -> int:
        """First offset held by the log (0 until snapshots truncate the prefix)."""

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): one past the last record, flushed or not."""

    @property
    def flushed_offset(self) -> int:
        """One past the last record that is durable and still part of the log."""

    @property
    def last_epoch(self) -> int:
        """Epoch of the last batch (0 for an empty log)."""

    def append_as_leader(
        self, records: Sequence[bytes], epoch: int, timestamp_ms: int, control: bool = False
    ) -> int:
        """Append one batch at `end_offset`; return its base offset. `epoch` must be ≥ the
        last epoch. Raises LogAppendError otherwise, ValueError for an empty `records`."""

    def append_as_follower(self, data: bytes) -> int:
        """Append encoded batches exactly as the leader shipped them; return how many records
        were appended. The first batch must start at `end_offset`, offsets must be contiguous
        and epochs non-decreasing and ≥ `last_epoch`. Raises CorruptRecordError for bad bytes
        and LogAppendError for a gap, overlap or lower epoch; on error nothing is appended."""

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above `offset` (a batch boundary, ≥ start_offset; a no-op
        when offset ≥ end_offset). Raises ValueError when `offset` is inside a batch."""

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch E' ≤ `epoch` present in the log and the end offset of E' (the base
        offset of the first batch of a later epoch, or `end_offset`). For an epoch older than
        every batch (or an empty log): OffsetAndEpoch(start_offset, start_epoch)."""

    @property
    def start_epoch(self) -> int:
        """Epoch of the snapshot the log starts from (0 when it starts at offset 0)."""

    def advance_start(self, offset: int, epoch: int) -> None:
        """Drop the prefix below `offset`, which a snapshot (offset, epoch) now covers: records
        below it are no longer read, and whole segments below it are deleted in the next flush
        job. `offset` must be a batch boundary in [start_offset, flushed_offset]."""

    def reset_to(self, offset: int, epoch: int) -> None:
        """Drop every record and restart the log empty at `offset`, after a snapshot
        (offset, epoch) that replaces it (a follower that loaded the leader's snapshot). The
        snapshot is durable, so `flushed_offset` becomes `offset` at once; the files follow
        in the next flush job (`after_flush` says when)."""

    def after_flush(self, action: Callable[[], None]) -> None:
        """Run `action` once everything appended, truncated or reset so far is on disk: from
        the driver's `complete_flush` of the next flush job, which `begin_flush` starts for
        it even when nothing else is queued. A crash forgets it. `action` must not raise.
        The core uses it to ask for the deletion of what a reset replaced (a DeleteSnapshots
        job, kraft/log/snapshot_jobs.py) only once the reset is durable, and so stays free of
        I/O itself."""

    @property
    def size_in_bytes(self) -> int:
        """Bytes of batches held from start_offset's segment on (for retention)."""

    def read(self, offset: int, max_bytes: int, max_offset: int) -> bytes:
        """Encoded batches starting with the batch that contains `offset`, stopping before
        `max_offset` (a batch boundary) and after `max_bytes`, but always at least one whole
        batch when any exists below `max_offset`. Returns b"" when there is nothing."""

    def batches(self, start: int, end: int) -> Iterator[Batch]:
        """Decoded batches covering offsets [start, end), from the batch containing `start`."""


class FlushJob(Protocol):
    """The blocking half of a group commit: write what was appended and fdatasync it."""

    def run(self) -> None:
        """Do the I/O. Safe to call from a worker thread while the event loop keeps appending."""


class DurableLog(ReplicatedLog, Protocol):
    """What a driver needs on top of the core's view: group commit and shutdown.

    One flush at a time: `begin_flush` (event loop) takes everything appended or truncated since
    the last job, `job.run()` (any thread) performs it, `complete_flush` (event loop) advances
    `flushed_offset`. Appends and truncations may continue while a job runs; they go into the
    next job, in order.
    """

    def begin_flush(self) -> FlushJob | None:
        """None when there is nothing to write."""

    def complete_flush(self, job: FlushJob) -> None: ...

    def flush(self) -> None:
        """begin + run + complete in the calling thread (tools, tests, shutdown)."""

    def close(self) -> None: ...


# -- snapshots ---------------------------------------------------------------------------------
# The file formats and the two stores are in kraft/log/snapshots.py; the jobs that carry out
# the core's snapshot I/O off the event loop are in kraft/log/snapshot_jobs.py.


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """What verification learns about a snapshot file."""

    snapshot_id: OffsetAndEpoch | None  # from the file name; None when it names none
    size: int
    batches: int
    records: int  # data records, header and footer excluded
    last_contained_timestamp_ms: int
    # The control batch after the header, when there is one (KIP-853's KRaftVersion and
    # Voters records), decoded as (type, body) pairs.
    control_records: tuple[tuple[int, dict[str, object]], ...] = ()


class PartialSnapshot(Protocol):
    """A snapshot being written: bytes appended in order, then frozen (verified, durable,
    visible) or aborted (gone). Creating one touches no file (the first `write` does), so the
    core may create one on the event loop; every other method does I/O."""

    snapshot_id: OffsetAndEpoch

    @property
    def size(self) -> int: ...

    def write(self, data: bytes) -> None: ...

    def freeze(self) -> SnapshotInfo:
        """Raises CorruptRecordError (and removes the partial file) when the bytes are not a
        whole, valid snapshot."""

    def abort(self) -> None: ...


class SnapshotWriter(Protocol):
    """A state machine's snapshot being written record by record (blocking I/O)."""

    snapshot_id: OffsetAndEpoch

    def append(self, records: Sequence[bytes]) -> None: ...

    def append_all(self, records: Sequence[bytes], per_batch: int = ...) -> None: ...

    def freeze(self) -> SnapshotInfo: ...

    def abort(self) -> None: ...


class SnapshotStore(Protocol):
    """What the Raft core and driver need: ids, sizes, chunks, transfers, deletion.

    The index (`ids`, `latest_id`, `earliest_id`, `size`, `last_contained_timestamp`,
    `total_bytes`) and `begin_transfer` are memory only: the core calls them. `read_chunk`,
    `read_all`, `delete` and a partial's `write`/`freeze`/`abort` do file I/O: the core never
    calls them itself but hands them to the driver as `SnapshotJob`s."""

    def ids(self) -> list[OffsetAndEpoch]:
        """Frozen snapshots, oldest first."""

    def latest_id(self) -> OffsetAndEpoch | None: ...

    def earliest_id(self) -> OffsetAndEpoch | None: ...

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        """Bytes of a frozen snapshot; KeyError when there is none."""

    def read_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        """Bytes [position, position + max_bytes) of a frozen snapshot; KeyError if absent."""

    def read_all(self, snapshot_id: OffsetAndEpoch) -> bytes: ...

    def begin_transfer(self, snapshot_id: OffsetAndEpoch) -> PartialSnapshot: ...

    def builder(
        self, snapshot_id: OffsetAndEpoch, last_contained_timestamp_ms: int,
        control_records: Sequence[bytes] = (),
    ) -> SnapshotWriter:
        """`control_records` (the voter set's, kraft/core/voters.py) go in one control batch
        right after the header."""

    def delete(self, snapshot_id: OffsetAndEpoch) -> None: ...

    def last_contained_timestamp(self, snapshot_id: OffsetAndEpoch) -> int: ...

    def total_bytes(self) -> int: ...


class SnapshotJob(Protocol):
    """Snapshot file I/O the core asks for in `Output.snapshot_jobs` (as a log flush is a
    `FlushJob`): the driver calls `run()` off the event loop and then hands the job back with
    `RaftCore.on_snapshot_job_done(job, now)`. Jobs with `ordered` set (a follower's install:
    chunk writes, freeze, abort, deletions) must run one at a time in the order they were
    asked for; the others (chunk reads a leader serves) may run at any time. `run` never
    raises for an expected failure (a full disk, a snapshot deleted meanwhile): the job
    records it for the core to act on."""

    ordered: bool

    def run(self) -> None: ...
