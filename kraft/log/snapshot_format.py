"""A snapshot's bytes, without I/O: the id of the empty state, the check of a whole snapshot,
and the builder that writes a state machine's snapshot through a store's transfer.

The file store (kraft/log/snapshots.py, with its open/fsync/unlink) and the in-memory one
(kraft/log/memory_snapshots.py) share these; the sans-I/O core imports only this side
(an import-linter contract in pyproject.toml keeps the file store out of kraft.core).
"""

from __future__ import annotations

from collections.abc import Sequence

from kraft.log.base import CorruptRecordError, OffsetAndEpoch, SnapshotInfo, SnapshotStore
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

# The id of an empty state: never served, never needed (Kafka's bootstrap snapshot).
BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(0, 0)
# Records per data batch when a state machine writes its state.
DEFAULT_BATCH_RECORDS = 1000


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


class SnapshotBuilder:
    """Writes a state machine's snapshot: header now, `append` data batches, footer on
    `freeze`, through the store's transfer (for a file store: blocking file I/O, to run
    off the event loop)."""

    def __init__(
        self, store: SnapshotStore, snapshot_id: OffsetAndEpoch,
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


def latest_id_of(ids: list[OffsetAndEpoch]) -> OffsetAndEpoch | None:
    """The latest of a store's ids (oldest first)."""
    return ids[-1] if ids else None


def earliest_id_of(ids: list[OffsetAndEpoch]) -> OffsetAndEpoch | None:
    return ids[0] if ids else None
