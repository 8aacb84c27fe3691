"""Elections from the standing node's side (spec §2.1 response handling, §3.2, §3.3):
Unattached → Prospective → Candidate → Leader, lost rounds, backoff, retries, observers,
single voters, the fast-failover path and pre-vote keeping a stable leader."""

from __future__ import annotations

import itertools

import pytest
from core_harness import (
    Harness,
    Network,
    batches,
    begin_epoch,
    fetch_response,
    make_log,
    vote_request,
    vote_response,
)

from kraft.core.errors import Errors
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from kraft.core.raft import LeaderAndEpoch
from kraft.election_state import PRIMORDIAL, ElectionState
from kraft.log import LEADER_CHANGE, decode_control_record

EPOCH = 5


def unattached(**kw) -> Harness:
    return Harness(1, persisted=ElectionState(EPOCH), log=make_log((1, 2), (3, 2)), **kw)


def prospective(**kw) -> Harness:
    h = unattached(**kw)
    h.run_until(lambda: h.state == "Prospective")
    return h


def candidate(**kw) -> Harness:
    h = prospective(**kw)
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, True))
    assert h.state == "Candidate"
    return h


# -- Unattached → Prospective -------------------------------------------------------------


def test_unattached_voter_waits_a_random_election_timeout_then_turns_prospective() -> None:
    h = unattached()
    h.advance_to(999)
    assert h.state == "Unattached"
    t = h.run_until(lambda: h.state == "Prospective")
    assert 1000 <= t < 2000
    assert h.epoch == EPOCH  # a pre-vote does not bump the epoch
    assert h.persist_log == []  # and Prospective is memory only
    votes = h.sent(VoteRequest)
    assert {o.destination for o in votes} == {2, 3}
    for out in votes:
        req = out.request
        assert req.pre_vote
        assert (req.replica_id, req.replica_epoch) == (1, EPOCH)
        assert (req.last_offset_epoch, req.last_offset) == (3, 4)
        assert req.voter_id == out.destination
        assert out.endpoint == h.config.voters[out.destination]


def test_election_timeouts_are_spread_over_t_to_2t() -> None:
    times = set()
    for seed in range(20):
        h = Harness(1, persisted=ElectionState(EPOCH), seed=seed)
        times.add(h.run_until(lambda h=h: h.state == "Prospective"))
    assert all(1000 <= t < 2000 for t in times)
    assert len(times) > 5


def test_voter_follower_turns_prospective_after_the_fetch_timeout() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, leader_id=3), log=make_log((1, 2)))
    fetch = h.only(FetchRequest, to=3)
    h.advance_to(500)
    h.respond(fetch, fetch_response(3, EPOCH, high_watermark=0))  # resets the timer
    # The fetch timeout (2 s) plus a jitter below election.timeout / 4 against split votes.
    h.advance_to(2499)
    assert h.state == "Follower"
    h.advance_to(2500 + 250)
    assert (h.state, h.epoch, h.leader_id) == ("Prospective", EPOCH, 3)
    assert h.persist_log == []
    assert {o.destination for o in h.sent(VoteRequest)} == {2, 3}
    assert all(o.request.pre_vote for o in h.sent(VoteRequest))


# -- Prospective → Candidate → Leader ---------------------------------------------------------


def test_majority_of_pre_votes_makes_a_candidate_in_the_next_epoch() -> None:
    h = prospective()
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, True))
    assert (h.state, h.epoch) == ("Candidate", EPOCH + 1)
    # The candidate's own vote is durable before its vote requests leave.
    assert h.last.election_state == ElectionState(EPOCH + 1, voted_id=1)
    votes = h.last.requests
    assert {o.destination for o in votes} == {2, 3}
    for out in votes:
        assert isinstance(out.request, VoteRequest)
        assert not out.request.pre_vote
        assert out.request.replica_epoch == EPOCH + 1
        assert (out.request.last_offset_epoch, out.request.last_offset) == (3, 4)


