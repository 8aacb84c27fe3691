"""The consumer protocol's records of a `__consumer_offsets` partition back into groups, in
log order, as Kafka's GroupMetadataManager.replay: the last record of a key wins, a tombstone
of member metadata removes the member, one of the group epoch removes the group."""

from __future__ import annotations

from broker.group.consumer_protocol.model import ConsumerGroupState, ConsumerMember
from broker.group.consumer_protocol.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerKey,
    decode_current_assignment,
    decode_epoch,
    decode_member_metadata,
    decode_partition_metadata,
    decode_target_assignment,
)


class ConsumerReplay:
    """Consumer groups as the records seen so far make them (group id -> state)."""

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroupState] = {}

    def apply(self, key: ConsumerKey, value: bytes | None) -> None:
        """RecordFormatError for a value that does not decode."""
        if key.type == GROUP_METADATA:
            if value is None:
                self.groups.pop(key.group, None)
            else:
                self._group(key.group).group_epoch = decode_epoch(value)
            return
        if value is None and key.group not in self.groups:
            return
        state = self._group(key.group)
        if key.type == PARTITION_METADATA:
            state.subscribed = {} if value is None else decode_partition_metadata(value)
        elif key.type == TARGET_ASSIGNMENT_METADATA:
            state.assignment_epoch = 0 if value is None else decode_epoch(value)
        elif key.type == TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                state.target.pop(key.member, None)
            else:
                state.target[key.member] = decode_target_assignment(value)
        elif key.type == MEMBER_METADATA:
            if value is None:
                state.members.pop(key.member, None)
            else:
                self._member(state, key.member).apply_metadata(decode_member_metadata(value))
        elif key.type == CURRENT_MEMBER_ASSIGNMENT:
            member = self._member(state, key.member)
            if value is None:
                member.assigned, member.pending_revocation = {}, {}
            else:
                member.apply_current(decode_current_assignment(value))

    def _group(self, group_id: str) -> ConsumerGroupState:
        state = self.groups.get(group_id)
        if state is None:
            state = self.groups[group_id] = ConsumerGroupState()
        return state

    @staticmethod
    def _member(state: ConsumerGroupState, member_id: str) -> ConsumerMember:
        member = state.members.get(member_id)
        if member is None:
            member = state.members[member_id] = ConsumerMember(member_id)
        return member

    def finished(self) -> dict[str, ConsumerGroupState]:
        """The groups, with the indexes rebuilt that records do not carry."""
        for state in self.groups.values():
            state.static_members = {m.instance_id: m.member_id for m in state.members.values()
                                    if m.instance_id is not None}
            state.rebuild_partition_epochs()
        return self.groups
