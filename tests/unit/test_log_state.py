"""Producer snapshots and the derived state of a partition log (broker/log/log_state.py,
producer_snapshots.py): the open's one pass, snapshots at roll and clean shutdown, truncation
from a checkpoint; each time the state must equal a replay of the whole log."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from broker.log import log_closer, log_state, producer_snapshots
from broker.log.config import LogConfig
from broker.log.leader_epochs import LeaderEpochCache
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.log.producer_state import ProducerState
from broker.records import build_batch
from kraft.log.segmented import list_segments

TOPIC_ID = "5b1f0c1e-0000-4000-8000-0000000000aa"
NOW = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=1000)


def open_log(tmp_path: Path, config: LogConfig = SMALL, **kwargs: Any) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / "t-0"), TOPIC_ID, config, now_ms=NOW, **kwargs)


class Writer:
    """Idempotent producers appending in order (a leader's view)."""

    def __init__(self, seed: int, producers: int = 3) -> None:
        self.random = random.Random(seed)
        self.sequences = {1000 + p: 0 for p in range(producers)}
        self.epochs = dict.fromkeys(self.sequences, 0)

    def resync(self, log: PartitionLog) -> None:
        """Continue from what the log holds (batches were truncated away)."""
        for pid in self.sequences:
            entry = log._producers.entry(pid)
            if entry is not None and entry.batches:
                self.epochs[pid], self.sequences[pid] = entry.epoch, entry.last_seq + 1

    def append(self, log: PartitionLog, leader_epoch: int = 1) -> None:
        pid = self.random.choice(sorted(self.sequences))
        if self.random.random() < 0.03:  # a new producer epoch starts at sequence 0
            self.epochs[pid] += 1
            self.sequences[pid] = 0
        count = self.random.randint(1, 3)
        log.append_as_leader(build_batch(
            [b"r%d" % i for i in range(count)], producer_id=pid,
            producer_epoch=self.epochs[pid], base_sequence=self.sequences[pid],
            base_timestamp=NOW + self.random.randint(-5000, 5000)), leader_epoch, NOW)
        self.sequences[pid] += count


def _producers(producers: ProducerState, start: int) -> dict[int, Any]:
    # Batches below the log start may stay in an entry (as in Kafka, which evicts only
    # producers whose last batch is below it); a replay from the start never sees them.
    return {e.producer_id: (e.epoch, [b for b in e.batches if b.last_offset >= start])
            for e in producers.entries()}


def state(log: PartitionLog) -> tuple[Any, Any, Any]:
    """(producers, times without the files' mtimes, leader epochs) of `log`."""
    times = {base: (t.first_ms, t.max_ms, t.max_ms_batch, t.empty)
             for base, t in log._times.items()}
    return _producers(log._producers, log.start_offset), times, log.epoch_entries()


def replayed_whole(log: PartitionLog) -> tuple[Any, Any, Any]:
    """What a replay of every batch header from the log start gives."""
    times: dict[int, log_state.SegmentTimes] = {}
    producers, _ = log_state.reload(log._log, log.start_offset, times, None, True, log._headers)
    reference = os.path.join(os.path.dirname(log.directory), "reference")
    os.makedirs(reference, exist_ok=True)
    epochs = LeaderEpochCache(reference)
    for header in log._headers(log._log.start_offset):
        epochs.assign(header.partition_leader_epoch, header.base_offset, save=False)
    if log.start_offset > log._log.start_offset:
        epochs.truncate_from_start(log.start_offset)
    entries = epochs.entries()
    log_entries = log.epoch_entries()  # plus epochs assigned with no batch (KAFKA-7415)
    entries += [entry for entry in log_entries[len(entries):]]
    return (_producers(producers, log.start_offset),
            {base: (t.first_ms, t.max_ms, t.max_ms_batch, t.empty) for base, t in times.items()},
            entries)


def count_updates(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = ProducerState.update

    def update(self: ProducerState, *args: Any) -> None:
        calls.append(1)
        real(self, *args)

    monkeypatch.setattr(ProducerState, "update", update)
    return calls


def test_a_roll_writes_a_snapshot_and_a_restart_replays_only_what_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path)
    writer = Writer(1)
    for _ in range(60):
        writer.append(log)
    assert len(log.segment_views()) > 3
    # One at each roll, at the end of the append that rolled: inside the new segment.
    offsets = producer_snapshots.list_snapshots(log.directory)
    views = log.segment_views()
    assert len(offsets) == len(views) - 1
    assert all(view.base_offset < offset <= view.end_offset
               for view, offset in zip(views[1:], offsets, strict=True))
    before = state(log)
    active = log.segment_views()[-1]
    log.close(flush=False)  # a kill -9: no snapshot at shutdown
    updates = count_updates(monkeypatch)
    reopened = open_log(tmp_path)
    replayed = len(updates)
    assert 0 < replayed < sum(1 for _ in reopened._headers(active.base_offset)) < 60
    assert state(reopened) == before == replayed_whole(reopened)


def test_an_idempotent_retry_from_before_the_snapshot_is_still_a_duplicate(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    first = log.append_as_leader(build_batch([b"a"], producer_id=7, producer_epoch=0,
                                             base_sequence=0), 1, NOW)
    for sequence in range(1, 5):  # the producer's batches straddle several rolls
        log.append_as_leader(build_batch([b"b" * 100], producer_id=7, producer_epoch=0,
                                         base_sequence=sequence), 1, NOW)
    assert producer_snapshots.list_snapshots(log.directory)
    log.close(flush=False)
    reopened = open_log(tmp_path, LogConfig(segment_bytes=300))
    retry = reopened.append_as_leader(build_batch([b"a"], producer_id=7, producer_epoch=0,
                                                  base_sequence=0), 1, NOW)
    assert retry.duplicate and retry.base_offset == first.base_offset


@pytest.mark.parametrize("damage", ["corrupt", "past the end"])
def test_a_snapshot_that_does_not_fit_is_ignored(tmp_path: Path, damage: str) -> None:
    log = open_log(tmp_path)
    writer = Writer(2)
    for _ in range(40):
        writer.append(log)
    offsets = producer_snapshots.list_snapshots(log.directory)
    log.close(flush=False)
    if damage == "corrupt":
        path = producer_snapshots.snapshot_path(log.directory, offsets[-1])
        data = bytearray(Path(path).read_bytes())
        data[-1] ^= 0xFF
        Path(path).write_bytes(bytes(data))
    else:  # the segments it covered were lost: the log now ends before it
        for base, path in list_segments(log.directory):
            if base >= offsets[-2]:
                os.unlink(path)
    reopened = open_log(tmp_path)
    assert state(reopened) == replayed_whole(reopened)


def test_a_clean_shutdown_writes_a_snapshot_when_the_tail_is_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_closer, "SHUTDOWN_SNAPSHOT_BATCHES", 10)
    manager = LogManager([str(tmp_path)], lambda: {})
    long_log = manager.get_or_create("t", 0, TOPIC_ID, LogConfig())
    short_log = manager.get_or_create("t", 1, TOPIC_ID, LogConfig())
    writer = Writer(3)
    for _ in range(30):
        writer.append(long_log)
    writer.append(short_log)
    expected = state(long_log)
    manager.close_now()
    assert producer_snapshots.list_snapshots(long_log.directory) == [long_log.end_offset]
    assert producer_snapshots.list_snapshots(short_log.directory) == []
    updates = count_updates(monkeypatch)
    again = LogManager([str(tmp_path)], lambda: {})
    reopened = again.get("t", 0)
    assert reopened is not None and state(reopened) == expected
    assert len(updates) == 1  # the short log's one batch; the long one replays nothing
    again.close_now()


def test_a_truncation_replays_from_the_latest_checkpoint_not_the_whole_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_state, "CHECKPOINT_BATCHES", 16)
    log = open_log(tmp_path, LogConfig())  # one segment: no snapshot file helps
    writer = Writer(4)
    for _ in range(200):
        writer.append(log)
    updates = count_updates(monkeypatch)
    log.truncate_to(log.end_offset - 20)
    replayed = len(updates)
    assert 0 < replayed <= 16
    assert state(log) == replayed_whole(log)


