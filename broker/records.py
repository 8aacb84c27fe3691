"""Kafka record batches, magic v2 (reference/kafka-data-plane.md §1): the 61-byte header, the
checks a leader makes on a client's batch, the fields a leader stamps, the batch format a
partition log's SegmentedLog stores, and a builder for test batches.

Batches are stored and served as the producer sent them: the leader only overwrites
baseOffset and partitionLeaderEpoch, both outside the CRC. Records are re-encoded never, and
the CRC recomputed only for LogAppendTime topics (the timestamp type bit and maxTimestamp).

Header, big-endian:
    0 baseOffset i64 | 8 batchLength i32 (bytes after this field) | 12 partitionLeaderEpoch i32
    16 magic i8 = 2 | 17 crc u32 = CRC-32C of [21:end) | 21 attributes i16
    23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64
    51 producerEpoch i16 | 53 baseSequence i32 | 57 recordsCount i32 | 61 records
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import google_crc32c

from kraft.errors import Errors
from kraft.log.base import CorruptRecordError
from kraft.log.codec import BatchHeader, ByteSource

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC = 2
CRC_START = 21  # the CRC covers [21, end)

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ZSTD = 4

_MAX_I32 = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_EPOCH_AT = 12
_CRC = struct.Struct(">I")
_CRC_AT = 17
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35
# The fields scan_prefix needs: baseOffset, batchLength, epoch, magic, crc, attributes,
# lastOffsetDelta.
_FRAME = struct.Struct(">qiibIhi")
_crc32c = google_crc32c.value


class AppendError(Exception):
    """A batch refused before anything was written: a Kafka error code and a message for the
    client (Produce's `error_message`)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"AppendError({Errors(self.code).name}, {self.message!r})"


class RecordBatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        """The codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
        return self.attributes & CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping after Int32.MAX to 0."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap after Int32.MAX to 0."""
    if sequence > _MAX_I32 - increment:
        return increment - (_MAX_I32 - sequence) - 1
    return sequence + increment


def parse_header(data: ByteSource, position: int = 0) -> RecordBatchHeader:
    """The header of the batch at `position`; CorruptRecordError when fewer than 61 bytes."""
    if len(data) - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"{len(data) - position} bytes, shorter than a record batch header", position
        )
    return RecordBatchHeader._make(_HEADER.unpack_from(data, position))


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C of a batch's covered bytes [21, end)."""
    return int(_crc32c(bytes(memoryview(batch)[CRC_START:])))


# -- what the leader checks and stamps ---------------------------------------------------------


def validate_client_batch(
    data: bytes, max_message_bytes: int, segment_bytes: int
) -> RecordBatchHeader:
    """Check a producer's records for one partition (Produce v3+) as a leader does before it
    assigns offsets (reference §1.1); raise AppendError with Kafka's code otherwise. What is
    not checked here: the codec against the request's API version (the caller: zstd needs
    Produce v7+, see `RecordBatchHeader.compression`), per-record timestamps and keys (the
    records are not decompressed)."""
    size = len(data)
    if size < HEADER_SIZE:
        raise AppendError(Errors.CORRUPT_MESSAGE,
                          f"record batch of {size} bytes is shorter than its 61-byte header")
    header = parse_header(data)
    if header.magic != MAGIC:
        raise AppendError(Errors.INVALID_RECORD,
                          f"record batch magic {header.magic}: only magic 2 is accepted")
    if header.size != size:
        if header.size < size:
            raise AppendError(Errors.INVALID_RECORD,
                              "Produce v3+ carries exactly one record batch per partition")
        raise AppendError(Errors.CORRUPT_MESSAGE,
                          f"record batch length {header.size} runs past the {size} bytes sent")
    if size > max_message_bytes:
        raise AppendError(
            Errors.MESSAGE_TOO_LARGE,
            f"record batch of {size} bytes is larger than max.message.bytes "
            f"({max_message_bytes})",
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise AppendError(Errors.CORRUPT_MESSAGE,
                          f"batch length {header.batch_length} is shorter than the header")
    actual = compute_crc(data)
    if actual != header.crc:
        raise AppendError(
            Errors.CORRUPT_MESSAGE,
            f"record batch CRC32C mismatch (stored {header.crc:#010x}, computed {actual:#010x})",
        )
    if header.compression not in CODECS:
        raise AppendError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                          f"unknown compression codec id {header.compression}")
    if header.base_offset != 0:
        raise AppendError(Errors.INVALID_RECORD,
                          f"base offset {header.base_offset} of a produced batch must be 0")
    if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
        raise AppendError(
            Errors.INVALID_RECORD,
            f"record count {header.records_count} does not match last offset delta "
            f"{header.last_offset_delta}",
        )
    if header.control:
        raise AppendError(Errors.INVALID_RECORD, "clients may not write control batches")
    if header.has_producer_id and header.base_sequence < 0:
        raise AppendError(
            Errors.INVALID_RECORD,
            f"producer id {header.producer_id} with an invalid base sequence "
            f"{header.base_sequence}",
        )
    if header.log_append_time:
        raise AppendError(Errors.INVALID_TIMESTAMP,
                          "clients may not set the LogAppendTime timestamp type")
    if size > segment_bytes:
        raise AppendError(
            Errors.RECORD_BATCH_TOO_LARGE,
            f"record batch of {size} bytes is larger than segment.bytes ({segment_bytes})",
        )
    return header


