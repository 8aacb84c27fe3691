"""Snapshots in the protocol (spec §2.4 redirect, §2.5 FetchSnapshot, §5 load path): the
leader sends fetchers it cannot serve from its log to its latest snapshot and serves it in
chunks; a follower fetches, verifies and installs it, and tells the driver to load it."""

from __future__ import annotations

import pytest
from core_harness import (
    CLUSTER_ID,
    MAX_BYTES,
    Harness,
    fetch_request,
    fetch_response,
    follower,
    leader,
    make_log,
    route,
)

from kraft.core.errors import Errors, RaftInvariantError
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.core.rpc_fetch import VOTER_HW_NEWS_LINGER_MS
from kraft.log import MemoryLog
from kraft.log.base import OffsetAndEpoch
from kraft.log.snapshots import MemorySnapshotStore

SNAP = OffsetAndEpoch(5, 1)


def snapshot_store(*ids: OffsetAndEpoch, records: int = 300) -> MemorySnapshotStore:
    store = MemorySnapshotStore()
    for snapshot_id in ids:
        builder = store.builder(snapshot_id, 1234)
        builder.append_all([b"state-%d-%d" % (snapshot_id.offset, i) for i in range(records)])
        builder.freeze()
    return store


def snapshot_leader(advance: bool) -> Harness:
    """Leader of epoch 2 (node 1 of 1, 2, 3) holding epoch 1 at offsets 0-4 and its
    LeaderChange at 5, with a snapshot at (5, 1); with `advance` its log starts there."""
    h = leader(log=make_log((1, 5)), snapshots=snapshot_store(SNAP))
    assert h.epoch == 2
    if advance:
        h.log.advance_start(SNAP.offset, SNAP.epoch)
    return h


def snapshot_request(
    snapshot_id: OffsetAndEpoch, position: int, epoch: int = 2, max_bytes: int = MAX_BYTES,
    replica_id: int = 2,
) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(CLUSTER_ID, replica_id, epoch, snapshot_id, position, max_bytes)


# -- the leader's redirect ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("advance", "fetch_offset", "last_epoch", "redirect"),
    [
        (False, 0, 0, True),  # an empty fetcher starts from the latest snapshot
        (False, 3, 1, False),  # the log still holds offset 3
        (True, 3, 1, True),  # below the log start
        (True, 5, 0, True),  # at the log start, in an epoch other than the snapshot's
        (True, 5, 1, False),  # exactly at the snapshot
        (True, 6, 2, False),
        (False, 6, 0, True),  # an epoch older than the oldest snapshot's
    ],
)
def test_leader_sends_fetchers_it_cannot_serve_to_its_latest_snapshot(
    advance: bool, fetch_offset: int, last_epoch: int, redirect: bool
) -> None:
    h = snapshot_leader(advance)
    token = h.deliver_async(fetch_request(2, 2, fetch_offset, last_epoch, max_wait_ms=500))
    reply = h.reply_for(token)
    assert redirect or reply is not None or fetch_offset == h.log.end_offset
    if reply is None:  # at the log end with only the HW to learn: answered after the linger
        h.advance(VOTER_HW_NEWS_LINGER_MS)
        reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)
    assert reply.error == Errors.NONE
    if redirect:
        assert reply.snapshot_id == SNAP
        assert reply.records == b"" and reply.diverging_epoch is None
    else:
        assert reply.snapshot_id is None


def test_a_redirected_fetch_does_not_count_as_the_replicas_progress() -> None:
    h = snapshot_leader(advance=True)
    hw = h.hw
    h.deliver(fetch_request(2, 2, 0, 0))
    h.deliver(fetch_request(3, 2, 0, 0))
    assert h.hw == hw


def test_latest_snapshot_is_named_not_the_earliest() -> None:
    later = OffsetAndEpoch(6, 2)
    h = leader(log=make_log((1, 5)), snapshots=snapshot_store(SNAP))
    h.snapshots.builder(later, 0).freeze()
    h.log.advance_start(SNAP.offset, SNAP.epoch)
    reply = h.deliver(fetch_request(2, 2, 2, 1))
    assert isinstance(reply, FetchResponse) and reply.snapshot_id == later


