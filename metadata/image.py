"""The metadata image: the immutable state every node builds by replaying committed records.

Nothing here is ever mutated after construction; a MetadataDelta (delta.py) derives a new image
that shares every unchanged sub-object with the old one. Copy-on-write happens at topic level:
a change to one partition copies that topic's partition map and one 64th of each topic-keyed
map it touches (ShardedMap: topics by id and by name, the index entries of the brokers
involved), never the other topics' partitions. The indexes (ISR members, leaders, imbalanced
and reassigning partitions) keep the controller's queries proportional to their answers on
clusters of a million partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from metadata._construct import positional_constructor
from metadata.config_def import ConfigKey
from metadata.config_keys import BROKER_CONFIGS, TOPIC_CONFIGS
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
from metadata.sharded_map import EMPTY_SHARDED, ShardedMap

if TYPE_CHECKING:  # the authorizer package reads images, so the image must not import it
    from metadata.authorizer.model import AclBinding
    from metadata.scram import ScramCredential
    from metadata.security_records import QuotaEntity

K = TypeVar("K")
V = TypeVar("V")

Replicas = tuple[int, ...]
EMPTY_MAP: Mapping[Any, Any] = MappingProxyType({})


def _no_entries() -> Mapping[Any, Any]:
    return EMPTY_MAP


def mutable_copy(mapping: Mapping[K, V]) -> dict[K, V]:
    """A dict with the same items. Copies a dict (or the dict behind a read-only proxy) at
    C speed: dict(proxy) would go item by item through the mapping protocol."""
    copy = getattr(mapping, "copy", None)
    return copy() if copy is not None else dict(mapping)


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
    def from_record(
        cls, record: PartitionRecord, intern: Callable[[Replicas], Replicas] | None = None
    ) -> PartitionRegistration:
        """`intern` may map equal replica lists to one shared tuple (a big load has few
        distinct lists but a tuple per list and partition would cost ~80 bytes each)."""
        replicas, isr = record.replicas, record.isr
        if intern is not None:
            replicas, isr = intern(replicas), intern(isr)
        return _make_partition(
            replicas,
            isr,
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
        return _make_partition(
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


_make_partition = positional_constructor(PartitionRegistration)


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
PartitionIndex = Mapping[int, ShardedMap[tuple[int, ...]]]
TopicChanges = dict[str, "tuple[int, ...] | None"]


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


def _updated_index(index: PartitionIndex, updates: dict[int, TopicChanges]) -> PartitionIndex:
    """`index` with each key's topic entries replaced (None removes the entry)."""
    if not updates:
        return index
    result = mutable_copy(index)
    for key, topic_changes in updates.items():
        entries = index.get(key, EMPTY_SHARDED).updated(topic_changes)
        if entries:
            result[key] = entries
        else:
            result.pop(key, None)
    return MappingProxyType(result)


