"""Metadata records: Kafka's record types as frozen dataclasses, and their on-disk encoding.

A record's bytes are `u16 api key, u16 version, protobuf body` (metadata/rpc/metadata.proto).
The api keys, names, field names and sentinels are Kafka's (NO_LEADER -1, NO_LEADER_CHANGE -2,
"absent = unchanged" lists as None), so `metadata.record_json` prints what `kafka-dump-log
--cluster-metadata-decoder` prints. Decoding anything but a well-formed record raises
RecordDecodeError and nothing else: bytes come from disks and peers.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

from google.protobuf.message import DecodeError, Message

from metadata._construct import positional_constructor
from metadata.record_types import MetadataRecordType as MetadataRecordType
from metadata.rpc import acls_pb2 as acls_pb
from metadata.rpc import metadata_pb2 as pb
from metadata.rpc import producer_ids_pb2 as producer_ids_pb
from metadata.security_records import (
    SECURITY_CODECS,
    SecurityRecord,
)

NO_LEADER = -1
NO_LEADER_CHANGE = -2

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid.ONE_UUID, reserved for __cluster_metadata

# 16 bytes in url-safe base64 without padding: 21 free characters and a last one with 2 bits.
_UUID_PATTERN = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")
_HEADER = struct.Struct(">HH")


class LeaderRecoveryState(IntEnum):
    RECOVERED = 0
    RECOVERING = 1


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class FencingChange(IntEnum):
    """BrokerRegistrationChangeRecord.fenced."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


class ControlledShutdownChange(IntEnum):
    """BrokerRegistrationChangeRecord.in_controlled_shutdown."""

    NONE = 0
    IN_CONTROLLED_SHUTDOWN = 1


class RecordDecodeError(Exception):
    """Bytes that are not a metadata record this version of the code can read."""


