"""BeginQuorumEpoch and EndQuorumEpoch (spec §2.2, §2.3), resignation and graceful shutdown
(spec §3.7)."""

from __future__ import annotations

import pytest
from core_harness import (
    Harness,
    begin_epoch,
    begin_epoch_response,
    end_epoch,
    end_epoch_response,
    fetch_request,
    fetch_response,
    follower,
    leader,
    make_log,
    vote_request,
)

from kraft.core.errors import Errors, NotLeaderError, RaftError, RaftInvariantError
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.election_state import ElectionState

EPOCH = 5

# -- BeginQuorumEpoch ------------------------------------------------------------------------


def node_in(state: str) -> Harness:
    if state == "unattached":
        h = Harness(1, persisted=ElectionState(EPOCH))
    elif state == "voted":
        h = Harness(1, persisted=ElectionState(EPOCH, voted_id=2))
    elif state == "prospective":
        h = Harness(1, persisted=ElectionState(EPOCH))
        h.run_until(lambda: h.state == "Prospective")
    elif state == "candidate":
        h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1))
    else:  # pragma: no cover
        raise ValueError(state)
    h.persist_log.clear()
    return h


@pytest.mark.parametrize("state", ["unattached", "voted", "prospective", "candidate"])
def test_begin_quorum_epoch_makes_a_follower_of_the_same_epoch(state: str) -> None:
    h = node_in(state)
    voted = h.core.status().voted_id
    reply = h.deliver(begin_epoch(2, EPOCH, voter_id=1))
    assert isinstance(reply, BeginQuorumEpochResponse)
    assert (reply.error, reply.leader_id, reply.leader_epoch) == (Errors.NONE, 2, EPOCH)
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH, 2)
    # A vote cast in this epoch is kept (spec §3.1: Follower keeps its votedKey in the epoch).
    assert h.persist_log == [ElectionState(EPOCH, leader_id=2, voted_id=voted)]
    fetch = h.only(FetchRequest, to=2)
    assert fetch.request.current_leader_epoch == EPOCH
    assert fetch.endpoint == h.config.voters[2]


@pytest.mark.parametrize("state", ["unattached", "voted", "prospective", "candidate", "leader"])
def test_begin_quorum_epoch_of_a_higher_epoch_makes_a_follower(state: str) -> None:
    h = leader() if state == "leader" else node_in(state)
    epoch = h.epoch + 2
    h.persist_log.clear()
    reply = h.deliver(begin_epoch(3, epoch))
    assert isinstance(reply, BeginQuorumEpochResponse)
    assert reply.error == Errors.NONE
    assert (h.state, h.epoch, h.leader_id) == ("Follower", epoch, 3)
    assert h.persist_log == [ElectionState(epoch, leader_id=3)]


def test_begin_quorum_epoch_of_an_older_epoch_is_fenced() -> None:
    h = node_in("candidate")
    reply = h.deliver(begin_epoch(2, EPOCH - 1))
    assert isinstance(reply, BeginQuorumEpochResponse)
    assert (reply.error, reply.leader_epoch) == (Errors.FENCED_LEADER_EPOCH, EPOCH)
    assert (h.state, h.epoch, h.persist_log) == ("Candidate", EPOCH, [])


def test_second_leader_in_the_same_epoch_is_a_safety_violation() -> None:
    h = follower(leader_id=2, epoch=EPOCH, node_id=1)
    with pytest.raises(RaftInvariantError):
        h.deliver(begin_epoch(3, EPOCH))


def test_another_leader_of_the_leaders_own_epoch_is_a_safety_violation() -> None:
    h = leader()
    with pytest.raises(RaftInvariantError):
        h.deliver(begin_epoch(2, h.epoch))


def test_begin_quorum_epoch_repeated_by_the_same_leader_is_harmless() -> None:
    h = follower(leader_id=2, epoch=EPOCH, node_id=1)
    reply = h.deliver(begin_epoch(2, EPOCH))
    assert isinstance(reply, BeginQuorumEpochResponse) and reply.error == Errors.NONE
    assert (h.state, h.leader_id, h.persist_log) == ("Follower", 2, [])


def test_begin_quorum_epoch_checks_the_voter_key_after_following() -> None:
    h = node_in("unattached")
    reply = h.deliver(begin_epoch(2, EPOCH + 1, voter_id=3))
    assert isinstance(reply, BeginQuorumEpochResponse)
    assert reply.error == Errors.INVALID_VOTER_KEY
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH + 1, 2)


