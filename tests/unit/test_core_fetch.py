"""Fetch (spec §2.4): the leader's validation, divergence and long poll, and the follower's
truncation, append, high watermark and flush-before-fetch rule."""

from __future__ import annotations

import pytest
from core_harness import (
    MAX_BYTES,
    Harness,
    Network,
    fetch_request,
    fetch_response,
    follower,
    leader,
    make_log,
    offsets_in,
    route,
    vote_request,
    vote_response,
)

from kraft.core.errors import Errors, RaftInvariantError
from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest
from kraft.core.rpc_fetch import HW_NEWS_LINGER_MS, VOTER_HW_NEWS_LINGER_MS
from kraft.core.voters import ReplicaKey
from kraft.election_state import ElectionState
from kraft.log.base import OffsetAndEpoch

# -- divergence ------------------------------------------------------------------------------


def divergence_leader() -> Harness:
    """Leader of epoch 6 whose log holds epoch 1 at 0-2, epoch 3 at 3-5, epoch 5 at 6-8 (and
    its LeaderChange record at 9)."""
    h = Harness(
        1, persisted=ElectionState(6, voted_id=1), log=make_log((1, 3), (3, 3), (5, 3))
    )
    h.respond(h.only(VoteRequest, to=2), vote_response(6, True))
    assert h.state == "Leader"
    h.flush()
    h.clear_outbox()
    return h


@pytest.mark.parametrize(
    ("fetch_offset", "last_epoch", "diverging"),
    [
        (6, 2, OffsetAndEpoch(3, 1)),  # the spec's example
        (7, 3, OffsetAndEpoch(6, 3)),  # epoch 3 ends at 6
        (12, 6, OffsetAndEpoch(10, 6)),  # beyond the leader's end
        (6, 3, None),
        (3, 1, None),
        (0, 0, None),
        (10, 6, None),
    ],
)
def test_leader_reports_where_the_fetcher_diverges(
    fetch_offset: int, last_epoch: int, diverging: OffsetAndEpoch | None
) -> None:
    h = divergence_leader()
    token = h.deliver_async(fetch_request(2, 6, fetch_offset, last_epoch, max_wait_ms=500))
    reply = h.reply_for(token)
    if diverging is None and fetch_offset == h.log.end_offset:
        assert reply is None  # caught up, only the HW to learn: answered after the linger
        h.advance(VOTER_HW_NEWS_LINGER_MS)
        reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)  # a divergence is answered at once, never parked
    assert reply.error == Errors.NONE
    assert reply.diverging_epoch == diverging
    if diverging is not None:
        assert reply.records == b""
        # A diverging fetch acknowledges nothing.
        voter2 = next(v for v in h.core.describe_quorum(h.now).voters if v.replica_id == 2)
        assert voter2.log_end_offset == -1


def test_follower_truncates_to_the_divergence_point_and_catches_up() -> None:
    lead = divergence_leader()
    f = Harness(2, persisted=ElectionState(6, leader_id=1), log=make_log((1, 3), (2, 3)))
    first = f.only(FetchRequest, to=1)
    assert (first.request.fetch_offset, first.request.last_fetched_epoch) == (6, 2)
    reply = route(f, lead, first)
    assert isinstance(reply, FetchResponse)
    assert reply.diverging_epoch == OffsetAndEpoch(3, 1)
    assert (f.log.end_offset, f.log.last_epoch) == (3, 1)
    second = f.only(FetchRequest, to=1)
    assert (second.request.fetch_offset, second.request.last_fetched_epoch) == (3, 1)
    reply = route(f, lead, second)
    assert isinstance(reply, FetchResponse)
    assert offsets_in(reply.records) == list(range(3, 10))
    f.flush()
    assert f.log.end_offset == lead.log.end_offset
    mine = [(b.base_offset, b.epoch, b.records) for b in f.log.batches(0, f.log.end_offset)]
    theirs = [
        (b.base_offset, b.epoch, b.records) for b in lead.log.batches(0, lead.log.end_offset)
    ]
    assert mine == theirs


def test_truncation_takes_the_smaller_end_of_the_shared_epoch() -> None:
    f = follower(log=make_log((1, 3), (2, 3)))
    f.respond(f.only(FetchRequest, to=1), fetch_response(1, 5, diverging=OffsetAndEpoch(4, 1)))
    assert (f.log.end_offset, f.log.last_epoch) == (3, 1)


