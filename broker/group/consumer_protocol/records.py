"""The consumer protocol's records of `__consumer_offsets` in Kafka 4.0's formats
(group-coordinator/src/main/resources/common/message/ConsumerGroup*.json).

A key is an int16 type (3-8) and int16-length strings, not flexible; a value is int16 version
0 and a flexible body (compact strings and arrays, uvarint lengths + 1, a tagged-field
section, which we write empty and skip when reading). A null value is a tombstone.

| type | key | value |
|---|---|---|
| 3 ConsumerGroupMetadata | group | group epoch |
| 4 ConsumerGroupPartitionMetadata | group | subscribed topics: id, name, partitions |
| 5 ConsumerGroupMemberMetadata | group, member | client, host, subscription, timeouts |
| 6 ConsumerGroupTargetAssignmentMetadata | group | assignment epoch |
| 7 ConsumerGroupTargetAssignmentMember | group, member | its target partitions |
| 8 ConsumerGroupCurrentMemberAssignment | group, member | epochs, state, partitions |
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from broker.schema_codec import Reader, RecordFormatError, Writer

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
KEY_TYPES = frozenset(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1))
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
VALUE_VERSION = 0

# topic id -> partitions; frozen, so an assignment can be shared and compared.
Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    type: int
    group: str
    member: str = ""  # the member keys' (5, 7, 8)


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


# ---- writing -------------------------------------------------------------------------------


def _write_assignment(w: Writer, assignment: Assignment) -> Writer:
    w.array_length(len(assignment))
    for topic_id, partitions in sorted(assignment.items()):
        w.uuid(topic_id).array_length(len(partitions))
        for partition in sorted(partitions):
            w.int32(partition)
        w.tags()
    return w


def encode_key(key: ConsumerKey) -> bytes:
    w = Writer().int16(key.type).string(key.group)  # keys are not flexible
    if key.type in _MEMBER_KEYS:
        w.string(key.member)
    return bytes(w.out)


def _value() -> Writer:
    return Writer(flexible=True).int16(VALUE_VERSION)


def group_metadata_value(epoch: int) -> bytes:
    return bytes(_value().int32(epoch).tags().out)


def partition_metadata_value(topics: Mapping[uuid.UUID, TopicMetadata]) -> bytes:
    w = _value().array_length(len(topics))
    for topic in sorted(topics.values(), key=lambda t: t.name):
        w.uuid(topic.topic_id).string(topic.name).int32(topic.partitions)
        w.array_length(0).tags()  # PartitionMetadata: no racks
    return bytes(w.tags().out)


def member_metadata_value(m: MemberMetadata) -> bytes:
    w = _value().string(m.instance_id).string(m.rack_id).string(m.client_id)
    w.string(m.client_host).array_length(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:
        w.string(name)
    w.string(m.subscribed_topic_regex).int32(m.rebalance_timeout_ms).string(m.server_assignor)
    return bytes(w.tags().out)


def target_assignment_metadata_value(epoch: int) -> bytes:
    return bytes(_value().int32(epoch).tags().out)


def target_assignment_member_value(assignment: Assignment) -> bytes:
    return bytes(_write_assignment(_value(), assignment).tags().out)


def current_assignment_value(a: CurrentAssignment) -> bytes:
    w = _value().int32(a.member_epoch).int32(a.previous_member_epoch).int8(a.state)
    _write_assignment(_write_assignment(w, a.assigned), a.pending_revocation)
    return bytes(w.tags().out)


# ---- reading -------------------------------------------------------------------------------


def _read_assignment(reader: Reader) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(reader.array_length()):
        topic_id = reader.uuid()
        out[topic_id] = frozenset(reader.int32() for _ in range(reader.array_length()))
        reader.tags()  # AssignmentEpochs (a later Kafka's tag 0) is not used
    return out


def decode_key(data: bytes) -> ConsumerKey | None:
    """The key, or None when it is not a consumer group key (another type)."""
    reader = Reader(data)
    key_type = reader.int16()
    if key_type not in KEY_TYPES:
        return None
    group = reader.text(reader.int16())
    return ConsumerKey(key_type, group,
                       reader.text(reader.int16()) if key_type in _MEMBER_KEYS else "")


def _value_reader(data: bytes) -> Reader:
    reader = Reader(data)
    version = reader.int16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown consumer group record value version {version}")
    reader.flexible = True
    return reader


def decode_epoch(data: bytes) -> int:
    """The epoch of a ConsumerGroupMetadata or ConsumerGroupTargetAssignmentMetadata value
    (what a later Kafka adds after it is not needed)."""
    return _value_reader(data).int32()


def decode_partition_metadata(data: bytes) -> dict[uuid.UUID, TopicMetadata]:
    reader = _value_reader(data)
    topics = {}
    for _ in range(reader.array_length()):
        topic = TopicMetadata(reader.uuid(), reader.string(), reader.int32())
        for _ in range(reader.array_length()):  # racks per partition: not used
            reader.int32()
            for _ in range(reader.array_length()):
                reader.string()
            reader.tags()
        reader.tags()
        topics[topic.topic_id] = topic
    return topics


def decode_member_metadata(data: bytes) -> MemberMetadata:
    reader = _value_reader(data)
    instance, rack = reader.nullable_string(), reader.nullable_string()
    client_id, host = reader.string(), reader.string()
    names = tuple(reader.string() for _ in range(reader.array_length()))
    regex = reader.nullable_string()
    rebalance_timeout = reader.int32()
    assignor = reader.nullable_string()
    reader.tags()  # ClassicMemberMetadata (tag 0): a classic member of a mixed group
    return MemberMetadata(instance, rack, client_id, host, names, regex, rebalance_timeout,
                          assignor)


def decode_target_assignment(data: bytes) -> Assignment:
    return _read_assignment(_value_reader(data))


def decode_current_assignment(data: bytes) -> CurrentAssignment:
    reader = _value_reader(data)
    epoch, previous, state = reader.int32(), reader.int32(), reader.int8()
    return CurrentAssignment(epoch, previous, state, _read_assignment(reader),
                             _read_assignment(reader))
