"""The data plane end to end, with clients this project did not write: three controllers and
three brokers as real processes; confluent-kafka (librdkafka) and kafka-python produce and
consume over the brokers' Kafka listeners; partitions replicate, ISRs follow replica lag, a
partition leader is killed with -9 in the middle of an acks=all stream."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.cluster import ProcessCluster, run_cli, wait_for

CONTROLLERS = {1, 2, 3}
BROKERS = [4, 5, 6]
WAIT_S = 60
TIMINGS = {
    "internal_test_hooks_enable": "false",
    "broker_session_timeout_ms": "1500",
    "broker_heartbeat_interval_ms": "150",
    "replica_lag_time_max_ms": "2000",
}


def admin(cluster: ProcessCluster, *args: str) -> str:
    out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def describe(cluster: ProcessCluster, topic: str) -> dict:  # type: ignore[type-arg]
    out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint,
                  "topics", "describe", "--topic", topic, "--json")
    return json.loads(out.stdout) if out.returncode == 0 else {}


def partitions_of(cluster: ProcessCluster, topic: str) -> list[dict]:  # type: ignore[type-arg]
    found = describe(cluster, topic)
    if isinstance(found, list):
        found = found[0] if found else {}
    return list(found.get("partitions", []))


@pytest.fixture
def cluster(make_cluster) -> Iterator[ProcessCluster]:  # type: ignore[no-untyped-def]
    cluster = make_cluster(**TIMINGS)
    cluster.add_brokers(BROKERS)
    cluster.format()
    cluster.start_all()
    wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "an active controller")
    cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
    yield cluster


def create_topic(cluster: ProcessCluster, topic: str, partitions: int, rf: int,
                 *configs: str) -> None:
    args = ["topics", "create", "--topic", topic, "--partitions", str(partitions),
            "--replication-factor", str(rf)]
    for config in configs:
        args += ["--config", config]
    admin(cluster, *args)

    def led() -> bool:
        parts = partitions_of(cluster, topic)
        return len(parts) == partitions and all(p["leader"] >= 0 for p in parts)

    wait_for(led, WAIT_S, f"{topic} to have leaders")


def producer(cluster: ProcessCluster, **settings: object) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers(), "linger.ms": 5,
                     **settings})


def consume_all(cluster: ProcessCluster, topic: str, partition: int, until: int,
                timeout_s: float = WAIT_S) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of one partition below `until`, via manual assign."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                         "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while (not out or out[-1][0] < until - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                continue
            out.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return out


def test_produce_and_consume_with_confluent_kafka_at_every_acks(cluster) -> None:
    create_topic(cluster, "orders", 3, 3)
    for acks in ("0", "1", "all"):
        p = producer(cluster, acks=acks)
        for i in range(300):
            p.produce("orders", value=f"{acks}-{i}".encode(), partition=i % 3)
        assert p.flush(30) == 0
    # Every partition holds its 300 records (acks=0 could in theory drop; on loopback it must
    # not) in one order on every replica: read them back from the leader.
    for partition in range(3):
        records = consume_all(cluster, "orders", partition, 300)
        values = [v.decode() for _, v in records]
        assert [o for o, _ in records] == list(range(300))
        for acks in ("0", "1", "all"):
            assert [v for v in values if v.startswith(acks + "-")] == \
                [f"{acks}-{i}" for i in range(partition, 300, 3)]


def test_kafka_python_idempotent_producer_and_consumer(cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    create_topic(cluster, "events", 1, 3)
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers(), acks="all")
    futures = [p.send("events", f"e{i}".encode()) for i in range(200)]
    offsets = [f.get(timeout=30).offset for f in futures]
    p.close()
    assert offsets == list(range(200))
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), enable_auto_commit=False,
                      consumer_timeout_ms=10000)
    c.assign([KTopicPartition("events", 0)])
    c.seek_to_beginning()
    got = []
    for message in c:
        got.append(message.value)
        if len(got) == 200:
            break
    c.close()
    assert got == [f"e{i}".encode() for i in range(200)]


def test_metadata_lists_brokers_topics_and_isrs(cluster) -> None:
    create_topic(cluster, "listed", 2, 3)
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()}).list_topics(
        timeout=10)
    assert sorted(metadata.brokers) == BROKERS
    topic = metadata.topics["listed"]
    assert sorted(topic.partitions) == [0, 1]
    for partition in topic.partitions.values():
        assert sorted(partition.replicas) == BROKERS
        assert partition.leader in BROKERS


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt install kcat)")
def test_kcat_lists_produces_and_consumes(cluster) -> None:
    """kcat (librdkafka 2.0 with its own old protocol versions: Metadata v4, Produce v7,
    Fetch v11) as the README shows it."""
    create_topic(cluster, "kcat", 1, 3)
    broker = cluster.nodes[BROKERS[0]].kafka_endpoint
    listing = subprocess.run(["kcat", "-L", "-b", broker], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    assert "3 brokers:" in listing and 'topic "kcat" with 1 partitions:' in listing
    subprocess.run(["kcat", "-P", "-b", broker, "-t", "kcat"], input="hello\nworld\n",
                   text=True, timeout=30, check=True)
    out = subprocess.run(["kcat", "-C", "-b", broker, "-t", "kcat", "-o", "beginning", "-e"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert out == "hello\nworld\n"


def test_min_insync_replicas_refuses_acks_all_when_the_isr_is_too_small(cluster) -> None:
    create_topic(cluster, "guarded", 1, 3, "min.insync.replicas=3")
    leader = partitions_of(cluster, "guarded")[0]["leader"]
    follower = next(b for b in BROKERS if b != leader)
    p = producer(cluster, acks="all", **{"message.timeout.ms": 20000})
    p.produce("guarded", value=b"before")
    assert p.flush(20) == 0
    cluster.kill(follower)
    wait_for(lambda: follower not in partitions_of(cluster, "guarded")[0]["isr"], WAIT_S,
             "the killed follower to leave the ISR")
    errors: list[KafkaError] = []
    p2 = producer(cluster, acks="all", retries=0, **{"message.timeout.ms": 5000})
    p2.produce("guarded", value=b"refused", on_delivery=lambda err, msg: errors.append(err))
    p2.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors[0]


class AcksAllStream:
    """An idempotent acks=all producer writing 0, 1, 2, ... to one partition in a thread,
    recording what was acknowledged at which offset."""

    def __init__(self, cluster: ProcessCluster, topic: str) -> None:
        self.topic = topic
        self.acked: list[int] = []
        self.acked_at: dict[int, int] = {}  # value -> the offset its delivery report gave
        self.failed: list[KafkaError] = []
        self._stop = threading.Event()
        self._producer = producer(cluster, acks="all", **{"enable.idempotence": True,
                                                          "message.timeout.ms": 60000})
        self._thread = threading.Thread(target=self._produce)
        self._thread.start()

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        if err is None:
            value = int(msg.value())  # type: ignore[attr-defined]
            self.acked.append(value)
            self.acked_at[value] = msg.offset()  # type: ignore[attr-defined]
        else:
            self.failed.append(err)

    def _produce(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, value=str(i).encode(),
                                   on_delivery=self._delivered)
            self._producer.poll(0)
            i += 1
            if i % 50 == 0:
                self._producer.poll(0.01)  # paces the stream (about 5,000 records/s at most)
        self._producer.flush(60)

    def wait_acked(self, more: int, what: str) -> None:
        before = len(self.acked)
        wait_for(lambda: len(self.acked) > before + more, WAIT_S, what)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def check_read_back(self, cluster: ProcessCluster) -> None:
        """Every acknowledged record read back exactly once, at its offset, without gaps."""
        assert not self.failed, self.failed[:3]
        records = consume_all(cluster, self.topic, 0, max(self.acked) + 1)
        values = [int(v) for _, v in records]
        assert [o for o, _ in records] == list(range(len(records)))  # no gaps
        assert len(values) == len(set(values)), "a record was written twice"
        assert set(self.acked) <= set(values), "an acknowledged record was lost"
        read_at = {int(v): o for o, v in records}
        moved = {v: (o, read_at[v]) for v, o in self.acked_at.items() if read_at[v] != o}
        assert not moved, f"acknowledged records read back elsewhere: {list(moved.items())[:3]}"


def test_kill_9_of_the_partition_leader_loses_no_acknowledged_record(cluster) -> None:
    create_topic(cluster, "stream", 1, 3, "min.insync.replicas=2")
    leader = partitions_of(cluster, "stream")[0]["leader"]
    stream = AcksAllStream(cluster, "stream")
    stream.wait_acked(500, "acknowledged records before the kill")
    cluster.signal(leader, signal.SIGKILL)
    cluster.wait_exit(leader, 10)
    stream.wait_acked(500, "acknowledged records on the new leader")
    stream.stop()
    assert partitions_of(cluster, "stream")[0]["leader"] not in (leader, -1)
    stream.check_read_back(cluster)


def test_a_full_disk_stops_the_leaders_broker_and_loses_no_acknowledged_record(
        make_cluster) -> None:  # type: ignore[no-untyped-def]
    """Kafka's log-dir failure: a partition leader's disk fills up (the chaos tool's
    `disk-full` fault file: every partition log write fails with ENOSPC), the broker takes
    the dir offline and stops with one clear line, the controller moves the leadership, and
    the acks=all stream goes on with nothing acknowledged lost; once the disk has room the
    broker starts again, recovers its logs and rejoins the ISR."""
    from harness.cluster import add_fault_dirs

    cluster = make_cluster(**TIMINGS)
    cluster.add_brokers(BROKERS)
    faults = add_fault_dirs(cluster)
    cluster.format()
    cluster.start_all()
    wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "an active controller")
    cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
    create_topic(cluster, "full", 1, 3, "min.insync.replicas=2")
    leader = partitions_of(cluster, "full")[0]["leader"]
    stream = AcksAllStream(cluster, "full")
    stream.wait_acked(500, "acknowledged records before the disk fills")
    (faults[leader] / "disk-full").write_text("")
    assert cluster.wait_exit(leader, WAIT_S) == 3
    assert "log directory" in cluster.logs(leader)
    assert "the broker stops so that its leaderships move" in cluster.logs(leader)
    stream.wait_acked(500, "acknowledged records on the new leader")
    assert partitions_of(cluster, "full")[0]["leader"] not in (leader, -1)
    (faults[leader] / "disk-full").unlink()
    cluster.start(leader)
    wait_for(lambda: leader in partitions_of(cluster, "full")[0]["isr"], WAIT_S,
             "the restarted broker back in the ISR")
    stream.stop()
    stream.check_read_back(cluster)


def test_isr_follows_replica_lag_not_liveness(make_cluster) -> None:  # type: ignore[no-untyped-def]
    """A follower that is alive (registered, unfenced) but stops fetching leaves the ISR after
    replica.lag.time.max.ms, and comes back once it has caught up."""
    cluster = make_cluster(internal_test_hooks_enable="false", broker_session_timeout_ms="30000",
                           broker_heartbeat_interval_ms="500", replica_lag_time_max_ms="1500")
    cluster.add_brokers(BROKERS)
    cluster.format()
    cluster.start_all()
    wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "an active controller")
    cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
    create_topic(cluster, "lagging", 1, 3)
    partition = partitions_of(cluster, "lagging")[0]
    wait_for(lambda: len(partitions_of(cluster, "lagging")[0]["isr"]) == 3, WAIT_S, "a full ISR")
    follower = next(b for b in partition["replicas"] if b != partition["leader"])
    cluster.signal(follower, signal.SIGSTOP)  # alive to the kernel, silent to everyone
    try:
        p = producer(cluster, acks="1")
        for i in range(100):
            p.produce("lagging", value=f"{i}".encode())
        assert p.flush(20) == 0
        wait_for(lambda: follower not in partitions_of(cluster, "lagging")[0]["isr"], WAIT_S,
                 "the stopped follower to leave the ISR by lag")
        out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint,
                      "brokers", "list", "--json")
        assert not next(b for b in json.loads(out.stdout) if b["id"] == follower)["fenced"]
    finally:
        cluster.signal(follower, signal.SIGCONT)
    wait_for(lambda: follower in partitions_of(cluster, "lagging")[0]["isr"], WAIT_S,
             "the follower back in the ISR once caught up")
    assert len(consume_all(cluster, "lagging", 0, 100)) == 100


def _metric(cluster: ProcessCluster, node_id: int, name: str) -> float:
    import urllib.request
    text = urllib.request.urlopen(
        f"http://127.0.0.1:{cluster.nodes[node_id].metrics_port}/metrics", timeout=5).read()
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the metrics of node {node_id}")


def unclean_election(cluster: ProcessCluster) -> tuple[int, int]:
    """Scenario 9 up to the election, on `fragile-0` (RF 2): 100 records on both replicas, the
    ISR shrinks to the leader, which takes 50 more alone and dies; the out-of-sync replica is
    elected uncleanly and takes 10. Returns (the old leader, still down; the new leader)."""
    create_topic(cluster, "fragile", 1, 2, "unclean.leader.election.enable=true",
                 "min.insync.replicas=1")
    # (The brokers checkpoint HWs every 5 s here; a wait below reads the file.)
    first = partitions_of(cluster, "fragile")[0]
    old_leader = first["leader"]
    survivor = next(b for b in first["replicas"] if b != old_leader)
    wait_for(lambda: len(partitions_of(cluster, "fragile")[0]["isr"]) == 2, WAIT_S, "ISR of 2")
    p = producer(cluster, acks="all")
    for i in range(100):
        p.produce("fragile", value=f"shared-{i}".encode())
    assert p.flush(30) == 0
    wait_for(lambda: len(partitions_of(cluster, "fragile")[0]["isr"]) == 2, WAIT_S, "ISR of 2")
    cluster.kill(survivor)
    wait_for(lambda: partitions_of(cluster, "fragile")[0]["isr"] == [old_leader], WAIT_S,
             "the ISR to shrink to the leader")
    for i in range(50):
        p.produce("fragile", value=f"alone-{i}".encode())
    assert p.flush(30) == 0  # acknowledged: min.insync.replicas=1
    # The old leader's HW (150) is on its disk before it dies, so on its return it knows the
    # records it will cut were committed.
    checkpoint = cluster.root / f"node-{old_leader}" / "replication-offset-checkpoint"
    wait_for(lambda: checkpoint.exists() and "fragile 0 150" in checkpoint.read_text(), WAIT_S,
             "the old leader's HW checkpoint to reach 150")
    cluster.kill(old_leader)
    cluster.start(survivor)
    wait_for(lambda: partitions_of(cluster, "fragile")[0]["leader"] == survivor, WAIT_S,
             "the unclean election of the out-of-sync replica")
    p2 = producer(cluster, acks="all")
    for i in range(10):
        p2.produce("fragile", value=f"after-{i}".encode())
    assert p2.flush(30) == 0
    return old_leader, survivor


def test_unclean_election_loses_exactly_the_records_the_old_leader_alone_held(cluster) -> None:
    """Scenario 9: the ISR shrinks to the leader, which takes 50 more records alone and dies;
    the out-of-sync replica is elected uncleanly; when the old leader returns it truncates to
    the new leader's log, and the 50 committed records it cut are counted and logged."""
    old_leader, _ = unclean_election(cluster)
    cluster.start(old_leader)
    wait_for(lambda: old_leader in partitions_of(cluster, "fragile")[0]["isr"], WAIT_S,
             "the old leader to truncate, catch up and rejoin the ISR")
    values = [v.decode() for _, v in consume_all(cluster, "fragile", 0, 110)]
    assert values == [f"shared-{i}" for i in range(100)] + [f"after-{i}" for i in range(10)]
    assert _metric(cluster, old_leader, "kraft_broker_truncated_committed_records_total") == 50
    assert _metric(cluster, old_leader, "kraft_broker_truncated_records_total") == 50
    # It loaded its log at the restart and fetched the new leader's records as a follower.
    assert _metric(cluster, old_leader, "kraft_broker_log_recovery_loaded_logs") >= 1
    assert _metric(cluster, old_leader, "kraft_broker_replication_bytes_in_total") > 0
    assert "LOST 50 committed record(s) of fragile-0: truncated to offset 100" in \
        cluster.logs(old_leader)


