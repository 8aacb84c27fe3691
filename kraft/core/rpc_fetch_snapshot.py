"""FetchSnapshot (spec §2.5, §5): the leader serves a snapshot in position-addressed chunks;
a follower sent there by a Fetch response fetches it chunk by chunk, verifies and freezes it,
empties its log to start at the snapshot, and tells the driver to load it.

No file is touched here. Reading a chunk (leader), writing one, freezing the file and deleting
what it replaces (follower) are `SnapshotJob`s (kraft/log/snapshot_jobs.py) in the core's
output; the driver runs them off the event loop and hands them back to `on_job_done`."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from kraft.core.errors import Errors, RaftInvariantError
from kraft.core.leader import LeaderState
from kraft.core.messages import FetchSnapshotRequest, FetchSnapshotResponse
from kraft.core.rpc_fetch_common import note_leader_answered, validate_leader_only
from kraft.core.states import FollowerState, SnapshotTransfer
from kraft.core.voters import ReplicaKey
from kraft.log.base import CorruptRecordError, OffsetAndEpoch, SnapshotJob
from kraft.log.snapshot_format import BOOTSTRAP_SNAPSHOT_ID
from kraft.log.snapshot_jobs import (
    AbortTransfer,
    DeleteSnapshots,
    FreezeSnapshot,
    ReadChunk,
    WriteChunk,
)

if TYPE_CHECKING:
    from kraft.core.connections import InFlight
    from kraft.core.context import HandlerContext

log = logging.getLogger(__name__)


# -- leader side ---------------------------------------------------------------------------


def handle_request(
    core: HandlerContext, token: int, req: FetchSnapshotRequest, now: int
) -> FetchSnapshotResponse | None:
    """An error answer now, or None: the chunk is read by a ReadChunk job and answered (under
    `token`) when the driver hands it back. The answer carries the leader and epoch of the
    moment the request was accepted; the bytes of a frozen snapshot never change."""
    if not core.valid_cluster_id(req.cluster_id):
        return _error(core, Errors.INCONSISTENT_CLUSTER_ID)
    if req.max_bytes < 0 or req.snapshot_id.offset < 0 or req.snapshot_id.epoch < 0:
        return _error(core, Errors.INVALID_REQUEST)
    error = validate_leader_only(core, req.current_leader_epoch)
    if error is not None:
        return _error(core, error)
    leader = core.quorum.state
    assert isinstance(leader, LeaderState)
    # A follower busy fetching a snapshot is alive and following: it counts for check-quorum.
    leader.note_voter_contact(ReplicaKey(req.replica_id, req.replica_directory_id), now)
    snapshot_id = req.snapshot_id
    if snapshot_id == BOOTSTRAP_SNAPSHOT_ID or snapshot_id not in core.snapshots.ids():
        return _error(core, Errors.SNAPSHOT_NOT_FOUND)
    size = core.snapshots.size(snapshot_id)
    if req.position < 0 or req.position >= size:
        return _error(core, Errors.POSITION_OUT_OF_RANGE)
    max_bytes = min(req.max_bytes, core.config.fetch_max_bytes)
    job = ReadChunk(core.snapshots, snapshot_id, req.position, max_bytes, token)
    core.chunk_reads[job] = FetchSnapshotResponse(
        Errors.NONE, leader.local_id, leader.epoch, snapshot_id, size, req.position, b"",
        core.config.local_endpoint,
    )
    core.queue_snapshot_job(job)
    return None


def _chunk_read(core: HandlerContext, job: ReadChunk) -> None:
    answer = core.chunk_reads.pop(job, None)
    if answer is None:
        return
    if job.error is not None or job.data is None:
        # Retention deleted it meanwhile (or the disk failed): the follower fetches again and
        # is sent to the snapshot the leader has now.
        log.warning("cannot serve snapshot %s: %s", job.snapshot_id, job.error)
        answer = dataclasses.replace(answer, error=Errors.SNAPSHOT_NOT_FOUND, size=0,
                                     position=0)
    else:
        answer = dataclasses.replace(answer, data=job.data)
    core.reply_later(job.token, answer)


def _error(core: HandlerContext, error: Errors) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        error, core.leader_id, core.epoch, leader_endpoint=core.leader_endpoint()
    )


# -- follower side ---------------------------------------------------------------------------


def start(core: HandlerContext, state: FollowerState, snapshot_id: OffsetAndEpoch) -> None:
    """The leader's Fetch answer named a snapshot: fetch it instead of the log."""
    if snapshot_id.offset < 0 or snapshot_id.epoch < 0:
        log.warning("ignoring an invalid snapshot id %s from the leader", snapshot_id)
        return
    log.info(
        "the leader sends this node to snapshot %d-%d (log %d..%d)",
        snapshot_id.offset, snapshot_id.epoch, core.log.start_offset, core.log.end_offset,
    )
    abandon(core, state)
    state.fetching_snapshot = SnapshotTransfer(core.snapshots.begin_transfer(snapshot_id))


