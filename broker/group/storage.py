"""The coordinator on the data plane: `__consumer_offsets` is an ordinary replicated partition
log, so group state survives a broker like any record does.

- GroupStorage.append: records as one uncompressed v2 batch through the replica manager,
  acks=all, answered once the high watermark covers it (offsets.commit.timeout.ms).
- Leadership: the replica manager tells us when this broker starts or stops leading a
  partition of the topic; we then load (replay from log start to log end, chunk by chunk,
  yielding to the event loop) or unload its groups.
- The timer driver: one task that fires the coordinator's deadlines.
- The topic itself is created on first use, through the controller (`create_topic`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator

from broker.api import ProducePartition
from broker.group.config import GroupConfig
from broker.group.consumer_protocol.manager import ConsumerGroupManager
from broker.group.consumer_protocol.records import TopicMetadata
from broker.group.coordinator import NEVER, GroupCoordinator
from broker.group.placement import OFFSETS_TOPIC
from broker.group.records import Records
from broker.group.retention import expire, purge_deleted_topics
from broker.group.txn_offsets import Resolved, TxnOffsets, resolve
from broker.log.partition_log import OffsetOutOfRange
from broker.records import HEADER_SIZE, Record, build_batch, parse_header
from broker.replica.manager import ReplicaManager, TopicPartition
from kraft.errors import Errors, error_name

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1 << 20  # bytes read per turn while loading, between event-loop yields
CREATE_RETRY_MS = 1000  # after a failed creation, FindCoordinator asks again no sooner
PURGE_INTERVAL_S = 5.0  # how soon the offsets of a deleted topic go
CreateTopic = Callable[[int, int, dict[str, str]], Awaitable[tuple[int, str]]]


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupStorage:
    def __init__(self, replicas: ReplicaManager, config: GroupConfig,
                 now_ms: Callable[[], int] = _now_ms) -> None:
        self.replicas = replicas
        self.config = config
        self.coordinator = GroupCoordinator(config, self, now_ms)
        self.coordinator.on_deadline_set = self._wake
        # KIP-848's consumer groups live in the same coordinator's groups.
        self.consumer = ConsumerGroupManager(self.coordinator, self._topic_metadata,
                                             lambda: list(self.replicas.image.topics.by_name))
        # Transactional offset commits, pending until their marker (TxnOffsetCommit).
        self.txn_offsets = TxnOffsets(self)
        self.create_topic: CreateTopic | None = None  # set once the broker can reach a controller
        self._now_ms = now_ms
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._timer: asyncio.Task[None] | None = None
        self._cleanup: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._creating: asyncio.Task[None] | None = None
        self._create_failed_at = -CREATE_RETRY_MS
        self._last_create_error = ""
        replicas.role_listeners.append(self._on_role)

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._timer = asyncio.ensure_future(self._run_timers())
        self._cleanup = asyncio.ensure_future(self._run_cleanup())

    async def close(self) -> None:
        tasks = [t for t in (self._timer, self._cleanup, self._creating, *self._loads.values())
                 if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for partition in list(self.coordinator.partitions):
            self.coordinator.unload(partition)

    # ---- appends (the coordinator's GroupLog) ------------------------------------------------

    async def append(self, partition: int, records: Records) -> int:
        batch = build_batch([Record(value, key) for key, value in records],
                            base_timestamp=self._now_ms())
        results = await self.replicas.produce(
            -1, self.config.offsets_commit_timeout_ms,
            [ProducePartition(OFFSETS_TOPIC, partition, batch)])
        return results[0].error

    # ---- loading and unloading --------------------------------------------------------------

    def _on_role(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        topic, partition = tp
        if topic != OFFSETS_TOPIC:
            return
        running = self._loads.pop(partition, None)
        if running is not None:
            running.cancel()
        self.txn_offsets.unloaded(partition)
        if leader:
            self.coordinator.begin_loading(partition)
            self._loads[partition] = asyncio.ensure_future(self._load(partition, epoch))
        else:
            self.coordinator.unload(partition)

    async def _load(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            resolved = await self._read(partition)
        except (OSError, OffsetOutOfRange) as exc:
            log.error("cannot load __consumer_offsets-%d: %s; its groups stay unavailable "
                      "until the next leadership change", partition, exc)
            return
        finally:
            if self._loads.get(partition) is asyncio.current_task():
                del self._loads[partition]
        records = resolved.records
        self.coordinator.finish_loading(partition, records)
        self.txn_offsets.loaded(partition, resolved.pending)
        self.consumer.start_sessions(
            group for group_id, group in list(self.coordinator.groups.items())
            if self.coordinator.partition_of(group_id) == partition)
        log.info("__consumer_offsets-%d (leader epoch %d): %d record(s) replayed in %.3f s",
                 partition, epoch, len(records), time.monotonic() - started)

    async def _read(self, partition: int) -> Resolved:
        """(key, value) of every record of this leader's log, start to end (the end as it is
        now: the coordinator writes nothing to the partition before the load completes).
        Keyless records are skipped; a transaction's records count at its COMMIT marker, or
        stay pending without one (broker/group/txn_offsets.py)."""
        out = Resolved()
        replica = self.replicas.partitions.get((OFFSETS_TOPIC, partition))
        if replica is None:
            return out
        log_ = replica.log
        end = log_.end_offset
        offset = log_.start_offset
        while offset < end:
            data = log_.read(offset, LOAD_CHUNK_BYTES, end, min_one_batch=True)
            if not data:
                break
            for batch in _batches(data):
                header = parse_header(batch)
                offset = header.next_offset
                if header.compression:
                    log.warning("__consumer_offsets-%d: skipping a compressed batch at "
                                "offset %d", partition, header.base_offset)
                    continue
                resolve(batch, out)
            await asyncio.sleep(0)  # serve requests between chunks
        return out

    def _topic_metadata(self, name: str) -> TopicMetadata | None:
        """A topic as the consumer protocol's assignors see it (the data plane's image)."""
        topic = self.replicas.image.topic(name)
        if topic is None:
            return None
        try:
            raw = base64.urlsafe_b64decode(topic.topic_id + "==")
            topic_id = uuid.UUID(bytes=raw)
        except (binascii.Error, ValueError):
            return None
        return TopicMetadata(topic_id, name, len(topic.partitions))

    # ---- timers -----------------------------------------------------------------------------

    def _wake(self) -> None:
        self._wakeup.set()

    async def _run_timers(self) -> None:
        while True:
            try:
                self.coordinator.tick()
                self.consumer.tick()
            except Exception:  # a bug must not stop every group's timers for good
                log.exception("the group coordinator's timers failed; trying again")
            deadline = min(self.coordinator.next_deadline(), self.consumer.next_deadline())
            wait_s = 1.0 if deadline >= NEVER else max(0.0, (deadline - self._now_ms()) / 1000)
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(wait_s, 1.0) + 0.001):
                    await self._wakeup.wait()

    async def _run_cleanup(self) -> None:
        """Offsets of deleted topics go within PURGE_INTERVAL_S; expired offsets every
        offsets.retention.check.interval.ms."""
        retention_ms = self.config.offsets_retention_minutes * 60_000
        interval_ms = self.config.offsets_retention_check_interval_ms
        next_expiry = self._now_ms() + interval_ms
        missing_before: set[str] = set()
        while True:
            await asyncio.sleep(min(PURGE_INTERVAL_S, interval_ms / 1000))
            try:
                names = set(self.replicas.image.topics.by_name)
                committed = {topic for group in self.coordinator.groups.values()
                             for topic, _ in group.offsets}
                # Gone in two checks in a row: a commit for a topic this broker's data plane
                # has not applied yet (the front's image may be newer) is not a deleted one.
                missing = committed - names if names else set()
                gone = missing & missing_before
                missing_before = missing
                if gone:
                    purged = await purge_deleted_topics(
                        self.coordinator, frozenset(committed - gone).__contains__)
                    log.info("removed %d committed offset(s) of deleted topics %s", purged,
                             sorted(gone))
                if self._now_ms() >= next_expiry:
                    next_expiry = self._now_ms() + interval_ms
                    expired = await expire(self.coordinator, retention_ms)
                    if expired:
                        log.info("removed %d expired committed offset(s)", expired)
            except Exception:  # a bug must not end the cleanup for good
                log.exception("the committed offsets' cleanup failed; trying again")

    # ---- the topic --------------------------------------------------------------------------

    def ensure_topic(self) -> None:
        """Ask the controller to create `__consumer_offsets` unless a request is in flight or
        one failed less than CREATE_RETRY_MS ago (FindCoordinator answers 15 meanwhile)."""
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
                config.offsets_topic_num_partitions, config.offsets_topic_replication_factor,
                {"cleanup.policy": "compact",
                 "segment.bytes": str(config.offsets_topic_segment_bytes)})
        except Exception as exc:  # the controller unreachable, a timeout: ask again later
            code, message = Errors.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"
        if code in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            log.info("created %s (%d partitions, replication factor %d)", OFFSETS_TOPIC,
                     config.offsets_topic_num_partitions, config.offsets_topic_replication_factor)
            return
        self._create_failed_at = self._now_ms()
        why = f"{error_name(code)} ({message})"
        # Once per reason: clients keep asking while it lasts (e.g. too few brokers for the RF).
        (log.warning if why != self._last_create_error else log.debug)(
            "cannot create %s yet: %s; consumers see COORDINATOR_NOT_AVAILABLE", OFFSETS_TOPIC, why)
        self._last_create_error = why


def _batches(data: bytes) -> Iterator[bytes]:
    position = 0
    while position + HEADER_SIZE <= len(data):
        size = parse_header(data, position).size
        yield data[position:position + size]
        position += size
