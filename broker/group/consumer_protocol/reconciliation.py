"""Kafka's CurrentAssignmentBuilder: a member's next epoch and partitions, from its current
ones, its target assignment, what it reports owning, and who else still holds a partition.

A partition reaches its new owner only once no other member holds it: the old owner is first
asked to revoke it (UNREVOKED_PARTITIONS, its epoch unchanged) and releases it by a heartbeat
that no longer lists it; the new owner moves to the target epoch at once but gets the partition
on a heartbeat after that release (UNRELEASED_PARTITIONS meanwhile)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker.group.consumer_protocol.model import ConsumerMember, MemberState, normalized
from broker.group.consumer_protocol.records import Assignment

PartitionEpoch = Callable[[uuid.UUID, int], int]  # -1 when no member holds the partition


@dataclass(frozen=True, slots=True)
class NextAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def _still_owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    if owned is None:  # not reported in this heartbeat: assume it still owns them
        return True
    return any(owned.get(topic, frozenset()) & partitions
               for topic, partitions in revoking.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              partition_epoch: PartitionEpoch, owned: Assignment | None) -> NextAssignment:
    current = NextAssignment(member.member_epoch, member.previous_member_epoch, member.state,
                             member.assigned, member.pending_revocation)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns_any(owned, member.pending_revocation):
            return current  # still revoking
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return current
    # STABLE at an older epoch, or UNRELEASED_PARTITIONS (freed partitions may be taken now).
    return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)


def _next(member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment,
          partition_epoch: PartitionEpoch, owned: Assignment | None) -> NextAssignment:
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        has = member.assigned.get(topic, frozenset())
        keep = set(has & wanted)
        revoke = has - wanted
        for partition in wanted - has:
            if partition_epoch(topic, partition) == -1:
                keep.add(partition)
            else:
                unreleased = True
        assigned[topic] = keep
        if revoke:
            revoking[topic] = set(revoke)
    if revoking and _still_owns_any(owned, normalized(revoking)):
        # Give up the partitions first; keep only what it has and still should.
        kept = {topic: set(member.assigned.get(topic, frozenset()) & target.get(topic, frozenset()))
                for topic in member.assigned}
        return NextAssignment(epoch, member.previous_member_epoch,
                              MemberState.UNREVOKED_PARTITIONS, normalized(kept),
                              normalized(revoking))
    previous = member.member_epoch if target_epoch != member.member_epoch \
        else member.previous_member_epoch
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return NextAssignment(target_epoch, previous, state, normalized(assigned), {})
