"""The metadata image: the immutable state every node builds by replaying committed records.

Nothing here is ever mutated after construction; a MetadataDelta (delta.py) derives a new image
that shares every unchanged sub-object with the old one. Copy-on-write happens at topic level:
a change to one partition copies that topic's partition map, the top-level topic maps and the
index entries of the brokers involved, never the other topics' partitions. The indexes (ISR
members, leaders, imbalanced and reassigning partitions) keep the controller's queries
proportional to their answers on clusters of a million partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    ConfigResourceType,
    Endpoint,
    LeaderRecoveryState,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)

K = TypeVar("K")
V = TypeVar("V")

EMPTY_MAP: Mapping = MappingProxyType({})


def _no_entries() -> Mapping:
    return EMPTY_MAP

# What the controller falls back to when neither the topic nor the cluster default sets a key
# (Kafka's static defaults for the topic configs the controller itself reads).
TOPIC_CONFIG_DEFAULTS: Mapping[str, str] = MappingProxyType({
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
})


def frozen_map(items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> Mapping[K, V]:
    """A read-only mapping over a private dict."""
    return MappingProxyType(dict(items))


class ConfigResource(NamedTuple):
    type: int  # ConfigResourceType
    name: str  # "" with BROKER: the cluster-wide default


CLUSTER_DEFAULT_BROKER = ConfigResource(ConfigResourceType.BROKER, "")


@dataclass(frozen=True, slots=True)
class MetadataProvenance:
    """Where an image comes from: the last record applied (offset -1: nothing yet)."""

    offset: int = -1
    epoch: int = -1
    timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    id: int
    epoch: int
    incarnation_id: str
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    registration_offset: int  # offset of its RegisterBrokerRecord: the "caught up" mark

    @property
    def active(self) -> bool:
        """May lead, join an ISR and receive new replicas."""
        return not self.fenced and not self.in_controlled_shutdown

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord, offset: int) -> BrokerRegistration:
        return cls(
            record.broker_id,
            record.broker_epoch,
            record.incarnation_id,
            record.endpoints,
            record.rack,
            record.fenced,
            record.in_controlled_shutdown,
            offset,
        )


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_recovery_state: int = 0  # LeaderRecoveryState.RECOVERED
    leader_epoch: int = 0
    partition_epoch: int = 0

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        return cls(
            record.replicas,
            record.isr,
            record.removing_replicas,
            record.adding_replicas,
            record.leader,
            record.leader_recovery_state,
            record.leader_epoch,
            record.partition_epoch,
        )

    def to_record(self, topic_id: str, partition_id: int) -> PartitionRecord:
        return PartitionRecord(
            partition_id,
            topic_id,
            self.replicas,
            self.isr,
            self.removing_replicas,
            self.adding_replicas,
            self.leader,
            self.leader_recovery_state,
            self.leader_epoch,
            self.partition_epoch,
        )

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        """Kafka's PartitionRegistration.merge: present fields replace, any leader field (even
        the same id) bumps the leader epoch, and every change bumps the partition epoch."""
        if change.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        recovery = change.leader_recovery_state
        return PartitionRegistration(
            self.replicas if change.replicas is None else change.replicas,
            self.isr if change.isr is None else change.isr,
            self.removing_replicas if change.removing_replicas is None
            else change.removing_replicas,
            self.adding_replicas if change.adding_replicas is None else change.adding_replicas,
            leader,
            self.leader_recovery_state if recovery == -1 else recovery,
            leader_epoch,
            self.partition_epoch + 1,
        )

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def has_preferred_leader(self) -> bool:
        return self.leader == self.preferred_leader

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    @property
    def is_recovering(self) -> bool:
        return self.leader_recovery_state == LeaderRecoveryState.RECOVERING


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=_no_entries)

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        return self.partitions.get(partition_id)

    @property
    def replication_factor(self) -> int:
        """Kafka's rule: the replica count of partition 0."""
        first = self.partitions.get(0)
        return len(first.replicas) if first is not None else 0


# broker (or leader id, -1 for none) -> topic id -> sorted partition ids
PartitionIndex = Mapping[int, Mapping[str, tuple[int, ...]]]


