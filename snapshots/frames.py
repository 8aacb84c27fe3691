"""Walking the batches of one file for `dump` and `verify`: every frame checked, records
decoded, and past a damaged batch when its length field can still be trusted (so `verify`
reports every problem, not only the first)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kraft.log.base import Batch, CorruptRecordError
from kraft.log.codec import (
    HEADER_SIZE,
    KRAFT_VERSION,
    KRAFT_VOTERS,
    LEADER_CHANGE,
    PREFIX_SIZE,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    decode_batches,
    decode_control_record,
    is_torn_tail,
    scan_prefix,
)
from metadata.record_json import record_to_json
from metadata.records import RecordDecodeError, decode_record
from metadata.security_records import redacted_json

CONTROL_NAMES = {LEADER_CHANGE: "LeaderChange", SNAPSHOT_HEADER: "SnapshotHeader",
                 SNAPSHOT_FOOTER: "SnapshotFooter", KRAFT_VERSION: "KRaftVersion",
                 KRAFT_VOTERS: "KRaftVoters"}


@dataclass(frozen=True, slots=True)
class Frame:
    """One intact batch and where it sits in its file."""

    batch: Batch
    position: int


@dataclass(frozen=True, slots=True)
class Damage:
    position: int
    reason: str
    torn_tail: bool = False  # the last frame of the file: what an interrupted write leaves


def walk(data: bytes, path: str) -> Iterator[Frame | Damage]:
    """Every intact batch and every damaged stretch, in file order."""
    position = 0
    end = len(data)
    while position < end:
        source = data if position == 0 else data[position:]
        headers, stop, error = scan_prefix(source, path, position)
        for header in headers:
            start = header.position - position
            try:
                batch = decode_batches(source[start : start + header.size], path,
                                       header.position)[0]
            except CorruptRecordError as exc:
                yield Damage(exc.position, exc.reason)
                continue
            yield Frame(batch, header.position)
        if error is None:
            return
        at = position + stop
        yield Damage(at, error.reason, is_torn_tail(data, at))
        skip = _trusted_size(data, at)
        if skip is None:
            return
        position = at + skip


def _trusted_size(data: bytes, position: int) -> int | None:
    """The frame's size when its length field is plausible (the damage is elsewhere in the
    frame, e.g. a flipped byte in the body), so the walk can continue after it."""
    if len(data) - position < HEADER_SIZE:
        return None
    size = int.from_bytes(data[position : position + 4], "big") + PREFIX_SIZE
    if size < HEADER_SIZE or position + size > len(data):
        return None
    # The next frame must start with a sane header too, or the length was the damaged field.
    following = position + size
    if following == len(data):
        return size
    headers, _, _ = scan_prefix(data[following : following + _peek(data, following)])
    return size if headers else None


def _peek(data: bytes, position: int) -> int:
    if len(data) - position < 4:
        return 0
    return int.from_bytes(data[position : position + 4], "big") + PREFIX_SIZE


def describe_record(batch: Batch, index: int) -> tuple[dict[str, Any], str | None]:
    """One record as dump prints it: (JSON, error or None)."""
    data = batch.records[index]
    if batch.control:
        try:
            kind, body = decode_control_record(data)
        except CorruptRecordError as exc:
            return {"control": None}, exc.reason
        name = CONTROL_NAMES.get(kind)
        if name is None:
            return {"controlType": kind, "body": body}, f"unknown control type {kind}"
        return {"controlType": name, "body": body}, None
    try:
        # kafka-dump-log prints a SCRAM credential's salt and keys; this tool never does.
        return {"payload": redacted_json(record_to_json(decode_record(data)))}, None
    except RecordDecodeError as exc:
        return {"payload": None}, str(exc)
