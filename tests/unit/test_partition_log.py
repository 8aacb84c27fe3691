"""PartitionLog (broker/log/partition_log.py) on real files in temporary directories: leader and
follower appends, reads, leader epochs and their checkpoint, truncation, recovery, retention,
rolls, flushing and the partition.metadata file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log import checkpoints
from broker.log.config import LOG_APPEND_TIME, LogConfig
from broker.log.partition_log import (
    AppendError,
    OffsetOutOfRange,
    PartitionLog,
    PartitionMetadataError,
    parse_partition_dir,
    remove_deleted,
)
from broker.records import Record, build_batch, decode_records, parse_header, scan_batches
from kraft.errors import Errors
from kraft.log.base import CorruptRecordError
from kraft.log.segmented import list_segments
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import ConfigRecord, ConfigResourceType

TOPIC_ID = "8d4c3b6a-6f64-4b43-9a59-3c5e3a4f2a11"
NOW = 1_700_000_000_000


def open_log(tmp_path: Path, config: LogConfig | None = None, name: str = "orders-0",
             **kwargs: int) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / name), TOPIC_ID, config or LogConfig(),
                             now_ms=NOW, **kwargs)


def values(count: int, prefix: str = "v", timestamp: int = NOW) -> bytes:
    return build_batch([f"{prefix}{i}".encode() for i in range(count)], base_timestamp=timestamp)


def offsets_read(log: PartitionLog, start: int = 0) -> list[int]:
    data = log.read(start, 1 << 30, log.end_offset)
    return [record.offset for header in scan_batches(data)
            for record in decode_records(data[header.position : header.position + header.size])]


# -- the directory -----------------------------------------------------------------------------


def test_partition_dir_names() -> None:
    assert parse_partition_dir("orders-0") == ("orders", 0)
    assert parse_partition_dir("my-dashed-topic-12") == ("my-dashed-topic", 12)
    assert parse_partition_dir("orders") is None
    assert parse_partition_dir("orders-x") is None


def test_open_writes_partition_metadata_and_refuses_another_topic_id(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.topic, log.partition, log.topic_id) == ("orders", 0, TOPIC_ID)
    assert checkpoints.read_partition_metadata(log.directory) == TOPIC_ID
    log.close()
    with pytest.raises(PartitionMetadataError, match="orders-0"):
        PartitionLog.open(str(tmp_path / "orders-0"), "another-id", LogConfig())


# -- leader appends ----------------------------------------------------------------------------


def test_leader_append_assigns_offsets_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(values(3), leader_epoch=4, now_ms=NOW)
    second = log.append_as_leader(values(2), leader_epoch=4, now_ms=NOW)
    assert (first.base_offset, first.last_offset, first.duplicate) == (0, 2, False)
    assert (second.base_offset, second.last_offset) == (3, 4)
    assert first.log_append_time_ms == -1
    assert log.end_offset == 5 and log.latest_epoch == 4
    data = log.read(0, 1 << 20, 5)
    headers = [parse_header(data, h.position) for h in scan_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 4)]
    assert offsets_read(log) == [0, 1, 2, 3, 4]


def test_leader_append_refusals_write_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(max_message_bytes=200))
    corrupt = bytearray(values(2))
    corrupt[-1] ^= 0xFF
    for batch, code in [
        (bytes(corrupt), Errors.CORRUPT_MESSAGE),
        (build_batch([b"x" * 300]), Errors.MESSAGE_TOO_LARGE),
        (values(1) + values(1), Errors.INVALID_RECORD),
    ]:
        with pytest.raises(AppendError) as info:
            log.append_as_leader(batch, 0, NOW)
        assert info.value.code == code
    assert log.end_offset == 0 and log.size_in_bytes == 0


def test_stale_leader_epoch_is_fenced(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(1), 5, NOW)
    with pytest.raises(AppendError) as info:
        log.append_as_leader(values(1), 4, NOW)
    assert info.value.code == Errors.FENCED_LEADER_EPOCH


def test_log_append_time_topic_stamps_the_leader_clock(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(message_timestamp_type=LOG_APPEND_TIME))
    result = log.append_as_leader(values(2, timestamp=5), 0, NOW + 42)
    assert result.log_append_time_ms == NOW + 42
    data = log.read(0, 1 << 20, log.end_offset)
    header = parse_header(data)
    assert header.log_append_time and header.max_timestamp == NOW + 42
    scan_batches(data)  # the recomputed CRC holds
    assert [r.timestamp_ms for r in decode_records(data)] == [NOW + 42, NOW + 42]


# -- follower appends --------------------------------------------------------------------------


def test_follower_append_takes_the_leaders_bytes(tmp_path: Path) -> None:
    leader = open_log(tmp_path, name="t-0")
    leader.append_as_leader(values(2), 1, NOW)
    leader.append_as_leader(values(3), 2, NOW)
    shipped = leader.read(0, 1 << 20, leader.end_offset)
    follower = open_log(tmp_path, name="t-1")
    assert follower.append_as_follower(shipped) == 5
    assert follower.read(0, 1 << 20, 5) == shipped
    assert follower.epoch_entries() == [(1, 0), (2, 2)]
    assert follower.append_as_follower(b"") == 0


def test_follower_append_checks_crc_and_offsets(tmp_path: Path) -> None:
    leader = open_log(tmp_path, name="t-0")
    leader.append_as_leader(values(2), 1, NOW)
    leader.append_as_leader(values(2), 1, NOW)
    shipped = leader.read(0, 1 << 20, leader.end_offset)
    follower = open_log(tmp_path, name="t-1")
    damaged = bytearray(shipped)
    damaged[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bytes(damaged))
    assert follower.end_offset == 0  # all or nothing
    second_batch = leader.read(2, 1 << 20, leader.end_offset)
    with pytest.raises(AppendError) as info:
        follower.append_as_follower(second_batch)  # a gap
    assert info.value.code == Errors.OFFSET_OUT_OF_RANGE
    follower.append_as_follower(shipped)
    with pytest.raises(AppendError):
        follower.append_as_follower(second_batch)  # an overlap


def test_follower_starting_inside_the_leaders_first_batch(tmp_path: Path) -> None:
    leader = open_log(tmp_path, name="t-0")
    leader.append_as_leader(values(3), 1, NOW)  # 0-2
    leader.append_as_leader(values(2), 1, NOW)  # 3-4
    leader.advance_start_offset(1)  # DeleteRecords: the log start falls inside a batch
    follower = open_log(tmp_path, name="t-1")
    follower.truncate_fully_and_start_at(leader.start_offset)
    assert follower.append_as_follower(leader.read(1, 1 << 20, 5)) == 5
    assert (follower.start_offset, follower.end_offset) == (1, 5)
    assert follower.epoch_entries() == [(1, 0)]
    with pytest.raises(OffsetOutOfRange):
        follower.read(0, 100, 5)


# -- reads -------------------------------------------------------------------------------------


def test_read_returns_the_batch_containing_the_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(3), 0, NOW)  # 0..2
    log.append_as_leader(values(3), 0, NOW)  # 3..5
    data = log.read(4, 1 << 20, 6)
    assert [h.base_offset for h in scan_batches(data)] == [3]
    assert log.read(6, 1 << 20, 6) == b""  # at the LEO: nothing yet, not an error
    assert log.read(2, 1 << 20, 2) == b""  # at max_offset


def test_read_stops_before_max_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(3):
        log.append_as_leader(values(2), 0, NOW)  # 0-1, 2-3, 4-5
    assert [h.base_offset for h in scan_batches(log.read(0, 1 << 20, 4))] == [0, 2]
    # A batch that is not wholly below max_offset (the HW) is not served.
    assert [h.base_offset for h in scan_batches(log.read(0, 1 << 20, 3))] == [0]


def test_read_first_batch_rule(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch([b"x" * 1000]), 0, NOW)
    log.append_as_leader(build_batch([b"y" * 10]), 0, NOW)
    first = log.read(0, 10, 2)
    assert [h.base_offset for h in scan_batches(first)] == [0]  # whole, though larger
    assert log.read(0, 10, 2, min_one_batch=False) == b""
    both = log.read(0, 1 << 20, 2)
    assert [h.base_offset for h in scan_batches(both)] == [0, 1]
    assert [h.base_offset for h in scan_batches(log.read(0, len(first) + 5, 2))] == [0]


def test_read_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 0, NOW)
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100, 2)
    log.advance_start_offset(1)
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100, 2)
    # The batch containing the start offset is still served whole.
    assert [h.base_offset for h in scan_batches(log.read(1, 1 << 20, 2))] == [0]


# -- leader epochs -----------------------------------------------------------------------------


def test_epoch_checkpoint_round_trip_in_kafkas_format(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)
    log.append_as_leader(values(2), 3, NOW)
    path = os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE)
    assert not os.path.exists(path)  # written by the flush job, off the appending thread
    log.flush()
    with open(path) as file:
        assert file.read() == "0\n2\n1 0\n3 2\n"
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.epoch_entries() == [(1, 0), (3, 2)] and reopened.latest_epoch == 3


def test_empty_epoch_is_kept_kafka_7415(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)
    log.assign_epoch(2, log.end_offset)  # became leader, wrote nothing
    assert log.latest_epoch == 2
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (2, 2)
    log.assign_epoch(3, log.end_offset)  # a later epoch at the same offset replaces it
    assert log.epoch_entries() == [(1, 0), (3, 2)]
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.epoch_entries() == [(1, 0), (3, 2)]


def test_end_offset_for_epoch_cases(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.end_offset_for_epoch(0) == (-1, -1)  # empty cache
    log.append_as_leader(values(2), 2, NOW)  # 0-1
    log.append_as_leader(values(3), 4, NOW)  # 2-4
    log.append_as_leader(values(1), 7, NOW)  # 5
    assert log.end_offset_for_epoch(7) == (7, 6)  # the latest: the LEO
    assert log.end_offset_for_epoch(4) == (4, 5)
    assert log.end_offset_for_epoch(5) == (4, 5)  # the largest epoch below
    assert log.end_offset_for_epoch(1) == (1, 0)  # below every epoch: the first start
    assert log.end_offset_for_epoch(8) == (-1, -1)  # above the latest
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_epoch_checkpoint_reconciled_with_the_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)
    log.append_as_leader(values(2), 2, NOW)
    log.close()
    # A stale file: an epoch past the log end, and one the batches disagree with.
    checkpoints.write_leader_epochs(log.directory, [(1, 0), (5, 9)])
    reopened = open_log(tmp_path)
    assert reopened.epoch_entries() == [(1, 0), (2, 2)]
    reopened.close()
    with open(os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE), "w") as file:
        file.write("garbage")
    assert open_log(tmp_path).epoch_entries() == [(1, 0), (2, 2)]


# -- truncation --------------------------------------------------------------------------------


def test_truncate_drops_records_epochs_and_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)  # 0-1
    log.append_as_leader(build_batch([b"a"], producer_id=9, producer_epoch=0, base_sequence=0),
                         2, NOW)  # 2
    log.append_as_leader(values(2), 3, NOW)  # 3-4
    log.truncate_to(3)
    assert log.end_offset == 3 and log.epoch_entries() == [(1, 0), (2, 2)]
    log.truncate_to(2)
    assert log.epoch_entries() == [(1, 0)]
    # The producer's batch is gone: it is unknown again and may start anywhere.
    retry = log.append_as_leader(
        build_batch([b"a"], producer_id=9, producer_epoch=0, base_sequence=0), 4, NOW)
    assert (retry.base_offset, retry.duplicate) == (2, False)
    # Truncation inside a batch drops the whole batch.
    log.truncate_to(1)
    assert log.end_offset == 0
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 0 and reopened.epoch_entries() == []


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(5), 1, NOW)
    log.truncate_fully_and_start_at(100)
    assert (log.start_offset, log.end_offset, log.epoch_entries()) == (100, 100, [])
    assert log.read(100, 1000, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(50, 1000, 100)
    log.close(flush=False)  # even after a crash the new start survives in a segment name
    reopened = open_log(tmp_path)
    assert (reopened.start_offset, reopened.end_offset) == (100, 100)
    shipped = open_log(tmp_path, name="x-0")
    shipped.truncate_fully_and_start_at(100)
    shipped.append_as_leader(values(2), 2, NOW)
    assert reopened.append_as_follower(shipped.read(100, 1 << 20, 102)) == 2


# -- recovery ----------------------------------------------------------------------------------


def fill(log: PartitionLog, batches: int, epoch: int = 1) -> None:
    for i in range(batches):
        log.append_as_leader(values(2, prefix=str(i % 10)), epoch, NOW)  # same size as values(2)


def test_reopen_after_clean_close(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    content = log.read(0, 1 << 30, log.end_offset)
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 20 and reopened.recovery_point == 20
    assert reopened.read(0, 1 << 30, 20) == content


def test_unflushed_appends_survive_a_process_crash(tmp_path: Path) -> None:
    # Write-through: the bytes are in the page cache when the append returns.
    log = open_log(tmp_path)
    fill(log, 4)
    assert log.recovery_point == 0 and log.flushed_offset == 0
    log.close(flush=False)
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 8


def test_torn_tail_past_the_recovery_point_is_cut(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    log.flush()
    fill(log, 2)
    log.close(flush=False)
    (_, path), = list_segments(log.directory)
    with open(path, "r+b") as file:
        file.truncate(os.path.getsize(path) - 7)
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 6 and reopened.latest_epoch == 1
    reopened.append_as_leader(values(1), 1, NOW)
    assert reopened.end_offset == 7


def test_damage_below_the_recovery_point_is_an_error_with_path_and_offset(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    fill(log, 3)
    second = log.read(2, 1, 10)
    log.close()
    (_, path), = list_segments(log.directory)
    log_bytes = Path(path).read_bytes()
    position = len(log_bytes) - 2 * len(second)
    assert log_bytes[position:position + len(second)] == second
    with open(path, "r+b") as file:
        file.seek(position + 16)  # the magic byte: the frame no longer parses
        file.write(b"\x07")
    with pytest.raises(CorruptRecordError) as info:
        open_log(tmp_path)
    assert info.value.path == path and info.value.position == position


def test_only_batches_from_the_recovery_point_on_are_crc_checked(tmp_path: Path) -> None:
    # Kafka's recovery: below the recovery point every batch was fdatasynced before the point
    # was raised, so its frame is read but its CRC is not checked on open.
    log = open_log(tmp_path)
    fill(log, 3)
    log.close()
    (_, path), = list_segments(log.directory)
    size = os.path.getsize(path)
    with open(path, "r+b") as file:
        file.seek(size * 2 // 3 - 5)  # a record byte of the second batch
        file.write(b"\xff")
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 6 and reopened.recovery_point == 6
    reopened.close()
    # With the recovery point at 0 the same damage is checked, and cut as a torn tail.
    Path(log.directory, "recovery-point-offset-checkpoint").write_text("0\n0\n")
    assert open_log(tmp_path).end_offset == 2


def test_damage_in_an_unsynced_older_segment_cuts_the_rest(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    log.flush()
    fill(log, 10)  # several segments, none synced: the recovery point is 0
    segments = list_segments(log.directory)
    assert len(segments) > 2
    log.close(flush=False)
    _, second = segments[1]
    with open(second, "r+b") as file:
        file.truncate(os.path.getsize(second) // 2)  # lost pages of an unsynced segment
    reopened = open_log(tmp_path, LogConfig(segment_bytes=300))
    assert reopened.end_offset < 20
    assert [base for base, _ in list_segments(log.directory)] == [base for base, _ in
                                                                   segments[:2]]
    assert offsets_read(reopened) == list(range(reopened.end_offset))


def test_stale_batches_a_lost_truncation_left_are_cut(tmp_path: Path) -> None:
    # A power loss may undo a truncation that never reached the disk, leaving old batches
    # after the new ones: past the recovery point (lowered before the cut), they are cut.
    log = open_log(tmp_path)
    fill(log, 3)  # offsets 0-5, epoch 1
    log.flush()
    stale = log.read(4, 1 << 20, 6)
    log.truncate_to(2)
    assert log.recovery_point == 2
    log.append_as_leader(values(3), 2, NOW)  # offsets 2-4, epoch 2
    log.close(flush=False)
    (_, path), = list_segments(log.directory)
    with open(path, "ab") as file:
        file.write(stale)  # offset 4, epoch 1: neither continuous nor in epoch order
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 5 and reopened.epoch_entries() == [(1, 0), (2, 2)]


# -- roll and retention ------------------------------------------------------------------------


def test_roll_by_size(tmp_path: Path) -> None:
    batch = values(2)
    log = open_log(tmp_path, LogConfig(segment_bytes=len(batch) * 3))
    fill(log, 7)
    assert [base for base, _ in list_segments(log.directory)] == [0, 6, 12]


def test_roll_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    log.append_as_leader(values(2, timestamp=NOW), 0, NOW)
    log.append_as_leader(values(2, timestamp=NOW + 500), 0, NOW + 500)
    assert log.segment_count == 1
    log.append_as_leader(values(2, timestamp=NOW + 1500), 0, NOW + 1500)
    assert [base for base, _ in list_segments(log.directory)] == [0, 4]
    assert log.flush_due(NOW + 1500)  # the rolled segment is synced soon


def test_old_producer_timestamps_do_not_roll_every_batch(tmp_path: Path) -> None:
    # Kafka compares the incoming batch's timestamp with the segment's first one, not "now".
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    for i in range(5):
        log.append_as_leader(values(1, timestamp=1_000 + i), 0, NOW)
    assert log.segment_count == 1
    log.append_as_leader(values(1, timestamp=2_500), 0, NOW)
    assert log.segment_count == 2


def test_roll_by_time_without_timestamps_uses_the_wall_clock(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    log.append_as_leader(values(1, timestamp=-1), 0, NOW)
    log.append_as_leader(values(1, timestamp=-1), 0, NOW + 900)
    assert log.segment_count == 1
    log.append_as_leader(values(1, timestamp=-1), 0, NOW + 1001)
    assert log.segment_count == 2


def test_retention_by_time_never_past_the_high_watermark(tmp_path: Path) -> None:
    batch = values(2)
    log = open_log(tmp_path, LogConfig(segment_bytes=len(batch), retention_ms=1000))
    for i in range(4):
        log.append_as_leader(values(2, timestamp=NOW + i * 1000), 0, NOW)
    assert [b for b, _ in list_segments(log.directory)] == [0, 2, 4, 6]
    # Segments 0 and 2 are old enough, but only the first lies wholly below the HW.
    assert log.delete_old_segments(NOW + 3500, high_watermark=3) == 1
    assert log.start_offset == 2
    assert log.delete_old_segments(NOW + 3500, high_watermark=8) == 2
    assert log.start_offset == 6 and log.end_offset == 8
    with pytest.raises(OffsetOutOfRange):
        log.read(5, 100, 8)


def test_retention_rolls_an_empty_segment_when_everything_goes(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(retention_ms=10))
    fill(log, 3)
    assert log.delete_old_segments(NOW + 1000, high_watermark=6) == 1
    assert (log.start_offset, log.end_offset, log.size_in_bytes) == (6, 6, 0)
    assert [b for b, _ in list_segments(log.directory)] == [6]
    log.append_as_leader(values(1), 1, NOW + 1000)
    log.close(flush=False)
    reopened = open_log(tmp_path, LogConfig(retention_ms=10))
    assert (reopened.start_offset, reopened.end_offset) == (6, 7)


def test_retention_by_size(tmp_path: Path) -> None:
    batch = values(2)
    log = open_log(tmp_path, LogConfig(segment_bytes=len(batch), retention_ms=-1,
                                       retention_bytes=len(batch) * 2))
    fill(log, 5)
    assert log.delete_old_segments(NOW, high_watermark=10) == 3
    assert log.size_in_bytes == len(batch) * 2 and log.start_offset == 6
    assert log.delete_old_segments(NOW, high_watermark=10) == 0


def test_delete_records_then_retention_deletes_segments_below_the_start(tmp_path: Path) -> None:
    batch = values(2)
    log = open_log(tmp_path, LogConfig(segment_bytes=len(batch), retention_ms=-1))
    fill(log, 4)
    log.advance_start_offset(5)
    assert log.start_offset == 5
    assert [b for b, _ in list_segments(log.directory)] == [4, 6]
    log.close()
    reopened = open_log(tmp_path, LogConfig(segment_bytes=len(batch), retention_ms=-1),
                        log_start_offset=5)
    assert reopened.start_offset == 5


# -- timestamps --------------------------------------------------------------------------------


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=200))
    log.append_as_leader(build_batch([Record(b"a", timestamp_ms=100),
                                      Record(b"b", timestamp_ms=300)], base_timestamp=100),
                         0, NOW)  # 0, 1
    log.append_as_leader(build_batch([Record(b"c", timestamp_ms=200),
                                      Record(b"d", timestamp_ms=900),
                                      Record(b"e", timestamp_ms=500)], base_timestamp=200),
                         0, NOW)  # 2, 3, 4
    log.append_as_leader(build_batch([Record(b"f", timestamp_ms=700)], base_timestamp=700),
                         0, NOW)  # 5
    assert log.offset_for_timestamp(50) == (0, 100)
    assert log.offset_for_timestamp(250) == (1, 300)
    assert log.offset_for_timestamp(600) == (3, 900)
    assert log.offset_for_timestamp(901) is None
    assert log.max_timestamp_offset() == (3, 900)
    assert log.max_timestamp_offset(2) == (1, 300)  # only below the HW


# -- flushing ----------------------------------------------------------------------------------


def test_flush_policy_by_messages_and_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(flush_messages=3, flush_ms=1000))
    due: list[PartitionLog] = []
    log.on_flush_due = due.append
    log.append_as_leader(values(2), 0, NOW)
    assert not log.flush_due(NOW) and due == []
    log.append_as_leader(values(1), 0, NOW)
    assert log.flush_due(NOW) and due == [log]
    job = log.begin_flush(NOW)
    assert job is not None
    job.run()
    log.complete_flush(job)
    assert log.flushed_offset == 3 and log.recovery_point == 3
    log.append_as_leader(values(1), 0, NOW)
    assert not log.flush_due(NOW + 999) and log.flush_due(NOW + 1000)


def test_default_policy_never_flushes_on_the_produce_path(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 50)
    assert not log.flush_due(NOW + 10**9)
    assert log.flushed_offset == 0


def test_truncation_while_a_flush_job_is_in_flight(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 3)
    job = log.begin_flush(NOW)
    assert job is not None
    log.truncate_to(2)  # the event loop cuts while the worker would sync
    fill(log, 1, epoch=2)
    job.run()
    log.complete_flush(job)
    # The job must not have raised the recovery point past the cut.
    assert log.recovery_point <= 2
    log.flush()
    assert log.recovery_point == 4


def test_delete_renames_the_directory_and_remove_deleted_removes_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    tombstone = log.delete()
    # The name is free at once (a recreated topic may take it); the data goes off the loop.
    assert not os.path.exists(log.directory) and tombstone.endswith("-delete")
    assert os.path.isdir(tombstone)
    remove_deleted(tombstone)
    assert not os.path.exists(tombstone)


def test_log_config_for_topic_resolves_overrides_synonyms_and_defaults() -> None:
    delta = MetadataDelta(EMPTY_IMAGE)
    records = [
        ConfigRecord(ConfigResourceType.BROKER, "", "log.roll.ms", "5000"),
        ConfigRecord(ConfigResourceType.BROKER, "", "log.flush.interval.messages", "10"),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "segment.ms", "7000"),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "message.timestamp.type",
                     "LogAppendTime"),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.bytes", "4096"),
    ]
    for offset, record in enumerate(records):
        delta.replay(record, offset, 1, NOW)
    image = delta.apply()
    orders = LogConfig.for_topic(image, "orders")
    assert orders.segment_ms == 7000 and orders.log_append_time
    assert orders.retention_bytes == 4096 and orders.flush_messages == 10
    other = LogConfig.for_topic(image, "other")
    assert other.segment_ms == 5000 and not other.log_append_time
    assert other == LogConfig(segment_ms=5000, flush_messages=10)


def test_a_failed_write_is_a_storage_error_and_poisons_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(1), 0, NOW)
    log._log.faults.disk_full = True  # injected: the next pwrite fails with ENOSPC
    with pytest.raises(AppendError) as info:
        log.append_as_leader(values(1), 0, NOW)
    assert info.value.code == Errors.KAFKA_STORAGE_ERROR
    log._log.faults.disk_full = False
    # The view may hold what the file lacks: nothing is served or appended any more.
    with pytest.raises(AppendError) as info:
        log.append_as_leader(values(1), 0, NOW)
    assert info.value.code == Errors.KAFKA_STORAGE_ERROR
    with pytest.raises(OSError):
        log.read(0, 100, 1)
    with pytest.raises(OSError):
        log.close()  # the final flush fails too, and says so; the files are closed anyway
    assert open_log(tmp_path).end_offset == 1  # what reached the file survives


# -- creation and epochs without fsync on the caller's thread -----------------------------------


class _Fsyncs:
    """Every fsync/fdatasync, by the path its descriptor names."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)

            def record(fd: int, real=real) -> None:  # type: ignore[no-untyped-def]
                self.paths.append(os.readlink(f"/proc/self/fd/{fd}"))
                real(fd)

            monkeypatch.setattr(os, name, record)


