"""One log file -> Arrow record batches: the rows of the `kraft-metadata` data source.

A segment is scanned with the log's own codec (`scan_prefix`, `decode_batches`) in chunks, so a
1 GiB file never sits in memory as Python objects. A file that stops with a bad frame yields
one extra row whose `error` says where and why (a torn tail or a truncated segment) instead of
failing the Spark task: the audit reports it with the node and offset.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError

from audit.layout import LogFile
from kraft.log.base import Batch, CorruptRecordError
from kraft.log.codec import (
    LEADER_CHANGE,
    decode_batches,
    decode_control_record,
    is_torn_tail,
    scan_prefix,
)
from kraft.log.snapshots import read_snapshot_batches
from metadata.record_json import record_to_json
from metadata.records import (
    NO_LEADER_CHANGE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FencingChange,
    MetadataRecordType,
    PartitionChangeRecord,
    PartitionRecord,
    RecordDecodeError,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    decode_record,
)
from metadata.rpc import acls_pb2 as acls_pb
from metadata.rpc import metadata_pb2 as pb
from metadata.rpc import security_records_pb2 as security_pb
from metadata.security_records import (
    ClientQuotaRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    redacted_json,
)

_INTS = pa.list_(pa.int32())
_STRINGS = pa.list_(pa.string())
# (column, Arrow type, Spark DDL type): the one place the schema is defined.
COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("node_id", pa.int32(), "int"),
    ("source_file", pa.string(), "string"),
    ("source_kind", pa.string(), "string"),
    ("offset", pa.int64(), "bigint"),
    ("record_index", pa.int64(), "bigint"),
    ("epoch", pa.int32(), "int"),
    ("batch_base_offset", pa.int64(), "bigint"),
    ("batch_last_offset", pa.int64(), "bigint"),
    ("batch_crc", pa.int64(), "bigint"),
    ("batch_position", pa.int64(), "bigint"),
    ("timestamp_ms", pa.int64(), "bigint"),
    ("is_control", pa.bool_(), "boolean"),
    ("record_type", pa.string(), "string"),
    ("record_version", pa.int32(), "int"),
    ("quorum_leader_id", pa.int32(), "int"),
    ("voters", _INTS, "array<int>"),
    ("broker_id", pa.int32(), "int"),
    ("broker_epoch", pa.int64(), "bigint"),
    ("incarnation_id", pa.string(), "string"),
    ("fenced", pa.bool_(), "boolean"),
    ("in_controlled_shutdown", pa.bool_(), "boolean"),
    ("topic_id", pa.string(), "string"),
    ("topic_name", pa.string(), "string"),
    ("partition", pa.int32(), "int"),
    ("leader", pa.int32(), "int"),
    ("replicas", _INTS, "array<int>"),
    ("isr", _INTS, "array<int>"),
    ("leader_epoch", pa.int32(), "int"),
    ("partition_epoch", pa.int32(), "int"),
    ("leader_recovery_state", pa.int32(), "int"),
    ("config_resource_type", pa.int32(), "int"),
    ("config_resource_name", pa.string(), "string"),
    ("config_key", pa.string(), "string"),
    ("config_value", pa.string(), "string"),
    # ACL records (KIP-801): the id for both, the binding for AccessControlEntryRecord
    ("acl_id", pa.string(), "string"),
    ("acl_resource_type", pa.int32(), "int"),
    ("acl_resource_name", pa.string(), "string"),
    ("acl_pattern_type", pa.int32(), "int"),
    ("acl_principal", pa.string(), "string"),
    ("acl_host", pa.string(), "string"),
    ("acl_operation", pa.int32(), "int"),
    ("acl_permission_type", pa.int32(), "int"),
    # SCRAM credentials (KIP-554): user and mechanism for both records, iterations for
    # UserScramCredentialRecord. Never its salt or keys: no column holds a secret.
    ("scram_user", pa.string(), "string"),
    ("scram_mechanism", pa.int32(), "int"),
    ("scram_iterations", pa.int32(), "int"),
    # Client quotas (KIP-546): the entity as parallel lists in the record's order (a null
    # name is the type's default entity), the key, its value and whether it is removed.
    ("quota_entity_types", _STRINGS, "array<string>"),
    ("quota_entity_names", _STRINGS, "array<string>"),
    ("quota_key", pa.string(), "string"),
    ("quota_value", pa.float64(), "double"),
    ("quota_remove", pa.bool_(), "boolean"),
    ("record_json", pa.string(), "string"),
    ("error", pa.string(), "string"),
)
NAMES = tuple(name for name, _, _ in COLUMNS)
ARROW_SCHEMA = pa.schema([(name, kind) for name, kind, _ in COLUMNS])
SPARK_DDL = ", ".join(f"`{name}` {ddl}" for name, _, ddl in COLUMNS)
_INDEX = {name: i for i, name in enumerate(NAMES)}

ROWS_PER_BATCH = 32_768
_CHUNK_BYTES = 8 << 20
_HEADER = struct.Struct(">HH")
_TIMESTAMP = struct.Struct(">q")
_TIMESTAMP_AT = 26  # first_timestamp_ms in a batch header
_CONTROL_NAMES = {2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                  5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


@dataclass(frozen=True)
class ReadOptions:
    """Offset range [start, end) and whether to build `record_json` (the costliest column)."""

    start_offset: int = 0
    end_offset: int | None = None
    with_json: bool = True
    # One row per data batch (record columns null, record_type DATA_BATCH) instead of one per
    # record; control batches still give one row per record. Enough for every cross-node
    # check, at the cost of a CRC scan instead of a protobuf decode per record.
    batches_only: bool = False


class _Rows:
    """Column lists for one chunk of rows, pre-filled with nulls: a record sets only the
    columns it has (the per-row cost is what limits the reader)."""

    def __init__(self) -> None:
        self.cols: list[list[object]] = [[] for _ in NAMES]
        self.count = 0

    def grow(self, n: int) -> None:
        for col in self.cols:
            col.extend([None] * n)

    def add(self, values: dict[str, object], common: tuple[object, ...]) -> None:
        """Append one row: `common` fills the leading columns, `values` any others."""
        row = self.count
        self.grow(1)
        for i, value in enumerate(common):
            self.cols[i][row] = value
        for name, value in values.items():
            self.cols[_INDEX[name]][row] = value
        self.count += 1

    def flush(self) -> pa.RecordBatch:
        arrays = [pa.array(col, type=kind)
                  for col, (_, kind, _) in zip(self.cols, COLUMNS, strict=True)]
        self.cols = [[] for _ in NAMES]
        self.count = 0
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)




def record_fields(record: object) -> dict[str, object]:
    """The typed columns of one metadata record (absent = null)."""
    match record:
        case PartitionChangeRecord():
            return {
                "topic_id": record.topic_id, "partition": record.partition_id,
                "leader": None if record.leader == NO_LEADER_CHANGE else record.leader,
                "replicas": None if record.replicas is None else list(record.replicas),
                "isr": None if record.isr is None else list(record.isr),
                "leader_recovery_state": (None if record.leader_recovery_state == -1
                                          else record.leader_recovery_state),
            }
        case PartitionRecord():
            return {
                "topic_id": record.topic_id, "partition": record.partition_id,
                "leader": record.leader, "replicas": list(record.replicas),
                "isr": list(record.isr), "leader_epoch": record.leader_epoch,
                "partition_epoch": record.partition_epoch,
                "leader_recovery_state": record.leader_recovery_state,
            }
        case RegisterBrokerRecord():
            return {"broker_id": record.broker_id, "broker_epoch": record.broker_epoch,
                    "incarnation_id": record.incarnation_id, "fenced": record.fenced,
                    "in_controlled_shutdown": record.in_controlled_shutdown}
        case BrokerRegistrationChangeRecord():
            return {
                "broker_id": record.broker_id, "broker_epoch": record.broker_epoch,
                "fenced": (None if record.fenced == FencingChange.NONE
                           else record.fenced == FencingChange.FENCE),
                "in_controlled_shutdown": True if record.in_controlled_shutdown else None,
            }
        case UnregisterBrokerRecord():
            return {"broker_id": record.broker_id, "broker_epoch": record.broker_epoch}
        case TopicRecord():
            return {"topic_id": record.topic_id, "topic_name": record.name}
        case RemoveTopicRecord():
            return {"topic_id": record.topic_id}
        case ConfigRecord():
            return {"config_resource_type": record.resource_type,
                    "config_resource_name": record.resource_name,
                    "config_key": record.name, "config_value": record.value}
        case AccessControlEntryRecord():
            return dict(zip(_ACL_NAMES, (
                record.id, record.resource_type, record.resource_name, record.pattern_type,
                record.principal, record.host, record.operation, record.permission_type),
                strict=True))
        case RemoveAccessControlEntryRecord():
            return {"acl_id": record.id}
        case UserScramCredentialRecord():
            return {"scram_user": record.name, "scram_mechanism": record.mechanism,
                    "scram_iterations": record.iterations}
        case RemoveUserScramCredentialRecord():
            return {"scram_user": record.name, "scram_mechanism": record.mechanism}
        case ClientQuotaRecord():
            return dict(zip(_QUOTA_NAMES, (
                [e.entity_type for e in record.entity], [e.entity_name for e in record.entity],
                record.key, record.value, record.remove), strict=True))
    return {}


_Chunk = tuple[list[Batch], int, CorruptRecordError | None]


def _batches_of_segment(path: str) -> Iterator[_Chunk]:
    """The segment's batches in chunks (with the byte position of the first), then the error
    where a bad frame stopped the scan."""
    size = os.path.getsize(path)
    if size == 0:
        return
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        headers, stop, error = scan_prefix(mm, path)
        start = 0
        while start < len(headers):
            first = headers[start].position
            end = start
            while end < len(headers) and headers[end].position - first < _CHUNK_BYTES:
                end += 1
            last = headers[end - 1]
            yield decode_batches(mm[first: last.position + last.size], path, first), first, None
            start = end
        if error is not None:
            if is_torn_tail(mm, stop):
                error = CorruptRecordError(f"torn tail: {error.reason}", stop, path)
            yield [], stop, error


def _headers_of_segment(path: str) -> Iterator[_Chunk]:
    """Batch-level reading: frames and CRCs checked, records split only in control batches;
    data batches come back with empty records (the caller only needs their headers)."""
    if os.path.getsize(path) == 0:
        return
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        headers, stop, error = scan_prefix(mm, path)
        batches = []
        for h in headers:
            if h.control:
                batches.extend(decode_batches(mm[h.position: h.position + h.size], path,
                                              h.position))
            else:
                (timestamp,) = _TIMESTAMP.unpack_from(mm, h.position + _TIMESTAMP_AT)
                batches.append(Batch(h.base_offset, h.epoch, (b"",) * h.record_count,
                                     timestamp, timestamp, False, h.crc, h.size))
        yield batches, 0, None
        if error is not None:
            if is_torn_tail(mm, stop):
                error = CorruptRecordError(f"torn tail: {error.reason}", stop, path)
            yield [], stop, error


def _batches_of_snapshot(path: str) -> Iterator[_Chunk]:
    try:
        yield list(read_snapshot_batches(path)), 0, None
    except CorruptRecordError as exc:
        yield [], 0, exc


def read_file(log_file: LogFile, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Arrow batches for every record of `log_file` in the offset range."""
    snapshot = log_file.kind == "snapshot"
    if snapshot:
        source = _batches_of_snapshot
    else:
        source = _headers_of_segment if options.batches_only else _batches_of_segment
    rows = _Rows()
    end_offset = options.end_offset
    next_offset = log_file.base_offset
    for batches, position, error in source(log_file.path):
        for batch in batches:
            batch_position = position
            position += batch.size_in_bytes
            next_offset = batch.next_offset
            if not snapshot and (batch.next_offset <= options.start_offset or (
                    end_offset is not None and batch.base_offset >= end_offset)):
                continue
            _add_batch(rows, log_file, batch, batch_position, options)
            if rows.count >= ROWS_PER_BATCH:
                yield rows.flush()
        if error is not None:
            common = (log_file.node_id, log_file.path, log_file.kind,
                      log_file.base_offset if snapshot else next_offset, None, None, None,
                      None, None, error.position, None, None, "CORRUPT", None)
            rows.add({"error": f"{error.reason} (byte {error.position})"}, common)
    if rows.count:
        yield rows.flush()


