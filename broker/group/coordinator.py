"""GroupCoordinator: Kafka's classic group state machine (GroupCoordinator.scala) for the groups
of the `__consumer_offsets` partitions this broker leads (reference kafka-groups-and-admin.md
§2-§3). Offsets are offsets.py's, the inspection APIs admin.py's, expiry retention.py's, the
replay of a partition loader.py's.

No sockets and no clock of its own: requests come in as calls, the time is `now_ms()`, timers
are deadlines that `tick()` fires (a driver calls it at `next_deadline()`; unit tests advance a
fake clock), and every write goes through a GroupLog whose append answers once the record is
replicated (acks=all) or failed. A request parked in JoinGroup or SyncGroup is a future the
state machine completes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable
from enum import Enum
from typing import Protocol

from broker.group.config import GroupConfig
from broker.group.errors import GroupError, append_error
from broker.group.loader import replay
from broker.group.model import Group, GroupState, JoinResult, Member, SyncResult
from broker.group.placement import partition_for
from broker.group.records import GroupKey, GroupValue, MemberValue, Records, group_record

log = logging.getLogger(__name__)

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


class GroupCoordinator:
    def __init__(self, config: GroupConfig, group_log: GroupLog,
                 now_ms: Callable[[], int]) -> None:
        self.config = config
        self.log = group_log
        self.now_ms = now_ms
        self.groups: dict[str, Group] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.on_deadline_set: Callable[[], None] = lambda: None  # the timer driver's wake-up
        self._tasks: set[asyncio.Task[None]] = set()

    def _background(self, work: Coroutine[None, None, None]) -> None:
        """Writes a request does not wait for (a group record another answer depends on)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- partitions: loading, unloading, ownership ----------------------------------------

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

    # ---- JoinGroup --------------------------------------------------------------------------

    async def join_group(
        self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
        protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
        client_id: str, client_host: str, require_known_member: bool,
        supports_skip_assignment: bool = False,
    ) -> JoinResult:
        if not group_id:
            return JoinResult(E.INVALID_GROUP_ID, member_id=member_id)
        error = self.coordinator_error(group_id)
        if error is not None:
            return JoinResult(error, member_id=member_id)
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 (KAFKA-8653)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, state_timestamp=self.now_ms())
        known = member_id in group.members or member_id in group.pending_members
        if not known and len(group.members) + len(group.pending_members) >= self.config.max_size:
            if group.is_empty and not group.offsets:
                del self.groups[group_id]
            return JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id="")
        if group.state is S.DEAD:
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports(protocol_type, protocols):
            if group.is_empty and group.protocol_type is None and not group.offsets:
                del self.groups[group_id]  # nothing was created for it
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        request = _JoinRequest(protocol_type, protocols, session_timeout_ms,
                               rebalance_timeout_ms, client_id, client_host,
                               supports_skip_assignment)
        if not member_id:
            return await self._join_new_member(group, instance_id, request, require_known_member)
        return await self._join_known_member(group, member_id, instance_id, request)

    async def _join_new_member(self, group: Group, instance_id: str | None,
                               request: _JoinRequest, require_known_member: bool) -> JoinResult:
        prefix = instance_id if instance_id is not None else request.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id in group.members:
                return await self._replace_static_member(group, instance_id, old_id, new_id,
                                                         request)
            return await self._add_member_and_rebalance(group, new_id, instance_id, request)
        if require_known_member:
            # KIP-394: the client rejoins with this id; until then it is only pending, and
            # forgotten after a session timeout (KAFKA-7610).
            group.pending_members[new_id] = self.now_ms() + request.session_timeout_ms
            self.on_deadline_set()
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id)
        return await self._add_member_and_rebalance(group, new_id, None, request)

    async def _join_known_member(self, group: Group, member_id: str, instance_id: str | None,
                                 request: _JoinRequest) -> JoinResult:
        if member_id in group.pending_members:
            return await self._add_member_and_rebalance(group, member_id, instance_id, request)
        error = self.validate_member(group, member_id, instance_id)
        if error is not None:
            return JoinResult(error, member_id=member_id)
        member = group.members[member_id]
        if group.state is S.PREPARING_REBALANCE:
            return await self._update_member_and_rebalance(group, member, request)
        if group.state is S.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                return self._current_generation(group, member)  # a lost JoinGroup answer
            return await self._update_member_and_rebalance(group, member, request)
        if group.state is S.STABLE:
            if member_id == group.leader_id or not member.matches(request.protocols):
                return await self._update_member_and_rebalance(group, member, request)
            return self._current_generation(group, member)
        return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)  # Empty (or Dead)

    def _current_generation(self, group: Group, member: Member) -> JoinResult:
        return JoinResult(
            E.NONE, group.generation, group.protocol_type, group.protocol_name,
            group.leader_id or "", member.member_id,
            self._member_list(group) if member.member_id == group.leader_id else ())

    def _member_list(self, group: Group) -> tuple[tuple[str, str | None, bytes], ...]:
        protocol = group.protocol_name or ""
        return tuple((m.member_id, m.instance_id, m.metadata_for(protocol))
                     for m in group.members.values())

    async def _add_member_and_rebalance(self, group: Group, member_id: str,
                                        instance_id: str | None,
                                        request: _JoinRequest) -> JoinResult:
        member = Member(member_id, instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms,
                        request.protocol_type, list(request.protocols), is_new=True)
        if group.state is S.PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True  # extends the initial delay (KIP-134)
        if group.is_empty:
            group.protocol_type = request.protocol_type
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = member_id
        group.members[member_id] = member
        group.pending_members.pop(member_id, None)
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        # A new member that never completes its join is dropped after 5 minutes (KAFKA-9752).
        member.heartbeat_deadline = self.now_ms() + self.config.new_member_join_timeout_ms
        self.on_deadline_set()
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined")
        self._try_complete_join(group)
        return await waiter

    async def _update_member_and_rebalance(self, group: Group, member: Member,
                                           request: _JoinRequest) -> JoinResult:
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        # A re-sent JoinGroup replaces a parked one; the old request gets an answer that
        # makes a client that still waits on it simply rejoin.
        self._answer_join(member, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._try_complete_join(group)
        return await waiter

    async def _replace_static_member(self, group: Group, instance_id: str, old_id: str,
                                     new_id: str, request: _JoinRequest) -> JoinResult:
        """KIP-345: a static member restarted; the new id takes over the old member (spec
        §3.8), which is fenced (KAFKA-8500)."""
        old_leader = group.leader_id
        member = group.members.pop(old_id)
        self._answer_join(member, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
        self._answer_sync(member, SyncResult(E.FENCED_INSTANCE_ID))
        saved = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                 member.client_id, member.client_host)
        member.member_id = new_id
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms  # KAFKA-14009
        member.session_timeout_ms = request.session_timeout_ms
        member.client_id, member.client_host = request.client_id, request.client_host
        self.restart_session(member)
        if group.state is S.PREPARING_REBALANCE:
            waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
            member.join_waiter = waiter
            self._try_complete_join(group)
            return await waiter
        if group.state is S.STABLE and group.protocol_name == group.select_protocol():
            # Persist the new member id (KAFKA-10284), then answer the current generation.
            error = await self._store_group(group, {m.member_id: m.assignment
                                                    for m in group.members.values()})
            if self.groups.get(group.group_id) is not group:
                return JoinResult(E.NOT_COORDINATOR, member_id=new_id)
            if error != E.NONE:
                current = group.members.pop(new_id, None)
                if current is not None:
                    (current.protocols, current.rebalance_timeout_ms, current.session_timeout_ms,
                     current.client_id, current.client_host) = saved
                    current.member_id = old_id
                    group.members[old_id] = current
                    group.static_members[instance_id] = old_id
                    if group.leader_id == new_id:
                        group.leader_id = old_id
                return JoinResult(error, member_id=new_id)
            is_leader = group.leader_id == new_id
            if request.supports_skip_assignment:
                return JoinResult(E.NONE, group.generation, group.protocol_type,
                                  group.protocol_name, group.leader_id or "", new_id,
                                  self._member_list(group) if is_leader else (),
                                  skip_assignment=is_leader)
            # Below v9 the old leader id keeps a restarted leader from assigning.
            return JoinResult(E.NONE, group.generation, group.protocol_type,
                              group.protocol_name, old_leader or "", new_id)
        # CompletingRebalance (KAFKA-9801), or Stable with a protocol change: rebalance.
        rejoined: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = rejoined
        self._prepare_rebalance(group, f"static member {instance_id} rejoined as {new_id}")
        self._try_complete_join(group)
        return await rejoined

    # ---- the join phase ---------------------------------------------------------------------

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

    # ---- SyncGroup ----------------------------------------------------------------------------

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

    def _reset_assignments(self, group: Group, error: GroupError) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                self._answer_sync(member, SyncResult(error))
                # Its session was held (NEVER) while it waited; as Kafka's propagateAssignment
                # it restarts now, or a member that crashed here would never time out.
                self.restart_session(member)

    # ---- Heartbeat and LeaveGroup -----------------------------------------------------------

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

    # ---- members and sessions ---------------------------------------------------------------

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

    # ---- timers ------------------------------------------------------------------------------

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

    # ---- writes ------------------------------------------------------------------------------

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


class _JoinRequest:
    __slots__ = ("client_host", "client_id", "protocol_type", "protocols",
                 "rebalance_timeout_ms", "session_timeout_ms", "supports_skip_assignment")

    def __init__(self, protocol_type: str, protocols: list[tuple[str, bytes]],
                 session_timeout_ms: int, rebalance_timeout_ms: int, client_id: str,
                 client_host: str, supports_skip_assignment: bool) -> None:
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client_id = client_id
        self.client_host = client_host
        self.supports_skip_assignment = supports_skip_assignment


def _with_assignment(member: MemberValue, assignment: bytes) -> MemberValue:
    return dataclasses.replace(member, assignment=assignment)
