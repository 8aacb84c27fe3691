"""QuorumState: the current node state and every legal transition between states.

All transitions and their guards live here (spec §3.2); an illegal one is a bug and raises
RaftInvariantError. Transitions that change what a node must remember across a crash mark the
new ElectionState for persistence; the driver writes it before sending anything else.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import NoReturn

from kraft.core.config import RaftConfig
from kraft.core.election import EpochElection, random_election_timeout
from kraft.core.errors import RaftInvariantError
from kraft.core.leader import LeaderState
from kraft.core.states import (
    NO_DEADLINE,
    CandidateState,
    EpochState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from kraft.core.voters import ReplicaKey, VoterSet
from kraft.election_state import ElectionState
from kraft.log.base import OffsetAndEpoch

log = logging.getLogger(__name__)


class QuorumState:
    """`voters` gives the latest voter set of the local log (KIP-853): whether this node is
    a voter, and who it asks for votes, follow it as the log changes."""

    def __init__(
        self, config: RaftConfig, rng: random.Random, voters: Callable[[], VoterSet]
    ) -> None:
        self.config = config
        self.rng = rng
        self.voters = voters
        self.state: EpochState = UnattachedState(epoch=0, election_deadline=NO_DEADLINE)
        self.unpersisted: ElectionState | None = None
        self._persisted: ElectionState | None = None

    # -- queries ---------------------------------------------------------------------------

    @property
    def local_id(self) -> int | None:
        return self.config.node_id

    @property
    def local_key(self) -> ReplicaKey | None:
        node_id = self.config.node_id
        return None if node_id is None else ReplicaKey(node_id, self.config.directory_id)

    @property
    def is_voter(self) -> bool:
        key = self.local_key
        return key is not None and self.voters().is_voter(key)

    def is_only_voter(self) -> bool:
        return self.is_voter and len(self.voters()) == 1

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    def endpoint_of(self, node_id: int) -> str:
        return self.voters().endpoint(node_id)

    # -- restart -----------------------------------------------------------------------------

    def initialize(self, persisted: ElectionState, log_end: OffsetAndEpoch, now: int) -> None:
        """Spec §3.6: choose the state to resume in from the quorum-state file and the log."""
        local = self.local_id
        self._persisted = persisted
        if persisted.has_voted and local is None:
            raise RaftInvariantError(
                f"the quorum state records a vote for {persisted.voted_id} but this node has no id"
            )
        if persisted.epoch < log_end.epoch:
            log.warning(
                "epoch %d in the quorum-state file is below the log's last epoch %d; "
                "resuming as Unattached in epoch %d",
                persisted.epoch,
                log_end.epoch,
                log_end.epoch,
            )
            self._become(UnattachedState(log_end.epoch, self._election_deadline(now)))
        elif persisted.leader_id == local and self.is_voter:
            # Its unflushed records may be lost: it must never lead or vote in this epoch again.
            others = set(self.voters().ids) - {persisted.leader_id}
            self._become(
                ResignedState(
                    persisted.epoch, persisted.leader_id, self._election_deadline(now), (),
                    unacked_voters=others,
                ),
                durable=False,
            )
        elif persisted.voted_id == local and self.is_voter:
            self._become(
                CandidateState(
                    persisted.epoch,
                    persisted.voted_id,
                    EpochElection(self.voters().ids, persisted.voted_id),
                    self._election_deadline(now),
                    retries=1,
                )
            )
        elif persisted.has_leader and self.endpoint_of(persisted.leader_id):
            self._become(
                FollowerState(
                    persisted.epoch,
                    persisted.leader_id,
                    self.endpoint_of(persisted.leader_id),
                    now + self.config.fetch_timeout_ms,
                    voted_id=persisted.voted_id,
                )
            )
        else:
            self._become(
                UnattachedState(
                    persisted.epoch,
                    self._election_deadline(now),
                    leader_id=persisted.leader_id,
                    voted_id=persisted.voted_id,
                )
            )

    # -- transitions -------------------------------------------------------------------------

    def to_unattached(self, epoch: int, now: int, leader_id: int = -1) -> None:
        """A higher epoch with no reachable leader, or a lost pre-vote in the same epoch."""
        current = self.state
        if epoch < current.epoch:
            self._illegal(f"Unattached in epoch {epoch}")
        if epoch == current.epoch:
            if not isinstance(current, ProspectiveState):
                self._illegal(f"Unattached in the same epoch {epoch}")
            self._become(
                UnattachedState(
                    epoch,
                    current.election_deadline,
                    leader_id=current.leader_id if leader_id < 0 else leader_id,
                    voted_id=current.voted_id,
                )
            )
            return
        self._become(UnattachedState(epoch, self._election_deadline(now), leader_id=leader_id))

    def add_vote(self, candidate_id: int, now: int) -> None:
        """Record a granted standard vote (Unattached → Voted, or a Prospective that votes)."""
        state = self.state
        if candidate_id == self.local_id:
            self._illegal("a vote for itself outside candidacy")
        if not isinstance(state, UnattachedState | ProspectiveState) or state.voted_id >= 0:
            if state.election_state().voted_id != candidate_id:
                self._illegal(f"a vote for {candidate_id}")
            # Granted again (the first answer was lost): it still leaves only once durable.
        else:
            state.voted_id = candidate_id
            state.election_deadline = self._election_deadline(now)
        self._mark_durable()

    def to_prospective(self, now: int) -> None:
        current = self.state
        if not self.is_voter or self.local_id is None:
            self._illegal("Prospective as an observer")
        if isinstance(current, LeaderState | ProspectiveState):
            self._illegal("Prospective")
        if isinstance(current, ResignedState) and not self.is_only_voter():
            self._illegal("Prospective (a resigned leader waits for epoch + 1)")
        retries = current.retries + 1 if isinstance(current, CandidateState) else 1
        knows_leader = isinstance(current, UnattachedState | FollowerState)
        leader_id = current.leader_id if knows_leader else -1
        voted_id = current.election_state().voted_id
        endpoint = current.leader_endpoint if isinstance(current, FollowerState) else ""
        self._become(
            ProspectiveState(
                current.epoch,
                EpochElection(self.voters().ids, self.local_id),
                self._election_deadline(now),
                retries,
                leader_id=leader_id,
                voted_id=voted_id,
                leader_endpoint=endpoint,
            ),
            durable=False,
        )

    def to_candidate(self, now: int) -> None:
        current = self.state
        if not isinstance(current, ProspectiveState) or self.local_id is None:
            self._illegal("Candidate")
        self._become(
            CandidateState(
                current.epoch + 1,
                self.local_id,
                EpochElection(self.voters().ids, self.local_id),
                self._election_deadline(now),
                current.retries,
            )
        )

    def to_leader(self, epoch_start_offset: int, now: int) -> LeaderState:
        current = self.state
        if not isinstance(current, CandidateState) or not current.election.is_won():
            self._illegal("Leader without a won election")
        local_key = self.local_key
        assert local_key is not None
        leader = LeaderState(
            epoch=current.epoch,
            local_key=local_key,
            voter_set=self.voters(),
            epoch_start_offset=epoch_start_offset,
            granting_voters=current.election.granting(),
            check_quorum_deadline=now,
            fetch_timeout_ms=self.config.fetch_timeout_ms,
        )
        leader.check_quorum_deadline = now + leader.check_quorum_timeout_ms()
        self._become(leader)
        return leader

    def to_follower(self, epoch: int, leader_id: int, endpoint: str, now: int) -> None:
        current = self.state
        if leader_id == self.local_id:
            self._illegal(f"following itself in epoch {epoch}")
        if epoch < current.epoch:
            self._illegal(f"Follower of {leader_id} in epoch {epoch}")
        voted_id = -1
        if epoch == current.epoch:
            if isinstance(current, LeaderState | ResignedState):
                self._illegal(f"Follower of {leader_id} in its own epoch {epoch}")
            if current.leader_id >= 0 and current.leader_id != leader_id:
                raise RaftInvariantError(
                    f"two leaders in epoch {epoch}: {current.leader_id} and {leader_id}"
                )
            if isinstance(current, FollowerState):
                if current.leader_endpoint or not endpoint:
                    return  # nothing new
                current.leader_endpoint = endpoint
                return
            # Keep the vote of this epoch: a node must never vote twice in one epoch.
            voted_id = current.election_state().voted_id
        self._become(
            FollowerState(
                epoch, leader_id, endpoint, now + self.config.fetch_timeout_ms, voted_id=voted_id
            )
        )

    def to_resigned(self, now: int) -> ResignedState:
        current = self.state
        if not isinstance(current, LeaderState):
            self._illegal("Resigned")
        successors = current.descending_fetch_offsets()
        resigned = ResignedState(
            current.epoch,
            current.local_id,
            # Even a leader that removed itself (no longer a voter) moves on to epoch + 1.
            now + random_election_timeout(self.rng, self.config.election_timeout_ms),
            successors,
            unacked_voters=set(successors),
        )
        self._become(resigned, durable=False)
        return resigned

    # -- helpers -----------------------------------------------------------------------------

    def _election_deadline(self, now: int) -> float:
        if not self.is_voter:
            return NO_DEADLINE
        return now + random_election_timeout(self.rng, self.config.election_timeout_ms)

    def new_election_deadline(self, now: int) -> float:
        return self._election_deadline(now)

    def _become(self, state: EpochState, durable: bool = True) -> None:
        previous = self.state
        self.state = state
        if durable:
            self._mark_durable()
        log.debug("%s(%d) -> %s(%d)", previous.name, previous.epoch, state.name, state.epoch)

    def _mark_durable(self) -> None:
        current = self.state.election_state()
        self.unpersisted = current if current != self._persisted else None

    def take_unpersisted(self) -> ElectionState | None:
        """The election state the driver must write before sending anything. It stays pending,
        and every output asks for it again, until the driver confirms the write: a write that
        failed must never let a later output (a re-granted vote, a leader's request) leave as
        if the state were saved."""
        return self.unpersisted

    def confirm_persisted(self, state: ElectionState) -> None:
        """The driver wrote `state` durably."""
        self._persisted = state
        if self.unpersisted == state:
            self.unpersisted = None

    def _illegal(self, target: str) -> NoReturn:
        raise RaftInvariantError(
            f"illegal transition from {self.state.name}(epoch {self.state.epoch}) to {target}"
        )