@pytest.mark.parametrize(
    ("cluster_id", "error"),
    [("another", Errors.INCONSISTENT_CLUSTER_ID), ("", Errors.INCONSISTENT_CLUSTER_ID),
     (None, Errors.NONE)],
    ids=["other", "empty", "none"],
)
def test_begin_quorum_epoch_cluster_id(cluster_id: str | None, error: Errors) -> None:
    h = node_in("unattached")
    reply = h.deliver(begin_epoch(2, EPOCH + 1, cluster_id=cluster_id))
    assert isinstance(reply, BeginQuorumEpochResponse)
    assert reply.error == error
    assert h.state == ("Follower" if error == Errors.NONE else "Unattached")


def test_leader_repeats_begin_quorum_epoch_to_voters_that_do_not_fetch() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1))
    h.respond(h.only(VoteRequest, to=2), VoteResponse(Errors.NONE, -1, EPOCH, True))
    assert h.state == "Leader"
    elected = h.now
    for voter in (2, 3):
        h.respond(h.only(BeginQuorumEpochRequest, to=voter), begin_epoch_response(1, EPOCH))
    h.flush()
    h.advance_to(elected + 900)
    h.deliver(fetch_request(2, EPOCH, 0, 0))
    h.advance_to(elected + 999)
    assert h.sent(BeginQuorumEpochRequest) == []
    h.advance_to(elected + 1000)
    # Voter 3 has not fetched: it is reminded. Voter 2 fetched 100 ms ago: it is not.
    assert h.destinations(BeginQuorumEpochRequest) == {3}


# -- resignation -----------------------------------------------------------------------------


def five_voter_leader() -> Harness:
    h = leader(voter_ids=(1, 2, 3, 4, 5))
    h.append([b"a", b"b"])
    h.flush()  # LEO 3
    h.deliver(fetch_request(3, 1, 3, 1))
    h.deliver(fetch_request(2, 1, 1, 1))
    h.deliver(fetch_request(5, 1, 2, 1))
    return h


def test_resigning_leader_names_successors_by_descending_fetch_offset() -> None:
    h = five_voter_leader()
    h.resign()
    assert (h.state, h.epoch) == ("Resigned", 1)
    ends = h.sent(EndQuorumEpochRequest)
    assert {o.destination for o in ends} == {2, 3, 4, 5}
    for out in ends:
        req = out.request
        assert (req.leader_id, req.leader_epoch) == (1, 1)
        assert req.preferred_successors == (3, 5, 2, 4)  # 4 never fetched: last
    with pytest.raises(NotLeaderError):
        h.append([b"late"])


def test_resign_rules() -> None:
    h = leader(persisted=ElectionState(3))
    epoch = h.epoch
    h.resign(epoch - 1)  # an older epoch: ignored
    assert h.state == "Leader"
    with pytest.raises(RaftError):
        h.resign(epoch + 1)
    assert h.state == "Leader"
    f = follower()
    with pytest.raises(NotLeaderError):
        f.resign(f.epoch)


def test_end_quorum_epoch_is_retried_until_acknowledged() -> None:
    h = leader(election_timeout_ms=5000)
    h.resign()
    h.respond(h.only(EndQuorumEpochRequest, to=2), end_epoch_response(1, h.epoch))
    h.fail(h.only(EndQuorumEpochRequest, to=3))
    h.advance(h.config.retry_backoff_ms)
    assert h.destinations(EndQuorumEpochRequest) == {3}
    h.fail(h.only(EndQuorumEpochRequest, to=3))
    h.advance(h.config.retry_backoff_ms)
    assert h.sent(EndQuorumEpochRequest) == []  # a second failure in a row backs off twice as long
    h.advance(h.config.retry_backoff_ms)
    h.respond(h.only(EndQuorumEpochRequest, to=3), end_epoch_response(1, h.epoch))
    h.advance(1000)
    assert h.sent(EndQuorumEpochRequest) == []
    assert h.state == "Resigned"


def test_resigned_leader_moves_to_the_next_epoch_after_its_election_timeout() -> None:
    h = leader()
    h.resign()
    resigned_at = h.now
    t = h.run_until(lambda: h.state != "Resigned")
    assert 1000 <= t - resigned_at < 2000
    assert (h.state, h.epoch, h.leader_id) == ("Unattached", 2, -1)
    assert h.persisted == ElectionState(2)


def test_resigned_leader_refuses_votes_in_its_epoch_but_grants_pre_votes() -> None:
    h = leader()
    h.resign()
    end = (h.log.last_epoch, h.log.end_offset)
    vote = h.deliver(vote_request(2, 1, 0, end[1]))
    pre = h.deliver(vote_request(2, 1, end[0], end[1], pre_vote=True))
    assert isinstance(vote, VoteResponse) and not vote.vote_granted
    assert isinstance(pre, VoteResponse) and pre.vote_granted


