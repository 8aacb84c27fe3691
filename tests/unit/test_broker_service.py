"""The broker listener's services in-process: BrokerMetadata answers from the cache with the
position it reflects, long-polls wake on publish, the gate refuses until the broker runs, and
the Admin service on a broker reads its cache and never writes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from broker.cache import MetadataCache
from broker.rpc import broker_metadata_pb2 as pb
from broker.rpc import broker_metadata_pb2_grpc as rpc
from broker.service import BrokerMetadataServicer, ServingGate, _BrokerControllerView
from kraft.client import LeaderAndEpoch
from kraft.errors import Errors
from metadata.controller import NotControllerError
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAg"


def image_with_topic(base: MetadataImage = EMPTY_IMAGE, offset: int = 0) -> MetadataImage:
    delta = MetadataDelta(base)
    records = [
        RegisterBrokerRecord(1, "AAAAAAAAAAAAAAAAAAAAAw", 0,
                             (Endpoint("PLAINTEXT", "h1", 9092),), fenced=False),
        RegisterBrokerRecord(2, "AAAAAAAAAAAAAAAAAAAABA", 1, fenced=True),
        TopicRecord("orders", TOPIC_ID),
        PartitionRecord(0, TOPIC_ID, (1, 2), (1, 2), leader=1, leader_epoch=3,
                        partition_epoch=5),
    ]
    for i, record in enumerate(records):
        delta.replay(record, offset + i, 7, 1234)
    return delta.apply()


async def serve(
    cache: MetadataCache, not_serving: Callable[[], str | None]
) -> tuple[grpc.aio.Server, rpc.BrokerMetadataStub, grpc.aio.Channel]:
    server = grpc.aio.server(interceptors=[ServingGate(not_serving)])
    rpc.add_BrokerMetadataServicer_to_server(BrokerMetadataServicer(
        cache, "cluster-x", 4, controller_id=lambda: 2, broker_state=lambda: "RUNNING"), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return server, rpc.BrokerMetadataStub(channel), channel


def test_describe_from_the_cache_with_its_position() -> None:
    async def scenario() -> None:
        cache = MetadataCache()
        cache.publish(image_with_topic(), applied_offset=3, high_watermark=4)
        server, stub, channel = await serve(cache, lambda: None)
        try:
            cluster = await stub.DescribeCluster(pb.DescribeClusterRequest(), timeout=5)
            assert (cluster.cluster_id, cluster.controller_id, cluster.broker_id) == (
                "cluster-x", 2, 4)
            assert [b.broker_id for b in cluster.brokers] == [1]  # fenced 2 left out
            everyone = await stub.DescribeCluster(
                pb.DescribeClusterRequest(include_fenced_brokers=True), timeout=5)
            assert [(b.broker_id, b.fenced) for b in everyone.brokers] == [(1, False), (2, True)]
            assert (cluster.position.offset, cluster.position.epoch,
                    cluster.position.high_watermark, cluster.position.timestamp_ms) == (
                        3, 7, 4, 1234)
            topics = await stub.DescribeTopics(
                pb.DescribeTopicsRequest(names=["orders", "missing"]), timeout=5)
            orders, missing = topics.topics
            assert orders.topic_id == TOPIC_ID and orders.error_code == 0
            [p] = orders.partitions
            assert (p.leader, list(p.replicas), list(p.isr), p.leader_epoch,
                    p.partition_epoch, list(p.offline_replicas)) == (1, [1, 2], [1, 2], 3, 5, [2])
            assert missing.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await channel.close()
            await server.stop(None)

    asyncio.run(scenario())


def test_long_polls_wake_on_publish_and_time_out_with_what_there_is() -> None:
    async def scenario() -> None:
        cache = MetadataCache()
        server, stub, channel = await serve(cache, lambda: None)
        try:
            waiting = asyncio.ensure_future(stub.DescribeTopics(
                pb.DescribeTopicsRequest(names=["orders"], wait_ms=10_000), timeout=15))
            offset_wait = asyncio.ensure_future(stub.DescribeCluster(
                pb.DescribeClusterRequest(min_offset=3, wait_ms=10_000), timeout=15))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 5
            while cache.waiters < 2:  # both requests parked at the broker
                assert loop.time() < deadline, "the long-polls never reached the cache"
                await asyncio.sleep(0.005)  # poll interval of a bounded condition wait
            assert not waiting.done() and not offset_wait.done()
            cache.publish(image_with_topic(), applied_offset=3, high_watermark=4)
            reply = await asyncio.wait_for(waiting, 5)
            assert reply.topics[0].error_code == 0 and reply.position.offset == 3
            assert (await asyncio.wait_for(offset_wait, 5)).position.offset == 3
            # A wait that is never satisfied answers at its deadline with the current state.
            late = await stub.DescribeTopics(
                pb.DescribeTopicsRequest(names=["never"], wait_ms=100), timeout=5)
            assert late.topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await channel.close()
            await server.stop(None)

    asyncio.run(scenario())


def test_gate_refuses_until_running() -> None:
    async def scenario() -> None:
        reason: list[str | None] = ["broker 4 is not serving yet: state STARTING"]
        server, stub, channel = await serve(MetadataCache(), lambda: reason[0])
        try:
            try:
                await stub.DescribeCluster(pb.DescribeClusterRequest(), timeout=5)
                raise AssertionError("a starting broker answered")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE
                assert "STARTING" in (exc.details() or "")
            reason[0] = None
            reply = await stub.DescribeCluster(pb.DescribeClusterRequest(), timeout=5)
            assert reply.cluster_id == "cluster-x"
        finally:
            await channel.close()
            await server.stop(None)

    asyncio.run(scenario())


class _Client:
    """The part of a RaftClient the broker's Admin view reads."""

    node_id = 4

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(2, 7)

    def leader_endpoint(self) -> str:
        return "127.0.0.1:9093"


def test_admin_view_on_a_broker_reads_the_cache_and_refuses_writes() -> None:
    async def scenario() -> None:
        cache = MetadataCache()
        image = image_with_topic()
        cache.publish(image, 3, 4)
        view = _BrokerControllerView(_Client(), cache)  # type: ignore[arg-type]
        assert view.committed_image is image and not view.is_active
        try:
            await view.write(lambda image: None)  # type: ignore[arg-type,return-value]
            raise AssertionError("a broker wrote metadata")
        except NotControllerError as exc:
            assert exc.leader_id == 2

    asyncio.run(scenario())
