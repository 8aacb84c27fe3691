"""Kafka's admin APIs on the brokers' Kafka listeners, driven by clients this project did not
write: confluent-kafka's AdminClient and kafka-python's KafkaAdminClient against one
controller and three brokers as real processes (one cluster for the module). Writes reach the
active controller through the brokers (the same admin operations as the gRPC Admin API);
DeleteRecords moves a partition's log start on its leader; a producer's Metadata for a missing
topic auto-creates it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from harness.cluster import ProcessCluster, kafka_cluster, wait_for

BROKERS = [2, 3, 4]
WAIT_S = 60
TIMINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka-admin"), BROKERS, TIMINGS,
                       WAIT_S) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def admin(cluster: ProcessCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})


@pytest.fixture(scope="module")
def kadmin(cluster: ProcessCluster) -> Iterator[object]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers(),
                              request_timeout_ms=30000)
    yield client
    client.close()


def error_of(future: object) -> int | None:
    """The Kafka error code a confluent-kafka future failed with (None: it succeeded)."""
    try:
        future.result(timeout=WAIT_S)  # type: ignore[attr-defined]
    except KafkaException as exc:
        return int(exc.args[0].code())
    return None


def wait_led(admin: AdminClient, topic: str, partitions: int) -> None:
    def led() -> bool:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        return (found is not None and found.error is None
                and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values()))

    wait_for(led, WAIT_S, f"{topic} to have {partitions} led partitions")


# ---- confluent-kafka ----

def test_confluent_creates_lists_describes_and_deletes_topics(admin: AdminClient) -> None:
    created = admin.create_topics([
        NewTopic("c-orders", 3, 3, config={"retention.ms": "3600000"}),
        NewTopic("c-manual", 2, replica_assignment=[[2, 3], [3, 4]]),
    ])
    assert {t: error_of(f) for t, f in created.items()} == {"c-orders": None, "c-manual": None}
    wait_led(admin, "c-orders", 3)
    wait_led(admin, "c-manual", 2)

    refused = admin.create_topics([
        NewTopic("c-orders", 1, 1),
        NewTopic("c-too-many-replicas", 1, 4),
        NewTopic("c-no-partitions", 0, 1),
        NewTopic("c-bad-config", 1, 1, config={"no.such.key": "1"}),
        NewTopic("bad/name", 1, 1),
    ])
    assert {t: error_of(f) for t, f in refused.items()} == {
        "c-orders": KafkaError.TOPIC_ALREADY_EXISTS,
        "c-too-many-replicas": KafkaError.INVALID_REPLICATION_FACTOR,
        "c-no-partitions": KafkaError.INVALID_PARTITIONS,
        "c-bad-config": KafkaError.INVALID_CONFIG,
        "bad/name": KafkaError.TOPIC_EXCEPTION,
    }
    checked = admin.create_topics([NewTopic("c-validated", 2, 2)], validate_only=True)
    assert error_of(checked["c-validated"]) is None

    listed = admin.list_topics(timeout=10).topics
    assert {"c-orders", "c-manual"} <= set(listed) and "c-validated" not in listed
    [described] = admin.describe_topics(TopicCollection(["c-orders"])).values()
    description = described.result(timeout=WAIT_S)
    assert [len(p.replicas) for p in description.partitions] == [3, 3, 3]
    manual = admin.list_topics("c-manual", timeout=10).topics["c-manual"]
    assert [manual.partitions[i].replicas for i in (0, 1)] == [[2, 3], [3, 4]]

    deleted = admin.delete_topics(["c-manual", "c-never-created"])
    assert {t: error_of(f) for t, f in deleted.items()} == {
        "c-manual": None, "c-never-created": KafkaError.UNKNOWN_TOPIC_OR_PART}
    wait_for(lambda: "c-manual" not in admin.list_topics(timeout=10).topics, WAIT_S,
             "c-manual to be gone")


def test_confluent_cluster_configs_and_partitions(admin: AdminClient) -> None:
    cluster = admin.describe_cluster().result(timeout=WAIT_S)
    assert sorted(node.id for node in cluster.nodes) == BROKERS
    assert cluster.controller.id in BROKERS and cluster.cluster_id

    admin.create_topics([NewTopic("c-configs", 1, 2)])["c-configs"].result(timeout=WAIT_S)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "c-configs")
    altered = admin.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "c-configs", incremental_configs=[
            ConfigEntry("retention.ms", "7200000",
                        incremental_operation=AlterConfigOpType.SET)])])
    assert error_of(altered[topic]) is None

    def described() -> dict[str, object]:
        return admin.describe_configs([topic])[topic].result(timeout=WAIT_S)  # type: ignore

    wait_for(lambda: described()["retention.ms"].value == "7200000", WAIT_S,  # type: ignore
             "the altered config to be described")
    assert described()["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value  # type: ignore
    appended = admin.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "c-configs", incremental_configs=[
            ConfigEntry("retention.ms", "1",
                        incremental_operation=AlterConfigOpType.APPEND)])])
    assert error_of(appended[topic]) == KafkaError.INVALID_CONFIG
    unknown = ConfigResource(ConfigResource.Type.TOPIC, "c-nowhere")
    missing = admin.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "c-nowhere", incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])])
    assert error_of(missing[unknown]) == KafkaError.UNKNOWN_TOPIC_OR_PART

    broker = ConfigResource(ConfigResource.Type.BROKER, "2")
    configs = admin.describe_configs([broker])[broker].result(timeout=WAIT_S)
    assert configs["num.partitions"].value == "1"
    own = ConfigResource(ConfigResource.Type.BROKER, "2", incremental_configs=[
        ConfigEntry("log.retention.ms", "86400000",
                    incremental_operation=AlterConfigOpType.SET)])
    [future] = admin.incremental_alter_configs([own]).values()
    assert error_of(future) is None
    wait_for(lambda: admin.describe_configs([broker])[broker].result(timeout=WAIT_S)[
        "log.retention.ms"].value == "86400000", WAIT_S, "broker 2's own config")

    grown = admin.create_partitions([NewPartitions("c-configs", 3)])
    assert error_of(grown["c-configs"]) is None
    wait_led(admin, "c-configs", 3)
    shrunk = admin.create_partitions([NewPartitions("c-configs", 2)])
    assert error_of(shrunk["c-configs"]) == KafkaError.INVALID_PARTITIONS


def test_confluent_delete_records_and_elect_leaders(admin: AdminClient,
                                                    cluster: ProcessCluster) -> None:
    admin.create_topics([NewTopic("c-records", 1, 3)])["c-records"].result(timeout=WAIT_S)
    wait_led(admin, "c-records", 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    for i in range(10):
        producer.produce("c-records", value=f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0

    [future] = admin.delete_records([TopicPartition("c-records", 0, 4)]).values()
    deleted = future.result(timeout=WAIT_S)
    assert deleted.low_watermark == 4
    [beyond] = admin.delete_records([TopicPartition("c-records", 0, 11)]).values()
    assert error_of(beyond) == KafkaError.OFFSET_OUT_OF_RANGE
    low = admin.list_offsets({TopicPartition("c-records", 0): _earliest()})
    assert next(iter(low.values())).result(timeout=WAIT_S).offset == 4

    # The partition's preferred leader leads it already: nothing to elect.
    result = admin.elect_leaders(ElectionType.PREFERRED,
                                 [TopicPartition("c-records", 0)]).result(timeout=WAIT_S)
    [error] = result.values()
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED


def _earliest() -> object:
    from confluent_kafka.admin import OffsetSpec

    return OffsetSpec.earliest()


def test_a_producer_auto_creates_a_missing_topic(admin: AdminClient,
                                                 cluster: ProcessCluster) -> None:
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(),
                         "message.timeout.ms": 30000})
    delivered: list[object] = []
    producer.produce(topic, value=b"first", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(45) == 0
    assert delivered == [None]
    found = admin.list_topics(topic, timeout=10).topics[topic]
    assert found.error is None and len(found.partitions) == 1  # num.partitions


# ---- kafka-python ----

def test_kafka_python_admin_client(kadmin, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic

    kadmin.create_topics([KNewTopic("k-topic", 2, 2, topic_configs={"cleanup.policy": "delete"})])
    wait_led(admin, "k-topic", 2)
    assert "k-topic" in kadmin.list_topics()
    [described] = kadmin.describe_topics(["k-topic"])
    assert described["error_code"] == 0 and len(described["partitions"]) == 2

    kadmin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "k-topic",
                                          configs={"retention.ms": "600000"})])

    def retention() -> object:
        described = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "k-topic")])
        [by_name] = described.values()
        return by_name["k-topic"].get("retention.ms", {}).get("value")

    wait_for(lambda: retention() == "600000", WAIT_S, "kafka-python to see the altered config")
    # The legacy AlterConfigs: kafka-python first reads the other modified keys and sends them
    # along, since the request replaces the whole set.
    kadmin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "k-topic",
                                          configs={"segment.ms": "3600000"})], incremental=False)

    def both() -> tuple[object, object]:
        described = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "k-topic")])
        [by_name] = described.values()
        entries = by_name["k-topic"]
        return (entries.get("segment.ms", {}).get("value"),
                entries.get("retention.ms", {}).get("value"))

    wait_for(lambda: both() == ("3600000", "600000"), WAIT_S, "the replaced configs")

    kadmin.create_partitions({"k-topic": KNewPartitions(4)})
    wait_led(admin, "k-topic", 4)
    cluster = kadmin.describe_cluster()
    assert sorted(b["broker_id"] for b in cluster["brokers"]) == BROKERS

    dirs = kadmin.describe_log_dirs()
    assert {entry["broker"] for entry in dirs} == set(BROKERS)
    assert any(t["name"] == "k-topic" for entry in dirs for d in entry["log_dirs"]
               for t in d["topics"])

    kadmin.delete_topics(["k-topic"])
    wait_for(lambda: "k-topic" not in kadmin.list_topics(), WAIT_S, "k-topic to be gone")


def test_kafka_python_reassigns_a_partition(kadmin, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    from kafka import TopicPartition as KTopicPartition

    admin.create_topics([NewTopic("k-moving", 1, replica_assignment=[[2, 3]])])[
        "k-moving"].result(timeout=WAIT_S)
    wait_led(admin, "k-moving", 1)
    kadmin.alter_partition_reassignments({KTopicPartition("k-moving", 0): [3, 4]})

    def moved() -> bool:
        found = admin.list_topics("k-moving", timeout=10).topics["k-moving"].partitions[0]
        return sorted(found.replicas) == [3, 4]

    wait_for(moved, WAIT_S, "the reassignment to complete")
    wait_for(lambda: not kadmin.list_partition_reassignments(), WAIT_S,
             "no reassignment to be listed")