# -- the leader serves FetchSnapshot ------------------------------------------------------------


def test_leader_serves_a_snapshot_in_chunks() -> None:
    h = snapshot_leader(advance=True)
    whole = h.snapshots.read_all(SNAP)
    got = b""
    while len(got) < len(whole):
        reply = h.deliver(snapshot_request(SNAP, len(got), max_bytes=1000))
        assert isinstance(reply, FetchSnapshotResponse)
        assert reply.error == Errors.NONE
        assert (reply.snapshot_id, reply.size, reply.position) == (SNAP, len(whole), len(got))
        assert 0 < len(reply.data) <= 1000
        got += reply.data
    assert got == whole


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (snapshot_request(OffsetAndEpoch(4, 1), 0), Errors.SNAPSHOT_NOT_FOUND),
        (snapshot_request(OffsetAndEpoch(0, 0), 0), Errors.SNAPSHOT_NOT_FOUND),  # bootstrap
        (snapshot_request(SNAP, -1), Errors.POSITION_OUT_OF_RANGE),
        (snapshot_request(SNAP, 10**9), Errors.POSITION_OUT_OF_RANGE),
        (snapshot_request(SNAP, 0, epoch=1), Errors.FENCED_LEADER_EPOCH),
        (snapshot_request(SNAP, 0, epoch=3), Errors.UNKNOWN_LEADER_EPOCH),
        (
            FetchSnapshotRequest("another-cluster", 2, 2, SNAP, 0, MAX_BYTES),
            Errors.INCONSISTENT_CLUSTER_ID,
        ),
    ],
)
def test_fetch_snapshot_errors(request_: FetchSnapshotRequest, error: Errors) -> None:
    h = snapshot_leader(advance=True)
    reply = h.deliver(request_)
    assert isinstance(reply, FetchSnapshotResponse)
    assert reply.error == error
    assert reply.data == b""


def test_a_follower_does_not_serve_snapshots() -> None:
    h = follower(leader_id=1, epoch=2, snapshots=snapshot_store(SNAP))
    reply = h.deliver(snapshot_request(SNAP, 0))
    assert isinstance(reply, FetchSnapshotResponse)
    assert reply.error == Errors.NOT_LEADER_OR_FOLLOWER
    assert reply.leader_id == 1


