"""Snapshot files: naming, writing, verifying, reading, and the store the Raft layer uses.

A snapshot `(end_offset, epoch)` holds the state as of every record below `end_offset`; `epoch`
is the epoch of the last record it covers. The file `%020d-%010d.checkpoint` is a sequence of
ordinary batches (kraft/log/codec.py), all written with the snapshot's epoch and numbered from
offset 0: a control batch with one SNAPSHOT_HEADER record, the state's records in data
batches, and a control batch with one SNAPSHOT_FOOTER record (docs/log-format.md).

Files are written as `<name>.checkpoint.part`, verified, fsynced, made read-only and renamed, so
a `.checkpoint` file is always whole. Two writers: `SnapshotBuilder` for a state machine that
writes records, `PartialSnapshot` for a follower receiving the leader's bytes by FetchSnapshot.

The store's Protocol (`SnapshotStore`, `PartialSnapshot`) lives with the log's other
protocols in kraft/log/base.py; what needs no file (the id of the empty state, the check of a
whole snapshot's bytes, `SnapshotBuilder`) in kraft/log/snapshot_format.py, and the in-memory
store in kraft/log/memory_snapshots.py (both importable from here too). The store is shared
between the event loop (the Raft core reads ids and sizes) and worker threads (a state machine
building a snapshot; the driver running the core's `SnapshotJob`s: chunk reads, a fetched
snapshot's writes, freeze and deletions), so its index is guarded by a lock; the files
themselves are never changed once frozen.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from kraft.log._common import fsync_dir
from kraft.log.base import (
    Batch,
    CorruptRecordError,
    DurableLog,
    OffsetAndEpoch,
    SnapshotInfo,
    SnapshotStore,
)
from kraft.log.codec import decode_batches
from kraft.log.memory_snapshots import MemorySnapshotStore
from kraft.log.snapshot_format import (
    BOOTSTRAP_SNAPSHOT_ID,
    SnapshotBuilder,
    earliest_id_of,
    latest_id_of,
    verify_snapshot_bytes,
)

logger = logging.getLogger(__name__)

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


def snapshot_file_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_snapshot_file_name(name: str) -> OffsetAndEpoch | None:
    """The id a `.checkpoint` file name encodes, None for any other name."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return OffsetAndEpoch(int(match.group(1)), int(match.group(2)))


def verify_snapshot_file(path: str) -> SnapshotInfo:
    """verify_snapshot_bytes over a file; the id comes from its name when it has one."""
    with open(path, "rb") as file:
        data = file.read()
    return verify_snapshot_bytes(data, parse_snapshot_file_name(os.path.basename(path)), path)


def read_snapshot_batches(path: str) -> Iterator[Batch]:
    """Every batch of a verified snapshot file, header and footer included."""
    with open(path, "rb") as file:
        data = file.read()
    verify_snapshot_bytes(data, parse_snapshot_file_name(os.path.basename(path)), path)
    yield from decode_batches(data, path)


def read_snapshot_records(path: str) -> Iterator[bytes]:
    """The state records of a verified snapshot file, in order."""
    for batch in read_snapshot_batches(path):
        if not batch.control:
            yield from batch.records


# -- files ------------------------------------------------------------------------------------


