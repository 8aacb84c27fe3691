"""The marker sender: for a prepared transaction, a COMMIT/ABORT marker in each of its
partitions, written by the partitions' leaders (WriteTxnMarkers, API 27, v1), retried until
every partition has its marker; then the coordinator writes CompleteCommit/CompleteAbort
(Kafka's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Markers are queued per destination broker, as Kafka's channel manager queues them: one
WriteTxnMarkers request to a broker carries every marker queued for it (one entry per
transaction, each with the partitions that broker leads), and a broker has at most one such
request in flight; what is queued meanwhile goes in the next one. So many producers
committing at once cost each leader one request per round trip, not one per transaction.
(A request holds one entry per producer id: the answers are keyed by it.)

Per partition answer: NONE or UNSUPPORTED_FOR_MESSAGE_FORMAT (Kafka skips such a partition)
-> done, and the coordinator drops it from the transaction's pending set (what
DescribeTransactions shows); INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED -> the
transaction is dropped (a newer epoch or coordinator owns it); anything else
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT,
KAFKA_STORAGE_ERROR, ...) -> asked again, of the partition's leader then, after a back-off
(doubling from `marker_retry_backoff_ms` to 5 s). A partition whose topic was deleted needs no
marker.

The partitions this broker leads itself get their markers in-process (`write_local`: the
same append and wait for the ISR as the WriteTxnMarkers handler's), queued and answered like
any broker's but with no request over the listener: Kafka sends them over its own network
client, two hops of a Python broker's event loops (~1-2 ms each on a busy machine) on every
transaction's critical path. Routed after the other leaders, so their requests are out
before the local append runs.

A leader that does not serve WriteTxnMarkers v1 (its ApiVersions lacks it, or it answers
UNSUPPORTED_VERSION) keeps the transaction in PrepareCommit/PrepareAbort: asked again with the
same back-off, logged once per leader until it serves it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker.txn.errors import TxnError
from broker.txn.model import MarkerJob, TopicPartition

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
MARKERS_VERSION = 1
MAX_BACKOFF_MS = 5000
_DONE = frozenset({TxnError.NONE, TxnError.UNSUPPORTED_FOR_MESSAGE_FORMAT})
_DROP = frozenset({TxnError.INVALID_PRODUCER_EPOCH, TxnError.TRANSACTION_COORDINATOR_FENCED})
_KIO = importlib.import_module("kio.schema.write_txn_markers.v1.request")
NO_PARTITION = None  # leader_of's answer for a partition that no longer exists
NOT_SERVED = -2  # a partition's result when its leader does not serve the API


class MarkerClient(Protocol):
    """What the sender needs of a connection to a broker (broker/kafka/client.KafkaClient)."""

    @property
    def connected(self) -> bool: ...

    def version(self, api_key: int, newest: int | None = None) -> int: ...

    async def request(self, body: Any, extra_timeout_s: float = 0.0) -> Any: ...

    async def close(self) -> None: ...


LeaderOf = Callable[[str, int], "int | None"]  # -1: no leader now; None: no such partition
EndpointOf = Callable[[int], "tuple[str, int] | None"]  # a live broker's inter-broker address
Connect = Callable[[str, int], Awaitable[MarkerClient]]
Results = dict[TopicPartition, int]
# The markers for partitions this broker leads, written in-process: per entry, its partitions'
# codes (broker/txn/storage.TxnStorage.write_local_markers).
WriteLocal = Callable[[list[tuple[MarkerJob, list[TopicPartition]]]], Awaitable[list[Results]]]


def _marker(job: MarkerJob, partitions: list[TopicPartition]) -> Any:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    topics = tuple(_KIO.WritableTxnMarkerTopic(name=topic, partition_indexes=tuple(ids))
                   for topic, ids in by_topic.items())
    return _KIO.WritableTxnMarker(
        producer_id=job.producer_id, producer_epoch=job.producer_epoch,
        transaction_result=job.commit, topics=topics, coordinator_epoch=job.coordinator_epoch)


def markers_request(entries: list[tuple[MarkerJob, list[TopicPartition]]]) -> Any:
    """One request carrying a marker entry per transaction (distinct producer ids)."""
    return _KIO.WriteTxnMarkersRequest(markers=tuple(_marker(job, tps) for job, tps in entries))


@dataclass(eq=False, slots=True)
class _Send:
    """One transaction's markers in progress."""

    job: MarkerJob
    remaining: set[TopicPartition]
    backoff_ms: int
    outstanding: int = 0  # its entries queued for a broker or in a request in flight
    live: bool = True
    retry: asyncio.TimerHandle | None = None