def _index_entries(
    topic: TopicImage,
) -> tuple[dict[int, list[int]], dict[int, list[int]], list[int], list[int]]:
    """One topic's entries in the ISR, leader, imbalanced and reassigning indexes."""
    isr_members: dict[int, list[int]] = {}
    leaders: dict[int, list[int]] = {}
    imbalanced: list[int] = []
    reassigning: list[int] = []
    for partition_id, p in sorted(topic.partitions.items()):
        for broker in p.isr:
            isr_members.setdefault(broker, []).append(partition_id)
        leaders.setdefault(p.leader, []).append(partition_id)
        if p.leader != (p.replicas[0] if p.replicas else NO_LEADER):
            imbalanced.append(partition_id)
        if p.removing_replicas or p.adding_replicas:
            reassigning.append(partition_id)
    return isr_members, leaders, imbalanced, reassigning


def _updated_index(
    index: PartitionIndex, updates: dict[int, dict[str, tuple[int, ...]]]
) -> PartitionIndex:
    """`index` with each key's topic entries replaced (an empty tuple removes the entry)."""
    if not updates:
        return index
    result = dict(index)
    for key, topic_entries in updates.items():
        entries = dict(index.get(key, EMPTY_MAP))
        for topic_id, partition_ids in topic_entries.items():
            if partition_ids:
                entries[topic_id] = partition_ids
            else:
                entries.pop(topic_id, None)
        if entries:
            result[key] = MappingProxyType(entries)
        else:
            result.pop(key, None)
    return MappingProxyType(result)


def _updated_flat(
    index: Mapping[str, tuple[int, ...]], updates: dict[str, tuple[int, ...]]
) -> Mapping[str, tuple[int, ...]]:
    if not updates:
        return index
    result = dict(index)
    for topic_id, partition_ids in updates.items():
        if partition_ids:
            result[topic_id] = partition_ids
        else:
            result.pop(topic_id, None)
    return MappingProxyType(result)


