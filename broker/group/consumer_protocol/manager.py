"""ConsumerGroupHeartbeat on the coordinator's groups (Kafka 4.0's
GroupMetadataManager.consumerGroupHeartbeat), leaving, and fencing by the session and
rebalance timers.

One heartbeat: find or create the group and the member, check the member epoch, apply what the
request changed (record 5), bump the group epoch when a subscription or the subscribed topics'
partitions changed (records 4, 3), recompute the target assignment when the group epoch is
ahead of it (records 7, 6), reconcile the member towards its target (record 8), write, answer.
The heartbeats of one group are applied one at a time; each change is applied in memory, written
(acks=all) and answered once replicated, or undone when the write fails.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING

from broker.group.consumer_protocol.assignors import ASSIGNORS, MemberSubscription
from broker.group.consumer_protocol.heartbeat_request import (
    Heartbeat,
    HeartbeatResult,
    Record,
    Refused,
    group_tombstones,
    member_tombstones,
    record_key,
    validate,
)
from broker.group.consumer_protocol.model import (
    EMPTY,
    LEAVE_EPOCH,
    NO_DEADLINE,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
)
from broker.group.consumer_protocol.reconciliation import reconcile
from broker.group.consumer_protocol.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    TopicMetadata,
    current_assignment_value,
    group_metadata_value,
    member_metadata_value,
    partition_metadata_value,
    target_assignment_member_value,
    target_assignment_metadata_value,
)
from broker.group.errors import GroupError, append_error
from broker.group.model import Group, GroupState
from broker.group.records import GroupKey, group_record

if TYPE_CHECKING:  # the coordinator loads consumer groups through this package
    from broker.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

E = GroupError
TopicLookup = Callable[[str], TopicMetadata | None]
RETRY_FENCE_MS = 1000  # a fencing whose write failed is tried again this much later


class ConsumerGroupManager:
    def __init__(self, coordinator: GroupCoordinator, topics: TopicLookup,
                 topic_names: Callable[[], Iterable[str]]) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self.topics = topics
        self.topic_names = topic_names
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def now_ms(self) -> int:
        return self.coordinator.now_ms()

    def consumer_group(self, group_id: str) -> Group | None:
        group = self.coordinator.groups.get(group_id)
        return group if group is not None and group.consumer is not None else None

    def _lock(self, group_id: str) -> asyncio.Lock:
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    # ---- the heartbeat ------------------------------------------------------------------------

    async def heartbeat(self, request: Heartbeat) -> HeartbeatResult:
        refused = validate(request, self.config.consumer_assignors)
        if refused is not None:
            return HeartbeatResult(refused[0], refused[1])
        error = self.coordinator.coordinator_error(request.group_id)
        if error is not None:
            return HeartbeatResult(error)
        async with self._lock(request.group_id):
            error = self.coordinator.coordinator_error(request.group_id)  # while we waited
            if error is not None:
                return HeartbeatResult(error)
            try:
                if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                    return await self._leave(request)
                return await self._heartbeat(request)
            except Refused as refused_:
                return HeartbeatResult(refused_.error, str(refused_),
                                       member_id=request.member_id)

    async def _heartbeat(self, request: Heartbeat) -> HeartbeatResult:
        existing = self.coordinator.groups.get(request.group_id)
        before = _Snapshot(existing) if existing is not None else None
        try:
            return await self._apply_heartbeat(request)
        except Refused:
            self._undo(request.group_id, before)
            raise

    def _undo(self, group_id: str, before: _Snapshot | None) -> None:
        """Put a group back as it was before a change that failed, or drop the one the change
        created; nothing when the partition was unloaded (or loaded again) meanwhile."""
        current = self.coordinator.groups.get(group_id)
        if before is not None:
            if current is before.group:
                before.restore()
        elif current is not None:
            del self.coordinator.groups[group_id]

    async def _apply_heartbeat(self, request: Heartbeat) -> HeartbeatResult:
        group, created = self._group_for_join(request)
        state = group.consumer
        assert state is not None
        records: list[Record] = []
        if created and group.offsets:
            records.append(group_record(GroupKey(group.group_id), None))  # the classic record
        member, records_member = self._member(group, state, request)
        records += records_member
        old_metadata = member.metadata() if member.member_id in state.members else None
        state.members[member.member_id] = member
        self._apply_fields(member, request)
        if member.instance_id is not None:
            state.static_members[member.instance_id] = member.member_id
        bump = created
        if member.metadata() != old_metadata:
            records.append((record_key(MEMBER_METADATA, group.group_id, member.member_id),
                            member_metadata_value(member.metadata())))
            if old_metadata is None or (old_metadata.subscribed_topic_names,
                                        old_metadata.subscribed_topic_regex) != \
                    (member.subscribed_topic_names, member.subscribed_topic_regex):
                bump = True
        subscribed = self._subscribed_metadata(state)
        if subscribed != state.subscribed:
            state.subscribed = subscribed
            records.append((record_key(PARTITION_METADATA, group.group_id),
                            partition_metadata_value(subscribed)))
            bump = True
        if bump:
            state.group_epoch += 1
            records.append((record_key(GROUP_METADATA, group.group_id),
                            group_metadata_value(state.group_epoch)))
        if state.group_epoch > state.assignment_epoch:
            records += self._assign(group.group_id, state)
        old_assigned, old_state = member.assigned, member.state
        changed = self._reconcile(state, member, request.owned) or old_metadata is None
        if changed:
            records.append((record_key(CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id),
                            current_assignment_value(member.current())))
        now = self.now_ms
        member.session_deadline = now + self.config.consumer_session_timeout_ms
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if old_state is not MemberState.UNREVOKED_PARTITIONS or changed:
                member.rebalance_deadline = now + max(member.rebalance_timeout_ms, 0)
        else:
            member.rebalance_deadline = NO_DEADLINE
        self._mirror_classic_state(group)
        error = await self._write(group, records)
        if error is not None:
            raise Refused(error, f"writing the group's records failed: {error.name}")
        self.coordinator.on_deadline_set()
        send = request.member_epoch == 0 or request.is_full or member.assigned != old_assigned
        return HeartbeatResult(E.NONE, None, member.member_id, member.member_epoch,
                               self.config.consumer_heartbeat_interval_ms,
                               member.assigned if send else None)

    def _group_for_join(self, request: Heartbeat) -> tuple[Group, bool]:
        """(the consumer group, whether this heartbeat creates it). An Empty classic group
        (or one with committed offsets only) becomes a consumer group, as Kafka's upgrade."""
        group = self.coordinator.groups.get(request.group_id)
        if group is not None and group.consumer is not None:
            return group, False
        if request.member_epoch != 0:
            raise Refused(E.GROUP_ID_NOT_FOUND,
                           f"Group {request.group_id} not found." if group is None else
                           f"Group {request.group_id} is not a consumer group.")
        if group is None:
            group = Group(request.group_id, state_timestamp=self.now_ms)
            self.coordinator.groups[request.group_id] = group
        elif group.members or group.pending_members or group.state is not GroupState.EMPTY \
                or group.pending_commits:
            raise Refused(E.GROUP_ID_NOT_FOUND,
                           f"Group {request.group_id} is not a consumer group: a classic "
                           "group with members uses this id.")
        group.consumer = ConsumerGroupState()
        group.protocol_type = "consumer"
        group.protocol_name = None
        group.generation = 0
        return group, True

    def _member(self, group: Group, state: ConsumerGroupState,
                request: Heartbeat) -> tuple[ConsumerMember, list[Record]]:
        """The heartbeat's member: found, created, or a static member's replacement (with
        the old member's records removed)."""
        member_id = request.member_id or str(uuid.uuid4())  # v0: the coordinator names it
        epoch = request.member_epoch
        if request.instance_id is not None:
            holder_id = state.static_members.get(request.instance_id)
            holder = state.members.get(holder_id) if holder_id is not None else None
            if epoch == 0 and holder is not None and holder_id != member_id:
                if holder.member_epoch != STATIC_LEAVE_EPOCH:
                    raise Refused(E.UNRELEASED_INSTANCE_ID,
                                   f"Static member {holder_id} with instance id "
                                   f"{request.instance_id} is not released yet.")
                return self._replace_static(group, state, holder, member_id)
            if epoch != 0:
                if holder is None:
                    raise Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} "
                                   "is unknown.")
                if holder_id != member_id:
                    raise Refused(E.FENCED_INSTANCE_ID, f"Instance id {request.instance_id} "
                                   f"is held by {holder_id}.")
        member = state.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise Refused(E.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group {group.group_id}.")
            if len(state.members) >= self.config.consumer_max_size:
                raise Refused(E.GROUP_MAX_SIZE_REACHED,
                               f"The consumer group has reached its maximum capacity of "
                               f"{self.config.consumer_max_size} members.")
            return ConsumerMember(member_id), []
        if epoch == 0:
            if member.member_epoch != 0:  # a rejoin: it gave everything up (owned is empty)
                state.release(member)
                member.member_epoch, member.state = 0, MemberState.STABLE
                member.assigned, member.pending_revocation = EMPTY, EMPTY
            return member, []
        if epoch > member.member_epoch or (
                epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                                 or not _subset(request.owned, member.assigned))):
            raise Refused(E.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a smaller member epoch ({epoch}) "
                           f"than the one known by the group coordinator "
                           f"({member.member_epoch}). The member must abandon all its "
                           "partitions and rejoin." if epoch < member.member_epoch else
                           f"The consumer group member has a greater member epoch ({epoch}) "
                           f"than the one known by the group coordinator "
                           f"({member.member_epoch}). The member must abandon all its "
                           "partitions and rejoin.")
        return member, []

    def _replace_static(self, group: Group, state: ConsumerGroupState, old: ConsumerMember,
                        member_id: str) -> tuple[ConsumerMember, list[Record]]:
        """KIP-848's static rejoin: the new member id takes the old one's place, epoch and
        partitions (Kafka's replaceStaticMember)."""
        del state.members[old.member_id]
        target = state.target.pop(old.member_id, None)
        new = copy.copy(old)
        new.member_id = member_id
        if target is not None:
            state.target[member_id] = target
        log.info("consumer group %s: static member %s replaced by %s", group.group_id,
                 old.member_id, member_id)
        records = member_tombstones(group.group_id, old.member_id)
        if target is not None:
            records.append((record_key(TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id),
                            target_assignment_member_value(target)))
        return new, records

    @staticmethod
    def _apply_fields(member: ConsumerMember, request: Heartbeat) -> None:
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        member.client_id, member.client_host = request.client_id, request.client_host

    # ---- subscriptions and the target assignment ------------------------------------------

    def _member_topics(self, member: ConsumerMember, names: list[str] | None) -> set[str]:
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = re.compile(member.subscribed_topic_regex)
            topics |= {n for n in names or () if pattern.fullmatch(n)}
        return topics

    def _all_names(self, state: ConsumerGroupState) -> list[str] | None:
        if any(m.subscribed_topic_regex for m in state.members.values()):
            return [n for n in self.topic_names() if not n.startswith("__")]
        return None

    def _subscribed_metadata(self, state: ConsumerGroupState) -> dict[uuid.UUID, TopicMetadata]:
        names = self._all_names(state)
        out = {}
        for name in set().union(*(self._member_topics(m, names)
                                  for m in state.members.values())):
            metadata = self.topics(name)
            if metadata is not None and metadata.partitions > 0:
                out[metadata.topic_id] = metadata
        return out

    def assignor_of(self, state: ConsumerGroupState) -> str:
        """The assignor most members ask for, else the first configured (Kafka's)."""
        asked = Counter(m.server_assignor for m in state.members.values()
                        if m.server_assignor is not None)
        if asked:
            return max(sorted(asked), key=lambda name: asked[name])
        return self.config.consumer_assignors[0]

    def _assign(self, group_id: str, state: ConsumerGroupState) -> list[Record]:
        names = self._all_names(state)
        by_name = {t.name: t.topic_id for t in state.subscribed.values()}
        members = [MemberSubscription(m.member_id, m.instance_id, frozenset(
            by_name[n] for n in self._member_topics(m, names) if n in by_name))
            for m in state.members.values()]
        target = ASSIGNORS[self.assignor_of(state)](members, state.subscribed, state.target)
        records: list[Record] = []
        for member_id, assignment in sorted(target.items()):
            if state.target.get(member_id) != assignment:
                records.append((record_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                                target_assignment_member_value(assignment)))
        state.target = target
        state.assignment_epoch = state.group_epoch
        records.append((record_key(TARGET_ASSIGNMENT_METADATA, group_id),
                        target_assignment_metadata_value(state.assignment_epoch)))
        log.info("consumer group %s: target assignment of epoch %d over %d member(s)",
                 group_id, state.assignment_epoch, len(members))
        return records

    def _reconcile(self, state: ConsumerGroupState, member: ConsumerMember,
                   owned: Assignment | None) -> bool:
        """Move the member towards its target; whether anything of it changed."""
        before = member.current()
        state.release(member)  # its own partitions are not held "elsewhere"
        nxt = reconcile(member, state.assignment_epoch, state.target.get(member.member_id, EMPTY),
                        state.partition_epoch, owned)
        member.member_epoch, member.previous_member_epoch = nxt.member_epoch, \
            nxt.previous_member_epoch
        member.state, member.assigned = nxt.state, nxt.assigned
        member.pending_revocation = nxt.pending_revocation
        state.hold(member)
        return member.current() != before

    # ---- leaving and fencing -----------------------------------------------------------------

    async def _leave(self, request: Heartbeat) -> HeartbeatResult:
        group = self.consumer_group(request.group_id)
        if group is None or group.consumer is None:
            raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        state = group.consumer
        member_id = request.member_id
        if request.instance_id is not None:
            holder = state.static_members.get(request.instance_id)
            if holder is None:
                raise Refused(E.UNKNOWN_MEMBER_ID,
                               f"Instance id {request.instance_id} is unknown.")
            if holder != member_id:
                raise Refused(E.FENCED_INSTANCE_ID, f"Instance id {request.instance_id} is "
                               f"held by {holder}.")
        member = state.members.get(member_id)
        if member is None:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                           f"{request.group_id}.")
        before = _Snapshot(group)
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            # It keeps its partitions for its session, so a restart can take them back.
            member.previous_member_epoch, member.member_epoch = member.member_epoch, \
                STATIC_LEAVE_EPOCH
            state.hold(member)
            records: list[Record] = [(
                record_key(CURRENT_MEMBER_ASSIGNMENT, group.group_id, member_id),
                current_assignment_value(member.current()))]
        else:
            records = self._remove(group, state, member, "left the group")
        error = await self._write(group, records)
        if error is not None:
            self._undo(group.group_id, before)
            return HeartbeatResult(error, member_id=member_id)
        return HeartbeatResult(E.NONE, None, member_id, request.member_epoch,
                               self.config.consumer_heartbeat_interval_ms)

    def _remove(self, group: Group, state: ConsumerGroupState, member: ConsumerMember,
                reason: str) -> list[Record]:
        log.info("consumer group %s: removing member %s: %s", group.group_id, member.member_id,
                 reason)
        state.release(member)
        del state.members[member.member_id]
        state.target.pop(member.member_id, None)
        if member.instance_id is not None \
                and state.static_members.get(member.instance_id) == member.member_id:
            del state.static_members[member.instance_id]
        state.group_epoch += 1
        records = member_tombstones(group.group_id, member.member_id)
        subscribed = self._subscribed_metadata(state)
        if subscribed != state.subscribed:
            state.subscribed = subscribed
            records.append((record_key(PARTITION_METADATA, group.group_id),
                            partition_metadata_value(subscribed)))
        records.append((record_key(GROUP_METADATA, group.group_id),
                        group_metadata_value(state.group_epoch)))
        self._mirror_classic_state(group)
        return records

    def _mirror_classic_state(self, group: Group) -> None:
        """What the classic code reads of a consumer group: Empty without members (offset
        expiry, DeleteGroups), Stable with."""
        assert group.consumer is not None
        state = GroupState.STABLE if group.consumer.members else GroupState.EMPTY
        if group.state is not state:
            group.state = state
            group.state_timestamp = self.now_ms

    async def _fence(self, group_id: str, member_id: str, reason: str) -> None:
        async with self._lock(group_id):
            group = self.consumer_group(group_id)
            if group is None or group.consumer is None or \
                    self.coordinator.coordinator_error(group_id) is not None:
                return
            member = group.consumer.members.get(member_id)
            if member is None:
                return
            before = _Snapshot(group)
            error = await self._write(group, self._remove(group, group.consumer, member, reason))
            if error is not None:
                self._undo(group_id, before)
                restored = group.consumer.members.get(member_id) if group.consumer else None
                if restored is not None:
                    restored.session_deadline = self.now_ms + RETRY_FENCE_MS
                self.coordinator.on_deadline_set()

    # ---- timers ------------------------------------------------------------------------------

    def _consumer_groups(self) -> list[tuple[str, ConsumerGroupState]]:
        return [(gid, g.consumer) for gid, g in self.coordinator.groups.items()
                if g.consumer is not None and g.state is not GroupState.DEAD]

    def next_deadline(self) -> int:
        earliest = NO_DEADLINE
        for _, state in self._consumer_groups():
            for member in state.members.values():
                earliest = min(earliest, member.session_deadline, member.rebalance_deadline)
        return earliest

    def tick(self) -> None:
        """Fence the members whose session or revocation time ran out."""
        now = self.now_ms
        for group_id, state in self._consumer_groups():
            for member in list(state.members.values()):
                if now >= member.session_deadline:
                    reason = "its session timed out"
                elif now >= member.rebalance_deadline:
                    reason = "it did not revoke its partitions within its rebalance timeout"
                else:
                    continue
                member.session_deadline = member.rebalance_deadline = NO_DEADLINE
                self._background(self._fence(group_id, member.member_id, reason))

    def start_sessions(self, groups: Iterable[Group]) -> None:
        """Fresh sessions for the members of loaded groups (Kafka: the new coordinator
        schedules every member's session timeout); revocations restart their timers."""
        now = self.now_ms
        for group in groups:
            if group.consumer is None:
                continue
            for member in group.consumer.members.values():
                member.session_deadline = now + self.config.consumer_session_timeout_ms
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    member.rebalance_deadline = now + max(member.rebalance_timeout_ms, 0)
            self._mirror_classic_state(group)
        self.coordinator.on_deadline_set()

    def _background(self, work: Coroutine[None, None, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- writes ------------------------------------------------------------------------------

    async def _write(self, group: Group, records: list[Record]) -> GroupError | None:
        """None once the records are replicated (or there were none), else the error."""
        if not records:
            return None
        code = await self.coordinator.log.append(
            self.coordinator.partition_of(group.group_id), records)
        error = append_error(code, commit=False)
        if error != E.NONE:
            return error
        if self.coordinator.groups.get(group.group_id) is not group:
            return E.NOT_COORDINATOR  # unloaded meanwhile
        return None

    async def drop_empty(self, group_id: str) -> GroupError:
        """A classic JoinGroup for an Empty consumer group: the group becomes classic again
        (its consumer records tombstoned, its offsets kept), as Kafka's downgrade of an
        empty group; NONE when there is no consumer group (any more)."""
        async with self._lock(group_id):
            group = self.consumer_group(group_id)
            if group is None or group.consumer is None:
                return E.NONE
            if group.consumer.members:
                return E.INCONSISTENT_GROUP_PROTOCOL
            before = _Snapshot(group)
            records = group_tombstones(group_id, group.consumer)
            group.consumer = None
            group.protocol_type = None
            error = await self._write(group, records)
            if error is not None:
                self._undo(group_id, before)
                return error
            return E.NONE


def _subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(partitions <= assigned.get(topic, frozenset())
               for topic, partitions in owned.items())


class _Snapshot:
    """A group's state before a change, to put back when its write fails (the in-memory
    group stays what the log says)."""

    def __init__(self, group: Group) -> None:
        self.group = group
        self.consumer = copy.deepcopy(group.consumer)
        self.classic = (group.state, group.state_timestamp, group.protocol_type,
                        group.protocol_name, group.generation)

    def restore(self) -> None:
        group = self.group
        group.consumer = self.consumer
        (group.state, group.state_timestamp, group.protocol_type, group.protocol_name,
         group.generation) = self.classic
