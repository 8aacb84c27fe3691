"""CreateTopics, CreatePartitions and DeleteTopics: Kafka's checks, messages and records."""

from __future__ import annotations

import pytest

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import ConfigResource
from metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from metadata.topics import (
    CreatableTopic,
    CreatePartitionsTopic,
    ReplicaAssignment,
    TopicRef,
    create_partitions,
    create_topics,
    delete_topics,
    placement_start,
)
from tests.unit.test_metadata_helpers import (
    BAR,
    BAZ,
    FOO,
    cluster,
    commit,
    counter_ids,
    epoch_of,
    replay,
    with_topic,
)


def error_of(result: ControllerResult, name: str) -> tuple[str, str] | None:
    for entry in result.response:
        if entry.name == name:
            return None if entry.error is None else (entry.error.error.name, entry.error.message)
    raise AssertionError(f"no result for {name}")


def test_create_topic_records_and_resulting_image() -> None:
    image = cluster([1, 2, 3])
    result = create_topics(image, [CreatableTopic(
        "foo", 3, 2, configs=(("retention.ms", "100"), ("min.insync.replicas", "2")))],
        new_topic_id=counter_ids(FOO))
    assert result.atomic
    assert result.records[:3] == (
        TopicRecord("foo", FOO),
        ConfigRecord(ConfigResourceType.TOPIC, "foo", "retention.ms", "100"),
        ConfigRecord(ConfigResourceType.TOPIC, "foo", "min.insync.replicas", "2"),
    )
    start = placement_start("foo")
    expected = [tuple([1, 2, 3][(i + j + start) % 3] for j in range(2)) for i in range(3)]
    assert result.records[3:] == tuple(
        PartitionRecord(i, FOO, r, r, leader=r[0]) for i, r in enumerate(expected))
    [entry] = result.response
    assert (entry.topic_id, entry.num_partitions, entry.replication_factor) == (FOO, 3, 2)
    after = commit(image, result)
    topic = after.topic("foo")
    assert topic is not None and len(topic.partitions) == 3
    assert after.config(ConfigResource(ConfigResourceType.TOPIC, "foo"))["retention.ms"] == "100"


def test_defaults_and_validate_only() -> None:
    image = cluster([1, 2, 3])
    result = create_topics(image, [CreatableTopic("foo")], validate_only=True,
                           default_num_partitions=2, default_replication_factor=3)
    assert result.records == ()
    assert (result.response[0].num_partitions, result.response[0].replication_factor) == (2, 3)


def test_fenced_replicas_stay_out_of_the_isr() -> None:
    image = cluster([1, 2, 3], fenced=[3])
    result = create_topics(image, [CreatableTopic("foo", 1, 3)], new_topic_id=counter_ids(FOO))
    [partition] = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert partition.replicas[-1] == 3 and 3 not in partition.isr
    assert partition.leader == partition.replicas[0] != 3


def test_duplicate_topic_and_existing_topic() -> None:
    image = with_topic(cluster(), "foo", FOO, [[1]])
    result = create_topics(image, [CreatableTopic("foo", 1, 1), CreatableTopic("dup", 1, 1),
                                   CreatableTopic("dup", 1, 1)])
    assert error_of(result, "foo") == ("TOPIC_ALREADY_EXISTS", "Topic 'foo' already exists.")
    assert error_of(result, "dup") == ("INVALID_REQUEST", "Duplicate topic name.")
    assert result.records == ()
    with pytest.raises(Exception, match="Found duplicate TopicRecord"):
        replay(image, [TopicRecord("foo", BAR)])


