"""What Fetch and FetchSnapshot share: the leader's check of a request only a leader answers,
and the follower's note that its leader answered. Both handlers import it; rpc_fetch imports
rpc_fetch_snapshot (a Fetch answer can send the follower to a snapshot), never the reverse."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.core.errors import Errors
from kraft.core.leader import LeaderState
from kraft.core.states import FollowerState

if TYPE_CHECKING:
    from kraft.core.context import HandlerContext


def validate_leader_only(core: HandlerContext, epoch: int) -> Errors | None:
    if epoch < core.epoch:
        return Errors.FENCED_LEADER_EPOCH
    if epoch > core.epoch:
        return Errors.UNKNOWN_LEADER_EPOCH
    state = core.quorum.state
    if not isinstance(state, LeaderState):
        return Errors.NOT_LEADER_OR_FOLLOWER
    if core.shutting_down or state.resign_requested:
        return Errors.BROKER_NOT_AVAILABLE
    return None


def note_leader_answered(core: HandlerContext, state: FollowerState, now: int) -> None:
    """A successful answer from the leader (Fetch or FetchSnapshot) resets the fetch timer.
    A little jitter, so that followers that lose a hung leader together do not all stand for
    election in the same millisecond and split the vote."""
    jitter = core.rng.randrange(core.config.election_timeout_ms // 4 + 1)
    state.fetch_deadline = now + core.config.fetch_timeout_ms + jitter
    state.leader_live = True
    state.confirming_unreachable = False
    state.fetch_from_bootstrap = False
