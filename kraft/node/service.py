"""The gRPC services a controller serves: Raft (peer to peer), Quorum (operators) and, only when
`internal.test.hooks.enable=true`, TestHooks (raw appends and fault injection for tests)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from kraft.core.errors import Errors, NotLeaderError, RaftError
from kraft.core.messages import (
    ApiVersionsRequest,
    QuorumDescription,
    ReplicaDescription,
    Request,
)
from kraft.node.raft_node import NodeStoppedError, RaftNode
from kraft.node.transport import PeerContact, sender_of
from kraft.rpc import convert
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc


class RaftServicer(rpc.RaftServicer):
    def __init__(self, node: RaftNode) -> None:
        self.node = node

    async def _serve(
        self, request: Request, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        if sender_of(request) in self.node.transport.blocked:
            # A partition drops the request: the caller learns nothing until its deadline.
            remaining = context.time_remaining()
            await asyncio.sleep(remaining if remaining is not None else 1.0)
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "dropped by a test fault")
        self.node.transport.heard_from(sender_of(request))
        try:
            response = await self.node.handle_request(request)
        except NodeStoppedError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return convert.response_to_pb(response)

    async def Vote(
        self, request: pb.VoteRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._serve(convert.vote_request(request), context)

    async def BeginQuorumEpoch(
        self, request: pb.BeginQuorumEpochRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._serve(convert.begin_request(request), context)

    async def EndQuorumEpoch(
        self, request: pb.EndQuorumEpochRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._serve(convert.end_request(request), context)

    async def Fetch(
        self, request_iterator: AsyncIterator[pb.FetchRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[convert.PbResponse]:
        """One response per request, in order; a parked (long-poll) request holds the ones
        behind it, which is fine: a follower has one in flight."""
        async for message in request_iterator:
            request = convert.fetch_request(message)
            if sender_of(request) in self.node.transport.blocked:
                # A partition drops the request: the follower times out and cancels the
                # stream, which cancels this wait.
                await asyncio.Future()
            self.node.transport.heard_from(sender_of(request))
            yield convert.response_to_pb(await self.node.handle_request(request))

    async def FetchSnapshot(
        self, request: pb.FetchSnapshotRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._serve(convert.fetch_snapshot_request(request), context)

    async def ApiVersions(
        self, request: pb.ApiVersionsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._serve(ApiVersionsRequest(), context)


class QuorumServicer(rpc.QuorumServicer):
    def __init__(self, node: RaftNode, cluster_id: str, listener_name: str) -> None:
        self.node = node
        self.cluster_id = cluster_id
        self.listener_name = listener_name

    async def DescribeQuorum(
        self, request: pb.DescribeQuorumRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.DescribeQuorumResponse:
        try:
            description = self.node.describe_quorum()
        except NotLeaderError as exc:
            status = self.node.status()
            return pb.DescribeQuorumResponse(
                error_code=Errors.NOT_LEADER_OR_FOLLOWER, error_message=str(exc),
                cluster_id=self.cluster_id, leader_id=status.leader_id,
                leader_epoch=status.epoch, leader_endpoint=self.node.leader_endpoint(),
            )
        return self._describe_to_pb(description)

    def _describe_to_pb(self, d: QuorumDescription) -> pb.DescribeQuorumResponse:
        def replica(r: ReplicaDescription) -> pb.ReplicaState:
            return pb.ReplicaState(
                replica_id=r.replica_id, log_end_offset=r.log_end_offset,
                last_fetch_timestamp=self.node.wall_clock_ms(r.last_fetch_timestamp_ms),
                last_caught_up_timestamp=self.node.wall_clock_ms(r.last_caught_up_timestamp_ms),
                directory_id=r.directory_id, endpoint=r.endpoint,
            )

        return pb.DescribeQuorumResponse(
            error_code=Errors.NONE, cluster_id=self.cluster_id, leader_id=d.leader_id,
            leader_epoch=d.leader_epoch, high_watermark=d.high_watermark,
            current_voters=[replica(r) for r in d.voters],
            observers=[replica(r) for r in d.observers],
            leader_endpoint=self.node.leader_endpoint(),
            leader_log_end_offset=self.node.status().log_end_offset,
            voter_endpoints={r.replica_id: r.endpoint for r in d.voters},
            listener_name=self.listener_name, kraft_version=d.kraft_version,
        )

    async def NodeStatus(
        self, request: pb.NodeStatusRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.NodeStatusResponse:
        s = self.node.status()
        return pb.NodeStatusResponse(
            node_id=s.node_id if s.node_id is not None else -1, state=s.state, epoch=s.epoch,
            leader_id=s.leader_id, voted_id=s.voted_id, high_watermark=s.high_watermark,
            log_end_offset=s.log_end_offset, last_epoch=s.last_epoch, is_voter=s.is_voter,
            cluster_id=self.cluster_id, leader_endpoint=self.node.leader_endpoint(),
            directory_id=s.directory_id, kraft_version=s.kraft_version,
            voters=self._voter_contacts(s.node_id),
        )

    def _voter_contacts(self, node_id: int | None) -> list[pb.VoterContact]:
        now = time.monotonic()

        def ago(at: float | None) -> int:
            return -1 if at is None else int((now - at) * 1000)

        contacts = []
        for voter_id, endpoint in sorted(self.node.voter_endpoints().items()):
            if voter_id == node_id:
                continue
            seen = self.node.transport.contacts.get(voter_id, PeerContact())
            contacts.append(pb.VoterContact(
                voter_id=voter_id, endpoint=endpoint, heard_ms_ago=ago(seen.heard_at),
                failed_ms_ago=ago(seen.failed_at), failure=seen.failure))
        return contacts

    # KIP-853 membership changes: the leader answers (Add and Remove once committed).
    async def AddRaftVoter(
        self, request: pb.AddRaftVoterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._change(
            convert.add_voter_request(request, self.listener_name), context)

    async def RemoveRaftVoter(
        self, request: pb.RemoveRaftVoterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._change(convert.remove_voter_request(request), context)

    async def UpdateRaftVoter(
        self, request: pb.UpdateRaftVoterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        return await self._change(
            convert.update_voter_request(request, self.listener_name), context)

    async def _change(
        self, request: Request, context: grpc.aio.ServicerContext[Any, Any]
    ) -> convert.PbResponse:
        try:
            response = await self.node.handle_request(request)
        except NodeStoppedError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return convert.response_to_pb(response)


class TestHooksServicer(rpc.TestHooksServicer):
    """Never enabled in production: appends raw records and cuts links between nodes."""

    def __init__(self, node: RaftNode) -> None:
        self.node = node

    async def Append(
        self, request: pb.AppendRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.AppendResponse:
        try:
            last = await self.node.append(list(request.records))
        except RaftError as exc:
            return pb.AppendResponse(
                error_code=exc.error, error_message=str(exc),
                leader_endpoint=self.node.leader_endpoint(),
            )
        return pb.AppendResponse(error_code=Errors.NONE, last_offset=last,
                                 epoch=self.node.status().epoch)

    async def SetFaults(
        self, request: pb.FaultRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.FaultResponse:
        self.node.transport.blocked = frozenset(request.blocked_node_ids)
        return pb.FaultResponse()
