"""GroupCoordinator: Kafka's classic group state machine (GroupCoordinator.scala) for the groups
of the `__consumer_offsets` partitions this broker leads (reference kafka-groups-and-admin.md
§2-§3). Offsets are offsets.py's, the inspection APIs admin.py's, expiry retention.py's, the
replay of a partition loader.py's. The class is split along its seams (issue 32): the state,
partitions' loading and unloading, the join phase, members and sessions in coordinator_core.py,
the JoinGroup requests in join_group.py; SyncGroup, Heartbeat, LeaveGroup and the timers here.

No sockets and no clock of its own: requests come in as calls, the time is `now_ms()`, timers
are deadlines that `tick()` fires (a driver calls it at `next_deadline()`; unit tests advance a
fake clock), and every write goes through a GroupLog whose append answers once the record is
replicated (acks=all) or failed. A request parked in JoinGroup or SyncGroup is a future the
state machine completes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker.group.config import GroupConfig
from broker.group.coordinator_core import NEVER, E, GroupLog, PartitionStatus, S, log
from broker.group.errors import GroupError
from broker.group.join_group import JoinGroupHandling
from broker.group.model import Group, SyncResult

# Names callers import from here (the coordinator's parts live in coordinator_core.py and
# join_group.py).
__all__ = ["NEVER", "GroupCoordinator", "GroupLog", "PartitionStatus"]


class GroupCoordinator(JoinGroupHandling):
    def __init__(self, config: GroupConfig, group_log: GroupLog,
                 now_ms: Callable[[], int]) -> None:
        self.config = config
        self.log = group_log
        self.now_ms = now_ms
        self.groups: dict[str, Group] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.on_deadline_set: Callable[[], None] = lambda: None  # the timer driver's wake-up
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- SyncGroup ----------------------------------------------------------------------

    async def sync_group(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        if not group_id:
            return SyncResult(E.INVALID_GROUP_ID)
        error = self.coordinator_error(group_id)
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            return SyncResult(E.REBALANCE_IN_PROGRESS)  # older clients do not expect 14
        if error is not None:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.state is S.DEAD:
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            return SyncResult(error)
        if generation != group.generation:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        if group.state is S.EMPTY:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.state is S.PREPARING_REBALANCE:
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        if group.state is S.STABLE:
            self.restart_session(member)
            return SyncResult(E.NONE, group.protocol_type, group.protocol_name,
                              member.assignment)
        self._answer_sync(member, SyncResult(E.REBALANCE_IN_PROGRESS))
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            # Members the leader left out get an empty assignment (scenario 11).
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            self._background(self._install_assignment(group, group.generation, full))
        return await waiter

    async def _install_assignment(self, group: Group, generation: int,
                                  assignment: dict[str, bytes]) -> None:
        error = await self._store_group(group, assignment)
        if self.groups.get(group.group_id) is not group \
                or group.state is not S.COMPLETING_REBALANCE or group.generation != generation:
            return  # a rebalance or an unload overtook the write
        if error != E.NONE:
            self._reset_assignments(group, error)
            self._maybe_prepare_rebalance(group, f"persisting the assignment failed: {error.name}")
            return
        for member_id, data in assignment.items():
            if member_id in group.members:
                group.members[member_id].assignment = data
        for member in group.members.values():
            if member.awaiting_sync:
                self._answer_sync(member, SyncResult(E.NONE, group.protocol_type,
                                                     group.protocol_name, member.assignment))
                self.restart_session(member)
        self._transition(group, S.STABLE)
        log.info("group %s: stable in generation %d", group.group_id, generation)

    # ---- Heartbeat and LeaveGroup -------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> GroupError:
        if not group_id:
            return E.INVALID_GROUP_ID
        error = self.coordinator_error(group_id)
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            return E.NONE  # Kafka answers blindly while loading
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        if group.state is S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self.restart_session(group.members[member_id])
        if group.state is S.PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE  # Stable, or CompletingRebalance (KAFKA-10134)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]
                    ) -> tuple[GroupError, list[GroupError]]:
        """(group-level error, one error per (member id, instance id) asked)."""
        if not group_id:
            return E.INVALID_GROUP_ID, []
        error = self.coordinator_error(group_id)
        if error is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            results.append(self._leave_one(group, member_id, instance_id))
        return E.NONE, results

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None) -> GroupError:
        if not member_id and instance_id is not None:
            # An admin removing a static member by its instance id (KIP-345).
            current = group.static_members.get(instance_id)
            if current is None or current not in group.members:
                return E.UNKNOWN_MEMBER_ID
            member_id = current
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            self._try_complete_join(group)
            return E.NONE
        else:
            error = self.validate_member(group, member_id, instance_id)
            if error is not None:
                return error
        self._remove_member(group, group.members[member_id], "left the group")
        return E.NONE

    # ---- timers -------------------------------------------------------------------------

    def next_deadline(self) -> int:
        """The earliest deadline of any timer (NEVER if none runs)."""
        earliest = NEVER
        for group in self.groups.values():
            for deadline in (group.join_deadline, group.sync_deadline):
                if deadline is not None:
                    earliest = min(earliest, deadline)
            for deadline in group.pending_members.values():
                earliest = min(earliest, deadline)
            for member in group.members.values():
                earliest = min(earliest, member.heartbeat_deadline)
        return earliest

    def tick(self) -> None:
        """Fire every timer whose deadline has passed."""
        now = self.now_ms()
        for group in list(self.groups.values()):
            if self.groups.get(group.group_id) is not group or group.state is S.DEAD:
                continue
            self._expire_pending(group, now)
            self._expire_sessions(group, now)
            if group.join_deadline is not None and now >= group.join_deadline \
                    and group.state is S.PREPARING_REBALANCE:
                self._join_deadline_passed(group)
            if group.sync_deadline is not None and now >= group.sync_deadline:
                self._sync_deadline_passed(group)

    def _expire_pending(self, group: Group, now: int) -> None:
        expired = [mid for mid, deadline in group.pending_members.items() if now >= deadline]
        for member_id in expired:
            del group.pending_members[member_id]
        if expired:
            self._try_complete_join(group)

    def _expire_sessions(self, group: Group, now: int) -> None:
        for member in list(group.members.values()):
            if now < member.heartbeat_deadline:
                continue
            # Kafka's shouldKeepAlive: a member parked in JoinGroup (unless new) or SyncGroup
            # waits for the phase to end; the phase's own deadline bounds it.
            if (member.awaiting_join and not member.is_new) or member.awaiting_sync:
                member.heartbeat_deadline = NEVER
                continue
            self._remove_member(group, member, "session timed out"
                                if not member.is_new else "never completed its join")

    def _sync_deadline_passed(self, group: Group) -> None:
        group.sync_deadline = None
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member, "sent no SyncGroup in time", rebalance=False)
        group.pending_sync.clear()
        self._prepare_rebalance(group, "members did not sync in time")
