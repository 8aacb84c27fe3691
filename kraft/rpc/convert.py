"""Protobuf <-> core dataclasses. Validation of field ranges happens in the core (Kafka's rules);
here only what protobuf cannot express: an unknown error code becomes UNKNOWN-ish INVALID."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from kraft.core import messages as m
from kraft.core.errors import Errors
from kraft.log.base import OffsetAndEpoch
from kraft.rpc import raft_pb2 as pb

# The Raft RPCs' messages on the wire.
PbClusterRequest: TypeAlias = (
    pb.FetchRequest | pb.VoteRequest | pb.BeginQuorumEpochRequest | pb.EndQuorumEpochRequest
    | pb.FetchSnapshotRequest | pb.AddRaftVoterRequest | pb.RemoveRaftVoterRequest
    | pb.UpdateRaftVoterRequest
)
PbRequest: TypeAlias = PbClusterRequest | pb.ApiVersionsRequest
PbResponse: TypeAlias = (
    pb.FetchResponse | pb.VoteResponse | pb.BeginQuorumEpochResponse | pb.EndQuorumEpochResponse
    | pb.FetchSnapshotResponse | pb.VoterChangeResponse | pb.ApiVersionsResponse
)


def _error(code: int) -> Errors:
    try:
        return Errors(code)
    except ValueError:
        return Errors.INVALID_REQUEST


def _cluster_to_pb(cluster_id: str | None) -> pb.OptionalString | None:
    return None if cluster_id is None else pb.OptionalString(value=cluster_id)


def _cluster_from_pb(msg: PbClusterRequest) -> str | None:
    return msg.cluster_id.value if msg.HasField("cluster_id") else None


def _oe_to_pb(value: OffsetAndEpoch | None) -> pb.OffsetAndEpoch | None:
    return None if value is None else pb.OffsetAndEpoch(end_offset=value.offset, epoch=value.epoch)


def _oe_from_pb(value: pb.OffsetAndEpoch, present: bool) -> OffsetAndEpoch | None:
    """An optional OffsetAndEpoch field: `present` is the message's HasField for it."""
    return OffsetAndEpoch(value.end_offset, value.epoch) if present else None


# -- requests ------------------------------------------------------------------------------


def fetch_request_to_pb(req: m.FetchRequest) -> pb.FetchRequest:
    return pb.FetchRequest(
        cluster_id=_cluster_to_pb(req.cluster_id), replica_id=req.replica_id,
        current_leader_epoch=req.current_leader_epoch, fetch_offset=req.fetch_offset,
        last_fetched_epoch=req.last_fetched_epoch, max_wait_ms=req.max_wait_ms,
        max_bytes=req.max_bytes, high_watermark=req.high_watermark,
        replica_directory_id=req.replica_directory_id,
    )


def _listeners_to_pb(listener: str, endpoint: str) -> list[pb.RaftEndpoint]:
    host, _, port = endpoint.rpartition(":")
    return [pb.RaftEndpoint(name=listener, host=host, port=int(port) if port.isdigit() else 0)]


def _listener_from_pb(
    listeners: Sequence[pb.RaftEndpoint], wanted: str
) -> tuple[str, str]:
    """(listener name, host:port) of the controller listener among `listeners`: the one
    named `wanted`, else the first; ("", "") when there is none (the core refuses that)."""
    for endpoint in listeners:
        if endpoint.name == wanted:
            return endpoint.name, f"{endpoint.host}:{endpoint.port}"
    if listeners:
        return listeners[0].name, f"{listeners[0].host}:{listeners[0].port}"
    return "", ""


