"""The write path of ReplicaManager (broker/replica/manager.py): Produce (the leader's
append, acks and the wait for the ISR in `Waiters`, the flush policy) and DeleteRecords (the
leader's log start moved, answered once the live followers' log starts follow).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from broker.api import (
    DeleteRecordsPartition,
    DeleteRecordsResult,
    ProducePartition,
    ProducePartitionResult,
)
from broker.log.config import NEVER
from broker.records import AppendError
from broker.replica.manager_state import ReplicaManagerState, _hw_key, _leo_key, log
from broker.replica.partition import NotEnoughReplicas, NotLeader, Partition
from broker.replica.waiters import PRODUCE
from kraft.errors import Errors

# How often a DeleteRecords waiting for followers to move their log start looks again: their
# fetches report it, and nothing on that path wakes a waiter.
DELETE_RECORDS_POLL_S = 0.05


class ReplicaWrites(ReplicaManagerState):
    """Produce and DeleteRecords on the partitions this broker leads."""

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

    # -- DeleteRecords ---------------------------------------------------------------------

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
