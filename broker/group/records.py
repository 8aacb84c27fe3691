"""The records of `__consumer_offsets` in Kafka's formats (the coordinator's message schemas
OffsetCommitKey/Value, GroupMetadataKey/Value), so the topic's data is what Kafka's tools read.

Key and value both start with an int16 version. Keys v0/v1 are offset commits, v2 a group's
metadata; later versions (KIP-848 and share groups) are skipped when loading. Values v0-3 are
classic encodings (int16-length strings, -1 = null; int32-length bytes), the last version of
each (v4) the flexible one. A null value is a tombstone. We write offset value v3 (v1 when the
commit carries an explicit expire time) and group value v3, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.schema_codec import Reader, Writer

# The callers catch it from here (broker.schema_codec raises it).
from broker.schema_codec import RecordFormatError as RecordFormatError

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
NO_EXPIRY = -1


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = NO_EXPIRY


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


def encode_offset_key(key: OffsetKey) -> bytes:
    w = Writer().int16(OFFSET_KEY_VERSION)
    return bytes(w.string(key.group).string(key.topic).int32(key.partition).out)


def encode_group_key(key: GroupKey) -> bytes:
    return bytes(Writer().int16(GROUP_KEY_VERSION).string(key.group).out)


def encode_offset_value(value: OffsetValue) -> bytes:
    if value.expire_timestamp != NO_EXPIRY:
        w = Writer().int16(OFFSET_VALUE_VERSION_WITH_EXPIRY).int64(value.offset)
        w.string(value.metadata).int64(value.commit_timestamp).int64(value.expire_timestamp)
        return bytes(w.out)
    w = Writer().int16(OFFSET_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return bytes(w.string(value.metadata).int64(value.commit_timestamp).out)


def encode_group_value(value: GroupValue) -> bytes:
    w = Writer().int16(GROUP_VALUE_VERSION).string(value.protocol_type)
    w.int32(value.generation).string(value.protocol).string(value.leader)
    w.int64(value.current_state_timestamp).int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).int32(m.rebalance_timeout).int32(m.session_timeout)
        w.blob(m.subscription).blob(m.assignment)
    return bytes(w.out)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key, or None for a key version this coordinator does not handle (skip it)."""
    reader = Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.int32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(reader.string())
    return None


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = Reader(data)
    version = reader.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    reader.flexible = version >= 4
    offset = reader.int64()
    epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit = reader.int64()
    expire = reader.int64() if version == 1 else NO_EXPIRY
    reader.tags()
    return OffsetValue(offset, epoch, metadata, commit, expire)


def decode_group_value(data: bytes) -> GroupValue:
    reader = Reader(data)
    version = reader.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    reader.flexible = version >= 4
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.array_length()):
        member_id = reader.string()
        instance = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance = reader.int32() if version >= 1 else -1
        session = reader.int32()
        subscription = reader.blob()
        assignment = reader.blob()
        reader.tags()
        members.append(MemberValue(member_id, instance, client_id, client_host,
                                   rebalance if rebalance >= 0 else session, session,
                                   subscription, assignment))
    reader.tags()
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def offset_record(key: OffsetKey, value: OffsetValue | None) -> tuple[bytes, bytes | None]:
    return encode_offset_key(key), None if value is None else encode_offset_value(value)


def group_record(key: GroupKey, value: GroupValue | None) -> tuple[bytes, bytes | None]:
    return encode_group_key(key), None if value is None else encode_group_value(value)


Records = Sequence[tuple[bytes, bytes | None]]
