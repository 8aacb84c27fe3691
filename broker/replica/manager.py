"""ReplicaManager: the broker's data plane. From each metadata image it leads or follows its
replicas (Kafka's ReplicaManager.applyDelta); it serves Produce, Fetch, ListOffsets and
OffsetForLeaderEpoch for the Kafka front (broker.api.DataPlane); as a partition leader it keeps
the ISR by replica lag and sends the changes to the controller as AlterPartition.

Everything runs on the event loop: appends write to the page cache synchronously (as Kafka's
request threads do), parked requests wait in `Waiters`, followers are fed by the fetchers of
broker.replica.fetcher.

The class is split along its seams (issue 32): its state and the helpers every part uses
(broker/replica/manager_state.py), applying the metadata (manager_leadership.py), Produce and
DeleteRecords (manager_writes.py), Fetch, ListOffsets and OffsetForLeaderEpoch
(manager_reads.py); its lifecycle, WriteTxnMarkers and InitProducerId, the follower's side
(called by the fetchers) and the ISR by lag are here. The fetchers and the ISR updater see the
manager only through what they need of it (fetcher.FollowedReplicas, a callback), so none of
them imports this module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from broker.api import ProducerIdAndEpoch
from broker.log.log_manager import LogManager
from broker.replica.config import ReplicaConfig, TopicPartition
from broker.replica.fetcher import FetcherManager
from broker.replica.isr import IsrUpdater
from broker.replica.manager_leadership import APPLY_CHUNK, APPLY_TURN_S, ReplicaLeadership
from broker.replica.manager_reads import ReplicaReads
from broker.replica.manager_state import (
    AllocateProducerId,
    _hw_key,
    _leo_key,
    log,
)
from broker.replica.manager_writes import DELETE_RECORDS_POLL_S, ReplicaWrites
from broker.replica.partition import Partition
from broker.replica.txn_markers import MarkerResults, TxnMarker, write_txn_markers
from broker.replica.waiters import Waiters
from kraft.errors import Errors
from metadata.image import EMPTY_IMAGE

# Names callers import from here (the manager's parts live in manager_*.py).
__all__ = [
    "APPLY_CHUNK",
    "APPLY_TURN_S",
    "DELETE_RECORDS_POLL_S",
    "AllocateProducerId",
    "ReplicaConfig",
    "ReplicaManager",
    "TopicPartition",
    "_hw_key",
    "_leo_key",
]


class ReplicaManager(ReplicaLeadership, ReplicaWrites, ReplicaReads):
    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        config: ReplicaConfig,
        fetchers: FetcherManager,
        isr: IsrUpdater,
        allocate_producer_id: AllocateProducerId | None = None,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.config = config
        self.fetchers = fetchers
        self.isr = isr
        self._allocate_producer_id = allocate_producer_id
        self.now_ms = now_ms
        self.partitions = {}
        self.image = EMPTY_IMAGE
        self.waiters = Waiters()
        self.records_lost = 0  # committed records cut by truncation (unclean elections)
        self.records_truncated = 0  # every record cut by truncation
        self._seen_topics = {}  # topics whose every partition is applied
        self._applied = {}
        self._apply_task = None
        self._create_tasks = set()  # new logs created off the loop (manager_leadership.py)
        self._log_configs = {}  # per topic, for the current image
        self._min_isrs = (EMPTY_IMAGE, {})  # the image they were parsed from, per topic
        self._shrink_task = None
        self._closed = False
        self._latest = EMPTY_IMAGE
        # Like Kafka's broker, act on metadata only once caught up with the log: an old image
        # could make this broker lead a partition it no longer leads and take writes for it.
        self.active = False
        # Told (topic-partition, leads it now, leader epoch) when this broker starts or stops
        # leading a partition: the group coordinator loads and unloads its groups on it.
        self.role_listeners = []
        # Called once a transaction marker written here is replicated (broker/replica/
        # txn_markers.py): (partition, producer id, commit); the group coordinator's.
        self.marker_listeners = []
        fetchers.bind(self)
        isr.bind(self.on_isr_committed)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._shrink_task = asyncio.ensure_future(self._shrink_isr_periodically())

    async def close(self) -> None:
        self._closed = True
        if self._apply_task is not None:
            self._apply_task.cancel()
            await asyncio.gather(self._apply_task, return_exceptions=True)
        for task in list(self._create_tasks):
            task.cancel()
        await asyncio.gather(*self._create_tasks, return_exceptions=True)
        if self._shrink_task is not None:
            self._shrink_task.cancel()
            await asyncio.gather(self._shrink_task, return_exceptions=True)
        await self.fetchers.close()
        await self.isr.close()

    # -- WriteTxnMarkers, InitProducerId ---------------------------------------------------

    async def write_txn_markers(self, markers: Sequence[TxnMarker]) -> list[MarkerResults]:
        """WriteTxnMarkers (broker/replica/txn_markers.py)."""
        return await write_txn_markers(self, markers)

    async def init_producer_id(self, transactional_id: str | None) -> ProducerIdAndEpoch:
        if transactional_id is not None:
            return ProducerIdAndEpoch(Errors.UNSUPPORTED_VERSION,
                                      error_message="transactions are not supported")
        if self._allocate_producer_id is None:
            return ProducerIdAndEpoch(Errors.COORDINATOR_NOT_AVAILABLE)
        try:
            producer_id = await self._allocate_producer_id()
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.warning("cannot allocate a producer id: %s", exc)
            return ProducerIdAndEpoch(Errors.COORDINATOR_NOT_AVAILABLE,
                                      error_message=str(exc))
        return ProducerIdAndEpoch(producer_id=producer_id, producer_epoch=0)

    # -- the follower's side (called by the fetchers) --------------------------------------

    def follower(self, tp: TopicPartition, leader: int) -> Partition | None:
        """The partition if this broker still follows `leader` for it."""
        partition = self.partitions.get(tp)
        if partition is None or partition.is_leader or partition.leader != leader:
            return None
        return partition

    def on_follower_append(self, partition: Partition, leader_hw: int) -> None:
        before = partition.high_watermark
        partition.follower_high_watermark(leader_hw)
        tp = (partition.topic, partition.partition)
        self.waiters.notify(_leo_key(tp))
        if partition.high_watermark != before:
            self.waiters.notify(_hw_key(tp))

    def on_truncated(self, partition: Partition, offset: int, cut: tuple[int, int],
                     why: str) -> None:
        removed, lost = cut
        self.records_truncated += removed
        if lost:
            self.records_lost += lost
            log.warning("LOST %d committed record(s) of %s-%d: truncated to offset %d below "
                        "the high watermark (%s; an unclean leader election)", lost,
                        partition.topic, partition.partition, offset, why)
        if removed:
            log.info("truncated %s-%d to offset %d: %d record(s) removed, offsets %d-%d (%s)",
                     partition.topic, partition.partition, offset, removed, offset,
                     offset + removed - 1, why)

    # -- ISR by lag ------------------------------------------------------------------------

    async def _shrink_isr_periodically(self) -> None:
        interval = self.config.replica_lag_time_max_ms / 2000
        while not self._closed:
            await asyncio.sleep(interval)  # Kafka's isr-expiration task period
            try:
                self.shrink_isrs()
            except Exception:  # a bug must not end ISR maintenance for good
                log.exception("the periodic ISR shrink failed; trying again next period")

    def shrink_isrs(self) -> None:
        now = self.now_ms()
        for partition in list(self.partitions.values()):
            change = partition.isr_to_shrink(now, self.config.replica_lag_time_max_ms)
            if change is not None:
                dropped = sorted(set(partition.isr) - set(change.isr))
                log.info("shrinking the ISR of %s-%d from %s to %s: replica(s) %s not caught "
                         "up within replica.lag.time.max.ms=%d", partition.topic,
                         partition.partition, list(partition.isr), list(change.isr), dropped,
                         self.config.replica_lag_time_max_ms)
                self.isr.submit(partition, change)
