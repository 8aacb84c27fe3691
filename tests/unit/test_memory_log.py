"""MemoryLog's fault model (the shared behaviour is in test_log_contract.py)."""

from __future__ import annotations

from kraft.log import MemoryLog


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
