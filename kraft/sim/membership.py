"""The operator of a simulated dynamic quorum: an admin client that adds and removes voters
(`kraft-admin quorum add-controller` / `remove-controller`) by AddRaftVoter and
RemoveRaftVoter sent over the simulated network to whoever leads.

It behaves as the procedures of the spec (section 9) tell an operator to: a refusal that may
pass (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, BROKER_NOT_AVAILABLE, a lost or refused
request, no answer within its own deadline) is retried after re-reading the voter set, since a
change that timed out may still commit (R4.3); DUPLICATE_VOTER and VOTER_NOT_FOUND mean "done"
when the leader's latest set already says so, and the change then counts once it is committed.
An answer of NONE is held to the checker: the change must be committed when it arrives.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kraft.core.errors import Errors
from kraft.core.messages import (
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    Response,
    VoterChangeRequest,
    VoterChangeResponse,
)
from kraft.core.voters import ReplicaKey
from kraft.sim.cluster import SimCluster, endpoint

CLIENT_IDS_FROM = 100  # simulated node ids stay below this
RETRY_BACKOFF_MS = (50, 400)
# The operator's own deadline for an answer: the leader answers within its request timeout
# (a pending change times out there), so only a lost message or a dead leader gets this far.
CLIENT_TIMEOUT_MARGIN_MS = 1_000
_RETRIABLE = {Errors.NOT_LEADER_OR_FOLLOWER, Errors.REQUEST_TIMED_OUT,
              Errors.BROKER_NOT_AVAILABLE}


@dataclass
class VoterChange:
    add: bool
    key: ReplicaKey
    started_ms: int
    history_index: int  # the checker's committed sets when it started
    attempts: int = 0
    refusals: dict[str, int] = field(default_factory=dict)
    done: bool = False
    acknowledged: bool = False  # a NONE answer arrived (rather than finding it done)
    timed_out_after_append: bool = False  # REQUEST_TIMED_OUT with the change in the log

    def __str__(self) -> str:
        return f"{'add' if self.add else 'remove'} {self.key}"


class Operator:
    """One admin client; it runs one change at a time (two operators may race)."""

    def __init__(self, cluster: SimCluster, name: int = 0) -> None:
        self.cluster = cluster
        self.client_id = CLIENT_IDS_FROM + name
        self.rng = random.Random(cluster.rng.random())
        self.current: VoterChange | None = None
        self.completed: list[VoterChange] = []
        self._next_cid = 1
        self._in_flight: dict[int, VoterChange] = {}
        cluster.admin_clients[self.client_id] = self

    @property
    def idle(self) -> bool:
        return self.current is None

    # -- starting a change ------------------------------------------------------------------

    def add(self, node_id: int) -> VoterChange:
        """Add node `node_id` with the directory id its disk has now (`add-controller` run on
        that node, from its own meta.properties)."""
        return self._start(True, self.cluster.nodes[node_id].key)

    def remove(self, key: ReplicaKey) -> VoterChange:
        return self._start(False, key)

    def _start(self, add: bool, key: ReplicaKey) -> VoterChange:
        if self.current is not None:
            raise RuntimeError(f"operator busy with {self.current}")
        change = VoterChange(add, key, self.cluster.now,
                             len(self.cluster.checker.voters.sets) - 1)
        self.current = change
        self._attempt(change)
        return change

    # -- the loop -----------------------------------------------------------------------------

    def _committed(self, change: VoterChange) -> bool:
        """`describe --status` once the change is in: the committed set says it."""
        voters = self.cluster.checker.voters.latest_committed()
        if change.add:
            return voters.is_voter(change.key) and voters.key_of(change.key.node_id) == change.key
        return voters.key_of(change.key.node_id) != change.key

    def _finish(self, change: VoterChange) -> None:
        change.done = True
        self.current = None
        self.completed.append(change)

    def _attempt(self, change: VoterChange) -> None:
        if change is not self.current:
            return
        if self._committed(change):
            self._finish(change)
            return
        leader = self.cluster.leader()
        if leader is None or leader.core is None:
            self._retry_later(change, "no leader")
            return
        if self._appended(change, leader.node_id):
            # Appended, not committed yet (a timed-out request, or another operator's): wait.
            self._retry_later(change, "waiting for commit")
            return
        change.attempts += 1
        request: VoterChangeRequest
        if change.add:
            request = AddRaftVoterRequest("sim-cluster", change.key.node_id,
                                          change.key.directory_id, endpoint(change.key.node_id))
        else:
            request = RemoveRaftVoterRequest("sim-cluster", change.key.node_id,
                                             change.key.directory_id)
        cid = self._next_cid
        self._next_cid += 1
        self._in_flight[cid] = change
        self.cluster.send_from_client(self.client_id, leader.node_id, cid, request)
        timeout = self.cluster.timing.request_timeout_ms + CLIENT_TIMEOUT_MARGIN_MS
        self.cluster.at(timeout, lambda: self._give_up(cid))

    def _retry_later(self, change: VoterChange, why: str) -> None:
        change.refusals[why] = change.refusals.get(why, 0) + 1
        self.cluster.at(self.rng.randint(*RETRY_BACKOFF_MS), lambda: self._attempt(change))

    def _give_up(self, cid: int) -> None:
        change = self._in_flight.pop(cid, None)
        if change is not None:
            self._retry_later(change, "no answer")

    def _appended(self, change: VoterChange, node_id: int) -> bool:
        """Whether node `node_id`'s latest voter set has the change (committed or not)."""
        node = self.cluster.nodes.get(node_id)
        if node is None or node.core is None:
            return False
        voters = node.core.voters
        present = voters.key_of(change.key.node_id) == change.key
        return present if change.add else not present

    # -- answers ------------------------------------------------------------------------------

    def on_failure(self, correlation_id: int) -> None:
        change = self._in_flight.pop(correlation_id, None)
        if change is not None:
            self._retry_later(change, "connection refused")

    def on_response(self, correlation_id: int, response: Response) -> None:
        change = self._in_flight.pop(correlation_id, None)
        if change is None:
            return  # given up already
        if not isinstance(response, VoterChangeResponse):
            self.cluster.checker.fail(f"operator got {response!r} for {change}")
            return
        error = response.error
        if error == Errors.REQUEST_TIMED_OUT and self._appended(change, response.leader_id):
            change.timed_out_after_append = True
        if error == Errors.NONE:
            if not self.cluster.checker.voters.change_committed_since(
                change.history_index, change.key, change.add
            ):
                self.cluster.checker.fail(
                    f"{change} was acknowledged by node {response.leader_id} (epoch "
                    f"{response.leader_epoch}) but is not committed"
                )
            change.acknowledged = True
            self._finish(change)
        elif error in _RETRIABLE or (
            error == Errors.DUPLICATE_VOTER and change.add
        ) or (error == Errors.VOTER_NOT_FOUND and not change.add):
            # Re-read the voter set and go on (the two "already so" answers included).
            self._retry_later(change, error.name)
        else:
            self.cluster.checker.fail(
                f"{change} refused with {error.name}: {response.error_message}"
            )
