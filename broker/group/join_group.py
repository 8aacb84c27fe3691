"""JoinGroup (Kafka's GroupCoordinator.handleJoinGroup): a new member, a known one, a pending
one (KIP-394), a static member restarted under a new id (KIP-345); each parks until the join
phase of broker/group/coordinator_core.py answers it. Part of GroupCoordinator
(broker/group/coordinator.py).
"""

from __future__ import annotations

import asyncio
import uuid

from broker.group.coordinator_core import CoordinatorCore, E, S
from broker.group.model import Group, JoinResult, Member, SyncResult


class JoinGroupHandling(CoordinatorCore):
    """The JoinGroup requests of GroupCoordinator."""

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
