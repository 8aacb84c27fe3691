"""The group coordinator's state and the rebalance every request drives (GroupCoordinator,
broker/group/coordinator.py): which `__consumer_offsets` partitions this broker serves (loading,
unloading), the join phase (preparing a rebalance, completing the join into a new generation),
members and their sessions, the answers to parked requests, and the group record's write.
The coordinator is split along its seams (issue 32): this base, the JoinGroup requests
(join_group.py), and SyncGroup, Heartbeat, LeaveGroup and the timers (coordinator.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Iterable
from enum import Enum
from typing import Protocol

from broker.group.config import GroupConfig
from broker.group.errors import GroupError, append_error
from broker.group.loader import replay
from broker.group.model import Group, GroupState, JoinResult, Member, SyncResult
from broker.group.placement import partition_for
from broker.group.records import GroupKey, GroupValue, MemberValue, Records, group_record

# The coordinator's one logger, whichever of its modules logs.
log = logging.getLogger("broker.group.coordinator")

NEVER = 2**62  # a deadline that does not fire
E = GroupError
S = GroupState


class GroupLog(Protocol):
    async def append(self, partition: int, records: Records) -> int:
        """Kafka's error code of an acks=all append of `records` to the partition."""
        ...


class PartitionStatus(Enum):
    LOADING = "loading"
    ACTIVE = "active"


