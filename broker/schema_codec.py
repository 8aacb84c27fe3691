"""The bytes of Kafka's internal-topic message schemas (the coordinators' records in
`__consumer_offsets` and `__transaction_state`): one writer and one reader that
broker/group/records.py, broker/group/consumer_protocol/records.py and broker/txn/records.py
share, each keeping only its own schemas.

Big-endian ints, unsigned varints. A classic (`flexible=False`) body has int16-length strings
and int32-length arrays and bytes, -1 = null, and no tagged fields; a flexible one has compact
lengths (uvarint length + 1, 0 = null) and a tagged-field section after each struct. This module
imports nothing of the broker, so both coordinators' packages can use it.
"""

from __future__ import annotations

import struct
import uuid

_INT16_MAX = 32767


class RecordFormatError(ValueError):
    """Bytes that are not a record of the version they claim."""


class Writer:
    """Appends to `out`; every method returns the writer, so calls chain."""

    def __init__(self, flexible: bool = False) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def int8(self, value: int) -> Writer:
        self.out += struct.pack(">b", value)
        return self

    def int16(self, value: int) -> Writer:
        self.out += struct.pack(">h", value)
        return self

    def int32(self, value: int) -> Writer:
        self.out += struct.pack(">i", value)
        return self

    def int64(self, value: int) -> Writer:
        self.out += struct.pack(">q", value)
        return self

    def uvarint(self, value: int) -> Writer:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)
        return self

    def uuid(self, value: uuid.UUID) -> Writer:
        self.out += value.bytes
        return self

    def string(self, value: str | None) -> Writer:
        """A (nullable) string: compact when flexible, else int16-length."""
        if value is None:
            return self.uvarint(0) if self.flexible else self.int16(-1)
        data = value.encode()
        if self.flexible:
            self.uvarint(len(data) + 1)
        elif len(data) > _INT16_MAX:
            raise RecordFormatError(f"a {len(data)}-byte string does not fit an int16 length")
        else:
            self.int16(len(data))
        self.out += data
        return self

    def blob(self, value: bytes) -> Writer:
        """Bytes: compact when flexible, else int32-length."""
        self.uvarint(len(value) + 1) if self.flexible else self.int32(len(value))
        self.out += value
        return self

    def array_length(self, size: int | None) -> Writer:
        """An array's length (None = a null array): compact when flexible, else int32."""
        if self.flexible:
            return self.uvarint(0 if size is None else size + 1)
        return self.int32(-1 if size is None else size)

    def tags(self, fields: list[tuple[int, bytes]] | None = None) -> Writer:
        """A flexible struct's tagged-field section (tag, raw value), in tag order; nothing in
        a classic body."""
        if self.flexible:
            fields = fields or []
            self.uvarint(len(fields))
            for tag, data in fields:
                self.uvarint(tag).uvarint(len(data))
                self.out += data
        return self


class Reader:
    """Reads `data` from `pos`; a short or malformed record raises RecordFormatError.
    `flexible` may be set once the version (read classic) says so."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise RecordFormatError(f"record ends at {len(self.data)}, needs {self.pos + size}")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def int8(self) -> int:
        value: int = struct.unpack(">b", self.take(1))[0]
        return value

    def int16(self) -> int:
        value: int = struct.unpack(">h", self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = struct.unpack(">i", self.take(4))[0]
        return value

    def int64(self) -> int:
        value: int = struct.unpack(">q", self.take(8))[0]
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

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def length(self, wide: bool) -> int:
        """A length as written (negative = null): compact when flexible, else int32 if wide
        (arrays, bytes), int16 if not (strings)."""
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def text(self, size: int) -> str:
        """The next `size` bytes as UTF-8."""
        try:
            return self.take(size).decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def nullable_string(self) -> str | None:
        size = self.length(wide=False)
        return None if size < 0 else self.text(size)

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null in a non-nullable string")
        return value

    def blob(self) -> bytes:
        size = self.length(wide=True)
        return b"" if size < 0 else self.take(size)

    def array_length(self) -> int:
        """An array's element count (0 for null), checked against the record's size so that a
        corrupt count fails here rather than after a long loop."""
        size = self.length(wide=True)
        if size > len(self.data):
            raise RecordFormatError(f"array of {size} in a {len(self.data)}-byte record")
        return max(size, 0)

    def tags(self) -> None:
        """Skips a flexible struct's tagged fields (none in a classic body)."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.take(self.uvarint())
