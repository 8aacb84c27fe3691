"""KafkaClient (broker/kafka/client.py), the inter-broker client, against the Kafka front
backed by the in-memory data plane: typed calls, versions, and transport failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from broker.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    DivergingEpoch,
    EpochEndPartition,
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
    ListOffsetsPartition,
    ProducePartition,
)
from broker.kafka.apis import KafkaApis
from broker.kafka.client import KafkaClient, KafkaClientError
from broker.kafka.server import KafkaServer
from kraft.errors import Errors
from metadata.image import MetadataImage
from tests.unit.test_kafka_fakes import (
    InMemoryDataPlane,
    batch_header,
    single_broker_image,
    topic_id_for,
)

Scenario = Callable[[KafkaClient, InMemoryDataPlane, KafkaServer], Awaitable[None]]


def run(scenario: Scenario, plane: InMemoryDataPlane | None = None) -> None:
    async def main() -> None:
        data = plane or InMemoryDataPlane()
        data.add("t", 2, leader_epoch=3)
        image: list[MetadataImage] = [MetadataImage()]
        server = KafkaServer(KafkaApis(data, lambda: image[0], "c1"), "127.0.0.1", 0)
        port = await server.start()
        image[0] = single_broker_image(port, {"t": 2}, leader_epoch=3)
        client = KafkaClient("127.0.0.1", port, client_id="replica-2")
        await client.connect()
        try:
            await scenario(client, data, server)
        finally:
            await client.close()
            await server.close()

    asyncio.run(main())


async def produce(plane: InMemoryDataPlane, partition: int, records: int) -> None:
    await plane.produce(-1, 1000, [ProducePartition("t", partition, batch_header(records))])


def test_fetch_by_topic_id_uses_v15_and_carries_replica_state() -> None:
    async def scenario(client: KafkaClient, plane: InMemoryDataPlane, _: KafkaServer) -> None:
        await produce(plane, 0, 2)
        params = FetchParams(
            [FetchPartition("t", 0, 0, 1 << 20, current_leader_epoch=3, last_fetched_epoch=2,
                            topic_id=topic_id_for("t"))],
            max_wait_ms=0, replica_id=2, replica_epoch=77,
        )
        (result,) = await client.fetch(params)
        assert result.error == Errors.NONE and result.high_watermark == 2
        assert len(result.records) == 61 and result.diverging_epoch is None
        asked = plane.calls[-1][1]
        assert isinstance(asked, FetchParams)
        assert (asked.replica_id, asked.replica_epoch) == (2, 77)
        assert asked.partitions[0] == replace(params.partitions[0], topic="t")

    run(scenario)


def test_fetch_without_topic_ids_uses_v12_names() -> None:
    async def scenario(client: KafkaClient, plane: InMemoryDataPlane, _: KafkaServer) -> None:
        await produce(plane, 1, 1)
        params = FetchParams([FetchPartition("t", 1, 0, 1000, last_fetched_epoch=3),
                              FetchPartition("t", 0, 5, 1000)],
                             max_wait_ms=0, replica_id=2)
        first, second = await client.fetch(params)
        assert first.error == Errors.NONE and first.high_watermark == 1
        assert second.error == Errors.OFFSET_OUT_OF_RANGE
        asked = plane.calls[-1][1]
        assert isinstance(asked, FetchParams)
        assert asked.replica_id == 2 and asked.replica_epoch == -1  # v12 has no broker epoch
        assert asked.partitions[0].last_fetched_epoch == 3

    run(scenario)


def test_fetch_decodes_diverging_epoch_and_current_leader() -> None:
    class Diverging(InMemoryDataPlane):
        async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
            return [FetchPartitionResult(high_watermark=9, diverging_epoch=DivergingEpoch(2, 7),
                                         current_leader=(1, 3))
                    for _ in params.partitions]

    async def scenario(client: KafkaClient, _: InMemoryDataPlane, __: KafkaServer) -> None:
        for topic_id in (topic_id_for("t"), None):
            params = FetchParams([FetchPartition("t", 0, 10, 1000, topic_id=topic_id)],
                                 replica_id=2)
            (result,) = await client.fetch(params)
            assert result.diverging_epoch == DivergingEpoch(2, 7)
            assert result.current_leader == (1, 3)
            assert result.records == b""

    run(scenario, Diverging())


def test_list_offsets_and_end_offsets_for_epochs() -> None:
    async def scenario(client: KafkaClient, plane: InMemoryDataPlane, _: KafkaServer) -> None:
        await produce(plane, 0, 4)
        latest, earliest = await client.list_offsets(2, [
            ListOffsetsPartition("t", 0, LATEST_TIMESTAMP),
            ListOffsetsPartition("t", 0, EARLIEST_TIMESTAMP),
        ])
        # The same partition twice in one request: Kafka refuses both (INVALID_REQUEST).
        assert latest.error == earliest.error == Errors.INVALID_REQUEST
        (latest,) = await client.list_offsets(2, [ListOffsetsPartition("t", 0, LATEST_TIMESTAMP)])
        assert (latest.error, latest.offset, latest.leader_epoch) == (Errors.NONE, 4, 3)
        assert plane.calls[-1][1][0] == 2
        (end,) = await client.end_offsets_for_epochs(2, [EpochEndPartition("t", 0, 3, 3)])
        assert (end.error, end.leader_epoch, end.end_offset) == (Errors.NONE, 3, 4)
        (unknown,) = await client.end_offsets_for_epochs(2, [EpochEndPartition("x", 0, 1)])
        assert unknown.error == Errors.UNKNOWN_TOPIC_OR_PARTITION

    run(scenario)


def test_pipelined_requests_each_get_their_own_answer() -> None:
    async def scenario(client: KafkaClient, plane: InMemoryDataPlane, _: KafkaServer) -> None:
        await produce(plane, 0, 1)
        await produce(plane, 1, 5)
        waits = [client.list_offsets(-1, [ListOffsetsPartition("t", i % 2, LATEST_TIMESTAMP)])
                 for i in range(20)]
        answers = await asyncio.gather(*waits)
        assert [a[0].offset for a in answers] == [1, 5] * 10

    run(scenario)


def test_a_cancelled_request_leaves_the_connection_usable() -> None:
    async def scenario(client: KafkaClient, plane: InMemoryDataPlane, _: KafkaServer) -> None:
        # A long poll on an empty partition, given up by its caller before the answer.
        waiting = asyncio.create_task(client.fetch(
            FetchParams([FetchPartition("t", 0, 0, 100)], max_wait_ms=300)))
        async with asyncio.timeout(5):  # until the server holds the long poll
            while not any(name == "fetch" for name, _ in plane.calls):
                await asyncio.sleep(0.001)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await produce(plane, 0, 1)
        (offsets,) = await client.list_offsets(-1, [ListOffsetsPartition("t", 0, -1)])
        assert offsets.offset == 1 and client.connected

    run(scenario)


def test_connect_to_nothing_raises_the_typed_error() -> None:
    async def main() -> None:
        client = KafkaClient("127.0.0.1", 1, connect_timeout_s=2)
        with pytest.raises(KafkaClientError):
            await client.connect()
        with pytest.raises(KafkaClientError):
            await client.list_offsets(-1, [ListOffsetsPartition("t", 0, LATEST_TIMESTAMP)])

    asyncio.run(main())


def test_a_server_that_goes_away_fails_the_requests_in_flight() -> None:
    entered = asyncio.Event()

    class Hanging(InMemoryDataPlane):
        async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
            entered.set()
            await asyncio.sleep(60)  # the answer that never comes
            return []

    async def scenario(client: KafkaClient, _: InMemoryDataPlane, server: KafkaServer) -> None:
        waiting = asyncio.create_task(client.fetch(
            FetchParams([FetchPartition("t", 0, 0, 100)], max_wait_ms=0)))
        await asyncio.wait_for(entered.wait(), 5)  # the request is in flight at the server
        await server.close()
        with pytest.raises(KafkaClientError):
            await waiting
        assert not client.connected

    run(scenario, Hanging())


def test_a_request_that_times_out_closes_the_connection() -> None:
    class Hanging(InMemoryDataPlane):
        async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
            await asyncio.sleep(60)
            return []

    async def scenario(client: KafkaClient, _: InMemoryDataPlane, __: KafkaServer) -> None:
        client._request_timeout_s = 0.3
        with pytest.raises(KafkaClientError, match="timed out"):
            await client.fetch(FetchParams([FetchPartition("t", 0, 0, 100)], max_wait_ms=0))
        assert not client.connected
        await client.connect()  # and it can come back
        (offsets,) = await client.list_offsets(-1, [ListOffsetsPartition("t", 0, -1)])
        assert offsets.error == Errors.NONE

    run(scenario, Hanging())
