"""The leader's state: what it knows of every replica's progress, the high watermark,
check-quorum and the heartbeat timers."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.core.config import CHECK_QUORUM_TIMEOUT_FACTOR, OBSERVER_SESSION_TIMEOUT_MS
from kraft.core.messages import FetchRequest, ReplicaDescription
from kraft.election_state import ElectionState


@dataclass
class ReplicaProgress:
    """One replica as the leader sees it. `end_offset` is the replica's acknowledged end:
    the offset of its last valid Fetch, which it sends only after flushing."""

    replica_id: int
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = -1

    def update(self, fetch_offset: int, now: int, leader_end: int) -> None:
        # Kafka's ReplicaState.updateFollowerState: caught up means the fetch reached the
        # leader's end at this fetch, or the end the leader had at the previous fetch.
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_end >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.end_offset = fetch_offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now

    def describe(self) -> ReplicaDescription:
        return ReplicaDescription(
            self.replica_id, self.end_offset, self.last_fetch_ms, self.last_caught_up_ms
        )


@dataclass
class ParkedFetch:
    """A long-poll Fetch waiting for data or a new high watermark."""

    token: int
    request: FetchRequest
    deadline: int


@dataclass
class LeaderState:
    epoch: int
    local_id: int
    voter_ids: frozenset[int]
    epoch_start_offset: int
    granting_voters: frozenset[int]
    check_quorum_deadline: int
    fetch_timeout_ms: int
    high_watermark: int | None = None  # unknown until the leader's own epoch is committed
    voters: dict[int, ReplicaProgress] = field(default_factory=dict)
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)
    fetched_voters: set[int] = field(default_factory=set)
    next_begin_epoch_ms: dict[int, int] = field(default_factory=dict)
    parked_fetches: list[ParkedFetch] = field(default_factory=list)
    resign_requested: bool = False

    name = "Leader"

    def __post_init__(self) -> None:
        self.voters = {v: ReplicaProgress(v) for v in self.voter_ids}
        # BeginQuorumEpoch goes out at once to every other voter.
        self.next_begin_epoch_ms = {v: 0 for v in self.voter_ids if v != self.local_id}

    @property
    def leader_id(self) -> int:
        return self.local_id

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.local_id)

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        return False

    # -- progress and the high watermark -------------------------------------------------

    def update_local(self, flushed_offset: int, now: int) -> bool:
        """The leader's own flushed end moved; returns True when the HW advanced."""
        if self.local_id in self.voters:
            self.voters[self.local_id].update(flushed_offset, now, flushed_offset)
        return self._maybe_advance_high_watermark()

    def update_replica(self, replica_id: int, fetch_offset: int, now: int, leader_end: int) -> bool:
        """A valid Fetch from `replica_id`; returns True when the HW advanced. The leader's
        own progress moves only by its flushes (`update_local`): a peer claiming the leader's
        id (a node id configured twice) must never overwrite it."""
        if replica_id == self.local_id:
            raise ValueError(
                f"replica {replica_id} is the leader itself; its progress is its flushed offset"
            )
        if replica_id in self.voters:
            self.voters[replica_id].update(fetch_offset, now, leader_end)
            self.next_begin_epoch_ms[replica_id] = now + self.fetch_timeout_ms // 2
            return self._maybe_advance_high_watermark()
        if replica_id >= 0:
            self.observers.setdefault(replica_id, ReplicaProgress(replica_id)).update(
                fetch_offset, now, leader_end
            )
        return False

    def _maybe_advance_high_watermark(self) -> bool:
        ends = sorted((p.end_offset for p in self.voters.values()), reverse=True)
        candidate = ends[len(ends) // 2]
        # The KIP-595 commit rule: nothing counts until a majority holds a record of this
        # leader's own epoch, which begins with the LeaderChange record at epoch_start_offset.
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is None or candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    # -- check-quorum ----------------------------------------------------------------------

    def check_quorum_timeout_ms(self) -> int:
        return int(self.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)

    def note_voter_contact(self, voter_id: int, now: int) -> None:
        """A Fetch from a voter proves the leader still leads a quorum."""
        if voter_id not in self.voters or voter_id == self.local_id:
            return
        self.fetched_voters.add(voter_id)
        needed = len(self.voters) // 2 + 1 - (1 if self.local_id in self.voters else 0)
        if len(self.fetched_voters) >= needed:
            self.fetched_voters.clear()
            self.check_quorum_deadline = now + self.check_quorum_timeout_ms()

    def check_quorum_expired(self, now: int) -> bool:
        if len(self.voters) == 1 and self.local_id in self.voters:
            return False
        return now >= self.check_quorum_deadline

    # -- DescribeQuorum ---------------------------------------------------------------------

    def expire_observers(self, now: int) -> None:
        stale = [
            rid
            for rid, p in self.observers.items()
            if now - p.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
        ]
        for rid in stale:
            del self.observers[rid]

    def descending_fetch_offsets(self) -> tuple[int, ...]:
        """Other voters, the most replicated first: the preferred successors on resignation."""
        others = [p for p in self.voters.values() if p.replica_id != self.local_id]
        others.sort(key=lambda p: (-p.end_offset, p.replica_id))
        return tuple(p.replica_id for p in others)
