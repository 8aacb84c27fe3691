"""ReplicaManager: the broker's data plane. From each metadata image it leads or follows its
replicas (Kafka's ReplicaManager.applyDelta); it serves Produce, Fetch, ListOffsets and
OffsetForLeaderEpoch for the Kafka front (broker.api.DataPlane); as a partition leader it keeps
the ISR by replica lag and sends the changes to the controller as AlterPartition.

Everything runs on the event loop: appends write to the page cache synchronously (as Kafka's
request threads do), parked requests wait in `Waiters`, followers are fed by the fetchers of
broker.replica.fetcher.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from broker.api import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_EPOCH,
    READ_COMMITTED,
    DeleteRecordsPartition,
    DeleteRecordsResult,
    DivergingEpoch,
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
from broker.log.config import NEVER, LogConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import OffsetOutOfRange
from broker.records import AppendError
from broker.replica.fetcher import FetcherManager
from broker.replica.isr import IsrUpdater
from broker.replica.legacy_offsets import legacy_offsets
from broker.replica.partition import NotEnoughReplicas, NotLeader, Partition
from broker.replica.txn_markers import MarkerResults, TxnMarker, records_end, write_txn_markers
from broker.replica.waiters import PRODUCE, Waiters
from kraft.errors import Errors
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration, TopicImage
from metadata.loader import LoaderManifest

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
APPLY_CHUNK = 64  # partitions applied at once; more continue in a task, turn by turn
APPLY_TURN_S = 0.01  # how long one turn of that task may hold the event loop
AllocateProducerId = Callable[[], Awaitable[int]]
# How often a DeleteRecords waiting for followers to move their log start looks again: their
# fetches report it, and nothing on that path wakes a waiter.
DELETE_RECORDS_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """The broker settings the data plane uses (Kafka's names and defaults)."""

    replica_lag_time_max_ms: int = 30000
    fetch_max_bytes: int = 57671680
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 100
    inter_broker_listener: str = "PLAINTEXT"


def _hw_key(tp: TopicPartition) -> tuple[str, str, int]:
    return ("hw", *tp)


def _leo_key(tp: TopicPartition) -> tuple[str, str, int]:
    return ("leo", *tp)


class ReplicaManager:
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
        self.partitions: dict[TopicPartition, Partition] = {}
        self.image = EMPTY_IMAGE
        self.waiters = Waiters()
        self.records_lost = 0  # committed records cut by truncation (unclean elections)
        self.records_truncated = 0  # every record cut by truncation
        self._seen_topics: dict[str, TopicImage] = {}  # topics whose every partition is applied
        self._applied: dict[TopicPartition, PartitionRegistration] = {}
        self._apply_task: asyncio.Task[None] | None = None
        self._log_configs: dict[str, LogConfig] = {}  # per topic, for the current image
        self._shrink_task: asyncio.Task[None] | None = None
        self._closed = False
        self._latest = EMPTY_IMAGE
        # Like Kafka's broker, act on metadata only once caught up with the log: an old image
        # could make this broker lead a partition it no longer leads and take writes for it.
        self.active = False
        # Told (topic-partition, leads it now, leader epoch) when this broker starts or stops
        # leading a partition: the group coordinator loads and unloads its groups on it.
        self.role_listeners: list[Callable[[TopicPartition, bool, int], None]] = []
        # Called once a transaction marker written here is replicated (broker/replica/
        # txn_markers.py): (partition, producer id, commit); the group coordinator's.
        self.marker_listeners: list[Callable[[TopicPartition, int, bool], None]] = []
        fetchers.bind(self)
        isr.bind(self)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._shrink_task = asyncio.ensure_future(self._shrink_isr_periodically())

    async def close(self) -> None:
        self._closed = True
        if self._apply_task is not None:
            self._apply_task.cancel()
            await asyncio.gather(self._apply_task, return_exceptions=True)
        if self._shrink_task is not None:
            self._shrink_task.cancel()
            await asyncio.gather(self._shrink_task, return_exceptions=True)
        await self.fetchers.close()
        await self.isr.close()

    # -- metadata (a MetadataLoader publisher) ---------------------------------------------

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self._latest = image
        if self.active and not self._closed:
            self.apply_image(image)

    def activate(self) -> None:
        """The broker caught up with the metadata log: from now on every image is acted on.
        Logs left on disk for replicas the metadata no longer gives this broker (a topic
        deleted or moved while it was down) are deleted first."""
        if self.active:
            return
        self.active = True
        for (topic, partition_id), log_ in list(self.logs.logs().items()):
            image_topic = self._latest.topic(topic)
            registration = None if image_topic is None else image_topic.partition(partition_id)
            if (image_topic is None or image_topic.topic_id != log_.topic_id
                    or registration is None or self.broker_id not in registration.replicas):
                log.info("deleting the stray log of %s-%d (topic id %s): the metadata does "
                         "not assign it to this broker", topic, partition_id, log_.topic_id)
                self.logs.delete(topic, partition_id)
        self.apply_image(self._latest)

    def on_leader_change(self, leader: object, epoch_start_offset: int) -> None:
        pass

    def apply_image(self, image: MetadataImage) -> None:
        """Lead, follow, create and delete replicas as `image` says (Kafka's applyDelta).

        Only partitions whose registration changed are touched. Up to APPLY_CHUNK of them are
        applied at once; a bigger change (a topic of thousands of partitions) continues in a
        task that yields to the event loop every 10 ms, so requests keep being served —
        a partition not applied yet answers NOT_LEADER_OR_FOLLOWER, which clients retry. A
        newer image replaces the rest of the work."""
        previous = self.image
        self.image = image
        self._log_configs = {}
        now = self.now_ms()
        by_id = image.topics.by_id
        if previous.configs is not image.configs:
            for partition in self.partitions.values():
                partition.log.update_config(self._log_config(partition.topic))
        if previous.topics is not image.topics:
            for topic_id in [t for t in self._seen_topics if by_id.get(t) is None]:
                del self._seen_topics[topic_id]
            for tp, partition in list(self.partitions.items()):
                current = image.topic(tp[0])
                if current is None or current.topic_id != partition.log.topic_id:
                    self._stop_replica(tp, delete=True)  # its topic was deleted
        work: list[tuple[TopicImage, int, PartitionRegistration]] = []
        done_topics: list[tuple[str, TopicImage]] = []
        for topic_id, topic in by_id.items():
            if self._seen_topics.get(topic_id) is topic:
                continue
            done_topics.append((topic_id, topic))
            for partition_id, registration in topic.partitions.items():
                # Re-applying a sibling's unchanged registration would drop its in-flight
                # AlterPartition (Kafka runs makeLeader for the delta's partitions only).
                if self._applied.get((topic.name, partition_id)) is registration:
                    continue
                if (self.broker_id not in registration.replicas
                        and (topic.name, partition_id) not in self.partitions):
                    continue  # neither held nor assigned here: nothing to do
                work.append((topic, partition_id, registration))
        if previous.cluster is not image.cluster:
            # A leader's endpoint may have changed, and eligibility for the ISR with it.
            self.fetchers.refresh(image)
            for partition in self.partitions.values():
                if partition.is_leader:
                    self._after_leader_progress(partition, now)
        if self._apply_task is not None and not self._apply_task.done():
            self._apply_task.cancel()  # its image is out of date; this work covers the rest
        self._apply_task = None
        if len(work) <= APPLY_CHUNK:
            self._apply_work(work, now)
            self._seen_topics.update(done_topics)
        else:
            log.info("applying %d changed partition(s) in turns of %d ms", len(work),
                     APPLY_TURN_S * 1000)
            self._apply_task = asyncio.ensure_future(self._apply_in_chunks(work, done_topics))

    async def _apply_in_chunks(self, work: list[tuple[TopicImage, int, PartitionRegistration]],
                               done_topics: list[tuple[str, TopicImage]]) -> None:
        index = 0
        self.fetchers.hold()
        try:
            while index < len(work):
                turn_ends = time.perf_counter() + APPLY_TURN_S
                now = self.now_ms()
                while index < len(work) and time.perf_counter() < turn_ends:
                    self._apply_work(work[index:index + 1], now)
                    index += 1
                await asyncio.sleep(0)  # serve requests between turns
        except Exception:
            # What was not applied is not marked applied: the next image tries it again.
            log.exception("applying the metadata to replica %s-%d failed", work[index][0].name,
                          work[index][1])
            return
        finally:
            self.fetchers.release()
        self._seen_topics.update(done_topics)

    def _apply_work(self, work: list[tuple[TopicImage, int, PartitionRegistration]],
                    now: int) -> None:
        for topic, partition_id, registration in work:
            self._apply_partition(topic, partition_id, registration, now)
            self._applied[(topic.name, partition_id)] = registration

    def _apply_partition(self, topic: TopicImage, partition_id: int,
                         registration: PartitionRegistration, now: int) -> None:
        tp = (topic.name, partition_id)
        partition = self.partitions.get(tp)
        if self.broker_id not in registration.replicas:
            if partition is not None:
                self._stop_replica(tp, delete=True)
            return
        if partition is None:
            stale = self.logs.get(topic.name, partition_id)
            if stale is not None and stale.topic_id != topic.topic_id:
                # The name now belongs to a new topic: the old data must never be served.
                self.logs.delete(topic.name, partition_id)
            try:
                log_ = self.logs.get_or_create(topic.name, partition_id, topic.topic_id,
                                               self._log_config(topic.name))
            except OSError as exc:
                # Its log dir failed (get_or_create took it offline, and the broker stops):
                # the replica stays offline, as Kafka's does, and the metadata goes on.
                log.error("cannot create the log of %s-%d: %s", topic.name, partition_id, exc)
                return
            log_.update_config(self._log_config(topic.name))
            checkpoint = self.logs.high_watermark_checkpoint(topic.name, partition_id)
            partition = Partition(log_, self.broker_id, checkpoint or 0)
            self.partitions[tp] = partition
        elif partition.is_stale(registration):
            return
        if registration.leader == self.broker_id:
            if partition.make_leader(registration, now):
                log.info("leading %s-%d in epoch %d from offset %d (ISR %s)", topic.name,
                         partition_id, registration.leader_epoch,
                         partition.leader_epoch_start_offset, list(registration.isr))
                self._role_changed(tp, True, registration.leader_epoch)
            self.fetchers.remove(tp)
            self._after_leader_progress(partition, now)
            if (change := partition.recovery_change()) is not None:
                self.isr.submit(partition, change)
        else:
            me = self.image.cluster.broker(self.broker_id)
            leaving = me is not None and me.in_controlled_shutdown and (
                registration.leader < 0 or self.broker_id not in registration.isr)
            if partition.is_leader:
                self._role_changed(tp, False, registration.leader_epoch)
            if partition.make_follower(registration) or leaving:
                self.fetchers.remove(tp)
                # In its own controlled shutdown a broker stops fetching what it was moved
                # out of (Kafka's applyDelta): nothing there waits for it any more.
                if registration.leader >= 0 and not leaving:
                    self.fetchers.add(tp, registration.leader)
            # Requests parked on this replica as a leader end now (NOT_LEADER_OR_FOLLOWER).
            self._notify(tp)

    def _stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        self._applied.pop(tp, None)
        self.fetchers.remove(tp)
        partition = self.partitions.pop(tp)
        if partition.is_leader:
            self._role_changed(tp, False, partition.leader_epoch)
        partition.leader = -1
        self._notify(tp)
        if delete:
            self.logs.delete(*tp)
            log.info("deleted the replica of %s-%d", *tp)

    def _role_changed(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        for listener in self.role_listeners:
            try:
                listener(tp, leader, epoch)
            except Exception:  # a listener's bug must not stop replication
                log.exception("a leadership listener failed for %s-%d", *tp)

    def _log_config(self, topic: str) -> LogConfig:
        config = self._log_configs.get(topic)
        if config is None:
            config = self._log_configs[topic] = LogConfig.for_topic(self.image, topic)
        return config

    def _min_isr(self, topic: str) -> int:
        value: int = self.image.topic_setting(topic, "min.insync.replicas")
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

    # -- Produce ---------------------------------------------------------------------------

    async def produce(
        self, acks: int, timeout_ms: int, partitions: Sequence[ProducePartition]
    ) -> list[ProducePartitionResult]:
        if acks not in (-1, 0, 1):
            return [ProducePartitionResult(Errors.INVALID_REQUIRED_ACKS)] * len(partitions)
        now = self.now_ms()
        results: list[ProducePartitionResult] = []
        parked: list[tuple[int, Partition, int, int]] = []
        flushes = []
        for index, request in enumerate(partitions):
            result, waiting = self._append(request, acks, now)
            results.append(result)
            if waiting is not None:
                parked.append((index, *waiting))
            partition = self.partitions.get((request.topic, request.partition))
            if result.error == Errors.NONE and partition is not None \
                    and self._flush_policy_due(partition, now):
                # flush.messages / flush.ms: Kafka fsyncs before it answers such an append.
                flushes.append(self.logs.wait_flushed(
                    request.topic, request.partition, partition.log.end_offset))
        if flushes:
            await asyncio.gather(*flushes)
        if parked:
            await self._await_replication(results, parked, timeout_ms)
        return results

    def _append(
        self, request: ProducePartition, acks: int, now: int
    ) -> tuple[ProducePartitionResult, tuple[Partition, int, int] | None]:
        tp = (request.topic, request.partition)
        partition = self.partitions.get(tp)
        if partition is None:
            return ProducePartitionResult(
                self._missing_error(request.topic, request.partition)), None
        if self.logs.is_offline(partition.log):
            return ProducePartitionResult(Errors.KAFKA_STORAGE_ERROR), None
        min_isr = self._min_isr(request.topic)
        try:
            appended = partition.append_as_leader(request.records, acks, min_isr, now)
        except NotLeader:
            return ProducePartitionResult(Errors.NOT_LEADER_OR_FOLLOWER), None
        except NotEnoughReplicas as exc:
            return ProducePartitionResult(Errors.NOT_ENOUGH_REPLICAS,
                                          error_message=str(exc)), None
        except AppendError as exc:
            if exc.code == Errors.KAFKA_STORAGE_ERROR:
                self.logs.fail_dir(partition.log.directory, exc)
            return ProducePartitionResult(exc.code, error_message=exc.message), None
        except OSError as exc:
            log.error("cannot append to %s-%d: %s", *tp, exc)
            self.logs.fail_dir(partition.log.directory, exc)
            return ProducePartitionResult(Errors.KAFKA_STORAGE_ERROR,
                                          error_message=str(exc)), None
        if not appended.duplicate:
            self.waiters.notify(_leo_key(tp))  # wake the followers' parked fetches
        self._after_leader_progress(partition, now)
        result = ProducePartitionResult(
            Errors.NONE, appended.base_offset, appended.log_append_time_ms,
            partition.log.start_offset)
        if acks == -1:
            return result, (partition, appended.last_offset + 1, min_isr)
        return result, None

    async def _await_replication(
        self, results: list[ProducePartitionResult],
        parked: list[tuple[int, Partition, int, int]], timeout_ms: int,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        pending = parked
        while pending:
            still = []
            for index, partition, required, min_isr in pending:
                live = self.partitions.get((partition.topic, partition.partition))
                outcome = (Errors.NOT_LEADER_OR_FOLLOWER if live is not partition
                           else partition.check_enough_replicas(required, min_isr))
                if outcome is None:
                    still.append((index, partition, required, min_isr))
                elif outcome != Errors.NONE:
                    results[index] = ProducePartitionResult(outcome)
            pending = still
            if not pending:
                return
            keys = [_hw_key((p.topic, p.partition)) for _, p, _, _ in pending]
            woken = await self.waiters.wait_any(keys, deadline - loop.time(), PRODUCE)
            if not woken and loop.time() >= deadline:
                for index, *_ in pending:
                    results[index] = ProducePartitionResult(Errors.REQUEST_TIMED_OUT)
                return

    @staticmethod
    def _flush_policy_due(partition: Partition, now: int) -> bool:
        config = partition.log.config
        has_policy = config.flush_messages < NEVER or config.flush_ms < NEVER
        return has_policy and partition.log.flush_due(now)

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

    # -- Fetch -----------------------------------------------------------------------------

    async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
        if params.from_follower and params.replica_id in self.fetchers.blocked:
            # An injected network partition: the follower's fetch is lost on the way, so it
            # counts for nothing and its answer comes late and empty.
            await asyncio.sleep(max(0, params.max_wait_ms) / 1000)
            return [FetchPartitionResult(Errors.REQUEST_TIMED_OUT)] * len(params.partitions)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, params.max_wait_ms) / 1000
        now = self.now_ms()
        if params.from_follower:
            for request in params.partitions:
                self._record_follower_fetch(params, request, now)
        while True:
            results, size, done = self._read_all(params)
            remaining = deadline - loop.time()
            if done or size >= params.min_bytes or remaining <= 0:
                return results
            key = _leo_key if params.from_follower else _hw_key
            woken = await self.waiters.wait_any(
                [key((r.topic, r.partition)) for r in params.partitions], remaining)
            if not woken:
                return self._read_all(params)[0]

    def _record_follower_fetch(self, params: FetchParams, request: FetchPartition,
                               now: int) -> None:
        """The follower's fetch offset is its LEO: track it, maybe add it to the ISR and move
        the HW. Skipped when the request is fenced or diverges (then it holds nothing we
        could count on)."""
        partition = self.partitions.get((request.topic, request.partition))
        if partition is None or self._fetch_error(params, request, partition) is not None:
            return
        if self._diverging(request, partition) is not None:
            return
        if request.fetch_offset < partition.log.start_offset \
                or request.fetch_offset > partition.log.end_offset:
            return
        partition.update_follower(params.replica_id, request.fetch_offset,
                                  request.log_start_offset, partition.log.end_offset, now,
                                  params.replica_epoch)
        if (change := partition.isr_to_expand(params.replica_id, self.eligible)) is not None:
            self.isr.submit(partition, change)
        self._after_leader_progress(partition, now)

    def _read_all(self, params: FetchParams) -> tuple[list[FetchPartitionResult], int, bool]:
        """(results, bytes read, answer at once: an error or divergence)."""
        limit = min(params.max_bytes, self.config.fetch_max_bytes)
        results = []
        total = 0
        urgent = False
        for request in params.partitions:
            result = self._read(params, request, limit - total, first=total == 0)
            # A leader still confirming its predecessor's HW waits like a long poll.
            if result.error not in (Errors.NONE, Errors.OFFSET_NOT_AVAILABLE) \
                    or result.diverging_epoch is not None:
                urgent = True
            total += len(result.records)
            results.append(result)
        return results, total, urgent

    def _fetch_error(self, params: FetchParams, request: FetchPartition,
                     partition: Partition | None) -> FetchPartitionResult | None:
        if partition is None:
            return FetchPartitionResult(self._missing_error(request.topic, request.partition))
        if self.logs.is_offline(partition.log):
            return FetchPartitionResult(Errors.KAFKA_STORAGE_ERROR)
        if request.topic_id is not None and request.topic_id != partition.log.topic_id:
            return FetchPartitionResult(Errors.INCONSISTENT_TOPIC_ID)
        fencing = self._check_epoch(request.current_leader_epoch, partition)
        if fencing is not None:
            return FetchPartitionResult(fencing, current_leader=self._leader_of(partition))
        if params.from_follower:
            if params.replica_id not in partition.replicas:
                code = (Errors.UNKNOWN_LEADER_EPOCH if request.current_leader_epoch != NO_EPOCH
                        else Errors.NOT_LEADER_OR_FOLLOWER)
                return FetchPartitionResult(code)
            registered = self.image.cluster.broker(params.replica_id)
            if params.replica_epoch >= 0 and registered is not None \
                    and params.replica_epoch < registered.epoch:
                # A stale incarnation (KIP-903); a newer one is served before our image knows
                # of its registration.
                return FetchPartitionResult(Errors.NOT_LEADER_OR_FOLLOWER)
        return None

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

    def _leader_of(self, partition: Partition) -> tuple[int, int] | None:
        return (partition.leader, partition.leader_epoch) if partition.leader >= 0 else None

    def _diverging(self, request: FetchPartition, partition: Partition) -> DivergingEpoch | None:
        if request.last_fetched_epoch == NO_EPOCH:
            return None
        epoch, end = partition.log.end_offset_for_epoch(request.last_fetched_epoch)
        if epoch < 0 or end < 0:
            return None  # undefined: _read answers OFFSET_OUT_OF_RANGE
        if epoch < request.last_fetched_epoch or end < request.fetch_offset:
            return DivergingEpoch(epoch, end)
        return None

    def _read(self, params: FetchParams, request: FetchPartition, budget: int,
              first: bool) -> FetchPartitionResult:
        partition = self.partitions.get((request.topic, request.partition))
        error = self._fetch_error(params, request, partition)
        if error is not None:
            return error
        assert partition is not None
        log_ = partition.log
        hw = partition.high_watermark
        if not params.from_follower and request.fetch_offset >= hw \
                and hw < partition.leader_epoch_start_offset:
            # A new leader's HW is the one it learned as a follower, a fetch behind its
            # predecessor's: a consumer that read up to the old one would see the watermark
            # step back. Until the followers confirm the epoch's start (normally one round
            # trip), such a consumer waits, then gets the retriable error ListOffsets gives
            # (KIP-207). One still below this HW reads up to it (Kafka serves it to all).
            return FetchPartitionResult(Errors.OFFSET_NOT_AVAILABLE)
        # Offsets taken once, before the read, so an answer never mixes two moments (KAFKA-9807).
        lso = log_.last_stable_offset(hw)
        base = FetchPartitionResult(high_watermark=hw, last_stable_offset=lso,
                                    log_start_offset=log_.start_offset)
        if params.from_follower and request.last_fetched_epoch != NO_EPOCH:
            epoch, end = log_.end_offset_for_epoch(request.last_fetched_epoch)
            if epoch < 0 or end < 0:
                return replace(base, error=Errors.OFFSET_OUT_OF_RANGE)
            diverging = self._diverging(request, partition)
            if diverging is not None:
                return replace(base, diverging_epoch=diverging)
        committed = params.isolation_level == READ_COMMITTED and not params.from_follower
        max_offset = log_.end_offset if params.from_follower else lso if committed else hw
        if max_offset <= request.fetch_offset <= log_.end_offset:
            return base  # nothing new yet: not an error
        max_bytes = max(0, min(request.partition_max_bytes, budget))
        if max_bytes == 0 and not first:
            return base
        try:
            records = log_.read(request.fetch_offset, max_bytes, max_offset, min_one_batch=first)
        except OffsetOutOfRange:
            return replace(base, error=Errors.OFFSET_OUT_OF_RANGE)
        except OSError as exc:
            log.error("cannot read %s-%d: %s", request.topic, request.partition, exc)
            self.logs.fail_dir(log_.directory, exc)
            return FetchPartitionResult(Errors.KAFKA_STORAGE_ERROR)
        if committed and records:
            # Those the returned batches overlap (Kafka's upper bound: the end of the read);
            # the batches' end is only read when some aborted transaction is that near.
            aborted = log_.aborted_transactions(request.fetch_offset, max_offset)
            end = records_end(records) if aborted else max_offset
            aborted = [txn for txn in aborted if txn.first_offset < end]
            if aborted:
                return replace(base, records=records, aborted_transactions=tuple(
                    (txn.producer_id, txn.first_offset) for txn in aborted))
        return replace(base, records=records)

    # -- ListOffsets, OffsetForLeaderEpoch, InitProducerId ---------------------------------

    def list_offsets(
        self, replica_id: int, isolation_level: int, partitions: Sequence[ListOffsetsPartition]
    ) -> list[ListOffsetsResult]:
        return [self._list_offset(replica_id, request, isolation_level)
                for request in partitions]

    def _list_offset(self, replica_id: int, request: ListOffsetsPartition,
                     isolation_level: int = 0) -> ListOffsetsResult:
        partition = self.partitions.get((request.topic, request.partition))
        if partition is None:
            return ListOffsetsResult(self._missing_error(request.topic, request.partition))
        fencing = self._check_epoch(request.current_leader_epoch, partition)
        if fencing is not None:
            return ListOffsetsResult(fencing)
        log_ = partition.log
        epoch = partition.leader_epoch
        timestamp = request.timestamp
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ListOffsetsResult(offset=log_.start_offset, leader_epoch=epoch)
        if timestamp in (LATEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
            if replica_id >= 0:
                return ListOffsetsResult(offset=log_.end_offset, leader_epoch=epoch)
            if partition.high_watermark < partition.leader_epoch_start_offset:
                return ListOffsetsResult(Errors.OFFSET_NOT_AVAILABLE)
            latest = (log_.last_stable_offset(partition.high_watermark)
                      if isolation_level == READ_COMMITTED else partition.high_watermark)
            return ListOffsetsResult(offset=latest, leader_epoch=epoch)
        if timestamp == MAX_TIMESTAMP:
            found = log_.max_timestamp_offset(partition.high_watermark)
        elif timestamp >= 0:
            found = log_.offset_for_timestamp(timestamp)
            if found is not None and found[0] >= partition.high_watermark:
                found = None
        else:
            return ListOffsetsResult(Errors.INVALID_REQUEST)
        if found is None:
            return ListOffsetsResult(leader_epoch=epoch)
        offset, found_timestamp = found
        return ListOffsetsResult(timestamp=found_timestamp, offset=offset, leader_epoch=epoch)

    def legacy_offsets(
        self, replica_id: int, partitions: Sequence[LegacyOffsetsPartition]
    ) -> list[LegacyOffsetsResult]:
        results = []
        for request in partitions:
            partition = self.partitions.get((request.topic, request.partition))
            results.append(
                LegacyOffsetsResult(self._missing_error(request.topic, request.partition))
                if partition is None
                else legacy_offsets(partition, replica_id, request, self.now_ms()))
        return results

    def end_offsets_for_epochs(
        self, replica_id: int, partitions: Sequence[EpochEndPartition]
    ) -> list[EpochEndResult]:
        out = []
        for request in partitions:
            partition = self.partitions.get((request.topic, request.partition))
            if partition is None:
                out.append(EpochEndResult(self._missing_error(request.topic, request.partition)))
                continue
            fencing = self._check_epoch(request.current_leader_epoch, partition)
            if fencing is not None:
                out.append(EpochEndResult(fencing))
                continue
            epoch, end = partition.log.end_offset_for_epoch(request.leader_epoch)
            out.append(EpochEndResult(leader_epoch=epoch, end_offset=end))
        return out

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

    # -- DeleteRecords ---------------------------------------------------------------------

    async def delete_records(
        self, timeout_ms: int, partitions: Sequence[DeleteRecordsPartition]
    ) -> list[DeleteRecordsResult]:
        """Kafka's ReplicaManager.deleteRecords: the leader moves its log start (never past
        the high watermark), wakes its followers' parked fetches so they learn it at once,
        and answers once every live replica's log start got there (DelayedDeleteRecords)."""
        results: list[DeleteRecordsResult] = []
        waiting: list[tuple[int, Partition, int]] = []
        for index, request in enumerate(partitions):
            result = self._delete_records(request)
            if isinstance(result, DeleteRecordsResult):
                results.append(result)
            else:
                results.append(DeleteRecordsResult(Errors.REQUEST_TIMED_OUT))
                waiting.append((index, *result))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        while waiting:
            still = []
            for index, partition, offset in waiting:
                if self.partitions.get((partition.topic, partition.partition)) is not partition \
                        or not partition.is_leader:
                    results[index] = DeleteRecordsResult(Errors.NOT_LEADER_OR_FOLLOWER)
                elif (low := self._low_watermark(partition)) >= offset:
                    results[index] = DeleteRecordsResult(low_watermark=low)
                else:
                    still.append((index, partition, offset))
            waiting = still
            if not waiting or loop.time() >= deadline:
                break
            await asyncio.sleep(min(DELETE_RECORDS_POLL_S, deadline - loop.time()))
        return results

    def _delete_records(
        self, request: DeleteRecordsPartition
    ) -> DeleteRecordsResult | tuple[Partition, int]:
        """The leader's part: an error, or (partition, offset) to wait for."""
        partition = self.partitions.get((request.topic, request.partition))
        if partition is None:
            return DeleteRecordsResult(self._missing_error(request.topic, request.partition))
        if not partition.is_leader:
            return DeleteRecordsResult(Errors.NOT_LEADER_OR_FOLLOWER)
        policy = self.image.topic_setting(request.topic, "cleanup.policy")
        policies = [policy] if isinstance(policy, str) else list(policy)
        if "delete" not in policies:
            return DeleteRecordsResult(Errors.POLICY_VIOLATION)
        offset = partition.high_watermark if request.offset == -1 else request.offset
        if offset < 0 or offset > partition.high_watermark:
            return DeleteRecordsResult(Errors.OFFSET_OUT_OF_RANGE)
        try:
            partition.log.advance_start_offset(offset)
        except OSError as exc:
            log.error("cannot delete records of %s-%d: %s", request.topic, request.partition,
                      exc)
            return DeleteRecordsResult(Errors.KAFKA_STORAGE_ERROR)
        self.waiters.notify(_leo_key((request.topic, request.partition)))
        return partition, offset

    def _low_watermark(self, partition: Partition) -> int:
        """Kafka's Partition.lowWatermarkIfLeader: the smallest log start among the leader and
        the followers on live brokers (-1 for one that has not fetched yet)."""
        low = partition.log.start_offset
        for replica, state in partition.followers.items():
            registration = self.image.cluster.broker(replica)
            if registration is not None and not registration.fenced:
                low = min(low, state.log_start)
        return low

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