def test_reassignment_moves_the_data_to_a_new_replica_before_the_old_one_goes(cluster,
                                                                              tmp_path) -> None:
    create_topic(cluster, "moving", 1, 2)
    before = partitions_of(cluster, "moving")[0]
    old = sorted(before["replicas"])
    new_replica = next(b for b in BROKERS if b not in old)
    kept = old[0]
    p = producer(cluster, acks="all")
    for i in range(200):
        p.produce("moving", value=f"m{i}".encode())
    assert p.flush(30) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [kept, new_replica]}]}))
    admin(cluster, "reassign", "execute", "--reassignment-json-file", str(plan))

    def done() -> bool:
        part = partitions_of(cluster, "moving")[0]
        return sorted(part["replicas"]) == sorted([kept, new_replica]) \
            and sorted(part["isr"]) == sorted([kept, new_replica])

    wait_for(done, WAIT_S, "the reassignment to complete with the new replica in the ISR")
    gone = next(b for b in old if b != kept)
    wait_for(lambda: not (cluster.root / f"node-{gone}" / "moving-0").exists(), WAIT_S,
             "the removed replica's log to be deleted")
    # The new replica holds everything: it serves alone once the kept one is gone.
    cluster.kill(kept)
    wait_for(lambda: partitions_of(cluster, "moving")[0]["leader"] == new_replica, WAIT_S,
             "the new replica to lead")
    assert [v for _, v in consume_all(cluster, "moving", 0, 200)] == \
        [f"m{i}".encode() for i in range(200)]


