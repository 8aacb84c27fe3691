"""A classic group and its members, as the coordinator keeps them in memory (Kafka's
GroupMetadata and MemberMetadata). Pure data plus the small queries the state machine asks;
the transitions live in coordinator.py."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from broker.group.records import GroupValue, MemberValue, OffsetValue

if TYPE_CHECKING:  # consumer_protocol builds on this module
    from broker.group.consumer_protocol.model import ConsumerGroupState


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    # (member id, instance id, metadata): the leader's answer only.
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    is_new: bool = False
    heartbeat_deadline: int = 0  # ms: the session (or new-member join) deadline

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)

    def to_value(self, protocol: str | None) -> MemberValue:
        return MemberValue(self.member_id, self.instance_id, self.client_id, self.client_host,
                           self.rebalance_timeout_ms, self.session_timeout_ms,
                           self.metadata_for(protocol) if protocol else b"", self.assignment)


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline ms
    pending_sync: set[str] = field(default_factory=set)
    state_timestamp: int = -1
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # Commits being written, per partition (Kafka's pendingOffsetCommits): expiry and
    # deletion leave these alone, or an acknowledged commit could vanish behind them.
    pending_commits: Counter[tuple[str, int]] = field(default_factory=Counter)
    # Deadlines (ms) of the group's timers; None when not running.
    join_deadline: int | None = None
    sync_deadline: int | None = None
    in_initial_delay: bool = False  # the join phase that started from Empty (KIP-134)
    initial_rebalance_budget_ms: int = 0  # what the initial delay may still extend
    new_member_added: bool = False  # during the initial delay window
    # A KIP-848 consumer group's state (broker/group/consumer_protocol); None: a classic group.
    consumer: ConsumerGroupState | None = None

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            names = member.protocol_names() if names is None else names & member.protocol_names()
        return names or set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's GroupMetadata.supportsProtocols."""
        names = {name for name, _ in protocols}
        if self.is_empty:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(sorted(votes), key=lambda name: votes[name])

    def to_value(self, now_ms: int) -> GroupValue:
        return GroupValue(
            self.protocol_type or "", self.generation, self.protocol_name, self.leader_id,
            now_ms, tuple(m.to_value(self.protocol_name) for m in self.members.values()))

    def subscribed_topics(self) -> set[str] | None:
        """Topics of a consumer group's members' subscriptions; None if unknown."""
        if self.consumer is not None:
            return self.consumer.subscribed_topic_names() | {
                t.name for t in self.consumer.subscribed.values()}
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            decoded = decode_subscription(member.metadata_for(self.protocol_name))
            if decoded is None:
                return None
            topics |= decoded
        return topics


def decode_subscription(data: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocol subscription (int16 version, string array, ...)."""
    try:
        pos = 2
        count = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        pos += 4
        if count < 0 or count > len(data):
            return None
        topics = set()
        for _ in range(count):
            size = int.from_bytes(data[pos:pos + 2], "big", signed=True)
            pos += 2
            if size < 0 or pos + size > len(data):
                return None
            topics.add(data[pos:pos + size].decode())
            pos += size
        return topics
    except (UnicodeDecodeError, ValueError):
        return None
