"""The protocol's messages as frozen dataclasses. Transports map them to and from the wire.

Field names follow Kafka's schemas in snake_case. A `cluster_id` of None is accepted by any
node (Kafka's nullable ClusterId); any other value must match exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.core.errors import Errors
from kraft.log.base import OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    replica_id: int
    replica_epoch: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    voter_id: int = -1  # the intended receiver; -1 when the sender does not say
    replica_directory_id: str = ""  # the candidate's directory id ("" = none)
    voter_directory_id: str = ""  # the intended receiver's, as in the candidate's voter set


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: Errors
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    leader_endpoint: str = ""
    voter_id: int = -1
    voter_directory_id: str = ""


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: Errors
    leader_id: int
    leader_epoch: int
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: Errors
    leader_id: int
    leader_epoch: int
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    max_bytes: int
    high_watermark: int = -1  # the fetcher's; a leader with a newer one answers at once
    replica_directory_id: str = ""  # with replica_id, the fetcher's replica key


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: Errors
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = 0
    records: bytes = b""
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int  # byte position in the snapshot file: what the fetcher holds so far
    max_bytes: int
    replica_directory_id: str = ""


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: Errors
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch | None = None
    size: int = -1  # the whole snapshot's bytes
    position: int = -1  # where `data` starts
    data: bytes = b""
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class AddRaftVoterRequest:
    """KIP-853's AddRaftVoter: make the observer (voter_id, voter_directory_id), reachable at
    `endpoint` (host:port of its controller listener), a voter. Answered once the new voter set
    commits, or with an error."""

    cluster_id: str | None
    voter_id: int
    voter_directory_id: str
    endpoint: str
    listener: str = "CONTROLLER"
    min_kraft_version: int = 0
    max_kraft_version: int = 1


@dataclass(frozen=True, slots=True)
class RemoveRaftVoterRequest:
    cluster_id: str | None
    voter_id: int
    voter_directory_id: str


@dataclass(frozen=True, slots=True)
class UpdateRaftVoterRequest:
    """A voter tells the leader its current endpoint and supported kraft.version range."""

    cluster_id: str | None
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: str
    endpoint: str
    listener: str = "CONTROLLER"
    min_kraft_version: int = 0
    max_kraft_version: int = 1


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    """What a leader asks a node about to become a voter (KIP-853's ApiVersions check): the
    answer proves the endpoint reaches that replica and says which kraft.version it runs."""


@dataclass(frozen=True, slots=True)
class ApiVersionsResponse:
    error: Errors
    node_id: int
    directory_id: str
    min_kraft_version: int
    max_kraft_version: int


@dataclass(frozen=True, slots=True)
class VoterChangeResponse:
    """The answer to Add/Remove/UpdateRaftVoter."""

    error: Errors
    leader_id: int
    leader_epoch: int
    error_message: str = ""
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    replica_id: int
    log_end_offset: int  # -1 when the leader has not heard from it
    last_fetch_timestamp_ms: int  # -1 when never
    last_caught_up_timestamp_ms: int  # -1 when never
    directory_id: str = ""
    endpoint: str = ""  # a voter's controller listener (host:port); "" for observers


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """DescribeQuorum's answer; only the leader gives one."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
    kraft_version: int = 0


VoterChangeRequest = AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest
Request = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
    | FetchSnapshotRequest | VoterChangeRequest | ApiVersionsRequest
)
# The responses that name the sender's leader and epoch (all but ApiVersions).
EpochResponse = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
    | FetchSnapshotResponse | VoterChangeResponse
)
Response = EpochResponse | ApiVersionsResponse


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    """A request the driver must send. `endpoint` is the destination's address as configured
    or learned; the driver reports the outcome with `handle_response` or `handle_failure`."""

    correlation_id: int
    destination: int
    endpoint: str
    request: Request
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to the inbound request the driver registered under `token`."""

    token: int
    response: Response
