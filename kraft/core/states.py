"""The node states, one small class each. They hold data and answer questions about it; the
transitions between them live in `QuorumState`, the message handling in the rpc modules.

Deadlines are absolute times in milliseconds, as given to the core by its driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kraft.core.election import EpochElection
from kraft.core.leader import LeaderState
from kraft.election_state import ElectionState
from kraft.log.base import OffsetAndEpoch, PartialSnapshot

NO_DEADLINE = float("inf")


@dataclass
class UnattachedState:
    """No leader known to be reachable in this epoch. With `voted_id` set it is Kafka's
    "Voted" state. `leader_id` may be known without an endpoint to reach it."""

    epoch: int
    election_deadline: float
    leader_id: int = -1
    voted_id: int = -1

    @property
    def name(self) -> str:
        return "Voted" if self.voted_id >= 0 else "Unattached"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        return _unattached_or_prospective_can_grant(
            self.leader_id, self.voted_id, candidate_id, log_up_to_date, pre_vote
        )


@dataclass
class ProspectiveState:
    """Pre-vote (KIP-996): asking whether an election could be won, without bumping the epoch
    or changing anything durable."""

    epoch: int
    election: EpochElection
    election_deadline: float
    retries: int
    leader_id: int = -1
    voted_id: int = -1
    leader_endpoint: str = ""

    name = "Prospective"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        return _unattached_or_prospective_can_grant(
            self.leader_id, self.voted_id, candidate_id, log_up_to_date, pre_vote
        )


@dataclass
class CandidateState:
    """Standing for election in a bumped epoch, having voted for itself durably."""

    epoch: int
    local_id: int
    election: EpochElection
    election_deadline: float
    retries: int
    backoff_deadline: float | None = None  # set once the vote is lost

    name = "Candidate"

    @property
    def leader_id(self) -> int:
        return -1

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, voted_id=self.local_id)

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        # Its own vote went to itself; a pre-vote costs nothing and is answered on the log.
        return pre_vote and log_up_to_date


@dataclass
class SnapshotTransfer:
    """A snapshot a follower fetches from its leader. The core never touches the file: each
    received chunk becomes a WriteChunk job and the last one a FreezeSnapshot job, run by the
    driver one at a time. `written` counts the bytes whose write job completed: the next
    FetchSnapshot asks from there, and only once no job is in flight (`busy`; it stays set
    while the file is frozen)."""

    partial: PartialSnapshot
    written: int = 0
    size: int = 0  # the whole snapshot's, from the leader's answers
    busy: bool = False

    @property
    def snapshot_id(self) -> OffsetAndEpoch:
        return self.partial.snapshot_id


@dataclass
class FollowerState:
    """Fetching from a known leader. `leader_live` is False until a fetch succeeds, after the
    leader resigned (EndQuorumEpoch) or after its connection was refused twice in a row: only
    a follower that believes in a live leader refuses pre-votes. `confirming_unreachable`: one
    refusal seen, the confirming retry is under way (the leader still counts as live)."""

    epoch: int
    leader_id: int
    leader_endpoint: str
    fetch_deadline: float
    voted_id: int = -1
    leader_live: bool = False
    confirming_unreachable: bool = False
    fetch_from_bootstrap: bool = False  # observers rediscover the leader after a timeout
    # The leader's snapshot being fetched (FetchSnapshot); plain Fetch pauses meanwhile.
    fetching_snapshot: SnapshotTransfer | None = None
    # When a voter next checks that the leader's voter set has its current endpoint (R6.2).
    update_voter_due: float = 0

    name = "Follower"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and not self.leader_live and log_up_to_date


@dataclass
class ResignedState:
    """A leader that stepped down in its epoch: it tells the voters (EndQuorumEpoch) and then
    waits out an election timeout before moving to epoch + 1. Memory only: its persisted state
    still names itself leader of the epoch, so it can never vote again in that epoch."""

    epoch: int
    local_id: int
    election_deadline: float
    preferred_successors: tuple[int, ...]
    unacked_voters: set[int] = field(default_factory=set)

    name = "Resigned"

    @property
    def leader_id(self) -> int:
        return self.local_id

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.local_id)

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and log_up_to_date


def _unattached_or_prospective_can_grant(
    leader_id: int, voted_id: int, candidate_id: int, log_up_to_date: bool, pre_vote: bool
) -> bool:
    if pre_vote:
        return log_up_to_date
    if voted_id >= 0:
        return voted_id == candidate_id  # re-granting the same vote is idempotent
    if leader_id >= 0:
        return False  # a leader exists in this epoch
    return log_up_to_date


EpochState = (
    UnattachedState
    | ProspectiveState
    | CandidateState
    | LeaderState
    | FollowerState
    | ResignedState
)


class NodeState(Protocol):
    """What every state answers, whatever it is (the states share no base class: each is a
    plain dataclass). `EpochState` names the closed set, for exhaustive matching."""

    @property
    def epoch(self) -> int: ...

    @property
    def name(self) -> str: ...

    def election_state(self) -> ElectionState:
        """The durable record of this state: epoch, leader and vote."""

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        """Whether a (pre-)vote for `candidate_id` may be granted in this state."""


if TYPE_CHECKING:  # mypy proves that every state has the shared surface

    def _every_state_is_a_node_state(state: EpochState) -> NodeState:
        return state