def test_candidate_with_a_majority_becomes_leader() -> None:
    h = candidate()
    end_at_election = h.log.end_offset
    h.respond(h.only(VoteRequest, to=3), vote_response(EPOCH + 1, True))
    assert (h.state, h.epoch, h.leader_id) == ("Leader", EPOCH + 1, 1)
    assert h.last.election_state == ElectionState(EPOCH + 1, leader_id=1)
    assert h.last.leader == LeaderAndEpoch(1, EPOCH + 1)
    # The LeaderChange control record opens the epoch at the LEO it was elected with.
    assert h.core.state.epoch_start_offset == end_at_election
    assert h.log.end_offset == end_at_election + 1
    (batch,) = list(h.log.batches(end_at_election, h.log.end_offset))
    assert (batch.base_offset, batch.epoch, batch.control) == (end_at_election, EPOCH + 1, True)
    ctype, body = decode_control_record(batch.records[0])
    assert ctype == LEADER_CHANGE
    assert body["leaderId"] == 1
    assert body["voters"] == [1, 2, 3]
    assert body["grantingVoters"] == [1, 3]
    # BeginQuorumEpoch goes to every other voter at once.
    begins = h.sent(BeginQuorumEpochRequest)
    assert {o.destination for o in begins} == {2, 3}
    for out in begins:
        req = out.request
        assert (req.leader_id, req.leader_epoch, req.voter_id) == (1, EPOCH + 1, out.destination)
        assert req.leader_endpoint == h.config.local_endpoint


def test_five_voters_need_three_votes() -> None:
    h = Harness(1, voter_ids=(1, 2, 3, 4, 5), persisted=ElectionState(EPOCH))
    h.run_until(lambda: h.state == "Prospective")
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, True))
    assert h.state == "Prospective"
    h.respond(h.only(VoteRequest, to=4), vote_response(EPOCH, True))
    assert h.state == "Candidate"
    h.respond(h.only(VoteRequest, to=5), vote_response(EPOCH + 1, True))
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH + 1, False))
    assert h.state == "Candidate"
    h.respond(h.only(VoteRequest, to=3), vote_response(EPOCH + 1, True))
    assert h.state == "Leader"
    assert decode_control_record(
        batches(h.log.read(0, 1 << 20, h.log.end_offset))[0].records[0]
    )[1]["grantingVoters"] == [1, 3, 5]


# -- lost rounds ------------------------------------------------------------------------------


def test_lost_pre_vote_with_a_known_leader_goes_back_to_following_it() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, leader_id=3), log=make_log((1, 2)))
    h.run_until(lambda: h.state == "Prospective")
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, False, leader_id=3))
    assert h.state == "Prospective"
    h.respond(h.only(VoteRequest, to=3), vote_response(EPOCH, False, leader_id=3))
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH, 3)
    assert h.persist_log == []
    assert h.only(FetchRequest, to=3).request.current_leader_epoch == EPOCH


def test_lost_pre_vote_without_a_leader_goes_back_to_unattached_keeping_the_vote() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, voted_id=3), log=make_log((1, 2)))
    h.run_until(lambda: h.state == "Prospective")
    for voter in (2, 3):
        h.respond(h.only(VoteRequest, to=voter), vote_response(EPOCH, False))
    assert (h.state, h.epoch) == ("Voted", EPOCH)
    assert h.core.state.voted_id == 3
    assert h.persist_log == []
    # Still bound by that vote.
    refused = h.deliver(vote_request(2, EPOCH, 9, 99, voter_id=1))
    assert isinstance(refused, VoteResponse) and not refused.vote_granted


def test_single_rejection_out_of_three_does_not_lose_the_pre_vote() -> None:
    h = prospective()
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, False))
    assert h.state == "Prospective"
    h.respond(h.only(VoteRequest, to=3), vote_response(EPOCH, True))
    assert h.state == "Candidate"


def test_prospective_that_hears_nothing_stays_in_its_epoch() -> None:
    h = prospective()
    started = h.now
    h.run_until(lambda: h.now >= started + 10_000)
    assert h.epoch == EPOCH
    assert h.persist_log == []
    assert h.state in ("Prospective", "Unattached")


