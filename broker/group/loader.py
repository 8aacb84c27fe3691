"""Replay of a `__consumer_offsets` partition into groups (spec §2.2): records in log order,
the last record per key wins (a null value deletes), undecodable records are skipped. A group
with members comes back Stable at its persisted generation with a fresh session per member;
one without members (or with offsets only: a simple group) comes back Empty. A KIP-848
consumer group's records (key types 3-8) are consumer_protocol/replay.py's; such a group
comes back with its members, epochs and assignments (their sessions start when the partition
is served: ConsumerGroupManager.start_sessions)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from broker.group.consumer_protocol import records as consumer_records
from broker.group.consumer_protocol.replay import ConsumerReplay
from broker.group.model import Group, GroupState, Member
from broker.group.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
)

log = logging.getLogger(__name__)


def replay(records: Iterable[tuple[bytes, bytes | None]], now_ms: int,
           where: str = "__consumer_offsets") -> tuple[dict[str, Group], int]:
    """(groups by id, records skipped as undecodable)."""
    offsets: dict[str, dict[tuple[str, int], OffsetValue]] = {}
    values: dict[str, GroupValue | None] = {}
    skipped = 0
    consumer = ConsumerReplay()
    for key_bytes, value_bytes in records:
        try:
            consumer_key = consumer_records.decode_key(key_bytes)
            if consumer_key is not None:
                consumer.apply(consumer_key, value_bytes)
                continue
            key = decode_key(key_bytes)
            if isinstance(key, OffsetKey):
                group_offsets = offsets.setdefault(key.group, {})
                if value_bytes is None:
                    group_offsets.pop((key.topic, key.partition), None)
                else:
                    group_offsets[(key.topic, key.partition)] = decode_offset_value(value_bytes)
            elif isinstance(key, GroupKey):
                values[key.group] = (None if value_bytes is None
                                     else decode_group_value(value_bytes))
        except RecordFormatError as exc:
            skipped += 1
            log.warning("skipping an undecodable record of %s: %s", where, exc)
    consumer_groups = consumer.finished()
    groups = {}
    for group_id in set(offsets) | set(values) | set(consumer_groups):
        value = values.get(group_id)
        group_offsets = offsets.get(group_id, {})
        state = consumer_groups.get(group_id)
        if value is None and not group_offsets and state is None:
            continue  # deleted
        group = restore(group_id, None if state is not None else value, now_ms)
        if state is not None:
            group.consumer = state
            group.protocol_type = "consumer"
            group.state = GroupState.STABLE if state.members else GroupState.EMPTY
        group.offsets = group_offsets
        groups[group_id] = group
    return groups, skipped


def restore(group_id: str, value: GroupValue | None, now_ms: int) -> Group:
    group = Group(group_id)
    if value is None:
        return group  # offsets only: a simple group
    group.generation = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    group.state_timestamp = value.current_state_timestamp
    for m in value.members:
        member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout, m.session_timeout, value.protocol_type,
                        [(value.protocol or "", m.subscription)], m.assignment)
        member.heartbeat_deadline = now_ms + m.session_timeout  # a fresh session
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    return group
