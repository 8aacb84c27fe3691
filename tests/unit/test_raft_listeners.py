"""The Raft client's delivery rules (kraft/delivery.py), one test per rule, over an
in-memory log and snapshot store."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kraft import delivery as listeners
from kraft.client import Batch, LeaderAndEpoch, OffsetAndEpoch, SnapshotReader
from kraft.delivery import ListenerContext
from kraft.log.memory import MemoryLog
from kraft.log.snapshots import MemorySnapshotStore

NO_LEADER = LeaderAndEpoch(-1, 0)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        self.events.append(("commit", [(b.base_offset, b.next_offset) for b in batches]))

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        self.events.append(("snapshot", (reader.snapshot_id, list(reader.records()))))

    def handle_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        self.events.append(("leader", (leader.leader_id, leader.epoch, epoch_start_offset)))


def log_of(*batch_sizes: int, epoch: int = 1) -> MemoryLog:
    log = MemoryLog()
    for index, size in enumerate(batch_sizes):
        log.append_as_leader([b"r%d" % index] * size, epoch, 0)
    log.flush()
    return log


def test_only_whole_batches_below_the_high_watermark_are_delivered() -> None:
    log = log_of(2, 3, 1)  # batches [0,2) [2,5) [5,6)
    recorder = Recorder()
    context = ListenerContext(recorder)
    context.poll(log, MemorySnapshotStore(), 4, NO_LEADER, -1)  # HW inside the second batch
    assert recorder.events == [("commit", [(0, 2)]), ("leader", (-1, 0, -1))]
    context.poll(log, MemorySnapshotStore(), 6, NO_LEADER, -1)
    assert recorder.events[-1] == ("commit", [(2, 5), (5, 6)])
    assert context.next_offset == 6


def test_nothing_is_delivered_twice() -> None:
    log = log_of(2)
    recorder = Recorder()
    context = ListenerContext(recorder)
    for _ in range(3):
        context.poll(log, MemorySnapshotStore(), 2, NO_LEADER, -1)
    assert recorder.events == [("commit", [(0, 2)]), ("leader", (-1, 0, -1))]


def test_the_first_poll_starts_from_the_newest_snapshot() -> None:
    log = log_of(2, 2)
    snapshots = MemorySnapshotStore()
    builder = snapshots.builder(OffsetAndEpoch(2, 1), 0)
    builder.append([b"state"])
    builder.freeze()
    recorder = Recorder()
    ListenerContext(recorder).poll(log, snapshots, 4, NO_LEADER, -1)
    assert recorder.events[:2] == [
        ("snapshot", (OffsetAndEpoch(2, 1), [b"state"])),
        ("commit", [(2, 4)]),
    ]


def test_a_listener_behind_the_log_start_starts_over_from_the_snapshot() -> None:
    log = log_of(2)
    snapshots = MemorySnapshotStore()
    recorder = Recorder()
    context = ListenerContext(recorder)
    context.poll(log, snapshots, 0, NO_LEADER, -1)  # nothing committed yet
    builder = snapshots.builder(OffsetAndEpoch(10, 3), 0)
    builder.append([b"leader's"])
    builder.freeze()
    log.reset_to(10, 3)  # an installed snapshot replaced the log
    context.poll(log, snapshots, 10, NO_LEADER, -1)
    assert ("snapshot", (OffsetAndEpoch(10, 3), [b"leader's"])) in recorder.events
    assert context.next_offset == 10


def test_a_long_catch_up_is_delivered_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    log = log_of(*[1] * 10)
    size = next(iter(log.batches(0, 1))).size_in_bytes
    monkeypatch.setattr(listeners, "MAX_DELIVERY_BYTES", 3 * size)
    recorder = Recorder()
    context = ListenerContext(recorder)
    slices = 0
    while context.poll(log, MemorySnapshotStore(), 10, NO_LEADER, -1):
        slices += 1
    commits = [e[1] for e in recorder.events if e[0] == "commit"]
    assert [len(c) for c in commits] == [3, 3, 3, 1]  # type: ignore[arg-type]
    assert slices == 3 and context.next_offset == 10


def test_own_leadership_is_announced_only_once_the_epochs_first_batch_is_delivered() -> None:
    log = log_of(3)  # offsets 0-2 from epoch 1
    log.append_as_leader([b"leader-change"], 2, 0, control=True)  # epoch 2 starts at 3
    log.flush()
    recorder = Recorder()
    context = ListenerContext(recorder)
    me = LeaderAndEpoch(7, 2)
    context.poll(log, MemorySnapshotStore(), 3, me, 3)
    assert [e for e in recorder.events if e[0] == "leader"] == []
    context.poll(log, MemorySnapshotStore(), 4, me, 3)
    assert recorder.events[-1] == ("leader", (7, 2, 3))
    assert ("commit", [(3, 4)]) in recorder.events


def test_another_nodes_leadership_is_announced_at_once() -> None:
    recorder = Recorder()
    context = ListenerContext(recorder)
    context.poll(log_of(1), MemorySnapshotStore(), 0, LeaderAndEpoch(2, 5), -1)
    assert recorder.events == [("leader", (2, 5, -1))]
