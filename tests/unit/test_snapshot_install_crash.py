"""Issue 14, item 4: a snapshot install and a crash. `align_log_with_snapshots` restarts a log
that cannot continue the latest snapshot (Kafka's truncateToLatestSnapshot rule, and a
divergent tail past the snapshot even in a newer epoch), and the install deletes the older
snapshots only once the emptied log is durable. Each test runs on memory and on files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_harness import follower

from kraft.core.errors import Errors
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.log import MemoryLog, SegmentedLog, list_segments
from kraft.log.base import OffsetAndEpoch
from kraft.log.snapshots import (
    FileSnapshotStore,
    MemorySnapshotStore,
    align_log_with_snapshots,
)

# Two of the tests' batches per segment: a log start moved to an even offset survives a reopen
# (the segments below it are deleted; a segment holding the start keeps its older bytes).
SEGMENT_BYTES = 100


class Storage:
    """A node's log and snapshot store, on memory or on files, that can crash and reopen."""

    def __init__(self, kind: str, directory: Path) -> None:
        self.kind = kind
        self.directory = directory
        self.log: Any
        self.store: Any
        if kind == "memory":
            self.log, self.store = MemoryLog(), MemorySnapshotStore()
        else:
            self.log = SegmentedLog(directory, segment_bytes=SEGMENT_BYTES)
            self.store = FileSnapshotStore(directory)

    def crash(self) -> None:
        """Power off: nothing that was not flushed survives; the files are opened again."""
        if self.kind == "memory":
            self.log.crash()
            self.store.crash()
            self.log.reopen()
        else:
            self.log.close()
            self.log = SegmentedLog(self.directory, segment_bytes=SEGMENT_BYTES)
            self.store = FileSnapshotStore(self.directory)

    def write(self, *runs: tuple[int, int]) -> None:
        """For each (epoch, count), `count` one-record batches of that epoch; then flush."""
        for epoch, count in runs:
            for _ in range(count):
                offset = self.log.end_offset
                self.log.append_as_leader([f"e{epoch}o{offset}".encode()], epoch, 0)
        self.log.flush()

    def snapshot(self, offset: int, epoch: int) -> OffsetAndEpoch:
        snapshot_id = OffsetAndEpoch(offset, epoch)
        builder = self.store.builder(snapshot_id, 0)
        builder.append([b"state-%d" % offset])
        builder.freeze()
        return snapshot_id

    def shape(self) -> tuple[int, int, int]:
        return (self.log.start_offset, self.log.end_offset, self.log.last_epoch)