def _add_batch(
    rows: _Rows, log_file: LogFile, batch: Batch, position: int, options: ReadOptions
) -> None:
    snapshot = log_file.kind == "snapshot"
    first, stop = batch.base_offset, batch.next_offset
    if not snapshot:
        first = max(first, options.start_offset)
        if options.end_offset is not None:
            stop = min(stop, options.end_offset)
    n = stop - first
    if n <= 0:
        return
    if options.batches_only and not batch.control and not snapshot:
        first, n = batch.base_offset, 1
    row = rows.count
    rows.grow(n)
    cols = rows.cols
    if snapshot:
        # A snapshot's records are the state at its end offset: they sort before the log
        # record at that offset, in file order.
        cols[3][row:row + n] = [log_file.base_offset - 1] * n
        cols[4][row:row + n] = range(first, stop)
    else:
        cols[3][row:row + n] = range(first, first + n)
    for i, value in enumerate((log_file.node_id, log_file.path, log_file.kind)):
        cols[i][row:row + n] = [value] * n
    for i, value in enumerate((batch.epoch, batch.base_offset, batch.next_offset - 1,
                               batch.crc, position, batch.first_timestamp_ms, batch.control),
                              start=5):
        cols[i][row:row + n] = [value] * n
    if options.batches_only and not batch.control and not snapshot:
        cols[_RTYPE][row] = "DATA_BATCH"
        rows.count += 1
        return
    skip = first - batch.base_offset
    for index, data in enumerate(batch.records[skip:skip + n], start=row):
        if batch.control:
            _control(cols, index, data, options.with_json)
        elif options.with_json:
            _checked(cols, index, data)
        else:
            _fast(cols, index, data)
    rows.count += n


