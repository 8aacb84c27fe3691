"""Consumer groups end to end with clients this project did not write: one controller and three
brokers as real processes (one cluster for the module); confluent-kafka (librdkafka) and
kafka-python consumers subscribe in groups, commit, restart and resume from the committed
offsets; both libraries' admin clients list, describe and delete groups; a group of three
consumers keeps consuming across a kill -9 of its coordinator's broker with no committed offset
lost: the new coordinator answers the offsets committed to the old one (its state lives in
the replicated __consumer_offsets topic), and no member reads again below them; a KIP-848
group (group.protocol=consumer) does the same with no member losing a partition across it."""

from __future__ import annotations

import logging
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import ProcessCluster, kafka_cluster, wait_for

BROKERS = [2, 3, 4]
WAIT_S = 60
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
    "group.initial.rebalance.delay.ms": "100",
    "offsets.topic.num.partitions": "6",
    # KIP-848 members: a partition another member released arrives at the next heartbeat.
    "group.consumer.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("consumer-groups"), BROKERS, SETTINGS,
                       WAIT_S) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def admin(cluster: ProcessCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(timeout=WAIT_S)

    def led() -> bool:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        return (found is not None and found.error is None
                and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values()))

    wait_for(led, WAIT_S, f"{topic} to have leaders")


def produce(cluster: ProcessCluster, topic: str, count: int, partitions: int,
            start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                         "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(WAIT_S) == 0


def ck_consumer(cluster: ProcessCluster, group: str, **settings: object) -> CKConsumer:
    return CKConsumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest",
                       **settings})


def poll_values(consumer: CKConsumer, count: int) -> list[bytes]:
    """`count` record values (errors other than end-of-partition fail the test)."""
    out: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while len(out) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
            continue
        out.append(message.value())
    assert len(out) == count, f"read {len(out)} of {count} records"
    return out


def test_confluent_consumer_commits_and_a_restarted_consumer_resumes(
        cluster: ProcessCluster, admin: AdminClient) -> None:
    create_topic(admin, "orders", 3)
    produce(cluster, "orders", 60, 3)
    first = ck_consumer(cluster, "billing")
    first.subscribe(["orders"])
    seen = poll_values(first, 30)
    committed = first.commit(asynchronous=False)
    assert committed is not None and all(tp.error is None for tp in committed)
    first.close()  # LeaveGroup: the group goes Empty, its offsets stay

    second = ck_consumer(cluster, "billing")
    second.subscribe(["orders"])
    rest = poll_values(second, 30)
    positions = second.committed([TopicPartition("orders", p) for p in range(3)],
                                 timeout=WAIT_S)
    second.close()
    assert sorted(seen + rest) == sorted(f"v{i}".encode() for i in range(60)), \
        "the restarted consumer resumed at the committed offsets: nothing twice, nothing lost"
    # What the first consumer committed (a partition it never read has no offset: -1001).
    assert sum(max(tp.offset, 0) for tp in positions) == 30


def test_kafka_python_consumer_commits_and_a_restarted_consumer_resumes(
        cluster: ProcessCluster, admin: AdminClient) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    create_topic(admin, "payments", 2)
    produce(cluster, "payments", 40, 2)

    def read(count: int) -> list[bytes]:
        consumer = KafkaConsumer(
            "payments", bootstrap_servers=cluster.bootstrap_servers(), group_id="ledger",
            enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=count)
        out: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=count - len(out)).values():
                out.extend(r.value for r in records)
        consumer.commit()
        committed = [consumer.committed(KTopicPartition("payments", p)) for p in range(2)]
        consumer.close()
        assert len(out) == count
        assert sum(c or 0 for c in committed) >= count
        return out

    seen = read(20) + read(20)
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(40))