def test_follower_never_truncates_below_its_high_watermark() -> None:
    f = follower(log=make_log((1, 3), (2, 3)))
    f.respond(f.only(FetchRequest, to=1), fetch_response(1, 5, high_watermark=5))
    assert f.hw == 5
    fetch = f.only(FetchRequest, to=1)
    with pytest.raises(RaftInvariantError):
        f.respond(fetch, fetch_response(1, 5, diverging=OffsetAndEpoch(3, 1)))
    assert f.log.end_offset == 6


def test_follower_may_truncate_down_to_its_high_watermark() -> None:
    f = follower(log=make_log((1, 3), (2, 3)))
    f.respond(f.only(FetchRequest, to=1), fetch_response(1, 5, high_watermark=3))
    f.respond(f.only(FetchRequest, to=1), fetch_response(1, 5, diverging=OffsetAndEpoch(3, 1)))
    assert f.log.end_offset == 3


# -- leader-side validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        dict(max_wait_ms=-1),
        dict(fetch_offset=-1),
        dict(last_fetched_epoch=-1),
        dict(last_fetched_epoch=2),  # above CurrentLeaderEpoch 1
    ],
    ids=["negative-max-wait", "negative-offset", "negative-last-epoch", "last-epoch-too-new"],
)
def test_invalid_fetch_request(fields: dict) -> None:
    h = leader()
    args = dict(replica_id=2, epoch=1, fetch_offset=1, last_fetched_epoch=1, max_wait_ms=0)
    args.update(fields)
    reply = h.deliver(fetch_request(**args))
    assert isinstance(reply, FetchResponse)
    assert reply.error == Errors.INVALID_REQUEST
    assert reply.records == b""
    assert h.core.describe_quorum(h.now).voters[1].log_end_offset == -1


@pytest.mark.parametrize(
    ("cluster_id", "error"),
    [("another", Errors.INCONSISTENT_CLUSTER_ID), ("", Errors.INCONSISTENT_CLUSTER_ID),
     (None, Errors.NONE)],
    ids=["other", "empty", "none"],
)
def test_fetch_cluster_id(cluster_id: str | None, error: Errors) -> None:
    h = leader()
    reply = h.deliver(fetch_request(2, 1, 0, 0, cluster_id=cluster_id))
    assert isinstance(reply, FetchResponse)
    assert reply.error == error


def test_fetch_with_an_older_epoch_is_fenced() -> None:
    h = leader(persisted=ElectionState(4))
    assert h.epoch == 5
    reply = h.deliver(fetch_request(2, 4, 0, 0))
    assert isinstance(reply, FetchResponse)
    assert (reply.error, reply.leader_id, reply.leader_epoch) == (
        Errors.FENCED_LEADER_EPOCH, 1, 5,
    )
    assert reply.leader_endpoint == h.config.local_endpoint
    assert reply.records == b""


def test_fetch_with_a_newer_epoch_is_unknown() -> None:
    h = leader()
    reply = h.deliver(fetch_request(2, 2, 0, 0))
    assert isinstance(reply, FetchResponse)
    assert (reply.error, reply.leader_epoch) == (Errors.UNKNOWN_LEADER_EPOCH, 1)
    assert h.epoch == 1 and h.state == "Leader"


@pytest.mark.parametrize("state", ["follower", "unattached", "candidate", "resigned"])
def test_fetch_to_a_non_leader_in_the_same_epoch(state: str) -> None:
    persisted = {
        "follower": ElectionState(5, leader_id=1),
        "unattached": ElectionState(5),
        "candidate": ElectionState(5, voted_id=2),
        "resigned": ElectionState(5, leader_id=2),
    }[state]
    h = Harness(2, persisted=persisted)
    reply = h.deliver(fetch_request(3, 5, 0, 0))
    assert isinstance(reply, FetchResponse)
    assert reply.error == Errors.NOT_LEADER_OR_FOLLOWER
    assert reply.leader_epoch == 5
    if state == "follower":
        assert (reply.leader_id, reply.leader_endpoint) == (1, h.config.voters[1])
    if state in ("unattached", "candidate"):
        assert reply.leader_id == -1


# -- long poll -----------------------------------------------------------------------------