def _set(cols: list[list[object]], row: int, values: dict[str, object]) -> None:
    for name, value in values.items():
        cols[_INDEX[name]][row] = value


def _control(cols: list[list[object]], row: int, data: bytes, with_json: bool) -> None:
    try:
        ctype, body = decode_control_record(data)
    except CorruptRecordError as exc:
        _set(cols, row, {"record_type": "UNDECODABLE", "error": exc.reason})
        return
    name = _CONTROL_NAMES.get(ctype, f"CONTROL_{ctype}")
    values: dict[str, object] = {"record_type": name, "record_version": 0}
    if ctype == LEADER_CHANGE:
        leader = body.get("leaderId")
        voters = body.get("voters")
        values["quorum_leader_id"] = leader if isinstance(leader, int) else None
        if isinstance(voters, list) and all(isinstance(v, int) for v in voters):
            values["voters"] = voters
    if with_json:
        values["record_json"] = json.dumps({"type": name, "data": body}, sort_keys=True)
    _set(cols, row, values)


def _checked(cols: list[list[object]], row: int, data: bytes) -> None:
    """The full decoder (every field rule of metadata.records) plus the JSON column."""
    try:
        record = decode_record(data)
    except RecordDecodeError as exc:
        _set(cols, row, {"record_type": "UNDECODABLE", "error": str(exc)})
        return
    values = record_fields(record)
    values["record_type"] = record.record_type.name
    values["record_version"] = _HEADER.unpack_from(data)[1]
    # A credential's salt and keys are secrets: not in a column people write out and share.
    values["record_json"] = json.dumps(redacted_json(record_to_json(record)))
    _set(cols, row, values)


