"""LogManager (broker/log/log_manager.py): the directory scan at start, placement, deletion,
Kafka's log-dir checkpoint files, the background flush and retention, the clean-shutdown
marker."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from broker.log import checkpoints, durability, log_manager
from broker.log.config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.records import AppendError, build_batch

NOW = 1_700_000_000_000
ID_A = "0b7e6f0e-0000-4000-8000-00000000000a"
ID_B = "0b7e6f0e-0000-4000-8000-00000000000b"


def batch(count: int = 2) -> bytes:
    return build_batch([b"v%d" % i for i in range(count)], base_timestamp=NOW)


def no_hws() -> dict[tuple[str, int], int]:
    return {}


def test_scan_skips_the_metadata_log_and_other_dirs(tmp_path: Path) -> None:
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "meta.properties").write_text("x")
    log = PartitionLog.open(str(tmp_path / "my-dashed-topic-3"), ID_A, LogConfig())
    log.append_as_leader(batch(), 0, NOW)
    log.close()
    manager = LogManager([str(tmp_path)], no_hws)
    assert set(manager.logs()) == {("my-dashed-topic", 3)}
    found = manager.get("my-dashed-topic", 3)
    assert found is not None and found.end_offset == 2 and found.topic_id == ID_A
    assert manager.get("my-dashed-topic", 4) is None
    manager.close_now()


def test_get_or_create_places_in_the_emptiest_dir(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager(dirs, no_hws)
    logs = [manager.get_or_create("t", p, ID_A, LogConfig()) for p in range(4)]
    parents = [os.path.dirname(log.directory) for log in logs]
    assert parents.count(dirs[0]) == 2 and parents.count(dirs[1]) == 2
    assert manager.get_or_create("t", 0, ID_A, LogConfig()) is logs[0]
    bigger = LogConfig(segment_bytes=1 << 20)
    assert manager.get_or_create("t", 0, ID_A, bigger).config == bigger
    manager.close_now()


def test_recreated_topic_replaces_the_old_log(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    old = manager.get_or_create("t", 0, ID_A, LogConfig())
    old.append_as_leader(batch(), 0, NOW)
    new = manager.get_or_create("t", 0, ID_B, LogConfig())
    assert new.topic_id == ID_B and new.end_offset == 0
    manager.close_now()


def test_delete_removes_data(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    log = manager.get_or_create("t", 0, ID_A, LogConfig())
    log.append_as_leader(batch(), 0, NOW)
    manager.delete("t", 0)
    assert manager.get("t", 0) is None and not os.path.exists(log.directory)
    manager.delete("t", 0)  # twice is fine
    manager.close_now()
    assert not any(name.endswith("-delete") for name in os.listdir(tmp_path))


def test_the_background_round_removes_deleted_logs_and_a_restart_finishes_the_job(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = LogManager([str(tmp_path)], no_hws)
        manager.start()
        for partition in range(3):
            manager.get_or_create("t", partition, ID_A, LogConfig()).append_as_leader(
                batch(), 0, NOW)
        manager.delete("t", 0)
        deadline = asyncio.get_running_loop().time() + 5
        while any(n.endswith("-delete") for n in os.listdir(tmp_path)):
            assert asyncio.get_running_loop().time() < deadline, os.listdir(tmp_path)
            await asyncio.sleep(0.01)  # polling a condition the background task makes true
        await manager.close()

    asyncio.run(scenario())
    # A crash between the rename and the removal leaves a tombstone: the next start does not
    # load it and removes it.
    os.rename(tmp_path / "t-1", tmp_path / "t-1.0123abcd-delete")
    reopened = LogManager([str(tmp_path)], no_hws)
    assert sorted(reopened.logs()) == [("t", 2)]
    reopened.close_now()
    assert not any(n.endswith("-delete") for n in os.listdir(tmp_path))


def test_checkpoints_and_clean_shutdown_round_trip(tmp_path: Path) -> None:
    hws = {("t", 0): 4, ("t", 1): 99}
    manager = LogManager([str(tmp_path)], lambda: hws)
    first = manager.get_or_create("t", 0, ID_A, LogConfig())
    for _ in range(3):
        first.append_as_leader(batch(), 0, NOW)
    first.advance_start_offset(2)
    second = manager.get_or_create("t", 1, ID_A, LogConfig())
    second.append_as_leader(batch(), 0, NOW)
    manager.close_now()
    assert (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / checkpoints.REPLICATION_OFFSET_FILE).read_text() == (
        "0\n2\nt 0 4\nt 1 99\n")
    assert checkpoints.read_offsets(str(tmp_path / checkpoints.RECOVERY_POINT_FILE)) == {
        ("t", 0): 6, ("t", 1): 2}
    assert checkpoints.read_offsets(str(tmp_path / checkpoints.LOG_START_OFFSET_FILE)) == {
        ("t", 0): 2, ("t", 1): 0}
    again = LogManager([str(tmp_path)], no_hws)
    assert not (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.start_offset == 2
    assert again.high_watermark_checkpoint("t", 0) == 4
    assert again.high_watermark_checkpoint("t", 1) == 2  # clamped to the log end
    assert again.high_watermark_checkpoint("t", 7) is None
    again.close_now()


def test_damaged_checkpoint_names_its_path_and_line(tmp_path: Path) -> None:
    (tmp_path / checkpoints.REPLICATION_OFFSET_FILE).write_text("0\n1\nt zero 4\n")
    with pytest.raises(checkpoints.CheckpointError, match="line 3"):
        LogManager([str(tmp_path)], no_hws)


def test_background_task_flushes_by_policy_and_runs_retention(tmp_path: Path) -> None:
    async def scenario() -> None:
        hws: dict[tuple[str, int], int] = {}
        manager = LogManager([str(tmp_path)], lambda: hws, retention_check_interval_ms=50,
                             hw_checkpoint_interval_ms=50,
                             recovery_point_checkpoint_interval_ms=50,
                             flush_check_interval_ms=20)
        manager.start()
        log = manager.get_or_create("t", 0, ID_A, LogConfig(flush_messages=2))
        log.append_as_leader(batch(2), 0, NOW)  # reaches flush.messages
        # Generous deadlines: the rounds fsync in a worker thread, slow on a busy machine.
        for _ in range(500):
            if log.flushed_offset == 2:
                break
            await asyncio.sleep(0.01)
        assert log.flushed_offset == 2 and log.recovery_point == 2
        old = manager.get_or_create("old", 0, ID_B, LogConfig(retention_ms=1))
        old.append_as_leader(build_batch([b"x"], base_timestamp=1), 0, NOW)
        hws[("old", 0)] = 1
        hws[("t", 0)] = 2
        for _ in range(500):
            if old.start_offset == 1:
                break
            await asyncio.sleep(0.01)
        assert old.start_offset == 1 and old.size_in_bytes == 0
        path = str(tmp_path / checkpoints.REPLICATION_OFFSET_FILE)
        for _ in range(500):
            if checkpoints.read_offsets(path) == {("old", 0): 1, ("t", 0): 2}:
                break
            await asyncio.sleep(0.01)
        assert checkpoints.read_offsets(path) == {("old", 0): 1, ("t", 0): 2}
        await manager.close()
        assert (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()

    asyncio.run(scenario())


def test_roll_asks_for_a_flush_of_the_old_segment(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = LogManager([str(tmp_path)], no_hws)
        manager.start()
        size = len(batch())
        log = manager.get_or_create("t", 0, ID_A, LogConfig(segment_bytes=size))
        log.append_as_leader(batch(), 0, NOW)
        log.append_as_leader(batch(), 0, NOW)  # rolls
        for _ in range(500):
            if log.flushed_offset >= 2:
                break
            await asyncio.sleep(0.01)
        assert log.flushed_offset >= 2
        await manager.close()

    asyncio.run(scenario())


def test_close_waits_for_a_flush_round_in_flight(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = LogManager([str(tmp_path)], no_hws)
        manager.start()
        log = manager.get_or_create("t", 0, ID_A, LogConfig(flush_messages=1))
        log._log.faults.fsync_delay_s = 0.2  # a slow disk: the round is still running
        log.append_as_leader(batch(), 0, NOW)
        async with asyncio.timeout(5):  # until the background round is running
            while manager._inflight is None:
                await asyncio.sleep(0.001)
        await manager.close()
        assert (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()

    asyncio.run(scenario())
    reopened = PartitionLog.open(str(tmp_path / "t-0"), ID_A, LogConfig())
    assert reopened.end_offset == 2 and reopened.recovery_point == 2


def test_wait_flushed_returns_once_the_append_is_fsynced(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager = LogManager([str(tmp_path)], no_hws)
        manager.start()
        log = manager.get_or_create("t", 0, ID_A, LogConfig(flush_messages=1))
        result = log.append_as_leader(batch(), 0, NOW)
        assert log.flush_due(NOW)  # the policy wants this append fsynced before the answer
        await asyncio.wait_for(manager.wait_flushed("t", 0, result.last_offset + 1), 5)
        assert log.flushed_offset == 2 and log.recovery_point == 2
        await manager.wait_flushed("t", 0, 2)  # already: at once
        other = manager.get_or_create("u", 0, ID_B, LogConfig())
        other.append_as_leader(batch(), 0, NOW)
        waiting = asyncio.ensure_future(manager.wait_flushed("u", 0, 2))
        await asyncio.sleep(0)  # it waits now
        manager.delete("u", 0)
        with pytest.raises(OSError):
            await waiting
        await manager.close()

    asyncio.run(scenario())


# -- creating logs without fsync on the event loop ----------------------------------------------


def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every fsync/fdatasync from now on, by the path its descriptor names."""
    paths: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def record(fd: int, real=real) -> None:  # type: ignore[no-untyped-def]
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        monkeypatch.setattr(os, name, record)
    return paths