def test_admin_clients_list_describe_and_delete_groups(
        cluster: ProcessCluster, admin: AdminClient) -> None:
    from kafka.admin import KafkaAdminClient

    create_topic(admin, "audit", 1)
    produce(cluster, "audit", 5, 1)
    active = ck_consumer(cluster, "auditors")
    active.subscribe(["audit"])
    poll_values(active, 5)
    active.commit(asynchronous=False)

    def described_state(group: str) -> str:
        return str(admin.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
                   .state.name)

    wait_for(lambda: described_state("auditors") == "STABLE", WAIT_S, "auditors stable")
    description = admin.describe_consumer_groups(["auditors"])["auditors"].result(WAIT_S)
    assert len(description.members) == 1
    assert description.members[0].assignment.topic_partitions == [TopicPartition("audit", 0)]
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=WAIT_S).valid}
    assert {"auditors", "billing", "ledger"} <= set(listed)
    assert listed["billing"].state.name == "EMPTY"

    # A non-empty group cannot be deleted; an empty one goes with its offsets.
    refused = admin.delete_consumer_groups(["auditors"])["auditors"]
    with pytest.raises(KafkaException) as info:
        refused.result(timeout=WAIT_S)
    assert info.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    admin.delete_consumer_groups(["billing"])["billing"].result(timeout=WAIT_S)
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("billing", [TopicPartition("orders", 0)])])["billing"]
    assert [tp.offset for tp in offsets.result(timeout=WAIT_S).topic_partitions] == [-1001]

    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers())
    try:
        names = {group["group_id"] for group in kadmin.list_groups()}
        assert "auditors" in names and "ledger" in names and "billing" not in names
        described = kadmin.describe_groups(["auditors"])["auditors"]
        assert (described["group_state"], described["protocol_data"]) == ("Stable", "range")
        committed = kadmin.list_group_offsets({"ledger": None})["ledger"]
        assert sum(meta.offset for meta in committed.values()) == 40
        error = kadmin.delete_groups(["ledger"])["ledger"]
        assert getattr(error, "errno", 0) == 0, error
        assert "ledger" not in {group["group_id"] for group in kadmin.list_groups()}
    finally:
        kadmin.close()
        active.close()


def test_a_static_member_restarting_within_its_session_causes_no_rebalance(
        cluster: ProcessCluster, admin: AdminClient) -> None:
    create_topic(admin, "static", 2)
    produce(cluster, "static", 20, 2)
    assignments: dict[str, list[list[int]]] = {"a": [], "b": []}

    def member(name: str) -> CKConsumer:
        consumer = ck_consumer(cluster, "statics", **{"group.instance.id": name,
                                                     "session.timeout.ms": 30000})

        def on_assign(_c: object, partitions: list[TopicPartition]) -> None:
            assignments[name].append(sorted(tp.partition for tp in partitions))

        consumer.subscribe(["static"], on_assign=on_assign)
        return consumer

    a, b = member("a"), member("b")
    wait_for(lambda: [c.poll(0.1) for c in (a, b)] and all(assignments.values())
             and sorted(assignments["a"][-1] + assignments["b"][-1]) == [0, 1],
             WAIT_S, "both static members assigned")
    before = admin.describe_consumer_groups(["statics"])["statics"].result(WAIT_S)
    a.close()  # a static member sends no LeaveGroup: the group stays Stable
    again = member("a")
    wait_for(lambda: [c.poll(0.1) for c in (again, b)] and len(assignments["a"]) == 2,
             WAIT_S, "the restarted member's assignment")
    after = admin.describe_consumer_groups(["statics"])["statics"].result(WAIT_S)
    assert assignments["a"][1] == assignments["a"][0], "it got its old assignment back"
    assert len(assignments["b"]) == 1, "the other member saw no rebalance"
    assert after.state.name == "STABLE" and len(after.members) == 2
    assert {m.group_instance_id for m in after.members} == {"a", "b"}
    assert {m.member_id for m in after.members} != {m.member_id for m in before.members}
    again.close()
    b.close()


