"""Real Kafka clients (confluent-kafka / librdkafka, kafka-python) against the Kafka front
(broker/kafka) backed by an in-memory data plane, in this process on 127.0.0.1.

The server runs on an event loop in a thread of its own: both clients block."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.api import LATEST_TIMESTAMP, ListOffsetsPartition
from broker.kafka.apis import KafkaApis
from broker.kafka.client import KafkaClient
from broker.kafka.server import KafkaServer
from broker.kafka.tls import client_ssl_context, server_ssl_context
from kraft.errors import Errors
from kraft.security.certs import make_test_certs
from kraft.security.tls import TlsConfig
from metadata.image import MetadataImage
from tests.unit.test_kafka_fakes import InMemoryDataPlane, single_broker_image

T = TypeVar("T")
CLUSTER_ID = "kafka-front-test"
TOPICS = {"orders": 2, "audit": 1}


@dataclass
class Front:
    loop: asyncio.AbstractEventLoop
    server: KafkaServer
    plane: InMemoryDataPlane
    port: int
    image: list[MetadataImage]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, fn: Callable[[], T]) -> T:
        """Run fn on the server's loop (the fake is not thread-safe)."""
        done: Future[T] = Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return done.result(10)


def start_front(listener: str = "PLAINTEXT",
                ssl_context: ssl.SSLContext | None = None) -> Iterator[Front]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    plane = InMemoryDataPlane()
    for name, count in TOPICS.items():
        plane.add(name, count)
    image: list[MetadataImage] = [MetadataImage()]
    apis = KafkaApis(plane, lambda: image[0], CLUSTER_ID)
    server = KafkaServer(apis, "127.0.0.1", 0, listener=listener, ssl_context=ssl_context,
                         max_request_bytes=4 * 1024 * 1024)
    port = asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    image[0] = single_broker_image(port, TOPICS, listener=listener)
    yield Front(loop, server, plane, port, image)
    asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.fixture
def front() -> Iterator[Front]:
    yield from start_front()


# ---- confluent-kafka (librdkafka) ----


