"""A TransactionCoordinator on a fake clock behind the real Kafka front (KafkaApis): requests
are kio entities encoded, decoded as the server decodes them, answered, and the answers
encoded and decoded again. `__transaction_state` is an in-memory list per partition (appends
can fail or wait), markers land in a list the test completes, producer ids count up."""

from __future__ import annotations

import asyncio
import datetime
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.api import Request
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
from broker.txn.config import TxnConfig
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.model import MarkerJob
from broker.txn.records import TxnLogValue, decode_key, decode_value
from kraft.security.authorizer import RequestAuthorizer
from metadata.image import PartitionRegistration
from metadata.records import Endpoint
from tests.unit.test_kafka_fakes import InMemoryDataPlane, make_image

TXN_ID = "app-1"
NAMES = {ApiKey.INIT_PRODUCER_ID: "InitProducerIdRequest",
         ApiKey.ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxnRequest",
         ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxnRequest", ApiKey.END_TXN: "EndTxnRequest",
         ApiKey.FIND_COORDINATOR: "FindCoordinatorRequest"}
MINUTE = datetime.timedelta(minutes=1)


@dataclass
class FakeTxnLog:
    records: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    error: int = 0
    gate: asyncio.Event | None = None  # set: appends wait for it
    batches: int = 0  # appends made

    async def append(self, partition: int, key: bytes, value: bytes | None,
                     following: Sequence[bytes] = ()) -> int:
        if self.gate is not None:
            await self.gate.wait()
        if self.error:
            return self.error
        self.records.setdefault(partition, []).extend((key, v) for v in (value, *following))
        self.batches += 1
        return 0

    def values(self, txn_id: str = TXN_ID) -> list[TxnLogValue | None]:
        return [None if v is None else decode_value(v)
                for records in self.records.values() for k, v in records
                if decode_key(k) == txn_id]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class FakeMarkers:
    sent: list[MarkerJob] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)

    def send(self, job: MarkerJob) -> None:
        self.sent.append(job)

    def cancel(self, coordinator_partition: int) -> None:
        self.cancelled.append(coordinator_partition)


class Txns:
    """What the handlers use of TxnStorage: the coordinator, and the topic's creation."""

    def __init__(self, config: TxnConfig) -> None:
        self.clock = Clock()
        self.log = FakeTxnLog()
        ids = itertools.count(1000)

        async def allocate() -> int:
            return next(ids)
        self.coordinator = TransactionCoordinator(config, self.log, allocate, self.clock)
        self.markers = FakeMarkers()
        self.coordinator.markers = self.markers
        self.topic_requests = 0

    def ensure_topic(self) -> None:
        self.topic_requests += 1


class Front:
    def __init__(self, *, partitions: int = 1, load: bool = True, with_topic: bool = True,
                 authorizer: RequestAuthorizer | None = None, **config: Any) -> None:
        topics = {"t": {0: PartitionRegistration((1,), (1,), leader=1),
                        1: PartitionRegistration((1,), (1,), leader=1)}}
        if with_topic:
            topics["__transaction_state"] = {
                p: PartitionRegistration((1,), (1,), leader=1) for p in range(partitions)}
        image = make_image({1: [Endpoint("PLAINTEXT", "h1", 9091)]}, topics)
        self.apis = KafkaApis(InMemoryDataPlane(), lambda: image, "c", authorizer=authorizer)
        self.txns = Txns(TxnConfig(state_log_num_partitions=partitions, **config))
        self.apis.txns = self.txns  # type: ignore[assignment]
        self.coordinator = self.txns.coordinator
        if load:
            for p in range(partitions):
                self.coordinator.begin_loading(p, 5)
                self.coordinator.finish_loading(p, 5, [])

    async def call(self, api_key: int, version: int, principal: str = "User:ANONYMOUS",
                   **fields: Any) -> Any:
        module = request_module(api_key, version)
        frame = encode_request(7, "client-1", build(module, NAMES[ApiKey(api_key)], **fields))
        request = decode_request(frame[4:])
        context = Request(client_id="client-1", listener="PLAINTEXT", peer="10.0.0.9:5555",
                          api_version=version, principal=principal)
        reply = await self.apis.handle(request, context)
        correlation_id, response = decode_response(api_key, version,
                                                   encode_response(7, reply.response)[4:])
        assert correlation_id == 7
        return response

    async def init(self, version: int = 4, txn_id: str = TXN_ID, timeout: datetime.timedelta
                   = MINUTE, producer_id: int = -1, producer_epoch: int = -1) -> Any:
        return await self.call(ApiKey.INIT_PRODUCER_ID, version, transactional_id=txn_id,
                               transaction_timeout=timeout, producer_id=producer_id,
                               producer_epoch=producer_epoch)

    async def add(self, producer_id: int, epoch: int, partitions: dict[str, tuple[int, ...]],
                  version: int = 3, txn_id: str = TXN_ID) -> dict[tuple[str, int], int]:
        module = request_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        topics = tuple(build(module, "AddPartitionsToTxnTopic", name=name, partitions=ids)
                       for name, ids in partitions.items())
        answer = await self.call(
            ApiKey.ADD_PARTITIONS_TO_TXN, version, v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=topics)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}

    async def end(self, producer_id: int, epoch: int, commit: bool, version: int = 3,
                  txn_id: str = TXN_ID) -> int:
        answer = await self.call(ApiKey.END_TXN, version, transactional_id=txn_id,
                                 producer_id=producer_id, producer_epoch=epoch,
                                 committed=commit)
        return int(answer.error_code)

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)
