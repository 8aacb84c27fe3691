"""The log cleaner (broker/log/cleaner.py, cleaner_core.py, cleaner_swap.py) on real partition
logs in temporary directories: the latest record per key, tombstones and their delete
horizon, offsets kept across removed batches (reads and follower fetches there), the crash-safe
swap, idempotent producer state, the dirty ratio and the lag rules, the HW bound, the
checkpoint, the dedupe buffer bound and the configs."""

from __future__ import annotations

import asyncio
import errno
import gzip
import os
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from broker.compression import GZIP, LZ4, NAMES, SNAPPY, ZSTD, assemble_batch, batch_records
from broker.log import cleaner as cleaner_module
from broker.log import cleaner_metrics, cleaner_swap
from broker.log.cleaner import CLEANER_CHECKPOINT_FILE, CleanerConfig, LogCleaner
from broker.log.cleaner_core import (
    OFFSET_MAP_ENTRY_BYTES,
    CleanRules,
    SegmentFile,
    build_offset_map,
    clean_group,
    is_filler,
    key_digest,
    map_capacity,
)
from broker.log.config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import AppendError, PartitionLog
from broker.records import (
    Record,
    build_batch,
    compute_crc,
    parse_header,
    scan_batches,
)
from kraft.errors import Errors
from metadata.config_keys import validate_topic_configs
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import ConfigRecord, ConfigResourceType

TOPIC_ID = "8d4c3b6a-6f64-4b43-9a59-3c5e3a4f2a11"
NOW = 1_700_000_000_000
TP = ("orders", 0)
# One keyed single-record batch per segment: a batch is ~76 bytes.
COMPACT = LogConfig(segment_bytes=100, cleanup_policy=("compact",))


def open_log(path: Path, config: LogConfig = COMPACT) -> PartitionLog:
    return PartitionLog.open(str(path / "orders-0"), TOPIC_ID, config, now_ms=NOW)


def keyed(key: str | None, value: str | None, timestamp: int = NOW, **kwargs: int) -> bytes:
    return build_batch([Record(None if value is None else value.encode(),
                               None if key is None else key.encode())],
                       base_timestamp=timestamp, **kwargs)


def append(log: PartitionLog, *pairs: tuple[str | None, str | None], epoch: int = 0,
           timestamp: int = NOW) -> None:
    for key, value in pairs:
        log.append_as_leader(keyed(key, value, timestamp), epoch, NOW)