def test_resigned_leader_answers_fetch_with_not_leader() -> None:
    h = leader()
    h.resign()
    reply = h.deliver(fetch_request(2, 1, 1, 1))
    assert isinstance(reply, FetchResponse)
    assert reply.error == Errors.NOT_LEADER_OR_FOLLOWER


# -- EndQuorumEpoch receiver -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node_id", "successors", "backoff"),
    [
        (3, (3, 5, 2, 4), 0),
        (5, (3, 5, 2, 4), 125),  # (1000 >> 3) << 0
        (2, (3, 5, 2, 4), 250),  # (1000 >> 3) << 1
        (4, (3, 5, 2, 4), 500),  # (1000 >> 3) << 2
        (4, (3, 5, 2), 1000),  # not listed: the maximum
    ],
)
def test_end_quorum_epoch_backoff_by_position(
    node_id: int, successors: tuple[int, ...], backoff: int
) -> None:
    h = follower(leader_id=1, epoch=EPOCH, node_id=node_id, voter_ids=(1, 2, 3, 4, 5))
    h.advance_to(100)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    received = h.now
    reply = h.deliver(end_epoch(1, EPOCH, successors))
    assert isinstance(reply, EndQuorumEpochResponse)
    assert reply.error == Errors.NONE
    if backoff > 0:
        assert h.state == "Follower"
        h.advance_to(received + backoff - 1)
        assert h.state == "Follower"
        h.advance_to(received + backoff)
    assert (h.state, h.epoch) == ("Prospective", EPOCH)
    assert h.destinations(VoteRequest) == {1, 2, 3, 4, 5} - {node_id}


def test_unattached_node_told_it_is_first_successor_stands_at_once() -> None:
    h = Harness(2, persisted=ElectionState(EPOCH))
    reply = h.deliver(end_epoch(1, EPOCH, (2, 3)))
    assert isinstance(reply, EndQuorumEpochResponse) and reply.error == Errors.NONE
    assert (h.state, h.epoch, h.leader_id) == ("Prospective", EPOCH, 1)


def test_follower_told_the_leader_resigned_grants_pre_votes() -> None:
    h = follower(leader_id=1, epoch=EPOCH, node_id=3)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    pre = vote_request(2, EPOCH, 0, 0, pre_vote=True, voter_id=3)
    refused = h.deliver(pre)
    assert isinstance(refused, VoteResponse) and not refused.vote_granted
    h.deliver(end_epoch(1, EPOCH, (2, 3)))  # node 3 is second: it waits
    assert h.state == "Follower"
    granted = h.deliver(pre)
    assert isinstance(granted, VoteResponse) and granted.vote_granted


def test_end_quorum_epoch_of_an_older_epoch_is_fenced() -> None:
    h = node_in("candidate")
    reply = h.deliver(end_epoch(2, EPOCH - 1, (1,)))
    assert isinstance(reply, EndQuorumEpochResponse)
    assert (reply.error, reply.leader_epoch) == (Errors.FENCED_LEADER_EPOCH, EPOCH)
    assert (h.state, h.epoch) == ("Candidate", EPOCH)


@pytest.mark.parametrize(
    ("cluster_id", "error"),
    [("another", Errors.INCONSISTENT_CLUSTER_ID), ("", Errors.INCONSISTENT_CLUSTER_ID),
     (None, Errors.NONE)],
    ids=["other", "empty", "none"],
)
def test_end_quorum_epoch_cluster_id(cluster_id: str | None, error: Errors) -> None:
    h = follower(leader_id=1, epoch=EPOCH, node_id=2)
    reply = h.deliver(end_epoch(1, EPOCH, (3, 2), cluster_id=cluster_id))
    assert isinstance(reply, EndQuorumEpochResponse)
    assert reply.error == error


def test_graceful_handover_elects_the_first_successor() -> None:
    from core_harness import Network

    lead = Harness(1, persisted=ElectionState(EPOCH, voted_id=1), seed=1)
    f2 = Harness(2, persisted=ElectionState(EPOCH, voted_id=1), seed=2)
    f3 = Harness(3, persisted=ElectionState(EPOCH, voted_id=1), seed=3)
    net = Network(lead, f2, f3)
    net.run_until(lambda: f2.hw == f3.hw == lead.log.end_offset)
    net.isolated.add(2)  # 2 falls behind on the next write
    lead.append([b"x"])
    net.run_until(lambda: f3.log.end_offset == lead.log.end_offset)
    net.isolated.clear()
    lead.resign()
    assert lead.sent(EndQuorumEpochRequest)[0].request.preferred_successors[0] == 3
    start = net.now
    net.run_until(lambda: f3.state == "Leader", limit_ms=1000)
    assert f3.epoch == EPOCH + 1
    assert net.now - start < 200


