"""KIP-848's consumer group protocol with librdkafka's `group.protocol=consumer` (confluent-kafka
2.16) against a real controller and broker: two members split a topic's partitions, a third
joins and only the partitions that move to it are revoked from the others (incremental, no
stop-the-world), a member that closes leaves and its partitions go back, and across all of it
every record is read exactly once (each member commits what it read before giving a partition
up). The coordinator's server-side assignor decides; the members only report. A member in
another process killed with kill -9 is fenced when its session (short here) runs out and its
partitions go to the survivors, which read on from its commits. `kraft-admin groups` lists
such a group as Consumer beside a classic one and describes its members, assignments and epochs
(ConsumerGroupDescribe)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import ProcessCluster, kafka_cluster, wait_for
from server import admin_cli

WAIT_S = 60
TOPIC, PARTITIONS = "kip848", 6
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",  # the classic group of the tool's test
    # A released partition reaches its next owner on that member's next heartbeat.
    "group.consumer.heartbeat.interval.ms": "250",
    # A killed member's partitions move after this. Kafka validates only >= 1 and the
    # heartbeat interval below it (with its group.consumer.min.* keys lowered); 12 heartbeats
    # leave the living members room on a loaded machine.
    "group.consumer.session.timeout.ms": "3000",
}
SESSION_S = 3.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("consumer-protocol"), [2], SETTINGS,
                       WAIT_S) as cluster:
        yield cluster


class Member:
    """A consumer-protocol consumer that remembers what it read, what it was given and what
    it gave up, and commits a partition's position before giving it up."""

    def __init__(self, cluster: ProcessCluster, name: str, group: str = "kip848-group",
                 topic: str = TOPIC) -> None:
        self.name = name
        self.read: list[tuple[int, int]] = []
        self.owned: set[int] = set()
        self.revoked: list[int] = []
        self.commit_errors: list[int] = []  # KafkaError codes of commits refused on revoke
        self.consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
            "group.protocol": "consumer", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "client.id": name})
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        positions = [tp for tp in consumer.position(partitions) if tp.offset >= 0]
        if positions:
            try:
                consumer.commit(offsets=positions, asynchronous=False)
            except KafkaException as exc:
                # A member fenced meanwhile (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) cannot
                # commit; raised out of a callback run by close(), it aborted the process
                # (the xdist worker, on a loaded clean-clone run). Kept for the test to see.
                self.commit_errors.append(exc.args[0].code())
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


def produce(cluster: ProcessCluster, count: int, topic: str = TOPIC) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
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


def settled(owned: list[set[int]]) -> bool:
    """The partitions are split among exactly these owners, none twice, as evenly as the
    uniform assignor's target. An even split is the target itself: while a member still holds
    a partition it must give up, the member it goes to holds fewer. (Exact cover alone is not
    enough: with a={0,1,2} still to release 2, b={3,4} and the new member given 5 first, every
    partition is owned once, and a reads what 2 holds before it lets go.)"""
    flat = sorted(p for partitions in owned for p in partitions)
    sizes = [len(partitions) for partitions in owned]
    return flat == list(range(PARTITIONS)) and max(sizes) - min(sizes) <= 1 and min(sizes) > 0


def split(members: list[Member]) -> bool:
    """The members own the uniform assignor's target: `settled`."""
    return settled([m.owned for m in members])


def create_topic(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=WAIT_S)
    wait_for(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
             == PARTITIONS, WAIT_S, f"the topic {topic}")