@pytest.mark.parametrize("seed", range(8))
def test_lost_vote_backs_off_exponentially_then_turns_prospective(seed: int) -> None:
    h = Harness(
        1, persisted=ElectionState(EPOCH), seed=seed, election_backoff_max_ms=1000,
        election_timeout_ms=5000,
    )
    h.run_until(lambda: h.state == "Prospective")
    for retries in (1, 2, 3, 4):
        epoch = h.epoch
        h.respond(h.only(VoteRequest, to=2), vote_response(epoch, True))
        assert (h.state, h.epoch) == ("Candidate", epoch + 1)
        assert h.core.state.retries == retries
        for voter in (2, 3):
            h.respond(h.only(VoteRequest, to=voter), vote_response(epoch + 1, False))
        lost_at = h.now
        # The backoff is 100 ms x random[0, 2^retries), capped at election_backoff_max_ms.
        limit = min(100 * (2**retries - 1), 1000)
        if h.state == "Candidate":
            assert h.sent(VoteRequest) == []
            h.run_until(lambda: h.state != "Candidate", limit_ms=limit)
        assert h.now - lost_at <= limit
        assert (h.state, h.epoch) == ("Prospective", epoch + 1)
        assert h.persisted == ElectionState(epoch + 1, voted_id=1)
        assert {o.destination for o in h.sent(VoteRequest)} == {2, 3}
        assert all(o.request.pre_vote for o in h.sent(VoteRequest))


def test_candidate_that_times_out_turns_prospective_in_the_same_epoch() -> None:
    h = candidate()
    h.run_until(lambda: h.state != "Candidate", limit_ms=2000)
    assert (h.state, h.epoch) == ("Prospective", EPOCH + 1)
    assert h.persisted == ElectionState(EPOCH + 1, voted_id=1)


@pytest.mark.parametrize("stage", ["prospective", "candidate"])
@pytest.mark.parametrize("request_timeout_ms", [150, 3000])
def test_unanswered_vote_request_is_resent_within_the_round(
    stage: str, request_timeout_ms: int
) -> None:
    # A round lasts one election timeout: a lost Vote (or its answer) is asked again after a
    # quarter of it, or after the request timeout if that is shorter (split_majority 1139).
    h = candidate(request_timeout_ms=request_timeout_ms) if stage == "candidate" else (
        prospective(request_timeout_ms=request_timeout_ms)
    )
    timeout = min(request_timeout_ms, h.core.config.election_timeout_ms // 4)
    assert all(o.timeout_ms == timeout for o in h.sent(VoteRequest))
    sent_at = h.now
    h.respond(h.only(VoteRequest, to=3), vote_response(h.epoch, False))
    h.clear_outbox()
    h.advance_to(sent_at + timeout - 1)
    assert h.sent(VoteRequest) == []
    h.advance_to(sent_at + timeout)
    (again,) = h.sent(VoteRequest)
    assert again.destination == 2  # the voter that answered is not asked twice
    assert again.request.replica_epoch == h.epoch
    assert again.request.pre_vote is (stage == "prospective")


def test_vote_response_from_a_higher_epoch_ends_the_candidacy() -> None:
    h = candidate()
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH + 3, False))
    assert (h.state, h.epoch) == ("Unattached", EPOCH + 3)
    assert h.persisted == ElectionState(EPOCH + 3)


def test_vote_response_naming_a_leader_of_the_same_epoch_makes_a_follower() -> None:
    h = candidate()
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH + 1, False, leader_id=3))
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH + 1, 3)


def test_late_pre_vote_response_is_ignored_after_becoming_follower() -> None:
    h = prospective()
    pending = h.only(VoteRequest, to=2)
    h.deliver(begin_epoch(3, EPOCH))
    assert (h.state, h.leader_id) == ("Follower", 3)
    h.respond(pending, vote_response(EPOCH, True))
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH, 3)


# -- observers and single voters --------------------------------------------------------------


