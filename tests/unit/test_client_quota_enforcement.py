"""Client quotas enforced by the Kafka front: Produce throttled but appended, acks=0 free of
the request quota, a throttled consumer Fetch answered empty with its bytes taken back, a
consumer's fetch size capped by its quota, replica fetches exempt, every other answer carrying
the request quota's throttle; and the listener muting only the throttled connection."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from broker.api import FetchParams, Request
from broker.kafka.api_versions_api import handle_api_versions
from broker.kafka.apis import KafkaApis
from broker.kafka.codec import DecodedRequest
from broker.kafka.reply import Reply, millis
from broker.kafka.server import KafkaServer
from broker.kafka.versions import ApiKey
from broker.quotas import ClientQuotas, QuotaWindow
from metadata.security_records import QuotaEntity
from tests.unit.test_kafka_apis import CLUSTER, Front, fetch, image, metadata, produce
from tests.unit.test_kafka_fakes import batch_header
from tests.unit.test_kafka_server import api_versions_frame

DEFAULT_CLIENT: QuotaEntity = (("client-id", None),)


class QuotaFront(Front):
    """The front with client quotas (clock stopped at 0) and the last Reply kept."""

    def __init__(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        super().__init__()
        self.quotas = ClientQuotas(lambda: quotas, QuotaWindow(11, 1000), clock_ms=lambda: 0)
        self.apis = KafkaApis(self.plane, image, CLUSTER, quotas=self.quotas)
        self.last: Reply | None = None

    def reply(self, api_key: int, version: int, **fields: Any) -> Reply:
        self.last = super().reply(api_key, version, **fields)
        return self.last


def test_produce_over_its_byte_rate_is_appended_and_throttled() -> None:
    front = QuotaFront({DEFAULT_CLIENT: {"producer_byte_rate": 10.0}})
    reply = produce(front, 9, -1, {0: batch_header(3)})
    assert front.plane.partitions[("t", 0)].log_end == 3  # appended all the same
    # The frame's bytes over 10 s against 10 B/s: (rate - 10) / 10 * 10 s.
    sent = _sensor_total(front.quotas, "producer_byte_rate")
    assert sent > 61
    expected = round((sent / 10 - 10) / 10 * 10_000)
    assert reply.throttle_ms == expected
    assert millis(reply.response.throttle_time) == expected
    assert front.quotas.produce.throttled == 1
    assert front.quotas.produce.throttle_time_ms == expected


def test_acks_0_skips_the_request_quota_but_not_the_byte_rate() -> None:
    quotas = {DEFAULT_CLIENT: {"request_percentage": 1e-9, "producer_byte_rate": 1e9}}
    front = QuotaFront(quotas)
    reply = produce(front, 9, 0, {0: batch_header(1)})
    assert reply.response is None and reply.throttle_ms == 0
    assert front.quotas.request.sensors == 0  # nothing recorded
    assert front.quotas.produce.sensors == 1
    reply = produce(front, 9, 1, {0: batch_header(1)})
    assert front.quotas.request.sensors == 1
    assert 0 < reply.throttle_ms <= 1000  # the request quota's cap: one sample
    assert millis(reply.response.throttle_time) == reply.throttle_ms


def test_a_throttled_fetch_is_empty_and_its_bytes_are_not_counted() -> None:
    front = QuotaFront({DEFAULT_CLIENT: {"consumer_byte_rate": 5.0}})
    produce(front, 9, -1, {0: batch_header(2)})
    response = fetch(front, 12, [(0, 0)])
    assert response.responses == ()
    assert response.session_id == 0
    # 61 bytes over 10 s against 5 B/s.
    assert front.last is not None
    assert front.last.throttle_ms == round((6.1 - 5) / 5 * 10_000)
    assert millis(response.throttle_time) == front.last.throttle_ms
    assert _sensor_total(front.quotas, "consumer_byte_rate") == 0  # taken back
    assert front.quotas.fetch.throttled == 1
    # The fetch asked at most what 10 s of quota allow.
    asked = front.plane.calls[-1][1]
    assert isinstance(asked, FetchParams) and asked.max_bytes == 50


def test_a_fetch_within_its_quota_is_answered_and_counted() -> None:
    front = QuotaFront({DEFAULT_CLIENT: {"consumer_byte_rate": 1000.0}})
    produce(front, 9, -1, {0: batch_header(2)})
    response = fetch(front, 12, [(0, 0)])
    assert len(response.responses[0].partitions[0].records) == 61
    assert front.last is not None and front.last.throttle_ms == 0
    assert _sensor_total(front.quotas, "consumer_byte_rate") == 61


def test_a_replica_fetch_is_exempt() -> None:
    front = QuotaFront({DEFAULT_CLIENT: {"consumer_byte_rate": 1.0,
                                         "request_percentage": 1e-9}})
    produce(front, 9, 0, {0: batch_header(2)})  # acks=0: no request time recorded
    response = fetch(front, 12, [(0, 0)], replica=(2, -1))
    assert len(response.responses[0].partitions[0].records) == 61
    assert front.last is not None and front.last.throttle_ms == 0
    assert front.quotas.fetch.sensors == 0 and front.quotas.request.sensors == 0
    asked = front.plane.calls[-1][1]
    assert isinstance(asked, FetchParams) and asked.max_bytes == 1 << 20


def test_other_answers_carry_the_request_quotas_throttle() -> None:
    front = QuotaFront({DEFAULT_CLIENT: {"request_percentage": 1e-9}})
    response = metadata(front, 12)
    assert front.last is not None
    assert 0 < front.last.throttle_ms <= 1000
    assert millis(response.throttle_time) == front.last.throttle_ms
    assert front.quotas.request.throttled == 1
    # ApiVersions v0 has no throttle_time field: the connection is muted all the same.
    front.reply(ApiKey.API_VERSIONS, 0)
    assert front.last.throttle_ms > 0


def test_without_quotas_nothing_is_throttled_or_kept() -> None:
    front = QuotaFront({})
    produce(front, 9, -1, {0: batch_header(2)})
    assert front.last is not None and front.last.throttle_ms == 0
    fetch(front, 12, [(0, 0)])
    assert front.last.throttle_ms == 0
    assert all(manager.sensors == 0 for manager in front.quotas.managers)


def _sensor_total(quotas: ClientQuotas, key: str) -> float:
    manager = next(m for m in quotas.managers if m.key == key)
    sensors = manager._sensors  # the only one in these tests
    return sum(rate.total(0) for rate, _ in sensors.values())


# ---- the listener mutes a throttled connection ----


class ThrottlingHandler:
    """Answers ApiVersions; a request with client id 'throttle' is throttled THROTTLE_MS.
    `started` keeps (client id, loop time) of each request as its handler starts."""

    THROTTLE_MS = 400

    def __init__(self) -> None:
        self.started: list[tuple[str, float]] = []

    async def handle(self, request: DecodedRequest, context: Request) -> Reply:
        client = request.client_id or ""
        self.started.append((client, asyncio.get_running_loop().time()))
        reply = handle_api_versions(request.api_version, request.body)
        return Reply(reply.response, throttle_ms=self.THROTTLE_MS if client == "throttle" else 0)


async def _answer(reader: asyncio.StreamReader) -> int:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return int(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])


def test_a_throttled_answer_mutes_reading_its_connection_only() -> None:
    async def main() -> None:
        handler = ThrottlingHandler()
        server = KafkaServer(handler, "127.0.0.1", 0)
        port = await server.start()
        loop = asyncio.get_running_loop()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            other_reader, other_writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(api_versions_frame(1, "throttle"))
            assert await _answer(reader) == 1  # answered at once, throttle or not
            answered_at = loop.time()
            writer.write(api_versions_frame(2, "next"))
            other_writer.write(api_versions_frame(3, "other"))
            assert await _answer(other_reader) == 3
            assert await _answer(reader) == 2
            started = dict(handler.started)
            # The other connection was served during the mute; the next request after it.
            assert started["other"] - answered_at < 0.2
            assert started["next"] - answered_at >= 0.95 * ThrottlingHandler.THROTTLE_MS / 1000
            for w in (writer, other_writer):
                w.close()
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 20))
