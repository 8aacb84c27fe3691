"""Broker transitions, elections, auto rebalance and AlterPartition, checked by replaying the
records each rule produces."""

from __future__ import annotations

import pytest

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import MetadataImage
from metadata.records import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    UnregisterBrokerRecord,
)
from metadata.replication import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    ElectionType,
    alter_partition,
    balance_partition_leaders,
    begin_controlled_shutdown,
    elect_leaders,
    elect_unclean_leaders,
    fence_broker,
    unclean_leader_election_enabled,
    unfence_broker,
    unregister_broker,
)
from tests.unit.test_metadata_helpers import (
    BAR,
    FOO,
    cluster,
    cluster_config,
    commit,
    epoch_of,
    replay,
    with_topic,
)


def foo_cluster(**topic_kwargs: object) -> MetadataImage:
    """Brokers 1-3; foo-0 on [1,2,3] led by 1, foo-1 on [2,3,1] led by 2, foo-2 on [1] only."""
    return with_topic(cluster([1, 2, 3]), "foo", FOO, [[1, 2, 3], [2, 3, 1], [1]],
                      **topic_kwargs)  # type: ignore[arg-type]


# ---- broker transitions ----

def test_fencing_removes_the_broker_from_isrs_and_moves_leadership() -> None:
    image = foo_cluster()
    result = fence_broker(image, 1)
    assert not result.atomic
    assert result.records == (
        PartitionChangeRecord(0, FOO, isr=(2, 3), leader=2),
        PartitionChangeRecord(1, FOO, isr=(2, 3)),
        PartitionChangeRecord(2, FOO, leader=NO_LEADER),  # sole ISR member: ISR stays [1]
        BrokerRegistrationChangeRecord(1, epoch_of(1), fenced=1),
    )
    after = commit(image, result)
    assert after.cluster.brokers[1].fenced
    assert after.partition(FOO, 2).isr == (1,) and after.partition(FOO, 2).leader == NO_LEADER
    assert list(after.partitions_with_isr_member(1)) == [(FOO, 2)]
    assert list(after.leaderless_partitions()) == [(FOO, 2)]
    assert after.partition(FOO, 0).leader_epoch == 1


def test_fencing_with_unclean_election_enabled_picks_another_replica() -> None:
    image = with_topic(cluster([1, 2]), "foo", FOO, [[1, 2]], isr=[[1]],
                       configs={"unclean.leader.election.enable": "true"})
    after = commit(image, fence_broker(image, 1))
    p = after.partition(FOO, 0)
    assert (p.leader, p.isr, p.is_recovering) == (2, (2,), True)


def test_unfencing_elects_leaders_for_leaderless_partitions() -> None:
    image = foo_cluster()
    fenced = commit(image, fence_broker(image, 1))
    result = unfence_broker(fenced, 1)
    assert result.records == (
        BrokerRegistrationChangeRecord(1, epoch_of(1), fenced=-1),
        PartitionChangeRecord(2, FOO, leader=1),
    )
    after = commit(fenced, result)
    assert not after.cluster.brokers[1].fenced
    assert after.partition(FOO, 2).leader == 1
    # Broker 1 rejoins the other ISRs only through AlterPartition from their leaders.
    assert after.partition(FOO, 0).isr == (2, 3)


def test_controlled_shutdown() -> None:
    image = foo_cluster()
    result = begin_controlled_shutdown(image, 2)
    assert result.records[0] == BrokerRegistrationChangeRecord(2, epoch_of(2),
                                                               in_controlled_shutdown=1)
    after = commit(image, result)
    assert after.cluster.brokers[2].in_controlled_shutdown
    assert not after.leads_any_partition(2)
    assert after.partition(FOO, 1).leader == 3
    assert list(after.partitions_with_isr_member(2)) == []
    again = begin_controlled_shutdown(after, 2)
    assert again.records == ()  # already in controlled shutdown, nothing left to move


