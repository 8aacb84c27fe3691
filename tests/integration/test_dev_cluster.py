"""The pytest plugin's `kafka_cluster` fixture as a project using it would: a one-node cluster
per test, a shared three-broker one with a broker killed under an acks=all producer and a
follower paused out of the ISR, and the cluster gone with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from harness.cluster import wait_for
from server.dev import cluster as dev_cluster
from server.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(180)
# The two three-broker tests share one cluster (same shape); a paused follower leaves the ISR
# after 1.5 s behind instead of the dev default's 3 s.
SHARED = {"brokers": 3, "scope": "session", "overrides": {"replica.lag.time.max.ms": "1500"}}


def alive(pid: int | str) -> bool:
    """A process that has not exited (a zombie nobody reaped yet counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 30) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_one_node_per_test_takes_an_acks_all_write(kafka_cluster: DevCluster) -> None:
    assert kafka_cluster.broker_ids == [1]
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    errors: list[KafkaError | None] = []
    for i in range(10):  # the topic is created on first use
        producer.produce("first-use", str(i).encode(), on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0 and errors == [None] * 10
    assert kafka_cluster.leader_of("first-use", 0) == 1
    consumed = consume_all(kafka_cluster.bootstrap_servers, "first-use", 10)
    assert consumed == [str(i).encode() for i in range(10)]  # a group: __consumer_offsets too


@pytest.mark.kafka_cluster(**SHARED)
def test_a_killed_leader_loses_no_acknowledged_write(kafka_cluster: DevCluster) -> None:
    kafka_cluster.create_topic("kill", partitions=1)
    assert kafka_cluster.isr_of("kill", 0) == [1, 2, 3]
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked: list[bytes] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is None:
            acked.append(message.value())  # type: ignore[attr-defined]

    leader = kafka_cluster.leader_of("kill", 0)
    assert leader is not None
    sent = 0
    killed_at = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (killed_at is None or len(acked) < killed_at + 200):
        producer.produce("kill", str(sent).encode(), on_delivery=delivered)
        sent += 1
        producer.poll(0.001)
        if killed_at is None and len(acked) >= 200:
            kafka_cluster.kill_broker(leader)  # with records in flight
            killed_at = len(acked)
    producer.flush(30)
    assert killed_at is not None and len(acked) >= killed_at + 200
    assert kafka_cluster.wait_leader("kill", 0, not_on=leader) != leader
    assert len(kafka_cluster.wait_isr("kill", 0, 2)) == 2
    consumed = consume_all(kafka_cluster.bootstrap_servers, "kill", len(acked))
    assert set(acked) <= set(consumed)  # nothing acknowledged was lost
    assert len(consumed) == len(set(consumed))  # idempotent: no duplicate either


@pytest.mark.kafka_cluster(**SHARED)
def test_the_shared_cluster_is_healed_and_a_paused_follower_leaves_the_isr(
        kafka_cluster: DevCluster) -> None:
    assert not kafka_cluster.stopped  # the broker killed by the test before was started again
    kafka_cluster.create_topic("pause", partitions=1)
    leader = kafka_cluster.leader_of("pause", 0)
    follower = next(b for b in kafka_cluster.broker_ids if b != leader)
    kafka_cluster.pause_broker(follower)
    assert follower not in kafka_cluster.wait_isr("pause", 0, 2)
    kafka_cluster.resume_broker(follower)
    assert kafka_cluster.wait_isr("pause", 0, 3) == [1, 2, 3]
    kafka_cluster.restart_broker(follower)
    assert kafka_cluster.wait_isr("pause", 0, 3) == [1, 2, 3]


def test_the_embedded_cluster_is_removed_on_exit() -> None:
    with dev_cluster(brokers=1) as running:
        data_dir, pids = running.data_dir, list(running.pids.values())
        assert data_dir.is_dir()
    assert not data_dir.exists()
    assert not any(alive(pid) for pid in pids)


def test_the_cluster_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    script = ("import os, signal, sys; from server.dev import cluster\n"
              "c = cluster().__enter__()\n"
              "print(c.data_dir, *c.pids.values(), c._process.pid, flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    owner = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path, env=os.environ)
    assert owner.returncode == -signal.SIGKILL, owner.stderr
    data_dir, *pids = owner.stdout.split()
    wait_for(lambda: not any(alive(pid) for pid in pids), 20,
             "the supervisor and its node to exit")
    wait_for(lambda: not Path(data_dir).exists(), 5, f"{data_dir} removed")