def is_valid_uuid(value: str) -> bool:
    return _UUID_PATTERN.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.REGISTER_BROKER_RECORD
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[Endpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.UNREGISTER_BROKER_RECORD
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.TOPIC_RECORD
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.PARTITION_RECORD
    partition_id: int
    topic_id: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_recovery_state: int = 0  # LeaderRecoveryState.RECOVERED
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.CONFIG_RECORD
    resource_type: int
    resource_name: str
    name: str
    value: str | None  # None deletes the key


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A change to one partition; None / NO_LEADER_CHANGE / -1 recovery state mean unchanged."""

    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.PARTITION_CHANGE_RECORD
    partition_id: int
    topic_id: str
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = -1

    def is_noop(self) -> bool:
        return (
            self.isr is None
            and self.leader == NO_LEADER_CHANGE
            and self.replicas is None
            and self.removing_replicas is None
            and self.adding_replicas is None
            and self.leader_recovery_state == -1
        )


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.REMOVE_TOPIC_RECORD
    topic_id: str


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.FEATURE_LEVEL_RECORD
    name: str
    feature_level: int  # 0 removes the feature


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.BROKER_REGISTRATION_CHANGE_RECORD
    broker_id: int
    broker_epoch: int
    fenced: int = 0  # FencingChange
    in_controlled_shutdown: int = 0  # ControlledShutdownChange


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids went to a broker; the next block starts at next_producer_id."""

    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.PRODUCER_IDS_RECORD
    broker_id: int  # -1 in a snapshot
    broker_epoch: int  # -1 in a snapshot
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL binding (KIP-801), identified by its id; the int8 codes are Kafka's
    (metadata/authorizer/model.py)."""

    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.ACCESS_CONTROL_ENTRY_RECORD
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    record_type: ClassVar[MetadataRecordType] = (
        MetadataRecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD)
    id: str


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.NO_OP_RECORD


Record = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | BrokerRegistrationChangeRecord
    | ProducerIdsRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | NoOpRecord
    | SecurityRecord  # SCRAM credentials and client quotas: metadata/security_records.py
)


# ---- validation: one set of rules for what we write and what we read ----

_INT16_MAX = 32767


def _check_uuid(field: str, value: str) -> None:
    if _UUID_PATTERN.fullmatch(value) is None:
        raise ValueError(f"{field} {value!r} is not a base64 uuid")


def _check_allowed(field: str, value: int, allowed: tuple[int, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{field} {value} is not one of {list(allowed)}")


def _check_range(field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{field} {value} is outside [{low}, {high}]")


def _validate_register_broker(record: RegisterBrokerRecord) -> None:
    _check_uuid("incarnation_id", record.incarnation_id)
    for endpoint in record.endpoints:
        _check_range("port", endpoint.port, 0, 65535)


def _validate_topic_id(record: TopicRecord | RemoveTopicRecord) -> None:
    _check_uuid("topic_id", record.topic_id)


def _validate_partition(record: PartitionRecord) -> None:
    _check_uuid("topic_id", record.topic_id)
    _check_allowed("leader_recovery_state", record.leader_recovery_state, (0, 1))


def _validate_partition_change(record: PartitionChangeRecord) -> None:
    _check_uuid("topic_id", record.topic_id)
    _check_allowed("leader_recovery_state", record.leader_recovery_state, (-1, 0, 1))


def _validate_config(record: ConfigRecord) -> None:
    _check_range("resource_type", record.resource_type, -128, 127)  # an int8


def _validate_feature_level(record: FeatureLevelRecord) -> None:
    _check_range("feature_level", record.feature_level, 0, _INT16_MAX)


def _validate_registration_change(record: BrokerRegistrationChangeRecord) -> None:
    _check_allowed("fenced", record.fenced, (-1, 0, 1))
    _check_allowed("in_controlled_shutdown", record.in_controlled_shutdown, (0, 1))


def _validate_producer_ids(record: ProducerIdsRecord) -> None:
    _check_range("next_producer_id", record.next_producer_id, 0, 2**63 - 1)


def _validate_acl(record: AccessControlEntryRecord) -> None:
    _check_uuid("id", record.id)
    # int8 codes in Kafka's ranges; which combinations make a valid binding is the
    # controller's rule (metadata/authorizer/model.py), checked before anything is written.
    _check_range("resource_type", record.resource_type, 0, 7)
    _check_range("pattern_type", record.pattern_type, 0, 4)
    _check_range("operation", record.operation, 0, 14)
    _check_range("permission_type", record.permission_type, 0, 3)


def _validate_remove_acl(record: RemoveAccessControlEntryRecord) -> None:
    _check_uuid("id", record.id)


def _no_rules(record: Record) -> None:
    pass


# ---- protobuf bodies ----

def _ids(message: pb.BrokerIdList, present: bool) -> tuple[int, ...] | None:
    return tuple(message.ids[:]) if present else None


def _tuple(repeated: Any) -> tuple[int, ...]:
    # Slicing first: upb's repeated fields convert to a tuple three times faster from a list.
    return tuple(repeated[:]) if repeated else ()


def _register_broker_to_pb(r: RegisterBrokerRecord) -> Message:
    return pb.RegisterBrokerRecord(
        broker_id=r.broker_id,
        incarnation_id=r.incarnation_id,
        broker_epoch=r.broker_epoch,
        endpoints=[pb.BrokerEndpoint(name=e.name, host=e.host, port=e.port) for e in r.endpoints],
        rack=r.rack,
        fenced=r.fenced,
        in_controlled_shutdown=r.in_controlled_shutdown,
    )


def _register_broker_from_pb(m: pb.RegisterBrokerRecord) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=m.broker_id,
        incarnation_id=m.incarnation_id,
        broker_epoch=m.broker_epoch,
        endpoints=tuple(Endpoint(e.name, e.host, e.port) for e in m.endpoints),
        rack=m.rack if m.HasField("rack") else None,
        fenced=m.fenced if m.HasField("fenced") else True,
        in_controlled_shutdown=m.in_controlled_shutdown,
    )


def _partition_to_pb(r: PartitionRecord) -> Message:
    return pb.PartitionRecord(
        partition_id=r.partition_id,
        topic_id=r.topic_id,
        replicas=r.replicas,
        isr=r.isr,
        removing_replicas=r.removing_replicas,
        adding_replicas=r.adding_replicas,
        leader=r.leader,
        leader_recovery_state=r.leader_recovery_state,
        leader_epoch=r.leader_epoch,
        partition_epoch=r.partition_epoch,
    )


_make_partition_record = positional_constructor(PartitionRecord)


def _partition_from_pb(m: pb.PartitionRecord) -> PartitionRecord:
    return _make_partition_record(
        m.partition_id,
        m.topic_id,
        _tuple(m.replicas),
        _tuple(m.isr),
        _tuple(m.removing_replicas),
        _tuple(m.adding_replicas),
        m.leader,
        m.leader_recovery_state,
        m.leader_epoch,
        m.partition_epoch,
    )


def _id_list(ids: tuple[int, ...] | None) -> pb.BrokerIdList | None:
    return None if ids is None else pb.BrokerIdList(ids=ids)


def _partition_change_to_pb(r: PartitionChangeRecord) -> Message:
    return pb.PartitionChangeRecord(
        partition_id=r.partition_id,
        topic_id=r.topic_id,
        isr=_id_list(r.isr),
        leader=None if r.leader == NO_LEADER_CHANGE else r.leader,
        replicas=_id_list(r.replicas),
        removing_replicas=_id_list(r.removing_replicas),
        adding_replicas=_id_list(r.adding_replicas),
        leader_recovery_state=None if r.leader_recovery_state == -1 else r.leader_recovery_state,
    )


def _partition_change_from_pb(m: pb.PartitionChangeRecord) -> PartitionChangeRecord:
    has = m.HasField
    return PartitionChangeRecord(
        partition_id=m.partition_id,
        topic_id=m.topic_id,
        isr=_ids(m.isr, has("isr")),
        leader=m.leader if has("leader") else NO_LEADER_CHANGE,
        replicas=_ids(m.replicas, has("replicas")),
        removing_replicas=_ids(m.removing_replicas, has("removing_replicas")),
        adding_replicas=_ids(m.adding_replicas, has("adding_replicas")),
        leader_recovery_state=m.leader_recovery_state if has("leader_recovery_state") else -1,
    )


def _config_to_pb(r: ConfigRecord) -> Message:
    return pb.ConfigRecord(
        resource_type=r.resource_type, resource_name=r.resource_name, name=r.name, value=r.value
    )


def _config_from_pb(m: pb.ConfigRecord) -> ConfigRecord:
    value = m.value if m.HasField("value") else None
    return ConfigRecord(m.resource_type, m.resource_name, m.name, value)


@dataclass(frozen=True, slots=True)
class _Codec:
    record_type: MetadataRecordType
    message: type[Message]
    to_pb: Callable[[Any], Message]
    from_pb: Callable[[Any], Record]
    validate: Callable[[Any], None] = _no_rules
    versions: range = range(0, 1)  # the body versions this code reads; it writes the last


def _acl_to_pb(r: AccessControlEntryRecord) -> Message:
    return acls_pb.AccessControlEntryRecord(
        id=r.id, resource_type=r.resource_type, resource_name=r.resource_name,
        pattern_type=r.pattern_type, principal=r.principal, host=r.host,
        operation=r.operation, permission_type=r.permission_type)


def _acl_from_pb(m: acls_pb.AccessControlEntryRecord) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(m.id, m.resource_type, m.resource_name, m.pattern_type,
                                    m.principal, m.host, m.operation, m.permission_type)


def _unregister_broker_to_pb(r: UnregisterBrokerRecord) -> Message:
    return pb.UnregisterBrokerRecord(broker_id=r.broker_id, broker_epoch=r.broker_epoch)


def _registration_change_to_pb(r: BrokerRegistrationChangeRecord) -> Message:
    return pb.BrokerRegistrationChangeRecord(
        broker_id=r.broker_id,
        broker_epoch=r.broker_epoch,
        fenced=r.fenced,
        in_controlled_shutdown=r.in_controlled_shutdown,
    )


def _registration_change_from_pb(
    m: pb.BrokerRegistrationChangeRecord,
) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(
        m.broker_id, m.broker_epoch, m.fenced, m.in_controlled_shutdown
    )


_T = MetadataRecordType
_CODECS: dict[int, _Codec] = {
    codec.record_type: codec
    for codec in (
        _Codec(
            _T.REGISTER_BROKER_RECORD,
            pb.RegisterBrokerRecord,
            _register_broker_to_pb,
            _register_broker_from_pb,
            _validate_register_broker,
        ),
        _Codec(
            _T.UNREGISTER_BROKER_RECORD,
            pb.UnregisterBrokerRecord,
            _unregister_broker_to_pb,
            lambda m: UnregisterBrokerRecord(m.broker_id, m.broker_epoch),
        ),
        _Codec(
            _T.TOPIC_RECORD,
            pb.TopicRecord,
            lambda r: pb.TopicRecord(name=r.name, topic_id=r.topic_id),
            lambda m: TopicRecord(m.name, m.topic_id),
            _validate_topic_id,
        ),
        _Codec(
            _T.PARTITION_RECORD,
            pb.PartitionRecord,
            _partition_to_pb,
            _partition_from_pb,
            _validate_partition,
        ),
        _Codec(
            _T.CONFIG_RECORD, pb.ConfigRecord, _config_to_pb, _config_from_pb, _validate_config
        ),
        _Codec(
            _T.PARTITION_CHANGE_RECORD,
            pb.PartitionChangeRecord,
            _partition_change_to_pb,
            _partition_change_from_pb,
            _validate_partition_change,
        ),
        _Codec(
            _T.REMOVE_TOPIC_RECORD,
            pb.RemoveTopicRecord,
            lambda r: pb.RemoveTopicRecord(topic_id=r.topic_id),
            lambda m: RemoveTopicRecord(m.topic_id),
            _validate_topic_id,
        ),
        _Codec(
            _T.FEATURE_LEVEL_RECORD,
            pb.FeatureLevelRecord,
            lambda r: pb.FeatureLevelRecord(name=r.name, feature_level=r.feature_level),
            lambda m: FeatureLevelRecord(m.name, m.feature_level),
            _validate_feature_level,
        ),
        _Codec(
            _T.BROKER_REGISTRATION_CHANGE_RECORD,
            pb.BrokerRegistrationChangeRecord,
            _registration_change_to_pb,
            _registration_change_from_pb,
            _validate_registration_change,
        ),
        _Codec(
            _T.PRODUCER_IDS_RECORD,
            producer_ids_pb.ProducerIdsRecord,
            lambda r: producer_ids_pb.ProducerIdsRecord(
                broker_id=r.broker_id, broker_epoch=r.broker_epoch,
                next_producer_id=r.next_producer_id),
            lambda m: ProducerIdsRecord(m.broker_id, m.broker_epoch, m.next_producer_id),
            _validate_producer_ids,
        ),
        _Codec(
            _T.ACCESS_CONTROL_ENTRY_RECORD,
            acls_pb.AccessControlEntryRecord,
            _acl_to_pb,
            _acl_from_pb,
            _validate_acl,
        ),
        _Codec(
            _T.REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
            acls_pb.RemoveAccessControlEntryRecord,
            lambda r: acls_pb.RemoveAccessControlEntryRecord(id=r.id),
            lambda m: RemoveAccessControlEntryRecord(m.id),
            _validate_remove_acl,
        ),
        _Codec(_T.NO_OP_RECORD, pb.NoOpRecord, lambda r: pb.NoOpRecord(), lambda m: NoOpRecord()),
        *(_Codec(*spec) for spec in SECURITY_CODECS),
    )
}


def record_version(record: Record) -> int:
    """The body version `encode_record` writes for this record."""
    return _CODECS[record.record_type].versions[-1]


def encode_record(record: Record) -> bytes:
    """The record's log bytes. Raises ValueError for a field Kafka's schema does not allow,
    so nothing is written that `decode_record` would refuse."""
    codec = _CODECS[record.record_type]
    codec.validate(record)
    header = _HEADER.pack(record.record_type, codec.versions[-1])
    return header + codec.to_pb(record).SerializeToString(deterministic=True)


def decode_record(data: bytes) -> Record:
    """The record in `data`; RecordDecodeError for anything else."""
    if len(data) < _HEADER.size:
        raise RecordDecodeError(f"metadata record of {len(data)} byte(s) has no header")
    api_key, version = _HEADER.unpack_from(data)
    codec = _CODECS.get(api_key)
    if codec is None:
        raise RecordDecodeError(f"unknown metadata record api key {api_key}")
    record_type = codec.record_type
    if version not in codec.versions:
        raise RecordDecodeError(
            f"unsupported {record_type.name} version {version} (this code reads "
            f"{codec.versions[0]}-{codec.versions[-1]})"
        )
    try:
        # protobuf parses any buffer; its stub says bytes (a copy would cost every record)
        message = codec.message.FromString(memoryview(data)[_HEADER.size:])  # type: ignore[arg-type]
        record = codec.from_pb(message)
        codec.validate(record)
    except (DecodeError, ValueError) as e:
        raise RecordDecodeError(f"malformed {record_type.name} v{version}: {e}") from None
    return record