def test_unregister_broker() -> None:
    image = foo_cluster()
    result = unregister_broker(image, 3)
    assert result.records[-1] == UnregisterBrokerRecord(3, epoch_of(3))
    after = commit(image, result)
    assert 3 not in after.cluster.brokers
    assert list(after.partitions_with_isr_member(3)) == []
    with pytest.raises(ControllerApiError) as raised:
        unregister_broker(after, 3)
    assert raised.value.error is Errors.BROKER_ID_NOT_REGISTERED
    assert raised.value.message == "Broker ID 3 is not currently registered"


def test_unclean_election_setting_resolution() -> None:
    image = foo_cluster()
    assert not unclean_leader_election_enabled(image, "foo")
    image = cluster_config(image, "unclean.leader.election.enable", "true")
    assert unclean_leader_election_enabled(image, "foo")
    image = with_topic(image, "bar", BAR, [[1]],
                       configs={"unclean.leader.election.enable": "false"})
    assert not unclean_leader_election_enabled(image, "bar")


# ---- ElectLeaders ----

def imbalanced_cluster() -> MetadataImage:
    """foo-0 led by 2 though 1 is preferred; foo-1 balanced; foo-2 leaderless."""
    image = with_topic(cluster([1, 2, 3]), "foo", FOO, [[1, 2, 3], [2, 3, 1], [3, 1]],
                       leaders=[2, 2, NO_LEADER], isr=[[1, 2, 3], [2, 3, 1], [3]])
    return image


def error_names(result: ControllerResult) -> list[tuple[str, int, str | None]]:
    return [(r.topic, r.partition_id, r.error and r.error.error.name) for r in result.response]


