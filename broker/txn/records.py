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
from dataclasses import dataclass, field
from enum import IntEnum

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


class RecordFormatError(ValueError):
    """Bytes that are not a record of the version they claim."""


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


@dataclass(slots=True)
class _Writer:
    out: bytearray = field(default_factory=bytearray)

    def pack(self, fmt: str, value: int) -> _Writer:
        self.out += struct.pack(fmt, value)
        return self

    def uvarint(self, value: int) -> _Writer:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)
        return self

    def string(self, value: str, flexible: bool) -> _Writer:
        data = value.encode()
        if flexible:
            self.uvarint(len(data) + 1)
        elif len(data) > 32767:
            raise RecordFormatError(f"a {len(data)}-byte string does not fit an int16 length")
        else:
            self.pack(">h", len(data))
        self.out += data
        return self


def encode_key(transactional_id: str) -> bytes:
    return bytes(_Writer().pack(">h", KEY_VERSION).string(transactional_id, False).out)


def encode_value(value: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise RecordFormatError(f"TransactionLogValue has no version {version}")
    flexible = version == FLEXIBLE_VALUE_VERSION
    w = _Writer().pack(">h", version).pack(">q", value.producer_id)
    w.pack(">h", value.producer_epoch).pack(">i", value.timeout_ms).pack(">b", value.state)
    # Kafka writes null for Empty (TransactionLog.valueToBytes), the list otherwise.
    partitions = None if value.state is TxnState.EMPTY else value.partitions
    if partitions is None:
        w.uvarint(0) if flexible else w.pack(">i", -1)
    else:
        w.uvarint(len(partitions) + 1) if flexible else w.pack(">i", len(partitions))
        for topic, ids in partitions:
            w.string(topic, flexible)
            w.uvarint(len(ids) + 1) if flexible else w.pack(">i", len(ids))
            for partition in ids:
                w.pack(">i", partition)
            if flexible:
                w.uvarint(0)  # the entry's tagged fields
    w.pack(">q", value.last_update_ms).pack(">q", value.start_ms)
    if flexible:
        tags = []
        if value.previous_producer_id != NO_PRODUCER_ID:
            tags.append((0, struct.pack(">q", value.previous_producer_id)))
        if value.next_producer_id != NO_PRODUCER_ID:
            tags.append((1, struct.pack(">q", value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((2, struct.pack(">h", value.client_transaction_version)))
        w.uvarint(len(tags))
        for tag, data in tags:
            w.uvarint(tag).uvarint(len(data))
            w.out += data
    return bytes(w.out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise RecordFormatError(f"record ends at {len(self.data)}, needs {self.pos + size}")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str) -> int:
        raw = self.take(struct.calcsize(fmt))
        value: int = struct.unpack(fmt, raw)[0]
        return value

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def string(self, flexible: bool) -> str:
        size = self.uvarint() - 1 if flexible else self.unpack(">h")
        if size < 0:
            raise RecordFormatError("null in a non-nullable string")
        try:
            return self.take(size).decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def length(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.unpack(">i")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def decode_key(data: bytes) -> str:
    """The transactional id of a key (RecordFormatError for any other version)."""
    reader = _Reader(data)
    version = reader.unpack(">h")
    if version != KEY_VERSION:
        raise RecordFormatError(f"TransactionLogKey version {version} is not 0")
    return reader.string(False)


def decode_value(data: bytes) -> TxnLogValue:
    reader = _Reader(data)
    version = reader.unpack(">h")
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise RecordFormatError(f"TransactionLogValue version {version} is unknown")
    flexible = version == FLEXIBLE_VALUE_VERSION
    producer_id = reader.unpack(">q")
    epoch = reader.unpack(">h")
    timeout_ms = reader.unpack(">i")
    status = reader.unpack(">b")
    try:
        state = TxnState(status)
    except ValueError:
        raise RecordFormatError(f"transaction status {status} is unknown") from None
    partitions = []
    for _ in range(max(reader.length(flexible), 0)):
        topic = reader.string(flexible)
        count = reader.length(flexible)
        ids = tuple(reader.unpack(">i") for _ in range(max(count, 0)))
        if flexible:
            reader.skip_tags()
        partitions.append((topic, ids))
    last_update_ms = reader.unpack(">q")
    start_ms = reader.unpack(">q")
    tagged = {0: NO_PRODUCER_ID, 1: NO_PRODUCER_ID, 2: 0}
    if flexible:
        for _ in range(reader.uvarint()):
            tag = reader.uvarint()
            raw = reader.take(reader.uvarint())
            if tag in (0, 1) and len(raw) == 8:
                tagged[tag] = struct.unpack(">q", raw)[0]
            elif tag == 2 and len(raw) == 2:
                tagged[tag] = struct.unpack(">h", raw)[0]
    return TxnLogValue(producer_id, epoch, timeout_ms, state, tuple(partitions),
                       last_update_ms, start_ms, tagged[0], tagged[1], tagged[2])
