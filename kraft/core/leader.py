"""The leader's state: what it knows of every replica's progress, the high watermark,
check-quorum and the heartbeat timers."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.core.config import CHECK_QUORUM_TIMEOUT_FACTOR, OBSERVER_SESSION_TIMEOUT_MS
from kraft.core.messages import FetchRequest, ReplicaDescription, VoterChangeRequest
from kraft.core.voters import ReplicaKey, VoterSet
from kraft.election_state import ElectionState


@dataclass
class ReplicaProgress:
    """One replica as the leader sees it. `end_offset` is the replica's acknowledged end:
    the offset of its last valid Fetch, which it sends only after flushing."""

    replica_id: int
    directory_id: str = ""
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

    @property
    def key(self) -> ReplicaKey:
        return ReplicaKey(self.replica_id, self.directory_id)

    def describe(self, endpoint: str = "") -> ReplicaDescription:
        return ReplicaDescription(
            self.replica_id, self.end_offset, self.last_fetch_ms, self.last_caught_up_ms,
            self.directory_id, endpoint,
        )


@dataclass
class ParkedFetch:
    """A long-poll Fetch waiting for data or a new high watermark."""

    token: int
    request: FetchRequest
    deadline: int


@dataclass
class PendingVoterChange:
    """An AddRaftVoter or RemoveRaftVoter the leader answers once its VotersRecord (at
    `record_offset`) commits, or with REQUEST_TIMED_OUT at `deadline` (the record stays)."""

    token: int
    request: VoterChangeRequest
    record_offset: int  # -1 while an Add waits for its ApiVersions answer
    deadline: int


@dataclass
class LeaderState:
    """`voter_set` is the latest voter set of the leader's log, committed or not (KIP-853):
    the HW and check-quorum count its members, by replica key; the leader counts itself only
    while it is one (a leader removing itself keeps leading until the removal commits)."""

    epoch: int
    local_key: ReplicaKey
    voter_set: VoterSet
    epoch_start_offset: int
    granting_voters: frozenset[int]
    check_quorum_deadline: int
    fetch_timeout_ms: int
    high_watermark: int | None = None  # unknown until the leader's own epoch is committed
    voters: dict[int, ReplicaProgress] = field(default_factory=dict)
    observers: dict[ReplicaKey, ReplicaProgress] = field(default_factory=dict)
    fetched_voters: set[int] = field(default_factory=set)
    next_begin_epoch_ms: dict[int, int] = field(default_factory=dict)
    parked_fetches: list[ParkedFetch] = field(default_factory=list)
    resign_requested: bool = False
    pending_change: PendingVoterChange | None = None

    name = "Leader"

    def __post_init__(self) -> None:
        self.voters = {n.node_id: ReplicaProgress(n.node_id, n.key.directory_id)
                       for n in self.voter_set}
        # BeginQuorumEpoch goes out at once to every other voter.
        self.next_begin_epoch_ms = {v: 0 for v in self.voters if v != self.local_id}

    @property
    def local_id(self) -> int:
        return self.local_key.node_id

    @property
    def leader_id(self) -> int:
        return self.local_id

    @property
    def is_member(self) -> bool:
        """The leader is a voter of its latest set (not while it removes itself)."""
        return self.voter_set.is_voter(self.local_key)

    def set_voters(self, voter_set: VoterSet, now: int) -> bool:
        """The latest voter set changed (an appended VotersRecord; spec R7.3). An added
        voter keeps the progress it made as an observer, a removed one becomes an observer.
        Returns True when the HW advanced (it never goes back)."""
        previous = self.voters
        if len(previous) == 1 and self.is_member:
            # A lone leader's check-quorum timer stood still; a voter just added gets a whole
            # window to fetch (Kafka restarts the timer while the leader is alone).
            self.check_quorum_deadline = now + self.check_quorum_timeout_ms()
        self.voter_set = voter_set
        self.voters = {}
        for node in voter_set:
            progress = previous.pop(node.node_id, None)
            if progress is None or not node.matches(progress.key):
                if progress is not None:
                    self._observe(progress)
                progress = self.observers.pop(node.key, None) or ReplicaProgress(
                    node.node_id, node.key.directory_id
                )
            self.voters[node.node_id] = progress
            if node.node_id != self.local_id:
                self.next_begin_epoch_ms.setdefault(node.node_id, now)
        for progress in previous.values():
            self._observe(progress)
        for voter in list(self.next_begin_epoch_ms):
            if voter not in self.voters or voter == self.local_id:
                del self.next_begin_epoch_ms[voter]
        self.fetched_voters &= set(self.voters)
        return self._maybe_advance_high_watermark()

    def _observe(self, progress: ReplicaProgress) -> None:
        if progress.replica_id != self.local_id and progress.last_fetch_ms >= 0:
            self.observers[progress.key] = progress

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.local_id)

    def can_grant_vote(self, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
        return False

    # -- progress and the high watermark -------------------------------------------------

    def update_local(self, flushed_offset: int, now: int) -> bool:
        """The leader's own flushed end moved; returns True when the HW advanced."""
        if self.is_member:
            self.voters[self.local_id].update(flushed_offset, now, flushed_offset)
        return self._maybe_advance_high_watermark()

    def update_replica(self, key: ReplicaKey, fetch_offset: int, now: int, leader_end: int) -> bool:
        """A valid Fetch from replica `key`; returns True when the HW advanced. The leader's
        own progress moves only by its flushes (`update_local`): a peer claiming the leader's
        id (a node id configured twice) must never overwrite it. A replica whose key does not
        match its id's voter entry (a re-formatted disk) is an observer: its fetches count
        for nothing (spec R1.5)."""
        if key.node_id == self.local_id:
            raise ValueError(
                f"replica {key.node_id} is the leader itself; its progress is its flushed offset"
            )
        if self.voter_set.is_voter(key):
            self.voters[key.node_id].update(fetch_offset, now, leader_end)
            self.next_begin_epoch_ms[key.node_id] = now + self.fetch_timeout_ms // 2
            return self._maybe_advance_high_watermark()
        if key.node_id >= 0:
            self.observers.setdefault(key, ReplicaProgress(key.node_id, key.directory_id)).update(
                fetch_offset, now, leader_end
            )
        return False

    def caught_up(self, key: ReplicaKey, now: int) -> bool:
        """Kafka's isReplicaCaughtUp for an observer about to be added (R4.1): it reached the
        leader's end (at its fetch or the previous one) and fetched within the session."""
        progress = self.observers.get(key)
        return (
            progress is not None
            and progress.last_caught_up_ms >= 0
            and now - progress.last_fetch_ms < OBSERVER_SESSION_TIMEOUT_MS
        )

    def _maybe_advance_high_watermark(self) -> bool:
        if not self.voters:
            return False
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

    def note_voter_contact(self, key: ReplicaKey, now: int) -> None:
        """A Fetch from a voter of the latest set proves the leader still leads a quorum."""
        if not self.voter_set.is_voter(key) or key.node_id == self.local_id:
            return
        self.fetched_voters.add(key.node_id)
        needed = self.voter_set.majority - (1 if self.is_member else 0)
        if len(self.fetched_voters) >= needed:
            self.fetched_voters.clear()
            self.check_quorum_deadline = now + self.check_quorum_timeout_ms()

    def check_quorum_expired(self, now: int) -> bool:
        if len(self.voters) == 1 and self.is_member:
            return False
        return now >= self.check_quorum_deadline

    # -- DescribeQuorum ---------------------------------------------------------------------

    def expire_observers(self, now: int) -> None:
        stale = [
            key
            for key, p in self.observers.items()
            if now - p.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
        ]
        for key in stale:
            del self.observers[key]

    def descending_fetch_offsets(self) -> tuple[int, ...]:
        """Other voters, the most replicated first: the preferred successors on resignation."""
        others = [p for p in self.voters.values() if p.replica_id != self.local_id]
        others.sort(key=lambda p: (-p.end_offset, p.replica_id))
        return tuple(p.replica_id for p in others)
