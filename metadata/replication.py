"""The replication rules of Kafka's ReplicationControlManager as pure functions.

Each rule takes an image and a request and returns a ControllerResult (records + response), or
raises ControllerApiError when the whole request is refused. No I/O, no clocks: the controller
layer decides when to run a rule, appends its records and answers after they commit.

Broker transitions (spec §2.5): fencing, controlled shutdown and unregistration take the broker
out of every ISR and move its leaderships (the ISR stays [b] with leader -1 when b was its only
member); unfencing elects leaders for leaderless partitions. Elections (§3.2-§3.4), AlterPartition
(§3.5). Topic rules live in topics.py, reassignment in reassignment.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.image import MetadataImage, PartitionRegistration, TopicImage
from metadata.partition_change import Election, build_partition_change
from metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    ControlledShutdownChange,
    FencingChange,
    LeaderRecoveryState,
    PartitionChangeRecord,
    Record,
    UnregisterBrokerRecord,
)

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
MAX_ELECTIONS_PER_RUN = 1000  # Kafka's maxElectionsPerImbalance


# ---- configs the rules read ----

def unclean_leader_election_enabled(image: MetadataImage, topic_name: str) -> bool:
    """The topic's `unclean.leader.election.enable`, else the cluster default, else false."""
    enabled: bool = image.topic_setting(topic_name, UNCLEAN_LEADER_ELECTION_ENABLE)
    return enabled


# ---- a working view: the image plus the changes a rule has made so far ----

class PartitionChanges:
    """Records produced so far by one rule, and the partitions as they will be once those
    records are replayed, so that touching a partition twice builds on the first change."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.records: list[Record] = []
        self._changed: dict[tuple[str, int], PartitionRegistration] = {}
        self._unclean_enabled: dict[str, bool] = {}

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        changed = self._changed.get((topic_id, partition_id))
        return changed if changed is not None else self.image.partition(topic_id, partition_id)

    def add(self, record: PartitionChangeRecord) -> PartitionRegistration:
        key = (record.topic_id, record.partition_id)
        current = self.partition(*key)
        assert current is not None
        merged = self._changed[key] = current.merge(record)
        self.records.append(record)
        return merged

    def default_election(self, topic_name: str) -> Election:
        enabled = self._unclean_enabled.get(topic_name)
        if enabled is None:
            enabled = self._unclean_enabled[topic_name] = unclean_leader_election_enabled(
                self.image, topic_name)
        return Election.UNCLEAN if enabled else Election.ONLINE


def _leader_and_isr_updates(
    changes: PartitionChanges,
    partitions: Iterable[tuple[str, int]],
    *,
    broker_to_remove: int = NO_LEADER,
    broker_to_add: int = NO_LEADER,
) -> None:
    """Kafka's generateLeaderAndIsrUpdates: remove `broker_to_remove` from each ISR and from
    leadership; `broker_to_add` is an acceptable leader even though its registration still
    says fenced (it is being unfenced by the same batch)."""
    cluster = changes.image.cluster

    def acceptable(replica: int) -> bool:
        return replica != broker_to_remove and (
            replica == broker_to_add or cluster.is_active(replica))

    for topic_id, partition_id in list(partitions):
        topic = changes.image.topic_by_id(topic_id)
        partition = changes.partition(topic_id, partition_id)
        assert topic is not None and partition is not None, "index out of step with topics"
        record = build_partition_change(
            partition, topic_id, partition_id, acceptable,
            election=changes.default_election(topic.name),
            target_isr=[r for r in partition.isr if r != broker_to_remove],
        )
        if record is not None:
            changes.add(record)


# ---- broker transitions ----

def _registered(image: MetadataImage, broker_id: int) -> int:
    registration = image.cluster.broker(broker_id)
    if registration is None:
        raise ControllerApiError(Errors.BROKER_ID_NOT_REGISTERED,
                                 f"Broker ID {broker_id} is not currently registered")
    return registration.epoch


def fence_broker(image: MetadataImage, broker_id: int) -> ControllerResult[None]:
    """Session expired, or the broker asked to be fenced or shut down now: out of every ISR,
    leaderships moved, then BrokerRegistrationChangeRecord(fenced=1)."""
    epoch = _registered(image, broker_id)
    fence = BrokerRegistrationChangeRecord(broker_id, epoch, fenced=FencingChange.FENCE)
    return ControllerResult((*remove_from_isrs(image, broker_id), fence), None, atomic=False)


def remove_from_isrs(image: MetadataImage, broker_id: int) -> tuple[Record, ...]:
    """Kafka's handleBrokerShutdown (without ELR): the broker leaves every ISR and its
    leaderships move, as when it is fenced; its registration is left as it is."""
    changes = PartitionChanges(image)
    _leader_and_isr_updates(changes, image.partitions_with_isr_member(broker_id),
                            broker_to_remove=broker_id)
    return tuple(changes.records)


def unfence_broker(image: MetadataImage, broker_id: int) -> ControllerResult[None]:
    """The broker caught up: BrokerRegistrationChangeRecord(fenced=-1), then a leader for
    every leaderless partition it can lead (clean, or unclean where the topic allows)."""
    epoch = _registered(image, broker_id)
    changes = PartitionChanges(image)
    changes.records.append(
        BrokerRegistrationChangeRecord(broker_id, epoch, fenced=FencingChange.UNFENCE))
    _leader_and_isr_updates(changes, image.leaderless_partitions(), broker_to_add=broker_id)
    return ControllerResult(tuple(changes.records), None, atomic=False)


def begin_controlled_shutdown(image: MetadataImage, broker_id: int) -> ControllerResult[None]:
    """BrokerRegistrationChangeRecord(in_controlled_shutdown=1) unless already so, then the
    broker leaves every ISR and its leaderships move."""
    epoch = _registered(image, broker_id)
    changes = PartitionChanges(image)
    registration = image.cluster.brokers[broker_id]
    if not registration.in_controlled_shutdown:
        changes.records.append(BrokerRegistrationChangeRecord(
            broker_id, epoch,
            in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN))
    _leader_and_isr_updates(changes, image.partitions_with_isr_member(broker_id),
                            broker_to_remove=broker_id)
    return ControllerResult(tuple(changes.records), None, atomic=False)


def unregister_broker(image: MetadataImage, broker_id: int) -> ControllerResult[None]:
    """The UnregisterBroker API: out of every ISR, leaderships moved, UnregisterBrokerRecord."""
    epoch = _registered(image, broker_id)
    records = [*remove_from_isrs(image, broker_id), UnregisterBrokerRecord(broker_id, epoch)]
    check_user_op_size(records)
    return ControllerResult(tuple(records), None, atomic=False)


# ---- elections ----

class ElectionType(IntEnum):
    """ElectLeaders' election types, Kafka's ids."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class PartitionElectionResult:
    topic: str
    partition_id: int
    error: ControllerApiError | None = None  # None: a new leader was elected