def test_background_round_fsyncs_new_logs_and_dirty_epoch_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_manager, "METADATA_SYNC_CHUNK", 2)

    async def scenario() -> None:
        manager = LogManager([str(tmp_path)], no_hws)
        fsyncs = _record_fsyncs(monkeypatch)
        logs = [manager.get_or_create("t", p, ID_A, LogConfig()) for p in range(5)]
        for log in logs:
            log.assign_epoch(1, 0)
        assert fsyncs == []  # nothing on the event loop
        assert all(log.metadata_unsynced for log in logs)
        await manager.flush_due_logs()  # one chunk of two
        assert [log.metadata_unsynced for log in logs] == [False, False, True, True, True]
        for log in logs[:2]:
            epochs = os.path.join(log.directory, checkpoints.LEADER_EPOCH_FILE)
            assert epochs in fsyncs and log.directory in fsyncs
        assert fsyncs.count(str(tmp_path)) == 1  # the new directories' entries, once a hop
        while any(log.metadata_unsynced for log in logs):
            await manager.flush_due_logs()
        # A leader change dirties one checkpoint; the running task syncs it by itself.
        fsyncs.clear()
        manager.start()
        logs[3].assign_epoch(2, 0)
        assert fsyncs == [] and logs[3].metadata_unsynced
        for _ in range(500):
            if not logs[3].metadata_unsynced:
                break
            await asyncio.sleep(0.01)
        assert fsyncs == [os.path.join(logs[3].directory, checkpoints.LEADER_EPOCH_FILE),
                          logs[3].directory]
        await manager.close()

    asyncio.run(scenario())
    reopened = LogManager([str(tmp_path)], no_hws)
    entries = [log.epoch_entries() for log in reopened.logs().values()]
    assert sorted(entries) == [[(1, 0)]] * 4 + [[(2, 0)]]
    reopened.close_now()