class _FilePartial:
    def __init__(self, store: FileSnapshotStore, snapshot_id: OffsetAndEpoch) -> None:
        self.snapshot_id = snapshot_id
        self._store = store
        # A random suffix: a transfer and a local build of the same id never share a file.
        self.path = os.path.join(
            store.directory,
            snapshot_file_name(snapshot_id)[: -len(SUFFIX)] + f"-{os.urandom(4).hex()}"
            + PART_SUFFIX,
        )
        # Opened by the first write: creating a transfer touches no file (the core does it).
        self._file: BinaryIO | None = None
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        if self._file is None:
            self._file = open(self.path, "xb")  # noqa: SIM115 - owned until freeze/abort
        self._file.write(data)
        self._size += len(data)

    def freeze(self) -> SnapshotInfo:
        if self._file is None:
            self._file = open(self.path, "xb")  # noqa: SIM115 - owned until freeze/abort
        self._file.flush()
        try:
            with open(self.path, "rb") as file:
                info = verify_snapshot_bytes(file.read(), self.snapshot_id, self.path)
        except CorruptRecordError:
            self.abort()
            raise
        os.fsync(self._file.fileno())
        self._file.close()
        os.chmod(self.path, 0o444)
        final = os.path.join(self._store.directory, snapshot_file_name(self.snapshot_id))
        os.replace(self.path, final)
        fsync_dir(self._store.directory)
        self._store._add(self.snapshot_id, info)
        return info

    def abort(self) -> None:
        if self._file is not None and not self._file.closed:
            self._file.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class FileSnapshotStore:
    """Snapshots as `.checkpoint` files in the log directory (Kafka keeps them beside the
    segments). Opening deletes leftover `.part` files and checks every snapshot's frame."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self._lock = threading.Lock()
        self._ids: list[OffsetAndEpoch] = []
        self._sizes: dict[OffsetAndEpoch, int] = {}
        self._timestamps: dict[OffsetAndEpoch, int] = {}
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if name.endswith(PART_SUFFIX):
                logger.info("deleting the unfinished snapshot %s", path)
                os.unlink(path)
                continue
            snapshot_id = parse_snapshot_file_name(name)
            if snapshot_id is None:
                continue
            info = verify_snapshot_file(path)  # a damaged snapshot stops the node, named
            self._add(snapshot_id, info)

    def _add(self, snapshot_id: OffsetAndEpoch, info: SnapshotInfo) -> None:
        with self._lock:
            if snapshot_id not in self._sizes:
                self._ids.append(snapshot_id)
                self._ids.sort(key=lambda i: (i.offset, i.epoch))
            self._sizes[snapshot_id] = info.size
            self._timestamps[snapshot_id] = info.last_contained_timestamp_ms

    def path(self, snapshot_id: OffsetAndEpoch) -> str:
        return os.path.join(self.directory, snapshot_file_name(snapshot_id))

    def ids(self) -> list[OffsetAndEpoch]:
        with self._lock:
            return list(self._ids)

    def latest_id(self) -> OffsetAndEpoch | None:
        return latest_id_of(self.ids())

    def earliest_id(self) -> OffsetAndEpoch | None:
        return earliest_id_of(self.ids())

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        with self._lock:
            return self._sizes[snapshot_id]

    def last_contained_timestamp(self, snapshot_id: OffsetAndEpoch) -> int:
        with self._lock:
            return self._timestamps[snapshot_id]

    def total_bytes(self) -> int:
        with self._lock:
            return sum(self._sizes.values())

    def read_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        self.size(snapshot_id)  # KeyError when unknown
        with open(self.path(snapshot_id), "rb") as file:
            return os.pread(file.fileno(), max_bytes, position)

    def read_all(self, snapshot_id: OffsetAndEpoch) -> bytes:
        self.size(snapshot_id)
        with open(self.path(snapshot_id), "rb") as file:
            return file.read()

    def begin_transfer(self, snapshot_id: OffsetAndEpoch) -> _FilePartial:
        return _FilePartial(self, snapshot_id)

    def builder(
        self, snapshot_id: OffsetAndEpoch, last_contained_timestamp_ms: int,
        control_records: Sequence[bytes] = (),
    ) -> SnapshotBuilder:
        return SnapshotBuilder(self, snapshot_id, last_contained_timestamp_ms, control_records)

    def delete(self, snapshot_id: OffsetAndEpoch) -> None:
        """Forget and unlink; a transfer reading it keeps its open file (POSIX)."""
        with self._lock:
            if snapshot_id not in self._sizes:
                return
            self._ids.remove(snapshot_id)
            del self._sizes[snapshot_id]
            del self._timestamps[snapshot_id]
        try:
            os.unlink(self.path(snapshot_id))
        except FileNotFoundError:
            pass
        fsync_dir(self.directory)


# -- start-up ---------------------------------------------------------------------------------


class SnapshotGapError(Exception):
    """The log starts after offset 0 but no snapshot covers what came before it."""


def align_log_with_snapshots(log: DurableLog, store: SnapshotStore) -> None:
    """Make the log stand on the snapshots after a restart (spec §5).

    The latest snapshot (S, E) says that every record below S is committed and that the one at
    S-1 has epoch E. The log is emptied and restarted at S (`reset_to`, flushed before anything
    else happens) when it cannot continue that snapshot:

    * S is past the log end: the log is behind it (a follower froze a fetched snapshot and
      crashed before its emptied log reached the disk);
    * the log holds batches and none of them reaches epoch E: E is above the log's last epoch
      (Kafka's `truncateToLatestSnapshot` rule);
    * the log holds offset S-1 in another epoch than E: a divergent tail. By log matching, one
      (offset, epoch) pair decides the whole prefix, so a different epoch at S-1 means that
      the log is not the history the snapshot summarises, whatever comes after it. Kafka
      compares only the snapshot with the log's end, so it would keep such a log when the
      log's last epoch is E or more; this rule is at least as strict as Kafka's in every case.

    Otherwise the log keeps its first offset when that is 0 or a snapshot's end, and else
    starts at the earliest snapshot at or after its first segment (retention deleted whole
    segments below a snapshot that ends inside the next one, and then crashed). A log that
    starts above 0 with no snapshot at or after its start raises SnapshotGapError.

    Snapshots below the log's new start are stale: they are deleted once the new start is
    durable (the log is flushed first).
    """
    ids = store.ids()
    latest = ids[-1] if ids else None
    reason = _cannot_stand_on(log, latest) if latest is not None else None
    if latest is not None and reason is not None:
        logger.warning(
            "the log (%d..%d, last epoch %d) cannot continue snapshot %d-%d (%s): it "
            "restarts empty there",
            log.start_offset, log.end_offset, log.last_epoch, latest.offset, latest.epoch,
            reason,
        )
        log.reset_to(latest.offset, latest.epoch)
        log.flush()
    else:
        start = log.start_offset
        at_start = [i for i in ids if i.offset == start]
        if at_start:
            log.advance_start(start, at_start[-1].epoch)
        elif start > 0:
            later = [i for i in ids if i.offset >= start]
            if not later:
                raise SnapshotGapError(
                    f"the log in {getattr(log, 'directory', '?')} starts at offset {start} but "
                    "no snapshot covers the offsets before it; restore the snapshot files or "
                    "wipe this node's metadata directory to re-replicate it"
                )
            log.advance_start(later[0].offset, later[0].epoch)
    stale = [i for i in store.ids() if i.offset < log.start_offset]
    if stale:
        log.flush()  # the segments a moved start deleted, before the snapshots that cover them
    for snapshot_id in stale:
        logger.info("deleting stale snapshot %d-%d", snapshot_id.offset, snapshot_id.epoch)
        store.delete(snapshot_id)


def _cannot_stand_on(log: DurableLog, snapshot: OffsetAndEpoch) -> str | None:
    """Why the log cannot continue `snapshot` (see align_log_with_snapshots); None if it can."""
    offset, epoch = snapshot.offset, snapshot.epoch
    if offset > log.end_offset:
        return f"it ends at {log.end_offset}, before the snapshot"
    if log.end_offset == log.start_offset or offset == 0:
        return None  # no batch to compare (an emptied log starting at a snapshot)
    if epoch > log.last_epoch:
        return f"its last epoch {log.last_epoch} is below the snapshot's"
    if log.start_offset < offset:
        before = next(iter(log.batches(offset - 1, offset)), None)
        if before is not None and before.epoch != epoch:
            return f"offset {offset - 1} has epoch {before.epoch}: a divergent tail"
    return None


def read_control_records(
    store: SnapshotStore, snapshot_id: OffsetAndEpoch
) -> tuple[tuple[int, dict[str, object]], ...]:
    """The control records after a snapshot's header (its voter set), verifying the file."""
    return verify_snapshot_bytes(store.read_all(snapshot_id), snapshot_id).control_records


__all__ = [  # the names moved to the I/O-free modules stay importable from here
    "BOOTSTRAP_SNAPSHOT_ID",
    "PART_SUFFIX",
    "SUFFIX",
    "FileSnapshotStore",
    "MemorySnapshotStore",
    "SnapshotBuilder",
    "SnapshotGapError",
    "align_log_with_snapshots",
    "parse_snapshot_file_name",
    "read_control_records",
    "read_snapshot_batches",
    "read_snapshot_records",
    "snapshot_file_name",
    "verify_snapshot_bytes",
    "verify_snapshot_file",
]