def records(log: PartitionLog, start: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    data = log.read(start, 1 << 30, log.end_offset)
    out = []
    for frame in scan_batches(data):
        blob = data[frame.position : frame.position + frame.size]
        out += [(r.offset, r.key, r.value) for r in batch_records(parse_header(blob), blob)]
    return [item for item in out if item[0] >= start]


def compressed(batch: bytes, codec: int) -> bytes:
    """A plain batch with its records compressed in `codec`."""
    h = parse_header(batch)
    return assemble_batch(h.base_offset, h.partition_leader_epoch, h.attributes | codec,
                          h.last_offset_delta, h.base_timestamp, h.max_timestamp,
                          h.producer_id, h.producer_epoch, h.base_sequence, h.records_count,
                          batch[61:])


def headers(log: PartitionLog, start: int = 0) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of every batch read from `start`."""
    return headers_of(log.read(start, 1 << 30, log.end_offset))


def cleaner(log: PartitionLog, hw: int | None = None,
            dedupe_buffer_size: int = 1 << 27) -> LogCleaner:
    return LogCleaner(CleanerConfig(dedupe_buffer_size=dedupe_buffer_size),
                      [os.path.dirname(log.directory)],
                      lambda: {TP: log}, lambda: {TP: log.end_offset if hw is None else hw},
                      lambda tp: False)


def clean(c: LogCleaner, now: int = NOW) -> int:
    return asyncio.run(c.clean_round(now_ms=now))


# -- the latest record per key -----------------------------------------------------------------


def test_the_latest_record_per_key_stays_and_offsets_are_kept(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("b", "1"), ("a", "2"), ("c", "1"), ("b", "2"), ("a", "3"),
           ("d", "active"))
    assert log.segment_count == 7
    c = cleaner(log)
    assert clean(c) == 1
    assert records(log) == [(3, b"c", b"1"), (4, b"b", b"2"), (5, b"a", b"3"),
                            (6, b"d", b"active")]
    assert log.end_offset == 7 and log.start_offset == 0
    # The removed batches' offsets are held by fillers: empty batches, no producer.
    assert headers(log)[:4] == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 1)]
    assert c.stats.passes == 1 and c.stats.records_removed == 3
    assert c.stats.bytes_written < c.stats.bytes_read and c.stats.last_clean_ms > 0
    assert c.checkpoint(TP) == 6
    # Nothing is left to clean: the next round finds the log clean.
    assert clean(c) == 0
    log.close()
    reopened = open_log(tmp_path)
    assert records(reopened) == [(3, b"c", b"1"), (4, b"b", b"2"), (5, b"a", b"3"),
                                 (6, b"d", b"active")]
    reopened.close()


def test_a_fetch_inside_a_removed_range_returns_the_next_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("b", "1"), ("a", "3"), ("z", "active"))
    clean(cleaner(log))
    # Offset 1 was removed: the read starts at the filler holding it, then the next records.
    assert headers(log, 1)[0] == (1, 1, 0)
    assert records(log, 1) == [(2, b"b", b"1"), (3, b"a", b"3"), (4, b"z", b"active")]
    assert records(log, 3) == [(3, b"a", b"3"), (4, b"z", b"active")]
    log.close()


def test_a_follower_replicates_a_cleaned_range(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    append(leader, ("a", "1"), ("b", "1"), ("a", "2"), ("b", "2"), ("c", "1"), epoch=3)
    clean(cleaner(leader))
    follower = open_log(tmp_path / "follower")
    offset = 0
    while offset < leader.end_offset:  # one batch per fetch, as a slow follower fetches
        data = leader.read(offset, 1, leader.end_offset)
        offset += follower.append_as_follower(data, NOW)
    assert follower.end_offset == leader.end_offset == 5
    assert records(follower) == records(leader) == [(2, b"a", b"2"), (3, b"b", b"2"),
                                                    (4, b"c", b"1")]
    assert follower.epoch_entries() == leader.epoch_entries() == [(3, 0)]
    leader.close()
    follower.close()


def test_keyless_records_are_refused_by_a_compacted_topic(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(AppendError) as refused:
        log.append_as_leader(keyed(None, "x"), 0, NOW)
    assert refused.value.code == Errors.INVALID_RECORD
    assert "Compacted topic cannot accept message without key" in refused.value.message
    assert "orders-0" in refused.value.message
    assert log.end_offset == 0
    log.close()
    plain = PartitionLog.open(str(tmp_path / "plain-0"), TOPIC_ID, LogConfig(), now_ms=NOW)
    plain.append_as_leader(keyed(None, "x"), 0, NOW)
    assert plain.end_offset == 1
    plain.close()


def test_the_cleaner_drops_keyless_records_a_follower_was_sent(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = keyed(None, "x")
    follower_batch = bytearray(data)
    follower_batch[12:16] = (0).to_bytes(4, "big")
    log.append_as_follower(bytes(follower_batch), NOW)
    append(log, ("a", "1"), ("b", "active"))
    clean(cleaner(log))
    assert records(log) == [(1, b"a", b"1"), (2, b"b", b"active")]
    log.close()


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=NAMES.get)
def test_compressed_batches_are_cleaned_and_keep_their_codec(tmp_path: Path,
                                                             codec: int) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=1000, cleanup_policy=("compact",)))
    batch = build_batch([Record(b"1", b"a"), Record(b"1", b"b"), Record(b"2", b"a")],
                        base_timestamp=NOW)
    log.append_as_leader(compressed(batch, codec), 0, NOW)
    log._log.roll()  # the batch's segment must be below the active one
    append(log, ("z", "active"))
    assert clean(cleaner(log)) == 1
    first = headers(log)[0]
    assert first == (0, 2, 2)  # base and last offset kept, one record gone
    assert parse_header(log.read(0, 1 << 20, log.end_offset)).compression == codec
    assert records(log) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"z", b"active")]
    log.close()


# -- tombstones --------------------------------------------------------------------------------


def test_tombstones_stay_until_delete_retention_after_the_first_cleaning(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=100, cleanup_policy=("compact",), delete_retention_ms=1000)
    log = open_log(tmp_path, config)
    append(log, ("a", "1"), ("b", "1"), ("a", None), ("z", "active"))
    c = cleaner(log)
    assert clean(c, NOW) == 1
    # The tombstone stays (and carries its delete horizon, KIP-534); what it deletes goes.
    assert records(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"z", b"active")]
    tombstone = parse_header(log.read(2, 1 << 20, 3))
    assert tombstone.attributes & 0x40 and tombstone.base_timestamp == NOW + 1000
    # Before the horizon a pass keeps it; at the horizon the log is due again, it goes.
    assert clean(c, NOW + 999) == 0
    assert clean(c, NOW + 1000) == 1
    assert records(log) == [(1, b"b", b"1"), (3, b"z", b"active")]
    assert clean(c, NOW + 5000) == 0  # no tombstone left: nothing due
    log.close()


# -- the swap ----------------------------------------------------------------------------------


def _cleaned_file(log: PartitionLog) -> tuple[str, list[str]]:
    """A cleaned file for the log's first three segments, written as the cleaner writes it."""
    views = log.segment_views()[:3]
    files = [SegmentFile(v.base_offset, v.end_offset, v.size, v.path) for v in views]
    out = cleaner_swap.cleaned_path(log.directory, views[0].base_offset)
    clean_group(files, CleanRules({key_digest(b"a"): 2}, NOW, 0), out)
    return out, [v.path for v in views]


@pytest.mark.parametrize("deleted", [0, 1, 3])
def test_a_crash_in_the_middle_of_a_swap_finishes_it(tmp_path: Path, deleted: int) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("a", "3"), ("z", "active"))
    cleaned, old = _cleaned_file(log)
    swap = cleaner_swap.commit(cleaned)  # the commit point
    for path in old[:deleted]:  # the crash comes while the old segments go
        os.unlink(path)
    log.close(flush=False)
    reopened = open_log(tmp_path)
    assert not os.path.exists(swap)
    assert records(reopened) == [(2, b"a", b"3"), (3, b"z", b"active")]
    assert reopened.end_offset == 4
    reopened.close()