def test_observer_never_stands_for_election() -> None:
    h = Harness(4, persisted=PRIMORDIAL)
    h.run_until(lambda: h.now >= 30_000)
    assert (h.state, h.epoch) == ("Unattached", 0)
    assert not any(isinstance(o.request, VoteRequest) for x in h.outputs for o in x.requests)
    assert h.persist_log == []


def test_observer_follower_does_not_stand_after_the_fetch_timeout() -> None:
    h = Harness(4, persisted=ElectionState(EPOCH, leader_id=1))
    assert h.state == "Follower"
    h.run_until(lambda: h.now >= 20_000)
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH, 1)
    assert not any(isinstance(o.request, VoteRequest) for x in h.outputs for o in x.requests)


def test_observer_asking_around_goes_back_to_the_leader_a_peer_confirms() -> None:
    # Its fetch to the leader was lost and timed out: it asks a random voter, which names the
    # same leader of the same epoch. The next Fetch goes to the leader, not another voter
    # (each lost message to a random voter cost a whole request timeout).
    h = Harness(4, persisted=ElectionState(EPOCH, leader_id=1), request_timeout_ms=500)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    for _ in range(6):  # a random voter would be the leader only by chance, never 6 times
        h.run_until(lambda: any(o.destination != 1 for o in h.sent(FetchRequest)))
        (asked,) = h.sent(FetchRequest)
        h.respond(asked, fetch_response(1, EPOCH, error=Errors.NOT_LEADER_OR_FOLLOWER))
        h.run_until(lambda: bool(h.sent(FetchRequest)))
        assert h.only(FetchRequest).destination == 1  # ... then lost: it times out again


def test_single_voter_becomes_leader_at_once() -> None:
    h = Harness(1, voter_ids=(1,))
    assert (h.state, h.epoch, h.leader_id) == ("Leader", 1, 1)
    assert h.persisted == ElectionState(1, leader_id=1)
    assert h.core.state.epoch_start_offset == 0
    assert h.log.end_offset == 1


def test_single_voter_eventually_leads_and_appends_its_leader_change() -> None:
    h = Harness(1, voter_ids=(1,))
    h.run_until(lambda: h.state == "Leader", limit_ms=2000)
    assert (h.epoch, h.leader_id) == (1, 1)
    assert h.persisted == ElectionState(1, leader_id=1)
    assert h.sent() == []
    (batch,) = list(h.log.batches(0, h.log.end_offset))
    assert batch.control and batch.epoch == 1


# -- fast failover and pre-vote stability -----------------------------------------------------


def three_nodes() -> Network:
    leader = Harness(1, persisted=ElectionState(EPOCH, voted_id=1), seed=1)
    f2 = Harness(2, persisted=ElectionState(EPOCH, voted_id=1), seed=2)
    f3 = Harness(3, persisted=ElectionState(EPOCH, voted_id=1), seed=3)
    net = Network(leader, f2, f3)
    net.run_until(lambda: all(net[n].state == "Follower" for n in (2, 3)))
    assert net[1].state == "Leader"
    net.run_until(lambda: net[2].hw == net[3].hw == net[1].log.end_offset)
    return net


def test_refused_connection_to_the_leader_starts_a_pre_vote_within_the_jitter() -> None:
    h = Harness(2, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=50)
    fetch = h.only(FetchRequest, to=1)
    h.advance_to(100)
    h.respond(fetch, fetch_response(1, EPOCH, high_watermark=0))
    h.advance_to(200)
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    # One refusal may be a transient reset: the fetch is retried at once, and only a second
    # refusal in a row confirms that the leader is gone.
    assert h.state == "Follower"
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    failed_at = h.now
    if h.state == "Follower":
        h.run_until(lambda: h.state != "Follower", limit_ms=50)
    assert h.now - failed_at <= 50
    assert (h.state, h.epoch) == ("Prospective", EPOCH)
    # The refusing leader is asked too, once its backoff (which survives the change) is over.
    assert {o.destination for o in h.sent(VoteRequest)} == {3}
    h.run_until(lambda: bool(h.sent(VoteRequest, to=1)), limit_ms=4 * h.config.retry_backoff_ms)