@pytest.mark.parametrize("seed", [5, 11, 12, 13, 14])
def test_random_appends_truncations_and_restarts_keep_the_state_of_a_whole_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    monkeypatch.setattr(log_state, "CHECKPOINT_BATCHES", 7)
    rng = random.Random(seed)
    log = open_log(tmp_path)
    writer = Writer(seed + 1)
    leader_epoch = 1
    for step in range(300):
        action = rng.random()
        if action < 0.85:
            writer.append(log, leader_epoch)
        elif action < 0.93 and log.end_offset > log.start_offset:
            log.truncate_to(rng.randint(log.start_offset, log.end_offset))
            leader_epoch += 1  # a new leader's epoch after a truncation
            writer.resync(log)
        elif action < 0.97:
            start = log.start_offset  # the LogManager's log-start-offset checkpoint
            log.close(flush=rng.random() < 0.5)
            log = open_log(tmp_path, log_start_offset=start)
            # The epochs are rebuilt from the batches on open only (a truncation or a new
            # log start edits the cache, as before).
            assert state(log)[2] == replayed_whole(log)[2], f"step {step}"
        elif log.end_offset > log.start_offset:
            log.advance_start_offset(rng.randint(log.start_offset, log.end_offset))
        assert state(log)[:2] == replayed_whole(log)[:2], f"step {step}"
    snapshots = producer_snapshots.list_snapshots(log.directory)
    assert all(log.start_offset <= offset <= log.end_offset for offset in snapshots)