def test_a_crash_before_the_swap_keeps_the_old_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("a", "3"), ("z", "active"))
    cleaned, _ = _cleaned_file(log)
    log.close(flush=False)
    reopened = open_log(tmp_path)
    assert not os.path.exists(cleaned)
    assert [offset for offset, _, _ in records(reopened)] == [0, 1, 2, 3]
    reopened.close()


def test_a_cleaning_of_segments_that_changed_is_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("a", "3"), ("z", "active"))
    c = cleaner(log)
    plan = c.plans(NOW)[0]

    cleaned = c._clean_blocking(plan)  # the worker thread's part
    assert cleaned is not None and len(cleaned.swaps) == 3
    log.truncate_to(2)  # a follower truncating while its cleaning ran
    assert asyncio.run(c._swap(plan, cleaned, 0.0)) == 0
    assert c.stats.aborted == 1
    assert [offset for offset, _, _ in records(log)] == [0, 1]
    assert not [name for name in os.listdir(log.directory) if ".cleaned" in name]
    log.close()


def test_a_cleaning_of_segments_deleted_before_it_read_them_stops(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("a", "3"), ("z", "active"))
    c = cleaner(log)
    plan = c.plans(NOW)[0]
    log.truncate_to(1)  # segments 1.. are gone before the worker thread reads them
    assert asyncio.run(c._clean(plan)) == 0
    assert c.stats.aborted == 1 and c.stats.passes == 0
    assert [offset for offset, _, _ in records(log)] == [0]
    assert not [name for name in os.listdir(log.directory) if ".cleaned" in name]
    log.close()


# -- idempotent producers ----------------------------------------------------------------------


def test_a_producers_last_batch_stays_so_its_sequence_survives(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for seq in range(3):
        log.append_as_leader(build_batch([Record(b"p%d" % seq, b"a")], base_timestamp=NOW,
                                         producer_id=7, producer_epoch=0, base_sequence=seq),
                             0, NOW)
    append(log, ("a", "plain"), ("z", "active"))  # supersedes all of producer 7's records
    clean(cleaner(log))
    assert records(log) == [(3, b"a", b"plain"), (4, b"z", b"active")]
    kept = parse_header(log.read(2, 1 << 20, 3))
    assert (kept.base_offset, kept.records_count, kept.producer_id, kept.base_sequence) == (
        2, 0, 7, 2)
    assert is_filler(parse_header(log.read(0, 1 << 20, 2)))
    log.close()
    reopened = open_log(tmp_path)
    # A retry of the last batch is a duplicate, the next sequence is accepted.
    retry = reopened.append_as_leader(build_batch(
        [Record(b"p2", b"a")], base_timestamp=NOW, producer_id=7, producer_epoch=0,
        base_sequence=2), 0, NOW)
    assert retry.duplicate and retry.base_offset == 2
    nxt = reopened.append_as_leader(build_batch(
        [Record(b"p3", b"a")], base_timestamp=NOW, producer_id=7, producer_epoch=0,
        base_sequence=3), 0, NOW)
    assert not nxt.duplicate and nxt.base_offset == 5
    reopened.close()


# -- what is cleanable, and when ---------------------------------------------------------------


def test_nothing_at_or_above_the_high_watermark_is_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("a", "3"), ("a", "4"), ("z", "active"))
    clean(cleaner(log, hw=2))
    # Only segments wholly below the HW were cleaned: offset 0's record went (1 is newer).
    assert [offset for offset, _, _ in records(log)] == [1, 2, 3, 4]
    log.close()


def test_the_dirty_ratio_decides(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("b", "1"), ("c", "1"), ("d", "1"), ("a", "2"), ("z", "active"))
    c = cleaner(log)
    assert clean(c) == 1  # never cleaned: all dirty, ratio 1
    append(log, ("b", "2"), ("y", "active"))  # two dirty segments beside five clean ones
    plan = c.plan(TP, log, log.end_offset, NOW)
    assert plan is None
    strict = LogConfig(segment_bytes=100, cleanup_policy=("compact",),
                       min_cleanable_dirty_ratio=0.1)
    log.update_config(strict)
    plan = c.plan(TP, log, log.end_offset, NOW)
    assert plan is not None and 0.1 <= plan.dirty_ratio < 0.5
    assert clean(c) == 1
    assert [key for _, key, _ in records(log)] == [b"c", b"d", b"a", b"z", b"b", b"y"]
    log.close()