def test_a_failed_fetch_that_is_not_a_refusal_does_not_shortcut_the_fetch_timeout() -> None:
    h = Harness(2, persisted=ElectionState(EPOCH, leader_id=1), request_timeout_ms=5000)
    fetch = h.only(FetchRequest, to=1)
    h.advance_to(100)
    h.respond(fetch, fetch_response(1, EPOCH, high_watermark=0))
    h.advance_to(200)
    h.fail(h.only(FetchRequest, to=1), unreachable=False)
    h.run_until(lambda: bool(h.sent(FetchRequest, to=1)))  # after the retry backoff
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    h.advance_to(1500)
    assert (h.state, h.sent(VoteRequest)) == ("Follower", [])


def test_a_fetch_unanswered_past_the_max_wait_and_the_margin_means_a_hung_leader() -> None:
    """A live leader answers a long poll within its max wait: a voter still waiting
    `hung_leader_margin_ms` later stands after the fast-failover jitter, not the whole fetch
    timeout, and grants pre-votes meanwhile."""
    h = Harness(3, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=50,
                hung_leader_margin_ms=400)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    sent_at = h.now
    fetch = h.only(FetchRequest, to=1)
    assert fetch.request.max_wait_ms == 500
    pre = vote_request(2, EPOCH, 0, 0, pre_vote=True, voter_id=3)
    h.advance_to(sent_at + 899)
    assert h.state == "Follower"
    refused = h.deliver(pre)
    assert isinstance(refused, VoteResponse) and not refused.vote_granted
    h.advance_to(sent_at + 900)
    granted = h.deliver(pre)
    assert isinstance(granted, VoteResponse) and granted.vote_granted
    h.run_until(lambda: h.state != "Follower", limit_ms=50)
    assert (h.state, h.epoch) == ("Prospective", EPOCH)
    assert h.now - sent_at <= 900 + 50 < h.config.fetch_timeout_ms


def test_a_fetch_the_driver_timed_out_is_the_same_evidence() -> None:
    """The node's transport gives up on the Fetch at its timeout before the core's own poll
    does: that report counts like the core's expiry (found with a SIGSTOPped leader)."""
    h = Harness(3, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=0)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    fetch = h.only(FetchRequest, to=1)
    h.now += 500 + h.config.hung_leader_margin_ms - 1  # the driver's timer fired a bit early
    h.fail(fetch, timed_out=True)
    assert (h.state, h.epoch) == ("Prospective", EPOCH)


def _prospective_after_a_hung_leader(local_id: int) -> Harness:
    h = Harness(local_id, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=0)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    h.fail(h.only(FetchRequest, to=1), timed_out=True)
    assert h.state == "Prospective"
    return h


def test_of_two_voters_standing_at_once_the_lower_id_goes_first() -> None:
    """Both survivors of a hung leader stand within the jitter: if each granted the other's
    pre-vote they would split the vote (seen once in 20 SIGSTOP trials, 2.7 s)."""
    higher = _prospective_after_a_hung_leader(3)
    granted = higher.deliver(vote_request(2, EPOCH, 0, 0, pre_vote=True, voter_id=3))
    assert isinstance(granted, VoteResponse) and granted.vote_granted
    lower = _prospective_after_a_hung_leader(2)
    refused = lower.deliver(vote_request(3, EPOCH, 0, 0, pre_vote=True, voter_id=2))
    assert isinstance(refused, VoteResponse) and not refused.vote_granted
    assert lower.state == "Prospective"  # its own round goes on
    # A higher id with a longer log is granted: the tie-break only orders equals.
    ahead = lower.deliver(vote_request(3, EPOCH, EPOCH, 5, pre_vote=True, voter_id=2))
    assert isinstance(ahead, VoteResponse) and ahead.vote_granted