def _fast(cols: list[list[object]], row: int, data: bytes) -> None:
    """Parse the protobuf body straight into the columns, skipping the record dataclasses
    (3-4x faster). Field rules beyond protobuf parsing are checked only by `_checked`; any
    record this path cannot read goes there for its error message."""
    if len(data) >= 4:
        key, version = _HEADER.unpack_from(data)
        reader = _FAST.get(key)
        if reader is not None and version == 0:
            try:
                reader[1](cols, row, reader[0].FromString(data[4:]))
            except DecodeError:
                pass
            else:
                cols[_RTYPE][row] = reader[2]
                cols[_RVERSION][row] = version
                return
    _checked(cols, row, data)
    cols[_INDEX["record_json"]][row] = None


def _partition_change(cols: list[list[object]], row: int, m: pb.PartitionChangeRecord) -> None:
    cols[_TOPIC_ID][row] = m.topic_id
    cols[_PARTITION][row] = m.partition_id
    for number, value in m.ListFields():
        column = _CHANGE_FIELDS.get(number.number)
        if column is not None:
            cols[column][row] = value.ids[:] if number.number in (3, 5) else value


def _partition(cols: list[list[object]], row: int, m: pb.PartitionRecord) -> None:
    for column, value in zip(_PARTITION_COLUMNS, (
            m.topic_id, m.partition_id, m.leader, m.replicas[:], m.isr[:], m.leader_epoch,
            m.partition_epoch, m.leader_recovery_state), strict=True):
        cols[column][row] = value


