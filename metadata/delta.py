"""MetadataDelta: replays records on top of an image and builds the next image.

Replay rules are Kafka's (ClusterControlManager, ReplicationControlManager,
ConfigurationControlManager, FeatureControlManager and image/*Delta.java). A record that cannot
apply to the current state (a change for an unknown topic, a broker epoch that does not match)
raises MetadataReplayError naming the record and its offset: on a real node that is fatal,
because every node must reach the same image from the same log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from metadata.authorizer.model import AclBinding, binding_of
from metadata.image import (
    EMPTY_MAP,
    BrokerRegistration,
    ClusterImage,
    ConfigResource,
    MetadataImage,
    MetadataProvenance,
    PartitionRegistration,
    ProducerIdsImage,
    TopicImage,
    mutable_copy,
)
from metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    FeatureLevelRecord,
    FencingChange,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from metadata.scram import ScramCredential, ScramMechanism
from metadata.security_records import (
    ClientQuotaRecord,
    QuotaEntity,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)


class MetadataReplayError(Exception):
    """A record that cannot apply to the state it was replayed on: the log is not one this
    node can follow, and it must stop."""

    def __init__(self, record: Record, offset: int, reason: str) -> None:
        self.record = record
        self.offset = offset
        super().__init__(
            f"Unable to replay {record.record_type.name} at offset {offset}: {reason} "
            f"({record!r})"
        )


@dataclass(slots=True)
class _TopicChange:
    """A topic touched by the delta: the base partitions it started from and what changed."""

    name: str
    topic_id: str
    base: Mapping[int, PartitionRegistration]
    changed: dict[int, PartitionRegistration] = field(default_factory=dict)

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        found = self.changed.get(partition_id)
        return found if found is not None else self.base.get(partition_id)

    def build(self) -> TopicImage:
        if self.changed:
            partitions = mutable_copy(self.base)
            partitions.update(self.changed)
            mapping: Mapping[int, PartitionRegistration] = MappingProxyType(partitions)
        else:
            mapping = self.base
        return TopicImage(self.name, self.topic_id, mapping)


_REMOVED = None  # marks a removed broker, topic, name, feature or config resource


class MetadataDelta:
    """Changes on top of `image`, fed one record at a time by `replay`; `apply()` returns the
    next image. The delta itself is mutable and belongs to one thread."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._provenance = image.provenance
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[str, _TopicChange | None] = {}
        self._names: dict[str, str | None] = {}  # topic name -> id, overlaying the image
        self._configs: dict[ConfigResource, dict[str, str] | None] = {}
        self._replica_lists: dict[tuple[int, ...], tuple[int, ...]] = {}  # for interning
        self._producer_ids: ProducerIdsImage | None = None
        self._acls: dict[str, AclBinding | None] = {}  # id -> binding, None: removed
        self._scram: dict[tuple[str, int], ScramCredential | None] = {}  # (user, mechanism)
        self._quotas: dict[tuple[QuotaEntity, str], float | None] = {}  # (entity, key)
        self._replayers: dict[type, Callable[[Any, int], None]] = {
            RegisterBrokerRecord: self._replay_register_broker,
            UnregisterBrokerRecord: self._replay_unregister_broker,
            BrokerRegistrationChangeRecord: self._replay_registration_change,
            TopicRecord: self._replay_topic,
            PartitionRecord: self._replay_partition,
            PartitionChangeRecord: self._replay_partition_change,
            RemoveTopicRecord: self._replay_remove_topic,
            ConfigRecord: self._replay_config,
            FeatureLevelRecord: self._replay_feature_level,
            ProducerIdsRecord: self._replay_producer_ids,
            AccessControlEntryRecord: self._replay_acl,
            RemoveAccessControlEntryRecord: self._replay_remove_acl,
            UserScramCredentialRecord: self._replay_scram,
            RemoveUserScramCredentialRecord: self._replay_remove_scram,
            ClientQuotaRecord: self._replay_client_quota,
            NoOpRecord: _ignore,
        }

    # ---- feeding ----

    def replay(self, record: Record, offset: int, epoch: int, timestamp_ms: int) -> None:
        """Apply one committed record at `offset` of a batch of leader `epoch` written at
        `timestamp_ms`. Raises MetadataReplayError, leaving the delta unchanged."""
        replayer = self._replayers.get(type(record))
        if replayer is None:
            raise TypeError(f"not a metadata record: {record!r}")
        replayer(record, offset)
        self._provenance = MetadataProvenance(offset, epoch, timestamp_ms)

    # ---- reading the delta's current state ----

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.cluster.brokers.get(broker_id)

    def topic_id(self, name: str) -> str | None:
        if name in self._names:
            return self._names[name]
        topic = self.image.topics.by_name.get(name)
        return None if topic is None else topic.topic_id

    def _topic_name(self, topic_id: str) -> str | None:
        if topic_id in self._topics:
            change = self._topics[topic_id]
            return None if change is None else change.name
        topic = self.image.topics.by_id.get(topic_id)
        return None if topic is None else topic.name

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        if topic_id in self._topics:
            change = self._topics[topic_id]
            return None if change is None else change.partition(partition_id)
        return self.image.partition(topic_id, partition_id)

    # ---- replay, one method per record type ----

    def _replay_register_broker(self, record: RegisterBrokerRecord, offset: int) -> None:
        self._brokers[record.broker_id] = BrokerRegistration.from_record(record, offset)

    def _registration_with_epoch(
        self, record: UnregisterBrokerRecord | BrokerRegistrationChangeRecord, offset: int
    ) -> BrokerRegistration:
        registration = self.broker(record.broker_id)
        if registration is None or registration.epoch != record.broker_epoch:
            raise MetadataReplayError(
                record, offset, f"no broker registration for broker {record.broker_id} "
                f"with epoch {record.broker_epoch} found"
            )
        return registration

    def _replay_unregister_broker(self, record: UnregisterBrokerRecord, offset: int) -> None:
        self._registration_with_epoch(record, offset)
        self._brokers[record.broker_id] = _REMOVED

    def _replay_registration_change(
        self, record: BrokerRegistrationChangeRecord, offset: int
    ) -> None:
        registration = self._registration_with_epoch(record, offset)
        fenced = registration.fenced
        if record.fenced == FencingChange.FENCE:
            fenced = True
        elif record.fenced == FencingChange.UNFENCE:
            fenced = False
        # Kafka's cloneWith: fencing does not clear in_controlled_shutdown; a new
        # registration (a new incarnation) does.
        in_controlled_shutdown = registration.in_controlled_shutdown or (
            record.in_controlled_shutdown == ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN
        )
        self._brokers[record.broker_id] = BrokerRegistration(
            registration.id,
            registration.epoch,
            registration.incarnation_id,
            registration.endpoints,
            registration.rack,
            fenced,
            in_controlled_shutdown,
            registration.registration_offset,
        )

    def _replay_topic(self, record: TopicRecord, offset: int) -> None:
        existing = self.topic_id(record.name)
        if existing is not None:
            raise MetadataReplayError(
                record, offset, f"Found duplicate TopicRecord for {record.name}: topic id "
                f"{existing} already has that name"
            )
        if self._topic_name(record.topic_id) is not None:
            raise MetadataReplayError(
                record, offset, f"topic id {record.topic_id} is already in use"
            )
        self._topics[record.topic_id] = _TopicChange(record.name, record.topic_id, EMPTY_MAP)
        self._names[record.name] = record.topic_id

    def _topic_for_change(self, record: Record, topic_id: str, offset: int) -> _TopicChange:
        if topic_id in self._topics:
            change = self._topics[topic_id]
        else:
            topic = self.image.topics.by_id.get(topic_id)
            change = None if topic is None else _TopicChange(
                topic.name, topic_id, topic.partitions
            )
            if change is not None:
                self._topics[topic_id] = change
        if change is None:
            raise MetadataReplayError(record, offset, f"no topic with id {topic_id} was found")
        return change

    def _replay_partition(self, record: PartitionRecord, offset: int) -> None:
        change = self._topic_for_change(record, record.topic_id, offset)
        change.changed[record.partition_id] = PartitionRegistration.from_record(
            record, self._intern)

    def _intern(self, replicas: tuple[int, ...]) -> tuple[int, ...]:
        return self._replica_lists.setdefault(replicas, replicas)

    def _replay_partition_change(self, record: PartitionChangeRecord, offset: int) -> None:
        change = self._topic_for_change(record, record.topic_id, offset)
        current = change.partition(record.partition_id)
        if current is None:
            raise MetadataReplayError(
                record, offset, f"no partition {record.partition_id} in topic {change.name}"
            )
        change.changed[record.partition_id] = current.merge(record)

    def _replay_remove_topic(self, record: RemoveTopicRecord, offset: int) -> None:
        name = self._topic_name(record.topic_id)
        if name is None:
            raise MetadataReplayError(
                record, offset, f"Can't find topic with ID {record.topic_id} to remove"
            )
        self._topics[record.topic_id] = _REMOVED
        self._names[name] = _REMOVED
        # The topic's configs go with it (Kafka's deleteTopicConfigs).
        self._configs[ConfigResource(ConfigResourceType.TOPIC, name)] = _REMOVED

    def _replay_config(self, record: ConfigRecord, offset: int) -> None:
        resource = ConfigResource(record.resource_type, record.resource_name)
        if resource in self._configs:
            current = self._configs[resource] or {}
        else:
            current = mutable_copy(self.image.configs.get(resource, EMPTY_MAP))
        if record.value is None:
            current.pop(record.name, None)
        else:
            current[record.name] = record.value
        self._configs[resource] = current or _REMOVED

    def _replay_feature_level(self, record: FeatureLevelRecord, offset: int) -> None:
        self._features[record.name] = record.feature_level or _REMOVED

    def _replay_producer_ids(self, record: ProducerIdsRecord, offset: int) -> None:
        # Kafka's ProducerIdControlManager.replay: blocks only move forward, so no id is
        # handed out twice.
        current = (self._producer_ids or self.image.producer_ids).next_producer_id
        if record.next_producer_id <= current:
            raise MetadataReplayError(
                record, offset, f"next producer id {record.next_producer_id} is not greater "
                f"than the current next producer id {current}"
            )
        self._producer_ids = ProducerIdsImage(record.next_producer_id)

    def _replay_acl(self, record: AccessControlEntryRecord, offset: int) -> None:
        # Kafka's AclControlManager.replay: an id names one binding for good.
        if self.acl(record.id) is not None:
            raise MetadataReplayError(record, offset, f"an ACL with id {record.id} exists")
        self._acls[record.id] = binding_of(record)

    def _replay_remove_acl(self, record: RemoveAccessControlEntryRecord, offset: int) -> None:
        if self.acl(record.id) is None:
            raise MetadataReplayError(record, offset, f"no ACL with id {record.id} to remove")
        self._acls[record.id] = _REMOVED

    def acl(self, acl_id: str) -> AclBinding | None:
        if acl_id in self._acls:
            return self._acls[acl_id]
        return self.image.acls.get(acl_id)

    @property
    def acls_changed(self) -> bool:
        """Whether this delta creates or removes an ACL (the authorizer reloads only then)."""
        return bool(self._acls)

    def _replay_scram(self, record: UserScramCredentialRecord, offset: int) -> None:
        mechanism = ScramMechanism.of_code(record.mechanism)
        if mechanism is ScramMechanism.UNKNOWN:
            raise MetadataReplayError(record, offset,
                                      f"unknown SCRAM mechanism {record.mechanism}")
        if not record.name:
            raise MetadataReplayError(record, offset, "a SCRAM credential without a user name")
        self._scram[(record.name, int(mechanism))] = ScramCredential(
            record.salt, record.stored_key, record.server_key, record.iterations)

    def _replay_remove_scram(self, record: RemoveUserScramCredentialRecord, offset: int) -> None:
        # Kafka's ScramControlManager.replay: a removal must find the credential.
        key = (record.name, record.mechanism)
        if key in self._scram:
            present = self._scram[key] is not None
        else:
            present = record.mechanism in self.image.scram.get(record.name, EMPTY_MAP)
        if not present:
            raise MetadataReplayError(
                record, offset, f"no {ScramMechanism.of_code(record.mechanism).mechanism_name} "
                f"credential of user {record.name!r} to remove")
        self._scram[key] = _REMOVED

    @property
    def scram_changed(self) -> bool:
        """Whether this delta adds, replaces or removes a SCRAM credential."""
        return bool(self._scram)

    def _replay_client_quota(self, record: ClientQuotaRecord, offset: int) -> None:
        # Kafka's replay takes any entity; these two have no key in its entity map.
        entity = record.quota_entity
        if not entity:
            raise MetadataReplayError(record, offset, "a client quota without an entity")
        if len({entity_type for entity_type, _ in entity}) != len(entity):
            raise MetadataReplayError(record, offset, "a client quota entity names a type twice")
        # Removing an unset key is a no-op, as in Kafka's ClientQuotaControlManager.replay.
        self._quotas[(entity, record.key)] = _REMOVED if record.remove else record.value

    @property
    def client_quotas_changed(self) -> bool:
        """Whether this delta sets or removes a client quota (quota managers reload only then)."""
        return bool(self._quotas)

    # ---- building the next image ----

    def apply(self) -> MetadataImage:
        """The image with every replayed record applied; the delta stays usable."""
        image = self.image
        return MetadataImage(
            provenance=self._provenance,
            features=_overlay(image.features, self._features),
            cluster=ClusterImage(_overlay(image.cluster.brokers, self._brokers))
            if self._brokers else image.cluster,
            topics=image.topics.with_changes({
                topic_id: None if change is None else change.build()
                for topic_id, change in self._topics.items()
            }),
            configs=_overlay(image.configs, {
                resource: None if values is None else MappingProxyType(dict(values))
                for resource, values in self._configs.items()
            }),
            producer_ids=self._producer_ids or image.producer_ids,
            acls=_overlay(image.acls, self._acls),
            scram=_overlay_nested(image.scram, self._scram),
            client_quotas=_overlay_nested(image.client_quotas, self._quotas),
        )


def _ignore(record: Record, offset: int) -> None:
    pass


def _overlay(base: Mapping[Any, Any], changes: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """`base` with `changes` applied, a None value removing the key."""
    if not changes:
        return base
    result = mutable_copy(base)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return MappingProxyType(result)


def _overlay_nested(base: Mapping[Any, Mapping[Any, Any]],
                    changes: Mapping[tuple[Any, Any], Any]) -> Mapping[Any, Mapping[Any, Any]]:
    """`base` (outer -> inner -> value) with `changes` ((outer, inner) -> value) applied, a
    None value removing the inner key and an emptied outer key disappearing."""
    if not changes:
        return base
    touched: dict[Any, dict[Any, Any]] = {}
    for (outer, inner), value in changes.items():
        inner_map = touched.get(outer)
        if inner_map is None:
            inner_map = touched[outer] = mutable_copy(base.get(outer, EMPTY_MAP))
        if value is None:
            inner_map.pop(inner, None)
        else:
            inner_map[inner] = value
    return _overlay(base, {outer: MappingProxyType(inner_map) if inner_map else None
                           for outer, inner_map in touched.items()})
