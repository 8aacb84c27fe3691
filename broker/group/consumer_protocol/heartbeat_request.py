"""ConsumerGroupHeartbeat as the coordinator takes it: the request's fields, the answer, the
checks made before any state is touched, and the tombstones of members and groups."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from broker.group.consumer_protocol.model import STATIC_LEAVE_EPOCH, ConsumerGroupState
from broker.group.consumer_protocol.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    ConsumerKey,
    encode_key,
)
from broker.group.errors import GroupError

E = GroupError
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1

    @property
    def is_full(self) -> bool:
        """Kafka's isFullRequest: the member sent everything (after a reconnection)."""
        return self.rebalance_timeout_ms != -1 and self.owned is not None and (
            self.subscribed_topic_names is not None or self.subscribed_topic_regex is not None)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: keep what you have


class Refused(Exception):
    """A heartbeat answered with an error, nothing of it applied."""

    def __init__(self, error: GroupError, message: str) -> None:
        super().__init__(message)
        self.error = error


def validate(request: Heartbeat, assignors: Iterable[str]) -> tuple[GroupError, str] | None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (INVALID_REQUEST before any
    state is touched), and the assignor check (UNSUPPORTED_ASSIGNOR)."""
    def invalid(message: str) -> tuple[GroupError, str]:
        return E.INVALID_REQUEST, message

    epoch = request.member_epoch
    if not request.group_id:
        return invalid("GroupId can't be empty.")
    if request.instance_id == "" or request.rack_id == "":
        return invalid("InstanceId and RackId can't be empty strings.")
    if not request.member_id and (request.version >= 1 or epoch != 0):
        return invalid("MemberId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            return invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first "
                           "request.")
    elif epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        return invalid("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        return invalid(f"MemberEpoch is invalid: {epoch}.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return E.UNSUPPORTED_ASSIGNOR, \
            f"ServerAssignor {request.server_assignor} is not supported."
    if request.subscribed_topic_regex:
        try:
            re.compile(request.subscribed_topic_regex)
        except re.error as exc:
            return E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex is invalid: {exc}"
    return None


def record_key(key_type: int, group_id: str, member_id: str = "") -> bytes:
    return encode_key(ConsumerKey(key_type, group_id, member_id))


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Kafka's order: current assignment, target assignment, member metadata."""
    return [(record_key(t, group_id, member_id), None)
            for t in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]


def group_tombstones(group_id: str, state: ConsumerGroupState) -> list[Record]:
    """A consumer group's deletion (Kafka's order: members' assignments, targets, the target
    epoch, members, partition metadata, the group epoch last)."""
    members = sorted(state.members)
    out: list[Record] = [(record_key(CURRENT_MEMBER_ASSIGNMENT, group_id, m), None)
                         for m in members]
    out += [(record_key(TARGET_ASSIGNMENT_MEMBER, group_id, m), None) for m in members]
    out.append((record_key(TARGET_ASSIGNMENT_METADATA, group_id), None))
    out += [(record_key(MEMBER_METADATA, group_id, m), None) for m in members]
    out.append((record_key(PARTITION_METADATA, group_id), None))
    out.append((record_key(GROUP_METADATA, group_id), None))
    return out
