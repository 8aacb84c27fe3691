"""KIP-848's consumer group protocol with librdkafka's `group.protocol=consumer` (confluent-kafka
2.16) against a real controller and broker: two members split a topic's partitions, a third
joins and only the partitions that move to it are revoked from the others (incremental, no
stop-the-world), a member that closes leaves and its partitions go back, and across all of it
every record is read exactly once (each member commits what it read before giving a partition
up). The coordinator's server-side assignor decides; the members only report."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import ProcessCluster, kafka_cluster, wait_for

WAIT_S = 60
TOPIC, PARTITIONS = "kip848", 6
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    # A released partition reaches its next owner on that member's next heartbeat.
    "group.consumer.heartbeat.interval.ms": "250",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("consumer-protocol"), [2], SETTINGS,
                       WAIT_S) as cluster:
        yield cluster


class Member:
    """A consumer-protocol consumer that remembers what it read, what it was given and what
    it gave up, and commits a partition's position before giving it up."""

    def __init__(self, cluster: ProcessCluster, name: str) -> None:
        self.name = name
        self.read: list[tuple[int, int]] = []
        self.owned: set[int] = set()
        self.revoked: list[int] = []
        self.consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers(), "group.id": "kip848-group",
            "group.protocol": "consumer", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "client.id": name})
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        positions = [tp for tp in consumer.position(partitions) if tp.offset >= 0]
        if positions:
            consumer.commit(offsets=positions, asynchronous=False)
        gone = {tp.partition for tp in partitions}
        self.revoked += sorted(gone)
        self.owned -= gone

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is None:
            return
        if message.error() is not None:
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
            return
        self.read.append((message.partition(), message.offset()))
        self.consumer.commit(message=message, asynchronous=True)


def produce(cluster: ProcessCluster, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    for i in range(count):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(WAIT_S) == 0


def poll_until(members: list[Member], condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for member in members:
            member.poll()
        if condition():  # type: ignore[operator]
            return
    raise AssertionError(f"timed out waiting for {what}: " + ", ".join(
        f"{m.name} owns {sorted(m.owned)} read {len(m.read)}" for m in members))


def split(members: list[Member]) -> bool:
    """The partitions are split among exactly these members, none twice."""
    owned = [p for m in members for p in m.owned]
    return sorted(owned) == list(range(PARTITIONS)) and all(m.owned for m in members)


def test_members_split_join_incrementally_and_leave(cluster: ProcessCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=WAIT_S)
    wait_for(lambda: len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)
             == PARTITIONS, WAIT_S, "the topic")
    produce(cluster, 300)
    a, b = Member(cluster, "a"), Member(cluster, "b")
    everyone = [a, b]
    total = lambda: sum(len(m.read) for m in everyone)  # noqa: E731
    poll_until(everyone, lambda: split([a, b]) and total() >= 300, "a and b to split 300")
    kept = {m.name: set(m.owned) for m in (a, b)}
    revoked_before = {m.name: len(m.revoked) for m in (a, b)}

    produce(cluster, 300)
    c = Member(cluster, "c")
    everyone.append(c)
    poll_until(everyone, lambda: split([a, b, c]) and total() >= 600,
               "c to join and the 600 records to be read")
    for m in (a, b):
        newly_revoked = set(m.revoked[revoked_before[m.name]:])
        assert newly_revoked <= c.owned, f"{m.name} gave up only what moved to c"
        assert kept[m.name] - newly_revoked == m.owned, f"{m.name} kept the rest throughout"

    c.consumer.close()  # leaves the group (epoch -1): its partitions go back to a and b
    everyone.remove(c)
    produce(cluster, 60)
    poll_until(everyone, lambda: split([a, b]) and total() + len(c.read) >= 660,
               "a and b to take c's partitions back and read everything")
    reads = a.read + b.read + c.read
    assert len(reads) == len(set(reads)) == 660, "every record read exactly once"

    described = admin.describe_consumer_groups(["kip848-group"])["kip848-group"].result(
        timeout=WAIT_S)
    assert str(described.type).endswith("CONSUMER") and len(described.members) == 2
    for m in (a, b):
        m.consumer.close()
