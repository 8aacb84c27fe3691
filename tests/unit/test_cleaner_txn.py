"""The log cleaner and transactions (broker/log/cleaner.py, cleaner_core.py, cleaner_txn.py):
aborted transactions' records are removed and never supersede a committed record of their key,
nothing at or past the last stable offset is cleaned (an open transaction may still abort), a
marker stays while a batch of its transaction does and goes after its delete horizon, with its
aborted-transaction index entry and producer snapshots in the same swap, crash-safely."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log import cleaner_swap
from broker.log.cleaner import LogCleaner
from broker.log.cleaner_txn import DELETE_HORIZON_BIT
from broker.log.config import LogConfig
from broker.log.partition_log import PartitionLog
from broker.log.producer_snapshots import list_snapshots
from broker.log.producer_txn import ABORT, COMMIT, marker_of
from broker.log.txn_index import TxnIndex
from broker.records import TRANSACTIONAL_BIT, Record, build_batch, parse_header, scan_batches
from tests.unit.test_log_cleaner import NOW, append, clean, cleaner, open_log, records

RETENTION = 1000  # delete.retention.ms
TXN_COMPACT = LogConfig(segment_bytes=100, cleanup_policy=("compact",),
                        delete_retention_ms=RETENTION, min_cleanable_dirty_ratio=0.1)


def txn(key: str, value: str, seq: int, pid: int = 7) -> bytes:
    return build_batch([Record(value.encode(), key.encode())], base_timestamp=NOW,
                       producer_id=pid, producer_epoch=0, base_sequence=seq,
                       attributes=TRANSACTIONAL_BIT)


def markers(log: object) -> list[int]:
    data = log.read(0, 1 << 30, log.end_offset)  # type: ignore[attr-defined]
    return [frame.position for frame in scan_batches(data) if frame.control
            and marker_of(data[frame.position:frame.position + frame.size]) is not None]


def test_aborted_records_go_and_do_not_supersede_committed_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "committed"), ("b", "1"))  # 0, 1
    log.append_as_leader(txn("a", "aborted", 0), 0, NOW)  # 2
    log.append_marker(7, 0, False, 1, 0, NOW)  # 3: ABORT
    log.append_as_leader(txn("b", "2", 1), 0, NOW)  # 4
    log.append_marker(7, 0, True, 1, 0, NOW)  # 5: COMMIT
    append(log, ("z", "1"), ("z", "2"))  # 6, 7 (the active segment)
    assert clean(cleaner(log)) > 0
    kept = [(offset, key, value) for offset, key, value in records(log)]
    assert (0, b"a", b"committed") in kept  # the aborted "a" did not remove it
    assert all(value != b"aborted" for _, _, value in kept)
    assert (4, b"b", b"2") in kept and (1, b"b", b"1") not in kept  # committed: as any data
    assert len(markers(log)) == 2  # both markers stay (the ABORT's data went in this pass)
    assert log.aborted_transactions(0, log.end_offset) == []  # no aborted batch is left
    log.close()


def test_nothing_past_the_lso_is_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"))  # 0
    log.append_as_leader(txn("a", "open", 0), 0, NOW)  # 1: an open transaction
    append(log, ("a", "2"), ("b", "1"), ("b", "2"), ("z", "1"))  # 2-5
    assert log.last_stable_offset(log.end_offset) == 1
    clean(cleaner(log))
    assert [offset for offset, _, _ in records(log)] == [0, 1, 2, 3, 4, 5]
    log.close()


# -- markers: kept while their transaction has data, removed after the delete horizon -------


def controls(log: PartitionLog) -> list[tuple[int, int, int | None]]:
    """(offset, marker type, delete horizon or None) of every marker in the log."""
    data = log.read(log.start_offset, 1 << 30, log.end_offset)
    out = []
    for frame in scan_batches(data):
        blob = data[frame.position:frame.position + frame.size]
        found = marker_of(blob) if frame.control else None
        if found is not None:
            header = parse_header(blob)
            out.append((header.base_offset, found[0], header.base_timestamp
                        if header.attributes & DELETE_HORIZON_BIT else None))
    return out


def consistent(log: PartitionLog) -> None:
    """What a read_committed consumer relies on (the audit's txn-aborted-exposed and
    txn-index-mismatch): every index entry names an ABORT marker of the log, and every aborted
    batch left is covered by its transaction's entry."""
    data = log.read(log.start_offset, 1 << 30, log.end_offset)
    entries = {(t.producer_id, t.last_offset): t
               for t in log.aborted_transactions(log.start_offset, log.end_offset)}
    first_data: dict[int, int] = {}
    aborts = set()
    for frame in scan_batches(data):
        blob = data[frame.position:frame.position + frame.size]
        header = parse_header(blob)
        pid = header.producer_id
        if not header.transactional:
            continue
        if not header.control:
            first_data.setdefault(pid, header.base_offset)
            continue
        first = first_data.pop(pid, None)
        found = marker_of(blob)
        if found is None or found[0] != ABORT:
            continue
        aborts.add((pid, header.base_offset))
        if first is not None:
            entry = entries.get((pid, header.base_offset))
            assert entry is not None and entry.first_offset == first, (pid, first)
    assert set(entries) <= aborts, f"entries {sorted(entries)} name markers not in the log"


