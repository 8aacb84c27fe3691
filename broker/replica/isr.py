"""IsrUpdater: a partition leader's ISR changes, sent to the controller as AlterPartition
(reference/kafka-data-plane.md §4.3). One change per partition is in flight at a time (the
partition is *pending* meanwhile); changes queued within one event-loop turn go together in
one request. The answer is handled as Kafka's Partition does: success adopts the returned
ISR, a certain failure returns to the committed state, a fenced or stale request stays pending
until new metadata replaces it, anything else is retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from broker.replica.partition import IsrChange, Partition
from kraft.errors import Errors, error_name
from metadata.rpc import broker_pb2 as pb

log = logging.getLogger(__name__)

AlterPartition = Callable[[pb.AlterPartitionRequest], Awaitable[pb.AlterPartitionResponse]]

# The request was certainly not applied: go back to the committed ISR at once.
_ABANDON = {Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA}
# Stale or fenced: wait for the metadata that will replace the pending state.
_WAIT_FOR_METADATA = {Errors.FENCED_LEADER_EPOCH, Errors.INVALID_UPDATE_VERSION,
                      Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID,
                      Errors.INVALID_REQUEST, Errors.NEW_LEADER_ELECTED}
RETRY_BACKOFF_S = 0.05


class IsrUpdater:
    def __init__(self, broker_id: int, alter_partition: AlterPartition,
                 broker_epoch: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self._alter_partition = alter_partition
        self._broker_epoch = broker_epoch
        self._queue: dict[tuple[str, int], tuple[Partition, IsrChange]] = {}
        self._task: asyncio.Task[None] | None = None
        # The manager's re-check of the HW once an ISR change is committed (a callback: the
        # manager imports this module, not the other way round).
        self._on_committed: Callable[[Partition], None] | None = None
        self.requests_sent = 0
        self.shrinks_committed = 0
        self.expands_committed = 0

    def bind(self, on_committed: Callable[[Partition], None]) -> None:
        self._on_committed = on_committed

    def submit(self, partition: Partition, change: IsrChange) -> None:
        partition.begin_isr_change(change)
        self._queue[(partition.topic, partition.partition)] = (partition, change)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._send_all())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _send_all(self) -> None:
        while self._queue:
            await asyncio.sleep(0)  # let this turn's changes join the request
            batch, self._queue = self._queue, {}
            retry = await self._send(list(batch.values()))
            if retry:
                await asyncio.sleep(RETRY_BACKOFF_S)
                for partition, change in retry:
                    key = (partition.topic, partition.partition)
                    if key not in self._queue and self._still_wanted(partition, change):
                        self._queue[key] = (partition, change)

    def _still_wanted(self, partition: Partition, change: IsrChange) -> bool:
        return (partition.is_leader and partition.leader_epoch == change.leader_epoch
                and partition.pending_isr == change.isr)

    def _epoch_of(self, broker: int, change: IsrChange) -> int:
        """The epoch a member's fetches carried (this broker: its own), never the image's: an
        image epoch could be a re-registered replica that holds nothing (KAFKA-14139)."""
        if broker == self.broker_id:
            return self._broker_epoch()
        if len(change.broker_epochs) == len(change.isr):
            return change.broker_epochs[change.isr.index(broker)]
        return -1

    async def _send(
        self, changes: list[tuple[Partition, IsrChange]]
    ) -> list[tuple[Partition, IsrChange]]:
        """Send one AlterPartition; returns the changes to retry."""
        by_topic: dict[str, list[pb.AlterPartitionRequest.PartitionData]] = {}
        for partition, change in changes:
            by_topic.setdefault(partition.log.topic_id, []).append(
                pb.AlterPartitionRequest.PartitionData(
                    partition_index=partition.partition, leader_epoch=change.leader_epoch,
                    partition_epoch=change.partition_epoch,
                    leader_recovery_state=change.leader_recovery_state,
                    new_isr=[pb.BrokerEpoch(broker_id=b, broker_epoch=self._epoch_of(b, change))
                             for b in change.isr]))
        request = pb.AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self._broker_epoch(),
            topics=[pb.AlterPartitionRequest.TopicData(topic_id=t, partitions=parts)
                    for t, parts in by_topic.items()])
        self.requests_sent += 1
        try:
            reply = await self._alter_partition(request)
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.warning("AlterPartition failed, retrying: %s", exc)
            return changes
        if reply.error_code != Errors.NONE:
            log.info("AlterPartition refused (%s: %s), retrying", error_name(reply.error_code),
                     reply.error_message)
            return changes
        answers = {(r.topic_id, r.partition_index): r for r in reply.partitions}
        retry = []
        for partition, change in changes:
            answer = answers.get((partition.log.topic_id, partition.partition))
            if answer is None or not self._handle(partition, change, answer):
                retry.append((partition, change))
        return retry

    def _handle(self, partition: Partition, change: IsrChange,
                answer: pb.AlterPartitionResponse.PartitionResult) -> bool:
        """Apply one partition's answer; False to retry it."""
        on_committed = self._on_committed
        assert on_committed is not None
        if not self._still_wanted(partition, change):
            return True  # newer metadata replaced the pending state: the answer is moot
        code = answer.error_code
        if code == Errors.NONE:
            before = set(partition.isr)
            if partition.complete_isr_change(answer.leader_epoch, tuple(answer.isr),
                                             answer.partition_epoch,
                                             answer.leader_recovery_state):
                after = set(answer.isr)
                self.shrinks_committed += bool(before - after)
                self.expands_committed += bool(after - before)
                log.info("ISR of %s-%d is now %s (partition epoch %d)", partition.topic,
                         partition.partition, list(answer.isr), answer.partition_epoch)
                on_committed(partition)
            return True
        if code in _ABANDON:
            partition.abandon_isr_change()
            log.info("AlterPartition for %s-%d not applied (%s): %s", partition.topic,
                     partition.partition, error_name(code), answer.error_message)
            return True
        if code in _WAIT_FOR_METADATA:
            log.info("AlterPartition for %s-%d refused (%s); waiting for new metadata",
                     partition.topic, partition.partition, error_name(code))
            return True
        return False