def test_confluent_producer_acks_all_and_consumer_assign_read_back(front: Front) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": front.bootstrap, "acks": "all",
                         "linger.ms": 5})
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))

    for i in range(100):
        producer.produce("orders", key=str(i).encode(), value=f"v{i}".encode(),
                         partition=i % 2, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(delivered) == 100
    assert sorted(o for p, o in delivered if p == 0) == list(range(50))

    consumer = Consumer({"bootstrap.servers": front.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("orders", 0, 0), TopicPartition("orders", 1, 0)])
    values: set[str] = set()
    deadline = time.monotonic() + 30
    while len(values) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            values.add((msg.value() or b"").decode())
    consumer.close()
    assert values == {f"v{i}" for i in range(100)}


@pytest.mark.parametrize("settings", [
    {"acks": "0"}, {"acks": "1"}, {"acks": "all", "enable.idempotence": True},
])
def test_confluent_producer_acks_and_idempotence(front: Front, settings: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": front.bootstrap, **settings})
    errors: list[Any] = []
    for i in range(50):
        producer.produce("audit", value=b"%d" % i, partition=0,
                         on_delivery=lambda err, _: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and not errors
    deadline = time.monotonic() + 10
    while front.call(lambda: front.plane.partitions[("audit", 0)].log_end) < 50:
        assert time.monotonic() < deadline  # acks=0: nothing tells the producer; poll the log
        time.sleep(0.05)
    assert front.call(lambda: front.plane.partitions[("audit", 0)].log_end) == 50
    asked_ids = [c for c, _ in front.plane.calls if c == "init_producer_id"]
    assert bool(asked_ids) == bool(settings.get("enable.idempotence"))


def test_confluent_consumer_validates_its_position_after_a_leader_epoch_change(
    front: Front,
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": front.bootstrap,
                         "topic.metadata.refresh.interval.ms": 200})
    consumer = Consumer({"bootstrap.servers": front.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 200})
    consumer.assign([TopicPartition("audit", 0, 0)])

    def send_and_read(first: int) -> list[bytes]:
        for i in range(first, first + 5):
            producer.produce("audit", value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value() or b"")
        return got

    assert send_and_read(0) == [b"0", b"1", b"2", b"3", b"4"]

    def new_epoch() -> None:  # a leader election: the epoch rises in metadata and the log
        front.plane.partitions[("audit", 0)].leader_epoch = 1
        front.image[0] = single_broker_image(front.port, TOPICS, leader_epoch=1)

    front.call(new_epoch)
    # The consumer's next metadata refresh (every 200 ms) shows the epoch rise; it then checks
    # its position with OffsetForLeaderEpoch. Poll it until it has asked.
    deadline = time.monotonic() + 30
    while not front.call(lambda: any(name == "end_offsets_for_epochs"
                                     for name, _ in front.plane.calls)):
        assert time.monotonic() < deadline, "no OffsetForLeaderEpoch after the epoch rose"
        consumer.poll(0.2)
    assert send_and_read(5) == [b"5", b"6", b"7", b"8", b"9"]
    consumer.close()
    asked = [args for name, args in front.plane.calls if name == "end_offsets_for_epochs"]
    assert asked, "librdkafka validates its position with OffsetForLeaderEpoch"
    (partition,) = asked[0][1]
    assert (partition.leader_epoch, partition.current_leader_epoch) == (0, 1)


def test_confluent_admin_lists_topics_with_leaders_and_cluster_id(front: Front) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": front.bootstrap})
    metadata = admin.list_topics(timeout=10)
    assert metadata.cluster_id == CLUSTER_ID
    assert set(metadata.brokers) == {1}
    assert metadata.brokers[1].port == front.port
    assert set(metadata.topics) == set(TOPICS)
    orders = metadata.topics["orders"]
    assert sorted(orders.partitions) == [0, 1]
    assert orders.partitions[0].leader == 1
    assert orders.partitions[0].replicas == [1] and orders.partitions[0].isrs == [1]


def test_confluent_consumer_offsets_beginning_and_end(front: Front) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": front.bootstrap})
    for i in range(5):
        producer.produce("audit", value=b"x%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": front.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    low, high = consumer.get_watermark_offsets(TopicPartition("audit", 0), timeout=10)
    assert (low, high) == (0, 5)
    consumer.assign([TopicPartition("audit", 0, OFFSET_BEGINNING)])
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.offset() or 0)
    consumer.close()
    assert got == [0, 1, 2, 3, 4]


# ---- kafka-python ----


def test_kafka_python_idempotent_producer_and_consumer(front: Front) -> None:
    from kafka import (  # type: ignore[import-untyped]
        KafkaConsumer,
        KafkaProducer,
        TopicPartition,
    )

    producer = KafkaProducer(bootstrap_servers=front.bootstrap, acks="all")
    futures = [producer.send("orders", value=f"kp{i}".encode(), partition=1) for i in range(20)]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close(10)
    assert offsets == list(range(20))
    assert any(name == "init_producer_id" for name, _ in front.plane.calls)

    consumer = KafkaConsumer(bootstrap_servers=front.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("orders", 1)])
    consumer.seek_to_beginning()
    got = []
    for record in consumer:
        got.append(record.value.decode())
        if len(got) == 20:
            break
    consumer.close()
    assert got == [f"kp{i}" for i in range(20)]


@pytest.mark.parametrize("acks", [0, 1])
def test_kafka_python_producer_acks_zero_and_one(front: Front, acks: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=front.bootstrap, acks=acks,
                             enable_idempotence=False)
    futures = [producer.send("audit", value=b"%d" % i, partition=0) for i in range(30)]
    results = [f.get(timeout=30) for f in futures]
    producer.close(10)
    if acks == 1:
        assert [r.offset for r in results] == list(range(30))
    deadline = time.monotonic() + 10
    while front.call(lambda: front.plane.partitions[("audit", 0)].log_end) < 30:
        assert time.monotonic() < deadline  # acks=0: sent is all the producer knows
        time.sleep(0.05)


def test_kafka_python_metadata_lists_topics(front: Front) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=front.bootstrap)
    assert consumer.topics() == set(TOPICS)
    assert consumer.partitions_for_topic("orders") == {0, 1}
    consumer.close()


