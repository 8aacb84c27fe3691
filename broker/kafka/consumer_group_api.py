"""ConsumerGroupHeartbeat (68, v0-1) and ConsumerGroupDescribe (69, v0-1): KIP-848's consumer
group protocol on the wire (broker/group/consumer_protocol does the work).

Authorization (Kafka 4.0's KafkaApis): a heartbeat needs READ on the group
(GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every topic it names (TOPIC_AUTHORIZATION_FAILED,
nothing applied); a describe needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for it)
and on the topics its members subscribe to or hold (TOPIC_AUTHORIZATION_FAILED for it)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from broker.api import Request
from broker.group.consumer_protocol.describe import GroupView, describe
from broker.group.consumer_protocol.heartbeat_request import Heartbeat, HeartbeatResult
from broker.group.consumer_protocol.records import Assignment
from broker.group.errors import GroupError
from broker.group.storage import GroupStorage
from broker.kafka.authorization import (
    ALLOW_ALL,
    AUTHORIZED_OPERATIONS_OMITTED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.group_membership_api import client_host
from broker.kafka.reply import NO_THROTTLE, Reply, millis
from broker.kafka.topic_ids import from_wire
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.image import MetadataImage

CONSUMER_MEMBER_TYPE = 1  # ConsumerGroupDescribe v1's MemberType


def _owned(topic_partitions: Any) -> Assignment | None:
    if topic_partitions is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in topic_partitions:
        if tp.topic_id is not None and tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


async def handle_consumer_group_heartbeat(
        groups: GroupStorage | None, context: Request, version: int, request: Any,
        auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    names = request.subscribed_topic_names
    if not auth.group(AclOperation.READ, request.group_id):
        result = HeartbeatResult(Errors.GROUP_AUTHORIZATION_FAILED)
    elif names is not None and not all(auth.topic(AclOperation.DESCRIBE, n) for n in names):
        result = HeartbeatResult(Errors.TOPIC_AUTHORIZATION_FAILED,
                                 "The member is not authorized to describe its topics.")
    elif groups is None:
        result = HeartbeatResult(GroupError.COORDINATOR_NOT_AVAILABLE)
    else:
        result = await groups.consumer.heartbeat(Heartbeat(
            request.group_id, request.member_id, request.member_epoch,
            request.instance_id, request.rack_id, millis(request.rebalance_timeout),
            tuple(names) if names is not None else None,
            getattr(request, "subscribed_topic_regex", None), request.server_assignor,
            _owned(request.topic_partitions), context.client_id or "", client_host(context),
            version))
    module = response_module(ApiKey.CONSUMER_GROUP_HEARTBEAT, version)
    assignment = None
    if result.assignment is not None:
        assignment = build(module, "Assignment", topic_partitions=tuple(
            build(module, "TopicPartitions", topic_id=topic_id, partitions=tuple(sorted(parts)))
            for topic_id, parts in sorted(result.assignment.items())))
    return Reply(build(
        module, "ConsumerGroupHeartbeatResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(result.error), error_message=result.message,
        member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment))


def _topics_of(view: GroupView) -> set[str]:
    names = dict(view.topic_names or {})
    topics: set[str] = set()
    for m in view.members:
        topics |= set(m.member.subscribed_topic_names)
        for assignment in (m.member.assigned, m.target):
            topics |= {names[t] for t in assignment if t in names}
    return topics


def handle_consumer_group_describe(
        groups: GroupStorage | None, image: MetadataImage, version: int, request: Any,
        auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.CONSUMER_GROUP_DESCRIBE, version)
    described = []
    for group_id in request.group_ids:
        if not auth.group(AclOperation.DESCRIBE, group_id):
            view = GroupView(group_id, Errors.GROUP_AUTHORIZATION_FAILED)
        elif groups is None:
            view = GroupView(group_id, GroupError.COORDINATOR_NOT_AVAILABLE)
        else:
            view = describe(groups.coordinator, group_id,
                            groups.config.consumer_assignors[0])
            if view.error == 0 and not all(auth.topic(AclOperation.DESCRIBE, t)
                                           for t in sorted(_topics_of(view))):
                view = GroupView(group_id, Errors.TOPIC_AUTHORIZATION_FAILED,
                                 "The group has topics that the client is not authorized to "
                                 "describe.")
        operations = AUTHORIZED_OPERATIONS_OMITTED
        if request.include_authorized_operations and view.error == 0:
            operations = auth.operations(ResourceType.GROUP, group_id)
        described.append(build(
            module, "DescribedGroup", error_code=error_code(view.error),
            error_message=view.message, group_id=group_id, group_state=view.state,
            group_epoch=view.group_epoch, assignment_epoch=view.assignment_epoch,
            assignor_name=view.assignor, authorized_operations=operations,
            members=tuple(_member(module, image, view, m) for m in view.members)))
    return Reply(build(module, "ConsumerGroupDescribeResponse", throttle_time=NO_THROTTLE,
                       groups=tuple(described)))


def _member(module: Any, image: MetadataImage, view: GroupView, m: Any) -> Any:
    member = m.member
    names = view.topic_names or {}

    def name_of(topic_id: uuid.UUID) -> str:
        known = names.get(topic_id)
        if known is not None:
            return known
        topic = image.topics.by_id.get(from_wire(topic_id))
        return topic.name if topic is not None else ""

    def assignment(partitions: Assignment) -> Any:
        return build(module, "Assignment", topic_partitions=tuple(
            build(module, "TopicPartitions", topic_id=topic_id, topic_name=name_of(topic_id),
                  partitions=tuple(sorted(parts)))
            for topic_id, parts in sorted(partitions.items(), key=lambda i: name_of(i[0]))))

    return build(
        module, "Member", member_id=member.member_id, instance_id=member.instance_id,
        rack_id=member.rack_id, member_epoch=member.member_epoch, client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topic_names,
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=assignment(member.assigned), target_assignment=assignment(m.target),
        member_type=CONSUMER_MEMBER_TYPE)