def _elect_one(
    changes: PartitionChanges, topic_name: str, partition_id: int, election_type: ElectionType
) -> ControllerApiError | None:
    """Kafka's electLeader for one partition of an ElectLeaders request."""
    topic = changes.image.topic(topic_name)
    if topic is None:
        return ControllerApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                  f"No such topic as {topic_name}")
    partition = changes.partition(topic.topic_id, partition_id)
    if partition is None:
        return ControllerApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                  f"No such partition as {topic_name}-{partition_id}")
    if (election_type is ElectionType.PREFERRED and partition.has_preferred_leader) or (
            election_type is ElectionType.UNCLEAN and partition.has_leader):
        return ControllerApiError(Errors.ELECTION_NOT_NEEDED)
    election = (Election.PREFERRED if election_type is ElectionType.PREFERRED
                else Election.UNCLEAN)
    record = build_partition_change(partition, topic.topic_id, partition_id,
                                    changes.image.cluster.is_active, election=election)
    if record is None:
        return ControllerApiError(Errors.PREFERRED_LEADER_NOT_AVAILABLE
                                  if election_type is ElectionType.PREFERRED
                                  else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE)
    changes.add(record)
    return None


def elect_leaders(
    image: MetadataImage,
    election_type: ElectionType,
    partitions: Sequence[tuple[str, int]] | None,
) -> ControllerResult[list[PartitionElectionResult]]:
    """The ElectLeaders API. `partitions` None means every partition, and then partitions that
    need no election are left out of the results. A partition named twice is answered once."""
    changes = PartitionChanges(image)
    results: dict[tuple[str, int], PartitionElectionResult] = {}
    if partitions is None:
        for name in sorted(image.topics.by_name):
            for partition_id in sorted(image.topics.by_name[name].partitions):
                error = _elect_one(changes, name, partition_id, election_type)
                if error is None or error.error is not Errors.ELECTION_NOT_NEEDED:
                    results[(name, partition_id)] = PartitionElectionResult(
                        name, partition_id, error)
    else:
        for name, partition_id in partitions:
            if (name, partition_id) not in results:
                results[(name, partition_id)] = PartitionElectionResult(
                    name, partition_id, _elect_one(changes, name, partition_id, election_type))
    check_user_op_size(changes.records)
    return ControllerResult(tuple(changes.records), list(results.values()), atomic=False)