def test_min_compaction_lag_keeps_young_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=100, cleanup_policy=("compact",),
                       min_compaction_lag_ms=60_000)
    log = open_log(tmp_path, config)
    append(log, ("a", "1"), timestamp=NOW - 120_000)
    append(log, ("a", "2"), ("a", "3"), ("z", "active"), timestamp=NOW - 1000)
    c = cleaner(log)
    plan = c.plan(TP, log, log.end_offset, NOW)
    assert plan is not None and [v.base_offset for v in plan.segments] == [0]
    clean(c)
    assert [offset for offset, _, _ in records(log)] == [0, 1, 2, 3]  # a@0 alone: kept
    assert c.plan(TP, log, log.end_offset, NOW + 120_000) is not None
    clean(c, NOW + 120_000)
    assert [offset for offset, _, _ in records(log)] == [2, 3]
    log.close()


def test_max_compaction_lag_forces_a_cleaning(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=100, cleanup_policy=("compact",),
                       min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000)
    log = open_log(tmp_path, config)
    append(log, ("a", "1"), ("b", "1"), ("z", "active"))
    c = cleaner(log)
    assert clean(c) == 1  # all dirty: ratio 1 reaches 1.0
    append(log, ("a", "2"), ("y", "active"))
    assert c.plan(TP, log, log.end_offset, NOW) is None  # ratio < 1, within the lag
    assert c.plan(TP, log, log.end_offset, NOW + 60_001) is not None
    log.close()


def test_a_delete_only_log_is_not_cleaned_and_compact_only_is_not_deleted(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=100))
    append(log, ("a", "1"), ("a", "2"), ("z", "active"))
    assert cleaner(log).plans(NOW) == []
    log.close()
    compact = PartitionLog.open(str(tmp_path / "c-0"), TOPIC_ID, LogConfig(
        segment_bytes=100, cleanup_policy=("compact",), retention_ms=1), now_ms=NOW)
    append(compact, ("a", "1"), ("a", "2"), ("z", "active"))
    assert compact.delete_old_segments(NOW + 10_000, compact.end_offset) == 0
    compact.close()


def test_small_segments_are_grouped_up_to_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("b", "1"), ("c", "1"), ("d", "1"), ("z", "active"))
    log.update_config(LogConfig(segment_bytes=1000, cleanup_policy=("compact",)))
    clean(cleaner(log))
    assert log.segment_count == 2  # four cleaned segments in one, and the active one
    assert [v.base_offset for v in log.segment_views()] == [0, 4]
    log.close()


def test_the_checkpoint_survives_a_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("z", "active"))
    clean(cleaner(log))
    path = os.path.join(tmp_path, CLEANER_CHECKPOINT_FILE)
    assert os.path.exists(path)
    again = cleaner(log)
    assert again.checkpoint(TP) == 2
    assert again.plan(TP, log, log.end_offset, NOW) is None  # nothing dirty
    log.close()


def test_the_dedupe_buffer_bounds_the_offset_map(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=200, cleanup_policy=("compact",)))
    for key in "abcdef":  # two single-record batches per segment
        append(log, (key, "1"))
    append(log, ("a", "2"), ("z", "active"))
    assert map_capacity(380, 1) == 2  # 168 bytes a key, filled to 90 %
    c = cleaner(log, dedupe_buffer_size=380)
    assert clean(c) == 1
    assert c.checkpoint(TP) == 2  # the map held one segment's two keys: cleaned that far
    assert clean(c) == 1  # the next round goes on from there
    assert c.checkpoint(TP) == 4
    log.close()


def test_a_dedupe_buffer_too_small_for_a_segment_marks_the_log_uncleanable(
        tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"dedupe\.buffer\.size"):
        CleanerConfig(dedupe_buffer_size=30)
    log = open_log(tmp_path, LogConfig(segment_bytes=300, cleanup_policy=("compact",)))
    for key in "abc":  # three keys in the first segment, the map holds two
        append(log, (key, "1"))
    append(log, ("a", "2"), ("z", "active"))
    c = cleaner(log, dedupe_buffer_size=380)
    assert clean(c) == 0
    assert c.plans(NOW) == []  # marked uncleanable: not tried again
    assert [offset for offset, _, _ in records(log)] == [0, 1, 2, 3, 4]
    log.close()


# -- configs -----------------------------------------------------------------------------------


