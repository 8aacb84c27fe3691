"""Vote and pre-vote handling on the receiving side (spec §2.1, the granting table).

Every node here sits in epoch 5 with a log of epoch 1 at offsets 0-1 and epoch 3 at 2-3, so its
(last epoch, end offset) is (3, 4). Node 2 asks for the vote unless a test says otherwise.
"""

from __future__ import annotations

import pytest
from core_harness import (
    Harness,
    fetch_response,
    make_log,
    vote_request,
    vote_response,
)

from kraft.core.errors import Errors
from kraft.core.messages import FetchRequest, VoteRequest, VoteResponse
from kraft.election_state import ElectionState

EPOCH = 5
UP_TO_DATE = (3, 4)  # equal to the receiver's log: up to date
AHEAD = (4, 1)  # a later epoch wins whatever the offset
STALE = (3, 3)
STALE_EPOCH = (2, 100)  # an older epoch loses whatever the offset


def node_log():
    return make_log((1, 2), (3, 2))


def in_state(name: str) -> Harness:
    """Node 1 (node 4 for the observer cases) in the named state of epoch 5. The prospective
    one is node 3: of two equally up-to-date prospective voters the lower id goes first, so
    the candidate (node 2) is the lower one here (test_core_election covers the tie-break)."""
    if name == "unattached":
        h = Harness(1, persisted=ElectionState(EPOCH), log=node_log())
    elif name == "voted-for-3":
        h = Harness(1, persisted=ElectionState(EPOCH, voted_id=3), log=node_log())
    elif name == "unattached-knowing-leader":
        # Leader 9 is not a voter, so its endpoint is unknown: Unattached with a leader id.
        h = Harness(1, persisted=ElectionState(EPOCH, leader_id=9), log=node_log())
        assert h.leader_id == 9
    elif name == "prospective":
        h = Harness(3, persisted=ElectionState(EPOCH), log=node_log())
        h.run_until(lambda: h.state == "Prospective")
    elif name == "candidate":
        h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1), log=node_log())
    elif name == "follower-not-fetched":
        h = Harness(1, persisted=ElectionState(EPOCH, leader_id=3), log=node_log())
    elif name == "follower-fetched":
        h = Harness(1, persisted=ElectionState(EPOCH, leader_id=3), log=node_log())
        h.respond(h.only(FetchRequest, to=3), fetch_response(3, EPOCH, high_watermark=0))
    elif name == "resigned":
        h = Harness(1, persisted=ElectionState(EPOCH, leader_id=1), log=node_log())
    elif name == "observer-unattached":
        h = Harness(4, persisted=ElectionState(EPOCH), log=node_log())
    elif name == "observer-follower-fetched":
        h = Harness(4, persisted=ElectionState(EPOCH, leader_id=3), log=node_log())
        h.respond(h.only(FetchRequest, to=3), fetch_response(3, EPOCH, high_watermark=0))
    else:  # pragma: no cover
        raise ValueError(name)
    expected = {
        "unattached": "Unattached",
        "voted-for-3": "Voted",
        "unattached-knowing-leader": "Unattached",
        "prospective": "Prospective",
        "candidate": "Candidate",
        "follower-not-fetched": "Follower",
        "follower-fetched": "Follower",
        "resigned": "Resigned",
        "observer-unattached": "Unattached",
        "observer-follower-fetched": "Follower",
    }[name]
    assert (h.state, h.epoch) == (expected, EPOCH)
    h.persist_log.clear()
    return h


# (state, standard vote granted when up to date, pre-vote granted when up to date). A stale log
# is never granted anything.
TABLE = [
    ("unattached", True, True),
    ("voted-for-3", False, True),
    ("unattached-knowing-leader", False, True),
    ("prospective", True, True),
    ("candidate", False, True),
    ("follower-not-fetched", False, True),
    ("follower-fetched", False, False),
    ("resigned", False, True),
    ("observer-unattached", True, True),
    ("observer-follower-fetched", False, False),
]


