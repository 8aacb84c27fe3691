"""The coordinator's state as the admin APIs show it (Kafka's
TransactionCoordinator.handleDescribeTransactions and TransactionStateManager
.listTransactionStates): DescribeTransactions (65) per transactional id, ListTransactions (66)
over every id this broker coordinates. Reads only; authorization is the API's
(broker/kafka/txn_admin_api.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.txn.coordinator import PartitionStatus, TransactionCoordinator
from broker.txn.errors import TxnError
from broker.txn.model import NO_EPOCH, TopicPartition, TxnMetadata
from broker.txn.records import NO_PRODUCER_ID, TxnState

TRANSACTIONAL_ID_NOT_FOUND = 105  # Errors.java; not one the client path answers

# Kafka's TransactionState names (TransactionState.java), what the admin APIs carry.
STATE_NAMES: dict[TxnState, str] = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in STATE_NAMES.items()}


@dataclass(frozen=True, slots=True)
class TxnDescription:
    transactional_id: str
    error: int
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1  # -1: no transaction open
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TxnList:
    error: int
    listings: tuple[TxnListing, ...] = ()
    unknown_state_filters: tuple[str, ...] = ()


def describe(coordinator: TransactionCoordinator, transactional_id: str) -> TxnDescription:
    """One id: INVALID_REQUEST when empty, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
    off its coordinator, TRANSACTIONAL_ID_NOT_FOUND when unknown or expiring; else its state.
    The partitions are those of the open transaction; of a prepared one, only those still
    without their marker (Kafka's topicPartitions: removePartition as each marker is written)."""
    if not transactional_id:
        return TxnDescription(transactional_id, TxnError.INVALID_REQUEST)
    error = coordinator.coordinator_error(transactional_id)
    if error is not None:
        return TxnDescription(transactional_id, error)
    meta = coordinator.txns.get(transactional_id)
    if meta is None or meta.state is TxnState.DEAD:
        return TxnDescription(transactional_id, TRANSACTIONAL_ID_NOT_FOUND)
    return TxnDescription(
        transactional_id, TxnError.NONE, STATE_NAMES[meta.state], meta.timeout_ms,
        meta.start_ms, meta.producer_id, meta.producer_epoch, tuple(sorted(meta.partitions)))


def list_transactions(coordinator: TransactionCoordinator, states: Iterable[str] = (),
                      producer_ids: Iterable[int] = (), duration_ms: int = -1) -> TxnList:
    """Every id of the partitions this broker coordinates, filtered as Kafka filters: by state
    names (unknown names come back in `unknown_state_filters`), by producer id, and by
    duration (v1: only those whose transaction started more than `duration_ms` ago; as in
    Kafka an id with no open transaction has start -1, so it passes). Dead ids are never
    listed; COORDINATOR_LOAD_IN_PROGRESS while any partition loads."""
    if any(p.status is PartitionStatus.LOADING for p in coordinator.partitions.values()):
        return TxnList(TxnError.COORDINATOR_LOAD_IN_PROGRESS)
    unknown = tuple(name for name in dict.fromkeys(states) if name not in _BY_NAME)
    wanted_states = {_BY_NAME[name] for name in states if name in _BY_NAME}
    wanted_ids = set(producer_ids)
    now = coordinator.now_ms()

    def included(meta: TxnMetadata) -> bool:
        if meta.state is TxnState.DEAD:
            return False
        if wanted_ids and meta.producer_id not in wanted_ids:
            return False
        if wanted_states and meta.state not in wanted_states:
            return False
        return not (duration_ms >= 0 and now - meta.start_ms <= duration_ms)

    listings = tuple(TxnListing(meta.transactional_id, meta.producer_id, STATE_NAMES[meta.state])
                     for _, meta in sorted(coordinator.txns.items()) if included(meta))
    return TxnList(TxnError.NONE, listings, unknown)
