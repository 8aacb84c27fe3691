"""The `kraft-partitions` PySpark data source: the brokers' partition logs (Kafka record
batches v2), the sibling of `kraft-metadata` for the data plane. One row per batch per replica,
one Spark partition per segment file.

    spark.dataSource.register(KraftPartitionsDataSource)
    spark.read.format("kraft-partitions").load([log_dir1, log_dir2, log_dir3])
    spark.read.format("kraft-partitions").option("table", "replicas").load([...])

A path is a broker's log dir (it holds `meta.properties`, `replication-offset-checkpoint`, the
`<topic>-<partition>/` directories and `__cluster_metadata-0/`) or that `__cluster_metadata-0`
directory, whose parent is then the log dir. Local paths only.

Options (strings, keys case-insensitive):
  nodeIds  "1,2,3": node ids for the paths, in order (default: each meta.properties)
  table    "batches" (default): one row per batch; "replicas": one row per replica with its
           high watermark from the log dir's `replication-offset-checkpoint`

A segment that stops with a bad frame yields one extra row whose `error` names the file and
the byte offset (`torn tail: ...` when it looks like an interrupted write at the end of the
file), never a failed task. The batch header is parsed here, not with broker/records.py: the
audit and the broker are independent layers (pyproject's import contracts).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import google_crc32c
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from audit.errors import LayoutError
from audit.fs import is_uri
from kraft.log.meta_properties import StorageError, read_meta_properties
from metadata.topics import METADATA_PARTITION_DIR

NAME = "kraft-partitions"
REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC = 2
CRC_START = 21
CONTROL_BIT = 0x20
TRANSACTIONAL_BIT = 0x10
ABORT, COMMIT = 0, 1  # a control record's type (its key: int16 version 0, int16 type)
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_SEGMENT = re.compile(r"(\d{20})\.log")
_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_CHUNK = 4096  # rows per Arrow batch

BATCH_COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("node_id", pa.int32(), "int"),
    ("topic", pa.string(), "string"),
    ("partition", pa.int32(), "int"),
    ("topic_id", pa.string(), "string"),
    ("base_offset", pa.int64(), "bigint"),
    ("last_offset", pa.int64(), "bigint"),
    ("leader_epoch", pa.int32(), "int"),
    ("batch_crc", pa.int64(), "bigint"),
    ("digest", pa.string(), "string"),  # BLAKE2b-64 of bytes [12:]: epoch, magic, CRC, body
    ("record_count", pa.int32(), "int"),
    ("max_timestamp", pa.int64(), "bigint"),
    ("producer_id", pa.int64(), "bigint"),
    ("producer_epoch", pa.int16(), "smallint"),
    ("is_transactional", pa.bool_(), "boolean"),
    ("is_control", pa.bool_(), "boolean"),
    # a control batch's record type: 0 ABORT, 1 COMMIT (a transaction marker), another
    # number for another control type, -1 when the record does not decode; null otherwise
    ("control_type", pa.int16(), "smallint"),
    ("file", pa.string(), "string"),
    ("position", pa.int64(), "bigint"),
    ("size", pa.int32(), "int"),
    ("error", pa.string(), "string"),
)
REPLICA_COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("node_id", pa.int32(), "int"),
    ("topic", pa.string(), "string"),
    ("partition", pa.int32(), "int"),
    ("topic_id", pa.string(), "string"),
    ("directory", pa.string(), "string"),
    ("hw", pa.int64(), "bigint"),  # null: no entry in replication-offset-checkpoint
    ("segments", pa.int32(), "int"),
    ("problems", pa.list_(pa.string()), "array<string>"),
)
BATCH_SCHEMA = pa.schema([(n, t) for n, t, _ in BATCH_COLUMNS])
REPLICA_SCHEMA = pa.schema([(n, t) for n, t, _ in REPLICA_COLUMNS])
BATCH_DDL = ", ".join(f"{n} {d}" for n, _, d in BATCH_COLUMNS)
REPLICA_DDL = ", ".join(f"{n} {d}" for n, _, d in REPLICA_COLUMNS)


@dataclass(frozen=True)
class Replica:
    """One partition directory of one broker."""

    node_id: int
    topic: str
    partition: int
    directory: str
    topic_id: str | None
    hw: int | None
    segments: tuple[tuple[int, str], ...]  # (base offset, path), by base offset
    epochs: tuple[tuple[int, int], ...]  # leader-epoch-checkpoint: (epoch, start offset)
    problems: tuple[str, ...]  # checkpoint files that did not parse


def log_dir_of(path: str) -> str:
    """A broker's log dir for a --log-dir value (the dir itself or its __cluster_metadata-0)."""
    path = os.path.abspath(path)
    if os.path.basename(os.path.normpath(path)) == METADATA_PARTITION_DIR:
        return os.path.dirname(os.path.normpath(path))
    return path


