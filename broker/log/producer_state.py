"""Idempotent and transactional producers' state per partition (Kafka's ProducerStateManager):
for each producer id its epoch and the last five batches it wrote, so that a leader can tell a
retried batch (answered with its original offsets, nothing written) from one out of order
(reference/kafka-data-plane.md §5); and its ongoing transaction, from the offset of its first
transactional batch to its COMMIT/ABORT marker (broker/log/producer_txn.py: the last stable
offset is the first offset of the oldest one still open).

The state is derived from the log and kept up to date by every append, the leader's and the
follower's; on open and after a truncation it is restored from a snapshot taken at some offset
(broker/log/producer_snapshots.py: files at segment rolls and clean shutdowns, as Kafka's, and
copies in memory) and the batch headers from there on are replayed. Followers and replay apply
batches without checking sequences, as Kafka does for replication.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.log.producer_txn import CompletedTxn, TxnTracker
from broker.records import NO_PRODUCER_EPOCH, AppendError, RecordBatchHeader
from kraft.errors import Errors

BATCHES_KEPT = 5  # why idempotent clients cap in-flight requests at 5 (KAFKA-5494)
_MAX_I32 = 2**31 - 1


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int  # the batch's max timestamp (its append time for LogAppendTime)


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    # Transactions: the first offset of the open transaction (-1: none), the coordinator epoch
    # of the last marker (-1: unknown), the offset of the last marker (-1: none).
    txn_first_offset: int = -1
    coordinator_epoch: int = -1
    last_marker_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        last = self.batches[-1].last_offset if self.batches else -1
        return max(last, self.last_marker_offset)

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_I32)


class ProducerState:
    """Producer id -> ProducerEntry for one partition."""

    __slots__ = ("_producers", "txns")

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self.txns = TxnTracker()  # open transactions and those whose marker is unreplicated

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """A leader's check of a client batch: the stored batch it repeats (a duplicate), or
        None to append it; AppendError for a stale epoch or a sequence out of order."""
        if not header.has_producer_id:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return None  # unknown producers start anywhere (KIP-360)
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        duplicate = entry.duplicate_of(epoch, first_seq, header.last_sequence)
        if duplicate is not None:
            return duplicate
        if epoch < entry.epoch:
            raise AppendError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"producer {header.producer_id} epoch {epoch} is older than the current "
                f"epoch {entry.epoch}",
            )
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise AppendError(
                    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {header.producer_id} starts epoch {epoch} at sequence "
                    f"{first_seq}, not 0",
                )
        elif entry.batches and not in_sequence(entry.last_seq, first_seq):
            raise AppendError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {header.producer_id} epoch {epoch}: sequence {first_seq} does "
                f"not follow {entry.last_seq}",
            )
        return None

    def update(self, header: RecordBatchHeader, base_offset: int, timestamp_ms: int
               ) -> CompletedTxn | None:
        """Record a batch written at `base_offset` (leader, follower or replay). A control
        batch (a COMMIT/ABORT marker) ends the producer's transaction: returned (with a
        first offset of the marker's own when none was open), never kept as a batch (its
        sequence is -1). A transactional batch opens one if none is."""
        if not header.has_producer_id:
            return None
        producer_id = header.producer_id
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(producer_id)
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        if header.control:
            first = entry.txn_first_offset
            entry.txn_first_offset = -1
            entry.last_marker_offset = base_offset
            return self.txns.end(producer_id, base_offset if first < 0 else first, base_offset)
        if header.transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = base_offset
            self.txns.begin(producer_id, base_offset)
        entry.batches.append(BatchMetadata(
            header.base_sequence, header.last_sequence, base_offset,
            base_offset + header.last_offset_delta, timestamp_ms,
        ))
        return None

    def remove_before(self, offset: int) -> None:
        """Forget producers whose last batch lies below the log start (retention removed
        every trace of them, so they are unknown again, as in Kafka)."""
        gone = [pid for pid, entry in self._producers.items() if entry.last_offset < offset]
        for producer_id in gone:
            del self._producers[producer_id]
            self.txns.forget(producer_id)

    def last_offsets(self) -> dict[int, int]:
        """Producer id -> the last offset of its latest batch."""
        return {pid: entry.last_offset for pid, entry in self._producers.items()}

    def clear(self) -> None:
        self._producers.clear()
        self.txns = TxnTracker()

    def entries(self) -> list[ProducerEntry]:
        """Every producer's entry (a snapshot writes them)."""
        return list(self._producers.values())

    def copy(self) -> ProducerState:
        """An independent copy (a snapshot in memory)."""
        copied = ProducerState()
        for pid, entry in self._producers.items():
            copied._producers[pid] = ProducerEntry(
                pid, entry.epoch, deque(entry.batches, maxlen=BATCHES_KEPT),
                entry.txn_first_offset, entry.coordinator_epoch, entry.last_marker_offset)
        copied.txns = self.txns.copy()
        return copied

    def restore(self, entries: list[ProducerEntry]) -> None:
        """Replace the state with `entries` (a snapshot read back)."""
        self._producers = {entry.producer_id: entry for entry in entries}
        self.txns = TxnTracker.of_open(
            {entry.producer_id: entry.txn_first_offset for entry in entries
             if entry.txn_first_offset >= 0})
