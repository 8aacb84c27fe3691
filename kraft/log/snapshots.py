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
protocols in kraft/log/base.py. The store is shared between the event loop (the Raft core reads
ids and sizes) and worker threads (a state machine building a snapshot; the driver running the
core's `SnapshotJob`s: chunk reads, a fetched snapshot's writes, freeze and deletions), so its
index is guarded by a lock; the files themselves are never changed once frozen.
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
from kraft.log.codec import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    BatchHeader,
    decode_batches,
    decode_control_record,
    encode_batch,
    encode_control_record,
    scan_batches,
)

logger = logging.getLogger(__name__)

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
# The id of an empty state: never served, never needed (Kafka's bootstrap snapshot).
BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(0, 0)
# Records per data batch when a state machine writes its state.
DEFAULT_BATCH_RECORDS = 1000


def snapshot_file_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_snapshot_file_name(name: str) -> OffsetAndEpoch | None:
    """The id a `.checkpoint` file name encodes, None for any other name."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return OffsetAndEpoch(int(match.group(1)), int(match.group(2)))


def verify_snapshot_bytes(
    data: bytes, snapshot_id: OffsetAndEpoch | None, path: str | None = None
) -> SnapshotInfo:
    """Check a whole snapshot: every batch CRC, offsets numbered from 0, one epoch (the id's,
    when given), a header first and a footer last. Frames and CRCs are checked without
    splitting records; only the header and footer batches are decoded. CorruptRecordError
    names the byte position of the first problem."""
    headers = scan_batches(data, path)
    if not headers:
        raise CorruptRecordError("empty snapshot: no header batch", 0, path)
    control: tuple[tuple[int, dict[str, object]], ...] = ()
    expected_epoch = headers[0].epoch if snapshot_id is None else snapshot_id.epoch
    offset = 0
    records = 0
    last = len(headers) - 1
    for index, header in enumerate(headers):
        if header.base_offset != offset:
            raise CorruptRecordError(
                f"batch starts at offset {header.base_offset}, expected {offset}",
                header.position, path,
            )
        if header.epoch != expected_epoch:
            raise CorruptRecordError(
                f"batch epoch {header.epoch} differs from the snapshot epoch {expected_epoch}",
                header.position, path,
            )
        if 0 < index < last:
            if header.control:
                if index != 1:  # only the voter set's batch, right after the header
                    raise CorruptRecordError(
                        "control batch inside the snapshot", header.position, path
                    )
                control = _control_records(data, header, path)
            else:
                records += header.record_count
        offset = header.next_offset
    kind, body = _single_control(data, headers[0], path)
    if kind != SNAPSHOT_HEADER:
        raise CorruptRecordError(f"first batch is control type {kind}, not a header", 0, path)
    if last == 0:
        raise CorruptRecordError("snapshot ends after its header: no footer", len(data), path)
    kind, _ = _single_control(data, headers[last], path)
    if kind != SNAPSHOT_FOOTER:
        raise CorruptRecordError(
            f"last batch is control type {kind}, not a footer", headers[last].position, path
        )
    timestamp = body.get("lastContainedLogTimestamp", 0)
    return SnapshotInfo(
        snapshot_id, len(data), len(headers), records,
        timestamp if isinstance(timestamp, int) else 0, control,
    )


def _control_records(
    data: bytes, header: BatchHeader, path: str | None
) -> tuple[tuple[int, dict[str, object]], ...]:
    position = header.position
    [batch] = decode_batches(data[position : position + header.size], path, position)
    try:
        records = tuple(decode_control_record(record) for record in batch.records)
    except CorruptRecordError as exc:
        raise CorruptRecordError(exc.reason, position, path) from None
    if any(kind not in (KRAFT_VERSION, KRAFT_VOTERS) for kind, _ in records):
        raise CorruptRecordError("control batch inside the snapshot", position, path)
    return records


def _single_control(
    data: bytes, header: BatchHeader, path: str | None
) -> tuple[int, dict[str, object]]:
    position = header.position
    if not header.control or header.record_count != 1:
        raise CorruptRecordError("expected a control batch of one record", position, path)
    [batch] = decode_batches(data[position : position + header.size], path, position)
    try:
        return decode_control_record(batch.records[0])
    except CorruptRecordError as exc:
        raise CorruptRecordError(exc.reason, position, path) from None


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


class SnapshotBuilder:
    """Writes a state machine's snapshot: header now, `append` data batches, footer on
    `freeze`. Blocking file I/O: run it off the event loop."""

    def __init__(
        self, store: FileSnapshotStore | MemorySnapshotStore, snapshot_id: OffsetAndEpoch,
        last_contained_timestamp_ms: int, control_records: Sequence[bytes] = (),
    ) -> None:
        self.snapshot_id = snapshot_id
        self._partial = store.begin_transfer(snapshot_id)
        self._offset = 0
        self._timestamp = last_contained_timestamp_ms
        self._write_control(SNAPSHOT_HEADER, {
            "version": 0, "lastContainedLogTimestamp": last_contained_timestamp_ms,
        })
        if control_records:  # the voter set (KIP-853), one control batch after the header
            self._partial.write(encode_batch(
                self._offset, self.snapshot_id.epoch, control_records, self._timestamp, True
            ))
            self._offset += len(control_records)

    def append(self, records: Sequence[bytes]) -> None:
        """One data batch (callers keep batches under the fetch size: ~1000 records)."""
        if not records:
            return
        self._partial.write(
            encode_batch(self._offset, self.snapshot_id.epoch, records, self._timestamp)
        )
        self._offset += len(records)

    def append_all(self, records: Sequence[bytes], per_batch: int = DEFAULT_BATCH_RECORDS) -> None:
        for start in range(0, len(records), per_batch):
            self.append(records[start : start + per_batch])

    def freeze(self) -> SnapshotInfo:
        self._write_control(SNAPSHOT_FOOTER, {"version": 0})
        return self._partial.freeze()

    def abort(self) -> None:
        self._partial.abort()

    def _write_control(self, kind: int, body: dict[str, object]) -> None:
        record = encode_control_record(kind, body)
        self._partial.write(
            encode_batch(self._offset, self.snapshot_id.epoch, [record], self._timestamp, True)
        )
        self._offset += 1


def _latest(ids: list[OffsetAndEpoch]) -> OffsetAndEpoch | None:
    return ids[-1] if ids else None


def _earliest(ids: list[OffsetAndEpoch]) -> OffsetAndEpoch | None:
    return ids[0] if ids else None


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
        return _latest(self.ids())

    def earliest_id(self) -> OffsetAndEpoch | None:
        return _earliest(self.ids())

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



# -- memory (the simulator's) -----------------------------------------------------------------


class _MemoryPartial:
    def __init__(self, store: MemorySnapshotStore, snapshot_id: OffsetAndEpoch) -> None:
        self.snapshot_id = snapshot_id
        self._store = store
        self._chunks: list[bytes] = []
        self._size = 0
        self._generation = store.generation

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        self._chunks.append(bytes(data))
        self._size += len(data)

    def freeze(self) -> SnapshotInfo:
        data = b"".join(self._chunks)
        info = verify_snapshot_bytes(data, self.snapshot_id)
        if self._generation == self._store.generation:  # a crash in between loses it
            self._store._add(self.snapshot_id, data, info)
        return info

    def abort(self) -> None:
        self._chunks = []


class MemorySnapshotStore:
    """Frozen snapshots survive a crash (freezing is durable); partial ones do not."""

    def __init__(self) -> None:
        self.generation = 0
        self._files: dict[OffsetAndEpoch, tuple[bytes, SnapshotInfo]] = {}

    def _add(self, snapshot_id: OffsetAndEpoch, data: bytes, info: SnapshotInfo) -> None:
        self._files[snapshot_id] = (data, info)

    def ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._files, key=lambda i: (i.offset, i.epoch))

    def latest_id(self) -> OffsetAndEpoch | None:
        return _latest(self.ids())

    def earliest_id(self) -> OffsetAndEpoch | None:
        return _earliest(self.ids())

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        return len(self._files[snapshot_id][0])

    def last_contained_timestamp(self, snapshot_id: OffsetAndEpoch) -> int:
        return self._files[snapshot_id][1].last_contained_timestamp_ms

    def total_bytes(self) -> int:
        return sum(len(data) for data, _ in self._files.values())

    def read_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self._files[snapshot_id][0][position : position + max_bytes]

    def read_all(self, snapshot_id: OffsetAndEpoch) -> bytes:
        return self._files[snapshot_id][0]

    def begin_transfer(self, snapshot_id: OffsetAndEpoch) -> _MemoryPartial:
        return _MemoryPartial(self, snapshot_id)

    def builder(
        self, snapshot_id: OffsetAndEpoch, last_contained_timestamp_ms: int,
        control_records: Sequence[bytes] = (),
    ) -> SnapshotBuilder:
        return SnapshotBuilder(self, snapshot_id, last_contained_timestamp_ms, control_records)

    def delete(self, snapshot_id: OffsetAndEpoch) -> None:
        self._files.pop(snapshot_id, None)

    def crash(self) -> None:
        self.generation += 1

    def wipe(self) -> None:
        self.generation += 1
        self._files.clear()


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
