"""The snapshot file I/O the Raft core asks the driver to do (`SnapshotJob`, kraft/log/base.py).

The core is sans-I/O: it decides what to read, write, freeze or delete, and puts one of these
jobs in its output. The driver runs `job.run()` off the event loop (a worker thread; the
simulator: an event after a small random delay) and hands the job back with
`RaftCore.on_snapshot_job_done`, where the core reads the result. A follower's install jobs are
`ordered` (one at a time, in order: the chunks of one file, then its freeze or abort); a
leader's chunk reads are not.

`run` records expected failures (OSError: a full or failing disk; KeyError: a snapshot that
retention deleted meanwhile) in `error` instead of raising.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kraft.log.base import (
    CorruptRecordError,
    OffsetAndEpoch,
    PartialSnapshot,
    SnapshotInfo,
    SnapshotStore,
)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class WriteChunk:
    """Append one fetched chunk to a partial snapshot (the first write creates the file)."""

    partial: PartialSnapshot
    data: bytes
    error: OSError | None = None
    ordered: bool = field(default=True, init=False)

    def run(self) -> None:
        try:
            self.partial.write(self.data)
        except OSError as exc:
            self.error = exc


@dataclass(eq=False)
class FreezeSnapshot:
    """Verify a fully fetched snapshot, fsync it, rename it into place and fsync the
    directory: from then on it is durable and in the store's index. On a CorruptRecordError
    the partial file is removed."""

    partial: PartialSnapshot
    info: SnapshotInfo | None = None
    error: CorruptRecordError | OSError | None = None
    ordered: bool = field(default=True, init=False)

    def run(self) -> None:
        try:
            self.info = self.partial.freeze()
        except (CorruptRecordError, OSError) as exc:
            self.error = exc
            if isinstance(exc, OSError):
                _quietly_abort(self.partial)


@dataclass(eq=False)
class AbortTransfer:
    """Drop a partial snapshot (its file, if the first write created one)."""

    partial: PartialSnapshot
    ordered: bool = field(default=True, init=False)

    def run(self) -> None:
        _quietly_abort(self.partial)


@dataclass(eq=False)
class DeleteSnapshots:
    """Delete snapshots a durable reset made stale, or a fetched one the core no longer needs.
    A failure is not fatal: stale snapshots below the log start are deleted again when the
    node next starts."""

    store: SnapshotStore
    ids: list[OffsetAndEpoch]
    ordered: bool = field(default=True, init=False)

    def run(self) -> None:
        for snapshot_id in self.ids:
            try:
                self.store.delete(snapshot_id)
            except OSError as exc:
                log.warning("could not delete the snapshot %d-%d: %s", snapshot_id.offset,
                            snapshot_id.epoch, exc)


@dataclass(eq=False)
class ReadChunk:
    """Read one chunk of a frozen snapshot for a FetchSnapshot the leader answers (`token`)."""

    store: SnapshotStore
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int
    token: int
    data: bytes | None = None
    error: Exception | None = None
    ordered: bool = field(default=False, init=False)

    def run(self) -> None:
        try:
            self.data = self.store.read_chunk(self.snapshot_id, self.position, self.max_bytes)
        except (KeyError, OSError) as exc:
            self.error = exc


def _quietly_abort(partial: PartialSnapshot) -> None:
    try:
        partial.abort()
    except OSError as exc:
        log.warning("could not remove the partial snapshot %s: %s", partial.snapshot_id, exc)