def two_commits(log: PartitionLog) -> None:
    """pid 7 commits "a" (0-1), "b" (2-3), "c" (4-5); a plain "a" (6) supersedes the first."""
    for seq, key in enumerate("abc"):
        log.append_as_leader(txn(key, "1", seq), 0, NOW)
        log.append_marker(7, 0, True, 1, 0, NOW)
    append(log, ("a", "2"), ("z", "1"), ("z", "2"))  # 6; 7-8 (the active segment)


def test_a_marker_stays_while_its_transaction_has_data_and_goes_after_its_horizon(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, TXN_COMPACT)
    two_commits(log)
    c = cleaner(log)
    assert clean(c) == 1
    # The first transaction's only record was superseded: its marker gets a delete horizon.
    # The second's record stays, so does its marker, as is; the third is the producer's last.
    assert controls(log) == [(1, COMMIT, NOW + RETENTION), (3, COMMIT, None), (5, COMMIT, None)]
    append(log, ("z", "3"), ("z", "4"))  # dirty again: a pass before the horizon keeps it
    assert clean(c, NOW + RETENTION - 1) == 1
    assert controls(log) == [(1, COMMIT, NOW + RETENTION), (3, COMMIT, None), (5, COMMIT, None)]
    assert clean(c, NOW + RETENTION) == 1  # due at the horizon: the marker goes
    assert controls(log) == [(3, COMMIT, None), (5, COMMIT, None)]
    assert c.stats.markers_removed == 1
    kept = records(log)
    assert (2, b"b", b"1") in kept and (4, b"c", b"1") in kept  # offsets kept
    end = log.end_offset
    log.close()
    reopened = open_log(tmp_path, TXN_COMPACT)  # a replay finds no open transaction
    assert reopened.open_transactions() == {} and reopened.last_stable_offset(end) == end
    reopened.close()


def aborted_then_committed(log: PartitionLog) -> None:
    """pid 7 aborts "a" (1, marker 2) and commits "b" (3, marker 4: the producer's last)."""
    append(log, ("a", "committed"))  # 0
    log.append_as_leader(txn("a", "aborted", 0), 0, NOW)  # 1
    log.append_marker(7, 0, False, 1, 0, NOW)  # 2: ABORT
    log.append_as_leader(txn("b", "1", 1), 0, NOW)  # 3
    log.append_marker(7, 0, True, 1, 0, NOW)  # 4: COMMIT
    append(log, ("z", "1"), ("z", "2"))  # 5, 6


