"""The marker sender's batching (broker/txn/markers.py): one WriteTxnMarkers request per
destination broker carries every marker queued for it, one request in flight per broker; and
DescribeTransactions lists only the partitions of a prepared transaction still without their
marker (Kafka's removePartition as each marker is answered)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

from broker.txn.describe import describe
from broker.txn.markers import MarkerSender
from broker.txn.model import MarkerJob, TopicPartition
from broker.txn.records import TxnState
from tests.unit.txn_harness import TXN_ID, Front

LEADERS = {("t", 0): 1, ("t", 1): 1, ("u", 0): 2}


class Broker:
    """A partition leader: records each request; answers once its gate is open."""

    def __init__(self) -> None:
        self.clients: list[Client] = []  # every connection made to it, in order
        self.requests: list[Any] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def answer(self, body: Any) -> Any:
        self.requests.append(body)
        await self.gate.wait()
        return SimpleNamespace(markers=[SimpleNamespace(
            producer_id=m.producer_id, topics=[SimpleNamespace(name=t.name, partitions=[
                SimpleNamespace(partition_index=p, error_code=0) for p in t.partition_indexes])
                for t in m.topics]) for m in body.markers])


class Client:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connected = True  # KafkaClient's: False once the connection broke
        broker.clients.append(self)

    def version(self, api_key: int, newest: int | None = None) -> int:
        return 1

    async def request(self, body: Any, extra_timeout_s: float = 0.0) -> Any:
        return await self.broker.answer(body)

    async def close(self) -> None:
        pass


def sender_for(brokers: dict[int, Broker], on_done: Callable[[MarkerJob], None],
               on_marked: Callable[[MarkerJob, TopicPartition], None] | None = None,
               leaders: dict[TopicPartition, int] = LEADERS) -> MarkerSender:
    async def connect(host: str, port: int) -> Client:
        return Client(brokers[port - 9000])
    return MarkerSender(lambda topic, p: leaders[(topic, p)], lambda b: ("h", 9000 + b),
                        connect, on_done, 1, on_marked)


def job(producer_id: int, *partitions: TopicPartition) -> MarkerJob:
    return MarkerJob(f"id-{producer_id}", 0, 3, producer_id, 0, True, frozenset(partitions))


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("never")


def test_markers_queued_for_a_broker_go_in_one_request() -> None:
    async def body() -> None:
        brokers = {1: Broker(), 2: Broker()}
        brokers[1].gate.clear()
        done: list[int] = []
        sender = sender_for(brokers, lambda j: done.append(j.producer_id))
        sender.send(job(10, ("t", 0)))
        await until(lambda: len(brokers[1].requests) == 1)
        # While broker 1's request is in flight, three more transactions end.
        sender.send(job(11, ("t", 0), ("t", 1), ("u", 0)))
        sender.send(job(12, ("t", 1)))
        sender.send(job(13, ("u", 0)))
        await until(lambda: len(brokers[2].requests) == 1)
        assert [m.producer_id for m in brokers[2].requests[0].markers] == [11, 13]
        brokers[1].gate.set()
        await until(lambda: len(done) == 4)
        assert [[m.producer_id for m in r.markers] for r in brokers[1].requests] == \
            [[10], [11, 12]]
        eleven = brokers[1].requests[1].markers[0]
        assert [(t.name, t.partition_indexes) for t in eleven.topics] == [("t", (0, 1))]
        assert sender.requests_sent == 3 and not sender.pending()
        await sender.close()
    run(body)


def test_a_broken_connection_is_replaced_not_taken_for_a_leader_without_the_api() -> None:
    """The leader restarted at the same address between two transactions: its old connection
    is gone. The sender connects again and the markers are written (it used to take the dead
    connection for a leader that does not serve WriteTxnMarkers, keep it, and leave the
    transaction prepared for good: a chaos campaign's hanging transaction)."""
    async def body() -> None:
        brokers = {1: Broker(), 2: Broker()}
        done: list[int] = []
        sender = sender_for(brokers, lambda j: done.append(j.producer_id))
        sender.send(job(10, ("t", 0)))
        await until(lambda: len(done) == 1)
        brokers[1].clients[0].connected = False  # the leader's process went away
        sender.send(job(11, ("t", 1)))
        await until(lambda: len(done) == 2)
        assert len(brokers[1].clients) == 2 and brokers[1].clients[1].connected
        assert [[m.producer_id for m in r.markers] for r in brokers[1].requests] == [[10], [11]]
        await sender.close()
    run(body)


def test_describe_lists_only_the_partitions_still_without_a_marker() -> None:
    async def body() -> None:
        front = Front()
        coordinator = front.coordinator
        brokers = {1: Broker(), 2: Broker()}
        brokers[2].gate.clear()
        sender = sender_for(brokers, coordinator.markers_written, coordinator.marker_written,
                            {("t", 0): 1, ("t", 1): 2})
        coordinator.markers = sender
        answer = await front.init()
        pid, epoch = int(answer.producer_id), int(answer.producer_epoch)
        assert await front.add(pid, epoch, {"t": (0, 1)}) == {("t", 0): 0, ("t", 1): 0}
        assert describe(coordinator, TXN_ID).partitions == (("t", 0), ("t", 1))
        assert await front.end(pid, epoch, True) == 0
        await until(lambda: len(brokers[1].requests) == 1 and len(brokers[2].requests) == 1)
        await until(lambda: describe(coordinator, TXN_ID).partitions == (("t", 1),))
        assert describe(coordinator, TXN_ID).state == "PrepareCommit"
        brokers[2].gate.set()
        await until(lambda: coordinator.txns[TXN_ID].state is TxnState.COMPLETE_COMMIT)
        assert describe(coordinator, TXN_ID).partitions == ()
        # The record keeps every partition: a new coordinator resends them all.
        prepare = [v for v in front.txns.log.values()
                   if v is not None and v.state is TxnState.PREPARE_COMMIT]
        assert prepare[0].partitions == (("t", (0, 1)),)
        await sender.close()
    run(body)


def test_markers_of_this_brokers_partitions_are_written_in_process_after_the_others() -> None:
    """Broker 1 coordinates and leads t-0 and t-1: their markers take no request over its own
    listener (two event-loop hops on every transaction's critical path), and broker 2's
    request is out before the local write starts, so the two overlap."""
    async def body() -> None:
        brokers = {1: Broker(), 2: Broker()}
        brokers[2].gate.clear()
        events: list[str] = []
        local: list[list[tuple[int, list[TopicPartition]]]] = []

        async def write_local(entries: list[tuple[MarkerJob, list[TopicPartition]]]
                              ) -> list[dict[TopicPartition, int]]:
            events.append(f"local, broker 2 asked {len(brokers[2].requests)} time(s)")
            local.append([(j.producer_id, tps) for j, tps in entries])
            return [dict.fromkeys(tps, 0) for _, tps in entries]

        async def connect(host: str, port: int) -> Client:
            return Client(brokers[port - 9000])
        done: list[int] = []
        sender = MarkerSender(lambda topic, p: LEADERS[(topic, p)], lambda b: ("h", 9000 + b),
                              connect, lambda j: done.append(j.producer_id), 1,
                              local=(1, write_local))
        sender.send(job(10, ("t", 0), ("t", 1), ("u", 0)))
        await until(lambda: bool(local))
        assert events == ["local, broker 2 asked 1 time(s)"]
        assert local == [[(10, [("t", 0), ("t", 1)])]]
        assert not done  # broker 2's marker is not answered yet
        brokers[2].gate.set()
        await until(lambda: done == [10])
        assert not brokers[1].clients and sender.local_writes == 1
        assert sender.requests_sent == 1 and not sender.pending()
        await sender.close()
    run(body)
