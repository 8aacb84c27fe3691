"""RaftCore: the public face of the sans-I/O protocol core.

The driver (a real node or the simulator) feeds it inbound requests, responses, failures, local
commands and the time, and after each call collects an `Output`: the election state to persist,
then requests to send and replies to return. The core reads and appends to its log in memory; it
learns of durability from `on_log_flushed` and never counts or ships what is not flushed.
Snapshot file I/O (reading chunks to serve, writing and freezing a fetched snapshot) is asked
for as jobs in the output and reported back with `on_snapshot_job_done`.

Every entry point ends in `_poll`, which runs the timers of the current state and sends what
that state needs, so the driver only has to call `poll` again at `next_deadline()`.

Here: the driver's entry points, the output and the per-state polls. The state itself and the
operations the RPC handlers share are `CoreState` (kraft/core/core_state.py), the base class;
`Output`, `LeaderAndEpoch` and `NodeStatus` are in kraft/core/output.py (importable from here).
"""

from __future__ import annotations

import logging
import random

from kraft.core import (
    rpc_fetch,
    rpc_fetch_snapshot,
    rpc_quorum_epoch,
    rpc_vote,
    rpc_voter_change,
)
from kraft.core.config import RaftConfig
from kraft.core.connections import InFlight
from kraft.core.core_state import CoreState
from kraft.core.errors import Errors, NotLeaderError, RaftError, RaftInvariantError
from kraft.core.leader import LeaderState
from kraft.core.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumDescription,
    Reply,
    Request,
    Response,
    VoterChangeRequest,
    VoterChangeResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.core.output import LeaderAndEpoch, NodeStatus, Output