def test_creating_a_log_and_assigning_an_epoch_fsync_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = _Fsyncs(monkeypatch)
    log = open_log(tmp_path)
    log.assign_epoch(0, 0)
    log.assign_epoch(3, 0)
    assert fsyncs.paths == []
    assert log.metadata_unsynced
    # The flush job syncs the files, then the directory and the log dir that holds it.
    job = log.begin_flush(NOW)
    assert job is not None and job.segment_job is None
    job.run()
    log.complete_flush(job)
    directory = log.directory
    assert set(fsyncs.paths) == {
        os.path.join(directory, checkpoints.PARTITION_METADATA_FILE),
        os.path.join(directory, "recovery-point-offset-checkpoint"),
        os.path.join(directory, checkpoints.LEADER_EPOCH_FILE),
        directory, str(tmp_path),
    }
    assert fsyncs.paths[-2:] == [directory, str(tmp_path)]  # the directories last
    assert not log.metadata_unsynced and log.begin_flush(NOW) is None
    # A leader change: one file written, synced by the next job only.
    fsyncs.paths.clear()
    log.assign_epoch(4, 0)
    assert fsyncs.paths == [] and log.metadata_unsynced
    log.flush()
    assert fsyncs.paths == [os.path.join(directory, checkpoints.LEADER_EPOCH_FILE), directory]