def ask(h: Harness, log_pos: tuple[int, int], pre_vote: bool, candidate: int = 2):
    last_epoch, last_offset = log_pos
    reply = h.deliver(
        vote_request(candidate, EPOCH, last_epoch, last_offset, pre_vote, voter_id=h.node_id)
    )
    assert isinstance(reply, VoteResponse)
    return reply


@pytest.mark.parametrize(("state", "standard", "pre"), TABLE, ids=[t[0] for t in TABLE])
@pytest.mark.parametrize("pre_vote", [False, True], ids=["vote", "pre-vote"])
@pytest.mark.parametrize(
    "log_pos", [UP_TO_DATE, AHEAD, STALE, STALE_EPOCH],
    ids=["equal-log", "later-epoch", "shorter-log", "older-epoch"],
)
def test_granting_table(
    state: str, standard: bool, pre: bool, pre_vote: bool, log_pos: tuple[int, int]
) -> None:
    h = in_state(state)
    before = h.core.state
    up_to_date = log_pos in (UP_TO_DATE, AHEAD)
    reply = ask(h, log_pos, pre_vote)
    expected = (pre if pre_vote else standard) and up_to_date
    assert reply.error == Errors.NONE
    assert reply.vote_granted is expected
    assert reply.leader_epoch == EPOCH
    assert h.epoch == EPOCH
    # Only a granted standard vote in Unattached/Prospective changes anything durable.
    if expected and not pre_vote:
        assert h.persist_log == [ElectionState(EPOCH, leader_id=-1, voted_id=2)]
        assert h.core.state.voted_id == 2
    else:
        assert h.persist_log == []
        assert h.core.state is before


def test_leader_refuses_votes_and_pre_votes_in_its_epoch() -> None:
    h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1), log=node_log())
    h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, True))
    assert h.state == "Leader"
    h.flush()
    end = h.log.end_offset
    for request in (
        vote_request(3, EPOCH, EPOCH, end + 10, pre_vote=True, voter_id=1),
        vote_request(3, EPOCH, EPOCH - 1, end + 10, pre_vote=False, voter_id=1),
    ):
        reply = h.deliver(request)
        assert isinstance(reply, VoteResponse)
        assert (reply.error, reply.vote_granted) == (Errors.NONE, False)
        assert (reply.leader_id, reply.leader_epoch) == (1, EPOCH)
    assert (h.state, h.epoch) == ("Leader", EPOCH)


def test_voted_node_grants_its_candidate_again_whatever_the_log() -> None:
    h = in_state("voted-for-3")
    assert ask(h, STALE, pre_vote=False, candidate=3).vote_granted
    assert not ask(h, UP_TO_DATE, pre_vote=False, candidate=2).vote_granted
    assert h.persist_log == []


def test_granted_vote_is_persisted_before_the_reply_goes_out() -> None:
    h = in_state("unattached")
    token = h.deliver_async(vote_request(2, EPOCH, 3, 4, voter_id=1))
    out = h.last
    # The Output that carries the reply also carries the vote the driver must write first.
    assert [r.token for r in out.replies] == [token]
    assert out.replies[0].response.vote_granted
    assert out.election_state == ElectionState(EPOCH, voted_id=2)
    assert h.state == "Voted"
    # The vote is now spent for this epoch.
    assert not ask(h, AHEAD, pre_vote=False, candidate=3).vote_granted
    assert ask(h, UP_TO_DATE, pre_vote=False, candidate=2).vote_granted
    assert h.persist_log == [ElectionState(EPOCH, voted_id=2)]


def test_granting_a_vote_restarts_the_election_timer() -> None:
    h = in_state("unattached")
    h.advance_to(900)  # the first timeout lies in [1000, 2000)
    assert h.state == "Unattached"
    assert ask(h, UP_TO_DATE, pre_vote=False).vote_granted
    assert h.core.state.election_deadline >= 900 + 1000
    h.advance_to(1899)
    assert h.state == "Voted"


def test_prospective_that_grants_a_vote_records_it_durably() -> None:
    h = in_state("prospective")
    reply = ask(h, UP_TO_DATE, pre_vote=False)
    assert reply.vote_granted
    assert h.persist_log == [ElectionState(EPOCH, voted_id=2)]
    assert h.core.state.voted_id == 2