def test_a_partitioned_follower_leaves_the_isr_and_resumes_without_truncation(
        make_cluster) -> None:  # type: ignore[no-untyped-def]
    """Scenario 8, through the chaos tool's fault files: replication between the leader and
    one follower is cut both ways (the follower stays registered and unfenced), so it leaves
    the ISR by lag; after healing it resumes from its log end and rejoins, truncating
    nothing."""
    from harness.cluster import add_fault_dirs

    cluster = make_cluster(internal_test_hooks_enable="false", broker_session_timeout_ms="30000",
                           broker_heartbeat_interval_ms="500", replica_lag_time_max_ms="1500")
    cluster.add_brokers(BROKERS)
    faults = add_fault_dirs(cluster)
    cluster.format()
    cluster.start_all()
    wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "an active controller")
    cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
    create_topic(cluster, "cut", 1, 3)
    wait_for(lambda: len(partitions_of(cluster, "cut")[0]["isr"]) == 3, WAIT_S, "a full ISR")
    part = partitions_of(cluster, "cut")[0]
    leader = part["leader"]
    follower = next(b for b in part["replicas"] if b != leader)
    p = producer(cluster, acks="1")
    for i in range(50):
        p.produce("cut", value=f"before-{i}".encode())
    assert p.flush(20) == 0
    (faults[leader] / "blocked").write_text(str(follower))
    (faults[follower] / "blocked").write_text(str(leader))
    for node, other in ((leader, follower), (follower, leader)):
        wait_for(lambda n=node, o=other: f"no replication to or from [{o}]" in cluster.logs(n),
                 WAIT_S, f"broker {node} to apply the partition")
    for i in range(50):
        p.produce("cut", value=f"during-{i}".encode())
    assert p.flush(20) == 0
    wait_for(lambda: follower not in partitions_of(cluster, "cut")[0]["isr"], WAIT_S,
             "the cut-off follower to leave the ISR by lag")
    (faults[leader] / "blocked").write_text("")
    (faults[follower] / "blocked").write_text("")
    wait_for(lambda: follower in partitions_of(cluster, "cut")[0]["isr"], WAIT_S,
             "the follower back in the ISR after healing")
    assert "truncated cut-0" not in cluster.logs(follower)
    assert len(consume_all(cluster, "cut", 0, 100)) == 100
