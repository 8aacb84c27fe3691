"""A tiny in-process data-plane cluster for the replica-layer unit tests: real PartitionLogs
in tmp_path, real metadata images (MetadataDelta replaying metadata.records), an injected
clock, and fakes only for the network: a LeaderClient that serves a follower's Fetch and
ListOffsets from another broker's ReplicaManager, and an AlterPartition the test answers.

Fetchers are driven by hand (`Node.pump`): each broker's background fetcher task stays parked
in `connect` (the harness never completes it), and the test calls the fetcher's one-round
method with the in-process client, so every replication step is deterministic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.api import (
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
    ListOffsetsPartition,
    ListOffsetsResult,
    ProducePartition,
    ProducePartitionResult,
)
from broker.log.log_manager import LogManager
from broker.records import build_batch
from broker.replica.fetch_sessions import INVALID_SESSION_ID, SessionResponse
from broker.replica.fetcher import FetcherManager, ReplicaFetcher
from broker.replica.isr import IsrUpdater
from broker.replica.manager import ReplicaConfig, ReplicaManager
from kraft.errors import Errors
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from metadata.rpc import broker_pb2 as pb

TOPIC = "t"
TOPIC_ID = "5zoAlv-xEh9xRANKXt1Lbg"
OTHER_ID = "b0sJ5JiHR6qbTzmD8yaGyQ"
INC = "7yd6v3LdRPy1BLJbSb6FQQ"
LAG_MS = 30_000


def batch(n: int = 1, value: bytes = b"v", **kwargs: Any) -> bytes:
    return build_batch([value + b"%d" % i for i in range(n)], **kwargs)


def broker_epoch(broker_id: int) -> int:
    return 10 + broker_id


def broker_record(broker_id: int, epoch: int | None = None, fenced: bool = False,
                  shutting_down: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id, INC, broker_epoch(broker_id) if epoch is None else epoch,
        (Endpoint("PLAINTEXT", f"b{broker_id}", 9000 + broker_id),), fenced=fenced,
        in_controlled_shutdown=shutting_down)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class Metadata:
    """The metadata log as far as the tests need it: replay records, read the image."""

    def __init__(self) -> None:
        self.image: MetadataImage = EMPTY_IMAGE
        self.offset = 0

    def replay(self, *records: Record) -> MetadataImage:
        delta = MetadataDelta(self.image)
        for record in records:
            self.offset += 1
            delta.replay(record, self.offset, 1, 1_000 + self.offset)
        self.image = delta.apply()
        return self.image

    def partition(self, partition: int = 0, topic: str = TOPIC) -> Any:
        image_topic = self.image.topic(topic)
        assert image_topic is not None
        return image_topic.partition(partition)


@dataclass
class AlterCall:
    request: pb.AlterPartitionRequest
    future: asyncio.Future[pb.AlterPartitionResponse]

    def isr(self) -> tuple[int, ...]:
        return tuple(b.broker_id for b in self.request.topics[0].partitions[0].new_isr)

    def isr_epochs(self) -> dict[int, int]:
        return {b.broker_id: b.broker_epoch for b in self.request.topics[0].partitions[0].new_isr}

    def data(self) -> pb.AlterPartitionRequest.PartitionData:
        return self.request.topics[0].partitions[0]

    def answer(self, error: int = Errors.NONE, isr: Sequence[int] | None = None,
               partition_epoch: int | None = None, leader_epoch: int | None = None,
               recovery: int | None = None) -> None:
        data = self.data()
        self.future.set_result(pb.AlterPartitionResponse(partitions=[
            pb.AlterPartitionResponse.PartitionResult(
                topic_id=self.request.topics[0].topic_id,
                partition_index=data.partition_index, error_code=error,
                leader_id=self.request.broker_id,
                leader_epoch=data.leader_epoch if leader_epoch is None else leader_epoch,
                isr=list(self.isr() if isr is None else isr),
                leader_recovery_state=(data.leader_recovery_state if recovery is None
                                       else recovery),
                partition_epoch=(data.partition_epoch + 1 if partition_epoch is None
                                 else partition_epoch))]))


class FakeController:
    """AlterPartition as a fake: each call parks until the test answers it, or, with `auto`,
    is applied to the metadata as the controller would (PartitionChangeRecord) and published."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.calls: list[AlterCall] = []
        self.auto = False

    def for_broker(self, broker_id: int) -> Callable[
            [pb.AlterPartitionRequest], Awaitable[pb.AlterPartitionResponse]]:
        async def alter(request: pb.AlterPartitionRequest) -> pb.AlterPartitionResponse:
            future: asyncio.Future[pb.AlterPartitionResponse] = (
                asyncio.get_running_loop().create_future())
            call = AlterCall(request, future)
            self.calls.append(call)
            if self.auto:
                data = call.data()
                self.cluster.metadata.replay(PartitionChangeRecord(
                    data.partition_index, request.topics[0].topic_id, isr=call.isr(),
                    leader_recovery_state=data.leader_recovery_state))
                registration = self.cluster.metadata.partition(data.partition_index)
                self.cluster.publish()
                call.answer(isr=registration.isr, partition_epoch=registration.partition_epoch)
            return await future

        return alter