def test_replication_factor_larger_than_the_cluster_has_kafkas_message() -> None:
    result = create_topics(cluster([1, 2, 3]), [CreatableTopic("foo", 1, 4)])
    assert error_of(result, "foo") == (
        "INVALID_REPLICATION_FACTOR",
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
        "cannot be reached because only 3 broker(s) are registered.",
    )
    fenced = create_topics(cluster([1, 2], fenced=[1, 2]), [CreatableTopic("foo", 1, 1)])
    assert error_of(fenced, "foo") == (
        "INVALID_REPLICATION_FACTOR",
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced.",
    )


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (CreatableTopic("", 1, 1), ("INVALID_TOPIC_EXCEPTION",
                                    "Topic name is invalid: the empty string is not allowed")),
        (CreatableTopic("..", 1, 1), ("INVALID_TOPIC_EXCEPTION",
                                      "Topic name is invalid: '..' is not allowed")),
        (CreatableTopic("a" * 250, 1, 1), ("INVALID_TOPIC_EXCEPTION",
                                           f"Topic name is invalid: the length of '{'a' * 250}' "
                                           "is longer than the max allowed length 249")),
        (CreatableTopic("a b", 1, 1), ("INVALID_TOPIC_EXCEPTION",
                                       "Topic name is invalid: 'a b' contains one or more "
                                       "characters other than ASCII alphanumerics, '.', '_' and "
                                       "'-'")),
        (CreatableTopic("__cluster_metadata", 1, 1), (
            "INVALID_REQUEST", "Creation of internal topic __cluster_metadata is prohibited.")),
        (CreatableTopic("t", 1, 0), ("INVALID_REPLICATION_FACTOR", "Replication factor must be "
                                     "larger than 0, or -1 to use the default value.")),
        (CreatableTopic("t", -2, 1), ("INVALID_PARTITIONS", "Number of partitions was set to "
                                      "an invalid non-positive value.")),
        (CreatableTopic("t", 1, 1, configs=(("a", None), ("b", None))), (
            "INVALID_CONFIG", "Null value not supported for topic configs: a,b")),
        (CreatableTopic("t", 1, 1, configs=(("min.insync.replicas", "0"),)), (
            "INVALID_CONFIG", "Invalid value 0 for configuration min.insync.replicas: Value "
            "must be at least 1")),
        (CreatableTopic("t", 1, 1, configs=(("min.insync.replicas", "x"),)), (
            "INVALID_CONFIG", "Invalid value x for configuration min.insync.replicas: Not a "
            "number of type INT")),
        (CreatableTopic("t", 1, 1, configs=(("unclean.leader.election.enable", "yes"),)), (
            "INVALID_CONFIG", "Invalid value yes for configuration "
            "unclean.leader.election.enable: Expected value to be either true or false")),
    ],
)
def test_invalid_requests(topic: CreatableTopic, error: tuple[str, str]) -> None:
    result = create_topics(cluster(), [topic])
    assert error_of(result, topic.name) == error
    assert result.records == ()


def test_names_colliding_on_dot_and_underscore() -> None:
    image = with_topic(cluster(), "a_b", FOO, [[1]])
    result = create_topics(image, [CreatableTopic("a.b", 1, 1)])
    assert error_of(result, "a.b") == ("INVALID_TOPIC_EXCEPTION",
                                       "Topic 'a.b' collides with existing topic: a_b")
    same_request = create_topics(cluster(), [CreatableTopic("x.y", 1, 1),
                                             CreatableTopic("x_y", 1, 1)])
    assert error_of(same_request, "x.y") is None
    assert error_of(same_request, "x_y") == ("INVALID_TOPIC_EXCEPTION",
                                             "Topic 'x_y' collides with existing topic: x.y")


def assign(*lists: list[int]) -> tuple[ReplicaAssignment, ...]:
    return tuple(ReplicaAssignment(i, tuple(r)) for i, r in enumerate(lists))


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (CreatableTopic("t", -1, 2, assign([1, 2])), (
            "INVALID_REQUEST", "A manual partition assignment was specified, but replication "
            "factor was not set to -1.")),
        (CreatableTopic("t", 1, -1, assign([1, 2])), (
            "INVALID_REQUEST", "A manual partition assignment was specified, but numPartitions "
            "was not set to -1.")),
        (CreatableTopic("t", assignments=(ReplicaAssignment(0, (1,)), ReplicaAssignment(0, (2,)))),
         ("INVALID_REPLICA_ASSIGNMENT", "Found multiple manual partition assignments for "
          "partition 0")),
        (CreatableTopic("t", assignments=assign([])), (
            "INVALID_REPLICA_ASSIGNMENT",
            "The manual partition assignment includes an empty replica list.")),
        (CreatableTopic("t", assignments=assign([1, 9])), (
            "INVALID_REPLICA_ASSIGNMENT", "The manual partition assignment includes broker 9, "
            "but no such broker is registered.")),
        (CreatableTopic("t", assignments=assign([2, 2])), (
            "INVALID_REPLICA_ASSIGNMENT",
            "The manual partition assignment includes the broker 2 more than once.")),
        (CreatableTopic("t", assignments=assign([1, 2], [3])), (
            "INVALID_REPLICA_ASSIGNMENT", "The manual partition assignment includes a partition "
            "with 1 replica(s), but this is not consistent with previous partitions, which have "
            "2 replica(s).")),
        (CreatableTopic("t", assignments=(ReplicaAssignment(1, (1,)),)), (
            "INVALID_REPLICA_ASSIGNMENT",
            "partitions should be a consecutive 0-based integer sequence")),
        (CreatableTopic("t", assignments=assign([4])), (
            "INVALID_REPLICA_ASSIGNMENT", "All brokers specified in the manual partition "
            "assignment for partition 0 are fenced or in controlled shutdown.")),
    ],
)
def test_manual_assignment_errors(topic: CreatableTopic, error: tuple[str, str]) -> None:
    result = create_topics(cluster([1, 2, 3, 4], fenced=[4]), [topic])
    assert error_of(result, "t") == error


def test_manual_assignment_keeps_the_given_order() -> None:
    image = cluster([1, 2, 3], fenced=[3])
    result = create_topics(image, [CreatableTopic("t", assignments=assign([3, 1], [2, 3]))],
                           new_topic_id=counter_ids(FOO))
    assert result.records[1:] == (PartitionRecord(0, FOO, (3, 1), (1,), leader=1),
                                  PartitionRecord(1, FOO, (2, 3), (2,), leader=2))


