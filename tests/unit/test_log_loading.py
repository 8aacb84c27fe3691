"""Restart like Kafka, then faster (issue 28): broker/log/log_loader.py and log_closer.py.

A clean shutdown's marker skips recovery; after a crash one syncfs replaces an fsync per file
and only batches from the recovery point on are checked; logs load in parallel, off the event
loop; a damaged log takes its partition offline, not the broker; closing syncs every log at
once."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from broker.api import ProducePartition
from broker.log import checkpoints, durability, log_loader
from broker.log.config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.records import build_batch
from broker.replica.fetcher import FetcherManager
from broker.replica.isr import IsrUpdater
from broker.replica.manager import ReplicaConfig, ReplicaManager
from kraft.errors import Errors
from kraft.log.recovery import read_recovery_point
from kraft.log.segmented import list_segments
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord

NOW = 1_700_000_000_000
ID = "0b7e6f0e-0000-4000-8000-00000000000a"


def batch(count: int = 2) -> bytes:
    return build_batch([b"v%d" % i for i in range(count)], base_timestamp=NOW)


def no_hws() -> dict[tuple[str, int], int]:
    return {}


def fill(manager: LogManager, partitions: int, batches: int = 3) -> None:
    for p in range(partitions):
        log = manager.get_or_create("t", p, ID, LogConfig())
        for _ in range(batches):
            log.append_as_leader(batch(), 0, NOW)


def record_syncs(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """(every fsync/fdatasync by path, every syncfs by directory) from now on."""
    files: list[str] = []
    filesystems: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def record(fd: int, real=real) -> None:  # type: ignore[no-untyped-def]
            files.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        monkeypatch.setattr(os, name, record)
    real_syncfs = durability.sync_filesystem

    def syncfs(directory: str) -> bool:
        filesystems.append(directory)
        return real_syncfs(directory)

    monkeypatch.setattr(durability, "sync_filesystem", syncfs)
    return files, filesystems


def flip_a_record_byte(log_dir: Path, partition: int) -> None:
    (_, path), = list_segments(str(log_dir / f"t-{partition}"))
    with open(path, "r+b") as file:
        file.seek(os.path.getsize(path) - 3)
        file.write(b"\xff")


@pytest.fixture(autouse=True)
def _needs_syncfs() -> None:
    if not durability.available():
        pytest.skip("syncfs is not usable here (Linux >= 5.8)")


def test_a_clean_restart_recovers_nothing_and_removes_the_marker_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    fill(manager, 3)
    manager.close_now()
    marker = tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    # Damage past a stale recovery point is not even looked for after a clean stop.
    (tmp_path / "t-1" / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    flip_a_record_byte(tmp_path, 1)
    files, filesystems = record_syncs(monkeypatch)
    unlinked_before_first_open: list[bool] = []
    real_open = PartitionLog.open.__func__  # type: ignore[attr-defined]

    def open_log(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
        unlinked_before_first_open.append(not marker.exists() and str(tmp_path) in files)
        return real_open(cls, *args, **kwargs)

    monkeypatch.setattr(PartitionLog, "open", classmethod(open_log))
    again = LogManager([str(tmp_path)], no_hws)
    assert unlinked_before_first_open == [True] * 3  # removed and its removal fsynced
    assert files == [str(tmp_path)] and filesystems == []  # nothing else is synced
    assert all(log.end_offset == 6 and not log.metadata_unsynced
               for log in again.logs().values())
    again.close_now()


def test_after_a_crash_one_syncfs_and_recovery_from_the_recovery_point_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    fill(manager, 2)
    manager.close_now()
    os.unlink(tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE)  # as a crash leaves the dir
    torn = manager.get("t", 1)
    assert torn is not None
    (_, segment), = list_segments(torn.directory)
    Path(torn.directory, "recovery-point-offset-checkpoint").write_text("0\n4\n")
    flip_a_record_byte(tmp_path, 1)  # the last batch, past the recovery point 4: cut
    files, filesystems = record_syncs(monkeypatch)
    again = LogManager([str(tmp_path)], no_hws)
    assert filesystems == [str(tmp_path)]
    assert files == [segment]  # only the cut torn tail is synced again
    reopened = again.get("t", 1)
    assert reopened is not None and reopened.end_offset == 4
    assert not any(log.metadata_unsynced for log in again.logs().values())
    # Its recovery point file stays at 4 until a flush raises it: at the latest the close.
    assert read_recovery_point(reopened.directory) == 4
    again.close_now()
    assert read_recovery_point(reopened.directory) == 4 == reopened.end_offset


def test_a_damaged_log_takes_its_partition_offline_not_the_broker(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    fill(manager, 3)
    manager.close_now()
    os.unlink(tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE)
    (_, path), = list_segments(str(tmp_path / "t-1"))
    with open(path, "r+b") as file:
        file.seek(16)  # the first batch's magic, below the recovery point: refused
        file.write(b"\x07")
    again = LogManager([str(tmp_path)], no_hws)
    assert sorted(again.logs()) == [("t", 0), ("t", 2)]
    assert again.partition_offline("t", 1) and "t-1" in again.offline_partitions[("t", 1)]
    with pytest.raises(OSError, match="move the directory away"):
        again.get_or_create("t", 1, ID, LogConfig())
    again.close_now()
    # The next start recovers this dir again (no marker) and finds the same damage.
    assert not (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()
    assert LogManager([str(tmp_path)], no_hws).partition_offline("t", 1)


def test_logs_load_in_parallel_threads_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    fill(manager, 4, batches=1)
    manager.close_now()
    # Two opens must be in flight at once to pass this barrier.
    barrier = threading.Barrier(2, timeout=10)
    threads: list[str] = []
    real = log_loader.open_partition

    def open_partition(*args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        barrier.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(log_loader, "open_partition", open_partition)

    async def scenario() -> None:
        loop_thread = threading.current_thread().name
        again = LogManager([str(tmp_path)], no_hws, recovery_threads_per_data_dir=2,
                           load=False)
        assert again.logs() == {} and again.loading.remaining == 0
        await again.load_logs()
        assert len(again.logs()) == 4 and again.loading.remaining == 0
        assert loop_thread not in threads and all("log-recovery" in t for t in threads)
        await again.close()

    asyncio.run(scenario())
    assert (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()


def test_one_recovery_thread_opens_one_log_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    fill(manager, 2, batches=1)
    manager.close_now()
    barrier = threading.Barrier(2, timeout=0.5)

    def open_partition(*args, **kwargs):  # type: ignore[no-untyped-def]
        barrier.wait()

    monkeypatch.setattr(log_loader, "open_partition", open_partition)
    with pytest.raises(threading.BrokenBarrierError):
        LogManager([str(tmp_path)], no_hws, recovery_threads_per_data_dir=1)


def test_a_close_during_the_load_leaves_no_clean_shutdown_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    fill(manager, 3, batches=1)
    manager.close_now()
    release = threading.Event()
    real = log_loader.open_partition

    def open_partition(*args, **kwargs):  # type: ignore[no-untyped-def]
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(log_loader, "open_partition", open_partition)

    async def scenario() -> None:
        again = LogManager([str(tmp_path)], no_hws, recovery_threads_per_data_dir=1,
                           load=False)
        loading = asyncio.ensure_future(again.load_logs())
        while again.loading.remaining == 0:
            await asyncio.sleep(0)
        loading.cancel()
        await asyncio.gather(loading, return_exceptions=True)
        release.set()
        await again.close()

    asyncio.run(scenario())
    assert not (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()


def test_close_syncs_every_log_with_two_syncfs_and_no_fsync_per_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    fill(manager, 20)
    points = [tmp_path / f"t-{p}" / "recovery-point-offset-checkpoint" for p in range(20)]
    inodes = [os.stat(path).st_ino for path in points]
    files, filesystems = record_syncs(monkeypatch)
    manager.close_now()
    assert filesystems == [str(tmp_path)] * 2
    # Only the log dir's own checkpoints and marker are fsynced, not a file of any log.
    assert [p for p in files if str(tmp_path) not in (p, os.path.dirname(p))] == []
    for p in range(20):
        assert read_recovery_point(str(tmp_path / f"t-{p}")) == 6
    # Raised in place between the two syncs: a rename over each costs a journaled update.
    assert [os.stat(path).st_ino for path in points] == inodes
    assert (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()


def test_without_syncfs_close_flushes_each_log_in_a_thread_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(durability, "ENABLED", False)
    manager = LogManager([str(tmp_path)], no_hws, recovery_threads_per_data_dir=4)
    fill(manager, 8)
    threads: set[str] = set()
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        threads.add(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    manager.close_now()
    assert threads and all("log-close" in name for name in threads)
    for p in range(8):
        assert read_recovery_point(str(tmp_path / f"t-{p}")) == 6
    assert (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()


def test_a_damaged_partition_answers_kafka_storage_error_and_the_others_are_served(
    tmp_path: Path,
) -> None:
    topic_id = "5zoAlv-xEh9xRANKXt1Lbg"
    manager = LogManager([str(tmp_path)], no_hws)
    for p in range(2):
        manager.get_or_create("t", p, topic_id, LogConfig()).append_as_leader(batch(), 0, NOW)
    manager.close_now()
    os.unlink(tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE)
    (_, path), = list_segments(str(tmp_path / "t-1"))
    with open(path, "r+b") as file:
        file.seek(16)
        file.write(b"\x07")
    delta = MetadataDelta(EMPTY_IMAGE)
    records = [RegisterBrokerRecord(1, "7yd6v3LdRPy1BLJbSb6FQQ", 11,
                                    (Endpoint("PLAINTEXT", "b1", 9001),)),
               TopicRecord("t", topic_id)]
    records += [PartitionRecord(p, topic_id, (1,), (1,), leader=1) for p in range(2)]
    for offset, record in enumerate(records, 1):
        delta.replay(record, offset, 1, 1_000 + offset)
    image = delta.apply()

    async def scenario() -> list[int]:
        logs = LogManager([str(tmp_path)], no_hws, load=False)
        await logs.load_logs()

        async def alter(request: object) -> object:
            raise ConnectionError("not in this test")

        config = ReplicaConfig()
        replicas = ReplicaManager(1, logs, config, FetcherManager(1, config, lambda: 11, alter),
                                  IsrUpdater(1, alter, lambda: 11))
        replicas.apply_image(image)
        results = await replicas.produce(1, 1000, [
            ProducePartition("t", p, batch()) for p in range(2)])
        await replicas.close()
        await logs.close()
        return [result.error for result in results]

    assert asyncio.run(scenario()) == [Errors.NONE, Errors.KAFKA_STORAGE_ERROR]
