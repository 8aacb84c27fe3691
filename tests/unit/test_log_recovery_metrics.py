"""The start-up load's metrics (broker/log/recovery_metrics.py): logs and segments left, read
from a registry while a recovery thread is held inside a log's open."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.log import log_loader, recovery_metrics
from broker.log.config import LogConfig
from broker.log.log_manager import LogManager
from kraft.log.recovery import RECOVERY_POINT_FILE
from kraft.log.segmented import list_segments
from tests.unit.test_log_loading import ID, NOW, batch, no_hws

SMALL_SEGMENTS = LogConfig(segment_bytes=300)


def fill(manager: LogManager, partitions: int, batches: int) -> None:
    for p in range(partitions):
        log = manager.get_or_create("t", p, ID, SMALL_SEGMENTS)
        for _ in range(batches):
            log.append_as_leader(batch(), 0, NOW)


def held_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check: Any) -> LogManager:
    """Load tmp_path's logs with one recovery thread, call `check(registry)` while the first
    log's open is held, then let the load finish."""
    entered, release = threading.Event(), threading.Event()
    real = log_loader.open_partition

    def open_partition(*args, **kwargs):  # type: ignore[no-untyped-def]
        entered.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(log_loader, "open_partition", open_partition)
    manager = LogManager([str(tmp_path)], no_hws, recovery_threads_per_data_dir=1, load=False)
    registry = CollectorRegistry()
    recovery_metrics.register(registry, manager.loading)

    async def scenario() -> None:
        loading = asyncio.ensure_future(manager.load_logs())
        try:
            assert await asyncio.to_thread(entered.wait, 10)
            check(registry)
        finally:
            release.set()
            await loading
        sample = registry.get_sample_value
        assert sample("kraft_broker_log_recovery_remaining_logs", {"dir": str(tmp_path)}) == 0
        assert sample("kraft_broker_log_recovery_remaining_segments",
                      {"dir": str(tmp_path)}) == 0
        assert sample("kraft_broker_log_recovery_loaded_logs") == 3

    asyncio.run(scenario())
    return manager


def test_after_a_crash_the_segments_of_the_log_being_recovered_are_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crashed = LogManager([str(tmp_path)], no_hws)
    fill(crashed, 3, batches=6)  # not closed: the next start recovers every log
    segments = len(list_segments(str(tmp_path / "t-0")))
    assert segments > 1

    def check(registry: CollectorRegistry) -> None:
        labels = {"dir": str(tmp_path)}
        assert registry.get_sample_value(
            "kraft_broker_log_recovery_remaining_logs", labels) == 3
        # One thread, holding t-0: its recovery point is 0, so every segment is checked.
        assert registry.get_sample_value(
            "kraft_broker_log_recovery_remaining_segments", labels) == segments
        assert registry.get_sample_value("kraft_broker_log_recovery_loaded_logs") == 0

    held_load(tmp_path, monkeypatch, check).close_now()
    crashed.close_now()


def test_after_a_clean_shutdown_no_segment_is_recovered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean = LogManager([str(tmp_path)], no_hws)
    fill(clean, 3, batches=6)
    clean.close_now()

    def check(registry: CollectorRegistry) -> None:
        labels = {"dir": str(tmp_path)}
        assert registry.get_sample_value(
            "kraft_broker_log_recovery_remaining_logs", labels) == 3
        assert registry.get_sample_value(
            "kraft_broker_log_recovery_remaining_segments", labels) == 0

    held_load(tmp_path, monkeypatch, check).close_now()


def test_segments_from_the_recovery_point_on(tmp_path: Path) -> None:
    plan = log_loader.DirPlan(str(tmp_path), clean=False, synced=True)
    log = tmp_path / "t-0"
    log.mkdir()
    for base in (0, 10, 20, 30):
        (log / f"{base:020d}.log").touch()
    (log / "00000000000000000010.index").touch()  # not a segment
    for point, expected in ((0, 4), (10, 3), (15, 3), (30, 1), (99, 1)):
        (log / RECOVERY_POINT_FILE).write_text(f"0\n{point}\n")
        names = os.listdir(log)
        assert log_loader.segments_to_recover(plan, str(log), names) == expected, point
    assert log_loader.segments_to_recover(
        log_loader.DirPlan(str(tmp_path), clean=True, synced=True), str(log), names) == 0
