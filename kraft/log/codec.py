"""The record batch format, on the wire and on disk (docs/log-format.md).

A batch is encoded once by the leader, CRC'd once and then shipped and stored as-is. Layout,
big-endian:

    0  length             u32  bytes after the crc field (batch size - 8)
    4  crc                u32  CRC32C of bytes [8 : 8 + length]
    8  magic              u8   = 1
    9  attributes         u8   bit 0 = control batch
    10 base_offset        i64
    18 epoch              i32
    22 record_count       i32  >= 1
    26 first_timestamp_ms i64
    34 max_timestamp_ms   i64
    42 records            record_count x (u32 length + bytes)

Every decoding failure is a CorruptRecordError naming the byte position of the bad batch: the
bytes come from disks and peers, and callers must never see a struct.error or IndexError.
"""

from __future__ import annotations

import json
import mmap
import struct
from collections.abc import Sequence
from typing import NamedTuple

import google_crc32c

from kraft.log.base import Batch, CorruptRecordError

MAGIC = 1
ATTR_CONTROL = 0x01
HEADER_SIZE = 42
# Bytes before the CRC-covered part (length + crc).
PREFIX_SIZE = 8

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5  # KIP-853: the finalized kraft.version level
KRAFT_VOTERS = 6  # KIP-853: the whole voter set (kraft/core/voters.py)

_MAX_I32 = 2**31 - 1
_MAX_I64 = 2**63 - 1
_MIN_I64 = -(2**63)

_PREFIX = struct.Struct(">II")
_HEADER = struct.Struct(">IIBBqiiqq")
_BODY_HEADER = struct.Struct(">BBqiiqq")
_HEADER_AND_LENGTH = struct.Struct(">BBqiiqqI")  # body header + the first record's length
_U32 = struct.Struct(">I")
_TIMESTAMPS = struct.Struct(">qq")
_TIMESTAMPS_AT = 26
_U16 = struct.Struct(">H")
_crc32c = google_crc32c.value
_crc32c_extend = google_crc32c.extend

# What the decoders accept. bytearray/memoryview are copied once to bytes because
# google_crc32c only takes buffers without a release hook (bytes, mmap slices are bytes).
ByteSource = bytes | bytearray | memoryview | mmap.mmap


class BatchHeader(NamedTuple):
    """A batch whose frame and CRC were verified but whose records were not split.

    `position` is the byte offset of the batch in the scanned buffer plus `base_position`.
    """

    base_offset: int
    epoch: int
    record_count: int
    position: int
    size: int
    control: bool
    crc: int

    @property
    def next_offset(self) -> int:
        """One past the last offset of the batch."""
        return self.base_offset + self.record_count


def encode_batch(
    base_offset: int,
    epoch: int,
    records: Sequence[bytes],
    timestamp_ms: int,
    control: bool = False,
) -> bytes:
    """Encode one batch. Raises ValueError for empty `records` or out-of-range fields."""
    count = len(records)
    if count == 0:
        raise ValueError("a batch needs at least one record")
    if not 0 <= base_offset <= _MAX_I64 - count:
        raise ValueError(f"base_offset out of range: {base_offset}")
    if not 0 <= epoch <= _MAX_I32 or count > _MAX_I32:
        raise ValueError(f"epoch or record count out of range: {epoch}, {count}")
    if not _MIN_I64 <= timestamp_ms <= _MAX_I64:
        raise ValueError(f"timestamp out of range: {timestamp_ms}")
    attributes = ATTR_CONTROL if control else 0
    try:
        if count == 1:
            # The common single-record batch: one pack, one CRC call, two concatenations
            # (measured 2x faster than the general path below).
            record = records[0]
            payload = _HEADER_AND_LENGTH.pack(
                MAGIC, attributes, base_offset, epoch, 1, timestamp_ms, timestamp_ms, len(record)
            ) + record
            return _PREFIX.pack(len(payload), _crc32c(payload)) + payload
        pack = _U32.pack
        # A plain loop beats chain/zip/map here (measured: ~0.15 us per record).
        parts: list[bytes] = []
        append = parts.append
        for record in records:
            append(pack(len(record)))
            append(record)
        body = b"".join(parts)
    except struct.error as exc:
        raise ValueError(f"record too large: {exc}") from None
    head = _BODY_HEADER.pack(
        MAGIC, attributes, base_offset, epoch, count, timestamp_ms, timestamp_ms
    )
    # CRC the header and extend over the body: the body is copied once, by the final join.
    crc = _crc32c_extend(_crc32c(head), body)
    return b"".join((_PREFIX.pack(len(head) + len(body), crc), head, body))