def test_metadata_is_synced_before_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)
    fsyncs = _Fsyncs(monkeypatch)
    job = log.begin_flush(NOW)
    assert job is not None and job.segment_job is not None
    job.run()
    log.complete_flush(job)
    segment = list_segments(log.directory)[0][1]
    first_data = fsyncs.paths.index(segment)
    for name in (checkpoints.PARTITION_METADATA_FILE, checkpoints.LEADER_EPOCH_FILE,
                 "recovery-point-offset-checkpoint"):
        assert fsyncs.paths.index(os.path.join(log.directory, name)) < first_data
    assert fsyncs.paths.index(str(tmp_path)) < first_data
    assert log.flushed_offset == 2 and log.recovery_point == 2


def test_a_created_but_never_flushed_log_reopens(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.assign_epoch(2, 0)
    job = log.begin_flush(NOW)
    assert job is not None
    job.write_files()  # the flush job wrote the checkpoint, then kill -9 before any fsync:
    log.close(flush=False)  # files in the page cache, none synced
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 0 and reopened.epoch_entries() == [(2, 0)]
    assert reopened.metadata_unsynced  # still never synced: the next job does it
    reopened.close(flush=False)
    # A power loss before the first job: any of the files may be lost or empty.
    directory = reopened.directory
    for name in (checkpoints.PARTITION_METADATA_FILE, checkpoints.LEADER_EPOCH_FILE):
        with open(os.path.join(directory, name), "w"):
            pass
    os.unlink(os.path.join(directory, "recovery-point-offset-checkpoint"))
    again = open_log(tmp_path)
    assert again.end_offset == 0 and again.epoch_entries() == []
    assert checkpoints.read_partition_metadata(directory) == TOPIC_ID
    again.flush()
    again.close()
    assert open_log(tmp_path).recovery_point == 0


def test_unsynced_data_of_a_never_synced_log_is_cut_not_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)
    log.append_as_leader(values(2), 1, NOW)
    job = log.begin_flush(NOW)
    assert job is not None
    job.write_files()  # the checkpoint is written, nothing synced
    log.close(flush=False)
    # A power loss kept the segment's bytes but lost the never-synced recovery point, and
    # zeroed the first batch's page (not a torn-tail shape: recovery's strict case refuses it).
    os.unlink(os.path.join(log.directory, "recovery-point-offset-checkpoint"))
    segment = list_segments(log.directory)[0][1]
    with open(segment, "r+b") as file:
        file.write(b"\0" * 20)
    reopened = open_log(tmp_path)
    # The file's epoch 1 at offset 0 is kept as an epoch with no record yet.
    assert reopened.end_offset == 0 and reopened.epoch_entries() == [(1, 0)]