def stamp(batch: bytearray, base_offset: int, leader_epoch: int) -> None:
    """Overwrite baseOffset and partitionLeaderEpoch in place (outside the CRC)."""
    _BASE_OFFSET.pack_into(batch, 0, base_offset)
    _EPOCH.pack_into(batch, _EPOCH_AT, leader_epoch)


def set_log_append_time(batch: bytearray, now_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = `now_ms` and recompute the CRC (the
    only re-encoding a leader does)."""
    (attributes,) = _ATTRIBUTES.unpack_from(batch, _ATTRIBUTES_AT)
    _ATTRIBUTES.pack_into(batch, _ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_BIT)
    _MAX_TIMESTAMP.pack_into(batch, _MAX_TIMESTAMP_AT, now_ms)
    _CRC.pack_into(batch, _CRC_AT, compute_crc(batch))


# -- the format a partition log's SegmentedLog stores ------------------------------------------


def _as_source(data: ByteSource) -> bytes | mmap.mmap:
    if isinstance(data, bytes | mmap.mmap):
        return data
    return bytes(data)


class KafkaBatchFormat:
    """Magic-2 batches for kraft.log's SegmentedLog: the offset span is lastOffsetDelta + 1,
    the epoch is partitionLeaderEpoch. Batches on disk were stamped by a leader, so the base
    offset and epoch are never negative."""

    name = "kafka-v2"

    def scan_prefix(
        self, data: ByteSource, path: str | None = None, base_position: int = 0
    ) -> tuple[list[BatchHeader], int, CorruptRecordError | None]:
        source = _as_source(data)
        end = len(source)
        pos = 0
        headers: list[BatchHeader] = []
        append = headers.append
        unpack = _FRAME.unpack_from
        crc32c = _crc32c
        make = tuple.__new__
        while pos < end:
            if end - pos >= HEADER_SIZE:
                base, length, epoch, magic, crc, attributes, delta = unpack(source, pos)
                size = length + LOG_OVERHEAD
                stop = pos + size
                if (
                    size >= HEADER_SIZE
                    and stop <= end
                    and magic == MAGIC
                    and crc32c(source[pos + CRC_START : stop]) == crc
                    and base >= 0
                    and epoch >= 0
                    and delta >= 0
                ):
                    append(make(BatchHeader, (base, epoch, delta + 1, base_position + pos, size,
                                              bool(attributes & CONTROL_BIT), crc)))
                    pos = stop
                    continue
            return headers, pos, _frame_error(source, pos, path, base_position)
        return headers, pos, None

    def is_torn_tail(self, data: ByteSource, position: int) -> bool:
        source = _as_source(data)
        end = len(source)
        if end - position < HEADER_SIZE:
            return True
        (length,) = _EPOCH.unpack_from(source, position + 8)
        if position + LOG_OVERHEAD + length >= end:
            return True
        zeros = bytes(min(1 << 20, end - position))
        start = position
        while start < end:
            stop = min(start + len(zeros), end)
            if source[start:stop] != zeros[: stop - start]:
                return False
            start = stop
        return True


def _frame_error(
    source: bytes | mmap.mmap, pos: int, path: str | None, base_position: int
) -> CorruptRecordError:
    left = len(source) - pos
    where = base_position + pos
    if left < HEADER_SIZE:
        return CorruptRecordError(f"{left} bytes left, shorter than a batch header", where, path)
    base, length, epoch, magic, crc, _, delta = _FRAME.unpack_from(source, pos)
    size = length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        return CorruptRecordError(f"batch length {length} is too small", where, path)
    if size > left:
        return CorruptRecordError(
            f"batch of {size} bytes runs past the end ({left} bytes left)", where, path
        )
    if magic != MAGIC:
        return CorruptRecordError(f"magic {magic}, expected 2", where, path)
    actual = _crc32c(source[pos + CRC_START : pos + size])
    if actual != crc:
        return CorruptRecordError(
            f"CRC32C mismatch (stored {crc:#010x}, computed {actual:#010x})", where, path
        )
    return CorruptRecordError(
        f"negative base offset {base}, leader epoch {epoch} or last offset delta {delta}",
        where, path,
    )


KAFKA_FORMAT = KafkaBatchFormat()


def scan_batches(data: ByteSource, path: str | None = None) -> list[BatchHeader]:
    """Every stamped batch in `data`, CRC checked; CorruptRecordError at the first bad one."""
    headers, _, error = KAFKA_FORMAT.scan_prefix(data, path)
    if error is not None:
        raise error
    return headers


# -- records: a builder for tests and tools, and a reader of uncompressed batches ---------------


@dataclass(frozen=True, slots=True)
class Record:
    """One record: value, key, headers (key, value) and its own timestamp (None: the batch's
    base timestamp)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag & ~0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _bytes_field(value: bytes | None) -> bytes:
    return _varint(-1) if value is None else _varint(len(value)) + value


def encode_record(record: Record, offset_delta: int, base_timestamp: int) -> bytes:
    timestamp = base_timestamp if record.timestamp_ms is None else record.timestamp_ms
    body = bytearray(b"\x00")  # attributes, unused
    body += _varint(timestamp - base_timestamp)
    body += _varint(offset_delta)
    body += _bytes_field(record.key)
    body += _bytes_field(record.value)
    body += _varint(len(record.headers))
    for name, value in record.headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(value)
    return _varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[Record | bytes | None],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    base_timestamp: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
) -> bytes:
    """An uncompressed v2 batch as a producer sends it (base offset 0 unless given), with a
    correct CRC. Plain bytes (or None) are records holding just a value. `attributes` sets
    extra bits (transactional, control, or a codec id for tests of the checks)."""
    if not records:
        raise ValueError("a batch needs at least one record")
    items = [item if isinstance(item, Record) else Record(item) for item in records]
    timestamps = [base_timestamp if r.timestamp_ms is None else r.timestamp_ms for r in items]
    body = b"".join(
        encode_record(record, delta, base_timestamp) for delta, record in enumerate(items)
    )
    count = len(items)
    covered = struct.pack(
        ">hiqqqhii", attributes, count - 1, base_timestamp, max(timestamps), producer_id,
        producer_epoch, base_sequence, count,
    ) + body
    crc = _crc32c(covered)
    length = 4 + 1 + 4 + len(covered)  # epoch, magic, crc, covered bytes
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, MAGIC, crc) + covered


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def varint(self) -> int:
        shift = 0
        value = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise CorruptRecordError("varint runs past the end of the batch", self.pos)
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1)
            shift += 7

    def blob(self) -> bytes | None:
        length = self.varint()
        if length < 0:
            return None
        if self.pos + length > len(self.data):
            raise CorruptRecordError("record field runs past the end of the batch", self.pos)
        value = self.data[self.pos : self.pos + length]
        self.pos += length
        return value


def decode_records(batch: bytes) -> list[DecodedRecord]:
    """The records of one uncompressed batch (tests, tools); CorruptRecordError on bad bytes,
    ValueError for a compressed batch."""
    header = parse_header(batch)
    if header.compression:
        raise ValueError(f"compressed batch ({CODECS.get(header.compression, '?')})")
    reader = _Reader(batch[: header.size], HEADER_SIZE)
    records = []
    for _ in range(header.records_count):
        length = reader.varint()
        end = reader.pos + length
        reader.pos += 1  # attributes
        timestamp_delta = reader.varint()
        offset_delta = reader.varint()
        key = reader.blob()
        value = reader.blob()
        headers = []
        for _ in range(reader.varint()):
            name = reader.blob()
            headers.append(((name or b"").decode("utf-8", "replace"), reader.blob()))
        if reader.pos != end:
            raise CorruptRecordError("record length does not match its fields", reader.pos)
        timestamp = (
            header.max_timestamp if header.log_append_time
            else header.base_timestamp + timestamp_delta
        )
        records.append(DecodedRecord(header.base_offset + offset_delta, timestamp, key, value,
                                     tuple(headers)))
    return records