def parked_leader() -> tuple[Harness, int]:
    """A leader (LEO 1, HW 1 once voter 2 fetched) with voter 2's caught-up fetch parked."""
    h = leader()
    token = h.deliver_async(fetch_request(2, 1, 1, 1, max_wait_ms=500, high_watermark=1))
    assert h.hw == 1
    assert h.reply_for(token) is None
    return h, token


def test_parked_fetch_is_completed_by_an_append_before_the_leader_flushes() -> None:
    h, token = parked_leader()
    h.advance(100)
    assert h.reply_for(token) is None
    h.append([b"a", b"b"])
    assert h.log.flushed_offset == 1  # the followers' fsync runs alongside the leader's
    reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)
    assert reply.error == Errors.NONE
    assert offsets_in(reply.records) == [1, 2]


def test_parked_fetch_times_out_with_an_empty_response() -> None:
    h, token = parked_leader()
    parked_at = h.now
    h.advance_to(parked_at + 499)
    assert h.reply_for(token) is None
    assert h.core.next_deadline() <= parked_at + 500
    h.advance_to(parked_at + 500)
    reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)
    assert (reply.error, reply.records, reply.diverging_epoch) == (Errors.NONE, b"", None)
    assert (reply.leader_id, reply.leader_epoch, reply.high_watermark) == (1, 1, 1)


@pytest.mark.parametrize("how", ["resign", "shutdown", "higher-epoch-vote", "begin-epoch"])
def test_parked_fetch_fails_when_leadership_is_lost(how: str) -> None:
    from core_harness import begin_epoch

    h, token = parked_leader()
    if how == "resign":
        h.resign()
    elif how == "shutdown":
        h.begin_shutdown()
    elif how == "higher-epoch-vote":
        h.deliver(vote_request(3, 2, 1, 1))
    else:
        h.deliver(begin_epoch(3, 2))
    assert h.state != "Leader"
    reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)
    assert reply.error == Errors.NOT_LEADER_OR_FOLLOWER
    assert reply.records == b""


def test_fetch_with_max_wait_zero_is_answered_at_once() -> None:
    h, _ = parked_leader()
    reply = h.deliver(fetch_request(3, 1, 1, 1, max_wait_ms=0, high_watermark=1))
    assert isinstance(reply, FetchResponse)
    assert reply.records == b""


def test_fetch_with_only_a_newer_high_watermark_to_learn_waits_for_the_linger() -> None:
    h, _ = parked_leader()
    token = h.deliver_async(fetch_request(3, 1, 1, 1, max_wait_ms=500, high_watermark=0))
    assert h.reply_for(token) is None
    h.advance(VOTER_HW_NEWS_LINGER_MS)
    reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)
    assert (reply.records, reply.high_watermark) == (b"", 1)


def test_a_voter_waits_longer_for_records_to_ride_along_than_an_observer() -> None:
    """An observer (a broker) serves what it learns: its HW news waits 1 ms. A voter's HW only
    paces its own replay: it waits long enough for a remote writer's next append."""
    h, _ = parked_leader()
    voter = h.deliver_async(fetch_request(3, 1, 1, 1, max_wait_ms=500, high_watermark=0))
    observer = h.deliver_async(fetch_request(9, 1, 1, 1, max_wait_ms=500, high_watermark=0))
    h.advance(HW_NEWS_LINGER_MS)
    answered = h.reply_for(observer)
    assert isinstance(answered, FetchResponse) and answered.high_watermark == 1
    assert h.reply_for(voter) is None
    h.advance(VOTER_HW_NEWS_LINGER_MS - HW_NEWS_LINGER_MS - 1)
    assert h.reply_for(voter) is None
    h.advance(1)
    reply = h.reply_for(voter)
    assert isinstance(reply, FetchResponse)
    assert (reply.records, reply.high_watermark) == (b"", 1)


def test_an_append_during_the_linger_rides_along_with_the_high_watermark() -> None:
    h, _ = parked_leader()
    token = h.deliver_async(fetch_request(3, 1, 1, 1, max_wait_ms=500, high_watermark=0))
    h.append([b"a"])
    reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)
    assert (offsets_in(reply.records), reply.high_watermark) == ([1], 1)