def _text_lines(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().splitlines()
    except FileNotFoundError:
        return None


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int] | None:
    """Kafka's per-log-dir checkpoint (`0`, count, `topic partition offset` lines); None when
    the file is missing; LayoutError naming the path and line when it does not parse."""
    try:
        lines = _text_lines(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path}: unreadable: {exc}") from None
    if lines is None:
        return None
    if len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit():
        raise LayoutError(f"{path}, line 1: expected version 0 and an entry count")
    count = int(lines[1])
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise LayoutError(f"{path}, line 2: {count} entries announced, {len(entries)} found")
    out: dict[tuple[str, int], int] = {}
    for number, line in enumerate(entries, start=3):
        parts = line.split()
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].lstrip("-").isdigit():
            raise LayoutError(f"{path}, line {number}: expected 'topic partition offset'")
        out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def read_leader_epochs(path: str) -> tuple[tuple[int, int], ...]:
    """leader-epoch-checkpoint entries (epoch, start offset); LayoutError when it is damaged."""
    try:
        lines = _text_lines(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path}: unreadable: {exc}") from None
    if lines is None:
        return ()
    entries = [line.split() for line in lines[2:] if line.strip()]
    if (len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit()
            or int(lines[1]) != len(entries)
            or any(len(e) != 2 or not all(x.isdigit() for x in e) for e in entries)):
        raise LayoutError(f"{path}: not a leader-epoch-checkpoint (0, count, 'epoch offset')")
    return tuple((int(e), int(o)) for e, o in entries)


def read_topic_id(path: str) -> str | None:
    try:
        lines = _text_lines(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path}: unreadable: {exc}") from None
    for line in lines or ():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "topic_id":
            return value.strip()
    if lines is not None:
        raise LayoutError(f"{path}: no topic_id line")
    return None


def discover_replicas(path: str, node_id: int | None = None) -> list[Replica]:
    """Every partition directory of a broker's log dir (none for a controller's); the node id
    from meta.properties unless given. LayoutError (one line) for a missing directory, a URI,
    or a node id that cannot be found."""
    if is_uri(path):
        raise LayoutError(f"{path}: the kraft-partitions source reads local paths only")
    log_dir = log_dir_of(path)
    if not os.path.isdir(log_dir):
        raise LayoutError(f"log directory {log_dir} does not exist or is not a directory")
    if node_id is None:
        try:
            meta = read_meta_properties(log_dir)
        except StorageError as exc:
            raise LayoutError(str(exc)) from None
        if meta is None:
            raise LayoutError(f"{log_dir} has no meta.properties: give its node id (nodeIds)")
        node_id = meta.node_id
    log_problems: list[str] = []
    try:
        hws = read_offset_checkpoint(os.path.join(log_dir, REPLICATION_OFFSET_FILE))
    except LayoutError as exc:
        hws, log_problems = None, [str(exc)]
    try:
        return _replicas(log_dir, node_id, hws, log_problems)
    except OSError as exc:
        raise LayoutError(f"cannot read the partition logs of {log_dir}: {exc}") from None