def test_an_abort_markers_index_entry_leaves_with_its_data_and_the_marker_after_its_horizon(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, TXN_COMPACT)
    aborted_then_committed(log)
    assert [t.first_offset for t in log.aborted_transactions(0, log.end_offset)] == [1]
    c = cleaner(log)
    assert clean(c) == 1
    # The swap that removed the aborted batch took its index entry: no read_committed Fetch
    # names it; the marker stays until its horizon.
    assert log.aborted_transactions(0, log.end_offset) == []
    assert controls(log) == [(2, ABORT, NOW + RETENTION), (4, COMMIT, None)]
    consistent(log)
    assert list_snapshots(log.directory)[0] <= 2
    assert clean(c, NOW + RETENTION) == 1
    assert controls(log) == [(4, COMMIT, None)]
    consistent(log)
    # A snapshot at or below the removed marker could reopen a transaction a replay no longer
    # sees end: they are gone.
    assert all(offset > 2 for offset in list_snapshots(log.directory))
    end = log.end_offset
    log.close()
    reopened = open_log(tmp_path, TXN_COMPACT)
    assert reopened.aborted_transactions(0, end) == []
    assert reopened.open_transactions() == {} and reopened.last_stable_offset(end) == end
    reopened.close()


class _Crash(BaseException):
    pass


def crashed_pass(log: PartitionLog, now: int, where: str, monkeypatch: pytest.MonkeyPatch,
                 c: LogCleaner | None = None) -> PartitionLog:
    """A cleaning pass that crashes `where` in its swap, and the log reopened as a restart
    would: "commit" before the cleaned file becomes the log's (the index and snapshots
    changed), "install" after that commit point, "index" after the install, before the index
    drops the entries of the data the swap removed."""

    def crash(*args: object, **kwargs: object) -> None:
        raise _Crash

    if where == "index":
        remove = TxnIndex.remove
        monkeypatch.setattr(TxnIndex, "remove", lambda index, markers, durable=False: (
            remove(index, markers, durable) if durable else crash()))
    else:
        monkeypatch.setattr(cleaner_swap, where, crash)
    with pytest.raises(_Crash):
        clean(c or cleaner(log), now)
    monkeypatch.undo()
    log.close(flush=False)
    reopened = open_log(Path(os.path.dirname(log.directory)), TXN_COMPACT)
    consistent(reopened)
    assert not [n for n in os.listdir(reopened.directory) if n.endswith((".swap", ".cleaned"))]
    end = reopened.end_offset
    assert reopened.open_transactions() == {} and reopened.last_stable_offset(end) == end
    return reopened


@pytest.mark.parametrize("where", ["commit", "install", "index"])
def test_a_crash_in_the_swap_that_removes_aborted_data_leaves_log_and_index_consistent(
        tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path, TXN_COMPACT)
    aborted_then_committed(log)
    reopened = crashed_pass(log, NOW, where, monkeypatch)
    # Before the commit point: the data and its entry; after it: the data is gone and its
    # entry may stay (it names its marker, still in the log: a consumer given it skips
    # nothing of another transaction).
    assert [t.last_offset for t in reopened.aborted_transactions(0, reopened.end_offset)] == [2]
    assert ((1, b"a", b"aborted") in records(reopened)) == (where == "commit")
    assert clean(cleaner(reopened), NOW + 1) == 1  # the next pass finishes the work
    assert reopened.aborted_transactions(0, reopened.end_offset) == []
    consistent(reopened)
    reopened.close()


@pytest.mark.parametrize("stale_entry", [False, True])
@pytest.mark.parametrize("where", ["commit", "install"])
def test_a_crash_in_the_swap_that_removes_a_marker_leaves_log_and_index_consistent(
        tmp_path: Path, where: str, stale_entry: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path, TXN_COMPACT)
    aborted_then_committed(log)
    c = None
    if stale_entry:  # the pass that removed the data crashed before its index step
        log = crashed_pass(log, NOW, "index", monkeypatch)
    else:
        c = cleaner(log)
        assert clean(c) == 1
    assert controls(log) == [(2, ABORT, NOW + RETENTION), (4, COMMIT, None)]
    reopened = crashed_pass(log, NOW + RETENTION, where, monkeypatch, c)
    expected = [(4, COMMIT, None)] if where == "install" else \
        [(2, ABORT, NOW + RETENTION), (4, COMMIT, None)]
    assert controls(reopened) == expected
    assert reopened.aborted_transactions(0, reopened.end_offset) == []
    reopened.close()
