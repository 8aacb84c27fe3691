"""The records of `__transaction_state` in Kafka's formats (the transaction coordinator's
message schemas TransactionLogKey and TransactionLogValue), so the topic's data is what
Kafka's tools read.

Key and value both start with an int16 version. The key (v0) is the transactional id. The
value v0 is classic (int16-length strings, int32-length arrays, -1 = null); v1 is flexible
(compact lengths, tagged fields: PreviousProducerId tag 0, NextProducerId tag 1,
ClientTransactionVersion tag 2). We write v0, as Kafka does at transaction version 0 (neither
librdkafka nor kafka-python speaks a later one), and read both. A null value is a tombstone:
the transactional id expired. The status byte is Kafka's TransactionState id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from broker.schema_codec import Reader, Writer

# The callers catch it from here (broker.schema_codec raises it).
from broker.schema_codec import RecordFormatError as RecordFormatError

KEY_VERSION = 0
VALUE_VERSION = 0  # transaction.version 0
FLEXIBLE_VALUE_VERSION = 1
NO_PRODUCER_ID = -1


class TxnState(IntEnum):
    """Kafka's TransactionState ids (TransactionState.java); PREPARE_EPOCH_FENCE is a pending
    state only and never written."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    # topic -> partitions, sorted; empty in Empty and Complete* (written as null in Empty)
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID  # v1 only (tag 0)
    next_producer_id: int = NO_PRODUCER_ID  # v1 only (tag 1)
    client_transaction_version: int = 0  # v1 only (tag 2)


def encode_key(transactional_id: str) -> bytes:
    return bytes(Writer().int16(KEY_VERSION).string(transactional_id).out)


def encode_value(value: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise RecordFormatError(f"TransactionLogValue has no version {version}")
    w = Writer().int16(version)
    w.flexible = version == FLEXIBLE_VALUE_VERSION
    w.int64(value.producer_id).int16(value.producer_epoch).int32(value.timeout_ms)
    w.int8(value.state)
    # Kafka writes null for Empty (TransactionLog.valueToBytes), the list otherwise.
    partitions = None if value.state is TxnState.EMPTY else value.partitions
    w.array_length(None if partitions is None else len(partitions))
    for topic, ids in partitions or ():
        w.string(topic).array_length(len(ids))
        for partition in ids:
            w.int32(partition)
        w.tags()  # the entry's tagged fields (flexible only)
    w.int64(value.last_update_ms).int64(value.start_ms)
    tags = []
    if value.previous_producer_id != NO_PRODUCER_ID:
        tags.append((0, struct.pack(">q", value.previous_producer_id)))
    if value.next_producer_id != NO_PRODUCER_ID:
        tags.append((1, struct.pack(">q", value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((2, struct.pack(">h", value.client_transaction_version)))
    return bytes(w.tags(tags).out)  # v1 only: v0 has no tagged fields


def decode_key(data: bytes) -> str:
    """The transactional id of a key (RecordFormatError for any other version)."""
    reader = Reader(data)
    version = reader.int16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"TransactionLogKey version {version} is not 0")
    return reader.string()


def decode_value(data: bytes) -> TxnLogValue:
    reader = Reader(data)
    version = reader.int16()
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise RecordFormatError(f"TransactionLogValue version {version} is unknown")
    reader.flexible = version == FLEXIBLE_VALUE_VERSION
    producer_id = reader.int64()
    epoch = reader.int16()
    timeout_ms = reader.int32()
    status = reader.int8()
    try:
        state = TxnState(status)
    except ValueError:
        raise RecordFormatError(f"transaction status {status} is unknown") from None
    partitions = []
    for _ in range(max(reader.length(wide=True), 0)):
        topic = reader.string()
        count = reader.length(wide=True)
        ids = tuple(reader.int32() for _ in range(max(count, 0)))
        reader.tags()
        partitions.append((topic, ids))
    last_update_ms = reader.int64()
    start_ms = reader.int64()
    tagged = {0: NO_PRODUCER_ID, 1: NO_PRODUCER_ID, 2: 0}
    if reader.flexible:
        for _ in range(reader.uvarint()):
            tag = reader.uvarint()
            raw = reader.take(reader.uvarint())
            if tag in (0, 1) and len(raw) == 8:
                tagged[tag] = struct.unpack(">q", raw)[0]
            elif tag == 2 and len(raw) == 2:
                tagged[tag] = struct.unpack(">h", raw)[0]
    return TxnLogValue(producer_id, epoch, timeout_ms, state, tuple(partitions),
                       last_update_ms, start_ms, tagged[0], tagged[1], tagged[2])
