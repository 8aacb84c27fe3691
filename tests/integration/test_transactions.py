"""confluent-kafka's transactional producer against a real broker process: init_transactions()
finds the coordinator (FindCoordinator key type 1, __transaction_state created on first use),
gets a producer id and epoch 0 from the coordinator (InitProducerId), and a second producer
with the same transactional.id fences the first (epoch 1); a committed and an aborted
transaction, read by a read_committed and a read_uncommitted consumer (the partition side:
WriteTxnMarkers from the coordinator, the LSO, the aborted transactions in Fetch), and a
group's offsets sent in a transaction (TxnOffsetCommit) visible once it commits, not when it
aborts; offsets_for_times with isolation.level=read_committed answers nothing at or past an
open transaction (ListOffsets bounded by the LSO); `kraft-admin transactions` (list, describe,
describe-producers, find-hanging, abort) on an initialized id and its open transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from harness.cluster import ProcessCluster, kafka_cluster

SETTINGS = {
    "internal.test.hooks.enable": "false",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("txn"), [2], SETTINGS) as running:
        yield running


def producer(cluster: ProcessCluster, txn_id: str) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers(),
                     "transactional.id": txn_id, "transaction.timeout.ms": 30000})


def test_init_transactions_and_a_second_producer_fences_the_first(
        cluster: ProcessCluster) -> None:
    topic = "txn-fenced"
    first = producer(cluster, "txn-it")
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, b"from a zombie", partition=0)
    first.flush(30)  # in the partition's log, its transaction open there
    second = producer(cluster, "txn-it")
    # Bumps the epoch: the coordinator fences the first producer and aborts its open
    # transaction (ABORT marker) before answering.
    second.init_transactions(30)
    with pytest.raises(KafkaException) as failure:
        first.commit_transaction(10)
    error = failure.value.args[0]
    assert error.fatal(), error  # librdkafka: the fenced producer cannot go on
    assert error.code() == KafkaError._FENCED, error  # PRODUCER_FENCED from EndTxn
    second.begin_transaction()
    second.produce(topic, b"from the new producer", partition=0)
    second.commit_transaction(30)
    assert read_until(cluster, topic, "read_committed", b"from the new producer") == [
        b"from the new producer"]
    assert read_until(cluster, topic, "read_uncommitted", b"from the new producer") == [
        b"from a zombie", b"from the new producer"]


def test_kafka_python_transactional_producer_and_read_committed_consumer(
        cluster: ProcessCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
    from kafka import TopicPartition as PythonTopicPartition

    topic = "txn-kafka-python"
    writer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers(),
                           transactional_id="txn-kafka-python", max_block_ms=30000)
    try:
        writer.init_transactions()
        writer.begin_transaction()
        writer.send(topic, b"python-aborted", partition=0)
        writer.flush(30)
        writer.abort_transaction()
        writer.begin_transaction()
        writer.send(topic, b"python-committed-1", partition=0)
        writer.send(topic, b"python-committed-2", partition=0)
        writer.commit_transaction()
    finally:
        writer.close(10)
    reader = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(),
                           isolation_level="read_committed", enable_auto_commit=False,
                           consumer_timeout_ms=30000)
    reader.assign([PythonTopicPartition(topic, 0)])
    reader.seek_to_beginning()
    try:
        values: list[bytes] = []
        for message in reader:  # ends after consumer_timeout_ms without a record
            values.append(message.value)
            if message.value == b"python-committed-2":
                break
    finally:
        reader.close()
    assert values == [b"python-committed-1", b"python-committed-2"]


def read_until(cluster: ProcessCluster, topic: str, isolation: str, last: bytes,
               timeout_s: float = 30) -> list[bytes]:
    """Every value of `topic` from the start, read until `last` arrives."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                         "group.id": f"reader-{isolation}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group join to wait for
    seen: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while last not in seen:
            assert time.monotonic() < deadline, f"{isolation} read only {seen}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    return seen


def test_read_committed_sees_only_committed_transactions(cluster: ProcessCluster) -> None:
    topic = "txn-events"
    writer = producer(cluster, "txn-writer")
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce(topic, b"committed-1")
    writer.produce(topic, b"committed-2")
    writer.commit_transaction(30)
    writer.begin_transaction()
    writer.produce(topic, b"aborted-1")
    writer.produce(topic, b"aborted-2")
    writer.flush(30)
    writer.abort_transaction(30)
    writer.begin_transaction()
    writer.produce(topic, b"committed-3")
    writer.commit_transaction(30)
    assert read_until(cluster, topic, "read_committed", b"committed-3") == [
        b"committed-1", b"committed-2", b"committed-3"]
    assert read_until(cluster, topic, "read_uncommitted", b"committed-3") == [
        b"committed-1", b"committed-2", b"aborted-1", b"aborted-2", b"committed-3"]