def _replicas(log_dir: str, node_id: int, hws: dict[tuple[str, int], int] | None,
              log_problems: list[str]) -> list[Replica]:
    out = []
    for name in sorted(os.listdir(log_dir)):
        match = _PARTITION_DIR.fullmatch(name)
        directory = os.path.join(log_dir, name)
        if name == METADATA_PARTITION_DIR or match is None or not os.path.isdir(directory):
            continue
        topic, partition = match.group(1), int(match.group(2))
        problems = list(log_problems)
        try:
            epochs = read_leader_epochs(os.path.join(directory, LEADER_EPOCH_FILE))
        except LayoutError as exc:
            epochs, problems = (), [*problems, str(exc)]
        try:
            topic_id = read_topic_id(os.path.join(directory, PARTITION_METADATA_FILE))
        except LayoutError as exc:
            topic_id, problems = None, [*problems, str(exc)]
        segments = tuple(sorted((int(m.group(1)), os.path.join(directory, n))
                                for n in os.listdir(directory)
                                if (m := _SEGMENT.fullmatch(n))))
        hw = None if hws is None else hws.get((topic, partition))
        out.append(Replica(node_id, topic, partition, directory, topic_id, hw, segments,
                           epochs, tuple(problems)))
    return out


def replicas_of(options: Mapping[str, str]) -> list[Replica]:
    """The replicas of every path the (lower-cased) options name."""
    if "paths" in options:
        paths = list(json.loads(options["paths"]))
    elif "path" in options:
        paths = [p for p in options["path"].split(",") if p]
    else:
        raise LayoutError("kraft-partitions needs at least one broker log directory: load(path)")
    ids: list[int | None] = [None] * len(paths)
    if options.get("nodeids"):
        try:
            ids = [int(i) for i in options["nodeids"].split(",")]
        except ValueError:
            raise LayoutError(f"nodeIds must be integers: {options['nodeids']!r}") from None
        if len(ids) != len(paths):
            raise LayoutError(f"nodeIds names {len(ids)} nodes for {len(paths)} paths")
    return [r for path, node in zip(paths, ids, strict=True)
            for r in discover_replicas(path, node)]


# -- one segment into rows ----------------------------------------------------------------------


def _is_torn_tail(data: bytes | mmap.mmap, pos: int) -> bool:
    """A bad frame that looks like an interrupted write: it runs past the end of the file, it
    is the last frame, or only zeros follow it (broker/records.py's rule)."""
    end = len(data)
    if end - pos < HEADER_SIZE:
        return True
    (length,) = struct.unpack_from(">i", data, pos + 8)
    if pos + LOG_OVERHEAD + length >= end:
        return True
    return all(b == 0 for b in data[pos:end])


def _frame_error(data: bytes | mmap.mmap, pos: int) -> str | None:
    """Why the frame at `pos` is bad, or None when it is a valid batch."""
    left = len(data) - pos
    if left < HEADER_SIZE:
        return f"{left} bytes left, shorter than a batch header"
    base, length, epoch, magic, crc, _, delta = _HEADER.unpack_from(data, pos)[:7]
    size = length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        return f"batch length {length} is too small"
    if size > left:
        return f"batch of {size} bytes runs past the end ({left} bytes left)"
    if magic != MAGIC:
        return f"magic {magic}, expected 2"
    actual = google_crc32c.value(bytes(data[pos + CRC_START:pos + size]))
    if actual != crc:
        return f"CRC32C mismatch (stored {crc:#010x}, computed {actual:#010x})"
    if base < 0 or epoch < 0 or delta < 0:
        return f"negative base offset {base}, leader epoch {epoch} or last offset delta {delta}"
    return None