def test_create_partitions() -> None:
    image = with_topic(cluster([1, 2, 3]), "foo", FOO, [[1, 2], [2, 3]])
    result = create_partitions(image, [CreatePartitionsTopic("foo", 4)])
    start = placement_start("foo") + 2
    expected = [tuple([1, 2, 3][(i + j + start) % 3] for j in range(2)) for i in range(2)]
    assert result.records == tuple(
        PartitionRecord(2 + i, FOO, r, r, leader=r[0]) for i, r in enumerate(expected))
    after = commit(image, result)
    assert sorted(after.topic("foo").partitions) == [0, 1, 2, 3]
    manual = create_partitions(image, [CreatePartitionsTopic("foo", 3, ((3, 1),))])
    assert manual.records == (PartitionRecord(2, FOO, (3, 1), (3, 1), leader=3),)


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (CreatePartitionsTopic("nope", 3), (
            "UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition.")),
        (CreatePartitionsTopic("foo", 2), ("INVALID_PARTITIONS",
                                           "Topic already has 2 partition(s).")),
        (CreatePartitionsTopic("foo", 1), (
            "INVALID_PARTITIONS",
            "The topic foo currently has 2 partition(s); 1 would not be an increase.")),
        (CreatePartitionsTopic("foo", 4, ((1, 2),)), (
            "INVALID_REPLICA_ASSIGNMENT",
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were "
            "specified.")),
        (CreatePartitionsTopic("foo", 3, ((1,),)), (
            "INVALID_REPLICA_ASSIGNMENT", "The manual partition assignment includes a partition "
            "with 1 replica(s), but this is not consistent with previous partitions, which have "
            "2 replica(s).")),
        (CreatePartitionsTopic("foo", 3, ((4, 5),)), (
            "INVALID_REPLICA_ASSIGNMENT", "All brokers specified in the manual partition "
            "assignment for partition 2 are fenced or in controlled shutdown.")),
    ],
)
def test_create_partitions_errors(request_: CreatePartitionsTopic, error: tuple) -> None:
    image = with_topic(cluster([1, 2, 3, 4, 5], fenced=[4]), "foo", FOO, [[1, 2], [2, 3]])
    image = replay(image, [BrokerRegistrationChangeRecord(5, epoch_of(5),
                                                          in_controlled_shutdown=1)])
    result = create_partitions(image, [request_])
    assert error_of(result, request_.name) == error
    assert result.records == ()


def test_create_partitions_placer_error_is_not_prefixed() -> None:
    image = with_topic(cluster([1, 2, 3]), "foo", FOO, [[1, 2, 3]])
    image = replay(image, [BrokerRegistrationChangeRecord(b, epoch_of(b), fenced=1)
                           for b in (1, 2, 3)])
    result = create_partitions(image, [CreatePartitionsTopic("foo", 2)])
    assert error_of(result, "foo") == ("INVALID_REPLICATION_FACTOR",
                                       "All brokers are currently fenced.")


def test_delete_topics() -> None:
    image = with_topic(with_topic(cluster(), "foo", FOO, [[1]], configs={"x": "1"}),
                       "bar", BAR, [[2]])
    result = delete_topics(image, [
        TopicRef(name="foo"), TopicRef(topic_id=BAR), TopicRef(name="nope"),
        TopicRef(topic_id=BAZ), TopicRef(), TopicRef(name="foo", topic_id=FOO),
    ])
    assert result.records == (RemoveTopicRecord(FOO), RemoveTopicRecord(BAR))
    errors = [(r.name, r.topic_id, r.error and r.error.error.name) for r in result.response]
    assert errors == [
        ("foo", FOO, None), ("bar", BAR, None), ("nope", None, "UNKNOWN_TOPIC_OR_PARTITION"),
        (None, BAZ, "UNKNOWN_TOPIC_ID"), (None, None, "INVALID_REQUEST"),
        ("foo", FOO, "INVALID_REQUEST"),
    ]
    after = commit(image, result)
    assert after.topics.by_id == {}
    assert after.configs == {}


def test_delete_topics_duplicates_and_disabled() -> None:
    image = with_topic(cluster(), "foo", FOO, [[1]])
    result = delete_topics(image, [TopicRef(name="foo"), TopicRef(name="foo")])
    assert result.records == ()
    assert result.response[0].error.message == "Duplicate topic name."
    twice = delete_topics(image, [TopicRef(name="foo"), TopicRef(topic_id=FOO)])
    assert twice.records == ()
    assert {r.error.message for r in twice.response} == {
        "The provided topic name maps to an ID that was already supplied."}
    with pytest.raises(ControllerApiError) as raised:
        delete_topics(image, [TopicRef(name="foo")], deletion_enabled=False)
    assert raised.value.error is Errors.TOPIC_DELETION_DISABLED


def test_too_many_records_is_a_policy_violation() -> None:
    with pytest.raises(ControllerApiError, match="excessively large batch"):
        create_topics(cluster(), [CreatableTopic("big", 10_001, 1)])
