"""Vote and pre-vote (spec §2.1): granting, sending and counting."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kraft.core.errors import Errors
from kraft.core.messages import VoteRequest, VoteResponse
from kraft.core.states import CandidateState, ProspectiveState, UnattachedState

if TYPE_CHECKING:
    from kraft.core.connections import InFlight
    from kraft.core.context import HandlerContext

logger = logging.getLogger(__name__)


def handle_request(core: HandlerContext, req: VoteRequest, now: int) -> VoteResponse:
    def answer(error: Errors, granted: bool = False) -> VoteResponse:
        return VoteResponse(
            error, core.leader_id, core.epoch, granted, core.leader_endpoint()
        )

    if not core.valid_cluster_id(req.cluster_id):
        return answer(Errors.INCONSISTENT_CLUSTER_ID)
    illegal_epoch = (
        req.last_offset_epoch > req.replica_epoch
        if req.pre_vote
        else req.last_offset_epoch >= req.replica_epoch
    )
    if illegal_epoch or req.last_offset < 0 or req.last_offset_epoch < 0 or req.replica_id < 0:
        return answer(Errors.INVALID_REQUEST)
    if req.replica_id == core.local_id:
        logger.error(
            "a Vote request claims this node's own id %d: is node.id %d configured on two "
            "nodes? Refused (INVALID_REQUEST)", req.replica_id, req.replica_id,
        )
        return answer(Errors.INVALID_REQUEST)
    if req.replica_epoch < core.epoch:
        return answer(Errors.FENCED_LEADER_EPOCH)
    if req.replica_epoch > core.epoch:
        # Even a pre-vote from a higher epoch moves this node into that epoch.
        core.quorum.to_unattached(req.replica_epoch, now)
    if not addressed_to_us(core, req.voter_id, req.voter_directory_id):
        return answer(Errors.INVALID_VOTER_KEY)
    log = core.log
    up_to_date = (req.last_offset_epoch, req.last_offset) >= (log.last_epoch, log.end_offset)
    state = core.quorum.state
    granted = state.can_grant_vote(req.replica_id, up_to_date, req.pre_vote)
    if (
        granted and req.pre_vote and isinstance(state, ProspectiveState)
        and core.local_id is not None and req.replica_id > core.local_id
        and (req.last_offset_epoch, req.last_offset) == (log.last_epoch, log.end_offset)
    ):
        # Two voters that lost their leader at the same moment stand together, and if each
        # granted the other's pre-vote they would split the real vote and wait out an
        # election timeout. Of two equally up-to-date prospective voters the lower id goes
        # first; refusing a pre-vote is always safe, and the other one's vote follows.
        granted = False
    if granted and not req.pre_vote and isinstance(state, UnattachedState | ProspectiveState):
        # Durable before the reply leaves: the driver persists election state first, and a
        # re-granted vote whose first write was never confirmed is written again.
        core.quorum.add_vote(req.replica_id, now)
    return answer(Errors.NONE, granted)


def addressed_to_us(core: HandlerContext, voter_id: int, voter_directory_id: str) -> bool:
    """A Vote or BeginQuorumEpoch names the replica key its sender counts as a voter; one for
    another key (this id on a disk since replaced) grants and acknowledges nothing (R1.5)."""
    if voter_id < 0:
        return True
    return voter_id == core.local_id and (
        not voter_directory_id or voter_directory_id == core.config.directory_id
    )


def send_votes(
    core: HandlerContext, state: ProspectiveState | CandidateState, pre_vote: bool, now: int
) -> None:
    if state.election.is_lost():
        return
    local_id = core.local_id
    assert local_id is not None  # only voters stand for election
    for voter in sorted(state.election.unrecorded()):
        if not core.connections.is_ready(voter, now):
            continue
        key = core.voters.key_of(voter)
        core.send(
            voter,
            core.endpoint_of(voter),
            VoteRequest(
                cluster_id=core.config.cluster_id,
                replica_id=local_id,
                replica_epoch=state.epoch,
                last_offset_epoch=core.log.last_epoch,
                last_offset=core.log.end_offset,
                pre_vote=pre_vote,
                voter_id=voter,
                replica_directory_id=core.config.directory_id,
                voter_directory_id=key.directory_id if key is not None else "",
            ),
            now,
        )


def handle_response(core: HandlerContext, entry: InFlight, resp: VoteResponse, now: int) -> None:
    req = entry.request
    assert isinstance(req, VoteRequest)
    state = core.quorum.state
    if (
        isinstance(state, ProspectiveState)
        and not resp.vote_granted
        and state.leader_id >= 0
        and entry.destination == state.leader_id == resp.leader_id
        and resp.leader_epoch == state.epoch
    ):
        # The leader we left answered for itself: it is alive, so follow it again at once
        # rather than wait for a round the dead voters can never complete.
        after_lost_pre_vote(core, state, now, rejected=True)
        return
    _record(core, entry, resp.vote_granted, now)


def on_unreachable(core: HandlerContext, entry: InFlight, now: int) -> None:
    """A voter whose process is gone cannot vote in this round: count it as a refusal, so a
    split vote among the survivors is seen as lost at once instead of at the timeout."""
    if isinstance(entry.request, VoteRequest):
        _record(core, entry, False, now)


def _record(core: HandlerContext, entry: InFlight, granted: bool, now: int) -> None:
    req = entry.request
    assert isinstance(req, VoteRequest)
    state = core.quorum.state
    # Responses carry no pre-vote flag: match them to the round that sent the request.
    if req.replica_epoch != state.epoch:
        return
    if req.pre_vote and isinstance(state, ProspectiveState):
        state.election.record(entry.destination, granted)
        if not state.election.is_won() and state.election.is_lost():
            after_lost_pre_vote(core, state, now, rejected=True)
    elif not req.pre_vote and isinstance(state, CandidateState):
        state.election.record(entry.destination, granted)
        if (
            not state.election.is_won()
            and state.election.is_lost()
            and state.backoff_deadline is None
        ):
            core.candidate_backoff(state, now)


def after_lost_pre_vote(
    core: HandlerContext, state: ProspectiveState, now: int, rejected: bool
) -> None:
    """Kafka's prospectiveTransitionAfterElectionLoss: back to following a known leader, or to
    Unattached in the same epoch (keeping any vote)."""
    if state.leader_id >= 0 and state.leader_endpoint:
        core.quorum.to_follower(state.epoch, state.leader_id, state.leader_endpoint, now)
        return
    core.quorum.to_unattached(state.epoch, now)
    unattached = core.quorum.state
    if rejected and isinstance(unattached, UnattachedState):
        unattached.election_deadline = core.quorum.new_election_deadline(now)
