"""Log compaction end to end: one controller and two brokers as real processes, a compacted
topic (replication factor 2, tiny segments, a cleaner that looks every 100 ms) written by
confluent-kafka with every key many times; once the cleaners ran, both libraries read back
only the latest value per key, at its original offset, and the follower's files hold the same
(each replica compacts on its own). A keyless record is refused with INVALID_RECORD."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KafkaPythonTopicPartition

from broker.log.cleaner_core import SegmentFile, batch_records, read_batches
from harness.cluster import ProcessCluster, run_cli, wait_for
from kraft.log.segmented import list_segments

BROKERS = [2, 3]
WAIT_S = 60
TOPIC = "compacted"
KEYS = 10
ROUNDS = 20
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
    "log.cleaner.backoff.ms": "100",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    cluster = ProcessCluster(tmp_path_factory.mktemp("compaction"), 1, dict(SETTINGS))
    cluster.add_brokers(BROKERS)
    try:
        cluster.format()
        cluster.start_all()
        wait_for(lambda: cluster.leader(among={1}), WAIT_S, "an active controller")
        cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
        out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint,
                      "topics", "create", "--topic", TOPIC, "--partitions", "1",
                      "--replication-factor", "2", "--config", "cleanup.policy=compact",
                      "--config", "segment.bytes=1024", "--config",
                      "min.cleanable.dirty.ratio=0.01")
        assert out.returncode == 0, out.stderr
        yield cluster
    finally:
        cluster.stop_all()


def produce_rounds(cluster: ProcessCluster) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0})
    for round_ in range(ROUNDS):
        for key in range(KEYS):
            p.produce(TOPIC, key=f"k{key}".encode(), value=f"r{round_}".encode(), partition=0)
        assert p.flush(30) == 0
    assert p.flush(30) == 0


def read_confluent(cluster: ProcessCluster) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record up to the end of the partition."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                         "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return out
                raise KafkaException(error)
            out.append((message.offset() or 0, message.key() or b"", message.value() or b""))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {WAIT_S} s; read {len(out)}")


def early_rounds(records: Sequence[tuple[int, bytes | None, bytes]]) -> list[int]:
    """Offsets of values from the first half of the rounds, which compaction removes."""
    return [offset for offset, _, value in records if int(value[1:]) < ROUNDS // 2]


def check_compacted(records: list[tuple[int, bytes, bytes]]) -> None:
    """The latest value of every key at the offset the producer got (offsets never move),
    every record where it was written, in offset order, none of the first rounds."""
    latest = {key: (offset, value) for offset, key, value in records}
    assert latest == {f"k{key}".encode(): ((ROUNDS - 1) * KEYS + key, f"r{ROUNDS - 1}".encode())
                      for key in range(KEYS)}
    for offset, key, value in records:
        assert (key, value) == (f"k{offset % KEYS}".encode(), f"r{offset // KEYS}".encode())
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)) and len(offsets) < KEYS * ROUNDS
    assert not early_rounds(records)


def files_of(cluster: ProcessCluster, broker: int) -> list[tuple[int, bytes | None, bytes]]:
    """(offset, key, value) of the records in a broker's segment files of the partition."""
    directory = Path(cluster.root) / f"node-{broker}" / f"{TOPIC}-0"
    out: list[tuple[int, bytes | None, bytes]] = []
    for base, path in list_segments(directory):
        size = os.path.getsize(path)
        for header, blob in read_batches(SegmentFile(base, base, size, path)):
            for record in batch_records(header, blob) or ():
                out.append((record.offset, record.key, record.value or b""))
    return out


def test_a_compacted_topic_keeps_the_latest_value_per_key(cluster: ProcessCluster) -> None:
    produce_rounds(cluster)
    found: list[list[tuple[int, bytes, bytes]]] = []

    def compacted() -> bool:
        found[:] = [read_confluent(cluster)]
        return not early_rounds(found[0])

    wait_for(compacted, WAIT_S, "the cleaner to remove the first rounds")
    check_compacted(found[0])

    # kafka-python reads across the removed ranges too (the cleaners may have gone on since:
    # the same rules, not the same list).
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(),
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([KafkaPythonTopicPartition(TOPIC, 0)])
    consumer.seek(KafkaPythonTopicPartition(TOPIC, 0), 0)
    seen = []
    for message in consumer:
        seen.append((message.offset, message.key, message.value))
        if message.offset == KEYS * ROUNDS - 1:
            break
    consumer.close()
    check_compacted(seen)

    # Both replicas compact on their own: neither's files hold the first rounds any more.
    for broker in BROKERS:
        def cleaned(broker: int = broker) -> bool:
            return not early_rounds(files_of(cluster, broker))

        wait_for(cleaned, WAIT_S, f"broker {broker}'s cleaner")


def test_a_compacted_topic_refuses_keyless_records(cluster: ProcessCluster) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                  "retries": 0})
    errors: list[KafkaError | None] = []
    p.produce(TOPIC, value=b"no key", partition=0,
              on_delivery=lambda error, _message: errors.append(error))
    assert p.flush(30) == 0
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD, errors[0]
