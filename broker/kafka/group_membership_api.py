"""JoinGroup (11, v0-9), SyncGroup (14, v0-5), Heartbeat (12, v0-4), LeaveGroup (13, v0-5):
wire requests to the group coordinator's calls and its answers back (spec §3).

Each needs READ on the group (Kafka): without it the whole request is answered
GROUP_AUTHORIZATION_FAILED and the coordinator never sees it, so nobody outside a group's ACLs
can join it, fence its members or make them leave."""

from __future__ import annotations

from typing import Any

from broker.api import Request
from broker.group.errors import GroupError
from broker.group.model import JoinResult
from broker.group.storage import GroupStorage
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply, millis
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation

MEMBER_ID_REQUIRED_VERSION = 4  # KIP-394
SKIP_ASSIGNMENT_VERSION = 9  # KIP-814


def client_host(context: Request) -> str:
    """Kafka's clientHost: the peer's address as Java prints an InetAddress."""
    host = context.peer.rsplit(":", 1)[0] if context.peer else ""
    return f"/{host.strip('[]')}"


def _readable(auth: RequestAuthorization, group_id: str) -> bool:
    return auth.group(AclOperation.READ, group_id)


async def handle_join_group(groups: GroupStorage | None, context: Request, version: int,
                            request: Any, auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    if not _readable(auth, request.group_id):
        result = JoinResult(Errors.GROUP_AUTHORIZATION_FAILED, member_id=request.member_id)
    elif groups is None:
        result = JoinResult(GroupError.COORDINATOR_NOT_AVAILABLE, member_id=request.member_id)
    elif (refused := await groups.consumer.drop_empty(request.group_id)) != GroupError.NONE:
        # A KIP-848 group with members admits no classic member here (Kafka would make it a
        # mixed group); an Empty one became classic again.
        result = JoinResult(refused, member_id=request.member_id)
    else:
        rebalance = getattr(request, "rebalance_timeout", None)
        result = await groups.coordinator.join_group(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.protocol_type, [(p.name, bytes(p.metadata)) for p in request.protocols],
            millis(request.session_timeout), millis(rebalance) if rebalance is not None else -1,
            context.client_id or "", client_host(context),
            require_known_member=version >= MEMBER_ID_REQUIRED_VERSION,
            supports_skip_assignment=version >= SKIP_ASSIGNMENT_VERSION)
    module = response_module(ApiKey.JOIN_GROUP, version)
    members = tuple(
        build(module, "JoinGroupResponseMember", member_id=member_id,
              group_instance_id=instance_id, metadata=metadata)
        for member_id, instance_id, metadata in result.members)
    return Reply(build(
        module, "JoinGroupResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(result.error), generation_id=result.generation,
        protocol_type=result.protocol_type,
        # Non-nullable before v7: "" when no protocol was chosen.
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader, skip_assignment=result.skip_assignment,
        member_id=result.member_id, members=members))


async def handle_sync_group(groups: GroupStorage | None, version: int, request: Any,
                            auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.SYNC_GROUP, version)
    error: int = GroupError.COORDINATOR_NOT_AVAILABLE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment = b""
    if not _readable(auth, request.group_id):
        error = Errors.GROUP_AUTHORIZATION_FAILED
    elif groups is not None:
        result = await groups.coordinator.sync_group(
            request.group_id, request.generation_id, request.member_id,
            getattr(request, "group_instance_id", None), getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in request.assignments})
        error, protocol_type, protocol_name, assignment = \
            result.error, result.protocol_type, result.protocol_name, result.assignment
    return Reply(build(
        module, "SyncGroupResponse", throttle_time=NO_THROTTLE, error_code=error_code(error),
        protocol_type=protocol_type, protocol_name=protocol_name, assignment=assignment))


def handle_heartbeat(groups: GroupStorage | None, version: int, request: Any,
                     auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    error: int
    if not _readable(auth, request.group_id):
        error = Errors.GROUP_AUTHORIZATION_FAILED
    elif groups is None:
        error = GroupError.COORDINATOR_NOT_AVAILABLE
    else:
        error = groups.coordinator.heartbeat(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id)
    module = response_module(ApiKey.HEARTBEAT, version)
    return Reply(build(module, "HeartbeatResponse", throttle_time=NO_THROTTLE,
                       error_code=error_code(error)))


def handle_leave_group(groups: GroupStorage | None, version: int, request: Any,
                       auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.LEAVE_GROUP, version)
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    top: int = GroupError.COORDINATOR_NOT_AVAILABLE
    errors: list[GroupError] = []
    if not _readable(auth, request.group_id):
        top = Errors.GROUP_AUTHORIZATION_FAILED  # Kafka's error response: no members
    elif groups is not None:
        top, errors = groups.coordinator.leave_group(request.group_id, leaving)
    if version < 3:
        # One member: its error is the answer's (Kafka's LeaveGroupResponse for v0-2).
        error: int = top if top != GroupError.NONE or not errors else errors[0]
        return Reply(build(module, "LeaveGroupResponse", throttle_time=NO_THROTTLE,
                           error_code=error_code(error)))
    members = tuple(
        build(module, "MemberResponse", member_id=member_id, group_instance_id=instance_id,
              error_code=error_code(error))
        for (member_id, instance_id), error in zip(leaving, errors, strict=False))
    return Reply(build(module, "LeaveGroupResponse", throttle_time=NO_THROTTLE,
                       error_code=error_code(top), members=members))
