"""Consumer-group lag on the metrics port (broker/kafka/group_lag.py): a real coordinator with
committed offsets, partitions this broker holds (their high watermark) and one it does not (the
leader's ListOffsets answer, refreshed), read through a Prometheus registry as a scrape does;
the per-partition series are capped and the topic sums stay."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.api import ListOffsetsPartition, ListOffsetsResult
from broker.group.consumer_protocol.heartbeat_request import Heartbeat
from broker.group.consumer_protocol.manager import ConsumerGroupManager
from broker.group.consumer_protocol.records import TopicMetadata
from broker.group.offsets import CommitPartition, commit_offsets
from broker.kafka import group_lag
from broker.kafka.group_lag import GroupLag
from metadata.image import PartitionRegistration
from metadata.records import Endpoint
from tests.unit.group_harness import Harness
from tests.unit.test_kafka_fakes import make_image


@dataclass
class Replica:
    high_watermark: int


@dataclass
class Replicas:
    image: Any
    partitions: dict[tuple[str, int], Replica] = field(default_factory=dict)


class Leader:
    """Broker 2's answers to ListOffsets."""

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = ends
        self.asked: list[list[ListOffsetsPartition]] = []

    async def list_offsets(self, replica_id: int,
                           partitions: list[ListOffsetsPartition]) -> list[ListOffsetsResult]:
        self.asked.append(partitions)
        return [ListOffsetsResult(offset=self.ends[(p.topic, p.partition)]) for p in partitions]

    async def close(self) -> None:
        pass


def setup() -> tuple[Harness, GroupLag, CollectorRegistry, Leader]:
    one = PartitionRegistration((1,), (1,), leader=1)
    remote = PartitionRegistration((2,), (2,), leader=2)
    image = make_image({1: [Endpoint("INTERNAL", "h1", 9091)],
                        2: [Endpoint("INTERNAL", "h2", 9092)]},
                       {"t": {0: one, 1: one}, "r": {0: remote}})
    replicas = Replicas(image, {("t", 0): Replica(100), ("t", 1): Replica(50)})
    harness = Harness()
    leader = Leader({("r", 0): 30})
    connected: list[tuple[str, int]] = []

    async def connect(host: str, port: int) -> Leader:
        connected.append((host, port))
        return leader

    registry = CollectorRegistry()
    lag = GroupLag(harness.coordinator, replicas, connect, "INTERNAL",  # type: ignore[arg-type]
                   registry)
    return harness, lag, registry, leader


def commit(harness: Harness, group: str, offsets: dict[tuple[str, int], int]) -> None:
    asyncio.run(commit_offsets(harness.coordinator, group, -1, "", None, [
        CommitPartition(t, p, o) for (t, p), o in offsets.items()]))


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels.values()): s.value for metric in registry.collect()
            for s in metric.samples if s.name == name}


def test_lag_is_the_log_end_minus_the_committed_offset_with_remote_ends_refreshed() -> None:
    harness, lag, registry, leader = setup()
    commit(harness, "billing", {("t", 0): 40, ("t", 1): 50, ("r", 0): 10})
    assert samples(registry, "kraft_broker_group_lag") == {
        ("billing", "t", "0"): 60, ("billing", "t", "1"): 0}  # r-0's end not known yet
    asyncio.run(lag.refresh())
    assert [[(p.topic, p.partition, p.timestamp) for p in asked]
            for asked in leader.asked] == [[("r", 0, -1)]]  # only what no replica here holds
    assert samples(registry, "kraft_broker_group_lag")[("billing", "r", "0")] == 20
    assert samples(registry, "kraft_broker_group_topic_lag") == {
        ("billing", "t"): 60, ("billing", "r"): 20}
    assert samples(registry, "kraft_broker_group_state") == {("billing", "Empty"): 1}
    assert samples(registry, "kraft_broker_group_members") == {("billing",): 0}


def test_per_partition_series_are_capped_and_topic_sums_stay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    harness, _, registry, _ = setup()
    monkeypatch.setattr(group_lag, "MAX_PARTITION_SERIES", 3)
    commit(harness, "a", {("t", 0): 1, ("t", 1): 2})
    commit(harness, "b", {("t", 0): 3, ("t", 1): 4})
    assert samples(registry, "kraft_broker_group_lag") == {
        ("a", "t", "0"): 99, ("a", "t", "1"): 48, ("b", "t", "0"): 97}
    assert samples(registry, "kraft_broker_group_lag_series_dropped") == {(): 1}
    assert samples(registry, "kraft_broker_group_topic_lag") == {("a", "t"): 147,
                                                                 ("b", "t"): 143}


def test_consumer_protocol_groups_count_their_members_and_show_their_state() -> None:
    harness, _, registry, _ = setup()
    topic = TopicMetadata(uuid.uuid4(), "t", 2)
    manager = ConsumerGroupManager(harness.coordinator,
                                   lambda name: topic if name == "t" else None, lambda: ["t"])

    async def join(member: str) -> None:
        result = await manager.heartbeat(Heartbeat(
            "kip848", member, 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",),
            owned={}))
        assert result.error == 0, result

    asyncio.run(join("m1"))
    asyncio.run(join("m2"))
    commit(harness, "classic", {("t", 0): 1})
    assert samples(registry, "kraft_broker_group_members") == {("kip848",): 2,
                                                              ("classic",): 0}
    # m1 took both partitions at its join; m2's join moved one, which m1 has not given up.
    assert samples(registry, "kraft_broker_group_state") == {("kip848", "Reconciling"): 1,
                                                            ("classic", "Empty"): 1}
