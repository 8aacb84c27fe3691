"""The ReplicaManager's state and the helpers every part of it uses: the replicas, the image
acted on, the parked requests and their keys, the leader's high-watermark step, and the errors
for a partition this broker does not lead. The manager is split along its seams (issue 32):
applying metadata (broker/replica/manager_leadership.py), Produce and DeleteRecords
(manager_writes.py), Fetch, ListOffsets and OffsetForLeaderEpoch (manager_reads.py); its
lifecycle, the follower's side and the ISR by lag are in manager.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from broker.api import NO_EPOCH
from broker.log.config import LogConfig
from broker.log.log_manager import LogManager
from broker.replica.config import ReplicaConfig, TopicPartition
from broker.replica.fetcher import FetcherManager
from broker.replica.isr import IsrUpdater
from broker.replica.partition import Partition
from broker.replica.waiters import Waiters
from kraft.errors import Errors
from metadata.image import MetadataImage, PartitionRegistration, TopicImage

# The manager's one logger, whichever of its modules logs (operators filter on this name).
log = logging.getLogger("broker.replica.manager")

AllocateProducerId = Callable[[], Awaitable[int]]


def _hw_key(tp: TopicPartition) -> tuple[str, str, int]:
    return ("hw", *tp)


def _leo_key(tp: TopicPartition) -> tuple[str, str, int]:
    return ("leo", *tp)


class ReplicaManagerState:
    """What ReplicaManager.__init__ sets (broker/replica/manager.py says what each is for)."""

    broker_id: int
    logs: LogManager
    config: ReplicaConfig
    fetchers: FetcherManager
    isr: IsrUpdater
    _allocate_producer_id: AllocateProducerId | None
    now_ms: Callable[[], int]
    partitions: dict[TopicPartition, Partition]
    image: MetadataImage
    waiters: Waiters
    records_lost: int
    records_truncated: int
    _seen_topics: dict[str, TopicImage]
    _applied: dict[TopicPartition, PartitionRegistration]
    _apply_task: asyncio.Task[None] | None
    _create_tasks: set[asyncio.Task[None]]
    _log_configs: dict[str, LogConfig]
    _min_isrs: tuple[MetadataImage, dict[str, int]]
    _shrink_task: asyncio.Task[None] | None
    _closed: bool
    _latest: MetadataImage
    active: bool
    role_listeners: list[Callable[[TopicPartition, bool, int], None]]
    marker_listeners: list[Callable[[TopicPartition, int, bool], None]]

    def _log_config(self, topic: str) -> LogConfig:
        config = self._log_configs.get(topic)
        if config is None:
            config = self._log_configs[topic] = LogConfig.for_topic(self.image, topic)
        return config

    def _min_isr(self, topic: str) -> int:
        """The topic's min.insync.replicas, parsed once per image: every append and every
        follower fetch that moves the HW asks (parsing it was 3-4 % of a leader's loop under
        issue 28's paced producer)."""
        image, by_topic = self._min_isrs
        if image is not self.image:
            image, by_topic = self._min_isrs = (self.image, {})
        value = by_topic.get(topic)
        if value is None:
            value = by_topic[topic] = int(image.topic_setting(topic, "min.insync.replicas"))
        return value

    def min_isr_of(self, partition: Partition) -> int:
        return partition.effective_min_isr(self._min_isr(partition.topic))

    def eligible(self, broker_id: int) -> bool:
        """May join an ISR: registered, unfenced, not shutting down (KIP-841)."""
        return self.image.cluster.is_active(broker_id)

    def _notify(self, tp: TopicPartition) -> None:
        self.waiters.notify(_hw_key(tp))
        self.waiters.notify(_leo_key(tp))

    def _after_leader_progress(self, partition: Partition, now: int) -> None:
        tp = (partition.topic, partition.partition)
        if partition.maybe_increment_hw(self._min_isr(partition.topic), now,
                                        self.config.replica_lag_time_max_ms, self.eligible):
            self.waiters.notify(_hw_key(tp))

    def on_isr_committed(self, partition: Partition) -> None:
        """An AlterPartition answer changed the ISR: re-check the HW (KAFKA-13091)."""
        self._after_leader_progress(partition, self.now_ms())
        self._notify((partition.topic, partition.partition))

    def _missing_error(self, topic: str, partition: int) -> int:
        """The error for a partition this broker holds no replica of: a known partition lives
        elsewhere (NOT_LEADER_OR_FOLLOWER), an unknown one does not exist here at all, one
        whose log here is damaged is offline (KAFKA_STORAGE_ERROR, broker/log/log_loader.py)."""
        if self.logs.partition_offline(topic, partition):
            return Errors.KAFKA_STORAGE_ERROR
        image_topic = self.image.topic(topic)
        if image_topic is not None and image_topic.partition(partition) is not None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.UNKNOWN_TOPIC_OR_PARTITION

    def _check_epoch(self, current_leader_epoch: int, partition: Partition) -> int | None:
        """Kafka's checkCurrentLeaderEpoch plus the leader check (§3.2)."""
        if current_leader_epoch != NO_EPOCH:
            if current_leader_epoch < partition.leader_epoch:
                return Errors.FENCED_LEADER_EPOCH
            if current_leader_epoch > partition.leader_epoch:
                return Errors.UNKNOWN_LEADER_EPOCH
        if not partition.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return None
