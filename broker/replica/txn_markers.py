"""WriteTxnMarkers on the partition leaders (Kafka's ReplicaManager.appendRecords for
markers, KafkaApis.handleWriteTxnMarkersRequest): each marker's COMMIT/ABORT control batch is
appended to each partition this broker leads and answered once replicated, as an acks=all
produce (docs/transactions.md). A marker refused by the log (a stale producer epoch, a fenced
coordinator) is answered with the log's code; the coordinator then drops the transaction.

Once a marker is replicated, `ReplicaManager.marker_listeners` hear of it: the group
coordinator makes a transaction's offsets visible or drops them (TxnOffsetCommit).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.api import ProducePartitionResult
from broker.records import HEADER_SIZE, AppendError, parse_header
from kraft.errors import Errors

if TYPE_CHECKING:
    from broker.replica.manager_writes import ReplicaWrites
    from broker.replica.partition import Partition

log = logging.getLogger(__name__)

# Kafka answers markers within the broker's request.timeout.ms (30 s by default).
MARKER_TIMEOUT_MS = 30_000
TopicPartition = tuple[str, int]
MarkerResults = dict[TopicPartition, int]  # partition -> error code


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One marker of a WriteTxnMarkers request."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


def records_end(records: bytes) -> int:
    """The offset after the last batch in `records` (whole batches as a read returns them)."""
    position = 0
    end = -1
    while position + HEADER_SIZE <= len(records):
        header = parse_header(records, position)
        end = header.next_offset
        position += header.size
    return end


async def write_txn_markers(manager: ReplicaWrites, markers: Sequence[TxnMarker],
                            timeout_ms: int = MARKER_TIMEOUT_MS) -> list[MarkerResults]:
    """Per marker, each partition's code: NONE once its marker is replicated."""
    now = manager.now_ms()
    slots: list[tuple[int, TopicPartition]] = []
    results: list[ProducePartitionResult] = []
    parked: list[tuple[int, Partition, int, int]] = []
    for number, marker in enumerate(markers):
        for tp in marker.partitions:
            code, waiting = _append(manager, marker, tp, now)
            if waiting is not None:
                parked.append((len(results), *waiting))
            slots.append((number, tp))
            results.append(ProducePartitionResult(code))
    if parked:
        await manager._await_replication(results, parked, timeout_ms)
    answers: list[MarkerResults] = [{} for _ in markers]
    for (number, tp), result in zip(slots, results, strict=True):
        answers[number][tp] = result.error
        marker = markers[number]
        if result.error == Errors.NONE:
            for listener in manager.marker_listeners:
                try:
                    listener(tp, marker.producer_id, marker.commit)
                except Exception:  # a listener's bug must not fail the marker
                    log.exception("a marker listener failed for %s-%d", *tp)
    return answers


def _append(manager: ReplicaWrites, marker: TxnMarker, tp: TopicPartition, now: int
            ) -> tuple[int, tuple[Partition, int, int] | None]:
    partition = manager.partitions.get(tp)
    if partition is None:
        return manager._missing_error(*tp), None
    if manager.logs.is_offline(partition.log):
        return Errors.KAFKA_STORAGE_ERROR, None
    if not partition.is_leader:
        return Errors.NOT_LEADER_OR_FOLLOWER, None
    min_isr = manager.min_isr_of(partition)
    if len(partition.isr) < partition.effective_min_isr(min_isr):
        return Errors.NOT_ENOUGH_REPLICAS, None
    try:
        appended = partition.log.append_marker(
            marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch,
            partition.leader_epoch, now)
    except AppendError as exc:
        if exc.code == Errors.KAFKA_STORAGE_ERROR:
            manager.logs.fail_dir(partition.log.directory, exc)
        else:
            log.info("%s-%d: marker refused: %s", *tp, exc.message)
        return exc.code, None
    except OSError as exc:
        log.error("cannot append a marker to %s-%d: %s", *tp, exc)
        manager.logs.fail_dir(partition.log.directory, exc)
        return Errors.KAFKA_STORAGE_ERROR, None
    manager.waiters.notify(("leo", *tp))  # the followers' parked fetches (manager._leo_key)
    manager._after_leader_progress(partition, now)
    return Errors.NONE, (partition, appended.last_offset + 1, min_isr)