def _as_source(data: ByteSource) -> bytes | mmap.mmap:
    if isinstance(data, bytes | mmap.mmap):
        return data
    return bytes(data)


def scan_prefix(
    data: ByteSource, path: str | None = None, base_position: int = 0
) -> tuple[list[BatchHeader], int, CorruptRecordError | None]:
    """Scan valid frames from the start; stop at the first bad one.

    Returns (headers, position where scanning stopped, the error there or None). Log recovery
    uses this to decide between cutting a torn tail and refusing to open.
    """
    source = _as_source(data)
    end = len(source)
    pos = 0
    headers: list[BatchHeader] = []
    append = headers.append
    unpack = _HEADER.unpack_from
    crc32c = _crc32c
    make = tuple.__new__  # 2.5x faster than BatchHeader(...) on this hot path
    while pos < end:
        if end - pos >= HEADER_SIZE:
            length, crc, magic, attrs, base, epoch, count, _, _ = unpack(source, pos)
            size = length + PREFIX_SIZE
            stop = pos + size
            # One combined test; the reason is worked out only for a bad frame.
            if (
                size >= HEADER_SIZE
                and stop <= end
                and crc32c(source[pos + PREFIX_SIZE : stop]) == crc
                and magic == MAGIC
                and attrs <= ATTR_CONTROL
                and base >= 0
                and epoch >= 0
                and 0 < count * 4 <= size - HEADER_SIZE
                and base <= _MAX_I64 - count
            ):
                append(make(BatchHeader, (base, epoch, count, base_position + pos, size,
                                          attrs == ATTR_CONTROL, crc)))
                pos = stop
                continue
        return headers, pos, _frame_error(source, pos, path, base_position)
    return headers, pos, None


def _frame_error(
    source: bytes | mmap.mmap, pos: int, path: str | None, base_position: int
) -> CorruptRecordError:
    """Why the frame at `pos` is bad (the slow path of scan_prefix)."""
    left = len(source) - pos
    where = base_position + pos
    if left < HEADER_SIZE:
        return CorruptRecordError(f"{left} bytes left, shorter than a batch header", where, path)
    length, crc, magic, attrs, base, epoch, count, _, _ = _HEADER.unpack_from(source, pos)
    size = length + PREFIX_SIZE
    if size < HEADER_SIZE:
        return CorruptRecordError(f"length {length} is too small", where, path)
    if size > left:
        return CorruptRecordError(
            f"batch of {size} bytes runs past the end ({left} bytes left)", where, path
        )
    if magic != MAGIC:
        return CorruptRecordError(f"unknown magic {magic}", where, path)
    actual = _crc32c(source[pos + PREFIX_SIZE : pos + size])
    if actual != crc:
        return CorruptRecordError(
            f"CRC32C mismatch (stored {crc:#010x}, computed {actual:#010x})", where, path
        )
    if attrs & ~ATTR_CONTROL:
        return CorruptRecordError(f"unknown attribute bits {attrs:#04x}", where, path)
    if base < 0 or epoch < 0:
        return CorruptRecordError(f"negative base offset {base} or epoch {epoch}", where, path)
    if count < 1 or count * 4 > size - HEADER_SIZE:
        return CorruptRecordError(
            f"record count {count} does not fit a batch of {size} bytes", where, path
        )
    return CorruptRecordError(f"offsets overflow from {base}", where, path)