def test_fetch_snapshot_keeps_a_leader_in_check_quorum() -> None:
    h = snapshot_leader(advance=True)
    timeout = h.config.fetch_timeout_ms * 3 // 2
    for _ in range(4):
        h.advance(timeout // 2)
        h.deliver(snapshot_request(SNAP, 0, replica_id=2))
    assert h.state == "Leader"
    h.advance(timeout + 1)
    assert h.state == "Resigned"


# -- the follower fetches and installs a snapshot ---------------------------------------------


def redirected_follower(log: MemoryLog | None = None) -> Harness:
    h = follower(leader_id=1, epoch=2, log=log)
    out = h.only(FetchRequest, to=1)
    h.respond(out, FetchResponse(Errors.NONE, 1, 2, high_watermark=6, snapshot_id=SNAP))
    return h


def test_follower_fetches_the_snapshot_then_resumes_fetching_after_it() -> None:
    source = snapshot_store(SNAP)
    whole = source.read_all(SNAP)
    h = redirected_follower(make_log((1, 2)))
    position = 0
    while position < len(whole):
        out = h.only(FetchSnapshotRequest, to=1)
        assert out.request.snapshot_id == SNAP and out.request.position == position
        assert not h.sent(FetchRequest)  # plain fetches pause meanwhile
        chunk = whole[position : position + 1000]
        h.respond(out, FetchSnapshotResponse(
            Errors.NONE, 1, 2, SNAP, len(whole), position, chunk, "node1.test:9093"
        ))
        position += len(chunk)
    loaded = [o.snapshot_loaded for o in h.outputs if o.snapshot_loaded is not None]
    assert loaded == [SNAP]
    assert h.snapshots.ids() == [SNAP]
    assert h.snapshots.read_all(SNAP) == whole
    assert (h.log.start_offset, h.log.end_offset, h.log.last_epoch) == (5, 5, 1)
    assert h.log.flushed_offset == 5
    assert h.hw == 5
    nxt = h.only(FetchRequest, to=1).request
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (5, 1)


def test_follower_goes_back_to_fetch_when_the_leader_lost_the_snapshot() -> None:
    h = redirected_follower()
    h.respond(h.only(FetchSnapshotRequest), FetchSnapshotResponse(
        Errors.SNAPSHOT_NOT_FOUND, 1, 2, leader_endpoint="node1.test:9093"
    ))
    h.advance(h.config.retry_backoff_ms)
    assert h.only(FetchRequest, to=1).request.fetch_offset == 0
    assert h.snapshots.ids() == []


def test_a_damaged_snapshot_is_not_installed() -> None:
    whole = bytearray(snapshot_store(SNAP).read_all(SNAP))
    whole[100] ^= 0xFF
    h = redirected_follower()
    h.respond(h.only(FetchSnapshotRequest), FetchSnapshotResponse(
        Errors.NONE, 1, 2, SNAP, len(whole), 0, bytes(whole), "node1.test:9093"
    ))
    assert h.snapshots.ids() == []
    assert all(o.snapshot_loaded is None for o in h.outputs)
    assert h.only(FetchRequest, to=1).request.fetch_offset == 0


def test_a_chunk_at_the_wrong_position_restarts_the_transfer() -> None:
    whole = snapshot_store(SNAP).read_all(SNAP)
    h = redirected_follower()
    h.respond(h.only(FetchSnapshotRequest), FetchSnapshotResponse(
        Errors.NONE, 1, 2, SNAP, len(whole), 7, whole[7:100], "node1.test:9093"
    ))
    assert h.only(FetchRequest, to=1).request.fetch_offset == 0


def test_a_leader_change_abandons_the_partial_snapshot() -> None:
    whole = snapshot_store(SNAP).read_all(SNAP)
    h = redirected_follower()
    h.respond(h.only(FetchSnapshotRequest), FetchSnapshotResponse(
        Errors.NONE, 1, 2, SNAP, len(whole), 0, whole[:100], "node1.test:9093"
    ))
    h.respond(h.only(FetchSnapshotRequest), FetchSnapshotResponse(
        Errors.FENCED_LEADER_EPOCH, 3, 3, leader_endpoint="node3.test:9093"
    ))
    assert (h.state, h.leader_id) == ("Follower", 3)
    h.advance(h.config.retry_backoff_ms)
    assert h.sent(FetchRequest, to=3)
    assert not h.sent(FetchSnapshotRequest)


def test_a_snapshot_below_the_high_watermark_is_refused() -> None:
    h = follower(leader_id=1, epoch=2, log=make_log((1, 8)))
    h.respond(h.only(FetchRequest), fetch_response(1, 2, high_watermark=8))
    assert h.hw == 8
    h.respond(h.only(FetchRequest), FetchResponse(Errors.NONE, 1, 2, snapshot_id=SNAP))
    whole = snapshot_store(SNAP).read_all(SNAP)
    with pytest.raises(RaftInvariantError):
        h.respond(h.only(FetchSnapshotRequest), FetchSnapshotResponse(
            Errors.NONE, 1, 2, SNAP, len(whole), 0, whole, "node1.test:9093"
        ))


def test_an_empty_follower_catches_up_through_the_snapshot_end_to_end() -> None:
    lead = snapshot_leader(advance=True)
    for i in range(3):
        lead.append([b"after-%d" % i])
    lead.flush()
    fresh = follower(leader_id=1, epoch=2, node_id=3)
    for _ in range(200):
        fresh.flush()
        sent = fresh.outbox[:]
        if not sent:
            fresh.advance(10)
            continue
        for out in sent:
            route(fresh, lead, out, wait_ms=VOTER_HW_NEWS_LINGER_MS)
        if fresh.log.end_offset == lead.log.end_offset and fresh.hw == lead.hw:
            break
    assert fresh.snapshots.ids() == [SNAP]
    assert fresh.log.start_offset == SNAP.offset
    assert list(fresh.log.batches(5, 100)) == list(lead.log.batches(5, 100))
    assert fresh.hw == lead.hw > SNAP.offset
