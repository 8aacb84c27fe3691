"""What a cleaning pass does to transactions (Kafka's CleanedTransactionMetadata, LogCleaner's
marker retention, KIP-534's delete horizon on control batches).

The pass reads the log from its start in offset order, group after group; this state is
carried across the groups (a transaction's data may lie in an earlier group than its marker).
For each producer it notes whether a data batch of its current transaction was read and
whether one stays in the cleaned log. At the producer's COMMIT/ABORT marker:

* a batch of the transaction stays: the marker stays as it is (a replay of the log must see
  the transaction end, and an ABORT marker still bounds aborted data);
* none stays: the marker gets a delete horizon (now + `delete.retention.ms`, in its base
  timestamp with attribute bit 0x40, as KIP-534 does for tombstones); a later pass that reads
  no batch of the transaction at all and finds the horizon passed removes it (the offsets go
  into a filler, broker/log/cleaner_core.py). Kafka sets the horizon one pass later, at the
  first pass that reads no batch; the horizon only delays, the "no batch read" rule is what
  makes the removal safe;
* the producer's last batch (its epoch, for fencing) is a marker kept whole, as Kafka keeps it.

The aborted-transaction index (broker/log/txn_index.py) follows the ABORT markers in the swap
(PartitionLog.replace_segments): an entry whose transaction had no batch left before the pass
(`unneeded`, among them every marker removed) leaves durably before the swap commits, one whose
last batches this pass removes (`emptied`) once the swap is installed. So at every crash point
each entry names a marker the log holds, and every aborted batch the log holds has its entry;
an entry left behind names only removed data, which a read_committed consumer skips harmlessly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.log.producer_txn import ABORT, marker_of
from broker.records import RecordBatchHeader

# KIP-534: baseTimestamp holds the delete horizon of the batch (tombstones, markers).
DELETE_HORIZON_BIT = 0x40

KEEP = 0  # the marker stays as it is
REMOVE = 1  # the marker goes
SET_HORIZON = 2  # the marker stays, rewritten with a delete horizon


@dataclass(slots=True)
class CleanedTxns:
    """The transactions one cleaning pass has read so far, and what it did to their markers."""

    now_ms: int
    delete_retention_ms: int
    # (producer id, ABORT marker offset) whose index entry goes before / after the swap.
    unneeded: set[tuple[int, int]] = field(default_factory=set)
    emptied: set[tuple[int, int]] = field(default_factory=set)
    removed_upto: int = -1  # the offset of the last marker removed (-1: none)
    markers_removed: int = 0
    _read: set[int] = field(default_factory=set)  # a batch of the open transaction was read
    _kept: set[int] = field(default_factory=set)  # ... and one stays

    def data_batch(self, producer_id: int, kept: bool) -> None:
        """A transactional data batch was read; `kept`: it stays (maybe empty)."""
        self._read.add(producer_id)
        if kept:
            self._kept.add(producer_id)

    def marker(self, header: RecordBatchHeader, blob: bytes,
               producer_last: bool) -> tuple[int, int | None]:
        """What becomes of a control batch of a producer: (KEEP, REMOVE or SET_HORIZON, the
        delete horizon it carries after the pass, if any)."""
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None
        if header.records_count == 0:  # an emptied control batch: nothing to keep
            return (KEEP, horizon) if producer_last else (REMOVE, None)
        found = marker_of(blob)
        if found is None:
            return KEEP, horizon  # another control type: Kafka keeps it
        pid = header.producer_id
        read, kept = pid in self._read, pid in self._kept
        self._read.discard(pid)
        self._kept.discard(pid)
        if found[0] == ABORT:
            if not read:
                self.unneeded.add((pid, header.base_offset))
            elif not kept:
                self.emptied.add((pid, header.base_offset))
        if kept or producer_last:
            return KEEP, horizon
        if horizon is None:
            return SET_HORIZON, self.now_ms + self.delete_retention_ms
        if not read and self.now_ms >= horizon:
            self.removed_upto = max(self.removed_upto, header.base_offset)
            self.markers_removed += 1
            return REMOVE, None
        return KEEP, horizon
