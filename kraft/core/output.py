"""What the core hands its driver: `Output` after every input, `LeaderAndEpoch` and
`NodeStatus` for queries. Plain values (kraft/core/raft.py re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.core.messages import OutboundRequest, Reply
from kraft.election_state import ElectionState
from kraft.log.base import OffsetAndEpoch, SnapshotJob


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node's own view, for `quorum status` and metrics."""

    node_id: int | None
    state: str
    epoch: int
    leader_id: int
    voted_id: int
    high_watermark: int
    log_end_offset: int
    flushed_offset: int
    last_epoch: int
    is_voter: bool
    directory_id: str = ""
    kraft_version: int = 0


@dataclass
class Output:
    """What the driver must do, in this order: persist `election_state` (when set), then send
    `requests` and `replies`. `leader` is set when the known leader or epoch changed.
    `snapshot_loaded` names a snapshot fetched from the leader that now replaces the log: the
    state machine must load it before it reads the log again. `snapshot_jobs` is snapshot file
    I/O to run off the event loop (kraft/log/snapshot_jobs.py), each handed back with
    `on_snapshot_job_done`; the `ordered` ones one at a time, in this order, after those of
    earlier outputs."""

    election_state: ElectionState | None = None
    requests: list[OutboundRequest] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    leader: LeaderAndEpoch | None = None
    high_watermark: int | None = None
    snapshot_loaded: OffsetAndEpoch | None = None
    snapshot_jobs: list[SnapshotJob] = field(default_factory=list)
