"""The data plane's side of the campaign without Kafka clients: what the data writers journal
(acknowledged records, records read, high watermarks seen) and each broker's partition logs
read straight from disk (no confluent-kafka here, so the checks and their unit tests need none).

A partition replica is `<log.dirs>/<topic>-<partition>/<20-digit base offset>.log` segments of
Kafka record batches v2 (broker/records.py): baseOffset i64 @0, batchLength i32 @8 (bytes
after it), partitionLeaderEpoch i32 @12, magic @16, CRC-32C @17 over [21, end). A follower
copies the leader's batches byte for byte (only baseOffset and the epoch are stamped by the
leader, once), so two replicas agree on an offset range exactly when their batches' bytes from
byte 12 on (epoch, magic, CRC, attributes, records) are equal."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from broker.records import HEADER_SIZE, LOG_OVERHEAD, compute_crc, decode_records, parse_header
from kraft.log.segmented import list_segments


@dataclass(frozen=True)
class Ack:
    """A record the producer's delivery report acknowledged (acks=all)."""

    producer: int
    partition: int
    offset: int | None  # None: a success reported without an offset (librdkafka does)
    value: bytes
    at_s: float


@dataclass(frozen=True)
class Read:
    """A record a consumer thread read during the campaign."""

    consumer: int
    partition: int
    offset: int
    value: bytes
    at_s: float


@dataclass(frozen=True)
class Watermark:
    """A high watermark a consumer saw for a partition (its fetch responses' HW, as the client
    caches it), journaled whenever it changed."""

    consumer: int
    partition: int
    high: int
    at_s: float


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    epoch: int
    body: bytes  # the batch from byte 12 on: everything a leader does not restamp per replica


@dataclass
class ReplicaLog:
    """One replica of one partition as its segment files hold it."""

    broker: int
    partition: int
    batches: list[Batch] = field(default_factory=list)
    records: dict[int, bytes] = field(default_factory=dict)  # offset -> value
    # offset -> (producer id, producer epoch, sequence): which producer call wrote the record
    # under which epoch (a value twice in two epochs is a client's epoch bump, checks.py).
    origins: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    torn_tail: str = ""  # an incomplete last batch (what kill -9 leaves above the HW)

    @property
    def end(self) -> int:
        """The offset after the last whole batch (0 for an empty log)."""
        return self.batches[-1].last + 1 if self.batches else 0


_FRAME = struct.Struct(">qi")


def read_replica(directory: Path, broker: int, partition: int) -> ReplicaLog:
    """Every whole batch of a replica's segments, CRC checked, with the values of its records.
    A short or bad batch at the very end of the last segment is a torn tail (a kill during the
    write); anywhere else, or a gap or overlap between batches, it is a problem."""
    log = ReplicaLog(broker, partition)
    if not directory.is_dir():
        return log
    segments = list_segments(directory)
    for k, (base_offset, path) in enumerate(segments):
        data = Path(path).read_bytes()
        pos = 0
        while pos < len(data):
            where = f"{path} byte {pos}"
            last_segment = k == len(segments) - 1
            if len(data) - pos < HEADER_SIZE:
                if last_segment:
                    log.torn_tail = f"{where}: {len(data) - pos} bytes, less than a header"
                else:
                    log.problems.append(f"{where}: {len(data) - pos} stray bytes")
                break
            _, length = _FRAME.unpack_from(data, pos)
            size = length + LOG_OVERHEAD
            if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > len(data):
                if last_segment:
                    log.torn_tail = f"{where}: batch of {size} bytes, {len(data) - pos} left"
                else:
                    log.problems.append(f"{where}: batch of {size} bytes runs past the end")
                break
            batch = data[pos:pos + size]
            header = parse_header(batch)
            if compute_crc(batch) != header.crc:
                if last_segment and pos + size == len(data):
                    log.torn_tail = f"{where}: CRC mismatch in the last batch"
                else:
                    log.problems.append(f"{where}: CRC mismatch (offset {header.base_offset})")
                break
            expected = log.end if log.batches else base_offset
            if header.base_offset != expected:
                log.problems.append(f"{where}: batch at offset {header.base_offset}, expected "
                                    f"{expected}")
            log.batches.append(Batch(header.base_offset, header.last_offset,
                                     header.partition_leader_epoch, bytes(batch[12:])))
            try:
                for record in decode_records(batch):
                    log.records[record.offset] = record.value or b""
                    log.origins[record.offset] = (
                        header.producer_id, header.producer_epoch,
                        header.base_sequence + record.offset - header.base_offset)
            except ValueError as exc:  # a compressed batch: the producers send none
                log.problems.append(f"{where}: {exc}")
            pos += size
    return log


def read_replicas(broker_dirs: dict[int, Path], topic: str,
                  partitions: int) -> dict[int, dict[int, ReplicaLog]]:
    """partition -> broker -> its replica, for every broker that has the partition's dir."""
    out: dict[int, dict[int, ReplicaLog]] = {}
    for p in range(partitions):
        for broker, log_dir in sorted(broker_dirs.items()):
            directory = log_dir / f"{topic}-{p}"
            if directory.is_dir():
                out.setdefault(p, {})[broker] = read_replica(directory, broker, p)
    return out
