"""ListGroups, DescribeGroups and DeleteGroups on the coordinator's groups (spec §3.9)."""

from __future__ import annotations

from dataclasses import dataclass

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
        if states and group.state.value.lower() not in states:
            continue
        out.append(GroupListing(group_id, group.protocol_type or "", group.state.value))
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
    group.state = S.DEAD  # no commit may slip in while the tombstones are written
    code = await coordinator.log.append(coordinator.partition_of(group_id), records)
    written = append_error(code, commit=False)
    if coordinator.groups.get(group_id) is group:
        if written == E.NONE:
            del coordinator.groups[group_id]
        else:
            group.state = S.EMPTY
    return written