def _register(cols: list[list[object]], row: int, m: pb.RegisterBrokerRecord) -> None:
    fenced = m.fenced if m.HasField("fenced") else True
    for column, value in zip(_BROKER_COLUMNS, (m.broker_id, m.broker_epoch, fenced,
                                               m.in_controlled_shutdown), strict=True):
        cols[column][row] = value
    cols[_INCARNATION][row] = m.incarnation_id


def _registration_change(
    cols: list[list[object]], row: int, m: pb.BrokerRegistrationChangeRecord
) -> None:
    fenced = None if m.fenced == FencingChange.NONE else m.fenced == FencingChange.FENCE
    for column, value in zip(_BROKER_COLUMNS, (m.broker_id, m.broker_epoch, fenced,
                                               True if m.in_controlled_shutdown else None),
                             strict=True):
        cols[column][row] = value


def _unregister(cols: list[list[object]], row: int, m: pb.UnregisterBrokerRecord) -> None:
    cols[_BROKER_COLUMNS[0]][row] = m.broker_id
    cols[_BROKER_COLUMNS[1]][row] = m.broker_epoch


def _topic(cols: list[list[object]], row: int, m: pb.TopicRecord) -> None:
    cols[_TOPIC_ID][row] = m.topic_id
    cols[_INDEX["topic_name"]][row] = m.name


def _remove_topic(cols: list[list[object]], row: int, m: pb.RemoveTopicRecord) -> None:
    cols[_TOPIC_ID][row] = m.topic_id


def _config(cols: list[list[object]], row: int, m: pb.ConfigRecord) -> None:
    value = m.value if m.HasField("value") else None
    for column, item in zip(_CONFIG_COLUMNS, (m.resource_type, m.resource_name, m.name, value),
                            strict=True):
        cols[column][row] = item


def _acl(cols: list[list[object]], row: int, m: acls_pb.AccessControlEntryRecord) -> None:
    for column, value in zip(_ACL_COLUMNS, (
            m.id, m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
            m.operation, m.permission_type), strict=True):
        cols[column][row] = value


def _remove_acl(cols: list[list[object]], row: int,
                m: acls_pb.RemoveAccessControlEntryRecord) -> None:
    cols[_ACL_COLUMNS[0]][row] = m.id


def _scram(cols: list[list[object]], row: int,
           m: security_pb.UserScramCredentialRecord) -> None:
    for column, value in zip(_SCRAM_COLUMNS, (m.name, m.mechanism, m.iterations), strict=True):
        cols[column][row] = value


def _remove_scram(cols: list[list[object]], row: int,
                  m: security_pb.RemoveUserScramCredentialRecord) -> None:
    cols[_SCRAM_COLUMNS[0]][row] = m.name
    cols[_SCRAM_COLUMNS[1]][row] = m.mechanism


