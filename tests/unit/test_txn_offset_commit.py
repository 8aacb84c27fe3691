"""TxnOffsetCommit (API 28) through kio frames on a real GroupStorage and ReplicaManager
(tests/unit/replica_harness.py): a transaction's offsets are written to __consumer_offsets as
the producer's transactional batch, invisible to OffsetFetch until the coordinator's COMMIT
marker (WriteTxnMarkers to the offsets partition) is replicated, dropped at ABORT; a new
leader's load resolves them from the log (committed, aborted, still open)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from broker.api import Request
from broker.group.config import GroupConfig
from broker.group.offsets import fetch_offsets
from broker.group.placement import OFFSETS_TOPIC
from broker.group.storage import GroupStorage
from broker.group.txn_offsets import Resolved, resolve
from broker.kafka.apis import KafkaApis
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.versions import ApiKey
from broker.records import parse_header
from kraft.errors import Errors
from tests.unit.replica_harness import Cluster
from tests.unit.test_group_storage import OFFSETS_ID, loaded

CONFIG = GroupConfig(offsets_topic_num_partitions=1, offsets_topic_replication_factor=1)
PID = 5000


class Front:
    def __init__(self, cluster: Cluster, storage: GroupStorage) -> None:
        self.storage = storage
        self.apis = KafkaApis(cluster.nodes[1].manager, lambda: cluster.metadata.image, "c")
        self.apis.groups = storage

    async def call(self, api_key: int, version: int, name: str, **fields: Any) -> Any:
        module = request_module(api_key, version)
        frame = encode_request(9, "client", build(module, name, **fields))
        reply = await self.apis.handle(decode_request(frame[4:]), Request(
            client_id="client", listener="PLAINTEXT", peer="10.0.0.9:5555", api_version=version))
        return decode_response(api_key, version, encode_response(9, reply.response)[4:])[1]

    async def commit(self, offset: int, epoch: int = 0, version: int = 3,
                     group: str = "g") -> dict[int, int]:
        module = request_module(ApiKey.TXN_OFFSET_COMMIT, version)
        parts = tuple(build(module, "TxnOffsetCommitRequestPartition", partition_index=p,
                            committed_offset=offset + p, committed_leader_epoch=-1,
                            committed_metadata="m") for p in (0, 1))
        answer = await self.call(
            ApiKey.TXN_OFFSET_COMMIT, version, "TxnOffsetCommitRequest", transactional_id="app",
            group_id=group, producer_id=PID, producer_epoch=epoch, generation_id=-1,
            member_id="", group_instance_id=None,
            topics=(build(module, "TxnOffsetCommitRequestTopic", name="t", partitions=parts),))
        return {int(p.partition_index): int(p.error_code)
                for t in answer.topics for p in t.partitions}

    async def marker(self, commit: bool, epoch: int = 0) -> int:
        module = request_module(ApiKey.WRITE_TXN_MARKERS, 1)
        marker = build(module, "WritableTxnMarker", producer_id=PID, producer_epoch=epoch,
                       transaction_result=commit, coordinator_epoch=1,
                       topics=(build(module, "WritableTxnMarkerTopic", name=OFFSETS_TOPIC,
                                     partition_indexes=(0,)),))
        answer = await self.call(ApiKey.WRITE_TXN_MARKERS, 1, "WriteTxnMarkersRequest",
                                 markers=(marker,))
        return int(answer.markers[0].topics[0].partitions[0].error_code)

    def offsets(self, storage: GroupStorage | None = None) -> list[int]:
        coordinator = (storage or self.storage).coordinator
        _, fetched = fetch_offsets(coordinator, "g", [("t", 0), ("t", 1)])
        return [f.offset for f in fetched]


def run(tmp_path: Path, body: Callable[[Cluster, Front], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1,))
        cluster.create_topic(replicas=(1,), topic=OFFSETS_TOPIC, topic_id=OFFSETS_ID)
        cluster.create_topic(replicas=(1,), partitions=2)
        storage = GroupStorage(cluster.nodes[1].manager, CONFIG, now_ms=cluster.clock)
        cluster.start()
        try:
            await loaded(storage)
            await body(cluster, Front(cluster, storage))
        finally:
            await storage.close()
            await cluster.close()
    asyncio.run(main())


async def restarted(cluster: Cluster, front: Front) -> GroupStorage:
    await front.storage.close()
    await cluster.stop(1)
    node = cluster.add_node(1)
    again = GroupStorage(node.manager, CONFIG, now_ms=cluster.clock)
    node.manager.on_metadata_update(None, cluster.metadata.image, None)  # type: ignore[arg-type]
    node.manager.activate()
    await loaded(again)
    return again


def test_offsets_become_visible_at_commit_and_are_dropped_at_abort(tmp_path: Path) -> None:
    async def body(cluster: Cluster, front: Front) -> None:
        assert await front.commit(10) == {0: Errors.NONE, 1: Errors.NONE}
        log = cluster.nodes[1].log(0, OFFSETS_TOPIC)
        first = parse_header(log.read(0, 1 << 20, log.end_offset))
        assert (first.transactional, first.producer_id, first.base_sequence) == (True, PID, 0)
        assert front.offsets() == [-1, -1]  # pending: not visible
        assert front.storage.txn_offsets.pending_count("g") == 2
        assert await front.marker(commit=True) == Errors.NONE
        assert front.offsets() == [10, 11]
        assert await front.commit(20) == {0: Errors.NONE, 1: Errors.NONE}  # next sequence
        assert await front.marker(commit=False) == Errors.NONE
        assert front.offsets() == [10, 11]  # aborted: dropped
        assert front.storage.txn_offsets.pending_count("g") == 0
        assert await front.commit(30) == {0: Errors.NONE, 1: Errors.NONE}  # left open

        again = await restarted(cluster, front)
        try:
            assert front.offsets(again) == [10, 11]  # committed kept, aborted and open not
            assert again.txn_offsets.pending_count("g") == 2
            front.apis = KafkaApis(cluster.nodes[1].manager, lambda: cluster.metadata.image,
                                   "c")
            front.apis.groups = again
            assert await front.marker(commit=True) == Errors.NONE
            assert front.offsets(again) == [30, 31]
        finally:
            await again.close()
    run(tmp_path, body)


def test_a_fenced_producer_and_an_unknown_partition(tmp_path: Path) -> None:
    async def body(cluster: Cluster, front: Front) -> None:
        assert await front.commit(10, epoch=2) == {0: Errors.NONE, 1: Errors.NONE}
        assert await front.commit(11, epoch=1) == {0: Errors.INVALID_PRODUCER_EPOCH,
                                                   1: Errors.INVALID_PRODUCER_EPOCH}
        module = request_module(ApiKey.TXN_OFFSET_COMMIT, 0)
        part = build(module, "TxnOffsetCommitRequestPartition", partition_index=7,
                     committed_offset=1, committed_metadata=None)
        answer = await front.call(
            ApiKey.TXN_OFFSET_COMMIT, 0, "TxnOffsetCommitRequest", transactional_id="app",
            group_id="g", producer_id=PID, producer_epoch=2,
            topics=(build(module, "TxnOffsetCommitRequestTopic", name="t", partitions=(part,)),))
        assert answer.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert answer.throttle_time == datetime.timedelta(0)
    run(tmp_path, body)


def test_a_marker_replicated_while_the_partition_loads_applies_after_the_load(
        tmp_path: Path) -> None:
    async def body(cluster: Cluster, front: Front) -> None:
        assert await front.commit(40) == {0: Errors.NONE, 1: Errors.NONE}
        storage = front.storage
        log = cluster.nodes[1].log(0, OFFSETS_TOPIC)
        data = log.read(0, 1 << 20, log.end_offset)
        # A new leadership's load read the log (the open transaction) ...
        storage.coordinator.begin_loading(0)
        resolved = Resolved()
        resolve(data, resolved)  # its one batch
        # ... and the marker is replicated before the load ends.
        assert await front.marker(commit=True) == Errors.NONE
        storage.coordinator.finish_loading(0, resolved.records)
        storage.txn_offsets.loaded(0, resolved.pending)
        assert front.offsets() == [40, 41]
        assert storage.txn_offsets.pending_count("g") == 0
    run(tmp_path, body)


def test_require_stable_offset_fetch_waits_for_the_transaction(tmp_path: Path) -> None:
    async def body(cluster: Cluster, front: Front) -> None:
        async def fetch(version: int, stable: bool) -> list[tuple[int, int]]:
            module = request_module(ApiKey.OFFSET_FETCH, version)
            if version >= 8:
                answer = await front.call(
                    ApiKey.OFFSET_FETCH, version, "OffsetFetchRequest", require_stable=stable,
                    groups=(build(module, "OffsetFetchRequestGroup", group_id="g", topics=(
                        build(module, "OffsetFetchRequestTopics", name="t",
                              partition_indexes=(0, 1)),)),))
                topics = answer.groups[0].topics
            else:
                answer = await front.call(
                    ApiKey.OFFSET_FETCH, version, "OffsetFetchRequest", group_id="g",
                    require_stable=stable, topics=(build(
                        module, "OffsetFetchRequestTopic", name="t", partition_indexes=(0, 1)),))
                topics = answer.topics
            return [(int(p.committed_offset), int(p.error_code))
                    for t in topics for p in t.partitions]

        assert await front.commit(10) == {0: Errors.NONE, 1: Errors.NONE}
        assert await front.marker(commit=True) == Errors.NONE
        assert await front.commit(20) == {0: Errors.NONE, 1: Errors.NONE}  # open
        unstable = [(-1, 88), (-1, 88)]  # UNSTABLE_OFFSET_COMMIT
        assert await fetch(8, stable=True) == unstable
        assert await fetch(7, stable=True) == unstable
        assert await fetch(8, stable=False) == [(10, 0), (11, 0)]
        assert await front.marker(commit=False) == Errors.NONE
        assert await fetch(8, stable=True) == [(10, 0), (11, 0)]
    run(tmp_path, body)