def test_a_slow_leader_that_answers_within_the_margin_is_never_deposed() -> None:
    """GC-like pauses: every fetch answered 850 ms after it was sent (max wait 500 + 350)."""
    h = Harness(2, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=0,
                hung_leader_margin_ms=400)
    for _ in range(20):
        fetch = h.only(FetchRequest, to=1)
        h.advance(850)
        h.respond(fetch, fetch_response(1, EPOCH, high_watermark=0))
    assert (h.state, h.epoch, h.sent(VoteRequest)) == ("Follower", EPOCH, [])


def test_follower_with_unreachable_leader_grants_pre_votes() -> None:
    h = Harness(3, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=1000)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    pre = vote_request(2, EPOCH, 0, 0, pre_vote=True, voter_id=3)
    reply = h.deliver(pre)
    assert isinstance(reply, VoteResponse) and not reply.vote_granted  # leader alive
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    reply = h.deliver(pre)
    assert isinstance(reply, VoteResponse) and not reply.vote_granted  # still confirming
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    reply = h.deliver(pre)
    assert isinstance(reply, VoteResponse) and reply.vote_granted


def test_a_transient_reset_is_confirmed_by_an_immediate_retry_and_deposes_nobody() -> None:
    # A middlebox RST hits the follower's Fetch stream; the leader is fine. The retry leaves
    # at once (no backoff), succeeds, and the follower never stands for election.
    h = Harness(2, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=0)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    retry = h.only(FetchRequest, to=1)  # sent in the same step: no backoff, no jitter
    pre = vote_request(3, EPOCH, 0, 0, pre_vote=True, voter_id=2)
    refused = h.deliver(pre)
    assert isinstance(refused, VoteResponse) and not refused.vote_granted
    h.respond(retry, fetch_response(1, EPOCH, high_watermark=0))
    h.advance(500)
    assert (h.state, h.epoch) == ("Follower", EPOCH)
    assert h.sent(VoteRequest) == []


def test_a_follower_that_never_reached_its_leader_waits_for_the_fetch_timeout() -> None:
    # A connection that stays refused (a firewall, a bad certificate): a refusal tells this
    # follower nothing new, so it stands once per fetch timeout, never tens of times a second.
    h = Harness(2, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=0)
    refusals = 0
    while h.state == "Follower":
        h.run_until(lambda: bool(h.sent(FetchRequest, to=1)) or h.state != "Follower")
        if h.state == "Follower":
            h.fail(h.only(FetchRequest, to=1), unreachable=True)
            refusals += 1
    assert h.state == "Prospective"
    assert h.now >= h.config.fetch_timeout_ms
    assert 3 <= refusals <= 10  # retried with a growing backoff, not hammered


def test_the_backoff_to_a_refusing_peer_survives_a_state_change_and_grows() -> None:
    h = Harness(2, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=0)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    h.fail(h.only(FetchRequest, to=1), unreachable=True)  # confirmed: stands at once
    assert h.state == "Prospective"
    # No pre-vote to the refusing leader yet: its backoff survived the state change.
    assert h.sent(VoteRequest, to=1) == []
    refusals_at: list[int] = []
    for _ in range(4):
        h.run_until(lambda: bool(h.sent(to=1)))
        refusals_at.append(h.now)
        h.fail(h.sent(to=1)[0], unreachable=True)
    gaps = [b - a for a, b in itertools.pairwise(refusals_at)]
    # Two failures before the loop, so the k-th gap waits at least base * 2^(k + 2).
    assert all(gap >= h.config.retry_backoff_ms << (k + 2) for k, gap in enumerate(gaps)), gaps


def test_fast_failover_elects_a_new_leader_when_the_old_one_dies() -> None:
    net = three_nodes()
    start = net.now
    net.crash(1)
    net.run_until(
        lambda: any(net[n].state == "Leader" for n in (2, 3)), limit_ms=3000, step_ms=5
    )
    new_leader = next(n for n in (2, 3) if net[n].state == "Leader")
    assert net[new_leader].epoch == EPOCH + 1
    # Well before the 2 s fetch timeout.
    assert net.now - start < 1000


