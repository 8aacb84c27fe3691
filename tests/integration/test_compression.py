"""Compressed batches end to end: one controller and one broker as real processes.
* confluent-kafka (librdkafka) produces with compression.type lz4, zstd and snappy to
  compacted topics: the batches land in that codec, the cleaner compacts them (keeping the
  codec) and drops a deleted key's tombstone once delete.retention.ms has passed;
* a topic with compression.type=gzip stores what a producer sent in lz4 as gzip, and both
  kafka-python (which reads gzip without extra packages) and librdkafka read it back."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KafkaPythonTopicPartition

from broker.compression import GZIP, LZ4, SNAPPY, ZSTD, batch_records
from broker.log.cleaner_core import SegmentFile, read_batches
from harness.cluster import ProcessCluster, run_cli, wait_for
from kraft.log.segmented import list_segments

BROKER = 2
WAIT_S = 60
KEYS = 8
ROUNDS = 12
CODECS = {"lz4": LZ4, "zstd": ZSTD, "snappy": SNAPPY}
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
    "log.cleaner.backoff.ms": "100",
}

Read = list[tuple[int, bytes, bytes | None]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    cluster = ProcessCluster(tmp_path_factory.mktemp("compression"), 1, dict(SETTINGS))
    cluster.add_brokers([BROKER])
    try:
        cluster.format()
        cluster.start_all()
        wait_for(lambda: cluster.leader(among={1}), WAIT_S, "an active controller")
        cluster.wait_brokers_unfenced([BROKER], WAIT_S)
        yield cluster
    finally:
        cluster.stop_all()


def create_topic(cluster: ProcessCluster, topic: str, *configs: str) -> None:
    args = [arg for config in configs for arg in ("--config", config)]
    out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint,
                  "topics", "create", "--topic", topic, "--partitions", "1",
                  "--replication-factor", "1", *args)
    assert out.returncode == 0, out.stderr


def value(round_: int, key: int) -> bytes:
    return f"r{round_}-k{key}-".encode() + b"compressible payload " * 20


def produce(cluster: ProcessCluster, topic: str, codec: str) -> dict[bytes, int]:
    """A key written then deleted, then every key once a round, in batches of many records
    (librdkafka sends a batch uncompressed when compressing does not shrink it); the offset
    of each key's latest record."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                  "enable.idempotence": True, "linger.ms": 50, "compression.type": codec})
    latest: dict[bytes, int] = {}

    def delivered(error: KafkaError | None, message: object) -> None:
        assert error is None, error

    p.produce(topic, key=b"gone", value=value(0, 0), partition=0, on_delivery=delivered)
    p.produce(topic, key=b"gone", value=None, partition=0, on_delivery=delivered)
    for round_ in range(ROUNDS):
        for key in range(KEYS):
            p.produce(topic, key=b"k%d" % key, value=value(round_, key), partition=0,
                      on_delivery=delivered)
        assert p.flush(30) == 0
    for key in range(KEYS):
        latest[b"k%d" % key] = 2 + (ROUNDS - 1) * KEYS + key
    return latest


def read_confluent(cluster: ProcessCluster, topic: str) -> Read:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                         "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: Read = []
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
            out.append((message.offset() or 0, message.key() or b"", message.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {WAIT_S} s; read {len(out)}")


def codecs_on_disk(cluster: ProcessCluster, topic: str) -> list[int]:
    """The codec of every batch holding records in the broker's segment files (read with
    broker/compression.py, not the cleaner's reader)."""
    directory = Path(cluster.root) / f"node-{BROKER}" / f"{topic}-0"
    out = []
    for base, path in list_segments(directory):
        for header, blob in read_batches(SegmentFile(base, base, os.path.getsize(path), path)):
            if batch_records(header, blob):
                out.append(header.compression)
    return out


def written_at(offset: int) -> tuple[bytes, bytes | None]:
    """What produce() wrote at `offset` (key, value)."""
    if offset < 2:
        return b"gone", value(0, 0) if offset == 0 else None
    round_, key = divmod(offset - 2, KEYS)
    return b"k%d" % key, value(round_, key)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_compacted_topic_written_compressed_is_compacted_and_loses_its_tombstones(
        cluster: ProcessCluster, codec: str) -> None:
    topic = f"compacted-{codec}"
    create_topic(cluster, topic, "cleanup.policy=compact", "segment.bytes=1024",
                 "min.cleanable.dirty.ratio=0.01", "delete.retention.ms=1000")
    latest = produce(cluster, topic, codec)
    assert CODECS[codec] in codecs_on_disk(cluster, topic)
    found: list[Read] = []

    def compacted() -> bool:
        found[:] = [read_confluent(cluster, topic)]
        keys = {key for _, key, _ in found[0]}
        # The deleted key's value goes in the first pass, its tombstone one pass after the
        # first one gave it its delete horizon (1 s).
        return b"gone" not in keys and len(found[0]) < 2 + ROUNDS * KEYS

    wait_for(compacted, WAIT_S, f"the {codec} topic compacted without its tombstone")
    records = found[0]
    assert [offset for offset, _, _ in records] == sorted({o for o, _, _ in records})
    assert all(written_at(offset) == (key, data) for offset, key, data in records)
    assert {key: offset for offset, key, _ in records} == latest  # every key's latest stays
    # The cleaner rewrote what it kept in the codec it was written in.
    assert set(codecs_on_disk(cluster, topic)) <= {0, CODECS[codec]}
    assert CODECS[codec] in codecs_on_disk(cluster, topic)


def test_a_topics_compression_type_recompresses_what_producers_send(
        cluster: ProcessCluster) -> None:
    topic = "stored-gzip"
    create_topic(cluster, topic, "compression.type=gzip")
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                  "linger.ms": 50, "compression.type": "lz4"})
    for i in range(200):
        p.produce(topic, key=b"k%d" % i, value=value(i, i), partition=0)
    assert p.flush(30) == 0
    assert set(codecs_on_disk(cluster, topic)) == {GZIP}
    expected = [(i, b"k%d" % i, value(i, i)) for i in range(200)]
    assert read_confluent(cluster, topic) == expected
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(),
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([KafkaPythonTopicPartition(topic, 0)])
    consumer.seek(KafkaPythonTopicPartition(topic, 0), 0)
    seen = []
    for message in consumer:
        seen.append((message.offset, message.key, message.value))
        if message.offset == 199:
            break
    consumer.close()
    assert seen == expected
