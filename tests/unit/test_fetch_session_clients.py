"""Real consumers against a broker with fetch sessions (KIP-227): kafka-python opens one and
fetches incrementally (and keeps working when the broker keeps none), librdkafka never asks
for one. The broker runs on an event loop in a thread of its own: the client libraries
block."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from broker.kafka.apis import KafkaApis
from broker.kafka.server import KafkaServer
from broker.records import build_batch
from broker.replica.fetch_sessions import FetchSessionCache
from broker.replica.incremental_fetch import FetchSessions
from kraft.errors import Errors
from metadata.records import Endpoint, RegisterBrokerRecord
from tests.unit.replica_harness import INC, TOPIC, Cluster, broker_epoch

T = TypeVar("T")


class OneBroker:
    """Broker 1 alone, leading TOPIC's 3 partitions, serving Kafka's protocol on 127.0.0.1
    from an event loop in a thread of its own (the client libraries block)."""

    def __init__(self, tmp_path: Path, slots: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.reads = 0  # incremental reads
        self.slots = slots
        self.tmp_path = tmp_path
        self.port = self.call(self._start())

    def call(self, coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)  # type: ignore[arg-type]

    async def _start(self) -> int:
        self.cluster = Cluster(self.tmp_path, brokers=(1,))
        manager = self.cluster.nodes[1].manager
        self.sessions = FetchSessions(manager, FetchSessionCache(self.slots))
        read = self.sessions.read

        async def counting(*args: Any) -> Any:
            self.reads += 1
            return await read(*args)

        self.sessions.read = counting  # type: ignore[method-assign]
        self.server = KafkaServer(KafkaApis(manager, lambda: self.cluster.metadata.image, "c1",
                                            fetch_sessions=self.sessions), "127.0.0.1", 0)
        port = await self.server.start()
        self.cluster.metadata.replay(RegisterBrokerRecord(
            1, INC, broker_epoch(1), (Endpoint("PLAINTEXT", "127.0.0.1", port),), fenced=False))
        self.cluster.create_topic(replicas=(1,), partitions=3)
        self.cluster.start()
        return port

    def produce(self, first: int, count: int) -> None:
        async def write() -> None:
            node = self.cluster.nodes[1]
            for i in range(first, first + count):
                result = await node.produce(build_batch([b"r%d" % i]), acks=1,
                                            partition=i % 3)
                assert result[0].error == Errors.NONE, result

        self.call(write())

    def close(self) -> None:
        async def stop() -> None:
            await self.server.close()
            await self.cluster.close()

        self.call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def consume_kafka_python(broker: OneBroker, batches: int) -> list[bytes]:
    """Read the 30 records written, write 30 more, read those: `batches` times."""
    from kafka import KafkaConsumer, TopicPartition  # type: ignore[import-untyped]

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.port}",
                             enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(3)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        for batch_no in range(batches):
            if batch_no:
                broker.produce(30 * batch_no, 30)  # after the consumer fetched the others
            while len(got) < 30 * (batch_no + 1) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend(r.value for r in records)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("slots", [1000, 0])
def test_kafka_python_consumes_with_and_without_a_session(tmp_path: Path, slots: int) -> None:
    broker = OneBroker(tmp_path, slots)
    try:
        broker.produce(0, 30)
        got = consume_kafka_python(broker, 3)
        assert sorted(got) == sorted(b"r%d" % i for i in range(90))
        if slots:
            assert broker.reads > 0  # it fetched incrementally, in a session of its own
            (session,) = broker.sessions.cache.sessions.values()
            assert not session.privileged and len(session.partitions) == 3
        else:
            assert broker.reads == 0 and not broker.sessions.cache.sessions
    finally:
        broker.close()


def test_librdkafka_consumes_without_asking_for_a_session(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    broker = OneBroker(tmp_path, 1000)
    try:
        broker.produce(0, 30)
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                             "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.close()
        assert sorted(got) == sorted(b"r%d" % i for i in range(30))
        assert broker.reads == 0 and not broker.sessions.cache.sessions
    finally:
        broker.close()
