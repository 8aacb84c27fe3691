"""The metadata image as records, and back.

`image_to_records` writes the records that, replayed by MetadataDelta onto the empty image,
rebuild the image: features first (metadata.version leads, as in Kafka), then brokers, topics
with their partitions, and configs. Every order the delta accepts would do; this one is sorted,
so two equal images give byte-identical snapshots.

`image_from_records` replays them. Every record is replayed at the snapshot's last contained
offset, as Kafka's controller does when it loads a snapshot: a broker's registration offset
(the "caught up" mark) is therefore that offset, never earlier than the true one. The image
equals the original except for that mark (see `snapshots.diff.as_loaded`).

Both directions have a fast path for PartitionRecords, nearly all of a big image: they differ
mostly in partition id and topic id, so the protobuf-encoded rest is encoded and decoded once
per distinct value and checked against encode_record/decode_record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance, PartitionRegistration
from metadata.records import (
    ZERO_UUID,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecordType,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
    record_version,
)

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
    return out


_PARTITION_HEADER = struct.pack(">HH", MetadataRecordType.PARTITION_RECORD,
                                record_version(PartitionRecord(0, ZERO_UUID, (), ())))


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


class _PartitionEncoder:
    """PartitionRecords without a protobuf message per partition.

    Protobuf writes fields in field-number order, so a record is its header, field 1
    (partition_id, omitted when 0), field 2 (topic_id), then fields 3-10, which depend only on
    the replica lists, leader and epochs. A million partitions have few distinct values of
    those (replica lists are interned), so that tail is encoded once per distinct value, by
    encode_record itself. The first two partitions of every topic are also encoded the slow
    way and compared, so a schema change can never make the two paths disagree silently."""

    def __init__(self) -> None:
        self._tails: dict[tuple, bytes] = {}
        self._ids: dict[int, bytes] = {0: b""}

    def _tail(self, key: tuple, topic_id: str, prefix_size: int) -> bytes:
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
            key = (p.replicas, p.isr, p.removing_replicas, p.adding_replicas, p.leader,
                   p.leader_recovery_state, p.leader_epoch, p.partition_epoch)
            tail = self._tails.get(key) or self._tail(key, topic_id, prefix_size)
            data = head + self._id(partition_id) + topic_field + tail
            if checked < 2:
                slow = encode_record(p.to_record(topic_id, partition_id))
                if data != slow:
                    raise AssertionError(f"fast PartitionRecord encoding differs: {slow!r}")
            append(data)


def image_from_records(
    records: Iterable[bytes],
    offset: int,
    epoch: int,
    timestamp_ms: int,
    progress: ProgressCallback | None = None,
) -> MetadataImage:
    """Replay encoded records onto the empty image. `offset`, `epoch` and `timestamp_ms` are
    the snapshot's last contained record (end offset - 1), which becomes the provenance: a
    MetadataLoader started on the result continues at `offset + 1`. Raises
    metadata.records.RecordDecodeError or metadata.delta.MetadataReplayError on bad records;
    `progress` is called with the count of records replayed every 100,000 records."""
    delta = MetadataDelta(EMPTY_IMAGE)
    replay = delta.replay
    decode = RecordDecoder().decode
    count = 0
    for count, data in enumerate(records, 1):
        replay(decode(data), offset, epoch, timestamp_ms)
        if progress is not None and count % 100_000 == 0:
            progress(count)
    if progress is not None:
        progress(count)
    image = delta.apply()
    # The provenance is the snapshot's, even when its last records were control records or
    # the state is empty.
    return MetadataImage(
        MetadataProvenance(offset, epoch, timestamp_ms),
        image.features, image.cluster, image.topics, image.configs,
    )


class RecordDecoder:
    """decode_record, with PartitionRecords read without protobuf when their tail (fields
    3-10, see _PartitionEncoder) was seen before.

    A tail is cached only after decode_record read a whole record with it and re-encoding
    that record's fields gives exactly the same tail (so the tail holds fields 3-10 and
    nothing else); a topic id only after decode_record validated it. Anything else, and every
    other record type, goes through decode_record."""

    def __init__(self) -> None:
        self._tails: dict[bytes, tuple] = {}
        self._topic_ids: dict[bytes, str] = {}

    def decode(self, data: bytes) -> Record:
        if data[:4] != _PARTITION_HEADER:
            return decode_record(data)
        position, partition_id = 4, 0
        if data[4:5] == b"\x08":  # field 1, a varint: partition ids are small and positive
            partition_id, shift, position = 0, 0, 5
            while position < len(data) and shift < 28:
                byte = data[position]
                partition_id |= (byte & 0x7F) << shift
                position += 1
                shift += 7
                if not byte & 0x80:
                    break
            else:
                return decode_record(data)
        if data[position : position + 2] != b"\x12\x16":  # field 2, 22 bytes
            return decode_record(data)
        topic = data[position + 2 : position + 24]
        tail = data[position + 24 :]
        fields = self._tails.get(tail)
        topic_id = self._topic_ids.get(topic)
        if fields is None or topic_id is None:
            return self._learn(data, partition_id, topic, tail)
        return PartitionRecord(partition_id, topic_id, *fields)

    def _learn(self, data: bytes, partition_id: int, topic: bytes, tail: bytes) -> Record:
        record = decode_record(data)
        assert isinstance(record, PartitionRecord)
        if record.partition_id != partition_id or record.topic_id.encode() != topic:
            return record
        self._topic_ids[topic] = record.topic_id
        fields = (record.replicas, record.isr, record.removing_replicas, record.adding_replicas,
                  record.leader, record.leader_recovery_state, record.leader_epoch,
                  record.partition_epoch)
        canonical = encode_record(PartitionRecord(1, record.topic_id, *fields))
        if canonical.endswith(tail) and len(canonical) == len(_PARTITION_HEADER) + 2 + 24 \
                + len(tail):
            self._tails[tail] = fields
        return record