@pytest.fixture(params=["memory", "files"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    made = Storage(request.param, tmp_path / "metadata")
    yield made
    made.log.close()


def align_and_reopen(storage: Storage) -> tuple[int, int, int]:
    align_log_with_snapshots(storage.log, storage.store)
    shape = storage.shape()
    storage.crash()  # what align did is durable: a crash right after changes nothing
    align_log_with_snapshots(storage.log, storage.store)
    assert storage.shape() == shape
    return shape


# -- align_log_with_snapshots ---------------------------------------------------------------------


def test_a_divergent_tail_past_the_snapshot_is_dropped_even_in_a_newer_epoch(
    storage: Storage,
) -> None:
    # The snapshot (6, 2) says record 5 is of epoch 2; this log has it in epoch 3, and its last
    # epoch (3) is above the snapshot's. Kafka's rule (snapshot epoch > last epoch, or same
    # epoch and past the end) would keep the log and vote with it.
    storage.write((1, 5), (3, 5))
    storage.snapshot(6, 2)
    assert align_and_reopen(storage) == (6, 6, 2)


def test_a_divergent_tail_in_an_older_epoch_is_dropped(storage: Storage) -> None:
    storage.write((1, 9))
    storage.snapshot(6, 2)
    assert align_and_reopen(storage) == (6, 6, 2)


def test_a_snapshot_of_a_later_epoch_than_the_whole_log_restarts_it(storage: Storage) -> None:
    # Kafka's rule where the log holds no record before the snapshot to compare with.
    storage.snapshot(5, 1)
    storage.log.reset_to(5, 1)
    storage.write((1, 3))
    storage.snapshot(5, 2)  # the latest: same offset, later epoch
    assert align_and_reopen(storage) == (5, 5, 2)


def test_a_snapshot_past_the_log_end_restarts_the_log_there(storage: Storage) -> None:
    storage.write((1, 4))
    storage.snapshot(9, 1)
    assert align_and_reopen(storage) == (9, 9, 1)


def test_a_log_that_continues_the_snapshot_is_kept(storage: Storage) -> None:
    storage.write((1, 5), (2, 5))
    storage.snapshot(7, 2)
    assert align_and_reopen(storage) == (0, 10, 2)


def test_a_log_that_continues_the_snapshot_starts_at_a_snapshot_it_holds(
    storage: Storage,
) -> None:
    storage.write((1, 5), (2, 5))
    storage.snapshot(4, 1)
    storage.snapshot(7, 2)
    storage.log.advance_start(4, 1)
    storage.log.flush()
    assert align_and_reopen(storage) == (4, 10, 2)
    assert storage.store.ids() == [OffsetAndEpoch(4, 1), OffsetAndEpoch(7, 2)]


def test_stale_snapshots_are_deleted_only_once_the_reset_is_durable(storage: Storage) -> None:
    storage.write((1, 9))
    storage.snapshot(4, 1)
    storage.log.advance_start(4, 1)
    storage.log.flush()
    storage.snapshot(6, 2)
    deleted: list[tuple[OffsetAndEpoch, bool]] = []
    delete = storage.store.delete

    def watched(snapshot_id: OffsetAndEpoch) -> None:
        deleted.append((snapshot_id, storage.log.begin_flush() is None))
        delete(snapshot_id)

    storage.store.delete = watched
    align_log_with_snapshots(storage.log, storage.store)
    assert deleted == [(OffsetAndEpoch(4, 1), True)]
    assert storage.store.ids() == [OffsetAndEpoch(6, 2)]
    if storage.kind == "files":
        assert [base for base, _ in list_segments(storage.directory)] in ([], [6])


# -- the install, and a crash before the emptied log is flushed -----------------------------------

LEADER_SNAPSHOT = OffsetAndEpoch(6, 3)


def installing_follower(storage: Storage) -> Any:
    """Node 2, following leader 1 in epoch 3: its log holds epoch 1 up to offset 4 and then a
    divergent tail of its own epoch 2 (offsets 4-9); its log starts at its own snapshot (2, 1).
    The leader's Fetch answer sends it to the leader's snapshot (6, 3)."""
    storage.write((1, 4), (2, 6))
    storage.snapshot(2, 1)
    storage.log.advance_start(2, 1)
    storage.log.flush()
    h = follower(leader_id=1, epoch=3, log=storage.log, snapshots=storage.store)
    h.respond(h.only(FetchRequest, to=1),
              FetchResponse(Errors.NONE, 1, 3, high_watermark=8, snapshot_id=LEADER_SNAPSHOT))
    leaders = MemorySnapshotStore()
    builder = leaders.builder(LEADER_SNAPSHOT, 0)
    builder.append([b"the leader's state"])
    builder.freeze()
    whole = leaders.read_all(LEADER_SNAPSHOT)
    h.respond(h.only(FetchSnapshotRequest, to=1), FetchSnapshotResponse(
        Errors.NONE, 1, 3, LEADER_SNAPSHOT, len(whole), 0, whole, "node1.test:9093"
    ))
    assert [o.snapshot_loaded for o in h.outputs if o.snapshot_loaded] == [LEADER_SNAPSHOT]
    assert storage.shape() == (6, 6, 3)
    return h


def test_a_crash_between_install_and_flush_keeps_the_older_snapshots(storage: Storage) -> None:
    installing_follower(storage)
    # The older snapshot stays until the emptied log is durable: the disk still holds the old
    # log (start 2, divergent tail to 10) and the snapshot its start needs.
    assert storage.store.ids() == [OffsetAndEpoch(2, 1), LEADER_SNAPSHOT]
    storage.crash()
    assert storage.shape() == (2, 10, 2)
    assert storage.store.ids() == [OffsetAndEpoch(2, 1), LEADER_SNAPSHOT]
    # On restart the log cannot continue the snapshot (offset 5 is of epoch 2, not 3): it
    # restarts empty there, instead of voting and fetching with the divergent tail.
    align_log_with_snapshots(storage.log, storage.store)
    assert storage.shape() == (6, 6, 3)
    assert storage.store.ids() == [LEADER_SNAPSHOT]
    storage.crash()
    align_log_with_snapshots(storage.log, storage.store)
    assert storage.shape() == (6, 6, 3)


def test_the_older_snapshots_go_when_the_emptied_log_is_flushed(storage: Storage) -> None:
    h = installing_follower(storage)
    h.flush()
    assert storage.store.ids() == [LEADER_SNAPSHOT]
    storage.crash()
    align_log_with_snapshots(storage.log, storage.store)
    assert storage.shape() == (6, 6, 3)
    assert storage.store.ids() == [LEADER_SNAPSHOT]
