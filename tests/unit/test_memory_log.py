"""MemoryLog's fault model (the shared behaviour is in test_log_contract.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kraft.log import CorruptRecordError, MemoryLog
from kraft.log.memory import MEMORY_PATH


def records(log: MemoryLog) -> list[bytes]:
    return [r for batch in log.batches(0, log.end_offset) for r in batch.records]


def test_crash_loses_what_was_not_flushed() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a"], 1, 0)
    log.flush()
    log.append_as_leader([b"b"], 2, 0)
    log.crash()
    assert (log.end_offset, log.flushed_offset, log.last_epoch) == (1, 1, 1)
    assert records(log) == [b"a"]
    assert log.begin_flush() is None


def test_crash_brings_back_flushed_data_a_truncation_removed() -> None:
    log = MemoryLog()
    for epoch in (1, 1, 2):
        log.append_as_leader([bytes([epoch])], epoch, 0)
    log.flush()
    log.truncate_to(1)
    log.append_as_leader([b"new"], 3, 0)
    assert log.flushed_offset == 1
    log.crash()
    assert records(log) == [b"\x01", b"\x01", b"\x02"]
    assert log.end_offset_for_epoch(2) == log.end_offset_for_epoch(9)
    assert log.flushed_offset == 3


def test_truncation_alone_needs_a_flush_to_be_durable() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a"], 1, 0)
    log.append_as_leader([b"b"], 1, 0)
    log.flush()
    log.truncate_to(1)
    assert log.begin_flush() is not None  # the durable image still has offset 1


def test_crash_drops_the_job_in_flight() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a"], 1, 0)
    job = log.begin_flush()
    assert job is not None
    job.run()
    log.crash()
    log.complete_flush(job)  # too late: it belongs to the process that crashed
    assert (log.end_offset, log.flushed_offset) == (0, 0)
    assert log.durable_end_offset == 0
    log.append_as_leader([b"b"], 1, 0)
    log.flush()  # a new job may begin
    assert log.durable_end_offset == 1


def test_wipe_loses_everything() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a"], 4, 0)
    log.flush()
    log.wipe()
    assert (log.end_offset, log.flushed_offset, log.last_epoch) == (0, 0, 0)
    log.crash()
    assert log.end_offset == 0


def test_reads_do_not_copy_batches() -> None:
    log = MemoryLog()
    log.append_as_leader([b"x" * 100], 1, 0)
    assert log.read(0, 1, 1) is log.read(0, 1, 1)


# -- power loss past the flushed point (issue 14, item 5) ---------------------------------------


def out_of_order_writeback(first_len: int) -> Callable[[bytes], bytes]:
    """The job's first batch never reached the disk (zeros), the rest did."""
    return lambda written: bytes(first_len) + written[first_len:]


def writing(log: MemoryLog, *payloads: bytes, epoch: int = 1) -> list[int]:
    """Append one batch per payload and begin the job that writes them; their sizes."""
    sizes = []
    for payload in payloads:
        before = log.end_offset
        log.append_as_leader([payload], epoch, 0)
        sizes.append(len(log.read(before, 1 << 20, log.end_offset)))
    assert log.begin_flush() is not None
    return sizes


def test_a_power_loss_tail_past_the_recovery_point_is_cut_on_reopen() -> None:
    log = MemoryLog()
    log.append_as_leader([b"durable"], 1, 0)
    log.flush()
    assert log.recovery_point == 1
    sizes = writing(log, b"torn-1", b"torn-2")
    log.crash(out_of_order_writeback(sizes[0]))
    assert log.end_offset == 1  # the tail lies past the durable image until reopen
    assert log.reopen() == sum(sizes)
    assert records(log) == [b"durable"]
    assert (log.end_offset, log.flushed_offset, log.recovery_point) == (1, 1, 1)
    assert log.torn_tails_cut == 1


def test_without_the_recovery_point_the_same_power_loss_refuses_to_reopen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(MemoryLog, "_read_recovery_point", lambda self: None)
    log = MemoryLog()
    log.append_as_leader([b"durable"], 1, 0)
    log.flush()
    durable_bytes = len(log.read(0, 1 << 20, 1))
    sizes = writing(log, b"torn-1", b"torn-2")
    log.crash(out_of_order_writeback(sizes[0]))
    with pytest.raises(CorruptRecordError) as info:
        log.reopen()
    assert (info.value.path, info.value.position) == (MEMORY_PATH, durable_bytes)


def test_whole_batches_a_power_loss_left_are_kept_and_durable() -> None:
    log = MemoryLog()
    sizes = writing(log, b"made-it", b"torn")
    log.crash(lambda written: written[: sizes[0] + 5])
    assert log.reopen() == 5
    assert records(log) == [b"made-it"]
    assert (log.flushed_offset, log.durable_end_offset, log.recovery_point) == (1, 1, 1)


def test_a_truncating_job_lowers_the_recovery_point_before_its_cut() -> None:
    log = MemoryLog()
    for payload in (b"a", b"b", b"c"):
        log.append_as_leader([payload], 1, 0)
    log.flush()
    assert log.recovery_point == 3
    log.truncate_to(1)  # a new leader's log diverges at 1
    sizes = writing(log, b"x", b"y", epoch=2)
    log.crash(out_of_order_writeback(sizes[0]))
    assert log.recovery_point == 1
    log.reopen()  # without the lowering: damage "before the recovery point 3", refused
    assert records(log) == [b"a"]


def test_a_lagging_recovery_point_is_still_safe() -> None:
    log = MemoryLog(recovery_point_every=3)
    for payload in (b"a", b"b"):
        log.append_as_leader([payload], 1, 0)
        log.flush()
    assert log.recovery_point == 0
    sizes = writing(log, b"torn-1", b"torn-2")
    log.crash(out_of_order_writeback(sizes[0]))
    log.reopen()
    assert records(log) == [b"a", b"b"]


def test_a_plain_crash_leaves_nothing_for_reopen() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a"], 1, 0)
    log.flush()
    writing(log, b"b")
    log.crash()
    assert log.reopen() == 0
    assert records(log) == [b"a"]


def test_after_flush_actions_run_once_the_next_job_completes_and_a_crash_drops_them() -> None:
    log = MemoryLog()
    ran: list[str] = []
    log.append_as_leader([b"a"], 1, 0)
    log.after_flush(lambda: ran.append("first"))
    job = log.begin_flush()
    assert job is not None
    job.run()
    assert ran == []
    log.complete_flush(job)
    assert ran == ["first"]
    log.after_flush(lambda: ran.append("alone"))
    log.flush()  # a job for the action alone
    assert ran == ["first", "alone"]
    log.reset_to(10, 2)
    log.after_flush(lambda: ran.append("lost"))
    log.crash()
    log.flush()
    assert ran == ["first", "alone"]
    assert log.start_offset == 0  # the reset never reached the disk either