@pytest.mark.parametrize("state", [t[0] for t in TABLE])
def test_granted_pre_vote_changes_nothing_durable(state: str) -> None:
    h = in_state(state)
    before = h.core.status()
    ask(h, AHEAD, pre_vote=True)
    assert h.persist_log == []
    assert h.last.election_state is None
    assert h.core.status() == before


def test_higher_epoch_pre_vote_moves_a_follower_to_unattached_in_that_epoch() -> None:
    h = in_state("follower-fetched")
    reply = h.deliver(vote_request(2, EPOCH + 1, 3, 4, pre_vote=True, voter_id=1))
    assert isinstance(reply, VoteResponse)
    assert (h.state, h.epoch, h.leader_id) == ("Unattached", EPOCH + 1, -1)
    assert reply.vote_granted
    assert reply.leader_epoch == EPOCH + 1
    # The new epoch is durable, but no vote is recorded for a pre-vote.
    assert h.persist_log == [ElectionState(EPOCH + 1)]


def test_higher_epoch_stale_pre_vote_still_moves_the_epoch_but_is_refused() -> None:
    h = in_state("candidate")
    reply = h.deliver(vote_request(2, EPOCH + 2, 3, 3, pre_vote=True, voter_id=1))
    assert isinstance(reply, VoteResponse)
    assert not reply.vote_granted
    assert (h.state, h.epoch) == ("Unattached", EPOCH + 2)
    assert h.persist_log == [ElectionState(EPOCH + 2)]


@pytest.mark.parametrize("state", ["leader", "resigned", "candidate", "follower-fetched"])
def test_higher_epoch_standard_vote_is_granted_from_any_state(state: str) -> None:
    if state == "leader":
        h = Harness(1, persisted=ElectionState(EPOCH, voted_id=1), log=node_log())
        h.respond(h.only(VoteRequest, to=2), vote_response(EPOCH, True))
        h.flush()
        h.persist_log.clear()
        pos = (h.log.last_epoch, h.log.end_offset)
    else:
        h = in_state(state)
        pos = UP_TO_DATE
    token = h.deliver_async(vote_request(2, EPOCH + 1, pos[0], pos[1], voter_id=1))
    out = h.last
    reply = h.reply_for(token)
    assert isinstance(reply, VoteResponse)
    assert reply.vote_granted
    assert out.election_state == ElectionState(EPOCH + 1, voted_id=2)
    assert (h.state, h.epoch) == ("Voted", EPOCH + 1)


@pytest.mark.parametrize("pre_vote", [False, True])
def test_older_epoch_is_fenced(pre_vote: bool) -> None:
    h = in_state("unattached")
    reply = h.deliver(vote_request(2, EPOCH - 1, 3, 4, pre_vote=pre_vote, voter_id=1))
    assert isinstance(reply, VoteResponse)
    assert (reply.error, reply.vote_granted, reply.leader_epoch) == (
        Errors.FENCED_LEADER_EPOCH, False, EPOCH,
    )
    assert (h.state, h.epoch, h.persist_log) == ("Unattached", EPOCH, [])


INVALID = [
    ("negative-offset", dict(last_epoch=3, last_offset=-1, pre_vote=False)),
    ("negative-epoch", dict(last_epoch=-1, last_offset=4, pre_vote=False)),
    ("pre-vote-negative-offset", dict(last_epoch=3, last_offset=-1, pre_vote=True)),
    ("pre-vote-negative-epoch", dict(last_epoch=-1, last_offset=4, pre_vote=True)),
    ("vote-last-epoch-equal", dict(last_epoch=EPOCH + 1, last_offset=4, pre_vote=False)),
    ("vote-last-epoch-above", dict(last_epoch=EPOCH + 2, last_offset=4, pre_vote=False)),
    ("pre-vote-last-epoch-above", dict(last_epoch=EPOCH + 2, last_offset=4, pre_vote=True)),
    ("negative-replica-id", dict(last_epoch=3, last_offset=4, pre_vote=False, replica_id=-1)),
]