def _quota(cols: list[list[object]], row: int, m: security_pb.ClientQuotaRecord) -> None:
    for column, value in zip(_QUOTA_COLUMNS, (
            [e.entity_type for e in m.entity],
            [e.entity_name if e.HasField("entity_name") else None for e in m.entity],
            m.key, m.value, m.remove), strict=True):
        cols[column][row] = value


def _nothing(cols: list[list[object]], row: int, m: object) -> None:
    del cols, row, m  # NoOp and FeatureLevel records have no typed columns


_RTYPE = _INDEX["record_type"]
_RVERSION = _INDEX["record_version"]
_TOPIC_ID = _INDEX["topic_id"]
_INCARNATION = _INDEX["incarnation_id"]
_PARTITION = _INDEX["partition"]
# PartitionChangeRecord field numbers -> columns (3 isr, 4 leader, 5 replicas, 8 recovery).
_CHANGE_FIELDS = {3: _INDEX["isr"], 4: _INDEX["leader"], 5: _INDEX["replicas"],
                  8: _INDEX["leader_recovery_state"]}
_PARTITION_COLUMNS = tuple(_INDEX[n] for n in (
    "topic_id", "partition", "leader", "replicas", "isr", "leader_epoch", "partition_epoch",
    "leader_recovery_state"))
_BROKER_COLUMNS = tuple(_INDEX[n] for n in (
    "broker_id", "broker_epoch", "fenced", "in_controlled_shutdown"))
_CONFIG_COLUMNS = tuple(_INDEX[n] for n in (
    "config_resource_type", "config_resource_name", "config_key", "config_value"))
_ACL_NAMES = ("acl_id", "acl_resource_type", "acl_resource_name", "acl_pattern_type",
              "acl_principal", "acl_host", "acl_operation", "acl_permission_type")
_ACL_COLUMNS = tuple(_INDEX[n] for n in _ACL_NAMES)
_SCRAM_COLUMNS = tuple(_INDEX[n] for n in ("scram_user", "scram_mechanism", "scram_iterations"))
_QUOTA_NAMES = ("quota_entity_types", "quota_entity_names", "quota_key", "quota_value",
                "quota_remove")
_QUOTA_COLUMNS = tuple(_INDEX[n] for n in _QUOTA_NAMES)
_T = MetadataRecordType
_FAST: dict[int, tuple[Any, Callable[..., None], str]] = {
    t: (message, reader, t.name) for t, message, reader in (
        (_T.PARTITION_CHANGE_RECORD, pb.PartitionChangeRecord, _partition_change),
        (_T.PARTITION_RECORD, pb.PartitionRecord, _partition),
        (_T.REGISTER_BROKER_RECORD, pb.RegisterBrokerRecord, _register),
        (_T.BROKER_REGISTRATION_CHANGE_RECORD, pb.BrokerRegistrationChangeRecord,
         _registration_change),
        (_T.UNREGISTER_BROKER_RECORD, pb.UnregisterBrokerRecord, _unregister),
        (_T.TOPIC_RECORD, pb.TopicRecord, _topic),
        (_T.REMOVE_TOPIC_RECORD, pb.RemoveTopicRecord, _remove_topic),
        (_T.CONFIG_RECORD, pb.ConfigRecord, _config),
        (_T.ACCESS_CONTROL_ENTRY_RECORD, acls_pb.AccessControlEntryRecord, _acl),
        (_T.REMOVE_ACCESS_CONTROL_ENTRY_RECORD, acls_pb.RemoveAccessControlEntryRecord,
         _remove_acl),
        (_T.USER_SCRAM_CREDENTIAL_RECORD, security_pb.UserScramCredentialRecord, _scram),
        (_T.REMOVE_USER_SCRAM_CREDENTIAL_RECORD, security_pb.RemoveUserScramCredentialRecord,
         _remove_scram),
        (_T.CLIENT_QUOTA_RECORD, security_pb.ClientQuotaRecord, _quota),
        (_T.NO_OP_RECORD, pb.NoOpRecord, _nothing),
        (_T.FEATURE_LEVEL_RECORD, pb.FeatureLevelRecord, _nothing),
    )
}
