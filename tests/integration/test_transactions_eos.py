"""Exactly once through broker failures (issue 30 item 4): a consume-transform-produce app
(tests/integration/eos_app.py, confluent-kafka, a process of its own) reads an input topic fed
at a steady rate and writes each record transformed to an output topic, its consumed offsets
in the same transactions, on 3 brokers with RF 3 and min ISR 2 everywhere (the transaction
coordinator's topic too, 3 partitions). The transaction coordinator's broker is killed with
kill -9 and restarted, then an output partition leader's broker; the app recovers as a Kafka
EOS app does (abort and rewind to the committed offsets, or a new producer). At the end a
read_committed consumer finds every input key exactly once in the output, and the records of
the aborted transactions (read_uncommitted sees them) hidden."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import ProcessCluster, kafka_cluster, wait_for

BROKERS = [2, 3, 4]
PARTITIONS = 3
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("txn-eos"), BROKERS, SETTINGS) as running:
        yield running


class Feeder(threading.Thread):
    """Input records at a steady rate (keys k00000, k00001, ...) from an idempotent acks=all
    producer, until stopped; every one must be acknowledged."""

    def __init__(self, bootstrap: str, topic: str, per_second: float) -> None:
        super().__init__(daemon=True)
        self.topic, self.interval_s = topic, 1 / per_second
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 0})
        self.sent = 0
        self.failed: list[KafkaError] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval_s):  # the feed's pace, not a synchronisation
            self.producer.produce(self.topic, key=f"k{self.sent:05d}".encode(),
                                  value=f"input {self.sent}".encode(), on_delivery=self.acked)
            self.sent += 1
            self.producer.poll(0)

    def acked(self, error: KafkaError | None, _message: object) -> None:
        if error is not None:
            self.failed.append(error)

    def finish(self) -> int:
        self.stop.set()
        self.join(10)
        assert self.producer.flush(60) == 0 and not self.failed, self.failed[:3]
        return self.sent


class AppProcess:
    """eos_app.py in a process of its own; its `committed N` lines followed from a thread."""

    def __init__(self, bootstrap: str, source: str, sink: str, txn_id: str,
                 stacks: Path) -> None:
        self.stacks = stacks
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.eos_app", bootstrap, source,
             str(PARTITIONS), sink, "eos-app", txn_id, str(stacks)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self.committed = 0
        self.lines: list[str] = []
        threading.Thread(target=self.follow, daemon=True).start()

    def follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())
            if line.startswith("committed "):
                self.committed = int(line.split()[1])

    def stuck(self, what: str) -> str:
        """What the app was doing: its last lines and, while it runs, its threads' stacks
        (SIGUSR1: faulthandler writes them)."""
        stacks = "(exited)"
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)
            wait_for(lambda: self.stacks.stat().st_size > 0, 10, "the app's stacks")
            stacks = self.stacks.read_text()
        return f"{what}; the app's last lines {self.lines[-5:]}, its stacks:\n{stacks}"

    def wait_committed(self, at_least: int, what: str) -> None:
        try:
            wait_for(lambda: self.committed >= at_least or self.process.poll() is not None,
                     60, f"the app to commit {at_least} input records {what}")
        except AssertionError as timeout:
            raise AssertionError(self.stuck(str(timeout))) from None
        assert self.process.poll() is None, self.stuck("the app exited")

    def finish(self, total: int) -> None:
        """Tell the app how many input records there are; it exits once all are committed."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{total}\n")
        self.process.stdin.flush()
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            raise AssertionError(self.stuck(f"the app did not finish {total} records")) from None
        assert code == 0, self.stuck(f"the app exited with {code}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def coordinator_of(cluster: ProcessCluster, txn_id: str,
                   capsys: pytest.CaptureFixture[str]) -> int:
    """The broker coordinating `txn_id`, as `kraft-admin transactions describe` finds it."""
    from server import admin_cli

    code = admin_cli.main(["--bootstrap-server", cluster.bootstrap_servers(), "transactions",
                           "describe", "--transactional-id", txn_id, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return int(json.loads(out)["coordinatorId"])


def full_isr(admin: AdminClient) -> bool:
    """Every partition of every topic (internal ones too) has all three replicas in sync."""
    topics = admin.list_topics(timeout=10).topics.values()
    return all(len(p.isrs) == len(BROKERS) for t in topics for p in t.partitions.values())


def restart(cluster: ProcessCluster, admin: AdminClient, broker: int) -> None:
    cluster.start(broker)
    cluster.wait_brokers_unfenced(BROKERS, 60)
    wait_for(lambda: full_isr(admin), 60, f"broker {broker} back in every ISR")


def read_all(bootstrap: str, topic: str, isolation: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record of `topic` that `isolation` shows, to the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    records: list[tuple[bytes, bytes]] = []
    at_end: set[int] = set()
    try:
        def drained() -> bool:
            for message in consumer.consume(500, timeout=0.2):
                if message.error() is None:
                    records.append((message.key(), message.value()))
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
            return len(at_end) == PARTITIONS

        wait_for(drained, 30, f"a {isolation} read of {topic} to its end", poll_s=0)
    finally:
        consumer.close()
    return records


def settled(bootstrap: str, topic: str) -> bool:
    """No transaction left open or unmarked on `topic`: its LSO is its high watermark."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-ends",
                             "isolation.level": isolation})
        try:
            ends.append([consumer.get_watermark_offsets(TopicPartition(topic, p), 10,
                                                        cached=False)[1]
                         for p in range(PARTITIONS)])
        finally:
            consumer.close()
    return ends[0] == ends[1]


def test_consume_transform_produce_is_exactly_once_through_broker_kills(
        cluster: ProcessCluster, capsys: pytest.CaptureFixture[str]) -> None:
    source, sink, txn_id = "eos-input", "eos-output", "eos-app"
    bootstrap = cluster.bootstrap_servers()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([
            NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
            for t in (source, sink)]).values():
        future.result(30)
    feeder = Feeder(bootstrap, source, per_second=80)
    feeder.start()
    app = AppProcess(bootstrap, source, sink, txn_id, cluster.root / "eos-app-stacks.txt")
    try:
        app.wait_committed(40, "before any kill")
        coordinator = coordinator_of(cluster, txn_id, capsys)
        at_kill = feeder.sent
        cluster.kill(coordinator)  # kill -9, wherever the app's transaction is
        restart(cluster, admin, coordinator)
        app.wait_committed(at_kill + 20, f"after the kill of coordinator {coordinator}")

        coordinator = coordinator_of(cluster, txn_id, capsys)
        leaders = {p.leader for p in admin.list_topics(sink, timeout=10)
                   .topics[sink].partitions.values()}
        leader = min(leaders - {coordinator} or leaders)
        at_kill = feeder.sent
        cluster.kill(leader)
        cluster.start(leader)
        app.wait_committed(at_kill + 20, f"after the kill of output leader {leader}")
        total = feeder.finish()
        app.finish(total)
        cluster.wait_brokers_unfenced(BROKERS, 60)
    finally:
        feeder.stop.set()
        app.kill()

    wait_for(lambda: settled(bootstrap, sink), 30, "every output transaction marked")
    committed = read_all(bootstrap, sink, "read_committed")
    keys = Counter(key for key, _ in committed)
    expected = {f"k{i:05d}".encode() for i in range(total)}
    assert set(keys) == expected, f"missing {sorted(expected - set(keys))[:5]}"
    assert [k for k, n in keys.items() if n > 1] == [], "an input record written twice"
    assert all(value.startswith(b"transformed input ") for _, value in committed)
    everything = read_all(bootstrap, sink, "read_uncommitted")
    aborted = len(everything) - len(committed)  # records of aborted transactions
    assert aborted > 0 and {key for key, _ in everything} == expected
    recoveries = Counter(line for line in app.lines if line.startswith(("abort", "reinit")))
    print(f"{total} input records, {aborted} output records aborted, recoveries: {recoveries}")
