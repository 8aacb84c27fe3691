"""The metadata image as records, and back.

`image_to_records` writes the records that, replayed by MetadataDelta onto the empty image,
rebuild the image: features first (metadata.version leads, as in Kafka), then brokers, topics
with their partitions, and configs. Every order the delta accepts would do; this one is sorted,
so two equal images give byte-identical snapshots.

`image_from_records` replays them. Every record is replayed at the snapshot's last contained
offset, as Kafka's controller does when it loads a snapshot: a broker's registration offset
(the "caught up" mark) is therefore that offset, never earlier than the true one. The image
equals the original except for that mark (see `snapshots.compare.as_loaded`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance
from metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
)

METADATA_VERSION = "metadata.version"

ProgressCallback = Callable[[int], None]


def image_records(image: MetadataImage) -> Iterator[Record]:
    """The image's records, unencoded, in replay order."""
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
    by_name = image.topics.by_name
    for name in sorted(by_name):
        topic = by_name[name]
        yield TopicRecord(name, topic.topic_id)
        partitions = topic.partitions
        topic_id = topic.topic_id
        for partition_id in sorted(partitions):
            yield partitions[partition_id].to_record(topic_id, partition_id)
    configs = image.configs
    for resource in sorted(configs):
        values = configs[resource]
        for key in sorted(values):
            yield ConfigRecord(resource.type, resource.name, key, values[key])


def image_to_records(image: MetadataImage) -> list[bytes]:
    """The encoded records of `image` (metadata/records.py encoding), in replay order."""
    return [encode_record(record) for record in image_records(image)]


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
    count = 0
    for count, data in enumerate(records, 1):
        replay(decode_record(data), offset, epoch, timestamp_ms)
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
