"""The log cleaner's pure part (Kafka's Cleaner): read segment files, build the offset map
(key -> offset of its latest record) over the dirty section, and rewrite a group of segments
keeping the latest record per key. Runs in the cleaner's worker thread: it only reads segment
files below the active segment (never appended to) and writes a new `.cleaned` file.

What a rewritten batch keeps, as Kafka's MemoryRecords.filterTo: its base offset, last
offset (lastOffsetDelta), leader epoch, producer id, epoch and base sequence, its codec and
timestamp type. A batch whose records all stay is copied byte for byte (unless its tombstones
need a delete horizon, KIP-534). Batches in every codec are read and rewritten
(broker/compression.py); a body that does not decompress makes the log uncleanable.

Where this differs from Kafka: kraft.log's SegmentedLog, which the partition log shares with
the Raft log, holds contiguous offsets only (its recovery and follower appends refuse a gap).
So a run of wholly removed batches is not dropped but replaced by one *filler*: an empty
batch (61 bytes, no records, no producer, no timestamp) spanning the run's offsets with the
run's leader epoch. Offsets are preserved, a fetch inside a removed range gets the filler
and the batches after it, and clients skip empty batches as they skip the ones Kafka keeps
for idempotent producers (the last batch of a producer is kept as an empty batch with its
producer fields here too).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from broker import compression
from broker.compression import assemble_batch
from broker.log.cleaner_txn import DELETE_HORIZON_BIT, REMOVE, SET_HORIZON, CleanedTxns
from broker.records import (
    CODEC_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    KAFKA_FORMAT,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    DecodedRecord,
    Record,
    RecordBatchHeader,
    encode_record,
    parse_header,
)
from kraft.log.base import CorruptRecordError

# The offset map is keyed by a 16-byte digest of the key, as Kafka's SkimpyOffsetMap (MD5).
# Its entries are CPython objects: a 16-byte bytes (49 B), an int offset (32 B) and the dict's
# share (24 B an entry, table growth by doubling); measured with tracemalloc at most 163 B an
# entry, including a resize's peak. Filled to 90 % of the buffer, as Kafka's.
DIGEST_BYTES = 16
OFFSET_MAP_ENTRY_BYTES = 168
OFFSET_MAP_LOAD_FACTOR = 0.9
_READ_BUFFER = 1 << 20
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_MAX_SPAN = 2**31 - 1  # lastOffsetDelta is an int32


class DedupeBufferTooSmall(Exception):
    """Not one segment's keys fit in the offset map (log.cleaner.dedupe.buffer.size)."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """A segment as the cleaner reads it: offsets [base, end), `size` bytes of `path`."""

    base: int
    end: int
    size: int
    path: str


@dataclass(slots=True)
class GroupResult:
    """What rewriting one group wrote and dropped, for the cleaner's stats."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    # The earliest delete horizon of a tombstone kept (the log must be cleaned again then).
    next_horizon_ms: int | None = None


@dataclass(slots=True)
class CleanRules:
    """What one cleaning pass decides by: the offset map (key digest -> latest offset), the
    time, delete.retention.ms and the offset of each producer's last batch (kept, if only
    empty, for idempotence)."""

    offsets: dict[bytes, int]
    now_ms: int
    delete_retention_ms: int
    producer_last_offsets: dict[int, int] = field(default_factory=dict)
    # Aborted transactions of the cleaned range (producer id -> [(first offset, marker offset)],
    # the aborted-transaction index's): their data is removed and never enters the offset map.
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    # The pass's transactions and markers (broker/log/cleaner_txn.py), across its groups.
    txns: CleanedTxns = field(init=False)

    def __post_init__(self) -> None:
        self.txns = CleanedTxns(self.now_ms, self.delete_retention_ms)


def is_aborted(header: RecordBatchHeader, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """Whether the batch is data of an aborted transaction (a marker never is)."""
    if not header.transactional or header.control or not aborted:
        return False
    ranges = aborted.get(header.producer_id)
    return ranges is not None and any(first <= header.base_offset <= last
                                      for first, last in ranges)


def key_digest(key: bytes) -> bytes:
    """The offset map's key for a record key."""
    return hashlib.blake2b(key, digest_size=DIGEST_BYTES).digest()