_Entry = tuple[_Send, list[TopicPartition]]


class MarkerSender:
    def __init__(self, leader_of: LeaderOf, endpoint_of: EndpointOf, connect: Connect,
                 on_done: Callable[[MarkerJob], None], backoff_ms: int = 100,
                 on_marked: Callable[[MarkerJob, TopicPartition], None] | None = None,
                 local: tuple[int, WriteLocal] | None = None) -> None:
        """`on_done(job)`: every partition of the job has its marker; `on_marked(job, tp)`:
        one partition has (or needs none); `local`: this broker's id and how it writes the
        markers of the partitions it leads (None: over the listener like any other's)."""
        self._leader_of = leader_of
        self._endpoint_of = endpoint_of
        self._connect = connect
        self._on_done = on_done
        self._on_marked = on_marked
        self._backoff_ms = backoff_ms
        self._sends: dict[_Send, None] = {}  # live, in the order sent
        self._queues: dict[int, list[_Entry]] = {}  # by destination broker
        self._drains: dict[int, asyncio.Task[None]] = {}  # a broker's request loop
        self._clients: dict[int, tuple[tuple[str, int], MarkerClient]] = {}
        self._not_serving: set[int] = set()  # leaders logged as not serving the API
        self._local_id: int | None = None if local is None else local[0]
        self._write_local: WriteLocal | None = None if local is None else local[1]
        self.requests_sent = 0
        self.local_writes = 0

    def send(self, job: MarkerJob) -> None:
        send = _Send(job, set(job.partitions), self._backoff_ms)
        self._sends[send] = None
        self._route(send)

    def cancel(self, coordinator_partition: int) -> None:
        for send in [s for s in self._sends if s.job.coordinator_partition ==
                     coordinator_partition]:
            self._forget(send)  # gone now: a new leadership may send it again

    def pending(self) -> list[MarkerJob]:
        return [send.job for send in self._sends]

    async def close(self) -> None:
        for send in list(self._sends):
            self._forget(send)
        tasks = list(self._drains.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        clients, self._clients = self._clients, {}
        for _, client in clients.values():
            await client.close()

    # ---- one transaction's progress ----------------------------------------------------

    def _route(self, send: _Send) -> None:
        """Queue the partitions still without a marker for their leaders' next request."""
        send.retry = None
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(send.remaining):
            leader = self._leader_of(*tp)
            if leader is NO_PARTITION:
                self._marked(send, tp)  # deleted: nothing to mark
            elif leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        # This broker's own partitions last: the drains start in this order, so the remote
        # requests are written before the local append runs (the two overlap).
        for leader in sorted(by_leader, key=lambda b: b == self._local_id):
            tps = by_leader[leader]
            send.outstanding += 1
            self._queues.setdefault(leader, []).append((send, tps))
            if leader not in self._drains:
                self._drains[leader] = asyncio.ensure_future(self._drain(leader))
        self._settle(send)

    def _marked(self, send: _Send, tp: TopicPartition) -> None:
        send.remaining.discard(tp)
        if self._on_marked is not None:
            self._on_marked(send.job, tp)

    def _settle(self, send: _Send) -> None:
        """Once none of its entries is queued or in flight: done, or routed again after the
        back-off."""
        if not send.live or send.outstanding:
            return
        if not send.remaining:
            self._forget(send)
            self._on_done(send.job)
            return
        delay_ms, send.backoff_ms = send.backoff_ms, min(send.backoff_ms * 2, MAX_BACKOFF_MS)
        send.retry = asyncio.get_running_loop().call_later(delay_ms / 1000, self._route, send)

    def _forget(self, send: _Send) -> None:
        send.live = False
        if send.retry is not None:
            send.retry.cancel()
            send.retry = None
        self._sends.pop(send, None)

    def _answered(self, send: _Send, results: Results) -> None:
        send.outstanding -= 1
        if not send.live:
            return
        for tp, code in results.items():
            if code in _DONE:
                self._marked(send, tp)
            elif code in _DROP:
                log.info("transactional id %s: markers dropped, %s-%d answered %s",
                         send.job.transactional_id, *tp, TxnError(code).name)
                self._forget(send)
                return
        self._settle(send)

    # ---- one broker's requests -----------------------------------------------------------

    async def _drain(self, leader: int) -> None:
        """Send `leader` everything queued for it, one request at a time, until none is."""
        try:
            while self._queues.get(leader):
                batch, later, producers = [], [], set()
                for send, tps in self._queues.pop(leader):
                    if not send.live:
                        send.outstanding -= 1
                    elif send.job.producer_id in producers:
                        later.append((send, tps))
                    else:
                        producers.add(send.job.producer_id)
                        batch.append((send, tps))
                if later:
                    self._queues[leader] = later
                if not batch:
                    continue
                try:
                    answers = await self._send(leader, batch)
                except Exception:  # a bug must not strand the queue: every entry retried
                    log.exception("markers to broker %d failed", leader)
                    answers = [dict.fromkeys(tps, int(TxnError.UNKNOWN_SERVER_ERROR))
                               for _, tps in batch]
                for (send, _), results in zip(batch, answers, strict=True):
                    self._answered(send, results)
        finally:
            if self._drains.get(leader) is asyncio.current_task():
                del self._drains[leader]

    async def _send(self, leader: int, batch: list[_Entry]) -> list[Results]:
        def every(code: int) -> list[Results]:
            return [dict.fromkeys(tps, code) for _, tps in batch]
        if leader == self._local_id and self._write_local is not None:
            self.local_writes += 1
            return await self._write_local([(send.job, tps) for send, tps in batch])
        try:
            client = await self._client(leader)
            if client is None:
                return every(int(TxnError.NOT_LEADER_OR_FOLLOWER))
            if not client.connected:
                # The leader's connection broke (say it restarted at the same address): a new
                # one next time. Taken for "not served", the dead client was kept and every
                # retry failed alike: the transaction stayed prepared and its LSO stuck.
                await self._drop_client(leader)
                return every(int(TxnError.NOT_LEADER_OR_FOLLOWER))
            try:
                client.version(WRITE_TXN_MARKERS, MARKERS_VERSION)
            except ConnectionError:
                return self._not_served(leader, batch)
            self.requests_sent += 1
            response = await client.request(
                markers_request([(send.job, tps) for send, tps in batch]))
        except ConnectionError as exc:
            await self._drop_client(leader)
            log.debug("markers to broker %d failed: %s", leader, exc)
            return every(int(TxnError.NOT_LEADER_OR_FOLLOWER))
        by_producer: dict[int, Results] = {}
        for marker in response.markers:
            codes = by_producer.setdefault(int(marker.producer_id), {})
            for topic in marker.topics:
                for partition in topic.partitions:
                    codes[(str(topic.name), int(partition.partition_index))] = \
                        int(partition.error_code)
        answers = []
        for send, tps in batch:  # a partition left unanswered is asked again
            codes = by_producer.get(send.job.producer_id, {})
            answers.append({tp: codes.get(tp, int(TxnError.NOT_LEADER_OR_FOLLOWER))
                            for tp in tps})
        if any(code == TxnError.UNSUPPORTED_VERSION for a in answers for code in a.values()):
            return self._not_served(leader, batch)
        if leader in self._not_serving:
            self._not_serving.discard(leader)
            log.info("broker %d serves WriteTxnMarkers now", leader)
        return answers

    def _not_served(self, leader: int, batch: list[_Entry]) -> list[Results]:
        if leader not in self._not_serving:
            self._not_serving.add(leader)
            job = batch[0][0].job
            log.warning(
                "broker %d does not serve WriteTxnMarkers v1: transactional id %s stays in "
                "%s until it does (asked again with back-off; logged once per broker)", leader,
                job.transactional_id, "PrepareCommit" if job.commit else "PrepareAbort")
        return [dict.fromkeys(tps, NOT_SERVED) for _, tps in batch]

    async def _client(self, leader: int) -> MarkerClient | None:
        address = self._endpoint_of(leader)
        if address is None:
            return None
        known = self._clients.get(leader)
        if known is not None and known[0] == address:
            return known[1]
        await self._drop_client(leader)
        client = await self._connect(*address)
        raced = self._clients.get(leader)
        if raced is not None and raced[0] == address:  # connected meanwhile
            await client.close()
            return raced[1]
        self._clients[leader] = (address, client)
        return client

    async def _drop_client(self, leader: int) -> None:
        known = self._clients.pop(leader, None)
        if known is not None:
            await known[1].close()
