"""The transaction coordinator on the data plane: `__transaction_state` is an ordinary
replicated, compacted partition log, so transaction state survives a broker like any record.

- TxnStorage.append: one record as an uncompressed v2 batch through the replica manager,
  acks=all (Kafka writes the topic with acks=-1, uncompressed).
- Leadership: the replica manager tells us when this broker starts or stops leading a
  partition of the topic; we then load it (replay from log start to log end, chunk by chunk,
  yielding to the event loop) with the leader epoch as the coordinator epoch, or unload it.
- Timers: the abort of timed-out transactions every
  `transaction.abort.timed.out.transaction.cleanup.interval.ms`, the removal of expired
  transactional ids every `transaction.remove.expired.transaction.cleanup.interval.ms`.
- The marker sender (markers.py) talks to partition leaders on the inter-broker listener,
  and writes the markers of the partitions this broker leads in-process (`local_markers`).
- The topic is created on first use (FindCoordinator key type 1), through the controller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from broker.api import ProducePartition
from broker.log.partition_log import OffsetOutOfRange
from broker.records import HEADER_SIZE, Record, build_batch, decode_records, parse_header
from broker.replica.manager import ReplicaManager, TopicPartition
from broker.replica.txn_markers import TxnMarker
from broker.txn.config import TxnConfig
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.markers import Connect, MarkerSender, Results
from broker.txn.model import MarkerJob
from kraft.errors import Errors, error_name

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
LOAD_CHUNK_BYTES = 1 << 20
CREATE_RETRY_MS = 1000  # after a failed creation, FindCoordinator asks again no sooner
CreateTopic = Callable[[int, int, dict[str, str]], Awaitable[tuple[int, str]]]


def _now_ms() -> int:
    return int(time.time() * 1000)


class TxnStorage:
    def __init__(self, replicas: ReplicaManager, config: TxnConfig,
                 allocate_producer_id: Callable[[], Awaitable[int]], connect: Connect,
                 listener: str = "PLAINTEXT", now_ms: Callable[[], int] = _now_ms,
                 local_markers: bool = True) -> None:
        """`connect(host, port)`: a client of another broker's inter-broker `listener` (the
        marker sender's); `local_markers`: the markers of partitions this broker leads are
        written in-process (False: over `listener` too, as Kafka sends them)."""
        self.replicas = replicas
        self.config = config
        self.coordinator = TransactionCoordinator(config, self, allocate_producer_id, now_ms)
        self.markers = MarkerSender(self._leader_of, self._endpoint_of, connect,
                                    self.coordinator.markers_written,
                                    config.marker_retry_backoff_ms,
                                    on_marked=self.coordinator.marker_written,
                                    local=(replicas.broker_id, self.write_local_markers)
                                    if local_markers else None)
        self.coordinator.markers = self.markers
        self.create_topic: CreateTopic | None = None  # set once the broker can reach a controller
        self._listener = listener
        self._now_ms = now_ms
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._timers: list[asyncio.Task[None]] = []
        self._creating: asyncio.Task[None] | None = None
        self._create_failed_at = -CREATE_RETRY_MS
        self._last_create_error = ""
        replicas.role_listeners.append(self._on_role)

    def start(self) -> None:
        config, coordinator = self.config, self.coordinator
        self._timers = [
            asyncio.ensure_future(_every(config.abort_timed_out_interval_ms,
                                         coordinator.abort_timed_out, "timed-out aborts")),
            asyncio.ensure_future(_every(config.remove_expired_interval_ms,
                                         coordinator.expire_ids, "transactional id expiry"))]

    async def close(self) -> None:
        tasks = [t for t in (*self._timers, self._creating, *self._loads.values())
                 if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.markers.close()
        await self.coordinator.close()
        for partition in list(self.coordinator.partitions):
            self.coordinator.unload(partition)

    # ---- the coordinator's TxnLog and the marker sender's view of the cluster -------------

    async def append(self, partition: int, key: bytes, value: bytes | None,
                     following: Sequence[bytes] = ()) -> int:
        batch = build_batch([Record(value, key), *(Record(v, key) for v in following)],
                            base_timestamp=self._now_ms())
        results = await self.replicas.produce(
            -1, self.config.write_timeout_ms, [ProducePartition(TXN_TOPIC, partition, batch)])
        return results[0].error

    async def write_local_markers(self, entries: list[tuple[MarkerJob, list[TopicPartition]]]
                                  ) -> list[Results]:
        """The markers for partitions this broker leads, as its WriteTxnMarkers handler
        writes them (appended, answered once replicated, the marker listeners told)."""
        answers = await self.replicas.write_txn_markers([TxnMarker(
            job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch, tuple(tps))
            for job, tps in entries])
        return [{tp: answer.get(tp, int(Errors.NOT_LEADER_OR_FOLLOWER)) for tp in tps}
                for (_, tps), answer in zip(entries, answers, strict=True)]

    def _leader_of(self, topic: str, partition: int) -> int | None:
        described = self.replicas.image.topic(topic)
        registration = None if described is None else described.partition(partition)
        return None if registration is None else registration.leader

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        registration = self.replicas.image.cluster.broker(broker_id)
        if registration is None or registration.fenced:
            return None
        for endpoint in registration.endpoints:
            if endpoint.name == self._listener:
                return endpoint.host, endpoint.port
        return None

    # ---- loading and unloading ------------------------------------------------------------

    def _on_role(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        topic, partition = tp
        if topic != TXN_TOPIC:
            return
        running = self._loads.pop(partition, None)
        if running is not None:
            running.cancel()
        if leader:
            self.coordinator.begin_loading(partition, epoch)
            self._loads[partition] = asyncio.ensure_future(self._load(partition, epoch))
        else:
            self.coordinator.unload(partition)

    async def _load(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            records = await self._read(partition)
        except (OSError, OffsetOutOfRange) as exc:
            log.error("cannot load %s-%d: %s; its transactional ids stay unavailable until the "
                      "next leadership change", TXN_TOPIC, partition, exc)
            return
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]
        ids = self.coordinator.finish_loading(partition, epoch, records)
        log.info("%s-%d (coordinator epoch %d): %d record(s), %d transactional id(s) loaded in "
                 "%.3f s", TXN_TOPIC, partition, epoch, len(records), ids,
                 time.monotonic() - started)

    async def _read(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """(key, value) of every record of this leader's log, start to end (as it is now:
        nothing is written to the partition before the load completes)."""
        replica = self.replicas.partitions.get((TXN_TOPIC, partition))
        if replica is None:
            return []
        partition_log = replica.log
        end = partition_log.end_offset
        offset = partition_log.start_offset
        out: list[tuple[bytes, bytes | None]] = []
        while offset < end:
            data = partition_log.read(offset, LOAD_CHUNK_BYTES, end, min_one_batch=True)
            if not data:
                break
            position = 0
            while position + HEADER_SIZE <= len(data):
                header = parse_header(data, position)
                batch = data[position:position + header.size]
                position += header.size
                offset = header.next_offset
                if not header.control and not header.compression:
                    out.extend((r.key, r.value) for r in decode_records(batch)
                               if r.key is not None)
            await asyncio.sleep(0)  # serve requests between chunks
        return out

    # ---- the topic --------------------------------------------------------------------------

    def ensure_topic(self) -> None:
        """Ask the controller to create `__transaction_state` unless a request is in flight
        or one failed less than CREATE_RETRY_MS ago (FindCoordinator answers 15 meanwhile)."""
        if self.create_topic is None or (self._creating is not None
                                         and not self._creating.done()):
            return
        if self._now_ms() - self._create_failed_at < CREATE_RETRY_MS:
            return
        self._creating = asyncio.ensure_future(self._create())

    async def _create(self) -> None:
        assert self.create_topic is not None
        config = self.config
        try:
            code, message = await self.create_topic(
                config.state_log_num_partitions, config.state_log_replication_factor,
                {"cleanup.policy": "compact", "compression.type": "uncompressed",
                 "min.insync.replicas": str(config.state_log_min_isr),
                 "segment.bytes": str(config.state_log_segment_bytes)})
        except Exception as exc:  # the controller unreachable, a timeout: ask again later
            code, message = Errors.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"
        if code in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            log.info("created %s (%d partitions, replication factor %d)", TXN_TOPIC,
                     config.state_log_num_partitions, config.state_log_replication_factor)
            return
        self._create_failed_at = self._now_ms()
        why = f"{error_name(code)} ({message})"
        (log.warning if why != self._last_create_error else log.debug)(
            "cannot create %s yet: %s; transactional producers see COORDINATOR_NOT_AVAILABLE",
            TXN_TOPIC, why)
        self._last_create_error = why


async def _every(interval_ms: int, work: Callable[[], Awaitable[int]], what: str) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await work()
        except Exception:  # a bug must not stop the timer for good
            log.exception("the transaction coordinator's %s failed; trying again", what)