class InProcessLeader:
    """The follower's connection to a leader: serves from that broker's ReplicaManager."""

    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager
        self.fetch_calls: list[FetchParams] = []

    def _check_up(self) -> None:
        if self.manager._closed:
            raise ConnectionError("the broker is down")

    async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
        self._check_up()
        self.fetch_calls.append(params)
        try:
            results = await self.manager.fetch(params)
        except ValueError:  # a closed log: the broker went down during the long poll
            self._check_up()
            raise
        self._check_up()
        return results

    async def fetch_session(self, params: FetchParams, session_id: int, epoch: int,
                            forgotten: Sequence[FetchPartition], names: Mapping[str, str]
                            ) -> SessionResponse:
        """As a leader with no session cache answers: in full, session id 0 (so the fetcher
        keeps sending full fetches; tests/unit/test_fetch_sessions.py has the sessions)."""
        results = await self.fetch(params)
        return SessionResponse(Errors.NONE, INVALID_SESSION_ID, {
            (p.topic, p.partition): r for p, r in zip(params.partitions, results, strict=True)})

    async def list_offsets(self, replica_id: int, partitions: list[ListOffsetsPartition]
                           ) -> list[ListOffsetsResult]:
        self._check_up()
        return self.manager.list_offsets(replica_id, 0, partitions)

    async def close(self) -> None:
        pass


@dataclass
class Node:
    broker_id: int
    cluster: Cluster
    logs: LogManager
    manager: ReplicaManager
    epoch: int
    connected: list[int] = field(default_factory=list)
    client: InProcessLeader | None = None  # the last one `pump` used

    def partition(self, partition: int = 0, topic: str = TOPIC) -> Any:
        return self.manager.partitions[(topic, partition)]

    def log(self, partition: int = 0, topic: str = TOPIC) -> Any:
        return self.logs.get(topic, partition)

    async def produce(self, *batches: bytes, acks: int = -1, timeout_ms: int = 30_000,
                      partition: int = 0) -> list[ProducePartitionResult]:
        return await self.manager.produce(
            acks, timeout_ms, [ProducePartition(TOPIC, partition, b) for b in batches])

    async def pump(self, partition: int = 0) -> None:
        """One replica-fetcher round for `partition` against its current leader (no wait:
        the harness config has replica.fetch.wait.max.ms 0)."""
        tp = (TOPIC, partition)
        mine = self.partition(partition)
        leader = self.cluster.nodes[mine.leader]
        fetcher = self.manager.fetchers.fetchers[mine.leader]
        state = fetcher.partitions[tp]
        state.retry_at = 0.0
        fetcher._restart = False
        fetcher._wakeup.clear()
        self.client = InProcessLeader(leader.manager)
        await fetcher._fetch_once(self.client, {tp: state})

    def fetcher(self, leader: int) -> ReplicaFetcher:
        return self.manager.fetchers.fetchers[leader]

    async def consume(self, offset: int, partition: int = 0, epoch: int = -1,
                      max_wait_ms: int = 0, min_bytes: int = 1) -> FetchPartitionResult:
        params = FetchParams([FetchPartition(TOPIC, partition, offset, 1 << 20,
                                             current_leader_epoch=epoch)],
                             max_wait_ms=max_wait_ms, min_bytes=min_bytes)
        return (await self.manager.fetch(params))[0]


