"""The transaction coordinator on a real partition log (broker/txn/storage.py) and its marker
sender (markers.py): state changes are acks=all records of `__transaction_state` in Kafka's
format; EndTxn's markers go to the partition's leader as WriteTxnMarkers v1 frames, then
CompleteCommit is written; a leader that does not serve the API keeps the transaction
prepared (logged once) until it does; a leadership change unloads, and the new leadership
reloads (COORDINATOR_LOAD_IN_PROGRESS until then) and sends a prepared transaction's markers
again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.kafka.codec import decode_request, encode_request
from broker.records import decode_records, parse_header
from broker.txn.config import TxnConfig
from broker.txn.coordinator import PartitionStatus
from broker.txn.records import TxnState, decode_key, decode_value
from broker.txn.storage import TXN_TOPIC, TxnStorage
from tests.unit.replica_harness import Cluster

TXN_STATE_ID = "Tq3nQk8pS4ue2vZ1v0xqcA"
CONFIG = TxnConfig(state_log_num_partitions=1, state_log_replication_factor=1,
                   marker_retry_backoff_ms=1)


@dataclass
class Leader:
    """Broker 1's Kafka side as the marker sender sees it."""

    serves: bool = True
    answer: int = 0
    requests: list[Any] = field(default_factory=list)

    async def connect(self, host: str, port: int) -> Leader.Client:
        assert (host, port) == ("b1", 9001)
        return Leader.Client(self)

    class Client:
        def __init__(self, leader: Leader) -> None:
            self.leader = leader
            self.connected = True

        def version(self, api_key: int, newest: int | None = None) -> int:
            if not self.leader.serves:
                raise ConnectionError("b1:9001 serves no usable api 27")
            return 1

        async def request(self, body: Any, extra_timeout_s: float = 0.0) -> Any:
            frame = encode_request(3, "broker-1", body)  # what goes on the wire
            decoded = decode_request(frame[4:])
            assert (decoded.api_key, decoded.api_version) == (27, 1)
            self.leader.requests.append(decoded.body)
            return SimpleNamespace(markers=[SimpleNamespace(
                producer_id=marker.producer_id, topics=[SimpleNamespace(
                    name=t.name, partitions=[
                        SimpleNamespace(partition_index=p, error_code=self.leader.answer)
                        for p in t.partition_indexes]) for t in marker.topics])
                for marker in decoded.body.markers])

        async def close(self) -> None:
            pass


def run(tmp_path: Path, body: Callable[[Cluster, TxnStorage, Leader], Awaitable[None]],
        local_markers: bool = False) -> None:
    """Broker 1 coordinates and leads every partition: its markers go through `Leader` (the
    listener path) unless `local_markers`."""
    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1,))
        cluster.create_topic(replicas=(1,), topic=TXN_TOPIC, topic_id=TXN_STATE_ID)
        cluster.create_topic(replicas=(1,), partitions=2)
        leader = Leader()
        ids = iter(range(7000, 8000))

        async def allocate() -> int:
            return next(ids)
        storage = TxnStorage(cluster.nodes[1].manager, CONFIG, allocate, leader.connect,
                             now_ms=cluster.clock, local_markers=local_markers)
        cluster.start()
        try:
            await body(cluster, storage, leader)
        finally:
            await storage.close()
            await cluster.close()
    asyncio.run(main())


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never: {what}")


def logged_states(cluster: Cluster) -> list[TxnState]:
    log = cluster.nodes[1].log(0, TXN_TOPIC)
    data = log.read(0, 1 << 20, log.end_offset)
    out, position = [], 0
    while position < len(data):
        size = parse_header(data, position).size
        for record in decode_records(data[position:position + size]):
            assert record.key is not None and decode_key(record.key) == "tx"
            assert record.value is not None
            out.append(decode_value(record.value).state)
        position += size
    return out


def loaded(storage: TxnStorage) -> Callable[[], bool]:
    return lambda: storage.coordinator.partitions.get(0) is not None and \
        storage.coordinator.partitions[0].status is PartitionStatus.ACTIVE


async def open_transaction(storage: TxnStorage) -> tuple[int, int]:
    coordinator = storage.coordinator
    init = await coordinator.init_producer_id("tx", 60000)
    assert init.error == 0
    assert await coordinator.add_partitions("tx", init.producer_id, init.producer_epoch,
                                            [("t", 0), ("t", 1)]) == 0
    return init.producer_id, init.producer_epoch