from kraft.core.states import (
    NO_DEADLINE,
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from kraft.core.voters import SnapshotVoters
from kraft.election_state import ElectionState
from kraft.log.base import ReplicatedLog, SnapshotJob, SnapshotStore

log = logging.getLogger(__name__)

DISCOVERY_BACKOFF_MS = 100  # between discovery fetches of a replica that knows no leader


class RaftCore(CoreState):
    def __init__(
        self,
        config: RaftConfig,
        log_: ReplicatedLog,
        persisted: ElectionState,
        now: int,
        rng: random.Random,
        snapshots: SnapshotStore | None = None,
        snapshot_voters: SnapshotVoters | None = None,
    ) -> None:
        """`log_` must already start where the snapshots say (the driver's start-up does it);
        without `snapshots` the node has none (an in-memory store, empty).
        `snapshot_voters` is what the latest snapshot says of the voter set (KIP-853; the
        driver reads it, as the core does no file I/O); the log's own records follow."""
        super().__init__(config, log_, persisted, now, rng, snapshots, snapshot_voters)
        self._poll(now)

    # -- queries -----------------------------------------------------------------------------

    def status(self) -> NodeStatus:
        state = self.quorum.state
        return NodeStatus(
            node_id=self.local_id,
            state=state.name,
            epoch=state.epoch,
            leader_id=state.leader_id,
            voted_id=state.election_state().voted_id,
            high_watermark=self.high_watermark,
            log_end_offset=self.log.end_offset,
            flushed_offset=self.log.flushed_offset,
            last_epoch=self.log.last_epoch,
            is_voter=self.quorum.is_voter,
            directory_id=self.config.directory_id,
            kraft_version=self.kraft_version,
        )

    def describe_quorum(self, now: int) -> QuorumDescription:
        leader = self._leader_or_raise()
        leader.expire_observers(now)
        return QuorumDescription(
            leader_id=leader.local_id,
            leader_epoch=leader.epoch,
            high_watermark=leader.high_watermark if leader.high_watermark is not None else -1,
            voters=tuple(
                p.describe(leader.voter_set.endpoint(i)) for i, p in sorted(leader.voters.items())
            ),
            observers=tuple(p.describe() for _, p in sorted(leader.observers.items())),
            kraft_version=self.kraft_version,
        )

    def next_deadline(self) -> float:
        """The time at which `poll` has work to do, or infinity."""
        state = self.quorum.state
        candidates: list[float] = [self.connections.next_deadline(self._now)]
        if isinstance(state, UnattachedState | ProspectiveState | ResignedState):
            candidates.append(state.election_deadline)
        if isinstance(state, CandidateState):
            candidates.append(
                state.backoff_deadline if state.backoff_deadline is not None else
                state.election_deadline
            )
        if isinstance(state, FollowerState):
            candidates.append(state.fetch_deadline)
        if isinstance(state, LeaderState):
            candidates.append(state.check_quorum_deadline)
            candidates.extend(state.next_begin_epoch_ms.values())
            candidates.extend(p.deadline for p in state.parked_fetches)
            if state.pending_change is not None:
                candidates.append(state.pending_change.deadline)
        if self._wants_discovery(state):
            candidates.append(self._discovery_after)
        # Every poll handles what is due; a past deadline left over is blocked on a busy or
        # backing-off connection, whose own deadline is among the candidates.
        return min((t for t in candidates if t > self._now), default=NO_DEADLINE)

    def shutdown_complete(self) -> bool:
        """A graceful shutdown may finish: nobody depends on this node to hand over."""
        if not self.shutting_down:
            return False
        if not self.quorum.is_voter or self.quorum.is_only_voter():
            return True
        state = self.quorum.state
        return isinstance(state, FollowerState) or (
            state.leader_id >= 0 and state.leader_id != self.local_id
        )

    # -- inputs ------------------------------------------------------------------------------

    def poll(self, now: int) -> None:
        self._poll(now)

    def handle_request(self, token: int, request: Request, now: int) -> None:
        """An inbound request; its Reply (under `token`) comes now or, for a parked Fetch, later."""
        self._now = now
        response: Response | None
        if isinstance(request, FetchRequest):
            response = rpc_fetch.handle_request(self, token, request, now)
        elif isinstance(request, VoteRequest):
            response = rpc_vote.handle_request(self, request, now)
        elif isinstance(request, BeginQuorumEpochRequest):
            response = rpc_quorum_epoch.handle_begin_request(self, request, now)
        elif isinstance(request, EndQuorumEpochRequest):
            response = rpc_quorum_epoch.handle_end_request(self, request, now)
        elif isinstance(request, FetchSnapshotRequest):
            response = rpc_fetch_snapshot.handle_request(self, token, request, now)
        elif isinstance(request, VoterChangeRequest):
            response = rpc_voter_change.handle_request(self, token, request, now)
        elif isinstance(request, ApiVersionsRequest):
            response = rpc_voter_change.api_versions(self)
        else:  # pragma: no cover - the union above is exhaustive
            raise TypeError(f"not a raft request: {request!r}")
        if response is not None:
            self._replies.append(Reply(token, response))
        self._poll(now)

    def handle_response(self, correlation_id: int, response: Response, now: int) -> None:
        self._now = now
        entry = self.connections.complete(correlation_id)
        if entry is None:
            return  # timed out, or sent by a state we have left
        self.connections.note_answered(entry.destination)
        if isinstance(response, ApiVersionsResponse):
            rpc_voter_change.on_api_versions(self, entry, response, now)
        elif response.error == Errors.INCONSISTENT_CLUSTER_ID:
            log.error(
                "node %d belongs to another cluster (INCONSISTENT_CLUSTER_ID); check its "
                "meta.properties", entry.destination,
            )
            self._back_off(entry, now)
        elif self._handle_common_response(entry, response, now):
            pass
        # The transport pairs every answer with the RPC that asked (one gRPC method each).
        elif isinstance(response, FetchResponse):
            rpc_fetch.handle_response(self, entry, response, now)
        elif isinstance(response, VoteResponse):
            rpc_vote.handle_response(self, entry, response, now)
        elif isinstance(response, BeginQuorumEpochResponse):
            rpc_quorum_epoch.handle_begin_response(self, entry, response, now)
        elif isinstance(response, EndQuorumEpochResponse):
            rpc_quorum_epoch.handle_end_response(self, entry, response, now)
        elif isinstance(response, FetchSnapshotResponse):
            rpc_fetch_snapshot.handle_response(self, entry, response, now)
        elif isinstance(response, VoterChangeResponse):
            rpc_voter_change.handle_response(self, entry, response, now)
        self._poll(now)

    def handle_failure(
        self, correlation_id: int, now: int, unreachable: bool = False, timed_out: bool = False
    ) -> None:
        """A request got no answer. `unreachable` says the connection was refused or reset —
        the peer's process is gone; `timed_out` that the driver gave up at the request's
        timeout, as `poll` would have (a voter's Fetch: the leader may be hung)."""
        self._now = now
        entry = self.connections.complete(correlation_id)
        if entry is None:
            return
        self._back_off(entry, now)
        rpc_voter_change.on_failure(self, entry, now)
        if unreachable:
            rpc_fetch.on_unreachable(self, entry, now)
            rpc_vote.on_unreachable(self, entry, now)
        elif timed_out:
            rpc_fetch.on_timeout(self, entry, now)
        self._poll(now)

    def on_log_flushed(self, now: int) -> None:
        """The driver completed a flush: the leader may count more of its own log."""
        self._now = now
        state = self.quorum.state
        if isinstance(state, LeaderState):
            if state.update_local(self.log.flushed_offset, now):
                self.note_leader_high_watermark(state)
            rpc_fetch.complete_parked(self, state, now)
        self._poll(now)

    def on_snapshot_job_done(self, job: SnapshotJob, now: int) -> None:
        """The driver ran a job of `Output.snapshot_jobs`: a chunk read answers its
        FetchSnapshot; a follower's chunk write lets it ask for the next one; a freeze
        installs the snapshot."""
        self._now = now
        if job.ordered:
            self._ordered_jobs_pending -= 1
        rpc_fetch_snapshot.on_job_done(self, job)
        self._poll(now)

    @property
    def installing_snapshot(self) -> bool:
        """A fetched snapshot is being written, frozen or dropped. A snapshot the driver froze
        is in the store's index before the core installs (or deletes) it: retention must not
        move the log start onto it meanwhile."""
        state = self.quorum.state
        transfer = isinstance(state, FollowerState) and state.fetching_snapshot is not None
        return transfer or self._ordered_jobs_pending > 0

    # -- local commands ----------------------------------------------------------------------

    def append(self, records: list[bytes], now: int) -> int:
        """Append records as one batch in the leader's epoch; returns the last offset. The
        records are committed once `high_watermark` passes that offset in this epoch."""
        self._now = now
        leader = self._leader_or_raise()
        if leader.resign_requested or self.shutting_down:
            raise NotLeaderError(f"the leader of epoch {leader.epoch} is resigning")
        size = sum(len(r) for r in records)
        if size > self.config.fetch_max_bytes:
            raise RaftError(
                Errors.RECORD_BATCH_TOO_LARGE,
                f"{size} bytes exceed the {self.config.fetch_max_bytes}-byte batch limit",
            )
        base = self.log.append_as_leader(records, leader.epoch, now + self.wall_clock_offset_ms)
        rpc_fetch.complete_parked(self, leader, now)  # followers get it before the fsync
        return base + len(records) - 1

    def resign(self, epoch: int, now: int) -> None:
        """Step down as leader of `epoch` (ignored for an older epoch)."""
        self._now = now
        if epoch < self.epoch:
            return
        leader = self._leader_or_raise()
        if epoch > leader.epoch:
            raise RaftError(Errors.INVALID_REQUEST, f"cannot resign epoch {epoch} > {leader.epoch}")
        leader.resign_requested = True
        self._poll(now)

    def begin_shutdown(self, now: int) -> None:
        """Graceful shutdown: a leader resigns; nobody starts a new election."""
        self._now = now
        self.shutting_down = True
        if isinstance(self.quorum.state, LeaderState):
            self.quorum.state.resign_requested = True
        self._poll(now)

    # -- output ------------------------------------------------------------------------------

    def election_state_persisted(self, state: ElectionState) -> None:
        """The driver wrote `state` (from an Output) durably."""
        self.quorum.confirm_persisted(state)

    def take_output(self) -> Output:
        """What to do now. A non-None `election_state` must be written, and confirmed with
        `election_state_persisted`, before the requests and replies leave; until it is
        confirmed every output names it again."""
        out = Output(election_state=self.quorum.take_unpersisted())
        if self._requests:
            out.requests, self._requests = self._requests, []
        if self._replies:
            out.replies, self._replies = self._replies, []
        current = LeaderAndEpoch(self.leader_id, self.epoch)
        if current != self._reported_leader:
            self._reported_leader = out.leader = current
        if self.high_watermark != self._reported_hw:
            self._reported_hw = out.high_watermark = self.high_watermark
        if self.snapshot_to_load is not None:
            out.snapshot_loaded, self.snapshot_to_load = self.snapshot_to_load, None
        if self._snapshot_jobs:
            out.snapshot_jobs, self._snapshot_jobs = self._snapshot_jobs, []
        return out

    def _handle_common_response(self, entry: InFlight, response: EpochResponse, now: int) -> bool:
        """Kafka's maybeHandleCommonResponse. True when the response needs nothing more."""
        epoch = self.quorum.epoch
        error = response.error
        if response.leader_epoch < epoch or error == Errors.UNKNOWN_LEADER_EPOCH:
            return True  # stale
        if response.leader_epoch > epoch or error in (
            Errors.FENCED_LEADER_EPOCH,
            Errors.NOT_LEADER_OR_FOLLOWER,
        ):
            self.maybe_transition(
                response.leader_id, response.leader_epoch, response.leader_endpoint, now
            )
            if error != Errors.NONE:
                self._back_off(entry, now)
            return True
        if response.leader_id >= 0 and self.quorum.leader_id < 0:
            self.maybe_transition(
                response.leader_id, response.leader_epoch, response.leader_endpoint, now
            )
            if error != Errors.NONE:
                self._back_off(entry, now)
                return True
            return False
        if error == Errors.BROKER_NOT_AVAILABLE:
            self._back_off(entry, now)
            return True
        if error in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
            return False  # FetchSnapshot's own answers: its handler restarts the transfer
        if error == Errors.INVALID_REQUEST and not isinstance(response, VoterChangeResponse):
            # (An UpdateRaftVoter refused for what it says of this node is logged instead.)
            raise RaftInvariantError(
                f"node {entry.destination} called our {type(entry.request).__name__} invalid"
            )
        if error not in (Errors.NONE,):
            log.warning(
                "%s to node %d failed with %s", type(entry.request).__name__,
                entry.destination, error.name,
            )
            self._back_off(entry, now)
            return True
        return False

    def _wants_discovery(self, state: object) -> bool:
        if isinstance(state, UnattachedState):
            return True
        return isinstance(state, FollowerState) and state.fetch_from_bootstrap

    def _poll(self, now: int) -> None:
        self._now = now
        for entry in self.connections.expire(now):
            rpc_fetch.on_timeout(self, entry, now)
            rpc_voter_change.on_failure(self, entry, now)
        # A poll may change the state; poll again until it settles (a single voter goes
        # Unattached → Prospective → Candidate → Leader in one call). Handlers only change
        # state; polls send, so requests always belong to the state that sent them.
        for _ in range(8):
            self._note_state_change()
            state = self.quorum.state
            self._poll_state(state, now)
            if self.quorum.state is state:
                return
        self._note_state_change()

    def _note_state_change(self) -> None:
        state = self.quorum.state
        if state is self._last_state:
            return
        previous, self._last_state = self._last_state, state
        self.connections.reset()
        self._discovery_after = 0
        if isinstance(previous, LeaderState):
            rpc_fetch.fail_parked(self, previous)
            rpc_voter_change.fail_pending(self, previous)
        rpc_fetch_snapshot.abandon(self, previous)

    def _poll_state(self, state: object, now: int) -> None:
        if isinstance(state, LeaderState):
            self._poll_leader(state, now)
        elif isinstance(state, CandidateState):
            self._poll_candidate(state, now)
        elif isinstance(state, ProspectiveState):
            self._poll_prospective(state, now)
        elif isinstance(state, FollowerState):
            self._poll_follower(state, now)
        elif isinstance(state, ResignedState):
            self._poll_resigned(state, now)
        elif isinstance(state, UnattachedState):
            self._poll_unattached(state, now)

    def _single_voter(self) -> bool:
        return self.quorum.is_only_voter()

    def _latest_voters_committed(self) -> bool:
        latest = self.voter_history.latest_offset()
        return latest is None or latest < self.high_watermark

    def _poll_leader(self, leader: LeaderState, now: int) -> None:
        if leader.resign_requested or leader.check_quorum_expired(now):
            if not leader.resign_requested:
                log.warning(
                    "leader %s heard from too few voters in %d ms (check-quorum); resigning",
                    self.local_id, leader.check_quorum_timeout_ms(),
                )
            self.quorum.to_resigned(now)
            return
        rpc_fetch.expire_parked(self, leader, now)
        rpc_voter_change.expire_pending(self, leader, now)
        for voter, due in leader.next_begin_epoch_ms.items():
            if due <= now and self.connections.is_ready(voter, now):
                leader.next_begin_epoch_ms[voter] = now + self.config.fetch_timeout_ms // 2
                self.send(
                    voter,
                    self.endpoint_of(voter),
                    BeginQuorumEpochRequest(
                        self.config.cluster_id, leader.local_id, leader.epoch,
                        self.config.local_endpoint, voter_id=voter,
                        voter_directory_id=leader.voter_set.nodes[voter].key.directory_id,
                    ),
                    now,
                )

    def _poll_candidate(self, state: CandidateState, now: int) -> None:
        if state.election.is_won():
            self.become_leader(now)
            return
        expired = (
            state.backoff_deadline is not None and now >= state.backoff_deadline
        ) or now >= state.election_deadline
        if expired:
            if not self.shutting_down:
                self.quorum.to_prospective(now)
            return
        if state.backoff_deadline is None:
            rpc_vote.send_votes(self, state, pre_vote=False, now=now)

    def _poll_prospective(self, state: ProspectiveState, now: int) -> None:
        if state.election.is_won():
            self.quorum.to_candidate(now)
            return
        if now >= state.election_deadline:
            rpc_vote.after_lost_pre_vote(self, state, now, rejected=False)
            return
        rpc_vote.send_votes(self, state, pre_vote=True, now=now)

    def _poll_follower(self, state: FollowerState, now: int) -> None:
        if self._single_voter() and not self.shutting_down and (
            not state.leader_live or self._latest_voters_committed()
        ):
            # The only voter leads itself; but while a live leader still commits the change
            # that made it the only one (its own removal, R5.2) it fetches on, so the change
            # commits and is answered before it stands.
            self.quorum.to_prospective(now)
            return
        if now >= state.fetch_deadline:
            if self.quorum.is_voter:
                if not self.shutting_down:
                    self.quorum.to_prospective(now)
                    return
            else:
                state.fetch_from_bootstrap = True
                state.leader_live = False  # it may grant pre-votes now (T1)
            state.fetch_deadline = now + self.config.fetch_timeout_ms
        if state.fetch_from_bootstrap:
            self._maybe_send_discovery_fetch(now)
        elif state.fetching_snapshot is not None:
            rpc_fetch_snapshot.maybe_send(self, state, now)
        elif rpc_voter_change.maybe_send_update(self, state, now):
            pass  # in place of this poll's Fetch (R6.2)
        else:
            rpc_fetch.maybe_send_fetch(self, state.leader_id, state.leader_endpoint, now)

    def _poll_resigned(self, state: ResignedState, now: int) -> None:
        if self._single_voter() and not self.shutting_down:
            self.quorum.to_prospective(now)
            return
        if now >= state.election_deadline:
            self.quorum.to_unattached(state.epoch + 1, now)
            return
        for voter in sorted(state.unacked_voters):
            if self.connections.is_ready(voter, now):
                self.send(
                    voter,
                    self.endpoint_of(voter),
                    EndQuorumEpochRequest(
                        self.config.cluster_id, state.local_id, state.epoch,
                        state.preferred_successors, self.config.local_endpoint,
                    ),
                    now,
                )

    def _poll_unattached(self, state: UnattachedState, now: int) -> None:
        expired = now >= state.election_deadline or self._single_voter()
        if self.quorum.is_voter and expired and not self.shutting_down:
            self.quorum.to_prospective(now)
            return
        self._maybe_send_discovery_fetch(now)

    def _maybe_send_discovery_fetch(self, now: int) -> None:
        """Ask a random voter (or bootstrap server) for the leader, at a modest rate."""
        if now < self._discovery_after:
            return
        targets = [
            (nid, ep) for nid, ep in self.discovery_targets()
            if nid != self.local_id and self.connections.is_ready(nid, now)
        ]
        if not targets:
            return
        node_id, endpoint = self.rng.choice(targets)
        if rpc_fetch.maybe_send_fetch(self, node_id, endpoint, now):
            self._discovery_after = now + DISCOVERY_BACKOFF_MS



__all__ = ["NO_DEADLINE", "LeaderAndEpoch", "NodeStatus", "Output", "RaftCore"]
