"""Offsets that go away (spec §4.3, KIP-211): expiry after `offsets.retention.minutes`, and the
offsets of deleted topics. Both write tombstones to `__consumer_offsets` first and forget the
offsets only once the tombstones are replicated; an Empty group left without offsets, or
that never had any, is deleted (its own tombstone), as Kafka's cleanupGroupMetadata does."""

from __future__ import annotations

from collections.abc import Callable

from broker.group.consumer_protocol.heartbeat_request import group_tombstones
from broker.group.coordinator import GroupCoordinator, PartitionStatus
from broker.group.errors import GroupError
from broker.group.model import Group, GroupState
from broker.group.records import NO_EXPIRY, GroupKey, OffsetKey, group_record, offset_record

TopicPartition = tuple[str, int]


def expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """Kafka's GroupMetadata.removeExpiredOffsets: which offsets of `group` expired."""
    def expired(key: TopicPartition, base: int, subscribed: set[str]) -> bool:
        value = group.offsets[key]
        if key[0] in subscribed:
            return False
        if value.expire_timestamp != NO_EXPIRY:  # an OffsetCommit v2-4 retention time
            return now_ms >= value.expire_timestamp
        return now_ms - base >= retention_ms

    if group.protocol_type is not None and group.state is GroupState.EMPTY:
        # Everything, once the group has been Empty for the retention time.
        return [key for key, value in group.offsets.items()
                if expired(key, group.state_timestamp if group.state_timestamp >= 0
                           else value.commit_timestamp, set())]
    if group.protocol_type is None:  # a simple group: each offset by its commit time
        return [key for key, value in group.offsets.items()
                if expired(key, value.commit_timestamp, set())]
    subscribed = group.subscribed_topics()
    if group.state is GroupState.STABLE and subscribed is not None:
        return [key for key, value in group.offsets.items()
                if expired(key, value.commit_timestamp, subscribed)]
    return []  # rebalancing, or not a consumer group (KAFKA-13636)


async def expire(coordinator: GroupCoordinator, retention_ms: int) -> int:
    """Remove expired offsets from every group this broker serves; how many went."""
    now = coordinator.now_ms()
    return await _remove(coordinator, lambda g: expired_offsets(g, now, retention_ms))


async def purge_deleted_topics(coordinator: GroupCoordinator,
                               topic_exists: Callable[[str], bool]) -> int:
    """Remove the offsets of topics that no longer exist (Kafka's handleDeletedPartitions)."""
    return await _remove(coordinator,
                         lambda g: [key for key in g.offsets if not topic_exists(key[0])])


async def _remove(coordinator: GroupCoordinator,
                  select: Callable[[Group], list[TopicPartition]]) -> int:
    removed = 0
    for group_id, group in list(coordinator.groups.items()):
        partition = coordinator.partition_of(group_id)
        if coordinator.partitions.get(partition) is not PartitionStatus.ACTIVE \
                or group.state is GroupState.DEAD:
            continue
        # Kafka skips offsets with a commit in flight: that commit's record lands after
        # our tombstone and must stay.
        chosen = {key: group.offsets[key] for key in select(group)
                  if key not in group.pending_commits}
        # Kafka's cleanupGroupMetadata: an Empty group left without offsets (or that had
        # none) goes, at each check; not while a commit is in flight or a member id handed
        # out by JoinGroup (KIP-394) waits for its rejoin.
        leaves_empty = group.state is GroupState.EMPTY and not group.pending_commits \
            and not group.pending_members and len(chosen) == len(group.offsets)
        if not chosen and not leaves_empty:
            continue
        records = [offset_record(OffsetKey(group_id, topic, p), None) for topic, p in chosen]
        if leaves_empty:
            records.append(group_record(GroupKey(group_id), None))
            if group.consumer is not None:  # a KIP-848 group's records go too
                records += group_tombstones(group_id, group.consumer)
            group.state = GroupState.DEAD  # as DeleteGroups: no commit slips in meanwhile
        code = await coordinator.log.append(partition, records)
        if coordinator.groups.get(group_id) is not group:
            continue
        if code != GroupError.NONE:
            if leaves_empty and group.state is GroupState.DEAD:
                group.state = GroupState.EMPTY
            continue  # tried again at the next check
        for key, value in chosen.items():
            # A commit made while the tombstones were written follows them in the log:
            # what it wrote (or is writing) stays.
            if group.offsets.get(key) is value and key not in group.pending_commits:
                del group.offsets[key]
                removed += 1
        if leaves_empty and group.state is GroupState.DEAD:
            del coordinator.groups[group_id]
    return removed
