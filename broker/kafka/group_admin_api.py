"""ListGroups (16, v0-5), DescribeGroups (15, v0-5), DeleteGroups (42, v0-2): spec §3.9.
One answer per group asked, always (librdkafka aborts on fewer).

Authorization (Kafka): ListGroups lists every group to a caller allowed DESCRIBE on the
cluster, else the groups it may DESCRIBE; DescribeGroups needs DESCRIBE and DeleteGroups DELETE
on each group (GROUP_AUTHORIZATION_FAILED for that group)."""

from __future__ import annotations

from typing import Any

from broker.group.admin import (
    GroupDescription,
    GroupListing,
    delete_group,
    describe_group,
    list_groups,
)
from broker.group.errors import GroupError
from broker.group.storage import GroupStorage
from broker.kafka.authorization import (
    ALLOW_ALL,
    AUTHORIZED_OPERATIONS_OMITTED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType

CLASSIC = "classic"


def handle_list_groups(groups: GroupStorage | None, version: int, request: Any,
                       auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.LIST_GROUPS, version)
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    error = GroupError.COORDINATOR_NOT_AVAILABLE
    listed: list[GroupListing] = []
    if groups is not None and types and CLASSIC not in types:
        error = GroupError.NONE  # every group here is a classic one
    elif groups is not None:
        error, listed = list_groups(groups.coordinator, states or None)
        if not auth.cluster(AclOperation.DESCRIBE, log_if_denied=False):
            listed = [g for g in listed if auth.group(AclOperation.DESCRIBE, g.group_id,
                                                      log_if_denied=False)]
    return Reply(build(
        module, "ListGroupsResponse", throttle_time=NO_THROTTLE, error_code=error_code(error),
        groups=tuple(build(module, "ListedGroup", group_id=g.group_id,
                           protocol_type=g.protocol_type, group_state=g.state,
                           group_type=CLASSIC) for g in listed)))


def handle_describe_groups(groups: GroupStorage | None, version: int, request: Any,
                           auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.DESCRIBE_GROUPS, version)
    with_operations = getattr(request, "include_authorized_operations", False)
    described = []
    for group_id in request.groups:
        operations = AUTHORIZED_OPERATIONS_OMITTED
        if not auth.group(AclOperation.DESCRIBE, group_id):
            description = GroupDescription(group_id, Errors.GROUP_AUTHORIZATION_FAILED)
        elif groups is None:
            description = GroupDescription(group_id, GroupError.COORDINATOR_NOT_AVAILABLE)
        else:
            description = describe_group(groups.coordinator, group_id)
        if with_operations and description.error != Errors.GROUP_AUTHORIZATION_FAILED:
            operations = auth.operations(ResourceType.GROUP, group_id)
        described.append(build(
            module, "DescribedGroup", error_code=error_code(description.error),
            group_id=group_id, group_state=description.state,
            protocol_type=description.protocol_type, protocol_data=description.protocol_data,
            authorized_operations=operations,
            members=tuple(build(
                module, "DescribedGroupMember", member_id=m.member_id,
                group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.metadata,
                member_assignment=m.assignment) for m in description.members)))
    return Reply(build(module, "DescribeGroupsResponse", throttle_time=NO_THROTTLE,
                       groups=tuple(described)))


async def handle_delete_groups(groups: GroupStorage | None, version: int,
                               request: Any, auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.DELETE_GROUPS, version)
    results = []
    for group_id in request.groups_names:
        error: int
        if not auth.group(AclOperation.DELETE, group_id):
            error = Errors.GROUP_AUTHORIZATION_FAILED
        elif groups is None:
            error = GroupError.COORDINATOR_NOT_AVAILABLE
        else:
            error = await delete_group(groups.coordinator, group_id)
        results.append(build(module, "DeletableGroupResult", group_id=group_id,
                             error_code=error_code(error)))
    return Reply(build(module, "DeleteGroupsResponse", throttle_time=NO_THROTTLE,
                       results=tuple(results)))
