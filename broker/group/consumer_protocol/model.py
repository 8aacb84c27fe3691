"""A consumer group of KIP-848 and its members, as Kafka 4.0's ConsumerGroup and
ConsumerGroupMember keep them (pure data; manager.py changes them)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import IntEnum

from broker.group.consumer_protocol.records import (
    Assignment,
    CurrentAssignment,
    MemberMetadata,
    TopicMetadata,
)

LEAVE_EPOCH = -1  # a member leaving for good
STATIC_LEAVE_EPOCH = -2  # a static member away for a while (it keeps its partitions)
NO_DEADLINE = 2**62
EMPTY: Assignment = {}


class MemberState(IntEnum):
    """Kafka's MemberState (the byte of record 8)."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # waiting for the member to give partitions up
    UNRELEASED_PARTITIONS = 2  # waiting for other members to give its new partitions up
    UNKNOWN = 127


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline: int = NO_DEADLINE  # ms
    rebalance_deadline: int = NO_DEADLINE  # ms: revocation must be acknowledged by then

    def metadata(self) -> MemberMetadata:
        return MemberMetadata(self.instance_id, self.rack_id, self.client_id, self.client_host,
                              self.subscribed_topic_names, self.subscribed_topic_regex,
                              self.rebalance_timeout_ms, self.server_assignor)

    def apply_metadata(self, m: MemberMetadata) -> None:
        self.instance_id, self.rack_id = m.instance_id, m.rack_id
        self.client_id, self.client_host = m.client_id, m.client_host
        self.subscribed_topic_names = m.subscribed_topic_names
        self.subscribed_topic_regex = m.subscribed_topic_regex
        self.rebalance_timeout_ms, self.server_assignor = m.rebalance_timeout_ms, m.server_assignor

    def current(self) -> CurrentAssignment:
        return CurrentAssignment(self.member_epoch, self.previous_member_epoch, self.state,
                                 self.assigned, self.pending_revocation)

    def apply_current(self, c: CurrentAssignment) -> None:
        self.member_epoch, self.previous_member_epoch = c.member_epoch, c.previous_member_epoch
        try:
            self.state = MemberState(c.state)
        except ValueError:
            self.state = MemberState.UNKNOWN
        self.assigned, self.pending_revocation = c.assigned, c.pending_revocation


@dataclass(eq=False)
class ConsumerGroupState:
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> partitions
    # The subscribed topics' metadata the target assignment was computed from (record 4).
    subscribed: dict[uuid.UUID, TopicMetadata] = field(default_factory=dict)
    # (topic id, partition) -> epoch of the member holding it (assigned or being revoked).
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)

    def state_name(self) -> str:
        """ConsumerGroupDescribe's and ListGroups' state (Kafka's ConsumerGroupState)."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topic_names(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding the partition, -1 when nobody holds it."""
        return self.partition_epochs.get((topic_id, partition), -1)

    def hold(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.partition_epochs[(topic_id, partition)] = member.member_epoch

    def release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.partition_epochs.pop((topic_id, partition), None)

    def rebuild_partition_epochs(self) -> None:
        self.partition_epochs.clear()
        for member in self.members.values():
            self.hold(member)


def assignment_size(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


def normalized(assignment: Mapping[uuid.UUID, AbstractSet[int]]) -> Assignment:
    """Without topics of no partitions (so equal assignments compare equal)."""
    return {topic: frozenset(parts) for topic, parts in assignment.items() if parts}
