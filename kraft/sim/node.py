"""A simulated node: its process (the core, an incarnation that a crash or restart bumps, its
timer, the flush and snapshot jobs in flight, the requests it holds), its storage (an
in-memory log, quorum-state store and snapshot store, which survive a crash as far as they
are durable), its clock and its state machine; the timing every node shares, and the name
of a node's controller listener.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from kraft.core.config import RaftConfig
from kraft.core.messages import Request
from kraft.core.raft import RaftCore
from kraft.core.voters import ReplicaKey, SnapshotVoters
from kraft.log.base import FlushJob, SnapshotJob
from kraft.log.memory import MemoryLog
from kraft.log.memory_snapshots import MemorySnapshotStore
from kraft.log.snapshot_format import verify_snapshot_bytes
from kraft.sim.faults import FaultyQuorumStateStore, NodeClock
from kraft.sim.state_machine import SimStateMachine


@dataclass
class SimTiming:
    """Kafka's simulation test timing: election 1 s, fetch 3 s, request 3 s, max wait 100 ms."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 3000
    request_timeout_ms: int = 3000
    fetch_max_wait_ms: int = 100
    min_fsync_ms: int = 0
    max_fsync_ms: int = 3
    max_snapshot_job_ms: int = 3  # a snapshot job (chunk read or write, freeze) takes 0..this


def endpoint(node_id: int) -> str:
    """A simulated node's controller listener."""
    return f"node{node_id}:9093"


@dataclass
class PendingAppend:
    epoch: int
    offset: int
    payload: bytes


@dataclass
class SimNode:
    node_id: int
    config: RaftConfig
    log: MemoryLog = field(default_factory=MemoryLog)
    store: FaultyQuorumStateStore = field(default_factory=FaultyQuorumStateStore)
    clock: NodeClock = field(default_factory=NodeClock)
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    state_machine: SimStateMachine = field(default_factory=SimStateMachine)
    core: RaftCore | None = None
    incarnation: int = 0
    tick_at: float = float("inf")
    flush_job: FlushJob | None = None  # the flush in flight, if any
    # Ordered snapshot jobs (a follower's install) waiting; the head is in flight.
    snapshot_jobs: collections.deque[SnapshotJob] = field(default_factory=collections.deque)
    next_token: int = 1
    inbound: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    inbound_requests: dict[int, Request] = field(default_factory=dict)  # by token
    pending_appends: list[PendingAppend] = field(default_factory=list)
    last_state: object = None
    prospective_entries: int = 0  # how often it stood for election (pre-vote rounds)
    directory_id: str = ""  # meta.properties' directory.id ("" in a static cluster)

    @property
    def key(self) -> ReplicaKey:
        return ReplicaKey(self.node_id, self.directory_id)

    @property
    def alive(self) -> bool:
        return self.core is not None

    @property
    def is_voter(self) -> bool:
        return self.config.node_id in self.config.voters


def snapshot_voters(node: SimNode) -> SnapshotVoters | None:
    """What the latest snapshot says of the voter set, read as the real driver does."""
    latest = node.snapshots.latest_id()
    if latest is None:
        return None
    info = verify_snapshot_bytes(node.snapshots.read_all(latest), latest)
    return SnapshotVoters.from_control_records(latest.offset, info.control_records)