@pytest.mark.parametrize("fields", [f for _, f in INVALID], ids=[n for n, _ in INVALID])
def test_invalid_request(fields: dict) -> None:
    h = in_state("unattached")
    reply = h.deliver(
        vote_request(
            fields.get("replica_id", 2), EPOCH + 1, fields["last_epoch"], fields["last_offset"],
            fields["pre_vote"], voter_id=1,
        )
    )
    assert isinstance(reply, VoteResponse)
    assert (reply.error, reply.vote_granted) == (Errors.INVALID_REQUEST, False)
    # Rejected before anything else: the higher epoch in it is not adopted.
    assert (h.state, h.epoch, h.persist_log) == ("Unattached", EPOCH, [])


def test_pre_vote_may_carry_its_own_epoch_as_last_epoch() -> None:
    h = in_state("unattached")
    reply = h.deliver(vote_request(2, EPOCH, EPOCH, 1, pre_vote=True, voter_id=1))
    assert isinstance(reply, VoteResponse)
    assert (reply.error, reply.vote_granted) == (Errors.NONE, True)


def test_invalid_request_is_checked_before_the_epoch() -> None:
    h = in_state("unattached")
    reply = h.deliver(vote_request(2, EPOCH - 1, 3, -1, voter_id=1))
    assert isinstance(reply, VoteResponse)
    assert reply.error == Errors.INVALID_REQUEST


@pytest.mark.parametrize("pre_vote", [False, True])
@pytest.mark.parametrize(
    ("cluster_id", "accepted"),
    [("another-cluster", False), ("", False), (None, True)],
    ids=["other", "empty", "none"],
)
def test_cluster_id(pre_vote: bool, cluster_id: str | None, accepted: bool) -> None:
    h = in_state("unattached")
    reply = h.deliver(
        vote_request(2, EPOCH + 1, 3, 4, pre_vote=pre_vote, voter_id=1, cluster_id=cluster_id)
    )
    assert isinstance(reply, VoteResponse)
    if accepted:
        assert (reply.error, reply.vote_granted) == (Errors.NONE, True)
        assert h.epoch == EPOCH + 1
    else:
        assert (reply.error, reply.vote_granted) == (Errors.INCONSISTENT_CLUSTER_ID, False)
        assert (h.epoch, h.persist_log) == (EPOCH, [])


@pytest.mark.parametrize("pre_vote", [False, True])
def test_vote_meant_for_another_voter_is_refused(pre_vote: bool) -> None:
    h = in_state("unattached")
    reply = h.deliver(vote_request(2, EPOCH, 3, 4, pre_vote=pre_vote, voter_id=3))
    assert isinstance(reply, VoteResponse)
    assert (reply.error, reply.vote_granted) == (Errors.INVALID_VOTER_KEY, False)
    assert (h.state, h.persist_log) == ("Unattached", [])


def test_voter_key_is_checked_after_adopting_a_higher_epoch() -> None:
    h = in_state("follower-fetched")
    reply = h.deliver(vote_request(2, EPOCH + 1, 3, 4, voter_id=3))
    assert isinstance(reply, VoteResponse)
    assert (reply.error, reply.vote_granted) == (Errors.INVALID_VOTER_KEY, False)
    assert (h.state, h.epoch) == ("Unattached", EPOCH + 1)
    assert h.persist_log == [ElectionState(EPOCH + 1)]


def test_unset_voter_key_is_accepted() -> None:
    h = in_state("unattached")
    reply = h.deliver(vote_request(2, EPOCH, 3, 4, voter_id=-1))
    assert isinstance(reply, VoteResponse)
    assert (reply.error, reply.vote_granted) == (Errors.NONE, True)


def test_reply_names_the_known_leader() -> None:
    h = in_state("follower-fetched")
    reply = ask(h, UP_TO_DATE, pre_vote=False)
    assert (reply.leader_id, reply.leader_epoch) == (3, EPOCH)
    assert reply.leader_endpoint == h.config.voters[3]