def test_logs_found_at_start_are_synced_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(durability, "ENABLED", False)  # no syncfs: a sync per file
    log = PartitionLog.open(str(tmp_path / "t-0"), ID_A, LogConfig())
    log.assign_epoch(3, 0)
    log.close(flush=False)  # as kill -9 leaves it: possibly only in the page cache

    async def scenario() -> None:
        manager = LogManager([str(tmp_path)], no_hws)
        found = manager.get("t", 0)
        assert found is not None and found.metadata_unsynced
        fsyncs = _record_fsyncs(monkeypatch)
        manager.start()
        for _ in range(500):
            if not found.metadata_unsynced:
                break
            await asyncio.sleep(0.01)
        assert os.path.join(found.directory, checkpoints.PARTITION_METADATA_FILE) in fsyncs
        await manager.close()

    asyncio.run(scenario())


def test_wait_flushed_is_not_queued_behind_new_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_manager, "METADATA_SYNC_CHUNK", 8)

    async def scenario() -> None:
        manager = LogManager([str(tmp_path)], no_hws)
        manager.start()
        new = [manager.get_or_create("bulk", p, ID_A, LogConfig()) for p in range(50)]
        log = manager.get_or_create("t", 0, ID_B, LogConfig(flush_messages=1))
        result = log.append_as_leader(batch(), 0, NOW)
        assert log.flush_due(NOW)
        await asyncio.wait_for(manager.wait_flushed("t", 0, result.last_offset + 1), 5)
        assert log.flushed_offset == 2 and not log.metadata_unsynced
        # Its flush went first: at most one chunk of the new logs was synced meanwhile.
        assert sum(other.metadata_unsynced for other in new) >= 50 - 8
        await manager.close()

    asyncio.run(scenario())