def test_kcat_balanced_consumer_commits_and_resumes(
        cluster: ProcessCluster, admin: AdminClient) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    create_topic(admin, "kcat-topic", 2)
    produce(cluster, "kcat-topic", 10, 2)
    # No -o: kcat would start every assigned partition there, committed offsets or not.
    command = [kcat, "-b", cluster.bootstrap_servers(), "-G", "kcat-group",
               "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n", "kcat-topic"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S)
    assert sorted(first.stdout.split()) == sorted(f"v{i}" for i in range(10)), first.stderr
    produce(cluster, "kcat-topic", 4, 2, start=10)
    second = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S)
    assert sorted(second.stdout.split()) == sorted(f"v{i}" for i in range(10, 14)), \
        second.stderr


class GroupMember(threading.Thread):
    """A confluent-kafka consumer in a group, committing what it read after every poll and
    recording when it lost partitions."""

    def __init__(self, cluster: ProcessCluster, group: str, topic: str,
                 protocol: str = "classic") -> None:
        super().__init__(daemon=True)
        # librdkafka refuses the classic session settings with group.protocol=consumer (the
        # coordinator's group.consumer.* keys rule there).
        settings: dict[str, object] = {"group.protocol": "consumer"} \
            if protocol == "consumer" else {"session.timeout.ms": 10000,
                                            "heartbeat.interval.ms": 500}
        self.consumer = ck_consumer(cluster, group, **settings)
        self.revoked: list[tuple[float, list[int]]] = []  # (monotonic time, partitions)
        self.consumer.subscribe([topic], on_revoke=self._on_revoke)
        self.seen: set[tuple[int, int]] = set()
        self.reads: list[tuple[int, int, float]] = []  # (partition, offset, monotonic time)
        self.acknowledged: dict[int, int] = {}  # partition -> offset the broker confirmed
        self.stop = threading.Event()
        self.errors: list[str] = []

    def _on_revoke(self, _consumer: CKConsumer, partitions: list[TopicPartition]) -> None:
        self.revoked.append((time.monotonic(), [tp.partition for tp in partitions]))

    def run(self) -> None:
        dirty = False  # read more than the broker has confirmed as committed
        try:
            while not self.stop.is_set():
                messages = self.consumer.consume(100, timeout=0.2)
                read = [m for m in messages if m.error() is None]
                now = time.monotonic()
                self.seen.update((m.partition(), m.offset()) for m in read)
                self.reads.extend((m.partition(), m.offset(), now) for m in read)
                dirty = dirty or bool(read)
                if not dirty:
                    continue
                try:
                    for tp in self.consumer.commit(asynchronous=False) or []:
                        if tp.error is None:
                            self.acknowledged[tp.partition] = max(
                                tp.offset, self.acknowledged.get(tp.partition, -1))
                    dirty = False
                except KafkaException as exc:  # a rebalance or a coordinator moving: again
                    self.errors.append(str(exc))
        finally:
            self.consumer.close()


def librdkafka_versions(cluster: ProcessCluster, topic: str) -> dict[str, int]:
    """The version of each request a librdkafka consumer sends while it commits, reads its
    commits and looks an offset up by time, from its protocol debug log."""
    sent: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sent.extend(re.findall(r"Sent (\w+)Request \(v(\d+)", record.getMessage()))

    logger = logging.getLogger("rdkafka-protocol")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Capture())
    consumer = ck_consumer(cluster, f"{topic}-librdkafka", debug="protocol", logger=logger)
    try:
        tps = [TopicPartition(topic, p, 3) for p in range(3)]
        consumer.assign(tps)
        consumer.commit(offsets=tps, asynchronous=False)
        consumer.committed(tps, timeout=WAIT_S)
        consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=WAIT_S)
        consumer.poll(0.1)  # delivers the queued log lines
    finally:
        consumer.close()
    return {name: int(version) for name, version in sent}


def kafka_call(address: str, request: Any, version: int, response_class: Any) -> Any:
    """One request on its own connection, as a sarama Broker sends it: kafka-python's protocol
    classes (Kafka's JSON schemas) encode and decode, no client logic in between."""
    host, port = address.rsplit(":", 1)
    request.with_header(correlation_id=1, client_id="burrow-lagchecker")
    frame = bytes(request.encode(version=version, header=True, framed=True))
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(frame)
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        return response_class.decode(stream.read(size), version=version, header=True)