def collision_key(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names."""
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_id: Mapping[str, TopicImage] = field(default_factory=_no_entries)
    by_name: Mapping[str, TopicImage] = field(default_factory=_no_entries)
    isr_index: PartitionIndex = field(default_factory=_no_entries)
    leader_index: PartitionIndex = field(default_factory=_no_entries)
    imbalanced: Mapping[str, tuple[int, ...]] = field(default_factory=_no_entries)
    reassigning: Mapping[str, tuple[int, ...]] = field(default_factory=_no_entries)
    # collision_key(name) -> names with '.' or '_' that map to it
    colliding_names: Mapping[str, frozenset[str]] = field(default_factory=_no_entries)

    def with_changes(self, changes: Mapping[str, TopicImage | None]) -> TopicsImage:
        """A new TopicsImage where each topic id in `changes` is replaced (None: removed)."""
        if not changes:
            return self
        by_id = dict(self.by_id)
        by_name = dict(self.by_name)
        colliding = dict(self.colliding_names)
        isr_updates: dict[int, dict[str, tuple[int, ...]]] = {}
        leader_updates: dict[int, dict[str, tuple[int, ...]]] = {}
        imbalanced_updates: dict[str, tuple[int, ...]] = {}
        reassigning_updates: dict[str, tuple[int, ...]] = {}

        # Removals first, so a name freed and reused in one delta ends up with the new topic.
        for topic_id in changes:
            old = self.by_id.get(topic_id)
            if old is None:
                continue
            del by_id[topic_id]
            del by_name[old.name]
            _forget_name(colliding, old.name)
            for index, updates in ((self.isr_index, isr_updates),
                                   (self.leader_index, leader_updates)):
                for key, entries in index.items():
                    if topic_id in entries:
                        updates.setdefault(key, {})[topic_id] = ()
            imbalanced_updates[topic_id] = ()
            reassigning_updates[topic_id] = ()

        for topic_id, new in changes.items():
            if new is None:
                continue
            by_id[topic_id] = new
            by_name[new.name] = new
            _remember_name(colliding, new.name)
            isr_members, leaders, imbalanced, reassigning = _index_entries(new)
            for broker, partition_ids in isr_members.items():
                isr_updates.setdefault(broker, {})[topic_id] = tuple(partition_ids)
            for leader, partition_ids in leaders.items():
                leader_updates.setdefault(leader, {})[topic_id] = tuple(partition_ids)
            imbalanced_updates[topic_id] = tuple(imbalanced)
            reassigning_updates[topic_id] = tuple(reassigning)

        return TopicsImage(
            by_id=MappingProxyType(by_id),
            by_name=MappingProxyType(by_name),
            isr_index=_updated_index(self.isr_index, isr_updates),
            leader_index=_updated_index(self.leader_index, leader_updates),
            imbalanced=_updated_flat(self.imbalanced, imbalanced_updates),
            reassigning=_updated_flat(self.reassigning, reassigning_updates),
            colliding_names=MappingProxyType(colliding),
        )

    def partition_count(self) -> int:
        return sum(len(topic.partitions) for topic in self.by_id.values())

    def __repr__(self) -> str:  # the default would print every partition
        return f"TopicsImage({len(self.by_id)} topics, {self.partition_count()} partitions)"


def _remember_name(colliding: dict[str, frozenset[str]], name: str) -> None:
    if "." in name or "_" in name:
        key = collision_key(name)
        colliding[key] = colliding.get(key, frozenset()) | {name}


def _forget_name(colliding: dict[str, frozenset[str]], name: str) -> None:
    if "." in name or "_" in name:
        key = collision_key(name)
        remaining = colliding.get(key, frozenset()) - {name}
        if remaining:
            colliding[key] = remaining
        else:
            colliding.pop(key, None)


@dataclass(frozen=True, slots=True)
class ClusterImage:
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_no_entries)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def is_active(self, broker_id: int) -> bool:
        """Registered, unfenced and not in controlled shutdown (Kafka's isActive)."""
        registration = self.brokers.get(broker_id)
        return registration is not None and registration.active

    def unfenced_broker_ids(self) -> list[int]:
        """The live brokers, as the metadata cache shows them."""
        return sorted(b.id for b in self.brokers.values() if not b.fenced)

    def fenced_broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers.values() if b.fenced)

    def active_broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers.values() if b.active)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    provenance: MetadataProvenance = field(default_factory=MetadataProvenance)
    features: Mapping[str, int] = field(default_factory=_no_entries)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=_no_entries)

    # ---- topics and partitions ----

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.by_name.get(name)

    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        return self.topics.by_id.get(topic_id)

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        topic = self.topics.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def partitions_with_isr_member(self, broker_id: int) -> Iterator[tuple[str, int]]:
        """(topic id, partition id) of every partition whose ISR holds the broker."""
        return _expand(self.topics.isr_index.get(broker_id, EMPTY_MAP))

    def partitions_led_by(self, broker_id: int) -> Iterator[tuple[str, int]]:
        return _expand(self.topics.leader_index.get(broker_id, EMPTY_MAP))

    def leads_any_partition(self, broker_id: int) -> bool:
        return broker_id in self.topics.leader_index

    def leaderless_partitions(self) -> Iterator[tuple[str, int]]:
        return _expand(self.topics.leader_index.get(NO_LEADER, EMPTY_MAP))

    def imbalanced_partitions(self) -> Iterator[tuple[str, int]]:
        """Partitions whose leader is not their preferred replica (replicas[0])."""
        return _expand(self.topics.imbalanced)

    def reassigning_partitions(self) -> Iterator[tuple[str, int]]:
        return _expand(self.topics.reassigning)

    # ---- configs ----

    def config(self, resource: ConfigResource) -> Mapping[str, str]:
        return self.configs.get(resource, EMPTY_MAP)

    def topic_config(self, topic_name: str, key: str) -> str | None:
        """The effective value: the topic's own, else the cluster-wide broker default, else
        Kafka's default for the keys the controller reads (TOPIC_CONFIG_DEFAULTS)."""
        value = self.configs.get(ConfigResource(ConfigResourceType.TOPIC, topic_name),
                                 EMPTY_MAP).get(key)
        if value is None:
            value = self.configs.get(CLUSTER_DEFAULT_BROKER, EMPTY_MAP).get(key)
        if value is None:
            value = TOPIC_CONFIG_DEFAULTS.get(key)
        return value


def _expand(index: Mapping[str, tuple[int, ...]]) -> Iterator[tuple[str, int]]:
    for topic_id, partition_ids in index.items():
        for partition_id in partition_ids:
            yield topic_id, partition_id


EMPTY_IMAGE = MetadataImage()