def abandon(core: HandlerContext, state: object) -> None:
    """Drop a partial snapshot (the leader changed, or the transfer failed): its file goes in
    an AbortTransfer job, which runs after any write still in flight for it."""
    if isinstance(state, FollowerState) and state.fetching_snapshot is not None:
        core.queue_snapshot_job(AbortTransfer(state.fetching_snapshot.partial))
        state.fetching_snapshot = None


def maybe_send(core: HandlerContext, state: FollowerState, now: int) -> bool:
    transfer = state.fetching_snapshot
    assert transfer is not None
    if transfer.busy:
        return False  # the last chunk is still being written (or the file frozen)
    if core.connections.has_in_flight(FetchSnapshotRequest):
        return False
    if not core.connections.is_ready(state.leader_id, now):
        return False
    core.send(
        state.leader_id,
        state.leader_endpoint,
        FetchSnapshotRequest(
            cluster_id=core.config.cluster_id,
            replica_id=core.local_id if core.local_id is not None else -1,
            current_leader_epoch=core.epoch,
            snapshot_id=transfer.snapshot_id,
            position=transfer.written,
            max_bytes=core.config.fetch_max_bytes,
            replica_directory_id=core.config.directory_id,
        ),
        now,
    )
    return True


def handle_response(
    core: HandlerContext, entry: InFlight, resp: FetchSnapshotResponse, now: int
) -> None:
    state = core.quorum.state
    req = entry.request
    assert isinstance(req, FetchSnapshotRequest)
    if not (
        isinstance(state, FollowerState)
        and resp.leader_id == state.leader_id
        and resp.leader_epoch == state.epoch
        and req.current_leader_epoch == state.epoch
        and state.fetching_snapshot is not None
        and state.fetching_snapshot.snapshot_id == req.snapshot_id
        and not state.fetching_snapshot.busy
    ):
        return
    transfer = state.fetching_snapshot
    note_leader_answered(core, state, now)
    if resp.error in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
        # The leader cleaned it away (or we disagree on its size): back to Fetch, which names
        # the snapshot to fetch now.
        log.info("snapshot %s: %s; fetching the log again", req.snapshot_id, resp.error.name)
        abandon(core, state)
        return
    if resp.error != Errors.NONE:
        return
    if resp.snapshot_id != transfer.snapshot_id or resp.position != transfer.written:
        log.warning(
            "snapshot chunk for %s at %d does not continue %s at %d; starting over",
            resp.snapshot_id, resp.position, transfer.snapshot_id, transfer.written,
        )
        abandon(core, state)
        return
    if transfer.written + len(resp.data) > resp.size:
        log.warning("snapshot %s grew past its size %d; starting over", req.snapshot_id, resp.size)
        abandon(core, state)
        return
    transfer.busy = True
    transfer.size = resp.size
    core.queue_snapshot_job(WriteChunk(transfer.partial, resp.data))