def _varint(data: bytes | mmap.mmap, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's record fields) at `pos`: (value, next position)."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("varint runs past the batch")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def control_type(data: bytes | mmap.mmap, pos: int, stop: int) -> int:
    """The type of the first record of the (uncompressed) control batch at `pos`: its key's
    int16 version 0 and int16 type; -1 when it does not decode."""
    try:
        at = pos + HEADER_SIZE
        _, at = _varint(data, at, stop)  # record length
        at += 1  # record attributes
        for _ in range(2):  # timestamp delta, offset delta
            _, at = _varint(data, at, stop)
        key_length, at = _varint(data, at, stop)
    except ValueError:
        return -1
    if key_length < 4 or at + 4 > stop:
        return -1
    version, kind = struct.unpack_from(">hh", data, at)
    return kind if version == 0 else -1


def scan_segment(replica: Replica, base_offset: int, path: str,
                 last: bool) -> Iterator[dict[str, object]]:
    """The rows of one segment: one per batch, then one with `error` set when the file stops
    with a bad frame (where: `file` and `position`; `base_offset` is the offset expected
    there). `last` says whether this is the replica's last segment (torn tails are judged
    there only)."""
    common = {"node_id": replica.node_id, "topic": replica.topic,
              "partition": replica.partition, "topic_id": replica.topic_id, "file": path}
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            pos, expected = 0, base_offset
            while pos < size:
                reason = _frame_error(data, pos)
                if reason is not None:
                    torn = last and _is_torn_tail(data, pos)
                    yield {**common, "base_offset": expected, "position": pos,
                           "error": f"{'torn tail: ' if torn else ''}corrupt record batch in "
                                    f"{path} at byte {pos}: {reason}"}
                    return
                (base, length, epoch, _, crc, attributes, delta, _, max_ts, producer_id,
                 producer_epoch, _, count) = _HEADER.unpack_from(data, pos)
                stop = pos + length + LOG_OVERHEAD
                digest = hashlib.blake2b(data[pos + LOG_OVERHEAD:stop], digest_size=8)
                control = bool(attributes & CONTROL_BIT)
                yield {**common, "base_offset": base, "last_offset": base + delta,
                       "leader_epoch": epoch, "batch_crc": crc, "digest": digest.hexdigest(),
                       "record_count": count, "max_timestamp": max_ts,
                       "producer_id": producer_id, "producer_epoch": producer_epoch,
                       "is_transactional": bool(attributes & TRANSACTIONAL_BIT),
                       "is_control": control,
                       "control_type": control_type(data, pos, stop) if control else None,
                       "position": pos, "size": stop - pos}
                expected = base + delta + 1
                pos = stop


def _arrow(rows: list[dict[str, object]], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=schema)


@dataclass(frozen=True)
class SegmentPartition(InputPartition):
    replica: Replica
    base_offset: int
    path: str
    last: bool


@dataclass(frozen=True)
class ReplicasPartition(InputPartition):
    replicas: tuple[Replica, ...]


def read_segment(part: SegmentPartition) -> Iterator[pa.RecordBatch]:
    rows: list[dict[str, object]] = []
    for row in scan_segment(part.replica, part.base_offset, part.path, part.last):
        rows.append(row)
        if len(rows) >= _CHUNK:
            yield _arrow(rows, BATCH_SCHEMA)
            rows = []
    if rows:
        yield _arrow(rows, BATCH_SCHEMA)


def replica_row(r: Replica) -> dict[str, object]:
    return {"node_id": r.node_id, "topic": r.topic, "partition": r.partition,
            "topic_id": r.topic_id, "directory": r.directory, "hw": r.hw,
            "segments": len(r.segments), "problems": list(r.problems)}


class KraftPartitionsReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = {key.lower(): value for key, value in options.items()}

    def partitions(self) -> list[InputPartition]:
        replicas = replicas_of(self.options)
        if self.options.get("table", "batches") == "replicas":
            return [ReplicasPartition(tuple(replicas))]
        out: list[InputPartition] = []
        for r in replicas:
            for i, (base, path) in enumerate(r.segments):
                out.append(SegmentPartition(r, base, path, i == len(r.segments) - 1))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, ReplicasPartition):
            yield _arrow([replica_row(r) for r in partition.replicas], REPLICA_SCHEMA)
            return
        if isinstance(partition, SegmentPartition):  # (Spark reads None when there is none)
            yield from read_segment(partition)


class KraftPartitionsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        table = {k.lower(): v for k, v in self.options.items()}.get("table", "batches")
        if table not in ("batches", "replicas"):
            raise LayoutError(f"option table must be batches or replicas, not {table!r}")
        return REPLICA_DDL if table == "replicas" else BATCH_DDL

    def reader(self, schema: object) -> DataSourceReader:
        del schema
        return KraftPartitionsReader(self.options)
