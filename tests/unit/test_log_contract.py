"""The ReplicatedLog/DurableLog contract, written once and run against every implementation:
MemoryLog, SegmentedLog with default settings, and SegmentedLog with tiny segments and no read
cache (so reads cross segment files and come from disk once flushed)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kraft.log import (
    CorruptRecordError,
    LogAppendError,
    MemoryLog,
    OffsetAndEpoch,
    SegmentedLog,
    decode_batches,
    encode_batch,
)

MakeLog = Callable[[], Any]
IMPLEMENTATIONS = ["memory", "segmented", "segmented-small", "segmented-write-through"]


@pytest.fixture(params=IMPLEMENTATIONS)
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeLog]:
    logs: list[Any] = []
    names = itertools.count()

    def make() -> Any:
        if request.param == "memory":
            log: Any = MemoryLog()
        elif request.param == "segmented":
            log = SegmentedLog(tmp_path / f"log{next(names)}")
        elif request.param == "segmented-small":
            log = SegmentedLog(tmp_path / f"log{next(names)}", segment_bytes=200, cache_bytes=0)
        else:  # a partition log's mode: file changes at once, fsync only in flush jobs
            log = SegmentedLog(tmp_path / f"log{next(names)}", segment_bytes=200, cache_bytes=0,
                               write_through=True)
        logs.append(log)
        return log

    yield make
    for log in logs:
        log.close()


def example(make_log: MakeLog) -> Any:
    """Leader epochs 1, 3, 5 at offsets 0-2, 3-5, 6-8, one batch per record."""
    log = make_log()
    for epoch in (1, 3, 5):
        for i in range(3):
            log.append_as_leader([f"e{epoch}r{i}".encode()], epoch, timestamp_ms=epoch)
    return log


def state(log: Any) -> tuple[Any, ...]:
    return (
        log.start_offset, log.end_offset, log.last_epoch, log.flushed_offset,
        log.read(0, 1 << 30, 1 << 62),
    )


def records(log: Any, start: int = 0, end: int = 1 << 62) -> list[bytes]:
    return [r for batch in log.batches(start, end) for r in batch.records]


def test_empty_log(make_log: MakeLog) -> None:
    log = make_log()
    assert (log.start_offset, log.end_offset, log.flushed_offset, log.last_epoch) == (0, 0, 0, 0)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(offset=0, epoch=0)
    assert log.read(0, 100, 100) == b""
    assert list(log.batches(0, 10)) == []
    assert log.begin_flush() is None


def test_append_as_leader(make_log: MakeLog) -> None:
    log = make_log()
    assert log.append_as_leader([b"a", b"b"], 1, 10) == 0
    assert log.append_as_leader([b"c"], 1, 11, control=True) == 2
    assert log.append_as_leader([b"d"] * 3, 4, 12) == 3
    assert (log.end_offset, log.last_epoch) == (6, 4)
    batches = list(log.batches(0, 6))
    assert [(b.base_offset, b.epoch, b.control, b.first_timestamp_ms) for b in batches] == [
        (0, 1, False, 10), (2, 1, True, 11), (3, 4, False, 12),
    ]
    assert records(log) == [b"a", b"b", b"c", b"d", b"d", b"d"]
    assert log.read(0, 1 << 20, 6) == b"".join(
        encode_batch(b.base_offset, b.epoch, b.records, b.first_timestamp_ms, b.control)
        for b in batches
    )


def test_leader_append_errors_leave_the_log_unchanged(make_log: MakeLog) -> None:
    log = example(make_log)
    before = state(log)
    with pytest.raises(ValueError):
        log.append_as_leader([], 5, 0)
    with pytest.raises(LogAppendError):
        log.append_as_leader([b"x"], 4, 0)
    assert state(log) == before


def test_append_as_follower_stores_the_leaders_bytes(make_log: MakeLog) -> None:
    leader = example(make_log)
    follower = make_log()
    shipped = leader.read(0, 1 << 20, leader.end_offset)
    assert follower.append_as_follower(shipped[:0]) == 0
    assert follower.append_as_follower(shipped) == 9
    assert follower.read(0, 1 << 20, 100) == shipped
    assert follower.end_offset_for_epoch(4) == OffsetAndEpoch(offset=6, epoch=3)
    assert follower.last_epoch == 5
    more = encode_batch(9, 6, [b"x", b"y"], 0) + encode_batch(11, 6, [b"z"], 0)
    assert follower.append_as_follower(more) == 3
    assert records(follower, 9) == [b"x", b"y", b"z"]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (encode_batch(10, 5, [b"gap"], 0), LogAppendError),
        (encode_batch(8, 5, [b"overlap"], 0), LogAppendError),
        (encode_batch(9, 4, [b"old epoch"], 0), LogAppendError),
        (encode_batch(9, 6, [b"a"], 0) + encode_batch(10, 5, [b"epoch goes down"], 0),
         LogAppendError),
        (encode_batch(9, 6, [b"a"], 0) + encode_batch(11, 6, [b"gap after"], 0), LogAppendError),
        (encode_batch(9, 6, [b"a"], 0) + encode_batch(10, 6, [b"b"], 0)[:-1], CorruptRecordError),
        (b"\x00" * 60, CorruptRecordError),
    ],
)
def test_follower_append_errors_append_nothing(
    make_log: MakeLog, data: bytes, error: type[Exception]
) -> None:
    log = example(make_log)
    before = state(log)
    with pytest.raises(error):
        log.append_as_follower(data)
    assert state(log) == before
    assert log.append_as_leader([b"still works"], 5, 0) == 9


def test_truncate_to(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader([b"a", b"b"], 1, 0)
    log.append_as_leader([b"c", b"d"], 2, 0)
    log.append_as_leader([b"e"], 3, 0)
    log.truncate_to(5)  # at the end: no-op
    log.truncate_to(50)
    assert log.end_offset == 5
    with pytest.raises(ValueError, match="inside a batch"):
        log.truncate_to(3)
    log.append_as_leader([b"x", b"y"], 3, 0)
    with pytest.raises(ValueError, match="inside a batch"):
        log.truncate_to(6)  # inside the last batch
    log.truncate_to(5)
    with pytest.raises(ValueError):
        log.truncate_to(-1)
    assert log.end_offset == 5
    log.truncate_to(2)
    assert (log.end_offset, log.last_epoch) == (2, 1)
    assert records(log) == [b"a", b"b"]
    assert log.read(2, 100, 100) == b""
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(offset=2, epoch=1)
    assert log.append_as_leader([b"f"], 2, 0) == 2
    assert records(log) == [b"a", b"b", b"f"]
    log.truncate_to(0)
    assert (log.end_offset, log.last_epoch, records(log)) == (0, 0, [])
    assert log.append_as_leader([b"g"], 1, 0) == 0


def test_end_offset_for_epoch(make_log: MakeLog) -> None:
    log = example(make_log)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(offset=0, epoch=0)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(offset=3, epoch=1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(offset=3, epoch=1)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(offset=6, epoch=3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(offset=9, epoch=5)
    assert log.end_offset_for_epoch(8) == OffsetAndEpoch(offset=9, epoch=5)
    log.truncate_to(6)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(offset=6, epoch=3)


def build_reference(make_log: MakeLog) -> tuple[Any, list[tuple[int, int, bytes]]]:
    """Batches of 1-3 records and uneven sizes; half flushed, half only appended."""
    log = make_log()
    expected = []
    for i in range(12):
        count = 1 + i % 3
        recs = [bytes([65 + i]) * (5 + 17 * ((i * 7) % 5))] * count
        base = log.append_as_leader(recs, 1 + i // 4, i)
        expected.append((base, base + count, encode_batch(base, 1 + i // 4, recs, i)))
        if i == 5:
            log.flush()
    return log, expected


def reference_read(
    batches: list[tuple[int, int, bytes]], offset: int, max_bytes: int, max_offset: int
) -> bytes:
    """ReplicatedLog.read, spelled out: from the batch containing `offset`, whole batches that
    end by max_offset, while they fit max_bytes, but at least one."""
    out: list[bytes] = []
    size = 0
    for _base, next_offset, blob in batches:
        if next_offset <= offset:
            continue
        if next_offset > max_offset:
            break
        if out and size + len(blob) > max_bytes:
            break
        out.append(blob)
        size += len(blob)
    return b"".join(out)


def test_read_matches_the_reference_everywhere(make_log: MakeLog) -> None:
    log, batches = build_reference(make_log)
    end = log.end_offset
    sizes = sorted({len(b[2]) for b in batches})
    budgets = [0, 1, sizes[0], sizes[0] + sizes[-1], 300, 1000, 1 << 30]
    for offset in range(end + 2):
        for max_offset in range(offset, end + 3):
            for max_bytes in budgets:
                assert log.read(offset, max_bytes, max_offset) == reference_read(
                    batches, offset, max_bytes, max_offset
                ), (offset, max_bytes, max_offset)


def test_read_limits(make_log: MakeLog) -> None:
    log = example(make_log)
    one = len(log.read(0, 0, 100))
    assert len(decode_batches(log.read(0, 0, 100))) == 1  # at least one batch
    assert len(decode_batches(log.read(0, 2 * one, 100))) == 2
    assert len(decode_batches(log.read(0, 2 * one - 1, 100))) == 1
    assert len(decode_batches(log.read(0, 1 << 20, 4))) == 4
    assert len(decode_batches(log.read(4, 1 << 20, 100))) == 5
    assert log.read(9, 100, 100) == b""
    assert log.read(3, 100, 3) == b""
    with pytest.raises(ValueError):
        log.read(-1, 100, 100)


def test_read_starts_at_the_batch_containing_the_offset(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader([b"a", b"b", b"c"], 1, 0)
    log.append_as_leader([b"d", b"e"], 1, 0)
    assert [b.base_offset for b in decode_batches(log.read(1, 1 << 20, 5))] == [0, 3]
    assert [b.base_offset for b in decode_batches(log.read(4, 1 << 20, 5))] == [3]
    assert log.read(1, 1 << 20, 2) == b""  # the batch holding offset 1 ends past 2
    assert [b.base_offset for b in log.batches(1, 4)] == [0, 3]
    assert [b.base_offset for b in log.batches(4, 5)] == [3]
    assert [b.base_offset for b in log.batches(0, 3)] == [0]
    assert list(log.batches(5, 9)) == []
    assert list(log.batches(2, 2)) == []


def test_flushed_offset(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader([b"a"], 1, 0)
    log.append_as_leader([b"b", b"c"], 1, 0)
    assert log.flushed_offset == 0
    log.flush()
    assert log.flushed_offset == 3
    assert log.begin_flush() is None
    log.append_as_leader([b"d"], 1, 0)
    assert log.flushed_offset == 3
    job = log.begin_flush()
    assert job is not None
    with pytest.raises(RuntimeError):
        log.begin_flush()
    log.append_as_leader([b"e"], 2, 0)  # goes to the next job
    job.run()
    log.complete_flush(job)
    assert log.flushed_offset == 4
    log.flush()
    assert log.flushed_offset == 5


def test_truncation_lowers_flushed_offset_at_once(make_log: MakeLog) -> None:
    log = make_log()
    for i in range(4):
        log.append_as_leader([bytes([i])], 1, 0)
    log.flush()
    log.truncate_to(2)
    assert log.flushed_offset == 2
    log.append_as_leader([b"new"], 2, 0)
    assert log.flushed_offset == 2
    log.flush()
    assert log.flushed_offset == 3


def test_truncation_during_a_flush_job_caps_what_it_makes_durable(make_log: MakeLog) -> None:
    log = make_log()
    for i in range(4):
        log.append_as_leader([bytes([i])], 1, 0)
    job = log.begin_flush()
    job.run()
    log.truncate_to(1)
    log.append_as_leader([b"x"], 2, 0)
    log.append_as_leader([b"y"], 2, 0)
    log.complete_flush(job)
    assert log.flushed_offset == 1  # offsets 1.. changed since the job captured them
    log.flush()
    assert log.flushed_offset == 3
    assert records(log) == [b"\x00", b"x", b"y"]


def test_job_completed_before_running_is_refused(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader([b"a"], 1, 0)
    job = log.begin_flush()
    with pytest.raises(RuntimeError):
        log.complete_flush(job)
    job.run()
    log.complete_flush(job)
    assert log.flushed_offset == 1


@pytest.mark.parametrize("ran", [False, True])
def test_flush_finishes_an_abandoned_job_first(make_log: MakeLog, ran: bool) -> None:
    log = make_log()
    log.append_as_leader([b"a"], 1, 0)
    job = log.begin_flush()
    if ran:
        job.run()
    log.append_as_leader([b"b"], 1, 0)
    log.flush()  # e.g. at shutdown, after the task waiting on `job` was cancelled
    assert log.flushed_offset == 2
    assert log.begin_flush() is None


# -- snapshots move the start -------------------------------------------------------------


def test_advance_start_hides_the_prefix(make_log: MakeLog) -> None:
    log = example(make_log)
    log.flush()
    log.advance_start(6, 3)
    assert (log.start_offset, log.start_epoch, log.end_offset, log.last_epoch) == (6, 3, 9, 5)
    assert records(log, 6) == [b"e5r0", b"e5r1", b"e5r2"]
    with pytest.raises(ValueError):
        log.read(5, 100, 100)
    # An epoch older than what the log holds now resolves to the snapshot at its start.
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(9, 5)
    log.advance_start(3, 1)  # never backwards
    assert log.start_offset == 6
    log.flush()
    assert log.flushed_offset == 9


def test_advance_start_refuses_unflushed_or_mid_batch_offsets(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader([b"a", b"b"], 1, 0)
    log.flush()
    log.append_as_leader([b"c"], 1, 0)
    with pytest.raises(ValueError):
        log.advance_start(1, 1)  # inside the first batch
    if getattr(log, "_write_through", False):
        # Write-through: every offset is in the files, so only the log end bounds it.
        with pytest.raises(ValueError):
            log.advance_start(4, 1)
    else:
        with pytest.raises(ValueError):
            log.advance_start(3, 1)  # not flushed
    log.advance_start(2, 1)
    assert log.start_offset == 2


def test_reset_to_restarts_the_log_empty_at_the_snapshot(make_log: MakeLog) -> None:
    log = example(make_log)
    log.flush()
    log.append_as_leader([b"unflushed"], 5, 0)
    log.reset_to(20, 7)
    assert (log.start_offset, log.end_offset, log.flushed_offset, log.last_epoch) == (
        20, 20, 20, 7,
    )
    assert log.read(20, 100, 100) == b""
    assert log.end_offset_for_epoch(7) == OffsetAndEpoch(20, 7)
    log.append_as_follower(encode_batch(20, 8, [b"x", b"y"], 0))
    log.flush()
    assert records(log, 20) == [b"x", b"y"]
    assert log.end_offset_for_epoch(7) == OffsetAndEpoch(20, 7)
    assert log.end_offset_for_epoch(8) == OffsetAndEpoch(22, 8)


def test_after_flush_runs_once_what_was_queued_is_durable(make_log: MakeLog) -> None:
    log = example(make_log)
    log.flush()
    ran: list[int] = []
    log.append_as_leader([b"x"], 5, 0)
    running = log.begin_flush()
    assert running is not None
    log.reset_to(20, 7)
    log.after_flush(lambda: ran.append(log.start_offset))
    running.run()
    log.complete_flush(running)
    assert ran == []  # that job began before the reset: it does not carry it
    log.flush()
    assert ran == [20]
    log.after_flush(lambda: ran.append(-1))
    job = log.begin_flush()
    assert job is not None  # a job for the action alone
    job.run()
    assert ran == [20]
    log.complete_flush(job)
    assert ran == [20, -1]
    assert log.begin_flush() is None


def test_reset_then_reopen_keeps_only_the_new_log(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path / "log", segment_bytes=200)
    for i in range(20):
        log.append_as_leader([b"old-%d" % i], 1, 0)
    log.flush()
    log.reset_to(50, 2)
    log.append_as_leader([b"new"], 3, 0)
    log.flush()
    log.close()
    reopened = SegmentedLog(tmp_path / "log")
    assert (reopened.start_offset, reopened.end_offset) == (50, 51)
    assert records(reopened, 50) == [b"new"]
    reopened.close()


def test_advance_start_deletes_whole_segments_below_it(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path / "log", segment_bytes=200, cache_bytes=0)
    for i in range(30):
        log.append_as_leader([b"record-%02d" % i], 1, 0)
    log.flush()
    before = len(list((tmp_path / "log").glob("*.log")))
    size = log.size_in_bytes
    log.advance_start(20, 1)
    log.flush()
    after = sorted(p.name for p in (tmp_path / "log").glob("*.log"))
    assert len(after) < before
    assert int(after[0][:20]) <= 20
    assert log.size_in_bytes < size
    assert records(log, 20) == [b"record-%02d" % i for i in range(20, 30)]
    log.close()