def request_to_pb(req: m.Request) -> PbRequest:
    if isinstance(req, m.FetchRequest):
        return fetch_request_to_pb(req)
    if isinstance(req, m.VoteRequest):
        return pb.VoteRequest(
            cluster_id=_cluster_to_pb(req.cluster_id), replica_id=req.replica_id,
            replica_epoch=req.replica_epoch, last_offset_epoch=req.last_offset_epoch,
            last_offset=req.last_offset, pre_vote=req.pre_vote, voter_id=req.voter_id,
            replica_directory_id=req.replica_directory_id,
            voter_directory_id=req.voter_directory_id,
        )
    if isinstance(req, m.BeginQuorumEpochRequest):
        return pb.BeginQuorumEpochRequest(
            cluster_id=_cluster_to_pb(req.cluster_id), leader_id=req.leader_id,
            leader_epoch=req.leader_epoch, leader_endpoint=req.leader_endpoint,
            voter_id=req.voter_id, voter_directory_id=req.voter_directory_id,
        )
    if isinstance(req, m.EndQuorumEpochRequest):
        return pb.EndQuorumEpochRequest(
            cluster_id=_cluster_to_pb(req.cluster_id), leader_id=req.leader_id,
            leader_epoch=req.leader_epoch, preferred_successors=list(req.preferred_successors),
            leader_endpoint=req.leader_endpoint,
        )
    if isinstance(req, m.FetchSnapshotRequest):
        return pb.FetchSnapshotRequest(
            cluster_id=_cluster_to_pb(req.cluster_id), replica_id=req.replica_id,
            current_leader_epoch=req.current_leader_epoch,
            snapshot_id=_oe_to_pb(req.snapshot_id), position=req.position,
            max_bytes=req.max_bytes, replica_directory_id=req.replica_directory_id,
        )
    if isinstance(req, m.UpdateRaftVoterRequest):
        return pb.UpdateRaftVoterRequest(
            cluster_id=_cluster_to_pb(req.cluster_id),
            current_leader_epoch=req.current_leader_epoch, voter_id=req.voter_id,
            voter_directory_id=req.voter_directory_id,
            listeners=_listeners_to_pb(req.listener, req.endpoint),
            min_kraft_version=req.min_kraft_version, max_kraft_version=req.max_kraft_version,
        )
    if isinstance(req, m.ApiVersionsRequest):
        return pb.ApiVersionsRequest()
    raise TypeError(f"not a raft request: {req!r}")


def fetch_request(msg: pb.FetchRequest) -> m.FetchRequest:
    return m.FetchRequest(
        _cluster_from_pb(msg), msg.replica_id, msg.current_leader_epoch, msg.fetch_offset,
        msg.last_fetched_epoch, msg.max_wait_ms, msg.max_bytes, msg.high_watermark,
        msg.replica_directory_id,
    )


def fetch_snapshot_request(msg: pb.FetchSnapshotRequest) -> m.FetchSnapshotRequest:
    snapshot_id = (_oe_from_pb(msg.snapshot_id, msg.HasField("snapshot_id"))
                   or OffsetAndEpoch(-1, -1))
    return m.FetchSnapshotRequest(
        _cluster_from_pb(msg), msg.replica_id, msg.current_leader_epoch, snapshot_id,
        msg.position, msg.max_bytes, msg.replica_directory_id,
    )


def vote_request(msg: pb.VoteRequest) -> m.VoteRequest:
    return m.VoteRequest(
        _cluster_from_pb(msg), msg.replica_id, msg.replica_epoch, msg.last_offset_epoch,
        msg.last_offset, msg.pre_vote, msg.voter_id, msg.replica_directory_id,
        msg.voter_directory_id,
    )


def begin_request(msg: pb.BeginQuorumEpochRequest) -> m.BeginQuorumEpochRequest:
    return m.BeginQuorumEpochRequest(
        _cluster_from_pb(msg), msg.leader_id, msg.leader_epoch, msg.leader_endpoint,
        msg.voter_id, msg.voter_directory_id,
    )


def end_request(msg: pb.EndQuorumEpochRequest) -> m.EndQuorumEpochRequest:
    return m.EndQuorumEpochRequest(
        _cluster_from_pb(msg), msg.leader_id, msg.leader_epoch,
        tuple(msg.preferred_successors), msg.leader_endpoint,
    )


def add_voter_request(msg: pb.AddRaftVoterRequest, listener: str) -> m.AddRaftVoterRequest:
    name, endpoint = _listener_from_pb(msg.listeners, listener)
    return m.AddRaftVoterRequest(
        _cluster_from_pb(msg), msg.voter_id, msg.voter_directory_id, endpoint, name or listener,
        msg.min_kraft_version, msg.max_kraft_version,
    )


def remove_voter_request(msg: pb.RemoveRaftVoterRequest) -> m.RemoveRaftVoterRequest:
    return m.RemoveRaftVoterRequest(_cluster_from_pb(msg), msg.voter_id, msg.voter_directory_id)


def update_voter_request(
    msg: pb.UpdateRaftVoterRequest, listener: str
) -> m.UpdateRaftVoterRequest:
    name, endpoint = _listener_from_pb(msg.listeners, listener)
    return m.UpdateRaftVoterRequest(
        _cluster_from_pb(msg), msg.current_leader_epoch, msg.voter_id, msg.voter_directory_id,
        endpoint, name or listener, msg.min_kraft_version, msg.max_kraft_version,
    )


# -- responses -----------------------------------------------------------------------------


