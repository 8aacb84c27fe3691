"""MetadataImage + MetadataDelta: Kafka's replay rules, copy-on-write and the indexes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.image import (
    CLUSTER_DEFAULT_BROKER,
    EMPTY_IMAGE,
    ConfigResource,
    MetadataImage,
    MetadataProvenance,
    PartitionRegistration,
)
from metadata.records import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from metadata.sharded_map import SHARDS, ShardedMap

FOO = "5zoAlv-xEh9xRANKXt1Lbg"
BAR = "b0sJ5JiHR6qbTzmD8yaGyQ"
INC = "7yd6v3LdRPy1BLJbSb6FQQ"
TOPIC = ConfigResourceType.TOPIC


def replay(image: MetadataImage, *records: Record, first_offset: int = 100) -> MetadataImage:
    delta = MetadataDelta(image)
    for i, record in enumerate(records):
        delta.replay(record, first_offset + i, 3, 1_000 + i)
    return delta.apply()


def cluster_with_foo() -> MetadataImage:
    return replay(
        EMPTY_IMAGE,
        *(RegisterBrokerRecord(b, INC, 10 + b, fenced=False) for b in (1, 2, 3)),
        TopicRecord("foo", FOO),
        PartitionRecord(0, FOO, (1, 2, 3), (1, 2, 3), leader=1),
        PartitionRecord(1, FOO, (2, 3, 1), (2, 3, 1), leader=2),
        first_offset=10,
    )


def test_provenance_is_the_last_record() -> None:
    image = replay(EMPTY_IMAGE, NoOpRecord(), NoOpRecord(), first_offset=7)
    assert image.provenance == MetadataProvenance(8, 3, 1_001)


def test_register_broker_replaces_and_remembers_its_offset() -> None:
    image = replay(EMPTY_IMAGE, RegisterBrokerRecord(
        1, INC, 5, (Endpoint("PLAINTEXT", "h", 9092),), rack="r1", fenced=False))
    assert image.cluster.brokers[1].registration_offset == 100
    again = replay(image, RegisterBrokerRecord(1, "AAAAAAAAAAAAAAAAAAAAAg", 42), first_offset=200)
    broker = again.cluster.brokers[1]
    assert (broker.epoch, broker.fenced, broker.rack, broker.endpoints) == (42, True, None, ())
    assert broker.registration_offset == 200


def test_registration_change_needs_the_current_epoch() -> None:
    image = cluster_with_foo()
    fenced = replay(image, BrokerRegistrationChangeRecord(1, 11, fenced=1))
    assert fenced.cluster.brokers[1].fenced
    assert [b.id for b in fenced.cluster.brokers.values() if b.fenced] == [1]
    with pytest.raises(MetadataReplayError, match="BROKER_REGISTRATION_CHANGE_RECORD at offset "
                                                  "100: no broker registration for broker 1 "
                                                  "with epoch 99"):
        replay(image, BrokerRegistrationChangeRecord(1, 99, fenced=1))
    with pytest.raises(MetadataReplayError, match="UNREGISTER_BROKER_RECORD"):
        replay(image, UnregisterBrokerRecord(7, 11))


def test_fencing_keeps_controlled_shutdown_and_a_new_incarnation_clears_it() -> None:
    image = replay(cluster_with_foo(), BrokerRegistrationChangeRecord(2, 12,
                                                                      in_controlled_shutdown=1))
    assert image.cluster.brokers[2].in_controlled_shutdown
    assert image.cluster.active_broker_ids() == [1, 3]
    image = replay(image, BrokerRegistrationChangeRecord(2, 12, fenced=1))
    assert image.cluster.brokers[2].fenced and image.cluster.brokers[2].in_controlled_shutdown
    image = replay(image, RegisterBrokerRecord(2, "AAAAAAAAAAAAAAAAAAAAAg", 300))
    assert not image.cluster.brokers[2].in_controlled_shutdown


def test_unregister_removes_the_broker() -> None:
    image = replay(cluster_with_foo(), UnregisterBrokerRecord(3, 13))
    assert 3 not in image.cluster.brokers


def test_duplicate_topic_name_is_a_replay_error() -> None:
    with pytest.raises(MetadataReplayError, match="Found duplicate TopicRecord for foo"):
        replay(cluster_with_foo(), TopicRecord("foo", BAR))


def test_partition_record_overwrites() -> None:
    image = replay(cluster_with_foo(), PartitionRecord(0, FOO, (3,), (3,), leader=3,
                                                       leader_epoch=9, partition_epoch=9))
    assert image.partition(FOO, 0) == PartitionRegistration((3,), (3,), leader=3,
                                                            leader_epoch=9, partition_epoch=9)


def test_partition_change_merges_and_bumps_epochs() -> None:
    image = cluster_with_foo()
    isr_only = replay(image, PartitionChangeRecord(0, FOO, isr=(1, 2)))
    p = isr_only.partition(FOO, 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    same_leader = replay(isr_only, PartitionChangeRecord(0, FOO, leader=1))
    p = same_leader.partition(FOO, 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 1, 2)
    no_leader = replay(same_leader, PartitionChangeRecord(0, FOO, leader=NO_LEADER,
                                                          leader_recovery_state=1))
    p = no_leader.partition(FOO, 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.is_recovering) == (-1, 2, 3, True)
    kept = replay(no_leader, PartitionChangeRecord(0, FOO, replicas=(1, 2), removing_replicas=()))
    p = kept.partition(FOO, 0)
    assert (p.replicas, p.is_recovering, p.leader_epoch) == ((1, 2), True, 2)


def test_changes_for_unknown_topics_or_partitions_are_fatal() -> None:
    image = cluster_with_foo()
    with pytest.raises(MetadataReplayError, match=f"PARTITION_CHANGE_RECORD at offset 100: "
                                                  f"no topic with id {BAR}"):
        replay(image, PartitionChangeRecord(0, BAR, leader=2))
    with pytest.raises(MetadataReplayError, match="no partition 5 in topic foo"):
        replay(image, PartitionChangeRecord(5, FOO, leader=2))
    with pytest.raises(MetadataReplayError, match="PARTITION_RECORD"):
        replay(image, PartitionRecord(0, BAR, (1,), (1,), leader=1))
    with pytest.raises(MetadataReplayError, match="REMOVE_TOPIC_RECORD at offset 101"):
        replay(image, RemoveTopicRecord(FOO), RemoveTopicRecord(FOO))


def test_remove_topic_drops_partitions_configs_and_index_entries() -> None:
    image = replay(cluster_with_foo(), ConfigRecord(TOPIC, "foo", "retention.ms", "5"),
                   ConfigRecord(TOPIC, "other", "retention.ms", "6"))
    assert image.config(ConfigResource(TOPIC, "foo")) == {"retention.ms": "5"}
    gone = replay(image, RemoveTopicRecord(FOO))
    assert gone.topic("foo") is None and gone.topic_by_id(FOO) is None
    assert ConfigResource(TOPIC, "foo") not in gone.configs
    assert ConfigResource(TOPIC, "other") in gone.configs
    assert list(gone.partitions_with_isr_member(1)) == []
    assert not gone.leads_any_partition(1)
    # The name is free again, even within one delta.
    again = replay(image, RemoveTopicRecord(FOO), TopicRecord("foo", BAR),
                   PartitionRecord(0, BAR, (3,), (3,), leader=3))
    assert again.topic("foo").topic_id == BAR
    assert list(again.partitions_with_isr_member(1)) == []
    assert list(again.partitions_led_by(3)) == [(BAR, 0)]


def test_configs_delete_keys_and_drop_empty_resources() -> None:
    cluster = CLUSTER_DEFAULT_BROKER
    image = replay(EMPTY_IMAGE, ConfigRecord(4, "", "min.insync.replicas", "2"),
                   ConfigRecord(4, "", "x", "y"))
    assert image.config(cluster) == {"min.insync.replicas": "2", "x": "y"}
    image = replay(image, ConfigRecord(4, "", "x", None))
    assert image.config(cluster) == {"min.insync.replicas": "2"}
    image = replay(image, ConfigRecord(4, "", "min.insync.replicas", None))
    assert cluster not in image.configs


def test_effective_topic_config_falls_back_to_the_cluster_default() -> None:
    image = replay(cluster_with_foo(), ConfigRecord(4, "", "unclean.leader.election.enable",
                                                    "true"))
    assert image.topic_setting("foo", "unclean.leader.election.enable") is True
    image = replay(image, ConfigRecord(TOPIC, "foo", "unclean.leader.election.enable", "false"))
    assert image.topic_setting("foo", "unclean.leader.election.enable") is False
    assert image.topic_setting("bar", "unclean.leader.election.enable") is True
    assert image.topic_setting("foo", "min.insync.replicas") == 1  # Kafka's default
    assert image.topic_setting("foo", "retention.ms") == 604800000
    assert image.cluster_setting("num.partitions") == 1
    image = replay(image, ConfigRecord(4, "", "log.retention.ms", "1000"),
                   ConfigRecord(4, "", "num.partitions", "x"))  # stored before checks existed
    assert image.topic_setting("foo", "retention.ms") == 1000  # the broker synonym's value
    assert image.cluster_setting("num.partitions") == 1


def test_feature_level_zero_removes_the_feature() -> None:
    image = replay(EMPTY_IMAGE, FeatureLevelRecord("metadata.version", 21))
    assert image.features == {"metadata.version": 21}
    assert replay(image, FeatureLevelRecord("metadata.version", 0)).features == {}


def test_unchanged_topics_and_partitions_are_shared() -> None:
    image = replay(cluster_with_foo(), TopicRecord("bar", BAR),
                   PartitionRecord(0, BAR, (1,), (1,), leader=1))
    changed = replay(image, PartitionChangeRecord(0, FOO, isr=(1, 2)))
    assert changed.topic_by_id(BAR) is image.topic_by_id(BAR)
    assert changed.partition(FOO, 1) is image.partition(FOO, 1)
    assert changed.cluster is image.cluster and changed.configs is image.configs
    assert image.partition(FOO, 0).isr == (1, 2, 3)  # the old image did not move


def test_a_failed_replay_leaves_the_delta_usable() -> None:
    delta = MetadataDelta(cluster_with_foo())
    delta.replay(PartitionChangeRecord(0, FOO, isr=(1, 2)), 100, 3, 0)
    with pytest.raises(MetadataReplayError):
        delta.replay(TopicRecord("foo", BAR), 101, 3, 0)
    assert delta.apply().partition(FOO, 0).isr == (1, 2)


def test_indexes() -> None:
    image = replay(cluster_with_foo(), PartitionChangeRecord(1, FOO, leader=3),
                   PartitionChangeRecord(0, FOO, adding_replicas=(4,)))
    assert sorted(image.partitions_with_isr_member(1)) == [(FOO, 0), (FOO, 1)]
    assert list(image.partitions_led_by(3)) == [(FOO, 1)]
    assert list(image.partitions_led_by(2)) == []
    assert list(image.imbalanced_partitions()) == [(FOO, 1)]
    assert list(image.reassigning_partitions()) == [(FOO, 0)]
    leaderless = replay(image, PartitionChangeRecord(0, FOO, leader=NO_LEADER))
    assert list(leaderless.leaderless_partitions()) == [(FOO, 0)]
    assert sorted(leaderless.imbalanced_partitions()) == [(FOO, 0), (FOO, 1)]


TOPIC_IDS = [FOO, BAR, "AAAAAAAAAAAAAAAAAAAAAg"]
broker = st.integers(0, 4)
brokers = st.lists(broker, max_size=4, unique=True).map(tuple)
operations = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(TOPIC_IDS)),
    st.tuples(st.just("remove"), st.sampled_from(TOPIC_IDS)),
    st.tuples(st.just("partition"), st.sampled_from(TOPIC_IDS), st.integers(0, 3), brokers,
              brokers, st.integers(-1, 4), brokers),
    st.tuples(st.just("change"), st.sampled_from(TOPIC_IDS), st.integers(0, 3),
              st.none() | brokers, st.integers(-2, 4), st.none() | brokers),
    st.tuples(st.just("apply")),
)


def brute_force_indexes(image: MetadataImage) -> tuple[set, set, set, set]:
    isr, leaders, imbalanced, reassigning = set(), set(), set(), set()
    for topic in image.topics.by_id.values():
        for pid, p in topic.partitions.items():
            isr.update((b, topic.topic_id, pid) for b in p.isr)
            leaders.add((p.leader, topic.topic_id, pid))
            if not p.has_preferred_leader:
                imbalanced.add((topic.topic_id, pid))
            if p.is_reassigning:
                reassigning.add((topic.topic_id, pid))
    return isr, leaders, imbalanced, reassigning


def index_contents(image: MetadataImage) -> tuple[set, set, set, set]:
    topics = image.topics
    return (
        {(b, t, p) for b, m in topics.isr_index.items() for t, ps in m.items() for p in ps},
        {(b, t, p) for b, m in topics.leader_index.items() for t, ps in m.items() for p in ps},
        set(image.imbalanced_partitions()),
        set(image.reassigning_partitions()),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(operations, max_size=30))
def test_incremental_indexes_match_a_full_scan(ops: list[tuple]) -> None:
    image = EMPTY_IMAGE
    delta = MetadataDelta(image)
    offset = 0
    for op in ops:
        record: Record | None = None
        if op[0] == "create":
            record = TopicRecord(f"t{TOPIC_IDS.index(op[1])}", op[1])
        elif op[0] == "remove":
            record = RemoveTopicRecord(op[1])
        elif op[0] == "partition":
            _, topic_id, pid, replicas, isr, leader, adding = op
            record = PartitionRecord(pid, topic_id, replicas, isr, (), adding, leader)
        elif op[0] == "change":
            _, topic_id, pid, isr, leader, replicas = op
            record = PartitionChangeRecord(pid, topic_id, isr=isr, leader=leader,
                                           replicas=replicas)
        else:
            image = delta.apply()
            assert index_contents(image) == brute_force_indexes(image)
            delta = MetadataDelta(image)
        if record is not None:
            offset += 1
            try:
                delta.replay(record, offset, 1, 0)
            except MetadataReplayError:
                pass
    image = delta.apply()
    assert index_contents(image) == brute_force_indexes(image)
    names = {t.name: t for t in image.topics.by_id.values()}
    assert dict(image.topics.by_name) == names


def test_sharded_map_updates_share_untouched_shards() -> None:
    base = ShardedMap().updated({f"k{i}": i for i in range(1000)})
    assert len(base) == 1000 and base["k7"] == 7 and "k7" in base and base.get("x") is None
    changed = base.updated({"k7": 70, "k8": None, "new": 1})
    assert (changed["k7"], "k8" in changed, changed["new"], len(changed)) == (70, False, 1, 1000)
    assert base["k7"] == 7 and "k8" in base  # the old map did not move
    assert sum(a is b for a, b in zip(base._shards, changed._shards, strict=True)) >= SHARDS - 3
    assert dict(changed.items()) == {**{f"k{i}": i for i in range(1000) if i != 8},
                                     "k7": 70, "new": 1}
    assert changed.updated({key: None for key in changed}) == {}
