"""The aborted-transaction index of a partition log (Kafka's TransactionIndex, `.txnindex`):
one entry per ABORT marker, in Kafka's AbortedTxn layout — version int16 0, producer id int64,
first offset int64, last offset int64 (the marker's), last stable offset int64; big-endian,
34 bytes — so that a read_committed Fetch can name the aborted transactions its answer
overlaps without reading the log.

Where this departs from Kafka: one file per partition directory
(`aborted-transactions.txnindex`) rather than one per segment. It is appended at every ABORT
marker a replica writes (leader or follower), written without fsync and synced by the log's
next flush job like its other metadata files; rewritten (temporary file + rename) when a
truncation cuts entries, retention leaves entries wholly below the log start or the cleaner
removes an aborted transaction's data or marker (broker/log/cleaner_txn.py). On opening, the
entries whose marker lies past the log end are dropped (a cut tail), and a missing file is
rebuilt from the log when the producer state shows markers were written (a log written before
the index existed, or a file lost).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable

from broker.log.producer_txn import CompletedTxn
from kraft.log._common import fsync_dir

logger = logging.getLogger(__name__)

FILE_NAME = "aborted-transactions.txnindex"
_ENTRY = struct.Struct(">hqqqq")
VERSION = 0


class TxnIndex:
    """The aborted transactions of one partition log, oldest marker first."""

    def __init__(self, directory: str, entries: list[CompletedTxn]) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        self._entries = entries

    @classmethod
    def load(cls, directory: str, end_offset: int) -> TxnIndex | None:
        """The index as stored, without the entries at or past `end_offset`; None when the
        file is missing. A partial last entry (a cut write) is dropped; the file is rewritten
        when anything was dropped."""
        path = os.path.join(directory, FILE_NAME)
        try:
            with open(path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return None
        entries = []
        whole = len(data) - len(data) % _ENTRY.size
        for position in range(0, whole, _ENTRY.size):
            version, producer_id, first, last, lso = _ENTRY.unpack_from(data, position)
            if version != VERSION:
                logger.warning("%s: entry at byte %d has version %d; the rest is ignored",
                               path, position, version)
                break
            entries.append(CompletedTxn(producer_id, first, last, lso))
        index = cls(directory, entries)
        kept = [txn for txn in entries if txn.last_offset < end_offset]
        if len(kept) != len(entries) or whole != len(data):
            index._entries = kept
            index.rewrite()
        return index

    @classmethod
    def create(cls, directory: str, entries: Iterable[CompletedTxn] = ()) -> TxnIndex:
        index = cls(directory, list(entries))
        index.rewrite()
        return index

    @property
    def entries(self) -> list[CompletedTxn]:
        return list(self._entries)

    def append(self, txn: CompletedTxn) -> None:
        """Record an aborted transaction (its marker was just written), without fsync."""
        self._entries.append(txn)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, _pack(txn))
        finally:
            os.close(fd)

    def truncate(self, end_offset: int) -> None:
        """Forget the transactions whose marker lies at or past `end_offset` (a truncation)."""
        kept = [txn for txn in self._entries if txn.last_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self.rewrite()

    def drop_below(self, start_offset: int) -> None:
        """Forget the transactions wholly below the log start (retention removed them)."""
        kept = [txn for txn in self._entries if txn.last_offset >= start_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self.rewrite()

    def remove(self, markers: set[tuple[int, int]], durable: bool = False) -> None:
        """Forget the transactions of these (producer id, ABORT marker offset): the cleaner
        removes their data or marker. `durable`: fsynced with the directory before returning
        (it must hold before the cleaner's swap commits)."""
        kept = [txn for txn in self._entries if (txn.producer_id, txn.last_offset) not in markers]
        if len(kept) != len(self._entries):
            self._entries = kept
            self.rewrite(durable)

    def collect(self, fetch_offset: int, upper_offset: int) -> list[CompletedTxn]:
        """The aborted transactions a read of [fetch_offset, upper_offset) overlaps (Kafka's
        collectAbortedTxns: marker at or past the fetch offset, first offset below the
        bound), in the order of their first offsets."""
        found = [txn for txn in self._entries
                 if txn.last_offset >= fetch_offset and txn.first_offset < upper_offset]
        return sorted(found, key=lambda txn: txn.first_offset)

    def rewrite(self, durable: bool = False) -> None:
        """Write the whole file again (temporary file + rename), without fsync unless
        `durable`."""
        temporary = self.path + ".tmp"
        with open(temporary, "wb") as file:
            file.write(b"".join(_pack(txn) for txn in self._entries))
            if durable:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, self.path)
        if durable:
            fsync_dir(os.path.dirname(self.path))


def _pack(txn: CompletedTxn) -> bytes:
    return _ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                       txn.last_stable_offset)