# -- graceful shutdown -----------------------------------------------------------------------


def test_graceful_shutdown_of_a_leader() -> None:
    h = leader()
    epoch = h.epoch
    h.begin_shutdown()
    assert (h.state, h.epoch) == ("Resigned", epoch)
    assert h.destinations(EndQuorumEpochRequest) == {2, 3}
    assert not h.core.shutdown_complete()
    with pytest.raises(NotLeaderError):
        h.append([b"x"])
    # It still answers votes while it waits for a successor.
    assert isinstance(h.deliver(vote_request(2, epoch + 1, epoch, 99)), VoteResponse)
    assert h.persisted == ElectionState(epoch + 1, voted_id=2)
    h.deliver(begin_epoch(2, epoch + 1))
    assert (h.state, h.leader_id) == ("Follower", 2)
    assert h.core.shutdown_complete()


def test_shutting_down_node_starts_no_election() -> None:
    h = leader()
    h.begin_shutdown()
    seen = len(h.outputs)
    h.run_until(lambda: h.now > 20_000)
    assert h.state == "Unattached"
    assert h.epoch == 2
    assert not any(
        isinstance(o.request, VoteRequest) for x in h.outputs[seen:] for o in x.requests
    )


def test_graceful_shutdown_of_a_follower_completes_at_once() -> None:
    h = follower()
    h.begin_shutdown()
    assert h.core.shutdown_complete()


def test_graceful_shutdown_of_a_single_voter_completes_at_once() -> None:
    h = Harness(1, voter_ids=(1,), log=make_log())
    h.run_until(lambda: h.state == "Leader", limit_ms=2000)
    h.begin_shutdown()
    assert h.core.shutdown_complete()


def test_single_voter_that_resigns_leads_again_in_a_later_epoch() -> None:
    # Spec §3.2/§3.7: resign(epoch) takes a leader to Resigned, then Unattached(epoch + 1)
    # after its election timeout; a lone voter then elects itself again. It must not stay a
    # leader that refuses every append.
    h = Harness(1, voter_ids=(1,))
    h.run_until(lambda: h.state == "Leader", limit_ms=2000)
    h.flush()
    h.resign()
    h.run_until(lambda: h.state == "Leader" and h.epoch > 1, limit_ms=10_000)
    h.flush()
    last = h.append([b"after"])
    h.flush()
    assert h.hw == last + 1


def test_single_voter_leader_shutting_down_stops_serving() -> None:
    # Spec §3.7: the shutting-down leader either has resigned (NOT_LEADER_OR_FOLLOWER) or
    # answers leader-only RPCs with BROKER_NOT_AVAILABLE; it accepts no more appends.
    h = Harness(1, voter_ids=(1,))
    h.run_until(lambda: h.state == "Leader", limit_ms=2000)
    h.flush()
    h.begin_shutdown()
    assert h.core.shutdown_complete()
    with pytest.raises(NotLeaderError):
        h.append([b"x"])
    reply = h.deliver(fetch_request(4, h.epoch, 1, 1))
    assert isinstance(reply, FetchResponse)
    assert reply.error in (Errors.BROKER_NOT_AVAILABLE, Errors.NOT_LEADER_OR_FOLLOWER)
    h.advance(10_000)  # and it does not elect itself again while shutting down
    with pytest.raises(NotLeaderError):
        h.append([b"y"])


def test_fenced_begin_quorum_epoch_response_ends_the_leadership() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1))
    h.respond(h.only(VoteRequest, to=2), VoteResponse(Errors.NONE, -1, EPOCH, True))
    assert h.state == "Leader"
    h.respond(
        h.only(BeginQuorumEpochRequest, to=3),
        BeginQuorumEpochResponse(Errors.FENCED_LEADER_EPOCH, -1, EPOCH + 1),
    )
    assert (h.state, h.epoch) == ("Unattached", EPOCH + 1)
    assert h.persisted == ElectionState(EPOCH + 1)


def test_fetch_response_is_ignored_after_following_another_leader() -> None:
    h = follower(leader_id=1, epoch=EPOCH, node_id=2)
    stale = h.only(FetchRequest, to=1)
    h.deliver(begin_epoch(3, EPOCH + 1))
    assert (h.state, h.leader_id) == ("Follower", 3)
    records = make_log((EPOCH, 2)).read(0, 1 << 20, 2)
    h.respond(stale, fetch_response(1, EPOCH, records=records, high_watermark=2))
    assert (h.log.end_offset, h.hw) == (0, 0)
    assert h.only(FetchRequest, to=3).request.current_leader_epoch == EPOCH + 1
