"""ListGroups, DescribeGroups, DeleteGroups (spec §3.9) and OffsetDelete (KIP-496) on the
coordinator's groups."""

from __future__ import annotations

from dataclasses import dataclass

from broker.group.consumer_protocol.heartbeat_request import group_tombstones
from broker.group.coordinator import GroupCoordinator, PartitionStatus
from broker.group.errors import GroupError, append_error
from broker.group.model import GroupState
from broker.group.records import GroupKey, OffsetKey, group_record, offset_record

E = GroupError
S = GroupState


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # "consumer": a KIP-848 group


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    error: int = 0
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[MemberDescription, ...] = ()


def list_groups(coordinator: GroupCoordinator,
                states: set[str] | None = None) -> tuple[GroupError, list[GroupListing]]:
    """The groups of the partitions this broker leads (loading ones make the error
    COORDINATOR_LOAD_IN_PROGRESS, with the rest listed). `states`: lower-case state names."""
    loading = any(s is PartitionStatus.LOADING for s in coordinator.partitions.values())
    out = []
    for group_id, group in sorted(coordinator.groups.items()):
        if group.state is S.DEAD:
            continue
        state = group.consumer.state_name() if group.consumer is not None else group.state.value
        if states and state.lower() not in states:
            continue
        out.append(GroupListing(group_id, group.protocol_type or "", state,
                                "classic" if group.consumer is None else "consumer"))
    return (E.COORDINATOR_LOAD_IN_PROGRESS if loading else E.NONE), out


def describe_group(coordinator: GroupCoordinator, group_id: str | None) -> GroupDescription:
    if group_id is None:
        return GroupDescription("", E.INVALID_GROUP_ID)
    error = coordinator.coordinator_error(group_id)
    if error is not None:
        return GroupDescription(group_id, error)
    group = coordinator.groups.get(group_id)
    if group is None:
        return GroupDescription(group_id)  # Kafka: no error, state Dead
    stable = group.state is S.STABLE
    protocol = group.protocol_name or ""
    members = tuple(
        MemberDescription(m.member_id, m.instance_id, m.client_id, m.client_host,
                          m.metadata_for(protocol) if stable else b"",
                          m.assignment if stable else b"")
        for m in group.members.values())
    return GroupDescription(group_id, E.NONE, group.state.value, group.protocol_type or "",
                            protocol if stable else "", members)


async def delete_group(coordinator: GroupCoordinator, group_id: str) -> GroupError:
    """Tombstones for an Empty group and its offsets (NON_EMPTY_GROUP while it has members or
    a commit in flight, GROUP_ID_NOT_FOUND when there is no such group)."""
    if not group_id:
        return E.INVALID_GROUP_ID
    error = coordinator.coordinator_error(group_id)
    if error is not None:
        return error
    group = coordinator.groups.get(group_id)
    if group is None or group.state is S.DEAD:
        return E.GROUP_ID_NOT_FOUND
    if group.state is not S.EMPTY or group.pending_commits:
        # A commit in flight would land after our tombstones and bring the group back at the
        # next load: refused as a non-empty group (the client may retry), not tombstoned
        # ahead, so an acknowledged commit is never dropped.
        return E.NON_EMPTY_GROUP
    records = [group_record(GroupKey(group_id), None)]
    records += [offset_record(OffsetKey(group_id, topic, partition), None)
                for topic, partition in sorted(group.offsets)]
    if group.consumer is not None:  # a KIP-848 group's records go too, its epoch last
        records += group_tombstones(group_id, group.consumer)
    group.state = S.DEAD  # no commit may slip in while the tombstones are written
    code = await coordinator.log.append(coordinator.partition_of(group_id), records)
    written = append_error(code, commit=False)
    if coordinator.groups.get(group_id) is group:
        if written == E.NONE:
            del coordinator.groups[group_id]
        else:
            group.state = S.EMPTY
    return written


async def delete_offsets(coordinator: GroupCoordinator, group_id: str,
                         partitions: list[tuple[str, int]]
                         ) -> tuple[GroupError, dict[tuple[str, int], GroupError]]:
    """Kafka's handleDeleteOffsets: (group-level error, each partition's error). An Empty
    group loses any asked offset; a live consumer group only those of topics no member
    subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the others); a live group of another
    protocol type is NON_EMPTY_GROUP. Deleting a partition without a committed offset is
    not an error. Tombstones are replicated before the offsets go from memory; the group
    itself goes too when an Empty group is left without offsets (cleanupGroupMetadata)."""
    if not group_id:
        return E.INVALID_GROUP_ID, {}
    error = coordinator.coordinator_error(group_id)
    if error is not None:
        return error, {}
    group = coordinator.groups.get(group_id)
    if group is None or group.state is S.DEAD:
        return E.GROUP_ID_NOT_FOUND, {}
    results: dict[tuple[str, int], GroupError] = {}
    if group.state is S.EMPTY:
        eligible = list(partitions)
    elif group.protocol_type == "consumer":
        subscribed = group.subscribed_topics() or set()
        eligible = [tp for tp in partitions if tp[0] not in subscribed]
        results = {tp: E.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp[0] in subscribed}
    else:
        return E.NON_EMPTY_GROUP, {}
    if any(tp in group.pending_commits for tp in eligible):
        # That commit's record would land after our tombstone: refused whole, as DeleteGroups
        # refuses a group with a commit in flight; the client may retry.
        return E.NON_EMPTY_GROUP, {}
    chosen = {tp: group.offsets[tp] for tp in dict.fromkeys(eligible) if tp in group.offsets}
    leaves_empty = group.state is S.EMPTY and not group.pending_members \
        and len(chosen) == len(group.offsets)
    if chosen:
        records = [offset_record(OffsetKey(group_id, topic, p), None) for topic, p in chosen]
        if leaves_empty:
            records.append(group_record(GroupKey(group_id), None))
            if group.consumer is not None:
                records += group_tombstones(group_id, group.consumer)
            group.state = S.DEAD  # as DeleteGroups: no commit slips in meanwhile
        code = await coordinator.log.append(coordinator.partition_of(group_id), records)
        written = append_error(code, commit=False)
        live = coordinator.groups.get(group_id) is group
        if leaves_empty and live and group.state is S.DEAD:
            group.state = S.EMPTY
        if written != E.NONE:
            return written, {}
        if live:
            for tp, value in chosen.items():
                if group.offsets.get(tp) is value:
                    del group.offsets[tp]
            if leaves_empty and group.is_empty and not group.offsets:
                group.state = S.DEAD
                del coordinator.groups[group_id]
    results.update({tp: E.NONE for tp in eligible})
    return E.NONE, results