def test_preferred_election_for_named_partitions() -> None:
    image = replay(imbalanced_cluster(), [BrokerRegistrationChangeRecord(3, epoch_of(3),
                                                                         fenced=1)])
    result = elect_leaders(image, ElectionType.PREFERRED,
                           [("foo", 0), ("foo", 1), ("foo", 2), ("foo", 9), ("nope", 0)])
    assert result.records == (PartitionChangeRecord(0, FOO, leader=1),)
    assert error_names(result) == [
        ("foo", 0, None),
        ("foo", 1, "ELECTION_NOT_NEEDED"),
        ("foo", 2, "PREFERRED_LEADER_NOT_AVAILABLE"),
        ("foo", 9, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("nope", 0, "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    messages = [r.error.message for r in result.response[3:]]
    assert messages == ["No such partition as foo-9", "No such topic as nope"]
    assert commit(image, result).partition(FOO, 0).leader == 1


def test_preferred_election_for_all_partitions_omits_not_needed() -> None:
    result = elect_leaders(imbalanced_cluster(), ElectionType.PREFERRED, None)
    assert error_names(result) == [("foo", 0, None), ("foo", 2, None)]
    assert result.records == (PartitionChangeRecord(0, FOO, leader=1),
                              PartitionChangeRecord(2, FOO, leader=3))


def test_unclean_election_via_the_api() -> None:
    image = replay(imbalanced_cluster(), [BrokerRegistrationChangeRecord(3, epoch_of(3),
                                                                         fenced=1)])
    result = elect_leaders(image, ElectionType.UNCLEAN, [("foo", 0), ("foo", 2)])
    assert error_names(result) == [("foo", 0, "ELECTION_NOT_NEEDED"), ("foo", 2, None)]
    after = commit(image, result)
    p = after.partition(FOO, 2)
    assert (p.leader, p.isr, p.is_recovering) == (1, (1,), True)
    nobody = replay(image, [BrokerRegistrationChangeRecord(1, epoch_of(1), fenced=1)])
    assert error_names(elect_leaders(nobody, ElectionType.UNCLEAN, [("foo", 2)])) == [
        ("foo", 2, "ELIGIBLE_LEADERS_NOT_AVAILABLE")]


def test_periodic_unclean_election_only_where_enabled() -> None:
    image = replay(imbalanced_cluster(), [BrokerRegistrationChangeRecord(3, epoch_of(3),
                                                                         fenced=1)])
    assert elect_unclean_leaders(image).records == ()
    enabled = cluster_config(image, "unclean.leader.election.enable", "true")
    result = elect_unclean_leaders(enabled)
    assert result.records == (PartitionChangeRecord(2, FOO, isr=(1,), leader=1,
                                                    leader_recovery_state=1),)
    assert result.response is False


# ---- auto leader rebalance ----

def rebalance_cluster(imbalanced: int) -> MetadataImage:
    """Ten partitions preferring broker 1, `imbalanced` of them led by broker 2."""
    leaders = [2] * imbalanced + [1] * (10 - imbalanced)
    return with_topic(cluster([1, 2]), "foo", FOO, [[1, 2]] * 10, leaders=leaders)


def test_rebalance_honours_the_imbalance_percentage() -> None:
    assert balance_partition_leaders(rebalance_cluster(1), imbalance_percentage=10).records == ()
    result = balance_partition_leaders(rebalance_cluster(2), imbalance_percentage=10)
    assert result.records == (PartitionChangeRecord(0, FOO, leader=1),
                              PartitionChangeRecord(1, FOO, leader=1))
    assert result.response is False
    after = commit(rebalance_cluster(2), result)
    assert list(after.imbalanced_partitions()) == []
    # 0 % rebalances any imbalance at all, as Kafka's KRaft controller does.
    assert len(balance_partition_leaders(rebalance_cluster(1),
                                         imbalance_percentage=0).records) == 1


def test_rebalance_is_bounded_per_run() -> None:
    result = balance_partition_leaders(rebalance_cluster(5), imbalance_percentage=0,
                                       max_elections=3)
    assert len(result.records) == 3 and result.response is True


def test_rebalance_skips_unavailable_preferred_leaders() -> None:
    image = replay(rebalance_cluster(5), [BrokerRegistrationChangeRecord(1, epoch_of(1),
                                                                         fenced=1)])
    assert balance_partition_leaders(image, imbalance_percentage=0).records == ()


# ---- AlterPartition ----

def alter(image: MetadataImage, broker: int, partition: int, isr: list[int], *,
          leader_epoch: int = 0, partition_epoch: int = 0, recovery: int = 0,
          broker_epoch: int | None = None, topic_id: str = FOO,
          isr_epochs: dict[int, int] | None = None) -> ControllerResult:
    states = tuple(BrokerState(b, (isr_epochs or {}).get(b, -1)) for b in isr)
    request = AlterPartitionRequest(broker, epoch_of(broker) if broker_epoch is None
                                    else broker_epoch,
                                    (AlterPartitionTopic(topic_id, (AlterPartitionData(
                                        partition, leader_epoch, states, partition_epoch,
                                        recovery),)),))
    return alter_partition(image, request)


def alter_error(result: ControllerResult) -> str | None:
    [entry] = result.response
    return None if entry.error is None else entry.error.error.name


def test_alter_partition_shrinks_and_expands_the_isr() -> None:
    image = foo_cluster()
    shrink = alter(image, 1, 0, [1, 2])
    assert shrink.records == (PartitionChangeRecord(0, FOO, isr=(1, 2)),)
    [entry] = shrink.response
    assert (entry.error, entry.leader_id, entry.isr, entry.leader_epoch,
            entry.partition_epoch) == (None, 1, (1, 2), 0, 1)
    after = commit(image, shrink)
    assert after.partition(FOO, 0).isr == (1, 2)
    expand = alter(after, 1, 0, [1, 2, 3], partition_epoch=1)
    assert alter_error(expand) is None
    assert commit(after, expand).partition(FOO, 0).isr == (1, 2, 3)


def test_alter_partition_checks_in_kafkas_order() -> None:
    image = foo_cluster()
    with pytest.raises(ControllerApiError) as raised:
        alter(image, 1, 0, [1], broker_epoch=5)
    assert raised.value.error is Errors.STALE_BROKER_EPOCH
    assert raised.value.message == "Expected broker epoch 101, but got broker epoch 5"
    assert alter_error(alter(image, 1, 0, [1], topic_id=BAR)) == "UNKNOWN_TOPIC_ID"
    assert alter_error(alter(image, 1, 7, [1])) == "UNKNOWN_TOPIC_OR_PARTITION"
    # Newer epochs than ours come before every other check: NOT_CONTROLLER.
    assert alter_error(alter(image, 2, 0, [9], leader_epoch=1)) == "NOT_CONTROLLER"
    assert alter_error(alter(image, 2, 0, [9], partition_epoch=1)) == "NOT_CONTROLLER"
    moved = commit(image, fence_broker(image, 3))  # foo-0: leader epoch 0, partition epoch 1
    assert alter_error(alter(moved, 2, 0, [9], leader_epoch=-1)) == "FENCED_LEADER_EPOCH"
    assert alter_error(alter(moved, 2, 0, [9], partition_epoch=0)) == "INVALID_REQUEST"
    assert alter_error(alter(moved, 1, 0, [9], partition_epoch=0)) == "INVALID_UPDATE_VERSION"
    assert alter_error(alter(moved, 1, 0, [1, 9], partition_epoch=1)) == "INVALID_REQUEST"
    assert alter_error(alter(moved, 1, 0, [1, 1], partition_epoch=1)) == "INVALID_REQUEST"
    assert alter_error(alter(moved, 1, 0, [2], partition_epoch=1)) == "INVALID_REQUEST"
    assert alter_error(alter(moved, 1, 0, [1, 2], partition_epoch=1, recovery=1)) == \
        "INVALID_REQUEST"
    assert alter_error(alter(moved, 1, 0, [1], partition_epoch=1, recovery=1)) == \
        "INVALID_REQUEST"  # RECOVERED -> RECOVERING
    assert alter_error(alter(moved, 1, 0, [1, 3], partition_epoch=1)) == "INELIGIBLE_REPLICA"
    assert alter_error(alter(moved, 1, 0, [1, 2], partition_epoch=1,
                             isr_epochs={2: 999})) == "INELIGIBLE_REPLICA"
    assert alter_error(alter(moved, 1, 0, [1, 2], partition_epoch=1,
                             isr_epochs={2: epoch_of(2)})) is None


def test_alter_partition_refuses_replicas_in_controlled_shutdown() -> None:
    image = foo_cluster()
    image = replay(image, [BrokerRegistrationChangeRecord(3, epoch_of(3),
                                                          in_controlled_shutdown=1)])
    result = alter(image, 1, 0, [1, 2, 3])
    assert alter_error(result) == "INELIGIBLE_REPLICA"
    assert "3 (shutting down)" in result.response[0].error.message


def test_alter_partition_leaves_recovering_state() -> None:
    image = with_topic(cluster([1, 2]), "foo", FOO, [[1, 2]], isr=[[1]],
                       configs={"unclean.leader.election.enable": "true"})
    image = commit(image, fence_broker(image, 1))  # unclean: leader 2, RECOVERING
    p = image.partition(FOO, 0)
    assert p.is_recovering
    result = alter(image, 2, 0, [2], leader_epoch=p.leader_epoch,
                   partition_epoch=p.partition_epoch, recovery=0)
    assert result.records == (PartitionChangeRecord(0, FOO, leader_recovery_state=0),)
    assert not commit(image, result).partition(FOO, 0).is_recovering


def test_alter_partition_completing_a_reassignment_away_from_the_leader() -> None:
    # foo-0 moving from [1,2] to [2,3]: replicas [2,3,1], removing [1], adding [3].
    image = with_topic(cluster([1, 2, 3]), "foo", FOO, [[2, 3, 1]], isr=[[1, 2]], leaders=[1])
    image = replay(image, [PartitionChangeRecord(0, FOO, removing_replicas=(1,),
                                                 adding_replicas=(3,))])
    result = alter(image, 1, 0, [1, 2, 3], partition_epoch=1)
    assert alter_error(result) == "NEW_LEADER_ELECTED"
    assert len(result.records) == 1  # written all the same
    after = commit(image, result)
    p = after.partition(FOO, 0)
    assert (p.replicas, p.isr, p.leader, p.removing_replicas, p.adding_replicas) == \
        ((2, 3), (2, 3), 2, (), ())