# ---- the SSL listener (mutual TLS from the project's PEM files) ----


def test_ssl_listener_with_mutual_tls_serves_confluent_and_the_inter_broker_client(
    tmp_path: Path,
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    paths = make_test_certs(tmp_path, ["broker-1", "client"])
    server_tls = TlsConfig(str(paths["broker-1"]), str(paths["ca"]), "required")
    client_tls = TlsConfig(str(paths["client"]), str(paths["ca"]))
    fronts = start_front("SSL", server_ssl_context(server_tls))
    front = next(fronts)
    try:
        common = {
            "bootstrap.servers": front.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(paths["ca"]),
            "ssl.certificate.location": str(paths["client"]),
            "ssl.key.location": str(paths["client"]),
        }
        producer = Producer(common)
        producer.produce("audit", value=b"over tls", partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({**common, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([TopicPartition("audit", 0, 0)])
        deadline = time.monotonic() + 30
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        consumer.close()
        assert msg is not None and msg.value() == b"over tls"

        async def inter_broker() -> int:
            client = KafkaClient("127.0.0.1", front.port, client_ssl_context(client_tls))
            await client.connect()
            try:
                (latest,) = await client.list_offsets(
                    2, [ListOffsetsPartition("audit", 0, LATEST_TIMESTAMP)])
            finally:
                await client.close()
            assert latest.error == Errors.NONE
            return latest.offset

        assert asyncio.run_coroutine_threadsafe(inter_broker(), front.loop).result(30) == 1
        # Without a client certificate the server refuses (ssl.client.auth=required): with
        # TLS 1.3 the client sees it on its first read, as an error or a closed connection.
        anonymous = ssl.create_default_context(cafile=str(paths["ca"]))
        with socket.create_connection(("127.0.0.1", front.port), timeout=5) as raw:
            try:
                with anonymous.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    frame = struct.pack(">hhih", 18, 0, 1, -1)
                    tls.sendall(struct.pack(">i", len(frame)) + frame)
                    assert tls.recv(64) == b""
            except (ssl.SSLError, ConnectionError):
                pass
    finally:
        next(fronts, None)


# ---- bad input: garbage closes its connection, the server keeps serving ----


def _exchange(port: int, payload: bytes) -> bytes:
    """Send raw bytes; everything the server sends back until it closes (or 2 s pass)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks)


def _api_versions_ok(port: int) -> bool:
    frame = struct.pack(">hhih", 18, 0, 42, -1)
    answer = _exchange(port, struct.pack(">i", len(frame)) + frame)
    return answer[4:8] == struct.pack(">i", 42) and answer[8:10] == b"\0\0"


def test_oversized_negative_and_unsupported_frames_close_only_their_connection(
    front: Front,
) -> None:
    assert _exchange(front.port, struct.pack(">i", 4 * 1024 * 1024 + 1)) == b""
    assert _exchange(front.port, struct.pack(">i", -5)) == b""
    unsupported = struct.pack(">hhih", 0, 2, 1, -1)  # Produce v2: below what is served
    assert _exchange(front.port, struct.pack(">i", len(unsupported)) + unsupported) == b""
    unknown_key = struct.pack(">hhih", 999, 0, 1, -1)
    assert _exchange(front.port, struct.pack(">i", len(unknown_key)) + unknown_key) == b""
    assert _api_versions_ok(front.port)
    assert front.server.connections_closed_for_bad_input >= 4


def test_api_versions_with_a_future_version_gets_a_v0_unsupported_version_answer(
    front: Front,
) -> None:
    frame = struct.pack(">hhih", 18, 99, 7, -1)
    answer = _exchange(front.port, struct.pack(">i", len(frame)) + frame)
    size, correlation, error, count = struct.unpack_from(">iihi", answer)
    assert (correlation, error, count) == (7, 35, 1)
    assert struct.unpack_from(">hhh", answer, 14) == (18, 0, 4)
    assert size == len(answer) - 4


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=300))
def test_garbage_never_stops_the_server(front: Front, garbage: bytes) -> None:
    framed = struct.pack(">i", len(garbage)) + garbage
    _exchange(front.port, framed)
    assert _api_versions_ok(front.port)