class CoordinatorCore:
    """What GroupCoordinator.__init__ sets, and the parts every request shares."""

    config: GroupConfig
    log: GroupLog
    now_ms: Callable[[], int]
    groups: dict[str, Group]
    partitions: dict[int, PartitionStatus]
    on_deadline_set: Callable[[], None]  # the timer driver's wake-up
    _tasks: set[asyncio.Task[None]]

    def _background(self, work: Coroutine[None, None, None]) -> None:
        """Writes a request does not wait for (a group record another answer depends on)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- partitions: loading, unloading, ownership --------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def coordinator_error(self, group_id: str) -> GroupError | None:
        """NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, or None: this broker serves it."""
        status = self.partitions.get(self.partition_of(group_id))
        if status is None:
            return E.NOT_COORDINATOR
        if status is PartitionStatus.LOADING:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def begin_loading(self, partition: int) -> None:
        """This broker leads the partition from now on; its groups are not served until
        `finish_loading`. Anything of an earlier leadership is dropped first."""
        self.unload(partition)
        self.partitions[partition] = PartitionStatus.LOADING

    def finish_loading(self, partition: int, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Replay the partition's records (log order) into its groups (spec §2.2)."""
        if self.partitions.get(partition) is not PartitionStatus.LOADING:
            return  # leadership moved on while the log was read
        groups, skipped = replay(records, self.now_ms(), f"__consumer_offsets-{partition}")
        self.groups.update(groups)
        self.partitions[partition] = PartitionStatus.ACTIVE
        log.info("loaded __consumer_offsets-%d: %d group(s)%s", partition, len(groups),
                 f", {skipped} record(s) skipped" if skipped else "")
        self.on_deadline_set()

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: its groups die, parked requests end
        with NOT_COORDINATOR."""
        if self.partitions.pop(partition, None) is None:
            return
        for group_id in [g for g in self.groups if self.partition_of(g) == partition]:
            group = self.groups.pop(group_id)
            group.state = S.DEAD
            for member in group.members.values():
                self._answer_join(member, JoinResult(E.NOT_COORDINATOR, member_id=member.member_id))
                self._answer_sync(member, SyncResult(E.NOT_COORDINATOR))
        log.info("unloaded __consumer_offsets-%d", partition)

    # ---- the join phase -----------------------------------------------------------------

    def _current_generation(self, group: Group, member: Member) -> JoinResult:
        return JoinResult(
            E.NONE, group.generation, group.protocol_type, group.protocol_name,
            group.leader_id or "", member.member_id,
            self._member_list(group) if member.member_id == group.leader_id else ())

    def _member_list(self, group: Group) -> tuple[tuple[str, str | None, bytes], ...]:
        protocol = group.protocol_name or ""
        return tuple((m.member_id, m.instance_id, m.metadata_for(protocol))
                     for m in group.members.values())

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self._reset_assignments(group, E.REBALANCE_IN_PROGRESS)
        group.sync_deadline = None
        group.pending_sync.clear()
        now = self.now_ms()
        if group.state is S.EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            group.join_deadline = now + delay
            group.initial_rebalance_budget_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.in_initial_delay = True
            group.new_member_added = False
        else:
            group.join_deadline = now + group.rebalance_timeout_ms()
            group.in_initial_delay = False
        self._transition(group, S.PREPARING_REBALANCE)
        log.info("group %s: preparing to rebalance in generation %d (%s)", group.group_id,
                 group.generation, reason)
        self.on_deadline_set()
        self._try_complete_join(group)  # everyone may be parked already (or nobody left)

    def _try_complete_join(self, group: Group) -> None:
        if group.state is S.PREPARING_REBALANCE and not group.in_initial_delay \
                and group.all_joined():
            self._complete_join(group)

    def _join_deadline_passed(self, group: Group) -> None:
        if group.in_initial_delay and group.new_member_added \
                and group.initial_rebalance_budget_ms > 0:
            # Members still arriving: wait once more, within the rebalance timeout budget.
            delay = min(self.config.initial_rebalance_delay_ms,
                        group.initial_rebalance_budget_ms)
            group.initial_rebalance_budget_ms = max(group.initial_rebalance_budget_ms - delay, 0)
            group.new_member_added = False
            group.join_deadline = self.now_ms() + delay
            return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, then start the
        next generation (or wait another timeout when nobody rejoined)."""
        group.join_deadline = None
        group.in_initial_delay = False
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            if member.instance_id is None:
                self._remove_member(group, member, "did not rejoin in time", rebalance=False)
        if group.members and not self._elect_joined_leader(group):
            group.join_deadline = self.now_ms() + group.rebalance_timeout_ms()
            self.on_deadline_set()
            return
        group.generation += 1
        now = self.now_ms()
        if not group.members:
            group.protocol_name = None
            self._transition(group, S.EMPTY)
            log.info("group %s: generation %d is empty", group.group_id, group.generation)
            self._background(self._store_empty(group))
            return
        group.protocol_name = group.select_protocol()
        self._transition(group, S.COMPLETING_REBALANCE)
        log.info("group %s: generation %d with %d member(s), protocol %s, leader %s",
                 group.group_id, group.generation, len(group.members), group.protocol_name,
                 group.leader_id)
        for member in group.members.values():
            if member.awaiting_join:
                self._answer_join(member, self._current_generation(group, member))
            self.restart_session(member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline = now + group.rebalance_timeout_ms()  # KAFKA-12890
        self.on_deadline_set()

    def _elect_joined_leader(self, group: Group) -> bool:
        leader = group.members.get(group.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in group.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        group.leader_id = joined.member_id
        return True

    async def _store_empty(self, group: Group) -> None:
        error = await self._store_group(group, {})
        if error != E.NONE:
            log.warning("group %s: persisting the empty generation %d failed: %s",
                        group.group_id, group.generation, error.name)

    def _reset_assignments(self, group: Group, error: GroupError) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                self._answer_sync(member, SyncResult(error))
                # Its session was held (NEVER) while it waited; as Kafka's propagateAssignment
                # it restarts now, or a member that crashed here would never time out.
                self.restart_session(member)

    # ---- members and sessions -----------------------------------------------------------

    def validate_member(self, group: Group, member_id: str,
                         instance_id: str | None) -> GroupError | None:
        """Kafka's validateCurrentMember."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current != member_id:
                return E.FENCED_INSTANCE_ID if current is not None else E.UNKNOWN_MEMBER_ID
            return None if member_id in group.members else E.UNKNOWN_MEMBER_ID
        return None if member_id in group.members else E.UNKNOWN_MEMBER_ID

    def restart_session(self, member: Member) -> None:
        member.heartbeat_deadline = self.now_ms() + member.session_timeout_ms
        self.on_deadline_set()

    def _remove_member(self, group: Group, member: Member, reason: str,
                       rebalance: bool = True) -> None:
        log.info("group %s: removing member %s: %s", group.group_id, member.member_id, reason)
        self._answer_join(member, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        self._answer_sync(member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.members.pop(member.member_id, None)
        group.pending_sync.discard(member.member_id)
        if member.instance_id is not None \
                and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)
        if not rebalance:
            return
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} {reason}")
        elif group.state is S.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _answer_join(self, member: Member, result: JoinResult) -> None:
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(result)
        member.join_waiter = None

    def _answer_sync(self, member: Member, result: SyncResult) -> None:
        if member.sync_waiter is not None and not member.sync_waiter.done():
            member.sync_waiter.set_result(result)
        member.sync_waiter = None

    def _transition(self, group: Group, state: GroupState) -> None:
        group.state = state
        group.state_timestamp = self.now_ms()

    # ---- writes -------------------------------------------------------------------------

    async def _store_group(self, group: Group, assignment: dict[str, bytes]) -> GroupError:
        value = group.to_value(self.now_ms())
        if assignment:
            value = GroupValue(value.protocol_type, value.generation, value.protocol,
                               value.leader, value.current_state_timestamp,
                               tuple(_with_assignment(m, assignment.get(m.member_id, b""))
                                     for m in value.members))
        code = await self.log.append(self.partition_of(group.group_id),
                                     [group_record(GroupKey(group.group_id), value)])
        return append_error(code, commit=False)


def _with_assignment(member: MemberValue, assignment: bytes) -> MemberValue:
    return dataclasses.replace(member, assignment=assignment)
