"""Restart: the state a node resumes in from its persisted election state and its log
(spec §3.6, and KafkaRaftClientTest's testInitialize* / QuorumStateTest)."""

from __future__ import annotations

import pytest
from core_harness import (
    Harness,
    end_epoch_response,
    fetch_response,
    make_log,
    vote_request,
    vote_response,
)

from kraft.core.errors import Errors, NotLeaderError, RaftInvariantError
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from kraft.election_state import PRIMORDIAL, ElectionState

EPOCH = 5


def test_fresh_node_starts_unattached_in_epoch_zero() -> None:
    h = Harness(1, persisted=PRIMORDIAL)
    assert (h.state, h.epoch, h.leader_id) == ("Unattached", 0, -1)
    assert h.persist_log == []
    assert h.sent(VoteRequest) == []


def test_persisted_leader_self_restarts_resigned_and_cannot_vote_again() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, leader_id=1), log=make_log((EPOCH, 2)))
    assert (h.state, h.epoch, h.leader_id) == ("Resigned", EPOCH, 1)
    assert h.persist_log == []  # Resigned is memory only: the file still names it leader
    with pytest.raises(NotLeaderError):
        h.append([b"x"])
    reply = h.deliver(vote_request(2, EPOCH, EPOCH, 99, voter_id=1))
    assert isinstance(reply, VoteResponse) and not reply.vote_granted
    assert h.persist_log == []


def test_resigned_after_restart_moves_to_the_next_epoch_after_its_election_timeout() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, leader_id=1), log=make_log((EPOCH, 2)))
    h.advance_to(999)
    assert h.state == "Resigned"
    t = h.run_until(lambda: h.state != "Resigned")
    assert 1000 <= t < 2000
    assert (h.state, h.epoch, h.leader_id) == ("Unattached", EPOCH + 1, -1)
    assert h.persist_log == [ElectionState(EPOCH + 1)]
    # From there the ordinary path: Prospective in EPOCH + 1, then a candidacy in EPOCH + 2.
    h.run_until(lambda: h.state == "Prospective")
    assert h.epoch == EPOCH + 1


def test_resigned_after_restart_tells_the_other_voters() -> None:
    # Kafka restarts a persisted leader as ResignedState with every other voter unacked, so
    # it sends EndQuorumEpoch (testInitializeAsResignedLeaderFromStateStore).
    h = Harness(1, persisted=ElectionState(EPOCH, leader_id=1), log=make_log((EPOCH, 2)))
    ends = h.sent(EndQuorumEpochRequest)
    assert {o.destination for o in ends} == {2, 3}
    for out in ends:
        assert (out.request.leader_id, out.request.leader_epoch) == (1, EPOCH)
    for out in ends:
        h.respond(out, end_epoch_response(1, EPOCH))
    h.advance(100)
    assert h.sent(EndQuorumEpochRequest) == []


def test_persisted_vote_for_self_restarts_as_candidate_in_the_same_epoch() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1), log=make_log((2, 3)))
    assert (h.state, h.epoch) == ("Candidate", EPOCH)
    assert h.persist_log == []
    votes = h.sent(VoteRequest)
    assert {o.destination for o in votes} == {2, 3}
    for out in votes:
        req = out.request
        assert (req.replica_epoch, req.pre_vote) == (EPOCH, False)
        assert (req.last_offset_epoch, req.last_offset) == (2, 3)
    h.respond(h.only(VoteRequest, to=3), vote_response(EPOCH, True))
    assert (h.state, h.epoch) == ("Leader", EPOCH)
    assert h.persist_log == [ElectionState(EPOCH, leader_id=1)]
    assert h.core.state.epoch_start_offset == 3


@pytest.mark.parametrize(
    "persisted",
    [ElectionState(2), ElectionState(2, voted_id=3), ElectionState(2, leader_id=1),
     ElectionState(2, voted_id=1), ElectionState(2, leader_id=3)],
    ids=["plain", "voted-other", "leader-self", "voted-self", "leader-other"],
)
def test_persisted_epoch_below_the_log_epoch_restarts_unattached_in_the_log_epoch(
    persisted: ElectionState,
) -> None:
    h = Harness(1, persisted=persisted, log=make_log((1, 2), (4, 2)))
    assert (h.state, h.epoch, h.leader_id) == ("Unattached", 4, -1)
    assert h.core.state.voted_id == -1
    # The corrected state is written durably.
    assert h.persist_log == [ElectionState(4)]


def test_persisted_leader_with_an_endpoint_restarts_as_follower() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, leader_id=3, voted_id=3),
                log=make_log((2, 3)))
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH, 3)
    assert h.persist_log == []
    assert h.core.state.voted_id == 3
    fetch = h.only(FetchRequest, to=3)
    assert fetch.endpoint == h.config.voters[3]
    req = fetch.request
    assert (req.current_leader_epoch, req.fetch_offset, req.last_fetched_epoch) == (EPOCH, 3, 2)
    assert req.replica_id == 1


def test_persisted_leader_without_an_endpoint_restarts_unattached_knowing_it() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, leader_id=9))
    assert (h.state, h.epoch, h.leader_id) == ("Unattached", EPOCH, 9)
    assert h.persist_log == []


def test_persisted_vote_for_another_restarts_voted() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, voted_id=3))
    assert (h.state, h.epoch) == ("Voted", EPOCH)
    assert h.core.state.voted_id == 3
    assert h.persist_log == []


def test_observer_restarts_following_its_persisted_leader() -> None:
    h = Harness(4, persisted=ElectionState(EPOCH, leader_id=2))
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH, 2)
    assert h.only(FetchRequest, to=2).request.replica_id == 4


def test_vote_without_a_local_id_is_fatal() -> None:
    with pytest.raises(RaftInvariantError):
        Harness(None, persisted=ElectionState(EPOCH, voted_id=2))


def test_single_voter_restarting_as_leader_leads_the_next_epoch_at_once() -> None:
    # Spec §3.6 "After initialize": a single voter in Unattached, Follower or Resigned goes
    # Prospective → Candidate → Leader (testInitializeAsLeaderFromStateStoreSingleMemberQuorum).
    h = Harness(1, voter_ids=(1,), persisted=ElectionState(2, leader_id=1))
    assert (h.state, h.epoch, h.leader_id) == ("Leader", 3, 1)
    assert h.persisted == ElectionState(3, leader_id=1)


def test_single_voter_restarting_unattached_leads_at_once() -> None:
    h = Harness(1, voter_ids=(1,), persisted=ElectionState(4), log=make_log((4, 2)))
    assert (h.state, h.epoch) == ("Leader", 5)
    assert h.core.state.epoch_start_offset == 2
    assert h.sent(BeginQuorumEpochRequest) == []


def test_a_node_named_leader_of_an_epoch_it_forgot_stands_aside_in_that_epoch() -> None:
    # A voter that lost its disk restarts at epoch 0 while its peers still name it leader of
    # epoch 4. Following itself is impossible, and a vote in epoch 4 could elect a second
    # leader there: it stays Unattached in epoch 4, knowing itself as that epoch's leader.
    fresh = Harness(1)
    discovery = next(o for o in fresh.outbox if isinstance(o.request, FetchRequest))
    fresh.respond(discovery, fetch_response(1, 4, error=Errors.FENCED_LEADER_EPOCH))
    assert (fresh.state, fresh.epoch, fresh.leader_id) == ("Unattached", 4, 1)
    assert fresh.persisted == ElectionState(4, leader_id=1)
    refused = fresh.deliver(vote_request(2, 4, last_epoch=0, last_offset=0))
    assert isinstance(refused, VoteResponse) and not refused.vote_granted