def test_parked_fetch_completes_when_the_high_watermark_moves() -> None:
    h = leader(voter_ids=(1, 2, 3, 4, 5))
    token = h.deliver_async(fetch_request(2, 1, 1, 1, max_wait_ms=500, high_watermark=0))
    assert h.reply_for(token) is None  # no HW yet: two of five hold the LeaderChange
    h.deliver(fetch_request(3, 1, 1, 1, max_wait_ms=0))
    assert h.hw == 1
    assert h.reply_for(token) is None  # the HW moved: the answer waits out the linger
    h.advance(VOTER_HW_NEWS_LINGER_MS)
    reply = h.reply_for(token)
    assert isinstance(reply, FetchResponse)
    assert (reply.error, reply.records, reply.high_watermark) == (Errors.NONE, b"", 1)


def test_leader_ships_unflushed_records_but_counts_only_its_flushed_ones() -> None:
    h, _ = parked_leader()
    h.append([b"a", b"b"])
    assert h.log.end_offset == 3 and h.log.flushed_offset == 1
    reply = h.deliver(fetch_request(3, 1, 1, 1, max_wait_ms=0, high_watermark=1))
    assert isinstance(reply, FetchResponse)
    assert offsets_in(reply.records) == [1, 2]
    h.deliver(fetch_request(3, 1, 3, 1, max_wait_ms=0, high_watermark=1))
    assert h.hw == 1  # voter 3 holds offset 2 durably, the leader not yet: one of three
    h.flush()
    assert h.hw == 3


def test_two_followers_commit_what_the_leader_has_not_flushed() -> None:
    h, _ = parked_leader()
    h.append([b"a", b"b"])
    h.deliver(fetch_request(3, 1, 3, 1, max_wait_ms=0, high_watermark=1))
    h.deliver(fetch_request(2, 1, 3, 1, max_wait_ms=0, high_watermark=1))
    assert h.log.flushed_offset == 1
    assert h.hw == 3  # two of three voters hold offsets 1-2 on disk: a majority


def test_fetch_respects_max_bytes_but_returns_at_least_one_batch() -> None:
    h = leader()
    for i in range(5):
        h.append([bytes([i]) * 100])
    h.flush()
    reply = h.deliver(fetch_request(2, 1, 1, 1, max_bytes=1))
    assert isinstance(reply, FetchResponse)
    assert offsets_in(reply.records) == [1]
    reply = h.deliver(fetch_request(2, 1, 1, 1, max_bytes=MAX_BYTES))
    assert isinstance(reply, FetchResponse)
    assert offsets_in(reply.records) == [1, 2, 3, 4, 5]


# -- follower side -------------------------------------------------------------------------


def leader_records(count: int, epoch: int = 5, start: int = 0) -> bytes:
    log = make_log((epoch, start + count))
    return log.read(start, MAX_BYTES, log.end_offset)


def test_follower_request_fields() -> None:
    f = follower(log=make_log((3, 4)))
    out = f.only(FetchRequest, to=1)
    req = out.request
    assert (req.replica_id, req.current_leader_epoch) == (2, 5)
    assert (req.fetch_offset, req.last_fetched_epoch) == (4, 3)
    assert req.max_wait_ms == 500
    assert req.high_watermark == f.hw
    assert out.endpoint == f.config.voters[1]


def test_follower_appends_and_takes_the_smaller_of_leader_hw_and_its_end() -> None:
    f = follower()
    f.respond(f.only(FetchRequest, to=1),
              fetch_response(1, 5, records=leader_records(3), high_watermark=10))
    assert f.log.end_offset == 3
    assert f.hw == 3
    assert f.last.high_watermark == 3


def test_follower_high_watermark_never_goes_back() -> None:
    f = follower()
    f.respond(f.only(FetchRequest, to=1),
              fetch_response(1, 5, records=leader_records(3), high_watermark=3))
    f.flush()
    f.respond(f.only(FetchRequest, to=1), fetch_response(1, 5, high_watermark=2))
    assert f.hw == 3
    f.respond(f.only(FetchRequest, to=1), fetch_response(1, 5, high_watermark=-1))
    assert f.hw == 3


def test_voter_follower_fetches_again_only_once_its_log_is_flushed() -> None:
    g = follower()
    g.respond(g.only(FetchRequest, to=1),
              fetch_response(1, 5, records=leader_records(3), high_watermark=0))
    assert g.log.flushed_offset < g.log.end_offset
    g.advance(100)
    assert g.sent(FetchRequest) == []
    g.flush()
    req = g.only(FetchRequest, to=1).request
    assert (req.fetch_offset, req.last_fetched_epoch) == (3, 5)