def map_capacity(dedupe_buffer_bytes: int, threads: int) -> int:
    """Keys one cleaner thread's offset map holds (Kafka divides the buffer among threads)."""
    per_thread = dedupe_buffer_bytes // max(threads, 1)
    return max(1, int(per_thread * OFFSET_MAP_LOAD_FACTOR) // OFFSET_MAP_ENTRY_BYTES)


def read_batches(segment: SegmentFile) -> Iterator[tuple[RecordBatchHeader, bytes]]:
    """Every batch of the segment file (its first `size` bytes), CRC checked. Plain buffered
    reads, not mmap: a segment cut meanwhile (a follower's truncation) must end in a short
    read, an error the cleaner aborts on, not a SIGBUS that kills the broker."""
    position = 0
    with open(segment.path, "rb", buffering=_READ_BUFFER) as file:
        while position < segment.size:
            prefix = _read_exactly(file, _PREFIX.size, segment, position)
            size = _PREFIX.size + _PREFIX.unpack(prefix)[1]
            if size < HEADER_SIZE or position + size > segment.size:
                raise CorruptRecordError(f"a batch of {size} bytes runs past the segment's "
                                         f"{segment.size} bytes", position, segment.path)
            blob = prefix + _read_exactly(file, size - _PREFIX.size, segment, position)
            _, _, error = KAFKA_FORMAT.scan_prefix(blob, segment.path, position)  # CRC, magic
            if error is not None:
                raise error
            yield parse_header(blob), blob
            position += size


def _read_exactly(file: BinaryIO, count: int, segment: SegmentFile,
                  position: int) -> bytes:
    data = file.read(count)
    if len(data) != count:
        raise CorruptRecordError(f"the file ends before its {segment.size} bytes: it was cut "
                                 "while being cleaned", position, segment.path)
    return data


def batch_records(header: RecordBatchHeader, blob: bytes) -> list[DecodedRecord] | None:
    """The batch's records in any codec (broker/compression.py), or None for a control batch,
    which the cleaner keeps whole. CodecError for a body that does not decompress (the log
    is then uncleanable, as in Kafka)."""
    if header.control:
        return None
    return compression.batch_records(header, blob)


def build_offset_map(
    segments: list[SegmentFile], start: int, capacity: int,
    aborted: dict[int, list[tuple[int, int]]] | None = None,
) -> tuple[dict[bytes, int], int]:
    """Key digest -> offset of its latest record over the dirty segments from `start`, at
    most `capacity` entries, checked as the map fills; with the offset the map reaches: the
    end of the last segment it holds whole. The entries of a segment it could not finish stay
    (they are later records of their keys, still in the log: dropping older ones is right).
    DedupeBufferTooSmall when the first segment does not fit."""
    offsets: dict[bytes, int] = {}
    reached = start
    for segment in segments:
        if segment.end <= start:
            continue
        for header, blob in read_batches(segment):
            if header.next_offset <= start or (aborted and is_aborted(header, aborted)):
                continue
            for record in batch_records(header, blob) or ():
                if record.key is None:
                    continue
                digest = key_digest(record.key)
                if digest not in offsets and len(offsets) >= capacity:
                    if reached == start:
                        raise DedupeBufferTooSmall(
                            f"{segment.path} holds more keys than the {capacity} the offset "
                            "map holds: raise log.cleaner.dedupe.buffer.size")
                    return offsets, reached
                offsets[digest] = record.offset
        reached = segment.end
    return offsets, reached


def group_segments(
    segments: list[SegmentFile], max_bytes: int
) -> list[list[SegmentFile]]:
    """Consecutive segments grouped while their sizes sum to at most `max_bytes`
    (segment.bytes) and their offsets span less than an int (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentFile]] = []
    current: list[SegmentFile] = []
    size = 0
    for segment in segments:
        if current and (size + segment.size > max_bytes
                        or segment.end - current[0].base > _MAX_SPAN):
            groups.append(current)
            current, size = [], 0
        current.append(segment)
        size += segment.size
    if current:
        groups.append(current)
    return groups


def clean_group(group: list[SegmentFile], rules: CleanRules, out_path: str) -> GroupResult:
    """Rewrite `group` into `out_path` (created, written, fsynced): the group's first batch
    starts at its first base offset and its batches end where the group ends."""
    result = GroupResult()
    writer = _Writer(out_path)
    try:
        filler: list[int] = []  # [first offset, next offset, epoch] of the removed run
        for segment in group:
            result.bytes_read += segment.size
            for header, blob in read_batches(segment):
                kept = _clean_batch(header, blob, rules, result)
                last = _producer_last(header, rules)
                if header.transactional and not header.control:
                    rules.txns.data_batch(header.producer_id, kept is not None or last)
                if kept is None and not last:
                    if filler and (filler[2] != header.partition_leader_epoch
                                   or header.next_offset - filler[0] > _MAX_SPAN):
                        writer.write(_filler(*filler))
                        filler = []
                    if not filler:
                        filler = [header.base_offset, 0, header.partition_leader_epoch]
                    filler[1] = header.next_offset
                    continue
                if filler:
                    writer.write(_filler(*filler))
                    filler = []
                writer.write(kept if kept is not None else _empty_like(header))
        if filler:
            writer.write(_filler(*filler))
        # As Kafka: the cleaned segment keeps the last source segment's modification time,
        # which stands in for the timestamps of a segment without any (retention, lag rules).
        writer.finish(max(os.stat(segment.path).st_mtime_ns for segment in group))
    except BaseException:
        writer.abandon()
        raise
    result.bytes_written = writer.size
    return result


def _producer_last(header: RecordBatchHeader, rules: CleanRules) -> bool:
    return (header.producer_id >= 0
            and rules.producer_last_offsets.get(header.producer_id) == header.last_offset)


def _clean_batch(
    header: RecordBatchHeader, blob: bytes, rules: CleanRules, result: GroupResult
) -> bytes | None:
    """The batch as it stays (maybe the original bytes), or None when no record stays."""
    if header.control and header.producer_id >= 0:
        return _clean_marker(header, blob, rules, result)
    if is_aborted(header, rules.aborted):
        result.records_removed += header.records_count
        return None
    records = batch_records(header, blob)
    if records is None:
        return blob
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None
    kept: list[DecodedRecord] = []
    tombstones = False
    for record in records:
        if _retain(record, horizon, rules):
            kept.append(record)
            tombstones = tombstones or record.value is None
    result.records_removed += len(records) - len(kept)
    if not kept:
        return None
    if tombstones:
        if horizon is None:
            horizon = rules.now_ms + rules.delete_retention_ms
        if result.next_horizon_ms is None or horizon < result.next_horizon_ms:
            result.next_horizon_ms = horizon
    if len(kept) == len(records) and (not tombstones or header.attributes
                                      & DELETE_HORIZON_BIT):
        return blob
    return _rebuild(header, kept, horizon if tombstones else None)


def _clean_marker(
    header: RecordBatchHeader, blob: bytes, rules: CleanRules, result: GroupResult
) -> bytes | None:
    """A producer's control batch as it stays, or None (broker/log/cleaner_txn.py)."""
    fate, horizon = rules.txns.marker(header, blob, _producer_last(header, rules))
    if horizon is not None and (result.next_horizon_ms is None
                                or horizon < result.next_horizon_ms):
        result.next_horizon_ms = horizon  # the pass that may remove it
    if fate == REMOVE:
        result.records_removed += header.records_count
        return None
    if fate == SET_HORIZON:
        return _rebuild(header, compression.batch_records(header, blob), horizon)
    return blob


def _retain(record: DecodedRecord, horizon: int | None, rules: CleanRules) -> bool:
    """Kafka's Cleaner.shouldRetainRecord: a keyed record that is its key's latest (or whose
    key the map does not cover: the clean section), a tombstone until its delete horizon."""
    if record.key is None:
        return False  # a compacted log has no use for it (Kafka counts it invalid)
    latest = rules.offsets.get(key_digest(record.key))
    if latest is not None and record.offset < latest:
        return False
    if record.value is None and horizon is not None:
        return rules.now_ms < horizon
    return True


def _rebuild(
    header: RecordBatchHeader, records: list[DecodedRecord], horizon: int | None
) -> bytes:
    """A batch of `records` with the header's offsets, epoch, producer fields and codec (at the
    codec's default level, as Kafka's MemoryRecords.filterTo rebuilds it)."""
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if horizon is not None:
        attributes |= DELETE_HORIZON_BIT
        base_timestamp = horizon
    else:
        base_timestamp = records[0].timestamp_ms
    if header.log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(record.timestamp_ms for record in records)
    body = b"".join(
        encode_record(Record(r.value, r.key, r.headers, r.timestamp_ms),
                      r.offset - header.base_offset, base_timestamp)
        for r in records)
    return assemble_batch(header.base_offset, header.partition_leader_epoch, attributes,
                          header.last_offset_delta, base_timestamp, max_timestamp,
                          header.producer_id, header.producer_epoch, header.base_sequence,
                          len(records), body)


def _empty_like(header: RecordBatchHeader) -> bytes:
    """The producer's last batch with no record left (Kafka keeps it for the producer's
    sequence and epoch)."""
    return assemble_batch(header.base_offset, header.partition_leader_epoch,
                          header.attributes & ~CODEC_MASK & ~DELETE_HORIZON_BIT,
                          header.last_offset_delta, header.base_timestamp,
                          header.max_timestamp, header.producer_id, header.producer_epoch,
                          header.base_sequence, 0, b"")


def _filler(first: int, next_offset: int, epoch: int) -> bytes:
    """An empty batch holding the offsets [first, next_offset) of removed batches."""
    return assemble_batch(first, epoch, 0, next_offset - first - 1, NO_TIMESTAMP,
                          NO_TIMESTAMP, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, 0, b"")


def is_filler(header: RecordBatchHeader) -> bool:
    """Whether the batch is a filler this cleaner wrote (no record, no producer)."""
    return (header.records_count == 0 and header.producer_id == NO_PRODUCER_ID
            and not header.attributes & CONTROL_BIT)


def trim_filler(data: bytes, offset: int) -> bytes:
    """`data` (batches read from the batch holding `offset`) with a first batch that is a
    filler starting below `offset` made to start at `offset`: fillers merge the removed
    batches of a run, so, unlike Kafka's gaps, one may straddle an original batch boundary
    where a follower's log ends."""
    if len(data) < HEADER_SIZE or int.from_bytes(data[:8], "big", signed=True) >= offset:
        return data
    header = parse_header(data)
    if not is_filler(header):
        return data
    return (_filler(offset, header.next_offset, header.partition_leader_epoch)
            + data[header.size:])


class _Writer:
    """A new segment file written in order, fsynced at the end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.size = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def write(self, blob: bytes) -> None:
        self._pending.append(blob)
        self._pending_bytes += len(blob)
        if self._pending_bytes >= 1 << 20:
            self._drain()

    def _drain(self) -> None:
        data = b"".join(self._pending)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.size += len(data)
        self._pending = []
        self._pending_bytes = 0

    def finish(self, mtime_ns: int) -> None:
        self._drain()
        os.utime(self._fd, ns=(mtime_ns, mtime_ns))
        os.fsync(self._fd)
        os.close(self._fd)

    def abandon(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass
        try:
            os.unlink(self.path)
        except OSError:
            pass