def test_offsets_for_times_read_committed_stops_at_an_open_transaction(
        cluster: ProcessCluster) -> None:
    topic = "txn-times"
    before = int(time.time() * 1000) - 60_000
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers()})
    plain.produce(topic, b"plain", partition=0, timestamp=before)  # 0
    assert plain.flush(30) == 0
    writer = producer(cluster, "txn-times")
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce(topic, b"open", partition=0, timestamp=before + 1000)  # 1: the LSO
    writer.flush(30)

    def offsets(isolation: str) -> list[int]:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                             "group.id": f"times-{isolation}", "isolation.level": isolation})
        try:  # one partition per request: a partition named twice is INVALID_REQUEST
            return [consumer.offsets_for_times([TopicPartition(topic, 0, at)], 30)[0].offset
                    for at in (before, before + 1000)]
        finally:
            consumer.close()

    # As Kafka: a record at or past the last stable offset is no answer (-1) to read_committed.
    assert offsets("read_committed") == [0, -1]
    assert offsets("read_uncommitted") == [0, 1]
    writer.commit_transaction(30)
    assert offsets("read_committed") == [0, 1]


def test_offsets_sent_in_a_transaction_count_only_when_it_commits(
        cluster: ProcessCluster) -> None:
    topic = "txn-input"
    group = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": "txn-app",
                      "enable.auto.commit": False})
    writer = producer(cluster, "txn-offsets")
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce(topic, b"output")
    writer.send_offsets_to_transaction([TopicPartition(topic, 0, 7)],
                                       group.consumer_group_metadata(), 30)
    writer.commit_transaction(30)
    writer.begin_transaction()
    writer.produce(topic, b"dropped")
    writer.send_offsets_to_transaction([TopicPartition(topic, 0, 9)],
                                       group.consumer_group_metadata(), 30)
    writer.abort_transaction(30)
    try:
        (committed,) = group.committed([TopicPartition(topic, 0)], 30)
        assert committed.offset == 7
    finally:
        group.close()


def test_kraft_admin_transactions_shows_ids_and_aborts_a_transaction(
        cluster: ProcessCluster, capsys: pytest.CaptureFixture[str]) -> None:
    from server import admin_cli

    def admin(*command: str) -> dict[str, object] | list[dict[str, object]]:
        code = admin_cli.main(["--bootstrap-server", cluster.bootstrap_servers(),
                               "transactions", *command, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        answer: dict[str, object] | list[dict[str, object]] = json.loads(out)
        return answer

    topic = "txn-tool"
    writer = producer(cluster, "txn-tool")
    writer.init_transactions(30)
    listed = {t["transactionalId"]: t for t in admin("list") if isinstance(t, dict)}
    assert listed["txn-tool"]["state"] == "Empty"
    described = admin("describe", "--transactional-id", "txn-tool")
    assert isinstance(described, dict)
    assert (described["state"], described["producerId"], described["producerEpoch"],
            described["currentTransactionStartTimeMs"]) == (
        "Empty", listed["txn-tool"]["producerId"], 0, None)
    assert described["coordinatorId"] == listed["txn-tool"]["coordinator"]
    writer.begin_transaction()
    writer.produce(topic, b"left open", partition=0)
    writer.flush(30)
    (open_txn,) = admin("describe-producers", "--topic", topic, "--partition", "0")
    start = open_txn["currentTransactionStartOffset"]
    assert (open_txn["producerId"], open_txn["producerEpoch"], start) == (
        described["producerId"], 0, 0)
    ongoing = admin("describe", "--transactional-id", "txn-tool")
    assert isinstance(ongoing, dict) and ongoing["state"] == "Ongoing"
    assert ongoing["topicPartitions"] == [{"topic": topic, "partition": 0}]
    # Its coordinator will finish it: not hanging, however old.
    assert admin("find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []
    aborted = admin("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert isinstance(aborted, dict) and aborted["aborted"] is True
    (closed,) = admin("describe-producers", "--topic", topic, "--partition", "0")
    assert closed["currentTransactionStartOffset"] is None
    writer.abort_transaction(30)  # the coordinator's own ABORT markers follow the tool's
