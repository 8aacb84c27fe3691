"""The data plane's and the controller's Prometheus metrics, read from a registry after the
in-process data plane (replica_harness) was driven into the state each one counts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from broker.api import FetchParams, FetchPartition
from broker.kafka.apis import KafkaApis
from broker.kafka.client import KafkaClient
from broker.kafka.request_metrics import RequestMetrics
from broker.kafka.server import KafkaServer
from broker.replica.fetch_sessions import INITIAL_EPOCH, FetchSessionCache
from broker.replica.incremental_fetch import FetchSessions
from broker.replica.metrics import DataPlaneCollector
from metadata.controller_metrics import ControllerCollector
from tests.unit.replica_harness import TOPIC, TOPIC_ID, Cluster, batch, broker_epoch, run, settle


def registry_of(node: Any) -> CollectorRegistry:
    registry = CollectorRegistry()
    DataPlaneCollector(node.manager, registry)
    return registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    sample = registry.get_sample_value(name, labels)
    assert sample is not None, name
    return sample


def test_at_min_isr_and_under_min_isr_count_the_leader_partitions(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        # Led by broker 1, min.insync.replicas 2: at min, above it, below it; then one led
        # by broker 2 at min, which broker 1 does not count.
        c.create_topic(topic="at", topic_id="at-id", isr=(1, 2), min_isr=2)
        c.create_topic(topic="above", topic_id="above-id", min_isr=2)
        c.create_topic(topic="below", topic_id="below-id", isr=(1,), min_isr=2)
        c.create_topic(topic="other", topic_id="other-id", replicas=(2, 1, 3), isr=(2, 1),
                       min_isr=2)
        c.start()
        try:
            registry = registry_of(c.nodes[1])
            assert value(registry, "kraft_broker_at_min_isr_partitions") == 1
            assert value(registry, "kraft_broker_under_min_isr_partitions") == 1
            assert value(registry, "kraft_broker_under_replicated_partitions") == 2
            c.change(topic_id="at-id", isr=(1, 2, 3))  # the ISR grows past the minimum
            assert value(registry, "kraft_broker_at_min_isr_partitions") == 0
            assert value(registry_of(c.nodes[2]), "kraft_broker_at_min_isr_partitions") == 1
        finally:
            await c.close()

    asyncio.run(main())


def test_offline_partitions_on_brokers_and_the_active_controller(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        c.create_topic(partitions=3)
        c.start()
        try:
            registry = registry_of(c.nodes[1])
            assert value(registry, "kraft_broker_offline_partitions") == 0
            c.change(partition=0, leader=-1)
            c.change(partition=2, leader=-1)
            assert value(registry, "kraft_broker_offline_partitions") == 2
            controller = SimpleNamespace(is_active=True, committed_image=c.metadata.image)
            controllers = CollectorRegistry()
            ControllerCollector(controller, controllers)  # type: ignore[arg-type]
            assert value(controllers, "kraft_controller_offline_partitions") == 2
            assert value(controllers, "kraft_controller_active") == 1
            controller.is_active = False  # only the active controller reports them
            assert value(controllers, "kraft_controller_offline_partitions") == 0
            assert value(controllers, "kraft_controller_active") == 0
        finally:
            await c.close()

    asyncio.run(main())


def test_replication_bytes_in_counts_what_a_follower_appends(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        records = batch(3)
        await c.nodes[1].produce(records, acks=1)
        follower = registry_of(c.nodes[2])
        assert value(follower, "kraft_broker_replication_bytes_in_total") == 0
        await c.nodes[2].pump()
        assert value(follower, "kraft_broker_replication_bytes_in_total") == len(records)
        await c.nodes[2].pump()  # nothing new: nothing counted
        assert value(follower, "kraft_broker_replication_bytes_in_total") == len(records)
        assert value(registry_of(c.nodes[1]), "kraft_broker_replication_bytes_in_total") == 0

    run(tmp_path, scenario)


def test_purgatories_count_parked_produces_and_fetches(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        leader = registry_of(c.nodes[1])

        def parked(operation: str) -> tuple[float, float]:
            return (value(leader, "kraft_broker_purgatory_delayed_operations",
                          operation=operation),
                    value(leader, "kraft_broker_purgatory_size", operation=operation))

        assert parked("Produce") == parked("Fetch") == (0, 0)
        produce = asyncio.ensure_future(c.nodes[1].produce(batch(2)))  # acks=all
        await settle()
        assert not produce.done()
        assert parked("Produce") == (1, 1)
        assert parked("Fetch") == (0, 0)
        for _ in range(2):  # each follower gets the records, then reports them
            for follower in (2, 3):
                await c.nodes[follower].pump()
        await asyncio.wait_for(produce, 5)
        assert parked("Produce") == (0, 0)
        # A consumer at the high watermark waits for data.
        fetch = asyncio.ensure_future(c.nodes[1].consume(2, max_wait_ms=30_000))
        await settle()
        assert parked("Fetch") == (1, 1)
        await c.nodes[1].produce(batch(1), acks=1)
        for follower in (2, 3):
            await c.nodes[follower].pump()
            await c.nodes[follower].pump()
        await asyncio.wait_for(fetch, 5)
        assert parked("Fetch") == (0, 0)

    run(tmp_path, scenario)


def test_a_parked_session_fetch_is_in_the_purgatory_and_its_answer_is_counted(
        tmp_path: Path) -> None:
    """The fetch sessions park on their own event (broker/replica/incremental_fetch.py): the
    purgatory counts them too, and an incremental answer's bytes are replication bytes out."""
    async def main() -> None:
        c = Cluster(tmp_path, brokers=(1, 2))
        c.create_topic(replicas=(1, 2), partitions=4)
        c.start()
        leader = c.nodes[1].manager
        registry = registry_of(c.nodes[1])
        metrics = RequestMetrics(registry, lambda: c.metadata.image)
        apis = KafkaApis(leader, lambda: c.metadata.image, "c1", metrics=metrics,
                         fetch_sessions=FetchSessions(leader, FetchSessionCache(10)))
        server = KafkaServer(apis, "127.0.0.1", 0)
        client = KafkaClient("127.0.0.1", await server.start(), client_id="broker-2-fetcher")
        await client.connect()
        try:
            def params(partitions: list[FetchPartition], wait_ms: int) -> FetchParams:
                return FetchParams(partitions, max_wait_ms=wait_ms, replica_id=2,
                                   replica_epoch=broker_epoch(2))

            wanted = [FetchPartition(TOPIC, p, 0, 1 << 20, current_leader_epoch=0,
                                     log_start_offset=0, topic_id=TOPIC_ID) for p in range(4)]
            full = await client.fetch_session(params(wanted, 0), 0, INITIAL_EPOCH)
            names = {TOPIC_ID: TOPIC}
            await client.fetch_session(params([], 0), full.session_id, 1, (), names)
            parked = asyncio.ensure_future(
                client.fetch_session(params([], 30_000), full.session_id, 2, (), names))
            await settle()
            assert not parked.done()
            assert value(registry, "kraft_broker_purgatory_delayed_operations",
                         operation="Fetch") == 1
            assert value(registry, "kraft_broker_purgatory_size", operation="Fetch") == 4
            assert value(registry, "kraft_broker_replication_bytes_out_total") == 0
            records = batch(2)
            await c.nodes[1].produce(records, acks=1, partition=3)
            woken = await asyncio.wait_for(parked, 5)
            assert len(woken.results[(TOPIC, 3)].records) == len(records)  # epoch stamped
            assert value(registry, "kraft_broker_purgatory_delayed_operations",
                         operation="Fetch") == 0
            assert value(registry, "kraft_broker_replication_bytes_out_total") == len(records)
            assert value(registry, "kraft_broker_request_latency_seconds_count",
                         api="FetchFollower") == 3
        finally:
            await client.close()
            await server.close()
            await c.close()

    asyncio.run(main())