def test_old_protocol_clients_compute_a_groups_lag(
        cluster: ProcessCluster, admin: AdminClient) -> None:
    """Issue 31 item 6: a lag monitor on old protocol versions (Burrow reads through sarama:
    ListOffsets v0; kafka_exporter and friends OffsetFetch v1) finds a group's lag equal to
    produced minus committed: kafka-python told it talks to Kafka 0.10.0, then the request
    sequence of sarama's client and Burrow's offset poller on the raw protocol. A librdkafka
    consumer still picks the newest versions."""
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KTopicPartition
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.consumer import (
        ListOffsetsRequest,
        ListOffsetsResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
    )
    from kafka.protocol.metadata import (
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        MetadataRequest,
        MetadataResponse,
    )

    create_topic(admin, "watched", 3)
    produce(cluster, "watched", 30, 3)  # 10 a partition
    committed = {0: 4, 1: 10, 2: 0}
    old = BrokerVersionData(broker_version=(0, 10, 0))
    assert (old.api_version(ListOffsetsRequest), old.api_version(OffsetFetchRequest)) == (0, 1)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), group_id="watched",
                             enable_auto_commit=False, api_version=(0, 10, 0))
    try:
        tps = [KTopicPartition("watched", p) for p in range(3)]
        consumer.assign(tps)
        consumer.commit({tp: OffsetAndMetadata(committed[tp.partition], "", -1) for tp in tps})
        ends = consumer.end_offsets(tps)  # ListOffsets v0, latest, one offset
        lag = {tp.partition: ends[tp] - (consumer.committed(tp) or 0) for tp in tps}
    finally:
        consumer.close()
    assert lag == {0: 6, 1: 0, 2: 10}

    # sarama (Burrow's kafka_cluster module): Metadata v0 for the leaders, one ListOffsets v0
    # per leader with (OffsetNewest, maxOffsets 1) blocks; FindCoordinator v0 and OffsetFetch
    # v1 for the group's commits.
    bootstrap = cluster.bootstrap_servers().split(",")[0]
    metadata = kafka_call(bootstrap, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name="watched")]), 0, MetadataResponse)
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    (topic,) = metadata.topics
    by_leader: dict[int, list[int]] = {}
    for partition in topic.partitions:
        by_leader.setdefault(partition.leader_id, []).append(partition.partition_index)
    newest: dict[int, int] = {}
    for leader, partitions in by_leader.items():
        offsets = kafka_call(brokers[leader], ListOffsetsRequest(replica_id=-1, topics=[(
            "watched", [ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=p, timestamp=-1, max_num_offsets=1) for p in partitions])]),
            0, ListOffsetsResponse)
        for answer in offsets.topics[0].partitions:
            assert answer.error_code == 0 and len(answer.old_style_offsets) == 1
            newest[answer.partition_index] = answer.old_style_offsets[0]
    found = kafka_call(bootstrap, FindCoordinatorRequest(key="watched"), 0,
                       FindCoordinatorResponse)
    assert found.error_code == 0
    fetched = kafka_call(f"{found.host}:{found.port}", OffsetFetchRequest(
        group_id="watched", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name="watched", partition_indexes=[0, 1, 2])]), 1, OffsetFetchResponse)
    commits = {p.partition_index: p.committed_offset
               for p in fetched.topics[0].partitions}
    assert newest == {0: 10, 1: 10, 2: 10}
    assert {p: newest[p] - max(commits[p], 0) for p in range(3)} == lag

    # The floors moved, not the maxima: librdkafka 2.16 asks what it asked before.
    versions = librdkafka_versions(cluster, "watched")
    assert {name: versions.get(name) for name in ("ListOffsets", "OffsetCommit", "OffsetFetch",
                                                  "FindCoordinator", "Metadata")} == {
        "ListOffsets": 7, "OffsetCommit": 9, "OffsetFetch": 9, "FindCoordinator": 2,
        "Metadata": 12}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_of_three_consumes_across_a_kill_of_its_coordinator(
        cluster: ProcessCluster, admin: AdminClient, protocol: str) -> None:
    """The new coordinator serves the offsets committed to the old one, and no member goes
    back below them. Both are needed: a coordinator that lost the offsets either answers
    none (no rebalance: the members keep their positions) or, after a rebalance, sends the
    members back to offset 0 (auto.offset.reset=earliest) and they commit the end again.
    A KIP-848 group's epochs and assignments are replayed too: nobody loses a partition."""
    topic, group, partitions = f"clicks-{protocol}", f"dashboards-{uuid.uuid4().hex[:6]}", 6
    create_topic(admin, topic, partitions)
    produce(cluster, topic, 600, partitions)
    members = [GroupMember(cluster, group, topic, protocol) for _ in range(3)]
    for member in members:
        member.start()

    def seen() -> set[tuple[int, int]]:
        return set().union(*(m.seen for m in members))

    def committed() -> dict[int, int]:
        """Every partition's committed offset as the coordinator answers it now; {} while
        the answer is incomplete. A fresh admin client each time: librdkafka's AdminClient
        keeps waiting for a coordinator connection to a killed broker instead of looking
        the coordinator up again."""
        fresh = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
        result = fresh.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p) for p in range(partitions)])])[group]
        try:
            listed = result.result(timeout=10).topic_partitions
        except (KafkaException, TimeoutError):  # a lookup racing the leadership change
            return {}
        if len(listed) < partitions or any(tp.error is not None for tp in listed):
            return {}
        return {tp.partition: tp.offset for tp in listed}

    last: list[dict[int, int]] = [{}]

    def all_committed_at(offset: int) -> bool:
        last[0] = committed()
        return all(last[0].get(p) == offset for p in range(partitions))

    def wait_committed(offset: int, what: str) -> None:
        try:
            wait_for(lambda: all_committed_at(offset), WAIT_S, what)
        except AssertionError as exc:
            errors = [m.errors[-3:] for m in members]
            raise AssertionError(f"{exc}: committed {last[0]}, the members' last errors "
                                 f"{errors}, their last commits "
                                 f"{[m.acknowledged for m in members]}") from None

    wait_for(lambda: len(seen()) == 600, WAIT_S, "the group to read the first 600 records")
    wait_committed(100, "every partition's offset committed at 100")
    def stable() -> Any:
        """The group's description once it is Stable with its three members (a KIP-848 group
        may still be Reconciling a moment after its commits: librdkafka shows that UNKNOWN)."""
        description = admin.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
        return description if description.state.name == "STABLE" \
            and len(description.members) == 3 else None

    coordinator = wait_for(stable, WAIT_S, "the group Stable with three members").coordinator.id

    killed_at = time.monotonic()
    cluster.kill(coordinator)
    # Nothing new to read, so nothing new is committed: the new coordinator must answer
    # exactly what the old one acknowledged, from the replicated __consumer_offsets.
    moved = wait_for(committed, WAIT_S, "the new coordinator to answer the committed offsets")
    assert moved == {p: 100 for p in range(partitions)}, \
        f"the new coordinator lost committed offsets: {moved}"
    produce(cluster, topic, 600, partitions, start=600)
    wait_for(lambda: len(seen()) == 1200, WAIT_S, "the group to read the next 600 records")
    wait_committed(200, "every partition's committed offset at its end")
    reread = sorted((p, o) for m in members for p, o, at in m.reads if at > killed_at and o < 100)
    assert not reread, f"members read again below the committed offsets: {reread[:10]}"
    if protocol == "consumer":  # the new coordinator took the members' epochs over
        lost = [partition for m in members for at, lost in m.revoked if at > killed_at
                for partition in lost]
        assert not lost, f"members lost partitions across the failover: {lost}"
    for member in members:
        member.stop.set()
    for member in members:
        member.join(timeout=WAIT_S)
    cluster.start(coordinator)
    cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