class Cluster:
    """Brokers 1..n, a topic `t` with the given partitions; nothing published until
    `start()`."""

    def __init__(self, tmp_path: Path, brokers: Sequence[int] = (1, 2, 3),
                 clock: Clock | None = None, config: ReplicaConfig | None = None,
                 live: bool = False) -> None:
        """With `live`, the fetchers run by themselves over in-process connections."""
        self.tmp_path = tmp_path
        self.live = live
        self.clock = clock or Clock()
        self.config = config or ReplicaConfig(replica_fetch_wait_max_ms=0,
                                              replica_fetch_backoff_ms=1)
        self.metadata = Metadata()
        self.controller = FakeController(self)
        self.nodes: dict[int, Node] = {}
        self.metadata.replay(*(broker_record(b) for b in brokers))
        for b in brokers:
            self.add_node(b)

    def add_node(self, broker_id: int, epoch: int | None = None) -> Node:
        epoch = broker_epoch(broker_id) if epoch is None else epoch
        logs = LogManager([str(self.tmp_path / f"b{broker_id}")], dict)
        never: asyncio.Event = asyncio.Event()

        async def connect(host: str, port: int) -> Any:
            node.connected.append(port - 9000)
            if self.live:
                return InProcessLeader(self.nodes[port - 9000].manager)
            await never.wait()  # the tests pump fetches by hand
            raise ConnectionError("unreachable")

        fetchers = FetcherManager(broker_id, self.config, lambda: node.epoch, connect)
        isr = IsrUpdater(broker_id, self.controller.for_broker(broker_id), lambda: node.epoch)
        manager = ReplicaManager(broker_id, logs, self.config, fetchers, isr,
                                 now_ms=self.clock)
        node = Node(broker_id, self, logs, manager, epoch)
        self.nodes[broker_id] = node
        return node

    def create_topic(self, replicas: Sequence[int] = (1, 2, 3), isr: Sequence[int] | None = None,
                     leader: int | None = None, partitions: int = 1, min_isr: int | None = None,
                     topic: str = TOPIC, topic_id: str = TOPIC_ID) -> None:
        records: list[Record] = [TopicRecord(topic, topic_id)]
        if min_isr is not None:
            records.append(ConfigRecord(ConfigResourceType.TOPIC, topic,
                                        "min.insync.replicas", str(min_isr)))
        for p in range(partitions):
            records.append(PartitionRecord(
                p, topic_id, tuple(replicas), tuple(replicas if isr is None else isr),
                leader=replicas[0] if leader is None else leader))
        self.metadata.replay(*records)

    def change(self, partition: int = 0, topic_id: str = TOPIC_ID, **kwargs: Any) -> None:
        self.metadata.replay(PartitionChangeRecord(partition, topic_id, **kwargs))
        self.publish()

    def start(self) -> None:
        for node in self.nodes.values():
            node.manager.on_metadata_update(None, self.metadata.image, None)  # type: ignore[arg-type]
            node.manager.activate()

    def publish(self, only: Sequence[int] | None = None) -> None:
        for broker_id, node in self.nodes.items():
            if only is None or broker_id in only:
                node.manager.on_metadata_update(None, self.metadata.image, None)  # type: ignore[arg-type]

    async def stop(self, broker_id: int) -> None:
        """A crash as far as the replica layer goes: the tasks end, the logs close (nothing
        unwritten is lost here: the harness's logs write through), no HW checkpoint."""
        node = self.nodes.pop(broker_id)
        await node.manager.close()
        await node.logs.close()

    def restart(self, broker_id: int, epoch: int | None = None) -> Node:
        """Open the broker's log dir again and catch it up with the metadata."""
        node = self.add_node(broker_id, epoch)
        node.manager.on_metadata_update(None, self.metadata.image, None)  # type: ignore[arg-type]
        node.manager.activate()
        return node

    async def close(self) -> None:
        for node in self.nodes.values():
            await node.manager.close()
            await node.logs.close()


async def settle() -> None:
    """Let the tasks the code under test spawned (the AlterPartition sender) run a few turns."""
    for _ in range(5):
        await asyncio.sleep(0)


Scenario = Callable[[Cluster], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario, live: bool = False,
        config: ReplicaConfig | None = None, **topic: object) -> None:
    """A cluster with topic `t` (create_topic's keywords), started, then `scenario`."""
    async def main() -> None:
        cluster = Cluster(tmp_path, live=live, config=config)
        cluster.create_topic(**topic)  # type: ignore[arg-type]
        cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.close()

    asyncio.run(main())
