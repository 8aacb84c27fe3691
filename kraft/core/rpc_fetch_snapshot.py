"""FetchSnapshot (spec §2.5, §5): the leader serves a snapshot in position-addressed chunks;
a follower sent there by a Fetch response fetches it chunk by chunk, verifies and freezes it,
empties its log to start at the snapshot, and tells the driver to load it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kraft.core import rpc_fetch
from kraft.core.errors import Errors, RaftInvariantError
from kraft.core.leader import LeaderState
from kraft.core.messages import FetchSnapshotRequest, FetchSnapshotResponse
from kraft.core.states import FollowerState
from kraft.log.base import CorruptRecordError, OffsetAndEpoch
from kraft.log.snapshots import BOOTSTRAP_SNAPSHOT_ID, SnapshotStore

if TYPE_CHECKING:
    from kraft.core.connections import InFlight
    from kraft.core.raft import RaftCore

log = logging.getLogger(__name__)


# -- leader side ---------------------------------------------------------------------------


def handle_request(core: RaftCore, req: FetchSnapshotRequest, now: int) -> FetchSnapshotResponse:
    if not core.valid_cluster_id(req.cluster_id):
        return _error(core, Errors.INCONSISTENT_CLUSTER_ID)
    if req.max_bytes < 0 or req.snapshot_id.offset < 0 or req.snapshot_id.epoch < 0:
        return _error(core, Errors.INVALID_REQUEST)
    error = rpc_fetch.validate_leader_only(core, req.current_leader_epoch)
    if error is not None:
        return _error(core, error)
    leader = core.quorum.state
    assert isinstance(leader, LeaderState)
    # A follower busy fetching a snapshot is alive and following: it counts for check-quorum.
    leader.note_voter_contact(req.replica_id, now)
    snapshot_id = req.snapshot_id
    if snapshot_id == BOOTSTRAP_SNAPSHOT_ID or snapshot_id not in core.snapshots.ids():
        return _error(core, Errors.SNAPSHOT_NOT_FOUND)
    size = core.snapshots.size(snapshot_id)
    if req.position < 0 or req.position >= size:
        return _error(core, Errors.POSITION_OUT_OF_RANGE)
    max_bytes = min(req.max_bytes, core.config.fetch_max_bytes)
    return FetchSnapshotResponse(
        Errors.NONE, leader.local_id, leader.epoch, snapshot_id, size, req.position,
        core.snapshots.read_chunk(snapshot_id, req.position, max_bytes),
        core.config.local_endpoint,
    )


def _error(core: RaftCore, error: Errors) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        error, core.leader_id, core.epoch, leader_endpoint=core.leader_endpoint()
    )


# -- follower side ---------------------------------------------------------------------------


def start(core: RaftCore, state: FollowerState, snapshot_id: OffsetAndEpoch) -> None:
    """The leader's Fetch answer named a snapshot: fetch it instead of the log."""
    if snapshot_id.offset < 0 or snapshot_id.epoch < 0:
        log.warning("ignoring an invalid snapshot id %s from the leader", snapshot_id)
        return
    log.info(
        "the leader sends this node to snapshot %d-%d (log %d..%d)",
        snapshot_id.offset, snapshot_id.epoch, core.log.start_offset, core.log.end_offset,
    )
    abandon(state)
    state.fetching_snapshot = core.snapshots.begin_transfer(snapshot_id)


def abandon(state: object) -> None:
    """Drop a partial snapshot (the leader changed, or the transfer failed)."""
    if isinstance(state, FollowerState) and state.fetching_snapshot is not None:
        state.fetching_snapshot.abort()
        state.fetching_snapshot = None


def maybe_send(core: RaftCore, state: FollowerState, now: int) -> bool:
    partial = state.fetching_snapshot
    assert partial is not None
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
            snapshot_id=partial.snapshot_id,
            position=partial.size,
            max_bytes=core.config.fetch_max_bytes,
        ),
        now,
    )
    return True


def handle_response(
    core: RaftCore, entry: InFlight, resp: FetchSnapshotResponse, now: int
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
    ):
        return
    partial = state.fetching_snapshot
    rpc_fetch.note_leader_answered(core, state, now)
    if resp.error in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
        # The leader cleaned it away (or we disagree on its size): back to Fetch, which names
        # the snapshot to fetch now.
        log.info("snapshot %s: %s; fetching the log again", req.snapshot_id, resp.error.name)
        abandon(state)
        return
    if resp.error != Errors.NONE:
        return
    if resp.snapshot_id != partial.snapshot_id or resp.position != partial.size:
        log.warning(
            "snapshot chunk for %s at %d does not continue %s at %d; starting over",
            resp.snapshot_id, resp.position, partial.snapshot_id, partial.size,
        )
        abandon(state)
        return
    partial.write(resp.data)
    if partial.size < resp.size:
        return
    if partial.size > resp.size:
        log.warning("snapshot %s grew past its size %d; starting over", req.snapshot_id, resp.size)
        abandon(state)
        return
    try:
        partial.freeze()
    except CorruptRecordError as exc:
        log.warning("the fetched snapshot is damaged (%s); fetching it again", exc)
        state.fetching_snapshot = None  # freeze removed the partial file
        return
    state.fetching_snapshot = None
    _install(core, partial.snapshot_id)


def _install(core: RaftCore, snapshot_id: OffsetAndEpoch) -> None:
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
        store = core.snapshots
        core.log.after_flush(lambda: forget_snapshots(store, older))
    core.high_watermark = snapshot_id.offset
    core.snapshot_to_load = snapshot_id
    log.info("installed snapshot %d-%d; the log starts there", snapshot_id.offset,
             snapshot_id.epoch)


def forget_snapshots(store: SnapshotStore, ids: list[OffsetAndEpoch]) -> None:
    """Delete snapshots a durable reset made stale. A failure is not fatal: stale snapshots
    below the log start are deleted again when the node next starts."""
    for snapshot_id in ids:
        try:
            store.delete(snapshot_id)
        except OSError as exc:
            log.warning("could not delete the stale snapshot %d-%d: %s", snapshot_id.offset,
                        snapshot_id.epoch, exc)