def test_commit_writes_kafka_records_and_markers_to_the_leader(tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: TxnStorage, leader: Leader) -> None:
        await until(loaded(storage), "loaded")
        pid, epoch = await open_transaction(storage)
        assert await storage.coordinator.end_txn("tx", pid, epoch, True) == 0
        await until(lambda: storage.coordinator.txns["tx"].state is TxnState.COMPLETE_COMMIT,
                    "CompleteCommit")
        assert logged_states(cluster) == [TxnState.EMPTY, TxnState.ONGOING,
                                          TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
        (request,) = leader.requests
        (marker,) = request.markers
        assert (marker.producer_id, marker.producer_epoch, marker.transaction_result,
                marker.coordinator_epoch) == (pid, epoch, True, 0)
        assert [(t.name, t.partition_indexes) for t in marker.topics] == [("t", (0, 1))]
    run(tmp_path, body)


def test_markers_of_partitions_this_broker_leads_are_written_in_process(
        tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: TxnStorage, leader: Leader) -> None:
        await until(loaded(storage), "loaded")
        pid, epoch = await open_transaction(storage)
        assert await storage.coordinator.end_txn("tx", pid, epoch, True) == 0
        await until(lambda: storage.coordinator.txns["tx"].state is TxnState.COMPLETE_COMMIT,
                    "CompleteCommit")
        assert not leader.requests and storage.markers.local_writes == 1
        for partition in (0, 1):  # a COMMIT control batch of the producer in each
            log = cluster.nodes[1].log(partition)
            data = log.read(0, 1 << 20, log.end_offset)
            header = parse_header(data, 0)
            assert header.control and header.size == len(data)
    run(tmp_path, body, local_markers=True)


def test_a_leader_without_the_api_keeps_the_transaction_prepared(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def body(cluster: Cluster, storage: TxnStorage, leader: Leader) -> None:
        await until(loaded(storage), "loaded")
        pid, epoch = await open_transaction(storage)
        leader.serves = False
        with caplog.at_level(logging.INFO, logger="broker.txn.markers"):
            assert await storage.coordinator.end_txn("tx", pid, epoch, False) == 0
            for _ in range(30):  # retried with back-off meanwhile
                await asyncio.sleep(0.002)
            assert storage.coordinator.txns["tx"].state is TxnState.PREPARE_ABORT
            warnings = [r for r in caplog.records if "does not serve" in r.message]
            assert len(warnings) == 1 and "PrepareAbort" in warnings[0].message
            leader.answer = 6  # then it serves it, but is no longer the leader: retried
            leader.serves = True
            await until(lambda: len(leader.requests) >= 2, "asked again")
            assert storage.coordinator.txns["tx"].state is TxnState.PREPARE_ABORT
            leader.answer = 0
            await until(lambda: storage.coordinator.txns["tx"].state
                        is TxnState.COMPLETE_ABORT, "CompleteAbort")
        assert any("serves WriteTxnMarkers now" in r.message for r in caplog.records)
    run(tmp_path, body)


def test_a_fenced_marker_drops_the_transaction(tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: TxnStorage, leader: Leader) -> None:
        await until(loaded(storage), "loaded")
        pid, epoch = await open_transaction(storage)
        leader.answer = 52  # TRANSACTION_COORDINATOR_FENCED
        assert await storage.coordinator.end_txn("tx", pid, epoch, True) == 0
        await until(lambda: bool(leader.requests), "markers sent")
        await until(lambda: not storage.markers.pending(), "dropped")
        assert storage.coordinator.txns["tx"].state is TxnState.PREPARE_COMMIT
    run(tmp_path, body)


def test_leadership_unloads_and_a_new_one_reloads_and_resends_markers(tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: TxnStorage, leader: Leader) -> None:
        await until(loaded(storage), "loaded")
        pid, epoch = await open_transaction(storage)
        leader.serves = False
        assert await storage.coordinator.end_txn("tx", pid, epoch, True) == 0
        cluster.change(topic_id=TXN_STATE_ID, leader=-1)
        await until(lambda: 0 not in storage.coordinator.partitions, "unloaded")
        assert not storage.coordinator.txns and not storage.markers.pending()
        assert (await storage.coordinator.init_producer_id("tx", 60000)).error == 16
        leader.serves = True
        cluster.change(topic_id=TXN_STATE_ID, leader=1)
        assert storage.coordinator.coordinator_error("tx") == 14  # loading
        await until(loaded(storage), "reloaded")
        meta = storage.coordinator.txns["tx"]
        assert (meta.producer_id, meta.producer_epoch) == (pid, epoch)
        assert storage.coordinator.partitions[0].epoch == 2  # the new coordinator epoch
        await until(lambda: meta.state is TxnState.COMPLETE_COMMIT, "markers resent")
        assert leader.requests[-1].markers[0].coordinator_epoch == 2
    run(tmp_path, body)


def test_a_held_next_transaction_is_written_in_the_batch_of_complete_commit(
        tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: TxnStorage, leader: Leader) -> None:
        await until(loaded(storage), "loaded")
        pid, epoch = await open_transaction(storage)
        leader.serves = False  # the markers wait until the next transaction is held
        assert await storage.coordinator.end_txn("tx", pid, epoch, True) == 0
        adding = asyncio.ensure_future(
            storage.coordinator.add_partitions("tx", pid, epoch, [("t", 1)]))
        await until(lambda: storage.coordinator.held == 1, "held")
        leader.serves = True
        assert await adding == 0
        assert logged_states(cluster) == [TxnState.EMPTY, TxnState.ONGOING,
                                          TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT,
                                          TxnState.ONGOING]
        log = cluster.nodes[1].log(0, TXN_TOPIC)
        assert log.end_offset == 5 and parse_header(log.read(3, 1 << 20, 5), 0).next_offset == 5
        # A new leadership replays both records of that batch: the transaction is open.
        cluster.change(topic_id=TXN_STATE_ID, leader=-1)
        await until(lambda: 0 not in storage.coordinator.partitions, "unloaded")
        cluster.change(topic_id=TXN_STATE_ID, leader=1)
        await until(loaded(storage), "reloaded")
        meta = storage.coordinator.txns["tx"]
        assert (meta.state, meta.partitions) == (TxnState.ONGOING, {("t", 1)})
    run(tmp_path, body)
