"""Transactions on a real PartitionLog (broker/log/partition_txn.py, producer_txn.py,
txn_index.py): transactional batches open a producer's transaction, markers end it, the last
stable offset, the aborted-transaction index (appended, truncated, reloaded, rebuilt when
missing), producer snapshots keeping open transactions, fenced markers, followers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.partition_log import AppendError, PartitionLog
from broker.log.producer_snapshots import decode, encode
from broker.log.producer_state import ProducerState
from broker.log.producer_txn import ABORT, COMMIT, marker_batch, marker_of
from broker.log.txn_index import FILE_NAME
from broker.records import (
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    build_batch,
    decode_records,
    parse_header,
)
from kraft.errors import Errors

TOPIC_ID = "8d4c3b6a-6f64-4b43-9a59-3c5e3a4f2a11"
NOW = 1_700_000_000_000


def open_log(tmp_path: Path, name: str = "orders-0", **kwargs: bool) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / name), TOPIC_ID, LogConfig(), now_ms=NOW, **kwargs)


def txn_batch(pid: int, seq: int, count: int = 2, epoch: int = 0) -> bytes:
    return build_batch([b"t%d" % i for i in range(count)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, attributes=TRANSACTIONAL_BIT, base_timestamp=NOW)


def plain(count: int = 1) -> bytes:
    return build_batch([b"p%d" % i for i in range(count)], base_timestamp=NOW)


def aborted(log: PartitionLog) -> list[tuple[int, int, int]]:
    return [(t.producer_id, t.first_offset, t.last_offset)
            for t in log.aborted_transactions(0, log.end_offset)]


def test_the_marker_batch_is_kafkas_control_record_format() -> None:
    batch = marker_batch(42, 3, True, 7, NOW)
    header = parse_header(batch)
    assert header.attributes == TRANSACTIONAL_BIT | CONTROL_BIT
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
    (record,) = decode_records(batch)
    assert record.key == b"\x00\x00\x00\x01"  # version 0, type 1 (COMMIT)
    assert record.value == b"\x00\x00\x00\x00\x00\x07"  # version 0, coordinator epoch 7
    assert marker_of(batch) == (COMMIT, 7)
    assert marker_of(marker_batch(42, 3, False, 9, NOW)) == (ABORT, 9)


def test_an_open_transaction_holds_the_lso_until_its_marker_is_replicated(
        tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(plain(), 0, NOW)  # offset 0
    first = log.append_as_leader(txn_batch(7, 0), 0, NOW)  # 1-2: the transaction starts
    log.append_as_leader(plain(), 0, NOW)  # 3
    log.append_as_leader(txn_batch(7, 2), 0, NOW)  # 4-5: same transaction
    assert first.base_offset == 1
    assert log.open_transactions() == {7: 1}
    assert log.last_stable_offset(log.end_offset) == 1
    assert log.last_stable_offset(1) == 1
    assert log.last_stable_offset(0) == 0  # never above the high watermark
    marker = log.append_marker(7, 0, True, 5, 0, NOW)
    assert marker.base_offset == 6
    assert log.open_transactions() == {}
    # Decided but the marker is not below the HW yet: still unstable.
    assert log.last_stable_offset(6) == 1
    assert log.last_stable_offset(7) == 7
    assert aborted(log) == []  # a commit is not in the index
    assert not os.path.exists(os.path.join(log.directory, FILE_NAME)) or aborted(log) == []
    log.close()


def test_an_abort_enters_the_index_which_survives_a_restart_and_is_rebuilt_when_missing(
        tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(7, 0), 0, NOW)  # 0-1
    log.append_as_leader(txn_batch(8, 0), 0, NOW)  # 2-3
    log.append_marker(7, 0, False, 5, 0, NOW)  # 4: abort 7
    log.append_marker(8, 0, True, 5, 0, NOW)  # 5: commit 8
    log.append_as_leader(txn_batch(7, 2), 0, NOW)  # 6-7: 7's next transaction
    log.append_marker(7, 0, False, 5, 0, NOW)  # 8: aborted too
    assert aborted(log) == [(7, 0, 4), (7, 6, 8)]
    assert [(t.first_offset, t.last_stable_offset) for t in log.aborted_transactions(0, 9)] \
        == [(0, 2), (6, 9)]
    assert aborted(log) == [(7, 0, 4), (7, 6, 8)]
    assert [t.first_offset for t in log.aborted_transactions(5, 9)] == [6]
    assert [t.first_offset for t in log.aborted_transactions(0, 1)] == [0]
    log.close()
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert aborted(reopened) == [(7, 0, 4), (7, 6, 8)]
    reopened.close()
    os.unlink(os.path.join(str(tmp_path / "orders-0"), FILE_NAME))
    rebuilt = open_log(tmp_path)
    assert aborted(rebuilt) == [(7, 0, 4), (7, 6, 8)]
    assert os.path.exists(os.path.join(rebuilt.directory, FILE_NAME))
    rebuilt.close()


def test_a_truncation_cuts_index_entries_and_the_open_transaction_comes_back(
        tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(7, 0), 0, NOW)  # 0-1
    log.append_marker(7, 0, False, 5, 0, NOW)  # 2
    log.append_as_leader(txn_batch(7, 2), 0, NOW)  # 3-4
    log.append_marker(7, 0, False, 5, 0, NOW)  # 5
    log.truncate_to(5)
    assert aborted(log) == [(7, 0, 2)]
    assert log.open_transactions() == {7: 3}  # the marker is gone: open again
    assert log.last_stable_offset(5) == 3
    log.append_as_leader(plain(3), 0, NOW)  # 5-7: past the cut entry's marker
    log.close()
    assert aborted(open_log(tmp_path)) == [(7, 0, 2)]


def test_a_producer_snapshot_keeps_the_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(plain(), 0, NOW)
    log.append_as_leader(txn_batch(7, 0), 0, NOW)  # 1-2, still open
    assert log.snapshot_if_due(1)
    log.close()
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert reopened.open_transactions() == {7: 1}
    assert reopened.last_stable_offset(reopened.end_offset) == 1
    reopened.close()
    state = ProducerState()
    state.update(parse_header(txn_batch(9, 0)), 10, NOW)
    offset, entries = decode(encode(12, state))
    assert (offset, entries[0].txn_first_offset) == (12, 10)


def test_fenced_markers_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(7, 0, epoch=3), 0, NOW)
    with pytest.raises(AppendError) as stale:
        log.append_marker(7, 2, True, 5, 0, NOW)
    assert stale.value.code == Errors.INVALID_PRODUCER_EPOCH
    log.append_marker(7, 3, False, 5, 0, NOW)
    with pytest.raises(AppendError) as fenced:
        log.append_marker(7, 3, True, 4, 0, NOW)
    assert fenced.value.code == 52  # TRANSACTION_COORDINATOR_FENCED
    # A marker at a bumped epoch (the coordinator fenced the producer) is the producer's epoch.
    log.append_marker(7, 4, False, 6, 0, NOW)
    with pytest.raises(AppendError):
        log.append_as_leader(txn_batch(7, 2, epoch=3), 0, NOW)
    log.close()


def test_the_sequence_continues_across_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(7, 0), 0, NOW)
    log.append_marker(7, 0, True, 5, 0, NOW)
    log.append_as_leader(txn_batch(7, 2), 0, NOW)  # the next transaction's sequence
    retry = log.append_as_leader(txn_batch(7, 2), 0, NOW)
    assert retry.duplicate
    log.close()


def test_a_follower_indexes_the_leaders_aborts(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "orders-0")
    leader.append_as_leader(txn_batch(7, 0), 0, NOW)
    leader.append_marker(7, 0, False, 5, 0, NOW)
    leader.append_as_leader(txn_batch(8, 0), 0, NOW)
    follower = PartitionLog.open(str(tmp_path / "f" / "orders-0"), TOPIC_ID, LogConfig(),
                                 now_ms=NOW)
    follower.append_as_follower(leader.read(0, 1 << 20, leader.end_offset), NOW)
    assert aborted(follower) == [(7, 0, 2)]
    assert follower.open_transactions() == {8: 3}
    # The follower knows the marker's coordinator epoch too, should it lead next.
    with pytest.raises(AppendError):
        follower.append_marker(7, 0, True, 4, 0, NOW)
    leader.close()
    follower.close()


def test_a_read_before_any_transaction_does_not_hide_a_later_abort(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(plain(), 0, NOW)
    assert aborted(log) == []  # no index file: remembered, not looked for again
    assert not os.path.exists(os.path.join(log.directory, FILE_NAME))
    log.append_as_leader(txn_batch(7, 0), 0, NOW)  # 1-2
    log.append_marker(7, 0, False, 5, 0, NOW)  # 3
    assert aborted(log) == [(7, 1, 3)]
    log.close()
