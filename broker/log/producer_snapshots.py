"""Producer-state snapshots (Kafka's `<offset>.snapshot` files in a partition directory): the
idempotent producers' state as it stood after every batch below the offset, so that a restart
or a truncation replays only the batch headers from a snapshot on, not the whole log.

As Kafka, a log writes one when it rolls a segment and when it is closed cleanly (the close
only when the tail since its latest snapshot is long enough to be worth a file), deletes those
past the log end on truncation and those below the log start with the segments. A file is
written without fsync and synced by the log's next flush job, like its other metadata files:
a power loss may lose it or leave it damaged, and one that is damaged or names offsets past the
log end is ignored, so the worst case is a longer replay.

The format is ours (Kafka's keeps only each producer's last batch; we keep the five the
duplicate check uses): version u16 = 2, CRC-32C u32 of what follows, offset i64, producer
count i32, then per producer id i64, epoch i16, batch count i8, its open transaction's first
offset i64 (-1: none), the coordinator epoch i32 and the offset i64 of its last marker (-1:
none), and per batch first and last sequence i32, first and last offset i64 and timestamp i64;
big-endian. Version 1 (no transaction fields) is read too.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque

import google_crc32c

from broker.log.producer_state import BATCHES_KEPT, BatchMetadata, ProducerEntry, ProducerState

logger = logging.getLogger(__name__)

SUFFIX = ".snapshot"
VERSION = 2
_VERSIONS = (1, 2)
_NAME = re.compile(r"(\d{20})\.snapshot")
_HEAD = struct.Struct(">HI")
_BODY = struct.Struct(">qi")
_PRODUCER = struct.Struct(">qhb")
_TXN = struct.Struct(">qiq")  # version 2: open transaction's first offset, coordinator epoch,
# last marker offset
_BATCH = struct.Struct(">iiqqq")


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SUFFIX}")


def list_snapshots(directory: str, names: list[str] | None = None) -> list[int]:
    """The offsets of the snapshot files in `directory` (or among `names`), ascending."""
    found = []
    for name in os.listdir(directory) if names is None else names:
        match = _NAME.fullmatch(name)
        if match is not None:
            found.append(int(match.group(1)))
    return sorted(found)


def encode(offset: int, producers: ProducerState) -> bytes:
    parts = [_BODY.pack(offset, len(producers))]
    for entry in producers.entries():
        parts.append(_PRODUCER.pack(entry.producer_id, entry.epoch, len(entry.batches)))
        parts.append(_TXN.pack(entry.txn_first_offset, entry.coordinator_epoch,
                               entry.last_marker_offset))
        parts += [_BATCH.pack(*batch) for batch in entry.batches]
    body = b"".join(parts)
    return _HEAD.pack(VERSION, google_crc32c.value(body)) + body


def decode(data: bytes) -> tuple[int, list[ProducerEntry]]:
    """(offset, entries); ValueError when the bytes are not a whole snapshot."""
    if len(data) < _HEAD.size + _BODY.size:
        raise ValueError(f"{len(data)} bytes, shorter than a snapshot header")
    version, crc = _HEAD.unpack_from(data, 0)
    body = data[_HEAD.size:]
    if version not in _VERSIONS:
        raise ValueError(f"version {version}, expected one of {_VERSIONS}")
    if google_crc32c.value(body) != crc:
        raise ValueError("CRC32C mismatch")
    offset, count = _BODY.unpack_from(body, 0)
    position = _BODY.size
    entries = []
    try:
        for _ in range(count):
            producer_id, epoch, batches = _PRODUCER.unpack_from(body, position)
            position += _PRODUCER.size
            txn = (-1, -1, -1)
            if version >= 2:
                txn = _TXN.unpack_from(body, position)
                position += _TXN.size
            kept: deque[BatchMetadata] = deque(maxlen=BATCHES_KEPT)
            for _ in range(batches):
                kept.append(BatchMetadata(*_BATCH.unpack_from(body, position)))
                position += _BATCH.size
            entries.append(ProducerEntry(producer_id, epoch, kept, *txn))
    except struct.error as exc:
        raise ValueError(f"truncated: {exc}") from None
    if position != len(body):
        raise ValueError(f"{len(body) - position} bytes after the last producer")
    return offset, entries


def write(directory: str, offset: int, producers: ProducerState) -> str:
    """Write the snapshot at `offset` without fsync (module docstring); its path. Straight
    to its own name, no rename: a file cut short by a crash fails its CRC and is ignored."""
    path = snapshot_path(directory, offset)
    data = memoryview(encode(offset, producers))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return path


def read_latest(directory: str, offsets: list[int], end: int
                ) -> tuple[int, list[ProducerEntry]] | None:
    """The latest readable snapshot among `offsets` at or below `end`; None without one.
    One that does not read back is logged and skipped (an older one, or a longer replay)."""
    for offset in reversed(offsets):
        if offset > end:
            continue
        path = snapshot_path(directory, offset)
        try:
            with open(path, "rb") as file:
                found, entries = decode(file.read())
            if found != offset:
                raise ValueError(f"it holds offset {found}")
        except (OSError, ValueError) as exc:
            logger.warning("ignoring the producer snapshot %s: %s", path, exc)
            continue
        return offset, entries
    return None


def delete(directory: str, offsets: list[int]) -> None:
    """Remove the snapshots at `offsets` (past a truncation, below the log start)."""
    for offset in offsets:
        try:
            os.unlink(snapshot_path(directory, offset))
        except FileNotFoundError:
            pass
