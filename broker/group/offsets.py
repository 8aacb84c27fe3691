"""OffsetCommit and OffsetFetch on the coordinator's groups (spec §4): who may commit in
which state, the per-partition checks, and the acks=all write that comes before the offsets
are visible."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from broker.group.consumer_protocol.describe import commit_error, fetch_error
from broker.group.coordinator import GroupCoordinator
from broker.group.errors import GroupError, append_error
from broker.group.model import Group, GroupState
from broker.group.records import NO_EXPIRY, OffsetKey, OffsetValue, offset_record

E = GroupError
S = GroupState


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1  # OffsetCommit v1's; -1: the coordinator's clock (Kafka's)


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: int = 0


async def commit_offsets(
    coordinator: GroupCoordinator, group_id: str, generation: int, member_id: str,
    instance_id: str | None, partitions: list[CommitPartition], *,
    expire_timestamp: int = NO_EXPIRY, group_id_not_found: bool = False,
) -> list[GroupError]:
    """One error per partition. `group_id_not_found`: OffsetCommit v9+, where a commit with a
    generation to a group that does not exist is GROUP_ID_NOT_FOUND (ILLEGAL_GENERATION before)."""
    error = _check_commit(coordinator, group_id, generation, member_id, instance_id,
                          group_id_not_found)
    if error is not None:
        return [error] * len(partitions)
    group = coordinator.groups.get(group_id)
    created = group is None
    if group is None:  # a simple (assign-only or admin) commit creates its group
        group = coordinator.groups[group_id] = Group(group_id, state_timestamp=coordinator.now_ms())
    elif member_id in group.members:
        coordinator.restart_session(group.members[member_id])
    now = coordinator.now_ms()
    limit = coordinator.config.offset_metadata_max_bytes
    results: list[GroupError] = []
    records = []
    accepted: list[tuple[tuple[str, int], OffsetValue]] = []
    for p in partitions:
        metadata = p.metadata or ""
        if len(metadata.encode()) > limit:
            results.append(E.OFFSET_METADATA_TOO_LARGE)
            continue
        committed_at = now if p.commit_timestamp == -1 else p.commit_timestamp
        value = OffsetValue(p.offset, p.leader_epoch, metadata, committed_at, expire_timestamp)
        records.append(offset_record(OffsetKey(group_id, p.topic, p.partition), value))
        accepted.append(((p.topic, p.partition), value))
        results.append(E.NONE)
    if not records:
        return results
    keys = [key for key, _ in accepted]
    group.pending_commits.update(keys)
    try:
        code = await coordinator.log.append(coordinator.partition_of(group_id), records)
    finally:
        group.pending_commits.subtract(keys)
        group.pending_commits += Counter()  # drop the zero counts
    written = append_error(code, commit=True)
    live = coordinator.groups.get(group_id)
    if written == E.NONE and live is group:
        for key, value in accepted:
            group.offsets[key] = value
    elif written != E.NONE:
        results = [written if r == E.NONE else r for r in results]
        if created and live is group and group.is_empty and not group.offsets:
            del coordinator.groups[group_id]
    return results


def _check_commit(coordinator: GroupCoordinator, group_id: str, generation: int,
                  member_id: str, instance_id: str | None,
                  group_id_not_found: bool) -> GroupError | None:
    if not group_id:
        return E.INVALID_GROUP_ID
    error = coordinator.coordinator_error(group_id)
    if error is not None:
        return error
    group = coordinator.groups.get(group_id)
    if group is None:
        if generation < 0:
            return None
        return E.GROUP_ID_NOT_FOUND if group_id_not_found else E.ILLEGAL_GENERATION
    if group.state is S.DEAD:
        return E.COORDINATOR_NOT_AVAILABLE
    if group.consumer is not None:  # KIP-848: by member epoch (v9+: GROUP_ID_NOT_FOUND's)
        return commit_error(group, generation, member_id, group_id_not_found)
    if generation < 0 and group.state is S.EMPTY and not member_id and instance_id is None:
        return None  # admin tools and assign-only consumers
    if generation >= 0 or member_id or instance_id is not None:
        error = coordinator.validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        if group.state is S.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return None
    return E.UNKNOWN_MEMBER_ID


def fetch_offsets(
    coordinator: GroupCoordinator, group_id: str | None,
    partitions: list[tuple[str, int]] | None,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[GroupError, list[FetchedOffset]]:
    """(group-level error, offsets); `partitions` None = every committed offset of the group.
    A partition without a commit (or an unknown group) is offset -1, not an error. `member`:
    OffsetFetch v9's member id and epoch, checked against a consumer-protocol group."""
    if group_id is None:
        return E.INVALID_GROUP_ID, []
    error = coordinator.coordinator_error(group_id)
    if error is not None:
        return error, []
    group = coordinator.groups.get(group_id)
    if group is not None and group.consumer is not None:
        error = fetch_error(group, *member)
        if error is not None:
            return error, []
    offsets = group.offsets if group is not None else {}
    if partitions is None:
        partitions = sorted(offsets)
    out = []
    for topic, partition in partitions:
        value = offsets.get((topic, partition))
        if value is None:
            out.append(FetchedOffset(topic, partition))
        else:
            out.append(FetchedOffset(topic, partition, value.offset, value.leader_epoch,
                                     value.metadata))
    return E.NONE, out