def on_job_done(core: HandlerContext, job: SnapshotJob) -> None:
    """The driver ran `job`: act on its result."""
    if isinstance(job, ReadChunk):
        _chunk_read(core, job)
    elif isinstance(job, WriteChunk):
        _chunk_written(core, job)
    elif isinstance(job, FreezeSnapshot):
        _frozen(core, job)
    # AbortTransfer, DeleteSnapshots: nothing to learn.


def _current_transfer(
    core: HandlerContext, job: WriteChunk | FreezeSnapshot
) -> SnapshotTransfer | None:
    state = core.quorum.state
    if isinstance(state, FollowerState) and state.fetching_snapshot is not None and (
        state.fetching_snapshot.partial is job.partial
    ):
        return state.fetching_snapshot
    return None  # abandoned meanwhile: its AbortTransfer follows this job


def _chunk_written(core: HandlerContext, job: WriteChunk) -> None:
    transfer = _current_transfer(core, job)
    if transfer is None:
        return
    state = core.quorum.state
    if job.error is not None:
        log.warning("cannot write the fetched snapshot %s: %s; fetching the log again",
                    transfer.snapshot_id, job.error)
        abandon(core, state)
        return
    transfer.written += len(job.data)
    if transfer.written < transfer.size:
        transfer.busy = False  # the next poll asks for the next chunk
        return
    core.queue_snapshot_job(FreezeSnapshot(transfer.partial))


def _frozen(core: HandlerContext, job: FreezeSnapshot) -> None:
    transfer = _current_transfer(core, job)
    snapshot_id = job.partial.snapshot_id
    if transfer is None:
        # The leader changed while the file was frozen. The snapshot is durable but the log
        # does not stand on it: delete it, unless something else now uses that id. (A crash
        # before the deletion is harmless: a snapshot holds only committed records, and
        # `align_log_with_snapshots` restarts a log that cannot continue it.)
        state = core.quorum.state
        fetching = isinstance(state, FollowerState) and state.fetching_snapshot is not None and (
            state.fetching_snapshot.snapshot_id == snapshot_id
        )
        if job.info is not None and not fetching and snapshot_id.offset != core.log.start_offset:
            core.queue_snapshot_job(DeleteSnapshots(core.snapshots, [snapshot_id]))
        return
    state = core.quorum.state
    assert isinstance(state, FollowerState)
    state.fetching_snapshot = None
    if job.error is not None:
        what = "damaged" if isinstance(job.error, CorruptRecordError) else "not writable"
        log.warning("the fetched snapshot is %s (%s); fetching it again", what, job.error)
        return  # the job removed the partial file
    assert job.info is not None
    _install(core, snapshot_id)
    core.on_snapshot_installed(snapshot_id, job.info.control_records)


def _install(core: HandlerContext, snapshot_id: OffsetAndEpoch) -> None:
    """The snapshot replaces the whole log: empty it to start there, forget older snapshots
    once that is durable, and have the driver load the snapshot into the state machine.

    The order on disk matters. The reset reaches the files only with the next flush job; until
    then they still hold the old log, maybe with a divergent tail past the snapshot. Deleting
    the older snapshots at once would leave, after a crash in between, an old log whose start
    no snapshot covers any more. So they go from the log's `after_flush`, run by the driver
    when that job completes (and forgotten by a crash, which leaves the old log and its
    snapshots consistent); `align_log_with_snapshots` then restarts the log at the newest
    snapshot it cannot stand on."""
    if snapshot_id.offset < core.high_watermark:
        raise RaftInvariantError(
            f"snapshot {snapshot_id} ends below the high watermark {core.high_watermark}"
        )
    core.log.reset_to(snapshot_id.offset, snapshot_id.epoch)
    older = [i for i in core.snapshots.ids() if i.offset < snapshot_id.offset]
    if older:
        job = DeleteSnapshots(core.snapshots, older)
        core.log.after_flush(lambda: core.queue_snapshot_job(job))
    core.high_watermark = snapshot_id.offset
    core.snapshot_to_load = snapshot_id
    log.info("installed snapshot %d-%d; the log starts there", snapshot_id.offset,
             snapshot_id.epoch)
