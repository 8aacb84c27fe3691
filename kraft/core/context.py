"""What the RPC handler modules (rpc_*.py) may use of the core: a narrow view of RaftCore.

The handlers change state and ask for sending; they never reach RaftCore's private machinery.
RaftCore implements this Protocol (mypy checks it where the core hands itself to a handler),
and a handler's signature says exactly what it can touch.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Protocol

from kraft.core.config import RaftConfig
from kraft.core.connections import Connections
from kraft.core.messages import FetchSnapshotResponse, Request, Response
from kraft.core.quorum import QuorumState
from kraft.core.voters import ReplicaKey, VoterHistory, VoterSet
from kraft.log.base import OffsetAndEpoch, ReplicatedLog, SnapshotJob, SnapshotStore

if TYPE_CHECKING:
    from kraft.core.leader import LeaderState
    from kraft.core.states import CandidateState
    from kraft.log.snapshot_jobs import ReadChunk


class HandlerContext(Protocol):
    # -- what the handlers read and may move ------------------------------------------------------
    high_watermark: int
    snapshot_to_load: OffsetAndEpoch | None

    @property
    def config(self) -> RaftConfig: ...

    @property
    def log(self) -> ReplicatedLog: ...

    @property
    def snapshots(self) -> SnapshotStore: ...

    @property
    def quorum(self) -> QuorumState: ...

    @property
    def connections(self) -> Connections: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def chunk_reads(self) -> dict[ReadChunk, FetchSnapshotResponse]: ...

    @property
    def epoch(self) -> int: ...

    @property
    def local_id(self) -> int | None: ...

    @property
    def leader_id(self) -> int: ...

    @property
    def shutting_down(self) -> bool: ...

    # -- the voter set (KIP-853) ------------------------------------------------------------------
    @property
    def voter_history(self) -> VoterHistory: ...

    @property
    def voters(self) -> VoterSet: ...

    @property
    def kraft_version(self) -> int: ...

    @property
    def local_key(self) -> ReplicaKey | None: ...

    def append_voters(self, voters: VoterSet, now: int) -> int: ...

    def on_appended_as_follower(self, data: bytes) -> None: ...

    def on_truncated(self, offset: int) -> None: ...

    def on_snapshot_installed(
        self, snapshot_id: OffsetAndEpoch,
        control_records: tuple[tuple[int, dict[str, object]], ...],
    ) -> None: ...

    # -- addresses --------------------------------------------------------------------------------
    def valid_cluster_id(self, cluster_id: str | None) -> bool: ...

    def endpoint_of(self, node_id: int, hint: str = "") -> str: ...

    def leader_endpoint(self) -> str: ...

    # -- asking the driver for something ----------------------------------------------------------
    def send(self, destination: int, endpoint: str, request: Request, now: int) -> None: ...

    def reply_later(self, token: int, response: Response) -> None: ...

    def queue_snapshot_job(self, job: SnapshotJob) -> None: ...

    # -- transitions and the high watermark -------------------------------------------------------
    def maybe_transition(self, leader_id: int, epoch: int, endpoint: str, now: int) -> None: ...

    def candidate_backoff(self, state: CandidateState, now: int) -> None: ...

    def update_follower_high_watermark(self, leader_hw: int) -> None: ...

    def note_leader_high_watermark(self, leader: LeaderState) -> None: ...
