"""A partition log's transactions (PartitionLog, broker/log/partition_log.py): the checks a
leader makes on a WriteTxnMarkers marker, what a written marker changes (the producer's
coordinator epoch, the aborted-transaction index), the last stable offset and the aborted
transactions a read_committed Fetch names, the index's part of a cleaner swap
(broker/log/producer_txn.py, broker/log/txn_index.py, broker/log/cleaner_txn.py)."""

from __future__ import annotations

from broker.log.cleaner_txn import CleanedTxns
from broker.log.partition_retention import LogRetention
from broker.log.producer_txn import ABORT, CompletedTxn, TxnTracker, marker_of
from broker.log.txn_index import TxnIndex
from broker.records import HEADER_SIZE, AppendError, parse_header
from kraft.errors import Errors
from kraft.log.segmented import SegmentView

TRANSACTION_COORDINATOR_FENCED = 52  # Errors.java (kraft.errors has no transaction codes)
_REBUILD_CHUNK = 1 << 20


class LogTxns(LogRetention):
    """The transaction methods of PartitionLog."""

    _aborted: TxnIndex | None = None  # loaded on first use (a log opens without reading it)
    _never_aborted = False  # no index file and no marker: reads need not look again

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """AppendError unless a marker of `producer_id` at these epochs may be written: an
        epoch below the producer's is INVALID_PRODUCER_EPOCH (a newer producer owns the id), a
        coordinator epoch below the last marker's is TRANSACTION_COORDINATOR_FENCED (a newer
        coordinator owns the transactional id)."""
        entry = self._producers.entry(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise AppendError(Errors.INVALID_PRODUCER_EPOCH,
                              f"marker for producer {producer_id} at epoch {producer_epoch}, "
                              f"below its epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise AppendError(TRANSACTION_COORDINATOR_FENCED,
                              f"marker for producer {producer_id} from coordinator epoch "
                              f"{coordinator_epoch}, below {entry.coordinator_epoch}")

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first offset of the oldest transaction not yet decided and replicated,
        or the high watermark when it is lower (never below the log start)."""
        first = self._producers.txns.first_unstable_offset(high_watermark)
        if first is None or first >= high_watermark:
            return high_watermark
        return max(first, self._start_offset)

    def next_sequence(self, producer_id: int, producer_epoch: int) -> int:
        """The base sequence the producer's next batch at `producer_epoch` must carry here (a
        coordinator writing on a producer's behalf: TxnOffsetCommit's offsets)."""
        entry = self._producers.entry(producer_id)
        if entry is None or entry.epoch != producer_epoch or not entry.batches:
            return 0
        return (entry.last_seq + 1) & 0x7FFFFFFF

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return self._producers.txns.open_transactions()

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[CompletedTxn]:
        """The aborted transactions a read of [fetch_offset, upper_offset) overlaps."""
        index = self._txn_index(create=False)
        return [] if index is None else index.collect(fetch_offset, upper_offset)

    # -- hooks of the appends ----------------------------------------------------------------

    def _before_txn_batch(self) -> None:
        """Load (or rebuild) the index before a transactional batch changes the producers."""
        self._txn_index(create=True)

    def _txn_completed(self, completed: CompletedTxn, marker: tuple[int, int] | None) -> None:
        """A marker was written: `marker` is its (type, coordinator epoch) when known."""
        if marker is None:
            return
        kind, coordinator_epoch = marker
        entry = self._producers.entry(completed.producer_id)
        if entry is not None and coordinator_epoch >= 0:
            entry.coordinator_epoch = coordinator_epoch
        if kind == ABORT:
            index = self._txn_index(create=True)
            assert index is not None
            index.append(completed)
            self._unsynced([index.path], [self._directory])

    def _follower_marker(self, data: bytes, position: int, size: int) -> tuple[int, int] | None:
        return marker_of(data[position:position + size])

    # -- the index's life --------------------------------------------------------------------

    def replace_segments(self, swaps: list[tuple[str, list[SegmentView]]],
                         txns: CleanedTxns | None = None) -> None:
        """The cleaner's swap (LogRetention.replace_segments) with what its pass did to the
        transactions (broker/log/cleaner_txn.py), in an order that is consistent at every
        crash point: before the swap commits, the index entries of transactions with no batch
        left go, durably, and so do the producer snapshots at or below the last marker removed
        (a replay from one would reopen the transaction that marker closed); once the swap is
        installed, the entries of the transactions whose last batches it removed."""
        if txns is None or not (txns.unneeded or txns.emptied or txns.removed_upto >= 0):
            super().replace_segments(swaps)
            return
        self._check_swaps(swaps)
        index = self._txn_index(create=False)
        if index is not None:
            index.remove(txns.unneeded, durable=True)
        removed_upto = txns.removed_upto
        self._drop_snapshots(lambda offset: offset <= removed_upto)
        super().replace_segments(swaps)
        if index is not None and txns.emptied:
            index.remove(txns.emptied)
            self._unsynced([index.path], [self._directory])

    def _reload(self, end: int, all_times: bool = False) -> None:
        super()._reload(end, all_times)
        # A truncation: entries of markers cut away must go before anything is appended again.
        index = self._aborted
        if index is not None:
            index.truncate(end)
        elif not self._new_directory and not self._never_aborted:
            self._aborted = TxnIndex.load(self._directory, end)

    def _txn_index(self, create: bool) -> TxnIndex | None:
        index = self._aborted
        if index is not None or (self._never_aborted and not create):
            return index
        end = self._log.end_offset
        index = TxnIndex.load(self._directory, end)
        if index is not None:
            index.drop_below(self._start_offset)
        elif self._markers_written():
            index = TxnIndex.create(self._directory, self._rebuild_aborted(end))
            self._unsynced([index.path], [self._directory])
        elif create:
            index = TxnIndex.create(self._directory)
            self._unsynced([index.path], [self._directory])
        else:
            # A read_committed read of a log without transactions: no file to look for on
            # every fetch. The first transactional append (create) clears this.
            self._never_aborted = True
        self._aborted = index
        return index

    def _markers_written(self) -> bool:
        return any(entry.last_marker_offset >= 0 for entry in self._producers.entries())

    def _rebuild_aborted(self, end: int) -> list[CompletedTxn]:
        """The aborted transactions of the log, from its batches (a missing index)."""
        tracker = TxnTracker()
        open_at: dict[int, int] = {}
        aborted = []
        offset = self._log.start_offset
        while offset < end:
            data = self._log.read(offset, _REBUILD_CHUNK, end, True)
            if not data:
                break
            position = 0
            while position + HEADER_SIZE <= len(data):
                header = parse_header(data, position)
                offset = header.next_offset
                pid = header.producer_id
                if header.control and pid >= 0:
                    marker = marker_of(data[position:position + header.size])
                    first = open_at.pop(pid, header.base_offset)
                    done = tracker.end(pid, first, header.base_offset)
                    if marker is not None and marker[0] == ABORT:
                        aborted.append(done)
                elif header.transactional and pid >= 0 and pid not in open_at:
                    open_at[pid] = header.base_offset
                    tracker.begin(pid, header.base_offset)
                position += header.size
        return aborted
