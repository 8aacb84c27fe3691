"""SegmentedLog on files: reopen, recovery (torn tail vs refuse), segments, group commit
(the shared behaviour is in test_log_contract.py)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from kraft.log import (
    CorruptRecordError,
    SegmentedLog,
    SegmentFlushJob,
    encode_batch,
    list_segments,
)
from kraft.log.recovery import RECOVERY_POINT_FILE
from kraft.log.segmented import segment_path

# Set the level on this logger itself: other suites may silence the "kraft" parent.
SEGMENTED_LOGGER = "kraft.log.segmented"


def records(log: SegmentedLog, start: int = 0) -> list[bytes]:
    return [r for batch in log.batches(start, log.end_offset) for r in batch.records]


def fill(log: SegmentedLog, count: int, epoch: int = 1, size: int = 30) -> list[bytes]:
    written = []
    for _ in range(count):
        record = str(log.end_offset).encode().ljust(size, b".")
        log.append_as_leader([record], epoch, 0)
        written.append(record)
    return written


def names(directory: Path) -> list[str]:
    return [os.path.basename(path) for _, path in list_segments(directory)]


# -- reopen ------------------------------------------------------------------------------


def test_reopen_restores_everything_flushed(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    log.append_as_leader([b"a", b"b"], 1, 5)
    log.append_as_leader([b"c"], 3, 6, control=True)
    log.append_as_leader([b"d"], 5, 7)
    log.flush()
    shipped = log.read(0, 1 << 20, 100)
    log.close()
    log.close()  # idempotent
    reopened = SegmentedLog(tmp_path)
    assert (reopened.start_offset, reopened.end_offset, reopened.flushed_offset) == (0, 4, 4)
    assert reopened.last_epoch == 5
    assert reopened.read(0, 1 << 20, 100) == shipped
    assert [b.control for b in reopened.batches(0, 4)] == [False, True, False]
    assert reopened.end_offset_for_epoch(4).offset == 3
    reopened.append_as_leader([b"e"], 5, 8)
    reopened.flush()
    reopened.close()
    assert records(SegmentedLog(tmp_path)) == [b"a", b"b", b"c", b"d", b"e"]


def test_reopen_after_unflushed_appends_recovers_the_flushed_prefix(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    flushed = fill(log, 3)
    log.flush()
    fill(log, 2, epoch=2)
    log.close()  # as a crash: the appends never left memory
    reopened = SegmentedLog(tmp_path)
    assert records(reopened) == flushed
    assert reopened.last_epoch == 1


def test_a_job_that_ran_is_durable_even_if_never_completed(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    written = fill(log, 3)
    job = log.begin_flush()
    assert job is not None
    job.run()
    log.close()
    assert records(SegmentedLog(tmp_path)) == written


def test_unflushed_truncation_is_undone_by_a_crash(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path, segment_bytes=100)
    written = fill(log, 6)
    log.flush()
    log.truncate_to(2)
    fill(log, 1, epoch=2)
    log.close()
    assert records(SegmentedLog(tmp_path, segment_bytes=100)) == written


def test_directory_is_created(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path / "a" / "b")
    fill(log, 1)
    log.flush()
    assert names(tmp_path / "a" / "b") == ["00000000000000000000.log"]


def test_closed_log_refuses_work(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append_as_leader([b"x"], 1, 0)
    with pytest.raises(ValueError, match="closed"):
        log.read(0, 1, 1)


# -- segments ----------------------------------------------------------------------------


def test_segments_roll_and_reads_cross_them(tmp_path: Path) -> None:
    size = len(encode_batch(0, 1, [b"x" * 30], 0))
    log = SegmentedLog(tmp_path, segment_bytes=3 * size, cache_bytes=0)
    written = fill(log, 10)
    log.flush()
    assert names(tmp_path) == [f"{base:020d}.log" for base in (0, 3, 6, 9)]
    assert [os.path.getsize(p) for _, p in list_segments(tmp_path)] == [3 * size] * 3 + [size]
    assert records(log) == written
    assert len(log.read(1, 1 << 20, 10)) == 9 * size  # from disk, across three files
    assert len(log.read(2, 2 * size, 10)) == 2 * size
    log.close()
    reopened = SegmentedLog(tmp_path, segment_bytes=3 * size)
    assert records(reopened, 4) == written[4:]


def test_a_batch_larger_than_a_segment_gets_its_own(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path, segment_bytes=100)
    log.append_as_leader([b"small"], 1, 0)
    log.append_as_leader([b"x" * 500], 1, 0)
    log.append_as_leader([b"small"], 1, 0)
    log.flush()
    assert names(tmp_path) == [f"{base:020d}.log" for base in (0, 1, 2)]


def test_truncation_across_segments_persists(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path, segment_bytes=150)
    written = fill(log, 12)
    log.flush()
    before = names(tmp_path)
    assert len(before) >= 4
    log.truncate_to(4)
    assert names(tmp_path) == before  # physical truncation waits for the flush job
    log.flush()
    assert records(log) == written[:4]
    log.close()
    reopened = SegmentedLog(tmp_path, segment_bytes=150)
    assert records(reopened) == written[:4]
    assert reopened.end_offset == reopened.flushed_offset == 4
    new = fill(reopened, 3, epoch=2)
    reopened.flush()
    reopened.close()
    assert records(SegmentedLog(tmp_path, segment_bytes=150)) == written[:4] + new


def test_truncation_to_a_segment_base_deletes_that_segment(tmp_path: Path) -> None:
    size = len(encode_batch(0, 1, [b"x" * 30], 0))
    log = SegmentedLog(tmp_path, segment_bytes=2 * size)
    fill(log, 6)
    log.flush()
    log.truncate_to(4)
    log.flush()
    assert names(tmp_path) == [f"{base:020d}.log" for base in (0, 2)]
    log.truncate_to(0)  # the first segment stays, empty: its name holds the start offset
    log.flush()
    assert names(tmp_path) == ["00000000000000000000.log"]
    assert os.path.getsize(segment_path(str(tmp_path), 0)) == 0
    log.close()
    reopened = SegmentedLog(tmp_path)
    assert (reopened.start_offset, reopened.end_offset) == (0, 0)


def test_truncating_unflushed_segments_never_creates_them(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path, segment_bytes=100)
    fill(log, 2)
    log.flush()
    fill(log, 6, epoch=2)  # several new segments, only queued
    log.truncate_to(2)
    log.append_as_leader([b"kept"], 3, 0)
    job = log.begin_flush()
    assert job is not None
    job.run()
    log.complete_flush(job)
    assert job.syncs == 2  # the new segment's fdatasync + the directory
    assert len(names(tmp_path)) == 3
    assert records(log)[-1] == b"kept"


def test_one_fdatasync_per_touched_file(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    fill(log, 100)
    job = log.begin_flush()
    assert job is not None
    job.run()
    log.complete_flush(job)
    assert job.syncs == 2  # segment created: its fdatasync + the directory fsync
    fill(log, 100)
    job = log.begin_flush()
    assert job is not None
    job.run()
    log.complete_flush(job)
    assert job.syncs == 1
    assert job.bytes_written == 100 * len(encode_batch(0, 1, [b"x" * 30], 0))


# -- recovery without a recovery point (a log from before the checkpoint existed) ----------


def flushed_log(
    tmp_path: Path, count: int = 3, recovery_point: int | None = None, **kwargs: int
) -> tuple[list[bytes], list[int]]:
    """Write `count` batches, flush and close; return records and batch end positions. The
    recovery-point checkpoint is then set to `recovery_point`, or removed (None: a log from
    before there was one, recovered by the rules without it)."""
    log = SegmentedLog(tmp_path, **kwargs)
    written = fill(log, count)
    log.flush()
    ends = []
    position = 0
    for batch in log.batches(0, log.end_offset):
        position += batch.size_in_bytes
        ends.append(position)
    log.close()
    set_recovery_point(tmp_path, recovery_point)
    return written, ends


def set_recovery_point(directory: Path, offset: int | None) -> None:
    path = directory / RECOVERY_POINT_FILE
    if offset is None:
        path.unlink()
    else:
        path.write_text(f"0\n{offset}\n")


def last_segment(tmp_path: Path) -> str:
    return list_segments(tmp_path)[-1][1]


def test_torn_tail_mid_batch_is_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    written, ends = flushed_log(tmp_path)
    path = last_segment(tmp_path)
    os.truncate(path, ends[1] + 20)
    with caplog.at_level(logging.WARNING, logger=SEGMENTED_LOGGER):
        log = SegmentedLog(tmp_path)
    assert records(log) == written[:2]
    assert os.path.getsize(path) == ends[1]
    assert f"{path} at byte {ends[1]}" in caplog.text
    log.append_as_leader([b"after"], 1, 0)
    log.flush()
    log.close()
    assert records(SegmentedLog(tmp_path)) == [*written[:2], b"after"]


def test_torn_header_is_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    written, ends = flushed_log(tmp_path)
    os.truncate(last_segment(tmp_path), ends[1] + 5)
    with caplog.at_level(logging.WARNING, logger=SEGMENTED_LOGGER):
        assert records(SegmentedLog(tmp_path)) == written[:2]
    assert "torn tail" in caplog.text


def test_zeros_after_the_last_batch_are_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written, ends = flushed_log(tmp_path)
    path = last_segment(tmp_path)
    with open(path, "ab") as file:
        file.write(bytes(4096))
    with caplog.at_level(logging.WARNING, logger=SEGMENTED_LOGGER):
        log = SegmentedLog(tmp_path)
    assert records(log) == written
    assert os.path.getsize(path) == ends[2]
    assert f"{path} at byte {ends[2]}" in caplog.text


def test_zeros_over_the_last_batches_are_cut(tmp_path: Path) -> None:
    written, ends = flushed_log(tmp_path, 4)
    path = last_segment(tmp_path)
    with open(path, "r+b") as file:
        file.seek(ends[1])
        file.write(bytes(ends[3] - ends[1]))
    assert records(SegmentedLog(tmp_path)) == written[:2]


def test_bad_crc_in_the_last_batch_is_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written, ends = flushed_log(tmp_path)
    path = last_segment(tmp_path)
    flip(path, ends[2] - 1)
    with caplog.at_level(logging.WARNING, logger=SEGMENTED_LOGGER):
        log = SegmentedLog(tmp_path)
    assert records(log) == written[:2]
    assert "CRC32C mismatch" in caplog.text


def test_a_last_segment_left_empty_by_a_crash_is_kept(tmp_path: Path) -> None:
    size = len(encode_batch(0, 1, [b"x" * 30], 0))
    written, _ = flushed_log(tmp_path, 3, segment_bytes=2 * size)
    os.truncate(last_segment(tmp_path), 10)
    log = SegmentedLog(tmp_path, segment_bytes=2 * size)
    assert records(log) == written[:2]
    assert os.path.getsize(last_segment(tmp_path)) == 0
    log.append_as_leader([b"again"], 1, 0)
    log.flush()
    log.close()
    assert records(SegmentedLog(tmp_path))[-1] == b"again"


def flip(path: str, position: int) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)
        file.seek(position)
        file.write(bytes([byte[0] ^ 0x40]))


def test_corruption_mid_file_refuses_to_open(tmp_path: Path) -> None:
    _, ends = flushed_log(tmp_path)
    path = last_segment(tmp_path)
    flip(path, ends[0] + 50)
    with pytest.raises(CorruptRecordError) as info:
        SegmentedLog(tmp_path)
    assert info.value.path == path
    assert info.value.position == ends[0]
    assert f"{path} at byte {ends[0]}" in str(info.value)


def test_corruption_in_a_segment_before_the_last_refuses(tmp_path: Path) -> None:
    size = len(encode_batch(0, 1, [b"x" * 30], 0))
    flushed_log(tmp_path, 6, segment_bytes=2 * size)
    first = list_segments(tmp_path)[0][1]
    flip(first, 2 * size - 1)  # its last batch: a tail, but not of the last segment
    with pytest.raises(CorruptRecordError, match="CRC32C") as info:
        SegmentedLog(tmp_path)
    assert (info.value.path, info.value.position) == (first, size)


def test_torn_segment_before_the_last_refuses(tmp_path: Path) -> None:
    size = len(encode_batch(0, 1, [b"x" * 30], 0))
    flushed_log(tmp_path, 6, segment_bytes=2 * size)
    middle = list_segments(tmp_path)[1][1]
    os.truncate(middle, size + 10)
    with pytest.raises(CorruptRecordError) as info:
        SegmentedLog(tmp_path)
    assert info.value.path == middle


def test_missing_segment_refuses(tmp_path: Path) -> None:
    size = len(encode_batch(0, 1, [b"x" * 30], 0))
    flushed_log(tmp_path, 6, segment_bytes=2 * size)
    segments = list_segments(tmp_path)
    os.unlink(segments[1][1])
    with pytest.raises(CorruptRecordError, match="log before it ends at 2") as info:
        SegmentedLog(tmp_path)
    assert info.value.path == segments[2][1]


def test_file_name_must_match_its_first_batch(tmp_path: Path) -> None:
    flushed_log(tmp_path)
    os.rename(segment_path(str(tmp_path), 0), segment_path(str(tmp_path), 5))
    with pytest.raises(CorruptRecordError, match="starts at offset 0, expected 5"):
        SegmentedLog(tmp_path)


def test_overlapping_batches_refuse(tmp_path: Path) -> None:
    path = segment_path(str(tmp_path), 0)
    with open(path, "wb") as file:
        file.write(encode_batch(0, 1, [b"a", b"b"], 0) + encode_batch(1, 1, [b"c"], 0))
    with pytest.raises(CorruptRecordError, match="starts at offset 1, expected 2"):
        SegmentedLog(tmp_path)


def test_epochs_going_down_refuse(tmp_path: Path) -> None:
    path = segment_path(str(tmp_path), 0)
    with open(path, "wb") as file:
        file.write(encode_batch(0, 2, [b"a"], 0) + encode_batch(1, 1, [b"b"], 0))
    with pytest.raises(CorruptRecordError, match="epoch 1 is below"):
        SegmentedLog(tmp_path)


def test_other_files_are_ignored(tmp_path: Path) -> None:
    written, _ = flushed_log(tmp_path)
    (tmp_path / "quorum-state").write_text("{}")
    (tmp_path / "notes.log").write_text("x")
    assert records(SegmentedLog(tmp_path)) == written


# -- recovery with a recovery point (issue 14, item 5) ---------------------------------------


def lose_power_mid_job(path: str, base_offset: int, size: int = 30) -> int:
    """What a power loss during a flush job can leave past the last fdatasync: the job wrote
    two batches, and the page holding the second reached the disk but not the first one's
    (out-of-order writeback). Returns how many bytes that appended."""
    first = encode_batch(base_offset, 1, [b"f" * size], 0)
    second = encode_batch(base_offset + 1, 1, [b"s" * size], 0)
    with open(path, "ab") as file:
        file.write(bytes(len(first)) + second)
    return len(first) + len(second)


def test_opening_writes_the_recovery_point_and_flushes_raise_it(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path, recovery_point_interval_ms=0)
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n0\n"
    fill(log, 3)
    log.flush()
    assert log.recovery_point == 3
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n3\n"
    fill(log, 2)
    log.close()  # unflushed: the checkpoint must not claim it
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n3\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_the_recovery_point_is_raised_at_most_once_per_interval(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path, recovery_point_interval_ms=3_600_000)
    for _ in range(3):
        fill(log, 1)
        log.flush()
    assert log.recovery_point == 0  # lagging is safe: damage past it is only cut
    log.close()  # nothing pending: a clean close brings it up to date
    assert SegmentedLog(tmp_path).recovery_point == 3


def test_a_zeroed_frame_followed_by_written_bytes_past_the_recovery_point_is_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written, ends = flushed_log(tmp_path, recovery_point=3)
    path = last_segment(tmp_path)
    appended = lose_power_mid_job(path, 3)
    with caplog.at_level(logging.WARNING, logger=SEGMENTED_LOGGER):
        log = SegmentedLog(tmp_path)
    assert records(log) == written
    assert (log.end_offset, log.flushed_offset, log.recovery_point) == (3, 3, 3)
    assert os.path.getsize(path) == ends[2]
    assert f"{path} at byte {ends[2]} ({appended} bytes dropped" in caplog.text


def test_without_a_recovery_point_the_same_power_loss_refuses_to_open(tmp_path: Path) -> None:
    # The rule before the recovery point: a zeroed frame followed by data is "corruption in
    # the middle", although none of those bytes was ever acknowledged.
    _, ends = flushed_log(tmp_path, recovery_point=None)
    path = last_segment(tmp_path)
    lose_power_mid_job(path, 3)
    with pytest.raises(CorruptRecordError) as info:
        SegmentedLog(tmp_path)
    assert (info.value.path, info.value.position) == (path, ends[2])


@pytest.mark.parametrize("damage", ["zeroed", "bad crc", "garbage", "torn"])
def test_any_damage_past_the_recovery_point_is_a_torn_tail(tmp_path: Path, damage: str) -> None:
    written, ends = flushed_log(tmp_path, 5, recovery_point=2)
    path = last_segment(tmp_path)
    if damage == "zeroed":
        with open(path, "r+b") as file:
            file.seek(ends[2])
            file.write(bytes(ends[3] - ends[2]))
    elif damage == "bad crc":
        flip(path, ends[3] - 1)
    elif damage == "garbage":
        with open(path, "r+b") as file:
            file.seek(ends[2])
            file.write(os.urandom(ends[3] - ends[2]))
    else:
        os.truncate(path, ends[3] + 7)
    log = SegmentedLog(tmp_path)
    kept = {"zeroed": 3, "bad crc": 3, "garbage": 3, "torn": 4}[damage]
    assert records(log) == written[:kept]
    assert os.path.getsize(path) == ends[kept - 1]
    assert log.recovery_point == kept


@pytest.mark.parametrize("damage", ["zeroed", "bad crc", "torn"])
def test_damage_before_the_recovery_point_refuses_with_path_and_position(
    tmp_path: Path, damage: str
) -> None:
    # Before the checkpoint the bytes were durable: even damage that looks like an interrupted
    # write (a bad last frame, a short file) means lost acknowledged records.
    _, ends = flushed_log(tmp_path, 4, recovery_point=4)
    path = last_segment(tmp_path)
    if damage == "zeroed":
        with open(path, "r+b") as file:
            file.seek(ends[1])
            file.write(bytes(ends[2] - ends[1]))
        position = ends[1]
    elif damage == "bad crc":
        flip(path, ends[3] - 1)
        position = ends[2]
    else:
        os.truncate(path, ends[2] + 7)
        position = ends[2]
    with pytest.raises(CorruptRecordError, match="up to the recovery point 4") as info:
        SegmentedLog(tmp_path)
    assert (info.value.path, info.value.position) == (path, position)
    assert f"{path} at byte {position}" in str(info.value)


def test_damage_in_a_segment_before_the_last_refuses_whatever_the_recovery_point(
    tmp_path: Path,
) -> None:
    # A job syncs a segment before it creates the next one: an earlier segment is durable.
    size = len(encode_batch(0, 1, [b"x" * 30], 0))
    flushed_log(tmp_path, 6, recovery_point=0, segment_bytes=2 * size)
    first = list_segments(tmp_path)[0][1]
    flip(first, 2 * size - 1)
    with pytest.raises(CorruptRecordError, match="CRC32C") as info:
        SegmentedLog(tmp_path)
    assert (info.value.path, info.value.position) == (first, size)


def test_a_stale_recovery_point_is_safe(tmp_path: Path) -> None:
    # The checkpoint lags (written lazily): what a power loss damages lies past the durable
    # end, so past the checkpoint too, and is cut.
    written, _ = flushed_log(tmp_path, 4, recovery_point=1)
    lose_power_mid_job(last_segment(tmp_path), 4)
    assert records(SegmentedLog(tmp_path)) == written


@pytest.mark.parametrize("content", ["", "0\n", "1\n5\n", "0\n-3\n", "0\nfive\n", "\xff\xfe"])
def test_a_damaged_checkpoint_falls_back_to_the_rules_without_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    written, ends = flushed_log(tmp_path)
    (tmp_path / RECOVERY_POINT_FILE).write_bytes(content.encode("latin-1"))
    path = last_segment(tmp_path)
    flip(path, ends[2] - 1)  # a bad last frame: a torn tail by the rules without a checkpoint
    with caplog.at_level(logging.WARNING, logger="kraft.log.recovery"):
        log = SegmentedLog(tmp_path)
    assert records(log) == written[:2]
    assert f"the recovery point {tmp_path / RECOVERY_POINT_FILE} is damaged" in caplog.text
    assert log.recovery_point == 2
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n2\n"


def test_a_missing_checkpoint_is_written_after_recovery(tmp_path: Path) -> None:
    written, _ = flushed_log(tmp_path, recovery_point=None)
    log = SegmentedLog(tmp_path)
    assert log.recovery_point == 3
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n3\n"
    assert records(log) == written


def checkpoint_at_each_cut(monkeypatch: pytest.MonkeyPatch, directory: Path) -> list[str]:
    """The checkpoint's content each time a flush job cuts or deletes a segment file."""
    seen: list[str] = []
    real_ftruncate, real_unlink = os.ftruncate, os.unlink

    def ftruncate(fd: int, length: int) -> None:
        seen.append((directory / RECOVERY_POINT_FILE).read_text())
        real_ftruncate(fd, length)

    def unlink(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        if str(path).endswith(".log"):
            seen.append((directory / RECOVERY_POINT_FILE).read_text())
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    monkeypatch.setattr(os, "unlink", unlink)
    return seen


def test_a_truncation_lowers_the_recovery_point_before_it_cuts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SegmentedLog(tmp_path, recovery_point_interval_ms=3_600_000)
    fill(log, 5)
    log.flush()
    log.close()
    log = SegmentedLog(tmp_path, recovery_point_interval_ms=3_600_000)
    assert log.recovery_point == 5
    seen = checkpoint_at_each_cut(monkeypatch, tmp_path)
    log.truncate_to(2)  # a new leader's log diverges at 2
    fill(log, 2, epoch=2)
    log.flush()
    assert seen == ["0\n2\n"]
    # A power loss now: the new batches' pages may be torn. Before the checkpoint came down,
    # that was damage "before the recovery point 5" and the node could not start.
    log.close()
    set_recovery_point(tmp_path, 2)  # what a lazy raise may still leave (safe either way)
    lose_power_mid_job(last_segment(tmp_path), 4)
    assert SegmentedLog(tmp_path).end_offset == 4


def test_a_reset_lowers_the_recovery_point_before_it_deletes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SegmentedLog(tmp_path, recovery_point_interval_ms=3_600_000)
    fill(log, 8)
    log.flush()
    log.close()
    log = SegmentedLog(tmp_path, recovery_point_interval_ms=3_600_000)
    seen = checkpoint_at_each_cut(monkeypatch, tmp_path)
    log.reset_to(5, 3)  # a snapshot at 5 replaces a divergent log
    log.append_as_follower(encode_batch(5, 3, [b"new"], 0))
    log.flush()
    assert seen == ["0\n5\n"]
    # A reset above the checkpoint needs no lowering.
    log.reset_to(40, 4)
    log.flush()
    assert seen == ["0\n5\n", "0\n5\n"]


def test_after_flush_actions_wait_for_the_next_job(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    fill(log, 2)
    log.flush()
    ran: list[str] = []
    fill(log, 1)
    running = log.begin_flush()
    assert running is not None
    log.reset_to(10, 2)
    log.after_flush(lambda: ran.append("forget"))
    running.run()
    log.complete_flush(running)
    assert ran == []  # that job began before the reset
    job = log.begin_flush()
    assert job is not None
    job.run()
    assert ran == []
    log.complete_flush(job)
    assert ran == ["forget"]
    log.after_flush(lambda: ran.append("alone"))
    alone = log.begin_flush()  # nothing else queued: a job runs for the action alone
    assert alone is not None
    alone.run()
    log.complete_flush(alone)
    assert ran == ["forget", "alone"]
    log.after_flush(lambda: ran.append("lost"))
    log.close()  # a crash: the action is forgotten with the process
    assert ran == ["forget", "alone"]


# -- group commit --------------------------------------------------------------------------


def test_reads_are_served_while_a_flush_job_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SegmentedLog(tmp_path, segment_bytes=400, cache_bytes=0)
    first = fill(log, 20)
    job = log.begin_flush()
    assert job is not None
    in_job = threading.Event()
    release = threading.Event()
    real_write = SegmentFlushJob._write

    def slow_write(self: SegmentFlushJob, fd: int, buffers: list[bytes], position: int) -> None:
        in_job.set()
        release.wait(timeout=30)
        real_write(self, fd, buffers, position)

    monkeypatch.setattr(SegmentFlushJob, "_write", slow_write)
    worker = threading.Thread(target=job.run)
    worker.start()
    assert in_job.wait(timeout=30)
    # The job is stuck before its first write: everything must come from memory.
    second = fill(log, 10, epoch=2)
    assert records(log) == first + second
    log.truncate_to(25)
    assert records(log) == first + second[:5]
    release.set()
    worker.join(timeout=30)
    log.complete_flush(job)
    assert log.flushed_offset == 20
    log.flush()
    assert log.flushed_offset == 25
    assert records(log) == first + second[:5]  # from disk now (no cache)
    log.close()
    assert records(SegmentedLog(tmp_path, segment_bytes=400)) == first + second[:5]


def test_cache_serves_recent_batches_and_evicts_flushed_ones(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path, cache_bytes=1000)
    written = fill(log, 100)
    assert records(log) == written  # unflushed: nothing evicted, all from memory
    log.flush()
    assert log._cache_held <= 1000
    assert records(log) == written  # the old part from disk, the recent part from memory
    assert records(log, 95) == written[95:]


def test_a_failed_flush_poisons_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SegmentedLog(tmp_path)
    fill(log, 2)
    job = log.begin_flush()
    assert job is not None

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", broken)
    with pytest.raises(OSError):
        job.run()
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="cannot be trusted"):
        log.complete_flush(job)
    assert log.flushed_offset == 0
    with pytest.raises(RuntimeError, match="cannot be trusted"):
        log.begin_flush()
    log.close()


def test_close_while_a_job_runs_is_refused(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    fill(log, 1)
    job = log.begin_flush()
    assert job is not None
    job.running = True  # as seen from the event loop while a worker is inside run()
    with pytest.raises(RuntimeError):
        log.close()
    job.running = False
    log.close()


def test_a_cut_file_is_synced_before_it_is_written_again(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    fill(log, 5)
    log.flush()
    log.truncate_to(2)
    fill(log, 2, epoch=2)
    job = log.begin_flush()
    assert job is not None
    job.run()
    log.complete_flush(job)
    assert job.syncs == 2  # after the ftruncate, and after the writes
    log.close()
    assert SegmentedLog(tmp_path).end_offset == 4


def test_more_batches_than_iov_max_in_one_job(tmp_path: Path) -> None:
    log = SegmentedLog(tmp_path)
    written = fill(log, 2500, size=8)
    log.flush()
    log.close()
    assert records(SegmentedLog(tmp_path)) == written


def test_short_writes_are_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.pwritev

    def half(fd: int, buffers: list[bytes], offset: int) -> int:
        data = b"".join(buffers)
        return real(fd, [data[: len(data) // 2]], offset)

    monkeypatch.setattr(os, "pwritev", half)
    log = SegmentedLog(tmp_path)
    written = fill(log, 10)
    log.flush()
    log.close()
    monkeypatch.undo()
    assert records(SegmentedLog(tmp_path)) == written


# -- a full disk --------------------------------------------------------------------------


def test_a_full_disk_stalls_the_flush_and_a_retry_completes_it(tmp_path: Path) -> None:
    import errno

    from kraft.log.segmented import DiskFullError

    log = SegmentedLog(tmp_path)
    fill(log, 3)
    log.flush()
    log.faults.disk_full = True
    written = fill(log, 2)
    job = log.begin_flush()
    assert job is not None
    with pytest.raises(OSError) as caught:
        job.run()
    assert caught.value.errno == errno.ENOSPC and job.retryable
    with pytest.raises(DiskFullError):
        log.complete_flush(job)
    assert log.flushed_offset == 3  # nothing counted as durable
    log.faults.disk_full = False
    job.run()
    log.complete_flush(job)
    assert log.flushed_offset == 5
    log.close()
    assert records(SegmentedLog(tmp_path))[3:] == written


def test_flush_retries_a_job_the_full_disk_refused(tmp_path: Path) -> None:
    from kraft.log.segmented import DiskFullError

    log = SegmentedLog(tmp_path)
    log.faults.disk_full = True
    fill(log, 2)
    with pytest.raises(DiskFullError):
        log.flush()
    log.faults.disk_full = False
    log.flush()
    assert log.flushed_offset == 2


def test_a_failed_fsync_is_never_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    log = SegmentedLog(tmp_path)
    fill(log, 2)
    job = log.begin_flush()
    assert job is not None

    def refuse(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", refuse)
    with pytest.raises(OSError):
        job.run()
    assert not job.retryable
    with pytest.raises(RuntimeError, match="cannot be trusted"):
        log.complete_flush(job)
    monkeypatch.undo()
    log.close()