def test_reopen_after_epochs_assigned_without_fsync_is_consistent(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)  # 0-1
    log.append_as_leader(values(2), 3, NOW)  # 2-3
    log.assign_epoch(5, log.end_offset)  # leader again, nothing written yet
    job = log.begin_flush(NOW)  # the flush job writes the checkpoint...
    assert job is not None
    job.write_files()
    log.close(flush=False)  # ... and kill -9 comes before its fsync
    path = os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE)
    # The rename is in the page cache, so the epoch with no record survives.
    reopened = open_log(tmp_path)
    assert reopened.epoch_entries() == [(1, 0), (3, 2), (5, 4)]
    reopened.close(flush=False)
    # A power loss lost every write of the file: the batches still give their epochs.
    os.unlink(path)
    reopened = open_log(tmp_path)
    assert reopened.epoch_entries() == [(1, 0), (3, 2)] and reopened.latest_epoch == 3
    reopened.close(flush=False)
    # ... or kept an older file that lacks an epoch with records.
    checkpoints.write_leader_epochs(log.directory, [(1, 0)])
    assert open_log(tmp_path).epoch_entries() == [(1, 0), (3, 2)]


def test_a_lost_truncation_of_the_checkpoint_is_undone_on_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)  # 0-1
    log.append_as_leader(values(2), 2, NOW)  # 2-3
    log.append_as_leader(values(2), 3, NOW)  # 4-5
    log.flush()
    before = log.epoch_entries()
    log.truncate_to(2)
    assert log.epoch_entries() == [(1, 0)]
    log.flush()
    log.close()
    # A power loss kept the cut segment but not the checkpoint written after the cut.
    checkpoints.write_leader_epochs(log.directory, before)
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 2
    # Nothing past the log end comes back; an epoch starting at it is one with no record yet.
    assert all(start <= reopened.end_offset for _, start in reopened.epoch_entries())
    assert reopened.epoch_entries() == [(1, 0), (2, 2)]
    reopened.flush()
    with open(os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE)) as file:
        assert file.read() == "0\n2\n1 0\n2 2\n"
    # A follower told to truncate to its end drops it (KAFKA-10706), so it cannot keep
    # offering the leader the same diverging epoch.
    reopened.truncate_to(reopened.end_offset)
    assert reopened.epoch_entries() == [(1, 0)]


