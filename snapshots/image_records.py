"""The metadata image as records, and back.

`image_to_records` writes the records that, replayed by MetadataDelta onto the empty image,
rebuild the image: features first (metadata.version leads, as in Kafka), then brokers, topics
with their partitions, configs, where the next producer id block starts, the ACLs (Kafka's
order), then SCRAM credentials and client quotas.
Every order the delta accepts would do; this one is sorted, so two equal images give
byte-identical snapshots.

`metadata.loader.image_from_records` replays them. Every record is replayed at the snapshot's
last contained offset, as Kafka's controller does when it loads a snapshot: a broker's
registration offset (the "caught up" mark) is therefore that offset, never earlier than the
true one. The image equals the original except for that mark (see `snapshots.diff.as_loaded`).

Encoding has a fast path for PartitionRecords, nearly all of a big image: they differ mostly in
partition id and topic id, so the protobuf-encoded rest is encoded once per distinct value and
checked against encode_record (metadata/record_decoder.py is its decoding twin).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from metadata.authorizer.model import record_of
from metadata.image import MetadataImage, PartitionRegistration
from metadata.record_decoder import PARTITION_HEADER
from metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)
from metadata.security_records import ClientQuotaRecord, EntityData, UserScramCredentialRecord

METADATA_VERSION = "metadata.version"

ProgressCallback = Callable[[int], None]


def _head_records(image: MetadataImage) -> Iterator[Record]:
    """Features and brokers: what every later record may depend on."""
    features = image.features
    # metadata.version first: in Kafka it decides how every later record is read.
    for name in sorted(features, key=lambda n: (n != METADATA_VERSION, n)):
        yield FeatureLevelRecord(name, features[name])
    brokers = image.cluster.brokers
    for broker_id in sorted(brokers):
        b = brokers[broker_id]
        # The registration carries the fencing state, so no change record is needed.
        yield RegisterBrokerRecord(
            b.id, b.incarnation_id, b.epoch, b.endpoints, b.rack, b.fenced,
            b.in_controlled_shutdown,
        )


def _config_records(image: MetadataImage) -> Iterator[Record]:
    configs = image.configs
    for resource in sorted(configs):
        values = configs[resource]
        for key in sorted(values):
            yield ConfigRecord(resource.type, resource.name, key, values[key])


def _producer_ids_records(image: MetadataImage) -> Iterator[Record]:
    # Kafka's ProducerIdsImage.write: no broker, only where the next block starts.
    if image.producer_ids.next_producer_id >= 0:
        yield ProducerIdsRecord(-1, -1, image.producer_ids.next_producer_id)


def _acl_records(image: MetadataImage) -> Iterator[Record]:
    acls = image.acls
    for acl_id in sorted(acls):
        yield record_of(acl_id, acls[acl_id])


def _security_records(image: MetadataImage) -> Iterator[Record]:
    for user in sorted(image.scram):
        credentials = image.scram[user]
        for mechanism in sorted(credentials):
            c = credentials[mechanism]
            yield UserScramCredentialRecord(user, mechanism, c.salt, c.stored_key, c.server_key,
                                            c.iterations)
    quotas = image.client_quotas
    # The default entity (None) sorts before every name.
    for entity in sorted(quotas, key=lambda e: [(t, n is not None, n or "") for t, n in e]):
        data = tuple(EntityData(entity_type, name) for entity_type, name in entity)
        for key in sorted(quotas[entity]):
            yield ClientQuotaRecord(data, key, quotas[entity][key])


def image_records(image: MetadataImage) -> Iterator[Record]:
    """The image's records, unencoded, in replay order."""
    yield from _head_records(image)
    by_name = image.topics.by_name
    for name in sorted(by_name):
        topic = by_name[name]
        yield TopicRecord(name, topic.topic_id)
        partitions = topic.partitions
        for partition_id in sorted(partitions):
            yield partitions[partition_id].to_record(topic.topic_id, partition_id)
    yield from _config_records(image)
    yield from _producer_ids_records(image)
    yield from _acl_records(image)
    yield from _security_records(image)


def image_to_records(image: MetadataImage) -> list[bytes]:
    """The encoded records of `image`, in replay order: exactly
    `[encode_record(r) for r in image_records(image)]`, several times faster for partitions
    (see _PartitionEncoder)."""
    out = [encode_record(record) for record in _head_records(image)]
    encoder = _PartitionEncoder()
    by_name = image.topics.by_name
    for name in sorted(by_name):
        topic = by_name[name]
        out.append(encode_record(TopicRecord(name, topic.topic_id)))
        encoder.encode_topic(topic.topic_id, topic.partitions, out)
    out.extend(encode_record(record) for record in _config_records(image))
    out.extend(encode_record(record) for record in _producer_ids_records(image))
    out.extend(encode_record(record) for record in _acl_records(image))
    out.extend(encode_record(record) for record in _security_records(image))
    return out


_PARTITION_HEADER = PARTITION_HEADER


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# What a PartitionRecord holds after its partition and topic ids (fields 3-10), in field order.
_Tail = tuple[
    tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int, int, int
]


class _PartitionEncoder:
    """PartitionRecords without a protobuf message per partition.

    Protobuf writes fields in field-number order, so a record is its header, field 1
    (partition_id, omitted when 0), field 2 (topic_id), then fields 3-10, which depend only on
    the replica lists, leader and epochs. A million partitions have few distinct values of
    those (replica lists are interned), so that tail is encoded once per distinct value, by
    encode_record itself. The first two partitions of every topic are also encoded the slow
    way and compared, so a schema change can never make the two paths disagree silently."""

    def __init__(self) -> None:
        self._tails: dict[_Tail, bytes] = {}
        self._ids: dict[int, bytes] = {0: b""}

    def _tail(self, key: _Tail, topic_id: str, prefix_size: int) -> bytes:
        tail = self._tails.get(key)
        if tail is None:
            full = encode_record(PartitionRecord(1, topic_id, *key))
            tail = self._tails[key] = full[prefix_size:]
        return tail

    def _id(self, partition_id: int) -> bytes:
        field = self._ids.get(partition_id)
        if field is None:
            field = self._ids[partition_id] = b"\x08" + _varint(partition_id)
        return field

    def encode_topic(
        self, topic_id: str, partitions: Mapping[int, PartitionRegistration], out: list[bytes]
    ) -> None:
        topic_field = b"\x12" + _varint(len(topic_id.encode())) + topic_id.encode()
        head = _PARTITION_HEADER
        # The size of header + field 1 for partition 1 + field 2: where the tail starts.
        prefix_size = len(head) + 2 + len(topic_field)
        append = out.append
        for checked, partition_id in enumerate(sorted(partitions)):
            p = partitions[partition_id]
            key: _Tail = (p.replicas, p.isr, p.removing_replicas, p.adding_replicas, p.leader,
                   p.leader_recovery_state, p.leader_epoch, p.partition_epoch)
            tail = self._tails.get(key) or self._tail(key, topic_id, prefix_size)
            data = head + self._id(partition_id) + topic_field + tail
            if checked < 2:
                slow = encode_record(p.to_record(topic_id, partition_id))
                if data != slow:
                    raise AssertionError(f"fast PartitionRecord encoding differs: {slow!r}")
            append(data)


