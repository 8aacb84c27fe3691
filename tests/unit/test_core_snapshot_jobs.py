"""Issue 15: the core asks for snapshot file I/O as jobs the driver runs (kraft/log/
snapshot_jobs.py) and never touches a file itself. These tests hold the jobs back and run them
one by one, as a slow disk would."""

from __future__ import annotations

from pathlib import Path

from core_harness import CLUSTER_ID, Harness, follower, make_log
from test_core_snapshot import (
    SNAP,
    redirected_follower,
    snapshot_leader,
    snapshot_request,
    snapshot_store,
)

from kraft.core.errors import Errors
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.log import SegmentedLog
from kraft.log.base import OffsetAndEpoch
from kraft.log.snapshot_jobs import (
    AbortTransfer,
    DeleteSnapshots,
    FreezeSnapshot,
    ReadChunk,
    WriteChunk,
)
from kraft.log.snapshots import FileSnapshotStore, align_log_with_snapshots

WHOLE = snapshot_store(SNAP).read_all(SNAP)
REDIRECT = FetchResponse(Errors.NONE, 1, 2, high_watermark=6, snapshot_id=SNAP)


def chunk(position: int, size: int = 1000, epoch: int = 2) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        Errors.NONE, 1, epoch, SNAP, len(WHOLE), position, WHOLE[position : position + size],
        "node1.test:9093",
    )


def held(h: Harness) -> Harness:
    h.run_snapshot_jobs = False
    return h


def kinds(h: Harness) -> list[type]:
    return [type(job) for job in h.held_jobs]


# -- the leader reads chunks in jobs ----------------------------------------------------------


def test_the_leader_answers_a_fetch_snapshot_once_its_chunk_is_read() -> None:
    h = held(snapshot_leader(advance=True))
    token = h.deliver_async(snapshot_request(SNAP, 0, max_bytes=1000))
    assert h.reply_for(token) is None
    assert kinds(h) == [ReadChunk]
    h.run_jobs()
    reply = h.reply_for(token)
    assert isinstance(reply, FetchSnapshotResponse) and reply.error == Errors.NONE
    assert (reply.position, reply.size, reply.data) == (0, len(WHOLE), WHOLE[:1000])


def test_a_snapshot_deleted_before_its_chunk_is_read_is_not_found() -> None:
    h = held(snapshot_leader(advance=False))
    token = h.deliver_async(snapshot_request(SNAP, 0))
    h.snapshots.delete(SNAP)  # retention, between the request and the read
    h.run_jobs()
    reply = h.reply_for(token)
    assert isinstance(reply, FetchSnapshotResponse)
    assert reply.error == Errors.SNAPSHOT_NOT_FOUND and reply.data == b""


# -- the follower writes, freezes and deletes in jobs ------------------------------------------


def test_the_follower_asks_for_the_next_chunk_only_once_the_last_is_written() -> None:
    h = held(redirected_follower(make_log((1, 2))))
    h.respond(h.only(FetchSnapshotRequest), chunk(0))
    assert kinds(h) == [WriteChunk]
    h.advance(h.config.retry_backoff_ms)
    assert not h.sent(FetchSnapshotRequest)  # the write is in flight
    h.run_jobs()
    assert h.only(FetchSnapshotRequest).request.position == 1000


def test_a_snapshot_is_installed_only_once_the_freeze_job_made_it_durable() -> None:
    h = held(redirected_follower(make_log((1, 2))))
    h.respond(h.only(FetchSnapshotRequest), chunk(0, len(WHOLE)))
    h.run_jobs(1)  # the write
    assert kinds(h) == [FreezeSnapshot]
    assert h.snapshots.ids() == [] and h.log.end_offset == 2  # nothing installed yet
    assert all(o.snapshot_loaded is None for o in h.outputs)
    h.run_jobs()
    assert [o.snapshot_loaded for o in h.outputs if o.snapshot_loaded] == [SNAP]
    assert h.snapshots.ids() == [SNAP]
    assert (h.log.start_offset, h.log.end_offset) == (5, 5)


