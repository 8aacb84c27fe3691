"""The marker sender: for a prepared transaction, WriteTxnMarkers (API 27, v1) to the leader of
each of its partitions, retried until every partition has its COMMIT/ABORT marker; then the
coordinator writes CompleteCommit/CompleteAbort (Kafka's TransactionMarkerChannelManager and
TransactionMarkerRequestCompletionHandler).

Per partition answer: NONE or UNSUPPORTED_FOR_MESSAGE_FORMAT (Kafka skips such a partition)
-> done; INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED -> the transaction is
dropped (a newer epoch or coordinator owns it); anything else (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, ...)
-> asked again, of the partition's leader then, after a back-off (doubling from
`marker_retry_backoff_ms` to 5 s). A partition whose topic was deleted needs no marker.

A leader that does not serve WriteTxnMarkers v1 (its ApiVersions lacks it, or it answers
UNSUPPORTED_VERSION) keeps the transaction in PrepareCommit/PrepareAbort: asked again with the
same back-off, logged once per leader until it serves it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable
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

    def version(self, api_key: int, newest: int | None = None) -> int: ...

    async def request(self, body: Any, extra_timeout_s: float = 0.0) -> Any: ...

    async def close(self) -> None: ...


LeaderOf = Callable[[str, int], "int | None"]  # -1: no leader now; None: no such partition
EndpointOf = Callable[[int], "tuple[str, int] | None"]  # a live broker's inter-broker address
Connect = Callable[[str, int], Awaitable[MarkerClient]]


def markers_request(job: MarkerJob, partitions: list[TopicPartition]) -> Any:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    topics = tuple(_KIO.WritableTxnMarkerTopic(name=topic, partition_indexes=tuple(ids))
                   for topic, ids in by_topic.items())
    marker = _KIO.WritableTxnMarker(
        producer_id=job.producer_id, producer_epoch=job.producer_epoch,
        transaction_result=job.commit, topics=topics, coordinator_epoch=job.coordinator_epoch)
    return _KIO.WriteTxnMarkersRequest(markers=(marker,))


class MarkerSender:
    def __init__(self, leader_of: LeaderOf, endpoint_of: EndpointOf, connect: Connect,
                 on_done: Callable[[MarkerJob], None], backoff_ms: int = 100) -> None:
        self._leader_of = leader_of
        self._endpoint_of = endpoint_of
        self._connect = connect
        self._on_done = on_done
        self._backoff_ms = backoff_ms
        self._jobs: dict[asyncio.Task[None], MarkerJob] = {}
        self._clients: dict[int, tuple[tuple[str, int], MarkerClient]] = {}
        self._not_serving: set[int] = set()  # leaders logged as not serving the API

    def send(self, job: MarkerJob) -> None:
        task = asyncio.ensure_future(self._run(job))
        self._jobs[task] = job
        task.add_done_callback(self._finished)

    def cancel(self, coordinator_partition: int) -> None:
        for task, job in list(self._jobs.items()):
            if job.coordinator_partition == coordinator_partition:
                task.cancel()
                del self._jobs[task]  # gone now: a new leadership may send it again

    def pending(self) -> list[MarkerJob]:
        return list(self._jobs.values())

    async def close(self) -> None:
        tasks = list(self._jobs)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        clients, self._clients = self._clients, {}
        for _, client in clients.values():
            await client.close()

    def _finished(self, task: asyncio.Task[None]) -> None:
        job = self._jobs.pop(task, None)
        if task.cancelled() or job is None:
            return
        if task.exception() is not None:
            log.error("markers of transactional id %s failed", job.transactional_id,
                      exc_info=task.exception())

    async def _run(self, job: MarkerJob) -> None:
        remaining = set(job.partitions)
        backoff_ms = self._backoff_ms
        while True:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                leader = self._leader_of(*tp)
                if leader is NO_PARTITION:
                    remaining.discard(tp)  # deleted: nothing to mark
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            answers = await asyncio.gather(*(self._send(leader, job, tps)
                                             for leader, tps in by_leader.items()))
            for results in answers:
                for tp, code in results.items():
                    if code in _DONE:
                        remaining.discard(tp)
                    elif code in _DROP:
                        log.info("transactional id %s: markers dropped, %s-%d answered %s",
                                 job.transactional_id, *tp, TxnError(code).name)
                        return
            if not remaining:
                self._on_done(job)
                return
            await asyncio.sleep(backoff_ms / 1000)
            backoff_ms = min(backoff_ms * 2, MAX_BACKOFF_MS)

    async def _send(self, leader: int, job: MarkerJob,
                    partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        failed = dict.fromkeys(partitions, int(TxnError.NOT_LEADER_OR_FOLLOWER))
        try:
            client = await self._client(leader)
            if client is None:
                return failed
            try:
                client.version(WRITE_TXN_MARKERS, MARKERS_VERSION)
            except ConnectionError:
                return self._not_served(leader, job, partitions)
            response = await client.request(markers_request(job, partitions))
        except ConnectionError as exc:
            await self._drop_client(leader)
            log.debug("markers to broker %d failed: %s", leader, exc)
            return failed
        results = dict(failed)
        for marker in response.markers:
            for topic in marker.topics:
                for partition in topic.partitions:
                    results[(str(topic.name), int(partition.partition_index))] = \
                        int(partition.error_code)
        if any(code == TxnError.UNSUPPORTED_VERSION for code in results.values()):
            return self._not_served(leader, job, partitions)
        if leader in self._not_serving:
            self._not_serving.discard(leader)
            log.info("broker %d serves WriteTxnMarkers now", leader)
        return results

    def _not_served(self, leader: int, job: MarkerJob,
                    partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        if leader not in self._not_serving:
            self._not_serving.add(leader)
            log.warning(
                "broker %d does not serve WriteTxnMarkers v1: transactional id %s stays in "
                "%s until it does (asked again with back-off; logged once per broker)", leader,
                job.transactional_id, "PrepareCommit" if job.commit else "PrepareAbort")
        return dict.fromkeys(partitions, NOT_SERVED)

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
        if raced is not None and raced[0] == address:  # another job connected meanwhile
            await client.close()
            return raced[1]
        self._clients[leader] = (address, client)
        return client

    async def _drop_client(self, leader: int) -> None:
        known = self._clients.pop(leader, None)
        if known is not None:
            await known[1].close()
