"""The partition side of transactions through the Kafka front (kio frames encoded and decoded as
on the wire) onto real ReplicaManagers and PartitionLogs (tests/unit/replica_harness.py):
transactional Produce, WriteTxnMarkers (API 27) answered once replicated, Fetch with
isolation_level 1 up to the last stable offset with the aborted transactions, the LSO in both
isolation levels, ListOffsets by isolation level (latest, by time and max timestamp bounded by
the LSO for read_committed), and API 27's authorization."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

from broker.api import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Request
from broker.kafka.apis import KafkaApis
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.versions import SUPPORTED, ApiKey
from broker.records import TRANSACTIONAL_BIT, build_batch, decode_records, scan_batches
from kraft.errors import Errors
from metadata.authorizer.standard import StandardAuthorizer
from tests.unit.replica_harness import TOPIC, Cluster, settle

NAMES = {ApiKey.PRODUCE: "ProduceRequest", ApiKey.FETCH: "FetchRequest",
         ApiKey.LIST_OFFSETS: "ListOffsetsRequest",
         ApiKey.WRITE_TXN_MARKERS: "WriteTxnMarkersRequest"}
PID = 4000


class Front:
    def __init__(self, cluster: Cluster, broker_id: int = 1,
                 authorizer: StandardAuthorizer | None = None) -> None:
        self.apis = KafkaApis(cluster.nodes[broker_id].manager, lambda: cluster.metadata.image,
                              "c", authorizer=authorizer)

    async def call(self, api_key: int, version: int, principal: str = "User:ANONYMOUS",
                   **fields: Any) -> Any:
        module = request_module(api_key, version)
        frame = encode_request(3, "client", build(module, NAMES[ApiKey(api_key)], **fields))
        request = decode_request(frame[4:])
        context = Request(client_id="client", listener="PLAINTEXT", peer="10.0.0.9:5555",
                          api_version=version, principal=principal)
        reply = await self.apis.handle(request, context)
        _, response = decode_response(api_key, version, encode_response(3, reply.response)[4:])
        return response

    async def produce(self, batch: bytes, partition: int = 0) -> tuple[int, int]:
        module = request_module(ApiKey.PRODUCE, 9)
        data = build(module, "PartitionProduceData", index=partition, records=batch)
        answer = await self.call(
            ApiKey.PRODUCE, 9, transactional_id="app", acks=1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(build(module, "TopicProduceData", name=TOPIC, partition_data=(data,)),))
        part = answer.responses[0].partition_responses[0]
        return int(part.error_code), int(part.base_offset)

    async def markers(self, commit: bool, epoch: int = 0, coordinator_epoch: int = 5,
                      partitions: tuple[int, ...] = (0,), principal: str = "User:ANONYMOUS",
                      pid: int = PID) -> dict[int, int]:
        module = request_module(ApiKey.WRITE_TXN_MARKERS, 1)
        marker = build(module, "WritableTxnMarker", producer_id=pid, producer_epoch=epoch,
                       transaction_result=commit, coordinator_epoch=coordinator_epoch,
                       topics=(build(module, "WritableTxnMarkerTopic", name=TOPIC,
                                     partition_indexes=partitions),))
        answer = await self.call(ApiKey.WRITE_TXN_MARKERS, 1, principal, markers=(marker,))
        (result,) = answer.markers
        assert result.producer_id == pid
        return {int(p.partition_index): int(p.error_code)
                for t in result.topics for p in t.partitions}

    async def fetch(self, offset: int, isolation: int, version: int = 12,
                    max_bytes: int = 1 << 20) -> Any:
        module = request_module(ApiKey.FETCH, version)
        part = build(module, "FetchPartition", partition=0, current_leader_epoch=-1,
                     fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                     partition_max_bytes=max_bytes)
        answer = await self.call(
            ApiKey.FETCH, version, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
            max_bytes=1 << 20, isolation_level=isolation, session_id=0, session_epoch=-1,
            topics=(build(module, "FetchTopic", topic=TOPIC, partitions=(part,)),),
            forgotten_topics_data=(), rack_id="")
        return answer.responses[0].partitions[0]

    async def latest(self, isolation: int) -> int:
        module = request_module(ApiKey.LIST_OFFSETS, 7)
        part = build(module, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1,
                     timestamp=-1)
        answer = await self.call(ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=isolation,
                                 topics=(build(module, "ListOffsetsTopic", name=TOPIC,
                                               partitions=(part,)),))
        return int(answer.topics[0].partitions[0].offset)

    async def offset_at(self, timestamp: int, isolation: int) -> tuple[int, int, int, int]:
        """ListOffsets v7 by `timestamp`: (error, offset, timestamp, leader epoch)."""
        module = request_module(ApiKey.LIST_OFFSETS, 7)
        part = build(module, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1,
                     timestamp=timestamp)
        answer = await self.call(ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=isolation,
                                 topics=(build(module, "ListOffsetsTopic", name=TOPIC,
                                               partitions=(part,)),))
        p = answer.topics[0].partitions[0]
        return int(p.error_code), int(p.offset), int(p.timestamp), int(p.leader_epoch)


def txn(seq: int, count: int = 2, pid: int = PID, timestamp: int = 0) -> bytes:
    return build_batch([b"t%d-%d" % (seq, i) for i in range(count)], producer_id=pid,
                       producer_epoch=0, base_sequence=seq, attributes=TRANSACTIONAL_BIT,
                       base_timestamp=timestamp)


def values(records: bytes) -> list[bytes]:
    out = []
    for frame in scan_batches(records):
        batch = records[frame.position:frame.position + frame.size]
        if not frame.control:
            out += [r.value or b"" for r in decode_records(batch)]
    return out


def one_broker(tmp_path: Path, scenario: Any) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1,))
        cluster.create_topic(replicas=(1,))
        cluster.start()
        try:
            await scenario(cluster, Front(cluster))
        finally:
            await cluster.close()
    asyncio.run(main())


def test_write_txn_markers_is_advertised() -> None:
    assert SUPPORTED[ApiKey.WRITE_TXN_MARKERS] == (1, 1)


def test_read_committed_reads_up_to_the_lso_and_learns_the_aborted_transactions(
        tmp_path: Path) -> None:
    async def scenario(cluster: Cluster, front: Front) -> None:
        assert await front.produce(txn(0)) == (0, 0)  # 0-1: transaction 1
        assert await front.produce(build_batch([b"plain"])) == (0, 2)  # 2
        open_ = await front.fetch(0, 1)
        assert (open_.high_watermark, open_.last_stable_offset) == (3, 0)
        assert values(open_.records or b"") == []  # nothing stable yet
        uncommitted = await front.fetch(0, 0)
        assert uncommitted.last_stable_offset == 0  # the LSO in both isolation levels
        assert values(uncommitted.records) == [b"t0-0", b"t0-1", b"plain"]
        assert uncommitted.aborted_transactions is None
        assert (await front.latest(1), await front.latest(0)) == (0, 3)

        assert await front.markers(commit=False) == {0: Errors.NONE}  # 3: ABORT
        assert await front.produce(txn(2)) == (0, 4)  # 4-5: transaction 2
        assert await front.markers(commit=True) == {0: Errors.NONE}  # 6: COMMIT
        done = await front.fetch(0, 1)
        assert (done.high_watermark, done.last_stable_offset) == (7, 7)
        assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(PID, 0)]
        # The consumer drops the aborted records itself, with the list and the ABORT marker.
        assert values(done.records) == [b"t0-0", b"t0-1", b"plain", b"t2-0", b"t2-1"]
        later = await front.fetch(4, 1)
        assert list(later.aborted_transactions) == []
        first = await front.fetch(0, 1, max_bytes=1)  # one batch (0-1)
        assert values(first.records) == [b"t0-0", b"t0-1"]
        assert [a.first_offset for a in first.aborted_transactions] == [0]
        # An aborted transaction past the returned batches is not named (Kafka's bound).
        assert await front.produce(build_batch([b"plain-2"])) == (0, 7)
        assert await front.produce(txn(4)) == (0, 8)
        assert await front.markers(commit=False) == {0: Errors.NONE}  # 10
        assert list((await front.fetch(7, 1, max_bytes=1)).aborted_transactions) == []
        assert [a.first_offset for a in (await front.fetch(7, 1)).aborted_transactions] == [8]
        assert await front.latest(1) == 11
    one_broker(tmp_path, scenario)


def test_list_offsets_by_time_for_read_committed_stops_at_the_lso(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster, front: Front) -> None:
        assert await front.produce(build_batch([b"early"], base_timestamp=1000)) == (0, 0)
        assert await front.produce(txn(0, timestamp=2000)) == (0, 1)  # 1-2: still open
        assert await front.produce(build_batch([b"late"], base_timestamp=3000)) == (0, 3)
        epoch = (await front.offset_at(500, 0))[3]
        # As Kafka: a record at or past the LSO is no answer for read_committed (offset and
        # timestamp -1, no epoch), the HW bounds read_uncommitted; earliest is the log start.
        asked = (500, 1500, 2500, MAX_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)
        none = (0, -1, -1, -1)
        assert [await front.offset_at(ts, 1) for ts in asked] == [
            (0, 0, 1000, epoch), none, none, none, (0, 0, -1, epoch), (0, 1, -1, epoch)]
        assert [await front.offset_at(ts, 0) for ts in asked] == [
            (0, 0, 1000, epoch), (0, 1, 2000, epoch), (0, 3, 3000, epoch), (0, 3, 3000, epoch),
            (0, 0, -1, epoch), (0, 4, -1, epoch)]
        assert await front.markers(commit=True) == {0: Errors.NONE}  # 4: the LSO is 5
        assert [await front.offset_at(ts, 1) for ts in (1500, 2500)] == [
            (0, 1, 2000, epoch), (0, 3, 3000, epoch)]
    one_broker(tmp_path, scenario)


def test_a_marker_is_answered_once_replicated(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path)
        cluster.create_topic()
        cluster.start()
        front = Front(cluster)
        try:
            for broker in (2, 3):
                await cluster.nodes[broker].pump()  # the followers join: HW is confirmed
            assert (await front.produce(txn(0)))[0] == Errors.NONE
            writing = asyncio.ensure_future(front.markers(commit=True))
            await settle()
            assert not writing.done()  # acks=all: waits for the ISR
            leader = cluster.nodes[1].log()
            assert leader.end_offset == 3
            assert (await front.fetch(0, 1)).last_stable_offset == 0
            for broker in (2, 3):
                await cluster.nodes[broker].pump()
            for broker in (2, 3):
                await cluster.nodes[broker].pump()  # the fetch that reports the new LEO
            assert await asyncio.wait_for(writing, 5) == {0: Errors.NONE}
            assert (await front.fetch(0, 1)).last_stable_offset == 3
            follower = cluster.nodes[2].log()
            assert follower.open_transactions() == {}
        finally:
            await cluster.close()
    asyncio.run(main())


def test_fenced_and_misdirected_markers(tmp_path: Path) -> None:
    async def scenario(cluster: Cluster, front: Front) -> None:
        await front.produce(txn(0))
        assert await front.markers(commit=False, coordinator_epoch=5) == {0: Errors.NONE}
        # A coordinator epoch below the last marker's: TRANSACTION_COORDINATOR_FENCED.
        assert await front.markers(commit=True, coordinator_epoch=4) == {0: 52}
        assert await front.markers(commit=True, epoch=1) == {0: Errors.NONE}  # epoch bumped
        assert await front.markers(commit=True, epoch=0, coordinator_epoch=6) == {
            0: Errors.INVALID_PRODUCER_EPOCH}
        assert await front.markers(commit=True, partitions=(9,)) == {
            9: Errors.UNKNOWN_TOPIC_OR_PARTITION}
    one_broker(tmp_path, scenario)


def test_write_txn_markers_needs_cluster_action(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1,))
        cluster.create_topic(replicas=(1,))
        cluster.start()
        try:
            front = Front(cluster, authorizer=StandardAuthorizer(["User:broker"]))
            front.apis._authorizer.load(())  # type: ignore[union-attr]
            assert await front.markers(True, principal="User:alice") == {
                0: Errors.CLUSTER_AUTHORIZATION_FAILED}
            assert cluster.nodes[1].log().end_offset == 0
            assert await front.markers(True, principal="User:broker") == {0: Errors.NONE}
        finally:
            await cluster.close()
    asyncio.run(main())