def test_the_appending_thread_writes_and_fsyncs_no_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path)
    log.flush()  # the creation's files are synced
    fsyncs = _Fsyncs(monkeypatch)
    renames: list[str] = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (renames.append(str(dst)),
                                                         real_replace(src, dst))[1])
    log.assign_epoch(2, 0)  # a new leader's epoch
    log.append_as_leader(values(2), 2, NOW)
    log.truncate_to(0)  # a follower cut back to its new leader's log, epoch 1 from 0
    log.append_as_follower(build_batch([b"x"], partition_leader_epoch=1), NOW)
    assert log.epoch_entries() == [(1, 0)]
    assert fsyncs.paths == [] and renames == []
    assert log.metadata_unsynced
    path = os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE)
    job = log.begin_flush(NOW)  # the worker thread's job writes it, then fsyncs it
    assert job is not None
    job.run()
    log.complete_flush(job)
    assert [p for p in renames if p.endswith(checkpoints.LEADER_EPOCH_FILE)] == [path]
    assert fsyncs.paths.index(path) < fsyncs.paths.index(list_segments(log.directory)[0][1])
    assert checkpoints.read_leader_epochs(log.directory) == log.epoch_entries()


def test_a_checkpoint_lagging_a_truncation_is_not_trusted_on_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)  # 0-1
    log.assign_epoch(3, 2)  # leader in epoch 3, nothing written
    log.flush()  # the file holds (1, 0), (3, 2)
    # A follower again: cut back to its leader's log, which continues in epoch 2 from 2.
    log.truncate_to(2)
    log.append_as_follower(build_batch([b"x", b"y"], base_offset=2, partition_leader_epoch=2),
                           NOW)
    assert log.epoch_entries() == [(1, 0), (2, 2)]
    log.close(flush=False)  # kill -9 before the next flush job wrote the checkpoint
    assert checkpoints.read_leader_epochs(log.directory) == [(1, 0), (3, 2)]
    reopened = open_log(tmp_path)
    # Epoch 3 starts below the log end with epoch-2 batches after it: stale, not taken.
    assert reopened.epoch_entries() == [(1, 0), (2, 2)]
    assert reopened.end_offset_for_epoch(2) == (2, 4)
    reopened.close(flush=False)
    # A torn or missing file: the batches alone.
    with open(os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE), "w") as file:
        file.write("0\n2\n1 0\n3")
    assert open_log(tmp_path).epoch_entries() == [(1, 0), (2, 2)]
    os.unlink(os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE))
    assert open_log(tmp_path).epoch_entries() == [(1, 0), (2, 2)]


def test_truncate_to_the_end_drops_an_empty_epoch_kafka_10706(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(values(2), 1, NOW)
    log.assign_epoch(2, 2)  # leader for a moment, wrote nothing
    log.truncate_to(5)  # past the end: nothing to drop
    assert log.epoch_entries() == [(1, 0), (2, 2)]
    log.truncate_to(2)
    assert log.epoch_entries() == [(1, 0)] and log.end_offset == 2


def test_the_recovery_point_written_at_creation_is_the_one_segmented_log_reads(
    tmp_path: Path,
) -> None:
    from kraft.log.recovery import read_recovery_point

    log = open_log(tmp_path)
    assert read_recovery_point(log.directory) == 0 and log.recovery_point == 0
