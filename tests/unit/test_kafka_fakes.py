"""An in-memory DataPlane and metadata image for testing the Kafka front (broker/kafka) with
the real clients, without a replica manager: every partition is a list of batches on one
broker, and the high watermark is the log end (every write counts as replicated at once)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    EpochEndPartition,
    EpochEndResult,
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
    LegacyOffsetsPartition,
    LegacyOffsetsResult,
    ListOffsetsPartition,
    ListOffsetsResult,
    ProducePartition,
    ProducePartitionResult,
    ProducerIdAndEpoch,
)
from kraft.errors import Errors
from metadata.image import (
    BrokerRegistration,
    ClusterImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from metadata.records import Endpoint

_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a v2 batch
_MAX_TIMESTAMP = struct.Struct(">q")  # at byte 35


@dataclass
class FakePartition:
    leader_epoch: int = 0
    batches: list[tuple[int, bytes]] = field(default_factory=list)  # (base offset, bytes)
    log_end: int = 0

    def append(self, batch: bytes) -> int:
        base = self.log_end
        patched = bytearray(batch)
        patched[0:8] = base.to_bytes(8, "big", signed=True)
        patched[12:16] = self.leader_epoch.to_bytes(4, "big", signed=True)
        self.batches.append((base, bytes(patched)))
        self.log_end = base + _LAST_OFFSET_DELTA.unpack_from(batch, 23)[0] + 1
        return base

    def read(self, offset: int, max_bytes: int) -> bytes:
        out = bytearray()
        for base, batch in self.batches:
            last = base + _LAST_OFFSET_DELTA.unpack_from(batch, 23)[0]
            if last < offset:
                continue
            if out and len(out) + len(batch) > max_bytes:
                break
            out += batch  # the first batch goes whole even above max_bytes (KIP-74)
        return bytes(out)


class InMemoryDataPlane:
    """broker.api.DataPlane over dicts. `calls` records what the front asked, in order."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], FakePartition] = {}
        self.calls: list[tuple[str, Any]] = []
        self.next_producer_id = 1000
        self._appended = asyncio.Event()
        self.produce_errors: dict[tuple[str, int], Errors] = {}

    def add(self, topic: str, count: int = 1, leader_epoch: int = 0) -> None:
        for index in range(count):
            self.partitions[(topic, index)] = FakePartition(leader_epoch)

    async def produce(
        self, acks: int, timeout_ms: int, partitions: Sequence[ProducePartition]
    ) -> list[ProducePartitionResult]:
        # Appends before the first await, as the real data plane promises.
        self.calls.append(("produce", (acks, timeout_ms, tuple(partitions))))
        results = []
        for p in partitions:
            log = self.partitions.get((p.topic, p.partition))
            forced = self.produce_errors.get((p.topic, p.partition))
            if forced is not None:
                results.append(ProducePartitionResult(error=forced))
            elif log is None:
                results.append(ProducePartitionResult(error=Errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                results.append(ProducePartitionResult(base_offset=log.append(p.records),
                                                      log_start_offset=0))
        self._appended.set()
        self._appended = asyncio.Event()
        await asyncio.sleep(0)
        return results

    async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
        self.calls.append(("fetch", params))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + params.max_wait_ms / 1000
        while True:
            results = [self._read(p.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
                       for p in params.partitions]
            size = sum(len(r.records) for r in results)
            errors = any(r.error != Errors.NONE for r in results)
            remaining = deadline - loop.time()
            if size >= params.min_bytes or errors or remaining <= 0:
                return results
            try:
                await asyncio.wait_for(self._appended.wait(), remaining)
            except TimeoutError:
                pass

    def _read(self, topic: str, index: int, offset: int, max_bytes: int) -> FetchPartitionResult:
        log = self.partitions.get((topic, index))
        if log is None:
            return FetchPartitionResult(error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
        if offset < 0 or offset > log.log_end:
            return FetchPartitionResult(
                error=Errors.OFFSET_OUT_OF_RANGE, high_watermark=log.log_end,
                last_stable_offset=log.log_end, log_start_offset=0,
            )
        return FetchPartitionResult(
            high_watermark=log.log_end, last_stable_offset=log.log_end, log_start_offset=0,
            records=log.read(offset, max_bytes),
        )

    def list_offsets(
        self, replica_id: int, isolation_level: int, partitions: Sequence[ListOffsetsPartition]
    ) -> list[ListOffsetsResult]:
        self.calls.append(("list_offsets", (replica_id, isolation_level, tuple(partitions))))
        results = []
        for p in partitions:
            log = self.partitions.get((p.topic, p.partition))
            if log is None:
                results.append(ListOffsetsResult(error=Errors.UNKNOWN_TOPIC_OR_PARTITION))
            elif p.timestamp == EARLIEST_TIMESTAMP:
                results.append(ListOffsetsResult(offset=0, leader_epoch=log.leader_epoch))
            elif p.timestamp in (LATEST_TIMESTAMP, MAX_TIMESTAMP):
                results.append(ListOffsetsResult(offset=log.log_end, leader_epoch=log.leader_epoch))
            else:
                found = next((base for base, batch in log.batches
                              if _MAX_TIMESTAMP.unpack_from(batch, 35)[0] >= p.timestamp), -1)
                results.append(ListOffsetsResult(timestamp=p.timestamp if found >= 0 else -1,
                                                 offset=found, leader_epoch=log.leader_epoch))
        return results

    def legacy_offsets(
        self, replica_id: int, partitions: Sequence[LegacyOffsetsPartition]
    ) -> list[LegacyOffsetsResult]:
        """ListOffsets v0 over one segment from offset 0: the log end then 0, newest first
        (a timestamp finds the segment written before it: only 0)."""
        self.calls.append(("legacy_offsets", (replica_id, tuple(partitions))))
        results = []
        for p in partitions:
            log = self.partitions.get((p.topic, p.partition))
            if log is None:
                results.append(LegacyOffsetsResult(Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            points = [log.log_end, 0] if log.log_end > 0 else [0]
            if p.timestamp == EARLIEST_TIMESTAMP:
                points = [0]
            elif p.timestamp != LATEST_TIMESTAMP:
                points = [0] if p.timestamp >= 0 else []
            results.append(LegacyOffsetsResult(offsets=tuple(points[:p.max_num_offsets])))
        return results

    def end_offsets_for_epochs(
        self, replica_id: int, partitions: Sequence[EpochEndPartition]
    ) -> list[EpochEndResult]:
        self.calls.append(("end_offsets_for_epochs", (replica_id, tuple(partitions))))
        results = []
        for p in partitions:
            log = self.partitions.get((p.topic, p.partition))
            if log is None:
                results.append(EpochEndResult(error=Errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                results.append(EpochEndResult(leader_epoch=log.leader_epoch,
                                              end_offset=log.log_end))
        return results

    async def init_producer_id(self, transactional_id: str | None) -> ProducerIdAndEpoch:
        self.calls.append(("init_producer_id", transactional_id))
        self.next_producer_id += 1
        return ProducerIdAndEpoch(producer_id=self.next_producer_id, producer_epoch=0)


def topic_id_for(name: str) -> str:
    """A stable base64 topic id per name (16 bytes of the name's hash)."""
    raw = hashlib.sha256(name.encode()).digest()[:16]
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def make_image(
    brokers: dict[int, list[Endpoint]],
    topics: dict[str, dict[int, PartitionRegistration]],
    fenced: Sequence[int] = (),
) -> MetadataImage:
    registrations = {
        broker_id: BrokerRegistration(
            broker_id, 1, "AAAAAAAAAAAAAAAAAAAAAA", tuple(endpoints), None,
            broker_id in fenced, False, 0,
        )
        for broker_id, endpoints in brokers.items()
    }
    changes: dict[str, TopicImage | None] = {
        topic_id_for(name): TopicImage(name, topic_id_for(name), parts)
        for name, parts in topics.items()
    }
    return MetadataImage(
        cluster=ClusterImage(registrations), topics=TopicsImage().with_changes(changes)
    )


def single_broker_image(port: int, topics: dict[str, int], listener: str = "PLAINTEXT",
                        leader_epoch: int = 0) -> MetadataImage:
    """Broker 1 on 127.0.0.1:port leading every partition of `topics` (name -> count)."""
    return make_image(
        {1: [Endpoint(listener, "127.0.0.1", port)]},
        {name: {i: PartitionRegistration((1,), (1,), leader=1, leader_epoch=leader_epoch)
                for i in range(count)}
         for name, count in topics.items()},
    )


def batch_header(records: int = 1, codec: int = 0, magic: int = 2, extra: int = 0) -> bytes:
    """A v2 batch header with no record bodies (the front never looks past the header);
    `extra` bytes are appended after the batch's announced length."""
    batch = bytearray(61)
    batch[8:12] = (61 - 12).to_bytes(4, "big")
    batch[16] = magic
    batch[21:23] = codec.to_bytes(2, "big")
    batch[23:27] = (records - 1).to_bytes(4, "big")
    batch[57:61] = records.to_bytes(4, "big")
    return bytes(batch) + b"\0" * extra


# ---- the fake itself ----


def test_fake_appends_assign_offsets_and_fetch_reads_them_back() -> None:
    async def scenario() -> None:
        plane = InMemoryDataPlane()
        plane.add("t")
        batch = batch_header(records=3)
        (first,) = await plane.produce(-1, 1000, [ProducePartition("t", 0, batch)])
        (second,) = await plane.produce(-1, 1000, [ProducePartition("t", 0, batch)])
        assert (first.base_offset, second.base_offset) == (0, 3)
        (read,) = await plane.fetch(FetchParams([FetchPartition("t", 0, 3, 1000)], max_wait_ms=0))
        assert read.high_watermark == 6 and read.records[0:8] == (3).to_bytes(8, "big")

    asyncio.run(scenario())
