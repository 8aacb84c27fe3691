"""Partition reassignment: start, completion through AlterPartition, cancel, list."""

from __future__ import annotations

from metadata.image import MetadataImage
from metadata.reassignment import (
    OngoingReassignment,
    ReassignablePartition,
    alter_partition_reassignments,
    list_partition_reassignments,
)
from metadata.records import BrokerRegistrationChangeRecord, PartitionChangeRecord
from metadata.replication import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    alter_partition,
)
from tests.unit.test_metadata_helpers import FOO, cluster, commit, epoch_of, replay, with_topic


def foo(**kwargs: object) -> MetadataImage:
    return with_topic(cluster([1, 2, 3, 4]), "foo", FOO, [[1, 2, 3]], **kwargs)  # type: ignore


def reassign(image: MetadataImage, replicas: tuple[int, ...] | None, partition: int = 0,
             topic: str = "foo") -> tuple[MetadataImage, list[str | None]]:
    result = alter_partition_reassignments(image, [ReassignablePartition(topic, partition,
                                                                         replicas)])
    assert result.atomic
    return commit(image, result), [r.error and r.error.message for r in result.response]


def leader_reports_isr(image: MetadataImage, isr: list[int]) -> MetadataImage:
    p = image.partition(FOO, 0)
    request = AlterPartitionRequest(p.leader, epoch_of(p.leader), (AlterPartitionTopic(FOO, (
        AlterPartitionData(0, p.leader_epoch, tuple(BrokerState(b) for b in isr),
                           p.partition_epoch),)),))
    return commit(image, alter_partition(image, request))


def test_reassignment_starts_then_completes_when_the_new_replica_joins_the_isr() -> None:
    image = foo()
    started, errors = reassign(image, (2, 3, 4))
    assert errors == [None]
    p = started.partition(FOO, 0)
    assert (p.replicas, p.removing_replicas, p.adding_replicas, p.isr, p.leader) == \
        ((2, 3, 4, 1), (1,), (4,), (1, 2, 3), 1)
    assert list_partition_reassignments(started) == [
        OngoingReassignment("foo", 0, (2, 3, 4, 1), (4,), (1,))]
    done = leader_reports_isr(started, [1, 2, 3, 4])
    p = done.partition(FOO, 0)
    assert (p.replicas, p.isr, p.removing_replicas, p.adding_replicas) == \
        ((2, 3, 4), (2, 3, 4), (), ())
    assert p.leader == 2  # the old leader was removed
    assert list_partition_reassignments(done) == []


def test_reorder_completes_at_once_without_a_new_leader() -> None:
    image = foo()
    result = alter_partition_reassignments(image, [ReassignablePartition("foo", 0, (3, 2, 1))])
    assert result.records == (PartitionChangeRecord(0, FOO, replicas=(3, 2, 1)),)
    after = commit(image, result)
    assert after.partition(FOO, 0).leader == 1
    assert list(after.imbalanced_partitions()) == [(FOO, 0)]


def test_pure_removal_completes_in_the_first_record_and_bumps_the_leader_epoch() -> None:
    image = foo()
    after, errors = reassign(image, (1, 2))
    p = after.partition(FOO, 0)
    assert errors == [None]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.removing_replicas) == \
        ((1, 2), (1, 2), 1, 1, ())


def test_cancel_reverts_to_the_original_replicas() -> None:
    started, _ = reassign(foo(), (2, 3, 4))
    cancelled, errors = reassign(started, None)
    assert errors == [None]
    p = cancelled.partition(FOO, 0)
    # Kafka's revert drops the adding replicas; it does not restore the original order.
    assert (p.replicas, p.isr, p.removing_replicas, p.adding_replicas, p.leader) == \
        ((2, 3, 1), (1, 2, 3), (), (), 1)
    _, errors = reassign(cancelled, None)
    assert errors == ["No partition reassignment is in progress."]


def test_cancel_that_needs_an_unclean_election() -> None:
    # [1] -> [2]: broker 2 caught up and 1 left the ISR before the reassignment completed.
    image = with_topic(cluster([1, 2]), "foo", FOO, [[2, 1]], isr=[[2]], leaders=[2])
    image = replay(image, [PartitionChangeRecord(0, FOO, removing_replicas=(1,),
                                                 adding_replicas=(2,))])
    _, errors = reassign(image, None)
    assert errors == ["Unable to revert partition assignment for foo:0 because it would "
                      "require an unclean leader election."]
    allowed = with_topic(cluster([1, 2]), "foo", FOO, [[2, 1]], isr=[[2]], leaders=[2],
                         configs={"unclean.leader.election.enable": "true"})
    allowed = replay(allowed, [PartitionChangeRecord(0, FOO, removing_replicas=(1,),
                                                     adding_replicas=(2,))])
    reverted, errors = reassign(allowed, None)
    assert errors == [None]
    p = reverted.partition(FOO, 0)
    assert (p.replicas, p.isr, p.leader) == ((1,), (1,), 1)


def test_a_new_target_replaces_one_in_progress() -> None:
    started, _ = reassign(foo(), (2, 3, 4))
    # Kafka would keep removing=[1] here (the new lists are empty) and later drop broker 1
    # from a target that includes it; the new target wins instead.
    back, errors = reassign(started, (1, 2, 3, 4))
    assert errors == [None]
    p = back.partition(FOO, 0)
    assert (p.replicas, p.removing_replicas, p.adding_replicas) == ((1, 2, 3, 4), (), ())
    assert list_partition_reassignments(back) == []
    # A target already covered by the ISR completes at once, dropping the old leader.
    narrower, _ = reassign(started, (2, 3))
    p = narrower.partition(FOO, 0)
    assert (p.replicas, p.isr, p.leader, p.removing_replicas, p.adding_replicas) == \
        ((2, 3), (2, 3), 2, (), ())


def test_reassignment_errors() -> None:
    image = replay(foo(), [BrokerRegistrationChangeRecord(4, epoch_of(4), fenced=1)])
    result = alter_partition_reassignments(image, [
        ReassignablePartition("nope", 0, (1,)),
        ReassignablePartition("foo", 5, (1,)),
        ReassignablePartition("foo", 0, (1, 9)),
        ReassignablePartition("foo", 0, ()),
        ReassignablePartition("foo", 0, (2, 2)),
    ])
    assert result.records == ()
    assert [(r.error.error.name, r.error.message) for r in result.response] == [
        ("UNKNOWN_TOPIC_OR_PARTITION", "Unable to find a topic named nope."),
        ("UNKNOWN_TOPIC_OR_PARTITION", "Unable to find partition foo:5."),
        ("INVALID_REPLICA_ASSIGNMENT", "The manual partition assignment includes broker 9, but "
                                       "no such broker is registered."),
        ("INVALID_REPLICA_ASSIGNMENT",
         "The manual partition assignment includes an empty replica list."),
        ("INVALID_REPLICA_ASSIGNMENT",
         "The manual partition assignment includes the broker 2 more than once."),
    ]


def test_list_named_partitions() -> None:
    started, _ = reassign(foo(), (2, 3, 4))
    assert list_partition_reassignments(started, [("foo", [0, 1]), ("nope", [0])]) == [
        OngoingReassignment("foo", 0, (2, 3, 4, 1), (4,), (1,))]