def _brokers_over_imbalance(image: MetadataImage, imbalance_percentage: int) -> set[int]:
    """Brokers whose share of partitions not led by them, among those they are the preferred
    leader of, exceeds the percentage (the ZooKeeper controller's rule)."""
    imbalanced_by_preferred: dict[int, int] = {}
    imbalanced_by_leader: dict[int, int] = {}
    for topic_id, partition_id in image.imbalanced_partitions():
        partition = image.partition(topic_id, partition_id)
        assert partition is not None
        preferred = partition.preferred_leader
        imbalanced_by_preferred[preferred] = imbalanced_by_preferred.get(preferred, 0) + 1
        imbalanced_by_leader[partition.leader] = imbalanced_by_leader.get(partition.leader, 0) + 1
    over = set()
    for broker, imbalanced in imbalanced_by_preferred.items():
        led = sum(len(ids) for ids in image.topics.leader_index.get(broker, {}).values())
        # Preferred-led by the broker = balanced partitions it leads + imbalanced ones.
        preferred_total = led - imbalanced_by_leader.get(broker, 0) + imbalanced
        if imbalanced * 100 > imbalance_percentage * preferred_total:
            over.add(broker)
    return over


def balance_partition_leaders(
    image: MetadataImage,
    *,
    imbalance_percentage: int = 10,
    max_elections: int = MAX_ELECTIONS_PER_RUN,
) -> ControllerResult[bool]:
    """Auto leader rebalance: a PREFERRED election for the imbalanced partitions of every
    broker whose imbalance ratio exceeds `leader.imbalance.per.broker.percentage` (Kafka's
    KRaft controller ignores that setting; we honour it). At most `max_elections` records;
    the response says whether to run again at once."""
    brokers = _brokers_over_imbalance(image, imbalance_percentage)
    changes = PartitionChanges(image)
    if brokers:
        for topic_id, partition_id in image.imbalanced_partitions():
            if len(changes.records) >= max_elections:
                break
            partition = changes.partition(topic_id, partition_id)
            assert partition is not None
            if partition.preferred_leader not in brokers:
                continue
            record = build_partition_change(partition, topic_id, partition_id,
                                            image.cluster.is_active, election=Election.PREFERRED)
            if record is not None:
                changes.add(record)
    return ControllerResult(tuple(changes.records), len(changes.records) >= max_elections,
                            atomic=False)


def elect_unclean_leaders(
    image: MetadataImage, *, max_elections: int = MAX_ELECTIONS_PER_RUN
) -> ControllerResult[bool]:
    """The periodic unclean election (maybeElectUncleanLeaders): leaderless partitions of
    topics with unclean election enabled. The response says whether to run again at once."""
    changes = PartitionChanges(image)
    for topic_id, partition_id in image.leaderless_partitions():
        if len(changes.records) >= max_elections:
            break
        topic = image.topic_by_id(topic_id)
        assert topic is not None
        if unclean_leader_election_enabled(image, topic.name):
            _elect_one(changes, topic.name, partition_id, ElectionType.UNCLEAN)
    return ControllerResult(tuple(changes.records), len(changes.records) >= max_elections,
                            atomic=False)


# ---- AlterPartition ----

@dataclass(frozen=True, slots=True)
class BrokerState:
    broker_id: int
    broker_epoch: int = -1  # -1: do not check the epoch


@dataclass(frozen=True, slots=True)
class AlterPartitionData:
    partition_index: int
    leader_epoch: int
    new_isr: tuple[BrokerState, ...]
    partition_epoch: int
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED


@dataclass(frozen=True, slots=True)
class AlterPartitionTopic:
    topic_id: str
    partitions: tuple[AlterPartitionData, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """AlterPartition v2+ (topics by id): an ISR change asked for by a partition leader."""

    broker_id: int
    broker_epoch: int
    topics: tuple[AlterPartitionTopic, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    topic_id: str
    partition_index: int
    error: ControllerApiError | None = None
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED
    partition_epoch: int = -1


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> None:
    """Kafka's checkBrokerEpoch: STALE_BROKER_EPOCH for the whole request."""
    registration = image.cluster.broker(broker_id)
    if registration is None:
        raise ControllerApiError(Errors.STALE_BROKER_EPOCH,
                                 f"No broker registration found for broker id {broker_id}")
    if registration.epoch != broker_epoch:
        raise ControllerApiError(Errors.STALE_BROKER_EPOCH, f"Expected broker epoch "
                                 f"{registration.epoch}, but got broker epoch {broker_epoch}")


def is_valid_isr(replicas: Sequence[int], isr: Sequence[int]) -> bool:
    """Kafka's Replicas.validateIsr: no negatives, no duplicates, all in replicas; an empty
    ISR passes."""
    return len(set(isr)) == len(isr) and all(r >= 0 for r in isr) and set(isr) <= set(replicas)


def _ineligible_replicas(image: MetadataImage, new_isr: Sequence[BrokerState]) -> list[str]:
    reasons = []
    for state in new_isr:
        registration = image.cluster.broker(state.broker_id)
        if registration is None:
            reasons.append(f"{state.broker_id} (not registered)")
        elif registration.in_controlled_shutdown:
            reasons.append(f"{state.broker_id} (shutting down)")
        elif registration.fenced:
            reasons.append(f"{state.broker_id} (fenced)")
        elif state.broker_epoch != -1 and state.broker_epoch != registration.epoch:
            reasons.append(f"{state.broker_id} (broker epoch mismatch: requested="
                           f"{state.broker_epoch} VS expected={registration.epoch})")
    return reasons


def _alter_partition_error(
    image: MetadataImage,
    broker_id: int,
    partition: PartitionRegistration | None,
    data: AlterPartitionData,
) -> ControllerApiError | None:
    """Kafka's validateAlterPartitionData, checks in Kafka's order."""
    if partition is None:
        return ControllerApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    # A requester with newer epochs than ours means this controller is probably stale.
    if data.leader_epoch > partition.leader_epoch:
        return ControllerApiError(Errors.NOT_CONTROLLER)
    if data.partition_epoch > partition.partition_epoch:
        return ControllerApiError(Errors.NOT_CONTROLLER)
    if data.leader_epoch < partition.leader_epoch:
        return ControllerApiError(Errors.FENCED_LEADER_EPOCH)
    if broker_id != partition.leader:
        return ControllerApiError(Errors.INVALID_REQUEST, f"Broker {broker_id} is not the "
                                  f"leader ({partition.leader}) of the partition.")
    if data.partition_epoch < partition.partition_epoch:
        return ControllerApiError(Errors.INVALID_UPDATE_VERSION)
    new_isr = [state.broker_id for state in data.new_isr]
    if not is_valid_isr(partition.replicas, new_isr):
        return ControllerApiError(Errors.INVALID_REQUEST, f"Invalid ISR {new_isr} for "
                                  f"replicas {list(partition.replicas)}.")
    if partition.leader not in new_isr:
        return ControllerApiError(Errors.INVALID_REQUEST,
                                  f"The new ISR {new_isr} does not include the leader.")
    recovering = data.leader_recovery_state == LeaderRecoveryState.RECOVERING
    if recovering and len(new_isr) > 1:
        return ControllerApiError(Errors.INVALID_REQUEST, "The ISR has more than one "
                                  "replica while the leader is recovering from an unclean "
                                  "election.")
    if recovering and not partition.is_recovering:
        return ControllerApiError(Errors.INVALID_REQUEST, "The leader recovery state cannot "
                                  "change from RECOVERED to RECOVERING.")
    ineligible = _ineligible_replicas(image, data.new_isr)
    if ineligible:
        return ControllerApiError(Errors.INELIGIBLE_REPLICA, "The new ISR contains "
                                  "ineligible replicas: " + ", ".join(ineligible) + ".")
    return None


def alter_partition(
    image: MetadataImage, request: AlterPartitionRequest
) -> ControllerResult[list[AlterPartitionResult]]:
    """AlterPartition (v2+): validate each partition, then build the change with an ONLINE
    (or UNCLEAN, if the topic allows) election. If the change completes a reassignment and
    moves leadership away from the requester, the record is written and the answer is
    NEW_LEADER_ELECTED."""
    check_broker_epoch(image, request.broker_id, request.broker_epoch)
    changes = PartitionChanges(image)
    results: list[AlterPartitionResult] = []
    for topic_data in request.topics:
        topic = image.topic_by_id(topic_data.topic_id)
        for data in topic_data.partitions:
            results.append(_alter_one(changes, request.broker_id, topic, topic_data.topic_id,
                                      data))
    return ControllerResult(tuple(changes.records), results, atomic=False)


def _alter_one(
    changes: PartitionChanges,
    broker_id: int,
    topic: TopicImage | None,
    topic_id: str,
    data: AlterPartitionData,
) -> AlterPartitionResult:
    index = data.partition_index
    if topic is None:
        return AlterPartitionResult(topic_id, index, ControllerApiError(Errors.UNKNOWN_TOPIC_ID))
    partition = changes.partition(topic_id, index)
    error = _alter_partition_error(changes.image, broker_id, partition, data)
    if error is not None:
        return AlterPartitionResult(topic_id, index, error)
    assert partition is not None
    record = build_partition_change(
        partition, topic_id, index, changes.image.cluster.is_active,
        election=changes.default_election(topic.name),
        target_isr=[state.broker_id for state in data.new_isr],
        target_leader_recovery_state=data.leader_recovery_state,
    )
    if record is not None:
        partition = changes.add(record)
        if record.leader not in (broker_id, NO_LEADER_CHANGE):
            return AlterPartitionResult(topic_id, index,
                                        ControllerApiError(Errors.NEW_LEADER_ELECTED))
    return AlterPartitionResult(
        topic_id, index, None, partition.leader, partition.leader_epoch, partition.isr,
        partition.leader_recovery_state, partition.partition_epoch,
    )
