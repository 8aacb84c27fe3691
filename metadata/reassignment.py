"""Partition reassignment: alter, cancel and list (spec §3.8), as pure rules.

A reassignment to target T of a partition with replicas R writes replicas = T ++ (R − T),
removing = R − T, adding = T − R (sorted). It completes — inside whichever change comes next,
usually the leader's AlterPartition that adds the last new replica to the ISR — once the ISR
without the removing replicas covers the replicas without them (partition_change.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.image import MetadataImage, PartitionRegistration
from metadata.partition_change import Election, build_partition_change
from metadata.records import PartitionChangeRecord
from metadata.replication import PartitionChanges, unclean_leader_election_enabled
from metadata.topics import validate_manual_assignment


@dataclass(frozen=True, slots=True)
class ReassignablePartition:
    topic: str
    partition_index: int
    replicas: tuple[int, ...] | None  # None cancels the reassignment in progress


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition_index: int
    error: ControllerApiError | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition_index: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def alter_partition_reassignments(
    image: MetadataImage, reassignments: Sequence[ReassignablePartition]
) -> ControllerResult[list[ReassignmentResult]]:
    """AlterPartitionReassignments: one result per entry, all records in one atomic batch."""
    changes = PartitionChanges(image)
    results = []
    for target in reassignments:
        try:
            _alter_one(changes, target)
            results.append(ReassignmentResult(target.topic, target.partition_index))
        except ControllerApiError as error:
            results.append(ReassignmentResult(target.topic, target.partition_index, error))
    check_user_op_size(changes.records)
    return ControllerResult(tuple(changes.records), results)


def _alter_one(changes: PartitionChanges, target: ReassignablePartition) -> None:
    topic = changes.image.topic(target.topic)
    if topic is None:
        raise ControllerApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Unable to find a topic named {target.topic}.")
    partition = changes.partition(topic.topic_id, target.partition_index)
    if partition is None:
        raise ControllerApiError(
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            f"Unable to find partition {target.topic}:{target.partition_index}.")
    if target.replicas is None:
        record = _cancel(changes, target, topic.topic_id, partition)
    else:
        record = _change(changes, target.replicas, topic.topic_id, target.partition_index,
                         partition)
    if record is not None:
        changes.add(record)


def _change(
    changes: PartitionChanges,
    target: tuple[int, ...],
    topic_id: str,
    partition_id: int,
    partition: PartitionRegistration,
) -> PartitionChangeRecord | None:
    validate_manual_assignment(changes.image, target, None)
    current = partition.replicas
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    # All three targets are always given, so a new target replaces one in progress entirely
    # (Kafka keeps the old removing/adding lists when the new ones are empty).
    return build_partition_change(
        partition, topic_id, partition_id, changes.image.cluster.is_active,
        target_replicas=target + removing, target_removing=removing, target_adding=adding,
    )


def _cancel(
    changes: PartitionChanges,
    target: ReassignablePartition,
    topic_id: str,
    partition: PartitionRegistration,
) -> PartitionChangeRecord | None:
    """Kafka's PartitionReassignmentRevert: back to the replicas without the adding ones."""
    if not partition.is_reassigning:
        raise ControllerApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
    adding = set(partition.adding_replicas)
    replicas = tuple(r for r in partition.replicas if r not in adding)
    isr = tuple(r for r in partition.isr if r not in adding)
    unclean_allowed = unclean_leader_election_enabled(changes.image, target.topic)
    if not isr:
        if not replicas:
            raise ControllerApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "Invalid replica "
                                     "assignment: addingReplicas contains all replicas.")
        # Only replicas being added are in sync: reverting needs an unclean leader.
        isr = replicas[:1]
        if not unclean_allowed:
            raise ControllerApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {target.topic}:"
                f"{target.partition_index} because it would require an unclean leader "
                "election.")
    return build_partition_change(
        partition, topic_id, target.partition_index, changes.image.cluster.is_active,
        election=Election.UNCLEAN if unclean_allowed else Election.ONLINE,
        target_isr=isr, target_replicas=replicas, target_removing=(), target_adding=(),
    )


def list_partition_reassignments(
    image: MetadataImage, topics: Sequence[tuple[str, Sequence[int]]] | None = None
) -> list[OngoingReassignment]:
    """ListPartitionReassignments: the reassignments in progress, all or for the named
    partitions (unknown topics and partitions not reassigning are left out)."""
    if topics is None:
        wanted = [(topic_id, partition_id)
                  for topic_id, partition_id in image.reassigning_partitions()]
    else:
        wanted = []
        for name, partition_ids in topics:
            topic = image.topic(name)
            if topic is not None:
                wanted.extend((topic.topic_id, p) for p in partition_ids)
    ongoing = []
    for topic_id, partition_id in wanted:
        topic = image.topic_by_id(topic_id)
        partition = image.partition(topic_id, partition_id)
        if topic is not None and partition is not None and partition.is_reassigning:
            ongoing.append(OngoingReassignment(
                topic.name, partition_id, partition.replicas, partition.adding_replicas,
                partition.removing_replicas))
    return ongoing