def collision_key(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' collide in metric names."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_id: ShardedMap[TopicImage] = field(default_factory=ShardedMap)
    by_name: ShardedMap[TopicImage] = field(default_factory=ShardedMap)
    isr_index: PartitionIndex = field(default_factory=_no_entries)
    leader_index: PartitionIndex = field(default_factory=_no_entries)
    imbalanced: ShardedMap[tuple[int, ...]] = field(default_factory=ShardedMap)
    reassigning: ShardedMap[tuple[int, ...]] = field(default_factory=ShardedMap)
    # collision_key(name) -> the names with '.' or '_' that map to it
    colliding_names: ShardedMap[frozenset[str]] = field(default_factory=ShardedMap)

    def with_changes(self, changes: Mapping[str, TopicImage | None]) -> TopicsImage:
        """A new TopicsImage where each topic id in `changes` is replaced (None: removed)."""
        if not changes:
            return self
        by_id: dict[str, TopicImage | None] = {}
        by_name: dict[str, TopicImage | None] = {}
        colliding: dict[str, frozenset[str] | None] = {}
        isr_updates: dict[int, TopicChanges] = {}
        leader_updates: dict[int, TopicChanges] = {}
        imbalanced: TopicChanges = {}
        reassigning: TopicChanges = {}

        def rename(name: str, add: bool) -> None:
            if has_collision_chars(name):
                key = collision_key(name)
                names = colliding[key] if key in colliding else self.colliding_names.get(key)
                names = (names or frozenset()) | {name} if add else (names or frozenset()) - {name}
                colliding[key] = names or None

        # Removals first, so a name freed and reused in one delta ends up with the new topic.
        for topic_id in changes:
            old = self.by_id.get(topic_id)
            if old is None:
                continue
            by_id[topic_id] = None
            by_name[old.name] = None
            rename(old.name, add=False)
            for index, updates in ((self.isr_index, isr_updates),
                                   (self.leader_index, leader_updates)):
                for key, entries in index.items():
                    if topic_id in entries:
                        updates.setdefault(key, {})[topic_id] = None
            imbalanced[topic_id] = reassigning[topic_id] = None

        for topic_id, new in changes.items():
            if new is None:
                continue
            by_id[topic_id] = by_name[new.name] = new
            rename(new.name, add=True)
            isr_members, leaders, imbalanced_ids, reassigning_ids = _index_entries(new)
            for broker, partition_ids in isr_members.items():
                isr_updates.setdefault(broker, {})[topic_id] = tuple(partition_ids)
            for leader, partition_ids in leaders.items():
                leader_updates.setdefault(leader, {})[topic_id] = tuple(partition_ids)
            imbalanced[topic_id] = tuple(imbalanced_ids) or None
            reassigning[topic_id] = tuple(reassigning_ids) or None

        return TopicsImage(
            by_id=self.by_id.updated(by_id),
            by_name=self.by_name.updated(by_name),
            isr_index=_updated_index(self.isr_index, isr_updates),
            leader_index=_updated_index(self.leader_index, leader_updates),
            imbalanced=self.imbalanced.updated(imbalanced),
            reassigning=self.reassigning.updated(reassigning),
            colliding_names=self.colliding_names.updated(colliding),
        )

    def partition_count(self) -> int:
        return sum(len(topic.partitions) for topic in self.by_id.values())

    def __repr__(self) -> str:  # the default would print every partition
        return f"TopicsImage({len(self.by_id)} topics, {self.partition_count()} partitions)"


@dataclass(frozen=True, slots=True)
class ClusterImage:
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_no_entries)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def is_active(self, broker_id: int) -> bool:
        """Registered, unfenced and not in controlled shutdown (Kafka's isActive)."""
        registration = self.brokers.get(broker_id)
        return registration is not None and registration.active

    def active_broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers.values() if b.active)


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    """Kafka's ProducerIdsImage: where the next block of producer ids starts (-1: no block
    handed out yet, so the first starts at 0)."""

    next_producer_id: int = -1


@dataclass(frozen=True, slots=True)
class MetadataImage:
    provenance: MetadataProvenance = field(default_factory=MetadataProvenance)
    features: Mapping[str, int] = field(default_factory=_no_entries)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=_no_entries)
    producer_ids: ProducerIdsImage = field(default_factory=ProducerIdsImage)
    acls: Mapping[str, AclBinding] = field(default_factory=_no_entries)  # id -> binding
    # user -> mechanism code -> credential (KIP-554)
    scram: Mapping[str, Mapping[int, ScramCredential]] = field(default_factory=_no_entries)
    # quota entity -> key -> value (KIP-546)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=_no_entries)

    # ---- topics and partitions ----

    def topic(self, name: str) -> TopicImage | None:
        topic: TopicImage | None = self.topics.by_name.get(name)
        return topic

    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        topic: TopicImage | None = self.topics.by_id.get(topic_id)
        return topic

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

    def topic_setting(self, topic_name: str, key: str) -> Any:
        """A topic config (metadata.config_keys.TOPIC_CONFIGS) as the controller uses it,
        parsed: the topic's own value, else the cluster-wide default of its broker synonym,
        else Kafka's default. A stored value that does not parse (written before values were
        checked) counts as absent."""
        config = TOPIC_CONFIGS[key]
        own = self.configs.get(ConfigResource(ConfigResourceType.TOPIC, topic_name), EMPTY_MAP)
        return _parsed(config, own.get(key), lambda: self.cluster_setting(config.synonym or key))

    def cluster_setting(self, key: str) -> Any:
        """A broker config (metadata.config_keys.BROKER_CONFIGS) as the controller uses it,
        parsed: the cluster-wide default (BROKER ""), else Kafka's default."""
        config = BROKER_CONFIGS[key]
        value = self.configs.get(CLUSTER_DEFAULT_BROKER, EMPTY_MAP).get(key)
        return _parsed(config, value, lambda: config.parse(config.default or ""))


def _parsed(key: ConfigKey[Any], value: str | None, fallback: Callable[[], Any]) -> Any:
    if value is not None:
        try:
            return key.parse(value)
        except ValueError:
            pass
    return fallback()


def _expand(index: Mapping[str, tuple[int, ...]]) -> Iterator[tuple[str, int]]:
    for topic_id, partition_ids in index.items():
        for partition_id in partition_ids:
            yield topic_id, partition_id


EMPTY_IMAGE = MetadataImage()
