"""BeginQuorumEpoch (a new leader's announcement and heartbeat) and EndQuorumEpoch (a leader's
graceful resignation), spec §2.2 and §2.3."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.core.election import strict_exponential_backoff
from kraft.core.errors import Errors
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
)
from kraft.core.rpc_vote import addressed_to_us
from kraft.core.states import FollowerState, ResignedState

if TYPE_CHECKING:
    from kraft.core.connections import InFlight
    from kraft.core.context import HandlerContext


def _accept_leader(
    core: HandlerContext, req: BeginQuorumEpochRequest | EndQuorumEpochRequest, now: int
) -> Errors | None:
    """The checks both requests share, then learn the (leader, epoch) they carry."""
    if not core.valid_cluster_id(req.cluster_id):
        return Errors.INCONSISTENT_CLUSTER_ID
    if req.leader_id < 0:
        return Errors.INVALID_REQUEST
    if req.leader_epoch < core.epoch:
        return Errors.FENCED_LEADER_EPOCH
    core.maybe_transition(req.leader_id, req.leader_epoch, req.leader_endpoint, now)
    return None


def handle_begin_request(
    core: HandlerContext, req: BeginQuorumEpochRequest, now: int
) -> BeginQuorumEpochResponse:
    def answer(error: Errors) -> BeginQuorumEpochResponse:
        return BeginQuorumEpochResponse(
            error, core.leader_id, core.epoch, core.leader_endpoint()
        )

    error = _accept_leader(core, req, now)
    if error is not None:
        return answer(error)
    # Kafka checks the voter key only after following the new leader.
    if not addressed_to_us(core, req.voter_id, req.voter_directory_id):
        return answer(Errors.INVALID_VOTER_KEY)
    return answer(Errors.NONE)


def handle_begin_response(
    core: HandlerContext, entry: InFlight, resp: BeginQuorumEpochResponse, now: int
) -> None:
    """Nothing to do: the voter now follows us, and its Fetch is what counts."""


def handle_end_request(
    core: HandlerContext, req: EndQuorumEpochRequest, now: int
) -> EndQuorumEpochResponse:
    def answer(error: Errors) -> EndQuorumEpochResponse:
        return EndQuorumEpochResponse(error, core.leader_id, core.epoch, core.leader_endpoint())

    error = _accept_leader(core, req, now)
    if error is not None:
        return answer(error)
    state = core.quorum.state
    if (
        isinstance(state, FollowerState)
        and state.leader_id == req.leader_id
        and state.epoch == req.leader_epoch
    ):
        successors = req.preferred_successors
        max_ms = core.config.election_backoff_max_ms
        if successors:
            position = successors.index(core.local_id) if core.local_id in successors else -1
            delay = strict_exponential_backoff(position, len(successors), max_ms)
        else:
            # A leader resigning after a restart knows no order: spread the voters out.
            delay = core.rng.randrange(max_ms + 1)
        state.fetch_deadline = min(state.fetch_deadline, now + delay)
        # The leader is gone by its own word: grant pre-votes to whoever stands first
        # (KAFKA-20895), or the preferred successor would be refused by fellow followers.
        state.leader_live = False
    return answer(Errors.NONE)


def handle_end_response(
    core: HandlerContext, entry: InFlight, resp: EndQuorumEpochResponse, now: int
) -> None:
    state = core.quorum.state
    if isinstance(state, ResignedState) and resp.error == Errors.NONE:
        state.unacked_voters.discard(entry.destination)
