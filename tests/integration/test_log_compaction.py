"""Log compaction end to end: one controller and two brokers as real processes, a compacted
topic (replication factor 2, tiny segments, a cleaner that looks every 100 ms) written by
confluent-kafka with every key many times and one key deleted; once the cleaners ran, both
libraries read back only the latest record per key (the tombstone too), at its original
offset, and each replica's files hold exactly that too, up to the last offset (each replica
compacts on its own; an empty or lagging follower fails). A keyless record is refused with
INVALID_RECORD."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
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


Written = dict[int, tuple[bytes, bytes | None]]
Read = list[tuple[int, bytes, bytes | None]]


def produce_rounds(cluster: ProcessCluster) -> Written:
    """A key written then deleted (a tombstone), then every key once a round; (key, value)
    by the offset each delivery report gave."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0})
    written: Written = {}

    def delivered(error: KafkaError | None, message: Message) -> None:
        assert error is None, error
        written[message.offset() or 0] = (message.key() or b"", message.value())

    p.produce(TOPIC, key=b"gone", value=b"x", partition=0, on_delivery=delivered)
    p.produce(TOPIC, key=b"gone", value=None, partition=0, on_delivery=delivered)
    for round_ in range(ROUNDS):
        for key in range(KEYS):
            p.produce(TOPIC, key=f"k{key}".encode(), value=f"r{round_}".encode(), partition=0,
                      on_delivery=delivered)
        assert p.flush(30) == 0
    assert p.flush(30) == 0
    assert sorted(written) == list(range(2 + KEYS * ROUNDS))
    return written


def read_confluent(cluster: ProcessCluster) -> Read:
    """(offset, key, value) of every record up to the end of the partition."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(),
                         "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
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


def removable(records: Read) -> list[int]:
    """Offsets of records compaction removes: the first rounds' values and the deleted
    key's value (its tombstone stays for delete.retention.ms, a day)."""
    return [offset for offset, key, value in records
            if value is not None and (value == b"x" or int(value[1:]) < ROUNDS // 2)]


def compaction_problems(records: Read, written: Written) -> list[str]:
    """Why `records` is not the compacted log of `written`: every record must be the one
    written at its offset (offsets never move), in offset order; every key's latest record
    must be there (the tombstone too, and so the last offset: an empty or lagging copy
    fails); the removable must not."""
    problems = [f"offset {offset} holds {(key, value)}, {written.get(offset)} was written"
                for offset, key, value in records if written.get(offset) != (key, value)]
    offsets = [offset for offset, _, _ in records]
    if offsets != sorted(set(offsets)):
        problems.append("offsets out of order or repeated")
    if len(offsets) >= len(written):
        problems.append(f"{len(offsets)} records for {len(written)} written: nothing removed")
    latest = {key: offset for offset, (key, _) in sorted(written.items())}
    missing = sorted(set(latest.values()) - set(offsets))
    if missing:
        problems.append(f"the latest record of {len(missing)} key(s) missing, offsets "
                        f"{missing[:5]} (of {len(records)} records, last offset "
                        f"{offsets[-1] if offsets else None})")
    if (1, b"gone", None) not in records:
        problems.append("the tombstone at offset 1 is missing")
    if removable(records):
        problems.append(f"removable records left at {removable(records)[:5]}")
    return problems


def check_compacted(records: Read, written: Written) -> None:
    problems = compaction_problems(records, written)
    assert not problems, problems


def files_of(cluster: ProcessCluster, broker: int) -> Read:
    """(offset, key, value) of the records in a broker's segment files of the partition."""
    directory = Path(cluster.root) / f"node-{broker}" / f"{TOPIC}-0"
    out: Read = []
    for base, path in list_segments(directory):
        size = os.path.getsize(path)
        for header, blob in read_batches(SegmentFile(base, base, size, path)):
            for record in batch_records(header, blob) or ():
                out.append((record.offset, record.key or b"", record.value))
    return out


def test_a_compacted_topic_keeps_the_latest_value_per_key(cluster: ProcessCluster) -> None:
    written = produce_rounds(cluster)
    found: list[Read] = []

    def compacted() -> bool:
        found[:] = [read_confluent(cluster)]
        return not removable(found[0])

    wait_for(compacted, WAIT_S, "the cleaner to remove the first rounds")
    check_compacted(found[0], written)

    # kafka-python reads across the removed ranges too (the cleaners may have gone on since:
    # the same rules, not the same list).
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(),
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([KafkaPythonTopicPartition(TOPIC, 0)])
    consumer.seek(KafkaPythonTopicPartition(TOPIC, 0), 0)
    seen: Read = []
    for message in consumer:
        seen.append((message.offset, message.key, message.value))
        if message.offset == len(written) - 1:
            break
    consumer.close()
    check_compacted(seen, written)

    # Both replicas compact on their own: each one's files hold exactly the compacted log,
    # up to the last offset written (an empty or lagging follower fails, not only one with a
    # removable record left).
    last: dict[int, list[str]] = {}

    def cleaned(broker: int) -> bool:
        last[broker] = compaction_problems(files_of(cluster, broker), written)
        return not last[broker]

    for broker in BROKERS:
        try:
            wait_for(lambda b=broker: cleaned(b), WAIT_S,
                     f"broker {broker}'s files to hold the compacted log")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {last[broker]}") from None


def test_a_compacted_topic_refuses_keyless_records(cluster: ProcessCluster) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
                  "retries": 0})
    errors: list[KafkaError | None] = []
    p.produce(TOPIC, value=b"no key", partition=0,
              on_delivery=lambda error, _message: errors.append(error))
    assert p.flush(30) == 0
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD, errors[0]