def test_the_older_snapshots_are_deleted_by_a_job_after_the_reset_is_flushed() -> None:
    older = OffsetAndEpoch(2, 1)
    h = held(follower(leader_id=1, epoch=2, log=make_log((1, 3)),
                      snapshots=snapshot_store(older)))
    h.log.advance_start(2, 1)
    h.respond(h.only(FetchRequest), REDIRECT)
    h.respond(h.only(FetchSnapshotRequest), chunk(0, len(WHOLE)))
    h.run_jobs()
    assert h.snapshots.ids() == [older, SNAP]
    h.flush()
    assert kinds(h) == [DeleteSnapshots]
    assert h.snapshots.ids() == [older, SNAP]
    h.run_jobs()
    assert h.snapshots.ids() == [SNAP]


def test_a_leader_change_during_the_freeze_drops_the_snapshot_instead_of_installing_it() -> None:
    h = held(redirected_follower(make_log((1, 2))))
    h.respond(h.only(FetchSnapshotRequest), chunk(0, len(WHOLE)))
    h.run_jobs(1)
    assert kinds(h) == [FreezeSnapshot]
    assert not h.sent(FetchSnapshotRequest)  # busy: nothing in flight to be answered
    h.deliver(BeginQuorumEpochRequest(CLUSTER_ID, 3, 3, "node3.test:9093", voter_id=2))
    assert (h.state, h.leader_id) == ("Follower", 3)
    assert kinds(h) == [FreezeSnapshot, AbortTransfer]
    h.run_jobs()
    assert all(o.snapshot_loaded is None for o in h.outputs)
    assert h.log.end_offset == 2  # the log was never reset
    assert h.snapshots.ids() == []  # frozen, then deleted: nothing stands on it


def test_a_failed_chunk_write_sends_the_follower_back_to_fetch() -> None:
    h = held(redirected_follower())
    h.respond(h.only(FetchSnapshotRequest), chunk(0))
    [job] = h.held_jobs
    assert isinstance(job, WriteChunk)

    def full_disk(data: bytes) -> None:
        raise OSError(28, "No space left on device")

    job.partial.write = full_disk  # type: ignore[method-assign]
    h.run_jobs(1)
    assert kinds(h) == [AbortTransfer]
    h.run_jobs()
    h.advance(h.config.retry_backoff_ms)
    assert h.only(FetchRequest, to=1).request.fetch_offset == 0
    assert not h.sent(FetchSnapshotRequest)


def test_a_crash_with_chunk_writes_pending_leaves_a_log_align_accepts(tmp_path: Path) -> None:
    directory = tmp_path / "metadata"
    log = SegmentedLog(directory, segment_bytes=100)
    for offset in range(4):
        log.append_as_leader([b"r%d" % offset], 1, 0)
    log.flush()
    store = FileSnapshotStore(directory)
    h = held(follower(leader_id=1, epoch=2, log=log, snapshots=store))
    h.respond(h.only(FetchRequest), REDIRECT)
    h.respond(h.only(FetchSnapshotRequest), chunk(0))
    h.run_jobs()  # the first chunk is on disk, in a .part file
    assert [p.name for p in directory.iterdir() if p.name.endswith(".part")]
    h.respond(h.only(FetchSnapshotRequest), chunk(1000))  # this write never runs: a crash
    log.close()
    reopened = SegmentedLog(directory, segment_bytes=100)
    store = FileSnapshotStore(directory)  # deletes the unfinished .part file
    assert not [p.name for p in directory.iterdir() if p.name.endswith(".part")]
    align_log_with_snapshots(reopened, store)
    assert (reopened.start_offset, reopened.end_offset) == (0, 4)
    assert store.ids() == []
    reopened.close()
