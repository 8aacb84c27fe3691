"""Idempotent producers (reference/kafka-data-plane.md §5) through PartitionLog's leader append:
duplicates within the last five batches, sequences out of order, epoch rules, unknown producers,
and the state rebuilt from the log after a restart and kept by followers."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.partition_log import AppendError, PartitionLog
from broker.log.producer_state import ProducerState, in_sequence
from broker.records import build_batch, parse_header
from kraft.errors import Errors

TOPIC_ID = "5b1f0c1e-0000-4000-8000-000000000001"
NOW = 1_700_000_000_000
PID = 1000


def open_log(tmp_path: Path, name: str = "idem-0") -> PartitionLog:
    return PartitionLog.open(str(tmp_path / name), TOPIC_ID, LogConfig(), now_ms=NOW)


def batch(sequence: int, count: int = 2, epoch: int = 0, pid: int = PID) -> bytes:
    return build_batch([b"r%d" % i for i in range(count)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=sequence)


def refusal(log: PartitionLog, data: bytes) -> int:
    size = log.size_in_bytes
    with pytest.raises(AppendError) as info:
        log.append_as_leader(data, 0, NOW)
    assert log.size_in_bytes == size  # nothing written
    return info.value.code


def test_retry_of_any_of_the_last_five_is_a_duplicate(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    results = [log.append_as_leader(batch(2 * i), 0, NOW) for i in range(6)]
    size = log.size_in_bytes
    for i in range(1, 6):
        again = log.append_as_leader(batch(2 * i), 0, NOW)
        assert again.duplicate
        assert (again.base_offset, again.last_offset) == (
            results[i].base_offset, results[i].last_offset)
    assert log.size_in_bytes == size and log.end_offset == 12
    # The sixth batch back is no longer remembered: its retry is out of order.
    assert refusal(log, batch(0)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_in_sequence_is_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0), 0, NOW)  # sequences 0-1
    assert refusal(log, batch(3)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(batch(2), 0, NOW).base_offset == 2


def test_unknown_producer_may_start_at_any_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert not log.append_as_leader(batch(57), 0, NOW).duplicate
    assert log.append_as_leader(batch(59), 0, NOW).base_offset == 2


def test_epoch_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0, epoch=3), 0, NOW)
    assert refusal(log, batch(2, epoch=2)) == Errors.INVALID_PRODUCER_EPOCH
    # A new epoch must start at sequence 0.
    assert refusal(log, batch(2, epoch=4)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.append_as_leader(batch(0, epoch=4), 0, NOW)
    # The old epoch's batches are forgotten: its retry is now a stale epoch.
    assert refusal(log, batch(0, epoch=3)) == Errors.INVALID_PRODUCER_EPOCH


def test_producers_are_independent_and_plain_batches_unchecked(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0, pid=1), 0, NOW)
    log.append_as_leader(batch(0, pid=2), 0, NOW)
    plain = build_batch([b"x"])
    assert not log.append_as_leader(plain, 0, NOW).duplicate
    assert not log.append_as_leader(plain, 0, NOW).duplicate  # no producer id: no check


def test_sequence_wraps_to_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2**31 - 2, count=2), 0, NOW)  # ends at Int32.MAX
    assert log.append_as_leader(batch(0), 0, NOW).base_offset == 2
    assert in_sequence(2**31 - 1, 0) and not in_sequence(5, 7)


def test_state_is_rebuilt_after_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(batch(0), 0, NOW)
    log.append_as_leader(batch(2), 0, NOW)
    log.close(flush=False)
    reopened = open_log(tmp_path)
    again = reopened.append_as_leader(batch(0), 0, NOW)
    assert again.duplicate and again.base_offset == first.base_offset
    assert refusal(reopened, batch(7)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert reopened.append_as_leader(batch(4), 0, NOW).base_offset == 4


def test_follower_keeps_producer_state_for_when_it_leads(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "idem-1")
    leader.append_as_leader(batch(0), 0, NOW)
    leader.append_as_leader(batch(2), 0, NOW)
    follower = open_log(tmp_path, "idem-2")
    follower.append_as_follower(leader.read(0, 1 << 20, leader.end_offset))
    # Leadership moves; the producer retries its last batch on the new leader.
    retry = follower.append_as_leader(batch(2), 1, NOW)
    assert retry.duplicate and retry.base_offset == 2


def test_retention_forgets_producers_below_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0, pid=1), 0, NOW)
    log.append_as_leader(batch(0, pid=2), 0, NOW)
    log.advance_start_offset(2)
    # Producer 1 has no batch left: unknown, so any sequence is accepted.
    assert not log.append_as_leader(batch(40, pid=1), 0, NOW).duplicate
    assert refusal(log, batch(40, pid=2)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_state_directly() -> None:
    state = ProducerState()
    header = parse_header(batch(0))
    assert state.check(header) is None
    state.update(header, 10, NOW)
    entry = state.entry(PID)
    assert entry is not None and entry.last_seq == 1 and entry.last_offset == 11
    duplicate = state.check(header)
    assert duplicate is not None and duplicate.first_offset == 10
    state.remove_before(12)
    assert len(state) == 0
