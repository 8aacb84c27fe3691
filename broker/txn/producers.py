"""A partition's producers as DescribeProducers (61) shows them (Kafka's
UnifiedLog.activeProducers): every producer id the partition's producer state knows, with its
epoch, last sequence and last batch timestamp, the coordinator epoch of its last marker and the
first offset of its open transaction (-1 for none).

Any replica answers, leader or follower, as Kafka's Partition.activeProducerState: the
producer state is kept by every append, the follower's too (broker/log/producer_state.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from broker.log.partition_log import PartitionLog
from broker.log.producer_state import ProducerEntry
from broker.replica.manager import ReplicaManager
from kraft.errors import Errors


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


class ProducerStates(Protocol):
    def active_producers(self, topic: str, partition: int) -> list[ActiveProducer] | int:
        """The partition's producers on this broker, or the Kafka error code why not."""
        ...


def active_producer(entry: ProducerEntry) -> ActiveProducer:
    last = entry.batches[-1] if entry.batches else None
    # The transaction fields come with the partition side of transactions (issue 30 item 2,
    # broker/log/producer_txn.py); a producer state without them has no transaction to show.
    return ActiveProducer(
        entry.producer_id, entry.epoch, entry.last_seq,
        last.timestamp_ms if last is not None else -1,
        int(getattr(entry, "coordinator_epoch", -1)),
        int(getattr(entry, "txn_first_offset", -1)))


def log_producers(log: PartitionLog) -> list[ActiveProducer]:
    # PartitionLog has no public view of its producer state; this read is the only one.
    return sorted((active_producer(e) for e in log._producers.entries()),
                  key=lambda p: p.producer_id)


class ReplicaProducerStates:
    """The producers of the partitions this broker holds a replica of."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def active_producers(self, topic: str, partition: int) -> list[ActiveProducer] | int:
        replica = self._replicas.partitions.get((topic, partition))
        if replica is not None:
            return log_producers(replica.log)
        if self._replicas.logs.partition_offline(topic, partition):
            return int(Errors.KAFKA_STORAGE_ERROR)
        return int(Errors.NOT_LEADER_OR_FOLLOWER)