def test_members_split_join_incrementally_and_leave(cluster: ProcessCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    create_topic(admin, TOPIC)
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


# A member in its own process, to be killed with SIGKILL: it commits each record synchronously
# before it reports it ("R partition offset"), and reports what it owns after every change
# ("O p,p,..."), so once the test has seen a record reported, the member's commit covers it.
WORKER = """
import sys
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1:4]
owned = set()
def report_owned():
    print("O " + ",".join(str(p) for p in sorted(owned)), flush=True)
def assigned(consumer, partitions):
    owned.update(tp.partition for tp in partitions)
    report_owned()
def revoked(consumer, partitions):
    owned.difference_update(tp.partition for tp in partitions)
    report_owned()
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "client.id": "doomed"})
consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
while True:
    message = consumer.poll(0.05)
    if message is None or message.error() is not None:
        continue
    consumer.commit(message=message, asynchronous=False)
    print("R %d %d" % (message.partition(), message.offset()), flush=True)
"""


class Worker:
    """The worker process and what it has reported."""

    def __init__(self, cluster: ProcessCluster, group: str, topic: str) -> None:
        self.owned: set[int] = set()
        self.read: list[tuple[int, int]] = []
        self.stderr = cluster.root / "kip848-worker.err"  # a file: a full pipe would block it
        with self.stderr.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-c", WORKER, cluster.bootstrap_servers(), group, topic],
                stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "O":
                self.owned = {int(p) for p in rest.split(",") if p}
            elif kind == "R":
                partition, offset = rest.split()
                self.read.append((int(partition), int(offset)))

    def describe(self) -> str:
        state = "running" if self.process.poll() is None else f"exited {self.process.poll()}"
        return f"the worker {state}, owns {sorted(self.owned)}: {self.stderr.read_text()[-500:]}"

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.reader.join(timeout=10)


def test_a_member_killed_with_sigkill_is_fenced_after_its_session_and_replaced(
        cluster: ProcessCluster) -> None:
    topic, group = "kip848-kill", "kip848-kill-group"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    create_topic(admin, topic)
    worker = Worker(cluster, group, topic)
    try:
        a, b = Member(cluster, "a", group, topic), Member(cluster, "b", group, topic)
        survivors = [a, b]
        total = lambda: len(worker.read) + sum(len(m.read) for m in survivors)  # noqa: E731

        poll_until(survivors, lambda: settled([worker.owned, a.owned, b.owned]),
                   "a, b and the worker to split")
        produce(cluster, 120, topic)
        poll_until(survivors, lambda: total() >= 120, "the 120 records read and committed")
        doomed = set(worker.owned)
        assert doomed and {p for p, _ in worker.read} == doomed, "the worker read its own"

        worker.kill()  # mid-session: no LeaveGroup, the coordinator must time it out
        killed = time.monotonic()
        produce(cluster, 120, topic)
        poll_until(survivors, lambda: split(survivors), "the worker's partitions to move")
        moved = time.monotonic() - killed
        poll_until(survivors, lambda: total() >= 240, "the 240 records read")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {worker.describe()}") from None
    finally:
        worker.kill()
    # Its last heartbeat came at most one interval before the kill: not fenced any earlier.
    assert moved >= SESSION_S - 0.25, f"the partitions moved {moved:.2f} s after the kill"
    assert doomed <= a.owned | b.owned
    reads = worker.read + a.read + b.read
    assert len(reads) == len(set(reads)) == 240, "every record read exactly once"
    taken_over = [(p, o) for p, o in a.read + b.read if p in doomed]
    assert len(taken_over) == 20 * len(doomed) and min(o for _, o in taken_over) == 20, \
        "the survivors read the worker's partitions from its commits on"
    for m in survivors:
        m.consumer.close()


def groups_tool(cluster: ProcessCluster, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = admin_cli.main(["--bootstrap-server", cluster.bootstrap_servers(), "groups", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_the_groups_tool_describes_a_consumer_protocol_group_beside_a_classic_one(
        cluster: ProcessCluster, capsys: pytest.CaptureFixture[str]) -> None:
    topic = "kip848-tool"
    create_topic(AdminClient({"bootstrap.servers": cluster.bootstrap_servers()}), topic)
    produce(cluster, 12, topic)
    member = Member(cluster, "tooled", "kip848-tool-group", topic)
    classic = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                        "group.id": "kip848-tool-classic", "auto.offset.reset": "earliest",
                        "enable.auto.commit": False})
    classic.subscribe([topic])
    try:
        poll_until([member], lambda: len(member.owned) == PARTITIONS and member.read,
                   "the consumer-protocol member to own the topic and read")
        member.consumer.commit(asynchronous=False)
        wait_for(lambda: classic.poll(0.1) is not None and classic.assignment(), WAIT_S,
                 "the classic consumer's assignment")
        listed = {g["group"]: g for g in json.loads(
            groups_tool(cluster, capsys, "list", "--type", "--state", "--json"))}
        assert listed["kip848-tool-group"]["type"] == "consumer"
        assert listed["kip848-tool-classic"]["type"] == "classic"
        table = groups_tool(cluster, capsys, "list", "--type").splitlines()
        assert any(line.split()[:2] == ["kip848-tool-group", "Consumer"] for line in table)

        (group,) = json.loads(groups_tool(cluster, capsys, "describe", "--group",
                                          "kip848-tool-group", "--json"))
        assert (group["type"], group["state"], group["assignmentStrategy"]) == \
            ("consumer", "Stable", "uniform")
        (described,) = group["members"]
        everything = [{"topic": topic, "partition": p} for p in range(PARTITIONS)]
        assert described["clientId"] == "tooled" and described["assignment"] == everything
        assert described["targetAssignment"] == everything
        assert described["memberEpoch"] == group["groupEpoch"] == group["targetAssignmentEpoch"]
        assert {o["consumerId"] for o in group["offsets"]} == {described["consumerId"]}
        assert any(o["currentOffset"] is not None for o in group["offsets"])
        members = groups_tool(cluster, capsys, "describe", "--group", "kip848-tool-group",
                              "--members", "--verbose")
        assert members.split()[4:9] == ["#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT",
                                         "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        state = groups_tool(cluster, capsys, "describe", "--group", "kip848-tool-group",
                            "--state", "--verbose").split()
        assert state[:9] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                             "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS",
                             "kip848-tool-group"]

        # A classic group: ConsumerGroupDescribe says GROUP_ID_NOT_FOUND, DescribeGroups tells.
        (old,) = json.loads(groups_tool(cluster, capsys, "describe", "--group",
                                        "kip848-tool-classic", "--json"))
        assert (old["type"], old["state"], old["groupEpoch"]) == ("classic", "Stable", None)
        assert len(old["members"][0]["assignment"]) == PARTITIONS
    finally:
        member.consumer.close()
        classic.close()