def scan_batches(
    data: ByteSource, path: str | None = None, base_position: int = 0
) -> list[BatchHeader]:
    """Verify every frame and CRC without splitting records (the follower append path)."""
    headers, _, error = scan_prefix(data, path, base_position)
    if error is not None:
        raise error
    return headers


def decode_batches(
    data: ByteSource, path: str | None = None, base_position: int = 0
) -> list[Batch]:
    """Decode every batch in `data`, records included."""
    source = _as_source(data)
    headers, _, error = scan_prefix(source, path, base_position)
    batches: list[Batch] = []
    unpack_len = _U32.unpack_from
    for header in headers:
        pos = header.position - base_position
        frame_end = pos + header.size
        first_ts, max_ts = _TIMESTAMPS.unpack_from(source, pos + _TIMESTAMPS_AT)
        rpos = pos + HEADER_SIZE
        records: list[bytes] = []
        add = records.append
        for _ in range(header.record_count):
            if rpos + 4 > frame_end:
                raise CorruptRecordError(
                    "record length field past the end of the batch", header.position, path
                )
            (rlen,) = unpack_len(source, rpos)
            rpos += 4
            if rpos + rlen > frame_end:
                raise CorruptRecordError(
                    "record runs past the end of the batch", header.position, path
                )
            add(source[rpos : rpos + rlen])
            rpos += rlen
        if rpos != frame_end:
            raise CorruptRecordError(
                f"{frame_end - rpos} bytes after the last record", header.position, path
            )
        batches.append(
            Batch(header.base_offset, header.epoch, tuple(records), first_ts, max_ts,
                  header.control, header.crc, header.size)
        )
    if error is not None:
        raise error
    return batches


def is_torn_tail(data: ByteSource, position: int) -> bool:
    """Whether a bad frame at `position` looks like an interrupted write at the end of `data`
    rather than corruption: it runs past the end, it is the last frame, or nothing but zero
    bytes follow."""
    source = _as_source(data)
    end = len(source)
    if end - position < HEADER_SIZE:
        return True
    (length,) = _U32.unpack_from(source, position)
    if position + PREFIX_SIZE + length >= end:
        return True
    return _all_zero(source, position, end)


def _all_zero(source: bytes | mmap.mmap, start: int, end: int) -> bool:
    chunk = 1 << 20
    zeros = bytes(min(chunk, end - start))
    while start < end:
        stop = min(start + chunk, end)
        if source[start:stop] != zeros[: stop - start]:
            return False
        start = stop
    return True


def encode_control_record(ctype: int, body: dict[str, object]) -> bytes:
    """A control record: u16 type, then the body as compact UTF-8 JSON."""
    if not 0 <= ctype <= 0xFFFF:
        raise ValueError(f"control type out of range: {ctype}")
    return _U16.pack(ctype) + json.dumps(body, separators=(",", ":")).encode()


def decode_control_record(data: bytes) -> tuple[int, dict[str, object]]:
    """Inverse of encode_control_record; CorruptRecordError (position 0) on bad input."""
    if len(data) < 2:
        raise CorruptRecordError("control record shorter than its type field", 0)
    (ctype,) = _U16.unpack_from(data, 0)
    try:
        body = json.loads(bytes(data[2:]).decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptRecordError(f"control record body is not JSON: {exc}", 0) from None
    if not isinstance(body, dict):
        raise CorruptRecordError("control record body is not a JSON object", 0)
    return ctype, body


def control_batches(data: bytes) -> list[Batch]:
    """The control batches among already verified batches in `data`, decoded: a walk over
    the frames that decodes only the (rare, small) control batches, so a follower's append
    of megabytes of data costs no second CRC pass."""
    found: list[Batch] = []
    position = 0
    end = len(data)
    while position + HEADER_SIZE <= end:
        (length,) = _U32.unpack_from(data, position)
        size = PREFIX_SIZE + length
        if data[position + 9] & ATTR_CONTROL:
            found.extend(decode_batches(data[position : position + size], None, position))
        position += size
    return found