def response_to_pb(resp: m.Response) -> PbResponse:
    if isinstance(resp, m.FetchResponse):
        return pb.FetchResponse(
            error_code=resp.error, leader_id=resp.leader_id, leader_epoch=resp.leader_epoch,
            high_watermark=resp.high_watermark, log_start_offset=resp.log_start_offset,
            records=resp.records, diverging_epoch=_oe_to_pb(resp.diverging_epoch),
            snapshot_id=_oe_to_pb(resp.snapshot_id), leader_endpoint=resp.leader_endpoint,
        )
    if isinstance(resp, m.VoteResponse):
        return pb.VoteResponse(
            error_code=resp.error, leader_id=resp.leader_id, leader_epoch=resp.leader_epoch,
            vote_granted=resp.vote_granted, leader_endpoint=resp.leader_endpoint,
        )
    if isinstance(resp, m.BeginQuorumEpochResponse):
        return pb.BeginQuorumEpochResponse(
            error_code=resp.error, leader_id=resp.leader_id, leader_epoch=resp.leader_epoch,
            leader_endpoint=resp.leader_endpoint,
        )
    if isinstance(resp, m.EndQuorumEpochResponse):
        return pb.EndQuorumEpochResponse(
            error_code=resp.error, leader_id=resp.leader_id, leader_epoch=resp.leader_epoch,
            leader_endpoint=resp.leader_endpoint,
        )
    if isinstance(resp, m.FetchSnapshotResponse):
        return pb.FetchSnapshotResponse(
            error_code=resp.error, leader_id=resp.leader_id, leader_epoch=resp.leader_epoch,
            snapshot_id=_oe_to_pb(resp.snapshot_id), size=resp.size, position=resp.position,
            unaligned_records=resp.data, leader_endpoint=resp.leader_endpoint,
        )
    if isinstance(resp, m.VoterChangeResponse):
        return pb.VoterChangeResponse(
            error_code=resp.error, error_message=resp.error_message, leader_id=resp.leader_id,
            leader_epoch=resp.leader_epoch, leader_endpoint=resp.leader_endpoint,
        )
    if isinstance(resp, m.ApiVersionsResponse):
        return pb.ApiVersionsResponse(
            error_code=resp.error, node_id=resp.node_id, directory_id=resp.directory_id,
            min_kraft_version=resp.min_kraft_version, max_kraft_version=resp.max_kraft_version,
        )
    raise TypeError(f"not a raft response: {resp!r}")


def response_from_pb(msg: PbResponse) -> m.Response:
    if isinstance(msg, pb.FetchResponse):
        return m.FetchResponse(
            _error(msg.error_code), msg.leader_id, msg.leader_epoch, msg.high_watermark,
            msg.log_start_offset, msg.records,
            _oe_from_pb(msg.diverging_epoch, msg.HasField("diverging_epoch")),
            _oe_from_pb(msg.snapshot_id, msg.HasField("snapshot_id")), msg.leader_endpoint,
        )
    if isinstance(msg, pb.VoteResponse):
        return m.VoteResponse(
            _error(msg.error_code), msg.leader_id, msg.leader_epoch, msg.vote_granted,
            msg.leader_endpoint,
        )
    if isinstance(msg, pb.BeginQuorumEpochResponse):
        return m.BeginQuorumEpochResponse(
            _error(msg.error_code), msg.leader_id, msg.leader_epoch, msg.leader_endpoint
        )
    if isinstance(msg, pb.EndQuorumEpochResponse):
        return m.EndQuorumEpochResponse(
            _error(msg.error_code), msg.leader_id, msg.leader_epoch, msg.leader_endpoint
        )
    if isinstance(msg, pb.FetchSnapshotResponse):
        return m.FetchSnapshotResponse(
            _error(msg.error_code), msg.leader_id, msg.leader_epoch,
            _oe_from_pb(msg.snapshot_id, msg.HasField("snapshot_id")), msg.size, msg.position,
            msg.unaligned_records, msg.leader_endpoint,
        )
    if isinstance(msg, pb.VoterChangeResponse):
        return m.VoterChangeResponse(
            _error(msg.error_code), msg.leader_id, msg.leader_epoch, msg.error_message,
            msg.leader_endpoint,
        )
    if isinstance(msg, pb.ApiVersionsResponse):
        return m.ApiVersionsResponse(
            _error(msg.error_code), msg.node_id, msg.directory_id, msg.min_kraft_version,
            msg.max_kraft_version,
        )
    raise TypeError(f"not a raft response: {msg!r}")
