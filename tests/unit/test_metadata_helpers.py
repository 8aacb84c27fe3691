"""Shared builders for the metadata rule tests (no tests here): images are only ever made by
replaying records, as on a real node."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from metadata.delta import MetadataDelta
from metadata.errors import ControllerResult
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)

FOO = "5zoAlv-xEh9xRANKXt1Lbg"
BAR = "b0sJ5JiHR6qbTzmD8yaGyQ"
BAZ = "AAAAAAAAAAAAAAAAAAAAAg"
INCARNATION = "7yd6v3LdRPy1BLJbSb6FQQ"


def replay(image: MetadataImage, records: Iterable[Record]) -> MetadataImage:
    delta = MetadataDelta(image)
    offset = image.provenance.offset + 1
    for record in records:
        delta.replay(record, offset, 1, 0)
        offset += 1
    return delta.apply()


def commit(image: MetadataImage, result: ControllerResult) -> MetadataImage:
    """The image after the rule's records are replayed: the only way state changes."""
    return replay(image, result.records)


def epoch_of(broker_id: int) -> int:
    return 100 + broker_id


def cluster(
    brokers: Sequence[int] = (1, 2, 3),
    *,
    fenced: Iterable[int] = (),
    racks: dict[int, str] | None = None,
) -> MetadataImage:
    fenced = set(fenced)
    racks = racks or {}
    return replay(EMPTY_IMAGE, [
        RegisterBrokerRecord(b, INCARNATION, epoch_of(b), rack=racks.get(b), fenced=b in fenced)
        for b in brokers
    ])


def with_topic(
    image: MetadataImage,
    name: str,
    topic_id: str,
    replicas: Sequence[Sequence[int]],
    *,
    isr: Sequence[Sequence[int]] | None = None,
    leaders: Sequence[int] | None = None,
    configs: dict[str, str] | None = None,
) -> MetadataImage:
    """A topic with the given replica lists; ISR defaults to all replicas and the leader to
    the first ISR member."""
    records: list[Record] = [TopicRecord(name, topic_id)]
    for key, value in (configs or {}).items():
        records.append(ConfigRecord(ConfigResourceType.TOPIC, name, key, value))
    for i, assigned in enumerate(replicas):
        partition_isr = tuple(isr[i]) if isr is not None else tuple(assigned)
        leader = leaders[i] if leaders is not None else (partition_isr or (-1,))[0]
        records.append(PartitionRecord(i, topic_id, tuple(assigned), partition_isr,
                                       leader=leader))
    return replay(image, records)


def cluster_config(image: MetadataImage, key: str, value: str) -> MetadataImage:
    return replay(image, [ConfigRecord(ConfigResourceType.BROKER, "", key, value)])


def counter_ids(*ids: str) -> Callable[[], str]:
    """A topic id factory handing out `ids` in order (deterministic tests)."""
    remaining = list(ids)
    return lambda: remaining.pop(0)
