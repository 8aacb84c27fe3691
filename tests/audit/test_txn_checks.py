"""The transaction rules of the partition audit (audit/txn_checks.py's walk_replica), one planted
fault per test on a replica's transactional batches and aborted-transaction index; no Spark
(test_audit_partitions.py runs them through Spark on logs the broker's PartitionLog wrote)."""

from __future__ import annotations

from pathlib import Path

from audit.findings import VIOLATION, WARNING, Finding
from audit.partition_source import ABORT, COMMIT
from audit.txn_checks import INDEX_FILE, IndexEntry, read_index, walk_replica
from broker.log.producer_txn import CompletedTxn
from broker.log.txn_index import FILE_NAME, TxnIndex

# (base offset, producer id, epoch, is control, control type): pid 7 commits, pid 8 aborts
# while pid 9's transaction is open (from offset 5), pid 9 commits.
HEALTHY = [(1, 7, 0, False, None), (3, 8, 0, False, None), (5, 9, 0, False, None),
           (7, 7, 0, True, COMMIT), (8, 8, 0, True, ABORT), (9, 9, 0, True, COMMIT)]
INDEX = [IndexEntry(8, 3, 8, 5)]  # the ABORT at 8, the LSO there: pid 9's first offset


def walk(rows: list[tuple[int, int, int, bool, int | None]] = HEALTHY,
         index: list[IndexEntry] | None = INDEX, end: int = 11) -> list[Finding]:
    return walk_replica(2, "events-0", rows, index, 0, end)


def checks(found: list[Finding]) -> list[tuple[str, str, int | None]]:
    return [(f.severity, f.check, f.offset) for f in found]


def test_a_healthy_replica_has_no_finding_and_the_index_is_the_brokers(tmp_path: Path) -> None:
    assert walk() == []
    assert walk(index=None) == []  # no file: the broker rebuilds it from the log
    assert INDEX_FILE == FILE_NAME
    TxnIndex.create(str(tmp_path), [CompletedTxn(8, 3, 8, 5)])
    assert read_index(str(tmp_path)) == INDEX
    assert read_index(str(tmp_path / "none")) is None


def test_a_new_epoch_without_a_marker_for_the_open_transaction_is_a_violation() -> None:
    rows = [(1, 7, 0, False, None), (3, 7, 1, False, None), (5, 7, 1, True, COMMIT)]
    found = walk(rows, index=[])
    assert checks(found) == [(VIOLATION, "txn-marker", 1)]
    assert "producer 7" in found[0].detail and "epoch 0 from offset 1" in found[0].detail
    assert found[0].node_id == 2 and found[0].detail.startswith("events-0:")


def test_a_marker_below_the_transactions_epoch_is_a_violation() -> None:
    rows = [(1, 7, 2, False, None), (3, 7, 1, True, COMMIT)]
    assert checks(walk(rows, index=[])) == [(VIOLATION, "txn-marker", 3)]


def test_an_open_transaction_at_the_end_and_a_repeated_marker_are_warnings() -> None:
    rows = [*HEALTHY, (10, 7, 0, True, COMMIT), (11, 5, 0, False, None)]
    assert checks(walk(rows, end=13)) == [(WARNING, "txn-marker", 10), (WARNING, "txn-marker", 11)]


def test_an_abort_missing_from_the_index_exposes_its_records() -> None:
    found = walk(index=[])
    assert checks(found) == [(VIOLATION, "txn-aborted-exposed", 3)]
    assert "producer 8" in found[0].detail and "read_committed" in found[0].detail


def test_an_index_entry_starting_late_exposes_records_and_early_hides_them() -> None:
    late = walk(index=[IndexEntry(8, 4, 8, 5)])
    assert checks(late) == [(VIOLATION, "txn-aborted-exposed", 3)]
    assert "3..3" in late[0].detail
    assert checks(walk(index=[IndexEntry(8, 2, 8, 5)])) == [(VIOLATION, "txn-index-mismatch", 2)]


def test_an_index_entry_without_its_abort_marker_is_a_violation() -> None:
    found = walk(index=[*INDEX, IndexEntry(7, 1, 7, 5)])  # pid 7 committed at 7
    assert checks(found) == [(VIOLATION, "txn-index-mismatch", 1)]
    # entries below the log start or at its end are skipped (the broker drops them on load)
    assert walk(index=[*INDEX, IndexEntry(7, 1, 11, 5)]) == []


def test_a_recorded_lso_past_an_open_transaction_is_a_violation() -> None:
    found = walk(index=[IndexEntry(8, 3, 8, 9)])  # pid 9 is open from offset 5
    assert checks(found) == [(VIOLATION, "txn-lso-past-open", 8)]
    assert "past offset 5" in found[0].detail


def test_a_cleaned_log_has_no_finding() -> None:
    # The cleaner removed pid 8's aborted batch and its index entry (the ABORT marker stays
    # until its delete horizon), and pid 7's committed batch (its COMMIT marker stays).
    cleaned = [row for row in HEALTHY if row[0] not in (1, 3)]
    assert walk(cleaned, index=[]) == []
    assert walk(cleaned) == []  # a crash before the index step keeps the entry: harmless
    # Both of pid 7's transactions' batches cleaned, both markers kept: a warning, as for a
    # retried marker; once removed, nothing is left to check.
    twice = [*cleaned, (10, 7, 0, True, COMMIT)]
    assert checks(walk(twice, index=[], end=12)) == [(WARNING, "txn-marker", 10)]
    assert walk([row for row in cleaned if row[1] != 7], index=[]) == []
