"""A transactional id's state as the coordinator keeps it (Kafka's TransactionMetadata), and
the replay of a `__transaction_state` partition into it.

The persisted part is a TxnLogValue; `pending` is the state a write in flight will move to
(requests meanwhile get CONCURRENT_TRANSACTIONS), `last_producer_epoch` the epoch before the
last bump (KIP-360: a retried InitProducerId of a bump that succeeded gets the current one),
both in memory only as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.txn.records import (
    NO_PRODUCER_ID,
    RecordFormatError,
    TxnLogValue,
    TxnState,
    decode_key,
    decode_value,
)

log = logging.getLogger(__name__)

NO_EPOCH = -1
EPOCH_EXHAUSTED = 32766  # Short.MaxValue - 1: the next bump takes a new producer id
MAX_EPOCH = 32767
TopicPartition = tuple[str, int]
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_EPOCH
    pending: TxnState | None = None

    def value(self, state: TxnState, now_ms: int, *, producer_id: int | None = None,
              epoch: int | None = None, partitions: Iterable[TopicPartition] | None = None,
              start_ms: int | None = None, timeout_ms: int | None = None) -> TxnLogValue:
        """The record of this id moved to `state`, the rest as it is unless given."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in (self.partitions if partitions is None else partitions):
            by_topic.setdefault(topic, []).append(partition)
        return TxnLogValue(
            self.producer_id if producer_id is None else producer_id,
            self.producer_epoch if epoch is None else epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms, state,
            tuple((topic, tuple(sorted(ids))) for topic, ids in sorted(by_topic.items())),
            now_ms, self.start_ms if start_ms is None else start_ms)

    def apply(self, value: TxnLogValue) -> None:
        """Take a written record's state (Kafka's completeTransitionTo)."""
        if value.producer_id != self.producer_id:
            self.previous_producer_id = self.producer_id
        if value.producer_epoch != self.producer_epoch or value.producer_id != self.producer_id:
            self.last_producer_epoch = self.producer_epoch
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.timeout_ms = value.timeout_ms
        self.state = value.state
        self.partitions = {(topic, p) for topic, ids in value.partitions for p in ids}
        self.start_ms = value.start_ms
        self.last_update_ms = value.last_update_ms


def restore(transactional_id: str, value: TxnLogValue) -> TxnMetadata:
    meta = TxnMetadata(transactional_id, value.producer_id, value.producer_epoch,
                       value.timeout_ms)
    meta.apply(value)
    meta.previous_producer_id = value.previous_producer_id
    meta.last_producer_epoch = NO_EPOCH
    return meta


def replay(records: Iterable[tuple[bytes, bytes | None]], where: str = "__transaction_state",
           ) -> tuple[dict[str, TxnMetadata], int]:
    """(state by transactional id, records skipped as undecodable): the last record of an id
    wins, a tombstone removes it."""
    values: dict[str, TxnLogValue | None] = {}
    skipped = 0
    for key, value in records:
        try:
            values[decode_key(key)] = None if value is None else decode_value(value)
        except RecordFormatError as exc:
            skipped += 1
            log.warning("skipping an undecodable record of %s: %s", where, exc)
    return {txn_id: restore(txn_id, value) for txn_id, value in values.items()
            if value is not None and value.state is not TxnState.DEAD}, skipped


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """The markers one prepared transaction needs: a COMMIT or ABORT control batch in each of
    its partitions, written by the partitions' leaders (WriteTxnMarkers)."""

    transactional_id: str
    coordinator_partition: int  # of __transaction_state
    coordinator_epoch: int  # that partition's leader epoch when it was loaded
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