def test_observer_fetches_without_waiting_for_a_flush() -> None:
    f = follower(node_id=4)
    f.respond(f.only(FetchRequest, to=1),
              fetch_response(1, 5, records=leader_records(3), high_watermark=0))
    assert f.log.flushed_offset < f.log.end_offset
    assert f.only(FetchRequest, to=1).request.fetch_offset == 3


def test_follower_sends_one_fetch_at_a_time() -> None:
    f = follower()
    f.advance(100)
    f.advance(100)
    assert len(f.sent(FetchRequest)) == 1


def test_fetch_response_naming_a_new_leader_in_a_higher_epoch_is_followed() -> None:
    f = follower()
    f.respond(
        f.only(FetchRequest, to=1),
        fetch_response(3, 6, error=Errors.NOT_LEADER_OR_FOLLOWER),
    )
    assert (f.state, f.epoch, f.leader_id) == ("Follower", 6, 3)
    assert f.persisted == ElectionState(6, leader_id=3)
    assert f.only(FetchRequest, to=3).request.current_leader_epoch == 6


def test_fenced_fetch_response_without_a_leader_makes_the_node_unattached() -> None:
    f = follower()
    f.respond(
        f.only(FetchRequest, to=1), fetch_response(-1, 7, error=Errors.FENCED_LEADER_EPOCH)
    )
    assert (f.state, f.epoch, f.leader_id) == ("Unattached", 7, -1)


def test_stale_fetch_response_is_ignored() -> None:
    f = follower()
    f.respond(f.only(FetchRequest, to=1),
              fetch_response(1, 4, records=leader_records(3, epoch=4), high_watermark=3))
    assert (f.state, f.epoch, f.log.end_offset, f.hw) == ("Follower", 5, 0, 0)


def test_unattached_voter_discovers_the_leader_through_a_fetch() -> None:
    h = Harness(2, persisted=ElectionState(5))
    (discovery,) = h.sent(FetchRequest)
    assert discovery.destination in (1, 3)
    h.respond(
        discovery,
        fetch_response(1, 5, error=Errors.NOT_LEADER_OR_FOLLOWER),
    )
    assert (h.state, h.epoch, h.leader_id) == ("Follower", 5, 1)


def test_replication_through_the_network() -> None:
    lead = Harness(1, persisted=ElectionState(2, voted_id=1), seed=1)
    f2 = Harness(2, persisted=ElectionState(2, voted_id=1), seed=2)
    f3 = Harness(3, persisted=ElectionState(2, voted_id=1), seed=3)
    net = Network(lead, f2, f3)
    assert lead.state == "Leader"
    last = lead.append([b"x", b"y", b"z"])
    net.run_until(lambda: f2.hw > last and f3.hw > last, limit_ms=2000)
    assert lead.hw == last + 1
    for f in (f2, f3):
        assert [r for b in f.log.batches(1, f.log.end_offset) for r in b.records] == [
            b"x", b"y", b"z",
        ]


def test_a_fetch_claiming_the_leaders_own_id_is_refused_and_changes_nothing() -> None:
    # A node id configured twice: the impostor's fetch offset must never overwrite the
    # leader's own progress (which only its flushes move), so the HW cannot run ahead of it.
    h = leader()
    own = h.core.describe_quorum(h.now).voters[0]
    reply = h.deliver(fetch_request(1, h.epoch, fetch_offset=1_000, last_fetched_epoch=1))
    assert isinstance(reply, FetchResponse) and reply.error == Errors.INVALID_REQUEST
    assert h.core.describe_quorum(h.now).voters[0] == own
    leader_state = h.core.quorum.state
    with pytest.raises(ValueError, match="the leader itself"):
        leader_state.update_replica(  # type: ignore[union-attr]
            ReplicaKey(1), 1_000, h.now, h.log.end_offset
        )


def test_a_vote_claiming_the_voters_own_id_is_refused() -> None:
    h = leader()
    epoch = h.epoch
    reply = h.deliver(vote_request(1, epoch + 1, 1, 5, False, 1))
    assert reply is not None and reply.error == Errors.INVALID_REQUEST
    assert (h.state, h.epoch) == ("Leader", epoch)
