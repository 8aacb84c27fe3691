"""The server-side assignors of KIP-848 (`group.consumer.assignors`): each maps the members'
subscriptions and the subscribed topics' partition counts to a target assignment.

- `uniform` (Kafka's UniformAssignor): balanced and sticky. Every member keeps what it had in
  the previous target assignment while still subscribed; free partitions go to the least
  loaded subscribed member; then partitions move one at a time from a member to another
  subscribed one with at least two fewer, until no such move is left. With one subscription
  for all, member counts differ by at most one and only the partitions needed move.
- `range` (Kafka's RangeAssignor): for each topic, its subscribers (static members first by
  instance id, then by member id) get contiguous ranges, the first ones one more.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.group.consumer_protocol.records import Assignment, TopicMetadata

UNIFORM = "uniform"
RANGE = "range"


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    instance_id: str | None
    topics: frozenset[uuid.UUID]  # the subscribed topics that exist


Assignor = Callable[[list[MemberSubscription], Mapping[uuid.UUID, TopicMetadata],
                     Mapping[str, Assignment]], dict[str, Assignment]]


def _frozen(partitions: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {member: {topic: frozenset(parts) for topic, parts in topics.items() if parts}
            for member, topics in partitions.items()}


def uniform(members: list[MemberSubscription], topics: Mapping[uuid.UUID, TopicMetadata],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    owner: dict[tuple[uuid.UUID, int], str] = {}
    held: dict[str, set[tuple[uuid.UUID, int]]] = {m.member_id: set() for m in members}
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in sorted(members, key=lambda m: m.member_id):
        for topic in m.topics:
            subscribers.setdefault(topic, []).append(m.member_id)
    # Sticky: what each member had and may still have.
    for m in members:
        for topic, partitions in previous.get(m.member_id, {}).items():
            if topic not in m.topics or topic not in topics:
                continue
            for partition in partitions:
                tp = (topic, partition)
                if partition < topics[topic].partitions and tp not in owner:
                    owner[tp] = m.member_id
                    held[m.member_id].add(tp)
    # Free partitions to the least loaded subscriber.
    for topic in sorted(topics, key=lambda t: topics[t].name):
        candidates = subscribers.get(topic)
        if not candidates:
            continue
        for partition in range(topics[topic].partitions):
            tp = (topic, partition)
            if tp not in owner:
                chosen = min(candidates, key=lambda mid: (len(held[mid]), mid))
                owner[tp] = chosen
                held[chosen].add(tp)
    _balance(held, owner, subscribers)
    out: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    for (topic, partition), member_id in owner.items():
        out[member_id].setdefault(topic, set()).add(partition)
    return _frozen(out)


def _balance(held: dict[str, set[tuple[uuid.UUID, int]]],
             owner: dict[tuple[uuid.UUID, int], str],
             subscribers: dict[uuid.UUID, list[str]]) -> None:
    """Move single partitions from a member to a subscriber with two or more fewer, most
    loaded first, until none can move (each move lowers the sum of squares: it ends)."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(held, key=lambda mid: (-len(held[mid]), mid)):
            for tp in sorted(held[giver], key=lambda tp: (str(tp[0]), -tp[1])):
                taker = min(subscribers[tp[0]], key=lambda mid: (len(held[mid]), mid))
                if len(held[taker]) + 1 < len(held[giver]):
                    held[giver].discard(tp)
                    held[taker].add(tp)
                    owner[tp] = taker
                    moved = True
                    break
            if moved:
                break


def range_assignor(members: list[MemberSubscription],
                   topics: Mapping[uuid.UUID, TopicMetadata],
                   previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    del previous  # Kafka 4.0's range assignor is not sticky beyond its order
    ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "",
                                             m.member_id))
    out: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    for topic, metadata in topics.items():
        subscribers = [m.member_id for m in ordered if topic in m.topics]
        if not subscribers:
            continue
        quota, extra = divmod(metadata.partitions, len(subscribers))
        start = 0
        for index, member_id in enumerate(subscribers):
            count = quota + (1 if index < extra else 0)
            if count:
                out[member_id][topic] = set(range(start, start + count))
            start += count
    return _frozen(out)


ASSIGNORS: Mapping[str, Assignor] = {UNIFORM: uniform, RANGE: range_assignor}
# Kafka's class names name the same assignors in `group.consumer.assignors`.
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


def assignor_name(configured: str) -> str:
    """The assignor a `group.consumer.assignors` entry names (ValueError if none)."""
    name = CLASS_NAMES.get(configured, configured)
    if name not in ASSIGNORS:
        raise ValueError(f"unknown consumer group assignor '{configured}' "
                         f"(known: {', '.join(ASSIGNORS)})")
    return name