def test_a_log_whose_creation_a_power_loss_undid_is_skipped_then_recreated(
    tmp_path: Path,
) -> None:
    manager = LogManager([str(tmp_path)], no_hws)
    log = manager.get_or_create("t", 0, ID_A, LogConfig())
    log.close(flush=False)  # never synced; then a power loss empties and loses files
    (Path(log.directory) / checkpoints.PARTITION_METADATA_FILE).write_text("")
    os.unlink(Path(log.directory) / "recovery-point-offset-checkpoint")
    restarted = LogManager([str(tmp_path)], no_hws)
    assert restarted.get("t", 0) is None  # skipped, not a failed start
    again = restarted.get_or_create("t", 0, ID_A, LogConfig())
    assert again.end_offset == 0 and again.topic_id == ID_A
    restarted.close_now()
    assert LogManager([str(tmp_path)], no_hws).get("t", 0) is not None


# -- log dir failure (Kafka's LogDirFailureChannel) --------------------------------------------


def test_a_failed_write_takes_its_log_dir_offline_once(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager(dirs, no_hws)
    told: list[tuple[str, str]] = []
    manager.on_dir_failure = lambda directory, exc: told.append((directory, str(exc)))
    first, second = (manager.get_or_create("t", p, ID_A, LogConfig()) for p in range(2))
    assert os.path.dirname(first.directory) == dirs[0]
    manager.faults.disk_full = True  # shared by every log: the next write fails with ENOSPC
    with pytest.raises(AppendError) as failed:
        first.append_as_leader(batch(), 0, NOW)
    manager.fail_dir(first.directory, failed.value)
    manager.fail_dir(os.path.join(dirs[0], "replication-offset-checkpoint"), OSError("again"))
    assert [d for d, _ in told] == [dirs[0]]  # once per dir, whatever path failed in it
    assert "No space left on device" in told[0][1]
    assert manager.is_offline(first) and not manager.is_offline(second)
    # New logs go to the dirs still online; with none left, creating one fails.
    assert os.path.dirname(manager.get_or_create("t", 2, ID_A, LogConfig()).directory) \
        == dirs[1]
    manager.fail_dir(dirs[1], OSError("gone"))
    with pytest.raises(OSError, match="every log dir is offline"):
        manager.get_or_create("t", 3, ID_A, LogConfig())
    manager.faults.disk_full = False
    manager.close_now()
    # Neither dir is marked clean: the next start recovers both in full.
    assert not any(os.path.exists(os.path.join(d, checkpoints.CLEAN_SHUTDOWN_FILE))
                   for d in dirs)


def test_a_checkpoint_that_cannot_be_written_takes_its_dir_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    hws = {("t", 0): 0, ("t", 1): 0}
    manager = LogManager(dirs, lambda: hws, hw_checkpoint_interval_ms=0)
    for p in range(2):
        manager.get_or_create("t", p, ID_A, LogConfig())
    offline = asyncio.Event()
    manager.on_dir_failure = lambda directory, exc: offline.set()
    real = checkpoints.write_offsets

    def full_disk_in_a(path: str, offsets: dict[tuple[str, int], int]) -> None:
        if path.startswith(dirs[0] + os.sep):
            raise OSError(28, "No space left on device")
        real(path, offsets)

    monkeypatch.setattr(checkpoints, "write_offsets", full_disk_in_a)

    async def scenario() -> None:
        manager.start()
        await asyncio.wait_for(offline.wait(), 10)
        await manager.close()

    asyncio.run(scenario())
    assert list(manager.offline_dirs) == [dirs[0]]
    assert checkpoints.read_offsets(
        os.path.join(dirs[1], checkpoints.REPLICATION_OFFSET_FILE)) == {("t", 1): 0}
