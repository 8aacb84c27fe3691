"""A bounds-checking pass over a request frame before kio decodes it.

kio's native decoder trusts lengths: an array count of 2**31 makes it allocate that many slots
up front, and a failed allocation aborts the whole process (Rust's alloc error handler), which
no `except` can catch. It also raises KeyError on tagged fields it does not know, where Kafka
skips them. So every frame first goes through this scan, which walks the same schema kio
will use and
- checks every length and count against the bytes that are left (any element takes at least
  one byte, so count <= remaining is a safe bound),
- drops unknown tagged fields (rewriting the tag count), as Kafka's generated code does,
- requires each known tagged field to fill exactly the size it announced,
and raises ScanError on anything else. The scan only reads lengths: a 1 MB record batch costs
one bounds check, not a copy (the frame is rebuilt only when a tag was dropped).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

_FIXED_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_LENGTH_PREFIXED = ("string", "bytes", "records")


class ScanError(ValueError):
    """The frame is not a well-formed encoding of the schema."""


@dataclass(frozen=True, slots=True)
class _Field:
    kafka_type: str  # a primitive's type, or "" for an entity
    entity: type | None  # the nested schema for entities
    is_array: bool
    nullable: bool
    legacy_string: bool  # the request header's client_id: int16 length even when flexible


@dataclass(frozen=True, slots=True)
class _Plan:
    flexible: bool
    fixed_prefix: int  # bytes of the leading fixed-size fields, skipped in one step
    fields: tuple[_Field, ...]  # the untagged fields after them, in wire order
    tagged: dict[int, _Field]


@functools.cache
def _plan(entity: type) -> _Plan:
    is_header = entity.__name__ == "RequestHeader"
    untagged: list[_Field] = []
    tagged: dict[int, _Field] = {}
    for f in dataclasses.fields(entity):
        tag = get_field_tag(f)
        kind = classify_field(f)
        if isinstance(kind, EntityField | EntityTupleField):
            kafka_type, nested = "", kind.type_
        else:
            assert isinstance(kind, PrimitiveField | PrimitiveTupleField)
            kafka_type, nested = str(f.metadata["kafka_type"]), None
            if kafka_type not in _FIXED_SIZES and kafka_type not in _LENGTH_PREFIXED:
                raise TypeError(f"scan: unsupported kafka_type {kafka_type} in {entity}")
        spec = _Field(
            kafka_type,
            nested,
            kind.is_array,
            # Tagged fields are optional by their presence, never by a null marker.
            nullable=tag is None and is_optional(f),
            legacy_string=is_header and f.name == "client_id",
        )
        if tag is None:
            untagged.append(spec)
        else:
            tagged[int(tag)] = spec
    fixed_prefix = 0
    while untagged and _fixed_size(untagged[0]) is not None:
        fixed_prefix += _fixed_size(untagged.pop(0)) or 0
    return _Plan(
        bool(getattr(entity, "__flexible__", False)), fixed_prefix, tuple(untagged), tagged
    )


def _fixed_size(spec: _Field) -> int | None:
    if spec.is_array or spec.entity is not None:
        return None
    return _FIXED_SIZES.get(spec.kafka_type)


@functools.cache
def _element(array: _Field) -> _Field:
    return dataclasses.replace(array, is_array=False, nullable=False)


def prepare(entity: type) -> None:
    """Build (and so check) the plan of a schema ahead of the first frame."""
    _plan(entity)


class _Scanner:
    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self._pieces: list[bytes] = []  # output before _copied_to
        self._copied_to = pos
        self.changed = False

    # ---- output: the frame with unknown tags removed ----

    def _replace(self, start: int, stop: int, replacement: bytes) -> None:
        self._pieces.append(self.data[self._copied_to:start])
        self._pieces.append(replacement)
        self._copied_to = stop
        self.changed = True

    def output(self) -> bytes:
        """The bytes scanned so far, with the replacements made."""
        return b"".join([*self._pieces, self.data[self._copied_to:self.pos]])

    # ---- primitives ----

    def _take(self, size: int) -> int:
        start = self.pos
        if size < 0 or size > self.end - start:
            raise ScanError(f"needs {size} bytes at {start}, {self.end - start} left")
        self.pos = start + size
        return start

    def _int(self, size: int) -> int:
        start = self._take(size)
        return int.from_bytes(self.data[start:self.pos], "big", signed=True)

    def _uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):  # Kafka's unsigned varint is at most 5 bytes (32 bits)
            byte = self.data[self._take(1)]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise ScanError(f"unsigned varint longer than 5 bytes at {self.pos - 5}")

    def _length(self, flexible: bool, legacy_size: int, nullable: bool) -> int:
        """A length or count; -1 for null."""
        length = self._uvarint() - 1 if flexible else self._int(legacy_size)
        if length < -1 or (length == -1 and not nullable):
            raise ScanError(f"length {length} at {self.pos}")
        return length

    # ---- fields ----

    def entity(self, entity: type) -> None:
        plan = _plan(entity)
        if plan.fixed_prefix:
            self._take(plan.fixed_prefix)
        for spec in plan.fields:
            self._field(spec, plan.flexible)
        if plan.flexible:
            self._tags(plan)

    def _field(self, spec: _Field, flexible: bool) -> None:
        if spec.is_array:
            count = self._length(flexible, 4, spec.nullable)
            if count > self.end - self.pos:
                raise ScanError(f"array of {count} with {self.end - self.pos} bytes left")
            if spec.entity is None and spec.kafka_type in _FIXED_SIZES:
                self._take(max(count, 0) * _FIXED_SIZES[spec.kafka_type])
                return
            element = _element(spec)
            for _ in range(count):
                self._field(element, flexible)
            return
        if spec.entity is not None:
            if spec.nullable:
                marker = self._int(1)
                if marker == -1:
                    return
                if marker != 1:
                    raise ScanError(f"null marker {marker} at {self.pos - 1}")
            self.entity(spec.entity)
            return
        fixed = _FIXED_SIZES.get(spec.kafka_type)
        if fixed is not None:
            self._take(fixed)
            return
        legacy_size = 2 if spec.kafka_type == "string" else 4
        length = self._length(flexible and not spec.legacy_string, legacy_size, spec.nullable)
        if length > 0:
            self._take(length)

    def _tags(self, plan: _Plan) -> None:
        section_start = self.pos
        count = self._uvarint()
        if count > self.end - self.pos:
            raise ScanError(f"{count} tagged fields with {self.end - self.pos} bytes left")
        kept: list[bytes] = []
        dropped = rewritten = False
        last_tag = -1
        for _ in range(count):
            tag_start = self.pos
            tag = self._uvarint()
            size = self._uvarint()
            value_start = self._take(size)
            if tag <= last_tag:
                raise ScanError(f"tagged field {tag} out of order at {tag_start}")
            last_tag = tag
            spec = plan.tagged.get(tag)
            if spec is None:
                dropped = True  # an unknown tag: skipped, as Kafka does
                continue
            inner = _Scanner(self.data, value_start, self.pos)
            inner._field(spec, True)
            if inner.pos != self.pos:
                raise ScanError(f"tagged field {tag} fills {inner.pos - value_start} of {size}")
            if inner.changed:
                value = inner.output()
                kept.append(_uvarint_bytes(tag) + _uvarint_bytes(len(value)) + value)
                rewritten = True
            else:
                kept.append(self.data[tag_start:self.pos])
        if dropped or rewritten:
            self._replace(section_start, self.pos, _uvarint_bytes(len(kept)) + b"".join(kept))


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def sanitize(data: bytes, start: int, schemas: tuple[Any, ...]) -> bytes:
    """`data[start:]` checked against `schemas` one after another (a header, then a body),
    with unknown tagged fields removed."""
    scanner = _Scanner(data, start, len(data))
    try:
        for schema in schemas:
            scanner.entity(schema)
    except IndexError as exc:  # a read past the end that _take did not see first
        raise ScanError(str(exc)) from None
    # Bytes after the body are ignored, as Kafka's generated readers ignore them: librdkafka's
    # AdminClient sends Metadata v12 with 3 of them.
    if not scanner.changed and start == 0:
        return data  # the common case: no copy of the records
    return scanner.output()