def test_partitioned_voter_rejoining_cannot_disturb_a_stable_leader() -> None:
    net = three_nodes()
    f3 = net[3]
    net.isolated.add(3)
    # Back just before its unanswered fetch (max wait + margin) makes it stand.
    net.run_until(lambda: f3.core.connections.has_in_flight(FetchRequest))
    deadline = f3.core.connections.next_deadline(net.now)
    net.run_until(lambda: net.now >= deadline - 10)
    assert f3.state == "Follower"
    net.isolated.clear()
    seen = {n: len(net[n].outputs) for n in (1, 2, 3)}
    net.run(net.now + 6000)
    pre_votes = [
        o for out in f3.outputs[seen[3]:] for o in out.requests
        if isinstance(o.request, VoteRequest)
    ]
    assert pre_votes and all(o.request.pre_vote for o in pre_votes)
    assert all(o.request.replica_epoch == EPOCH for o in pre_votes)
    refusals = [
        r.response for n in (1, 2) for out in net[n].outputs[seen[n]:] for r in out.replies
        if isinstance(r.response, VoteResponse)
    ]
    assert refusals and not any(r.vote_granted for r in refusals)
    # The leader and the follower that still fetches refused: nobody's epoch moved, the
    # leader kept leading, and node 3 follows it again.
    assert [net[n].epoch for n in (1, 2, 3)] == [EPOCH, EPOCH, EPOCH]
    assert net[1].state == "Leader"
    assert (net[2].state, net[2].leader_id) == ("Follower", 1)
    assert (f3.state, f3.leader_id) == ("Follower", 1)
    assert all(n.persisted.epoch == EPOCH for n in net.nodes.values())


def test_pre_vote_refusals_name_the_leader_and_send_the_prospective_back() -> None:
    net = three_nodes()
    f3 = net[3]
    net.isolated.add(3)
    net.run_until(lambda: f3.state == "Prospective", limit_ms=5000)
    f3.clear_outbox()
    net.isolated.clear()
    # Deliver a fresh pre-vote by hand to the leader and to the live follower.
    for voter in (1, 2):
        reply = net[voter].deliver(
            vote_request(3, EPOCH, f3.log.last_epoch, f3.log.end_offset, True, voter)
        )
        assert isinstance(reply, VoteResponse)
        assert (reply.error, reply.vote_granted, reply.leader_id) == (Errors.NONE, False, 1)


def test_prospective_refused_by_its_live_leader_follows_it_again_at_once() -> None:
    # A refused connection made the follower stand; the leader answers the pre-vote itself:
    # it is alive, so the node follows it again rather than wait out the round.
    h = Harness(2, persisted=ElectionState(EPOCH, leader_id=1), fast_failover_jitter_ms=0)
    h.respond(h.only(FetchRequest, to=1), fetch_response(1, EPOCH, high_watermark=0))
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    h.fail(h.only(FetchRequest, to=1), unreachable=True)
    h.core.connections.clear_backoff(1)  # as if its backoff had run out
    h.advance(1)
    assert h.state == "Prospective"
    h.respond(h.only(VoteRequest, to=1), vote_response(EPOCH, False, leader_id=1))
    assert (h.state, h.epoch, h.leader_id) == ("Follower", EPOCH, 1)


def test_a_dead_voter_counts_as_a_refusal_so_a_split_vote_is_lost_at_once() -> None:
    # Three voters, one dead: two candidates of the same epoch refuse each other. The dead
    # voter's refused connection completes the tally, so the round is lost now, not at the
    # election timeout.
    h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1))  # restarts as Candidate
    assert h.state == "Candidate"
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, False))
    h.fail(h.only(VoteRequest, to=3), unreachable=True)
    # Lost now: either already standing again (a 0 ms backoff) or backing off at most 100 ms
    # (the first binary-exponential step), never waiting out the 1-2 s election timeout.
    assert h.state == "Prospective" or h.core.next_deadline() <= h.now + 100
