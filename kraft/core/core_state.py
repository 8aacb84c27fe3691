"""The state RaftCore keeps and the operations its RPC handlers share.

`CoreState` is the concrete side of `HandlerContext` (kraft/core/context.py, the Protocol the
rpc_*.py modules see): the log, snapshot store, quorum and connections; sending, answering
later and queueing snapshot jobs; the transitions a peer's (leader, epoch) causes and taking
the lead; the high watermark; and the voter set kept in the log (KIP-853). `RaftCore`
(kraft/core/raft.py) adds the driver's entry points, the output and the per-state polls.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable

from kraft.core import rpc_fetch, rpc_voter_change
from kraft.core.config import RaftConfig
from kraft.core.connections import Connections, InFlight
from kraft.core.election import binary_exponential_backoff
from kraft.core.errors import NotLeaderError, RaftInvariantError
from kraft.core.leader import LeaderState
from kraft.core.messages import (
    FetchRequest,
    FetchSnapshotResponse,
    OutboundRequest,
    Reply,
    Request,
    Response,
    VoteRequest,
)
from kraft.core.output import LeaderAndEpoch
from kraft.core.quorum import QuorumState
from kraft.core.states import CandidateState, EpochState, FollowerState, ProspectiveState
from kraft.core.voters import (
    BOOTSTRAP_OFFSET,
    ReplicaKey,
    SnapshotVoters,
    VoterHistory,
    VoterNode,
    VoterSet,
    VoterSetError,
    apply_control_record,
    control_records_for,
)
from kraft.election_state import ElectionState
from kraft.log.base import Batch, OffsetAndEpoch, ReplicatedLog, SnapshotJob, SnapshotStore
from kraft.log.codec import LEADER_CHANGE, control_batches, encode_control_record
from kraft.log.memory_snapshots import MemorySnapshotStore
from kraft.log.snapshot_jobs import ReadChunk

log = logging.getLogger(__name__)


class CoreState:
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
        """The state RaftCore starts from (see RaftCore.__init__)."""
        self.config = config
        self.log = log_
        self.snapshots: SnapshotStore = (
            snapshots if snapshots is not None else MemorySnapshotStore()
        )
        self.snapshot_to_load: OffsetAndEpoch | None = None
        self.rng = rng
        self.voter_history = VoterHistory(VoterSet.static(config.voters))
        # Records of the control batches this node appended as leader for voter changes.
        self.leader_control_records = 0
        first = log_.start_offset
        if snapshot_voters is not None:
            snapshot_voters.apply_to(self.voter_history)
            # The log may still hold records the snapshot covers (retention deletes whole
            # segments): the snapshot's set already includes theirs.
            first = max(first, snapshot_voters.offset + 1)
        self._apply_control_batches(
            b for b in log_.batches(first, log_.end_offset) if b.control and b.base_offset >= first
        )
        self.quorum = QuorumState(config, rng, self.voter_history.latest)
        self.connections = Connections()
        self.high_watermark = log_.start_offset
        self.shutting_down = False
        # Record timestamps are wall-clock; `now` is monotonic. The driver sets the difference.
        self.wall_clock_offset_ms = 0
        self._discovery_after = 0
        self._now = now
        self._requests: list[OutboundRequest] = []
        self._replies: list[Reply] = []
        self._snapshot_jobs: list[SnapshotJob] = []
        self._ordered_jobs_pending = 0  # asked for and not handed back yet
        # FetchSnapshot answers waiting for their ReadChunk job (the bytes are all they lack).
        self.chunk_reads: dict[ReadChunk, FetchSnapshotResponse] = {}
        self._last_state: object = None
        self._reported_leader = LeaderAndEpoch(-1, -1)
        self._reported_hw = -1
        self.quorum.initialize(
            persisted, OffsetAndEpoch(log_.end_offset, log_.last_epoch), now
        )
        self._last_state = self.quorum.state

    # -- queries -----------------------------------------------------------------------------

    @property
    def state(self) -> EpochState:
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int:
        return self.quorum.leader_id

    @property
    def is_leader(self) -> bool:
        return self.quorum.is_leader

    @property
    def local_id(self) -> int | None:
        return self.config.node_id

    @property
    def local_key(self) -> ReplicaKey | None:
        return self.quorum.local_key

    @property
    def voters(self) -> VoterSet:
        """The latest voter set of the local log, committed or not (KIP-853 R2.2)."""
        return self.voter_history.latest()

    @property
    def kraft_version(self) -> int:
        return self.voter_history.kraft_version()

    # -- shared machinery for the rpc modules --------------------------------------------------

    def queue_snapshot_job(self, job: SnapshotJob) -> None:
        """Ask the driver for snapshot file I/O (in the next output)."""
        if job.ordered:
            self._ordered_jobs_pending += 1
        self._snapshot_jobs.append(job)

    def send(self, destination: int, endpoint: str, request: Request, now: int) -> None:
        timeout_ms = self._timeout_for(request)
        entry = self.connections.send(destination, request, now, timeout_ms)
        self._requests.append(
            OutboundRequest(entry.correlation_id, destination, endpoint, request, timeout_ms)
        )

    def _timeout_for(self, request: Request) -> int:
        """A (pre-)vote round lasts one election timeout, so an unanswered Vote is given up
        (and asked again) within the round rather than after the request timeout: one lost
        message must not lose the round (seed 1139 of split_majority). Votes are idempotent:
        a voter re-grants the vote it already gave, and a pre-vote changes nothing."""
        if isinstance(request, VoteRequest):
            return min(self.config.request_timeout_ms, self.config.election_timeout_ms // 4)
        if isinstance(request, FetchRequest) and self.quorum.is_voter:
            # Answered within its max wait by a live leader: later is evidence (on_timeout).
            return min(self.config.request_timeout_ms,
                       request.max_wait_ms + self.config.hung_leader_margin_ms)
        return self.config.request_timeout_ms

    def reply_later(self, token: int, response: Response) -> None:
        self._replies.append(Reply(token, response))

    def valid_cluster_id(self, cluster_id: str | None) -> bool:
        return cluster_id is None or cluster_id == self.config.cluster_id

    def endpoint_of(self, node_id: int, hint: str = "") -> str:
        return hint or self.voters.endpoint(node_id)

    def leader_endpoint(self) -> str:
        leader_id = self.leader_id
        if leader_id == self.local_id:
            return self.config.local_endpoint
        state = self.quorum.state
        if isinstance(state, FollowerState):
            return state.leader_endpoint
        return self.endpoint_of(leader_id) if leader_id >= 0 else ""

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        new_hw = min(leader_hw, self.log.end_offset)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw

    def maybe_transition(self, leader_id: int, epoch: int, endpoint: str, now: int) -> None:
        """Act on a (leader, epoch) learned from a peer (Kafka's maybeTransition)."""
        quorum = self.quorum
        if epoch == quorum.epoch and leader_id >= 0:
            names_us = leader_id == self.local_id
            if names_us and not quorum.is_leader and quorum.leader_id != leader_id:
                # This node's storage was lost (its old disk led this epoch; a re-formatted
                # one is a new replica, KIP-853) and it learned the epoch from a peer first.
                # It must not follow itself: it waits for a later epoch, as when the epoch
                # named is above its own (_follow_or_unattach).
                log.warning(
                    "a peer names this node leader of epoch %d, which it does not lead (was "
                    "its storage lost? is node.id %s configured twice?); waiting for a later "
                    "epoch", epoch, self.local_id,
                )
                return
            if quorum.leader_id >= 0 and quorum.leader_id != leader_id:
                raise RaftInvariantError(
                    f"two leaders in epoch {epoch}: {quorum.leader_id} and {leader_id}"
                )
        if epoch > quorum.epoch or (
            epoch == quorum.epoch
            and leader_id >= 0
            and leader_id != self.local_id
            and not isinstance(quorum.state, FollowerState)
        ):
            self._follow_or_unattach(leader_id, epoch, endpoint, now)
        elif epoch == quorum.epoch and isinstance(quorum.state, FollowerState):
            if endpoint:
                quorum.to_follower(epoch, leader_id, endpoint, now)  # learns a missing endpoint
            if leader_id == quorum.leader_id:
                # A peer confirms the leader this observer follows: fetch from it again rather
                # than keep asking random voters, each lost message of which costs a request
                # timeout (simulator seeds 6638673 of disk_loss, 6649888 of split_majority).
                quorum.state.fetch_from_bootstrap = False

    def _follow_or_unattach(self, leader_id: int, epoch: int, endpoint: str, now: int) -> None:
        if leader_id >= 0 and leader_id == self.local_id and epoch > self.quorum.epoch:
            # Peers name this node leader of an epoch it does not remember: its storage was
            # lost. Stand aside in that epoch (no vote in it, as a resigned leader would).
            log.warning(
                "the quorum names this node leader of epoch %d, which it does not remember "
                "(was its storage lost?); standing aside until a later epoch", epoch,
            )
            self.quorum.to_unattached(epoch, now, leader_id)
            return
        endpoint = self.endpoint_of(leader_id, endpoint) if leader_id >= 0 else ""
        if leader_id >= 0 and endpoint:
            self.quorum.to_follower(epoch, leader_id, endpoint, now)
        elif epoch > self.quorum.epoch or isinstance(self.quorum.state, ProspectiveState):
            self.quorum.to_unattached(epoch, now, leader_id)

    def become_leader(self, now: int) -> None:
        leader = self.quorum.to_leader(self.log.end_offset, now)
        # The LeaderChange record opens the epoch; the HW may pass it only once a majority
        # holds it, which proves every earlier record is on a majority too.
        body = {
            "leaderId": leader.local_id,
            "voters": sorted(leader.voter_set.ids),
            "grantingVoters": sorted(leader.granting_voters),
        }
        self.log.append_as_leader(
            [encode_control_record(LEADER_CHANGE, body)],
            leader.epoch,
            now + self.wall_clock_offset_ms,
            control=True,
        )
        voters = self._voters_with_own_endpoint()
        if self.kraft_version >= 1 and (
            self.voter_history.latest_offset() == BOOTSTRAP_OFFSET or voters != self.voters
        ):
            # The bootstrap snapshot is local and never served: the first leader copies its
            # voter set into the log, which replicates it (R2.1). A leader whose own entry
            # lacks its configured endpoint corrects it there too (R2.2); the keys, and so
            # the majorities, stay the same.
            self.append_voters(voters, now)
        leader.update_local(self.log.flushed_offset, now)
        log.info("node %s leads epoch %d from offset %d", self.local_id, leader.epoch,
                 leader.epoch_start_offset)

    # -- internals ---------------------------------------------------------------------------

    def _leader_or_raise(self) -> LeaderState:
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(
                f"node {self.local_id} is {state.name} in epoch {state.epoch}; "
                f"the leader is {state.leader_id if state.leader_id >= 0 else 'unknown'}"
            )
        return state

    def note_leader_high_watermark(self, leader: LeaderState) -> None:
        if leader.high_watermark is not None and leader.high_watermark > self.high_watermark:
            self.high_watermark = leader.high_watermark
            rpc_voter_change.on_high_watermark(self, leader)

    # -- the voter set in the log (KIP-853) -------------------------------------------------

    def append_voters(self, voters: VoterSet, now: int) -> int:
        """Append, as the leader, a control batch with the kraft.version and `voters`; the set
        is in effect at once (R2.3). Returns the VotersRecord's offset."""
        leader = self._leader_or_raise()
        records = control_records_for(max(self.kraft_version, 1), voters)
        base = self.log.append_as_leader(
            records, leader.epoch, now + self.wall_clock_offset_ms, control=True
        )
        self.leader_control_records += len(records)
        self._apply_control_batches(self.log.batches(base, base + len(records)))
        if leader.set_voters(self.voters, now):
            self.note_leader_high_watermark(leader)
        rpc_fetch.complete_parked(self, leader, now)
        return base + len(records) - 1

    def _voters_with_own_endpoint(self) -> VoterSet:
        voters = self.voters
        key = self.local_key
        node = voters.nodes.get(key.node_id) if key is not None else None
        endpoint = self.config.local_endpoint
        if node is None or node.key != key or not endpoint or (
            (node.endpoint, node.listener) == (endpoint, self.config.listener)
        ):
            return voters
        return voters.updating(VoterNode(
            node.key, endpoint, self.config.listener, node.min_kraft_version,
            node.max_kraft_version,
        ))

    def on_appended_as_follower(self, data: bytes) -> None:
        """Records from the leader landed in the log: apply the voter-set records among
        them, uncommitted as they are (R2.3)."""
        self._apply_control_batches(control_batches(data))

    def on_truncated(self, offset: int) -> None:
        """The log dropped everything from `offset`: so does the voter history (it reverts)."""
        self.voter_history.truncate_from(offset)

    def on_snapshot_installed(
        self, snapshot_id: OffsetAndEpoch,
        control_records: tuple[tuple[int, dict[str, object]], ...],
    ) -> None:
        SnapshotVoters.from_control_records(snapshot_id.offset, control_records).apply_to(
            self.voter_history
        )

    def snapshot_control_records(self, snapshot_end_offset: int) -> list[bytes]:
        """What a snapshot ending at `snapshot_end_offset` must carry of the voter set."""
        last = snapshot_end_offset - 1
        return control_records_for(
            self.voter_history.kraft_version_at(last), self.voter_history.set_at(last)
        )

    def _apply_control_batches(self, batches: Iterable[Batch]) -> None:
        for batch in batches:
            for index, record in enumerate(batch.records):
                try:
                    apply_control_record(self.voter_history, batch.base_offset + index, record)
                except VoterSetError as exc:
                    raise RaftInvariantError(
                        f"the log's voter-set record at offset {batch.base_offset + index} "
                        f"is invalid: {exc}"
                    ) from None

    # -- back-off and discovery ------------------------------------------------------------

    def _back_off(self, entry: InFlight, now: int) -> None:
        self.connections.back_off(
            entry.destination, now, self.config.retry_backoff_ms, self.max_retry_backoff_ms
        )

    @property
    def max_retry_backoff_ms(self) -> int:
        """Repeated failures to one peer back off up to half an election timeout: a refused
        peer is asked a few times a second, and one that comes back is reached well within
        the time an election takes."""
        return max(self.config.retry_backoff_ms, self.config.election_timeout_ms // 2)

    def discovery_targets(self) -> tuple[tuple[int, str], ...]:
        """Where a replica that knows no leader sends its discovery Fetch: the bootstrap
        servers when configured, else the voters it knows."""
        if self.config.bootstrap:
            return self.config.bootstrap
        return tuple(sorted(self.voters.endpoints().items()))

    def candidate_backoff(self, state: CandidateState, now: int) -> None:
        state.backoff_deadline = now + binary_exponential_backoff(
            self.rng, state.retries, self.config.election_backoff_max_ms
        )
