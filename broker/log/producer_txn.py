"""Transactions on a partition (KIP-98's partition side, Kafka's ProducerStateManager and
EndTransactionMarker): the control records a COMMIT/ABORT marker holds, the marker batch a
leader appends for WriteTxnMarkers, and the partition's open transactions, which give its
last stable offset (LSO).

A producer's transaction on a partition starts at its first transactional batch there and ends
at its marker, a control batch with the producer's id and epoch (attributes transactional +
control, base sequence -1) holding one record: key int16 version 0 + int16 type (0 ABORT,
1 COMMIT), value int16 version 0 + int32 coordinator epoch. A transaction whose marker is in the
log but not yet below the high watermark still holds the LSO back (Kafka's unreplicated
transactions): a read_committed consumer must not see data whose outcome a failover could still
lose.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker.records import (
    CONTROL_BIT,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    Record,
    build_batch,
    decode_records,
)
from kraft.log.base import CorruptRecordError

ABORT = 0
COMMIT = 1
# Completed transactions kept until the high watermark passes their marker; a follower never
# asks (nothing prunes them there), so only the latest are kept: a leader's high watermark
# lags its log end by far fewer markers than this.
MAX_UNREPLICATED = 1024
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class CompletedTxn(NamedTuple):
    """A transaction whose marker was written: [first_offset, last_offset] (the marker's
    offset) and the LSO once it completed (Kafka's AbortedTxn.lastStableOffset)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytes:
    """The control batch of a COMMIT or ABORT marker, as a leader appends it (its offsets and
    leader epoch stamped by the append)."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return build_batch([Record(value, key, (), timestamp_ms)], base_timestamp=timestamp_ms,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=NO_SEQUENCE, attributes=TRANSACTIONAL_BIT | CONTROL_BIT)


def marker_of(batch: bytes) -> tuple[int, int] | None:
    """(type, coordinator epoch) of a control batch's marker record; None for a control
    record of another kind or one that does not decode (Kafka skips unknown control types)."""
    try:
        records = decode_records(batch)
    except (CorruptRecordError, ValueError):
        return None
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        return None
    version, kind = _KEY.unpack_from(records[0].key)
    if version != 0 or kind not in (ABORT, COMMIT):
        return None
    value = records[0].value
    epoch = _VALUE.unpack_from(value)[1] if value is not None and len(value) >= _VALUE.size \
        else -1
    return kind, epoch


class TxnTracker:
    """The partition's open transactions (producer id -> first offset) and those completed
    whose marker the high watermark has not passed yet."""

    __slots__ = ("_open", "_unreplicated")

    def __init__(self) -> None:
        self._open: dict[int, int] = {}
        self._unreplicated: list[CompletedTxn] = []

    @classmethod
    def of_open(cls, open_txns: dict[int, int]) -> TxnTracker:
        tracker = cls()
        tracker._open = dict(open_txns)
        return tracker

    def begin(self, producer_id: int, first_offset: int) -> None:
        self._open[producer_id] = first_offset

    def end(self, producer_id: int, first_offset: int, marker_offset: int) -> CompletedTxn:
        self._open.pop(producer_id, None)
        others = min(self._open.values(), default=marker_offset + 1)
        done = CompletedTxn(producer_id, first_offset, marker_offset,
                            min(others, marker_offset + 1))
        self._unreplicated.append(done)
        if len(self._unreplicated) > MAX_UNREPLICATED:
            del self._unreplicated[0]
        return done

    def forget(self, producer_id: int) -> None:
        self._open.pop(producer_id, None)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a read_committed consumer may not read yet: the oldest open
        transaction's start, or that of one whose marker lies at or past `high_watermark`;
        None when there is none. Forgets the completed transactions below it."""
        pending = self._unreplicated
        if pending and pending[0].last_offset < high_watermark:
            self._unreplicated = pending = [t for t in pending
                                            if t.last_offset >= high_watermark]
        first = min(self._open.values(), default=None)
        for txn in pending:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def open_transactions(self) -> dict[int, int]:
        return dict(self._open)

    def copy(self) -> TxnTracker:
        copied = TxnTracker.of_open(self._open)
        copied._unreplicated = list(self._unreplicated)
        return copied
