"""What a broker's start costs per partition log (issue 28: 3,000 logs in under 1.5 s), and that
the shortcuts keep today's behaviour: each partition directory is listed once and its files read
once, a small segment is read instead of mapped (a torn tail and damage are still told apart), a
segment's mtime is read only if the roll rule needs it, the loader hands logs to the event loop
in chunks, and a cleaner swap a crash interrupted is still finished through the loader."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from broker.log import checkpoints, cleaner_swap, log_loader
from broker.log.config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.records import build_batch
from kraft.log import CorruptRecordError, SegmentedLog
from kraft.log._common import read_file
from kraft.log.recovery import RECOVERY_POINT_FILE
from kraft.log.segmented import list_segments
from tests.unit.test_log_cleaner import _cleaned_file, append, records
from tests.unit.test_log_cleaner import open_log as open_compacted

ID = "8d4c3b6a-6f64-4b43-9a59-3c5e3a4f2a11"
NOW = 1_700_000_000_000
BIG = 70_000  # a record that makes its segment larger than what is read instead of mapped


def no_hws() -> dict[tuple[str, int], int]:
    return {}


def untimestamped(log: PartitionLog, now: int) -> None:
    log.append_as_leader(build_batch([b"v"], base_timestamp=-1), 0, now)


@pytest.mark.parametrize(("age_ms", "rolls"), [(5_000, True), (500, False)])
def test_a_reopened_segment_without_timestamps_rolls_by_its_files_mtime(
    tmp_path: Path, age_ms: int, rolls: bool
) -> None:
    config = LogConfig(segment_ms=1000)
    log = PartitionLog.open(str(tmp_path / "t-0"), ID, config, now_ms=NOW)
    untimestamped(log, NOW)
    segment = log.segment_views()[-1].path
    log.close()
    os.utime(segment, ((NOW - age_ms) / 1000, (NOW - age_ms) / 1000))
    reopened = PartitionLog.open(str(tmp_path / "t-0"), ID, config, now_ms=NOW)
    untimestamped(reopened, NOW)
    assert reopened.segment_count == (2 if rolls else 1)
    reopened.close()


def test_the_loader_lists_each_partition_directory_once_and_stats_no_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    for p in range(3):
        manager.get_or_create("t", p, ID, LogConfig()).append_as_leader(
            build_batch([b"v"], base_timestamp=NOW), 0, NOW)
    manager.close_now()
    os.unlink(tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE)  # a crash start: the most reads
    listed: Counter[str] = Counter()
    stats: list[str] = []
    real_listdir, real_stat = os.listdir, os.stat

    def listdir(path: str) -> list[str]:
        listed[os.path.basename(path)] += 1
        return real_listdir(path)

    def stat(path: str, *args: object, **kwargs: object) -> os.stat_result:
        stats.append(os.fspath(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "stat", stat)
    again = LogManager([str(tmp_path)], no_hws)
    monkeypatch.undo()
    assert len(again.logs()) == 3
    assert {name: listed[name] for name in ("t-0", "t-1", "t-2")} == {
        "t-0": 1, "t-1": 1, "t-2": 1}
    assert not [path for path in stats if path.endswith(".log")]
    again.close_now()


@pytest.mark.parametrize("size", [100, BIG], ids=["read", "mapped"])
def test_a_torn_tail_is_cut_in_a_read_and_in_a_mapped_segment(tmp_path: Path,
                                                             size: int) -> None:
    log = SegmentedLog(tmp_path)
    for _ in range(2):
        log.append_as_leader([b"x" * size], 1, 0)
    log.flush()
    log.close()
    path = list_segments(tmp_path)[-1][1]
    whole = os.path.getsize(path)
    os.truncate(path, whole - 10)  # the second batch torn
    with pytest.raises(CorruptRecordError, match="up to the recovery point 2 were durable"):
        SegmentedLog(tmp_path)  # below the recovery point: damage, not a torn tail
    os.unlink(tmp_path / RECOVERY_POINT_FILE)  # a log from before there was one
    reopened = SegmentedLog(tmp_path)
    assert reopened.end_offset == 1
    assert os.path.getsize(path) == whole // 2
    reopened.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean-start", "crash-start"])
def test_damage_in_an_old_mapped_segment_takes_only_its_partition_offline(
    tmp_path: Path, clean: bool
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    config = LogConfig(segment_bytes=BIG + 1000)
    damaged = manager.get_or_create("t", 0, ID, config)
    for _ in range(2):  # one batch a segment: the old one is mapped on open
        damaged.append_as_leader(build_batch([b"x" * BIG], base_timestamp=NOW), 0, NOW)
    manager.get_or_create("t", 1, ID, config).append_as_leader(
        build_batch([b"v"], base_timestamp=NOW), 0, NOW)
    old = damaged.segment_views()[0].path
    manager.close_now()
    with open(old, "r+b") as file:  # the first batch's magic byte, below the recovery point
        file.seek(16)
        file.write(b"\x07")
    if not clean:
        os.unlink(tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE)
    again = LogManager([str(tmp_path)], no_hws)
    assert again.partition_offline("t", 0) and not again.partition_offline("t", 1)
    assert old in again.offline_partitions[("t", 0)]
    assert again.get("t", 1) is not None and again.get("t", 1).end_offset == 1
    again.close_now()


def test_read_file_reads_small_and_large_files_and_stops_at_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = os.urandom(200_000)
    path.write_bytes(data)
    assert read_file(str(path)) == data
    assert read_file(str(path), 256) == data[:256]
    assert read_file(str(path), 100_000) == data[:100_000]
    with pytest.raises(FileNotFoundError):
        read_file(str(tmp_path / "missing"))


def test_the_loader_hands_logs_over_in_chunks_of_at_most_open_chunk(tmp_path: Path) -> None:
    plans = [log_loader.DirPlan(str(tmp_path / d), clean=True, synced=True) for d in "ab"]
    for plan in plans:
        plan.partitions = [(("t", p), f"{plan.directory}/t-{p}") for p in range(100)]
    loader = log_loader.LogLoader([p.directory for p in plans], 2, lambda *_: None,
                                  lambda _: None)
    chunks = loader._chunks(plans)
    assert max(map(len, chunks)) == log_loader.OPEN_CHUNK
    assert [item[2] for chunk in chunks for item in chunk] == [
        path for plan in plans for _, path in plan.partitions]
    few = loader._chunks([plans[0], log_loader.DirPlan(str(tmp_path / "c"), True, True)])
    assert len(few) >= 4  # 100 logs, 2 dirs of 2 threads: every thread gets work
    one = log_loader.DirPlan(str(tmp_path / "d"), clean=True, synced=True,
                             partitions=[(("t", 0), "x")])
    assert loader._chunks([one]) == [[(one, ("t", 0), "x")]]


@pytest.mark.parametrize("deleted", [0, 1, 3])
def test_a_crash_in_a_swap_is_finished_by_the_loaders_open(tmp_path: Path,
                                                           deleted: int) -> None:
    log = open_compacted(tmp_path)
    append(log, ("a", "1"), ("a", "2"), ("a", "3"), ("z", "active"))
    cleaned, old = _cleaned_file(log)
    cleaner_swap.commit(cleaned)
    for path in old[:deleted]:
        os.unlink(path)
    log.close(flush=False)

    async def load() -> LogManager:
        manager = LogManager([str(tmp_path)], no_hws, load=False)
        await manager.load_logs()
        return manager

    manager = asyncio.run(load())
    reopened = manager.get("orders", 0)
    assert reopened is not None
    assert records(reopened) == [(2, b"a", b"3"), (3, b"z", b"active")]
    manager.close_now()


def test_a_load_stopped_mid_chunk_closes_what_the_chunk_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    for p in range(3):
        manager.get_or_create("t", p, ID, LogConfig())
    manager.close_now()
    entered, release = threading.Event(), threading.Event()
    opened: list[PartitionLog] = []
    real = log_loader.open_partition

    def open_partition(*args, **kwargs):  # type: ignore[no-untyped-def]
        entered.set()
        release.wait(10)
        log = real(*args, **kwargs)
        opened.append(log)
        return log

    monkeypatch.setattr(log_loader, "open_partition", open_partition)

    async def scenario() -> None:
        again = LogManager([str(tmp_path)], no_hws, recovery_threads_per_data_dir=1,
                           load=False)
        loading = asyncio.ensure_future(again.load_logs())
        deadline = time.monotonic() + 10
        while not entered.is_set() and time.monotonic() < deadline:  # one chunk of 3
            await asyncio.sleep(0.01)  # poll interval of a bounded wait: its first open held
        loading.cancel()
        await asyncio.gather(loading, return_exceptions=True)
        release.set()
        await again.close()
        assert again.logs() == {}

    def closed(log: PartitionLog) -> bool:
        try:
            log.read(0, 100, 1)
        except ValueError:
            return True
        return False

    asyncio.run(scenario())
    deadline = time.monotonic() + 10
    # The chunk's thread finishes the held open, skips the rest and closes that log.
    while not (opened and closed(opened[0])) and time.monotonic() < deadline:
        time.sleep(0.01)  # poll interval of a bounded wait
    assert len(opened) == 1 and closed(opened[0])
