"""ConsumerGroupDescribe's view of a consumer group, and the checks of an offset commit or
fetch by a consumer-protocol member (Kafka 4.0's ConsumerGroup.validateOffsetCommit /
validateOffsetFetch)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.group.consumer_protocol.model import ConsumerMember
from broker.group.consumer_protocol.records import Assignment
from broker.group.errors import GroupError
from broker.group.model import Group

if TYPE_CHECKING:  # the coordinator loads consumer groups through this package
    from broker.group.coordinator import GroupCoordinator

E = GroupError


@dataclass(frozen=True, slots=True)
class MemberView:
    member: ConsumerMember
    target: Assignment


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    error: int = 0
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: tuple[MemberView, ...] = ()
    topic_names: dict[uuid.UUID, str] | None = None  # the subscribed topics' names


def describe(coordinator: GroupCoordinator, group_id: str, default_assignor: str) -> GroupView:
    error = coordinator.coordinator_error(group_id) if group_id else E.INVALID_GROUP_ID
    if error is not None:
        return GroupView(group_id, error)
    group = coordinator.groups.get(group_id)
    if group is None or group.consumer is None:
        return GroupView(group_id, E.GROUP_ID_NOT_FOUND,
                         f"Group {group_id} not found." if group is None
                         else f"Group {group_id} is not a consumer group.")
    state = group.consumer
    asked = Counter(m.server_assignor for m in state.members.values() if m.server_assignor)
    assignor = max(sorted(asked), key=lambda a: asked[a]) if asked else default_assignor
    return GroupView(
        group_id, 0, None, state.state_name(), state.group_epoch, state.assignment_epoch,
        assignor,
        tuple(MemberView(m, state.target.get(m.member_id, {}))
              for _, m in sorted(state.members.items())),
        {topic_id: t.name for topic_id, t in state.subscribed.items()})


def commit_error(group: Group, generation: int, member_id: str, v9_or_later: bool
                 ) -> GroupError | None:
    """An OffsetCommit to a consumer group: epoch -1 with no member (admin tools, assign-only
    consumers) only while it has no members; a member must commit with OffsetCommit v9+
    (UNSUPPORTED_VERSION) and its current member epoch (STALE_MEMBER_EPOCH)."""
    assert group.consumer is not None
    if generation < 0 and not group.consumer.members:
        return None
    member = group.consumer.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if not v9_or_later:
        return E.UNSUPPORTED_VERSION
    if generation != member.member_epoch:
        return E.STALE_MEMBER_EPOCH
    return None


def fetch_error(group: Group, member_id: str | None, member_epoch: int) -> GroupError | None:
    """An OffsetFetch v9 naming a member of a consumer group: it must be one, at its epoch."""
    if group.consumer is None or member_id is None or (member_epoch < 0 and not member_id):
        return None
    member = group.consumer.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return E.STALE_MEMBER_EPOCH
    return None
