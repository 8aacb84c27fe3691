"""ListGroups (16, v0-5), DescribeGroups (15, v0-5), DeleteGroups (42, v0-2): spec §3.9; and
OffsetDelete (47, v0, KIP-496). One answer per group asked, always (librdkafka aborts on fewer).

Authorization (Kafka): ListGroups lists every group to a caller allowed DESCRIBE on the
cluster, else the groups it may DESCRIBE; DescribeGroups needs DESCRIBE and DeleteGroups DELETE
on each group (GROUP_AUTHORIZATION_FAILED for that group). OffsetDelete needs DELETE on the
group (GROUP_AUTHORIZATION_FAILED for the request) and READ on each topic
(TOPIC_AUTHORIZATION_FAILED on its partitions); a partition the metadata does not know is
UNKNOWN_TOPIC_OR_PARTITION, as Kafka's KafkaApis.handleOffsetDeleteRequest checks before the
coordinator."""

from __future__ import annotations

from typing import Any

from broker.group.admin import (
    GroupDescription,
    GroupListing,
    delete_group,
    delete_offsets,
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
from metadata.image import MetadataImage


def handle_list_groups(groups: GroupStorage | None, version: int, request: Any,
                       auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.LIST_GROUPS, version)
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    error = GroupError.COORDINATOR_NOT_AVAILABLE
    listed: list[GroupListing] = []
    if groups is not None:
        error, listed = list_groups(groups.coordinator, states or None)
        if types:
            listed = [g for g in listed if g.group_type in types]
        if not auth.cluster(AclOperation.DESCRIBE, log_if_denied=False):
            listed = [g for g in listed if auth.group(AclOperation.DESCRIBE, g.group_id,
                                                      log_if_denied=False)]
    return Reply(build(
        module, "ListGroupsResponse", throttle_time=NO_THROTTLE, error_code=error_code(error),
        groups=tuple(build(module, "ListedGroup", group_id=g.group_id,
                           protocol_type=g.protocol_type, group_state=g.state,
                           group_type=g.group_type) for g in listed)))


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


async def handle_offset_delete(groups: GroupStorage | None, image: MetadataImage, version: int,
                               request: Any, auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.OFFSET_DELETE, version)

    def answer(error: int, results: dict[tuple[str, int], int]) -> Reply:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), code in results.items():
            by_topic.setdefault(topic, []).append(build(
                module, "OffsetDeleteResponsePartition", partition_index=partition,
                error_code=error_code(code)))
        return Reply(build(module, "OffsetDeleteResponse", error_code=error_code(error),
                           throttle_time=NO_THROTTLE, topics=tuple(
                               build(module, "OffsetDeleteResponseTopic", name=name,
                                     partitions=tuple(parts))
                               for name, parts in by_topic.items())))

    if not auth.group(AclOperation.DELETE, request.group_id):
        return answer(Errors.GROUP_AUTHORIZATION_FAILED, {})
    asked = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    readable = {topic: auth.topic(AclOperation.READ, topic)
                for topic in dict.fromkeys(topic for topic, _ in asked)}
    refused: dict[tuple[str, int], int] = {}
    for topic, partition in asked:
        topic_image = image.topic(topic)
        if not readable[topic]:
            refused[(topic, partition)] = Errors.TOPIC_AUTHORIZATION_FAILED
        elif topic_image is None or topic_image.partition(partition) is None:
            refused[(topic, partition)] = GroupError.UNKNOWN_TOPIC_OR_PARTITION
    valid = [tp for tp in asked if tp not in refused]
    if groups is None:
        return answer(GroupError.COORDINATOR_NOT_AVAILABLE, {})
    error, results = await delete_offsets(groups.coordinator, request.group_id, valid)
    if error != GroupError.NONE:
        return answer(error, {})  # Kafka: only the group-level error, no topics
    merged: dict[tuple[str, int], int] = {}
    for tp in asked:
        merged[tp] = refused.get(tp, results.get(tp, GroupError.NONE))
    return answer(GroupError.NONE, merged)