def test_topic_configs_resolve_and_validate() -> None:
    delta = MetadataDelta(EMPTY_IMAGE)
    for name, value in [("cleanup.policy", "compact,delete"),
                        ("min.cleanable.dirty.ratio", "0.25"), ("delete.retention.ms", "5"),
                        ("min.compaction.lag.ms", "7"), ("max.compaction.lag.ms", "9")]:
        delta.replay(ConfigRecord(ConfigResourceType.TOPIC, "orders", name, value), 1, 1, NOW)
    config = LogConfig.for_topic(delta.apply(), "orders")
    assert config.cleanup_policy == ("compact", "delete") and config.compact and config.delete
    assert (config.min_cleanable_dirty_ratio, config.delete_retention_ms,
            config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (0.25, 5, 7, 9)
    default = LogConfig.for_topic(EMPTY_IMAGE, "orders")
    assert default.cleanup_policy == ("delete",) and not default.compact
    assert default.min_cleanable_dirty_ratio == 0.5 and default.delete_retention_ms == 86400000
    error = validate_topic_configs({"cleanup.policy": "compact,shred"})
    assert error is not None and error.code == Errors.INVALID_CONFIG
    assert "String must be one of: compact, delete" in error.message
    error = validate_topic_configs({"min.cleanable.dirty.ratio": "1.5"})
    assert error is not None and "Value must be no more than 1" in error.message
    error = validate_topic_configs({"min.cleanable.dirty.ratio": "half"})
    assert error is not None and "DOUBLE" in error.message
    error = validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert error is not None and error.code == Errors.INVALID_CONFIG
    assert error.message == ("conflict topic config setting min.compaction.lag.ms (10) > "
                             "max.compaction.lag.ms (5)")
    assert validate_topic_configs({"min.compaction.lag.ms": "10"}) is None


def test_the_metrics_report_the_cleaners_work(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    log = open_log(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("z", "active"))
    c = cleaner(log)
    cleaner_metrics.register(registry, c)
    assert registry.get_sample_value("kraft_broker_log_cleaner_cleanings_total") == 0
    clean(c)
    assert registry.get_sample_value("kraft_broker_log_cleaner_cleanings_total") == 1
    assert registry.get_sample_value("kraft_broker_log_cleaner_removed_records_total") == 1
    read = registry.get_sample_value("kraft_broker_log_cleaner_read_bytes_total")
    written = registry.get_sample_value("kraft_broker_log_cleaner_written_bytes_total")
    assert read is not None and written is not None and 0 < written < read
    last = registry.get_sample_value("kraft_broker_log_cleaner_last_clean_timestamp_seconds")
    assert last is not None and last > NOW / 1000
    log.close()


# -- in the log manager ------------------------------------------------------------------------


def manager_with_log(tmp_path: Path, hws: dict[tuple[str, int], int],
                     backoff_ms: int = 3_600_000) -> tuple[LogManager, PartitionLog]:
    manager = LogManager([str(tmp_path)], lambda: hws,
                         cleaner=CleanerConfig(backoff_ms=backoff_ms))
    log = manager.get_or_create("orders", 0, TOPIC_ID, COMPACT)
    append(log, ("a", "1"), ("a", "2"), ("z", "active"))
    hws[TP] = log.end_offset
    return manager, log


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    """Poll `condition` on the event loop until it holds (the background task's work)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_the_log_managers_task_runs_the_cleaner_and_close_stops_it(tmp_path: Path) -> None:
    hws: dict[tuple[str, int], int] = {}
    manager, _ = manager_with_log(tmp_path, hws)

    async def run() -> None:
        manager.start()
        manager.cleaner.wake()  # instead of the hour's backoff
        await until(lambda: manager.cleaner.stats.passes == 1, "a cleaning")
        await manager.close()

    asyncio.run(run())
    reopened = LogManager([str(tmp_path)], lambda: {})
    again = reopened.get("orders", 0)
    assert again is not None and again.end_offset == 3
    assert [offset for offset, _, _ in records(again)] == [1, 2]
    assert reopened.cleaner.checkpoint(TP) == 2
    reopened.close_now()


def test_a_failed_swap_takes_the_log_dir_offline(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    hws: dict[tuple[str, int], int] = {}
    manager, _ = manager_with_log(tmp_path, hws)

    def failing_install(swap: str, old_paths: list[str]) -> None:
        raise OSError(errno.EIO, "Input/output error (injected)")

    monkeypatch.setattr(cleaner_swap, "install", failing_install)
    assert asyncio.run(manager.cleaner.clean_round()) == 0
    assert str(tmp_path) in manager.offline_dirs
    assert manager.cleaner.plans(NOW) == []  # an offline dir's logs are not cleaned
    monkeypatch.undo()
    manager.close_now()
    # The swap was committed before the failure: the next start finishes it.
    reopened = LogManager([str(tmp_path)], lambda: {})
    again = reopened.get("orders", 0)
    assert again is not None and [offset for offset, _, _ in records(again)] == [1, 2]
    reopened.close_now()


def test_a_flush_waiter_is_answered_after_a_swap(tmp_path: Path) -> None:
    hws: dict[tuple[str, int], int] = {}
    manager, log = manager_with_log(tmp_path, hws)

    async def run() -> None:
        waiter = asyncio.ensure_future(manager.wait_flushed("orders", 0, log.end_offset))
        await asyncio.sleep(0)  # one loop turn: the task starts and registers (not a timing
        # wait; the manager is not started, so no flush round can answer it)
        assert not waiter.done()
        assert await manager.cleaner.clean_round() == 1
        assert waiter.done()  # reopening the files synced them: answered at the swap
        await waiter

    asyncio.run(run())
    manager.close_now()


def test_a_lagging_follower_inside_a_merged_filler_fetches_from_its_end(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, cleanup_policy=("compact",))
    leader = open_log(tmp_path / "leader", config)
    append(leader, ("a", "1"), ("a", "2"), ("a", "3"), ("a", "4"), ("b", "1"), ("a", "5"))
    follower = open_log(tmp_path / "follower", config)
    follower.append_as_follower(leader.read(0, 1, 2), NOW)  # offsets 0 and 1, as sent
    follower.append_as_follower(leader.read(1, 1, 2), NOW)
    assert follower.end_offset == 2
    leader._log.roll()  # the six batches below the active segment
    append(leader, ("z", "active"))
    clean(cleaner(leader))
    assert headers(leader)[0] == (0, 3, 0)  # one filler for the four removed batches
    data = leader.read(follower.end_offset, 1 << 20, leader.end_offset)
    assert headers_of(data)[0] == (2, 3, 0)  # served from the follower's end
    follower.append_as_follower(data, NOW)
    assert follower.end_offset == leader.end_offset == 7
    assert records(follower, 2) == records(leader) == [(4, b"b", b"1"), (5, b"a", b"5"),
                                                       (6, b"z", b"active")]
    leader.close()
    follower.close()


def headers_of(data: bytes) -> list[tuple[int, int, int]]:
    out = []
    for frame in scan_batches(data):
        header = parse_header(data, frame.position)
        out.append((header.base_offset, header.last_offset, header.records_count))
    return out


def test_a_truncation_below_the_checkpoint_makes_the_rest_dirty(tmp_path: Path) -> None:
    hws: dict[tuple[str, int], int] = {}
    manager, log = manager_with_log(tmp_path, hws)
    append(log, ("b", "1"), ("y", "active"))
    hws[TP] = log.end_offset
    assert asyncio.run(manager.cleaner.clean_round()) == 1
    assert manager.cleaner.checkpoint(TP) == 4
    log.truncate_to(3)  # a follower cut back to its new leader's log
    assert manager.cleaner.checkpoint(TP) == 3
    log.truncate_fully_and_start_at(2)
    assert manager.cleaner.checkpoint(TP) == 2
    manager.close_now()


# -- the rules together, on random histories ---------------------------------------------------

_STEP = st.one_of(
    st.tuples(st.just("put"), st.sampled_from("abcde"), st.integers(0, 9)),
    st.tuples(st.just("delete"), st.sampled_from("abcde"), st.just(0)),
    st.tuples(st.just("roll"), st.just(""), st.just(0)),
    st.tuples(st.just("clean"), st.just(""), st.just(0)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=40))
def test_random_histories_keep_every_latest_record_and_nothing_else_moves(
        steps: list[tuple[str, str, int]]) -> None:
    """Whatever the interleaving of writes, rolls and cleanings: the offsets and the log end
    never move, every record read is the one written at its offset, every key's latest record
    stays (tombstones included: delete.retention.ms is long), each key appears once below the
    cleaner checkpoint, and a new follower replicating the cleaned log reads the same."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        config = LogConfig(segment_bytes=400, cleanup_policy=("compact",),
                           min_cleanable_dirty_ratio=0.0)
        log = open_log(root / "leader", config)
        c = cleaner(log)
        written: dict[int, tuple[bytes, bytes | None]] = {}
        latest: dict[bytes, int] = {}
        for kind, key, value in steps:
            if kind in ("put", "delete"):
                offset = log.end_offset
                payload = None if kind == "delete" else f"{key}{value}"
                append(log, (key, payload))
                written[offset] = (key.encode(), None if payload is None else payload.encode())
                latest[key.encode()] = offset
            elif kind == "roll" and log.end_offset > 0:
                log._log.roll()
            elif kind == "clean":
                clean(c)
        clean(c)
        assert log.end_offset == len(written)
        kept = records(log)
        assert [offset for offset, _, _ in kept] == sorted({o for o, _, _ in kept})
        for offset, stored_key, stored_value in kept:
            assert written[offset] == (stored_key, stored_value)
        offsets = {offset for offset, _, _ in kept}
        assert set(latest.values()) <= offsets
        # With a dirty ratio of 0 the last pass cleaned all but the active segment.
        views = log.segment_views()
        active = views[-1].base_offset if views else 0
        assert c.checkpoint(TP) == (active if len(views) > 1 else None)
        below = [key for offset, key, _ in kept if offset < active]
        assert len(below) == len(set(below))
        follower = open_log(root / "follower", config)
        while follower.end_offset < log.end_offset:
            follower.append_as_follower(
                log.read(follower.end_offset, 300, log.end_offset), NOW)
        assert records(follower) == kept
        log.close()
        follower.close()


# -- tombstones behind compressed batches ----------------------------------------------------


@pytest.mark.parametrize("codec", [SNAPPY, LZ4, ZSTD], ids=NAMES.get)
def test_a_tombstone_behind_a_compressed_batch_goes_at_its_horizon(tmp_path: Path,
                                                                   codec: int) -> None:
    """A key's older value inside an lz4 (snappy, zstd) batch, then its tombstone: the cleaner
    reads the batch, drops the value, and drops the tombstone at its delete horizon (before
    every codec was read, such a batch was kept whole and the tombstone stayed for good)."""
    # One batch per segment (snappy's xerial header makes its batch 102 bytes).
    config = LogConfig(segment_bytes=110, cleanup_policy=("compact",), delete_retention_ms=1000)
    log = open_log(tmp_path, config)
    log.append_as_leader(compressed(build_batch([Record(b"v1", b"K"), Record(b"1", b"J")],
                                                base_timestamp=NOW), codec), 0, NOW)
    append(log, ("K", None), ("x", "1"), ("y", "active"))
    c = cleaner(log)
    assert clean(c) == 1  # K's value goes, its tombstone gets a delete horizon
    assert records(log) == [(1, b"J", b"1"), (2, b"K", None), (3, b"x", b"1"),
                            (4, b"y", b"active")]
    assert parse_header(log.read(0, 1 << 20, log.end_offset)).compression == codec
    append(log, ("w", "active"))
    assert clean(c, NOW + 1000) == 1  # the horizon made the log due
    assert records(log) == [(1, b"J", b"1"), (3, b"x", b"1"), (4, b"y", b"active"),
                            (5, b"w", b"active")]
    assert c.plans(NOW + 100_000) == []
    log.close()


# -- segments cut while being cleaned ----------------------------------------------------------


def test_a_segment_cut_while_being_read_is_an_error_not_a_sigbus(tmp_path: Path) -> None:
    """A follower's truncation may cut a segment the cleaner reads: the read ends in an
    error. In a child process: a SIGBUS (a mapped read) would kill the test runner."""
    code = f"""
import os
from pathlib import Path
from broker.log.cleaner_core import SegmentFile, read_batches
from broker.log.config import LogConfig
from kraft.log.base import CorruptRecordError
from tests.unit.test_log_cleaner import append, open_log
log = open_log(Path({str(tmp_path)!r}), LogConfig(segment_bytes=1 << 23,
                                                   cleanup_policy=("compact",)))
append(log, *[("k%d" % i, "v" * 1000) for i in range(3000)])  # 3 MB: more than one buffer
[view] = log.segment_views()
log.close()
batches = read_batches(SegmentFile(view.base_offset, view.end_offset, view.size, view.path))
next(batches)
os.truncate(view.path, 100)
try:
    print("read", sum(1 for _ in batches))
except CorruptRecordError as exc:
    print("error:", exc)
"""
    child = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    assert "error:" in child.stdout and "cut while being cleaned" in child.stdout


def test_a_truncation_during_a_cleaning_aborts_the_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",)))
    append(log, *[(f"k{i % 50}", "v" * 500) for i in range(3000)])
    log._log.roll()
    append(log, ("z", "active"))
    c = cleaner(log)
    real = build_offset_map

    def truncating(files: list[SegmentFile], start: int, capacity: int,
                   *aborted: Any) -> tuple[dict[bytes, int], int]:
        monkeypatch.setattr(cleaner_module, "build_offset_map", real)
        log.truncate_to(100)  # an unclean election: the follower cuts its log meanwhile
        c.truncated(TP, 100)
        return real(files, start, capacity, *aborted)

    monkeypatch.setattr(cleaner_module, "build_offset_map", truncating)
    assert clean(c) == 0
    assert c.stats.aborted == 1 and c.uncleanable() == frozenset()
    assert not [name for name in os.listdir(log.directory) if ".cleaned" in name]
    append(log, ("a", "1"), ("z", "active"))
    log._log.roll()
    append(log, ("z", "active"))
    assert clean(c) == 1  # the next round cleans the log as it is now
    assert log.end_offset == 103
    log.close()


# -- one log that cannot be cleaned ------------------------------------------------------------


def _bad_gzip_body(kind: str) -> bytes:
    inflated = gzip.compress(b"\x00" * 200)
    if kind == "not gzip":
        return b"not a gzip stream"  # BadGzipFile (an OSError)
    if kind == "cut":
        return inflated[:-12]  # EOFError
    broken = bytearray(inflated)
    broken[10:20] = b"\xff" * 10  # zlib.error: invalid deflate block
    return bytes(broken)


@pytest.mark.parametrize("kind", ["not gzip", "cut", "bad deflate"])
def test_a_log_that_cannot_be_cleaned_does_not_starve_the_others(
        tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    delete = LogConfig(segment_bytes=100, cleanup_policy=("delete",))
    broken = PartitionLog.open(str(tmp_path / "broken-0"), TOPIC_ID, delete, now_ms=NOW)
    good = PartitionLog.open(str(tmp_path / "good-0"), TOPIC_ID, COMPACT, now_ms=NOW)
    # A gzip batch whose body does not inflate: a delete-policy topic takes it as it is.
    raw = bytearray(build_batch([Record(b"v", b"k")], base_timestamp=NOW)[:61]
                    + _bad_gzip_body(kind))
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">h", raw, 21, 1)
    struct.pack_into(">I", raw, 17, compute_crc(raw))
    for _ in range(4):
        broken.append_as_leader(bytes(raw), 0, NOW)
    broken.update_config(COMPACT)  # then the topic is switched to compact
    append(good, ("x", "1"), ("x", "2"), ("y", "active"))
    logs = {("broken", 0): broken, ("good", 0): good}
    c = LogCleaner(CleanerConfig(), [str(tmp_path)], lambda: logs,
                   lambda: {tp: log.end_offset for tp, log in logs.items()}, lambda tp: False)
    registry = CollectorRegistry()
    cleaner_metrics.register(registry, c)
    assert [plan.tp for plan in c.plans(NOW)] == [("broken", 0), ("good", 0)]
    assert clean(c) == 0  # the broken log first (one thread): it fails...
    assert c.uncleanable() == {("broken", 0)}
    assert registry.get_sample_value(
        "kraft_broker_log_cleaner_uncleanable_partitions") == 1
    assert clean(c) == 1  # ...and the next round cleans the other
    assert c.checkpoint(("good", 0)) == 2 and records(good) == [(1, b"x", b"2"),
                                                                (2, b"y", b"active")]
    assert clean(c) == 0 and c.plans(NOW) == []
    failures = [r for r in caplog.records if "cannot be cleaned" in r.getMessage()]
    assert len(failures) == 1  # logged once
    c.truncated(("broken", 0), 0)  # a truncation may have removed what failed: try again
    assert [plan.tp for plan in c.plans(NOW)] == [("broken", 0)]
    broken.close()
    good.close()


# -- the offset map's memory -------------------------------------------------------------------


def test_the_offset_map_stays_within_the_dedupe_buffer(tmp_path: Path) -> None:
    """100-byte keys: the map holds 16-byte digests, counted at their real cost, and stops
    filling at its capacity (in the middle of a segment too)."""
    log = open_log(tmp_path, LogConfig(segment_bytes=20_000, cleanup_policy=("compact",)))
    for first in range(0, 2000, 20):
        log.append_as_leader(build_batch(
            [Record(b"v", b"%0100d" % key) for key in range(first, first + 20)],
            base_timestamp=NOW), 0, NOW)
    files = [SegmentFile(v.base_offset, v.end_offset, v.size, v.path)
             for v in log.segment_views()[:-1]]
    buffer = 64 * 1024
    capacity = map_capacity(buffer, 1)
    assert capacity == int(buffer * 0.9) // OFFSET_MAP_ENTRY_BYTES
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        offsets, reached = build_offset_map(files, 0, capacity)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(offsets) == capacity < 2000
    assert after - before <= buffer
    assert all(len(digest) == 16 for digest in offsets)
    # The map reaches the end of the last segment it holds whole.
    assert reached in {f.end for f in files} and reached <= capacity
    log.close()


# -- idempotent producers after a swap ---------------------------------------------------------


def test_an_idempotent_retry_after_a_cleaning_is_a_duplicate(tmp_path: Path) -> None:
    log = open_log(tmp_path)

    def batch(seq: int) -> bytes:
        return build_batch([Record(b"v", b"K")], base_timestamp=NOW, producer_id=7,
                           producer_epoch=0, base_sequence=seq)

    for seq in range(5):
        log.append_as_leader(batch(seq), 0, NOW)
    append(log, ("z", "active"))
    times = {v.base_offset: log.segment_timestamps(v.base_offset) for v in log.segment_views()}
    assert clean(cleaner(log)) == 1
    assert records(log) == [(4, b"K", b"v"), (5, b"z", b"active")]
    retry = log.append_as_leader(batch(3), 0, NOW)  # seq 3's batch was cleaned away
    assert retry.duplicate and retry.base_offset == 3
    # The swapped segment's times are its sources' (the filler has none: the file's mtime).
    assert log.segment_timestamps(4) == times[4]
    assert log.segment_timestamps(5) == times[5]
    log.close()
