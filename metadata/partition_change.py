"""Kafka's PartitionChangeBuilder as one function: from a partition and targets to the single
PartitionChangeRecord that gets there (or None when nothing would change).

The rules (spec §3.1, §3.2, §3.8), without ELR (eligible leader replicas are off, as in Kafka's
default) and at the latest metadata.version (leader recovery supported, no leader-epoch bump on
ISR shrink):
1. a reassignment completes when the target ISR minus the removing replicas covers the
   replicas minus the removing replicas (both non-empty);
2. a leader is elected (PREFERRED, ONLINE or UNCLEAN); an unclean leader makes the ISR just
   itself and the partition RECOVERING;
3. a replica set that loses a member forces a leader-epoch bump (Leader = current leader);
4. the target ISR is written only if it is non-empty and differs — so removing the last ISR
   member leaves the ISR as it was and the leader -1;
5. replicas / removing / adding / recovery state are written when they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum

from metadata.image import PartitionRegistration
from metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    PartitionChangeRecord,
)


class Election(Enum):
    PREFERRED = "PREFERRED"  # replicas[0] if it is in the ISR and acceptable
    ONLINE = "ONLINE"  # keep the partition online with a leader from the ISR
    UNCLEAN = "UNCLEAN"  # as ONLINE, else any acceptable replica (data may be lost)


def build_partition_change(
    partition: PartitionRegistration,
    topic_id: str,
    partition_id: int,
    is_acceptable_leader: Callable[[int], bool],
    *,
    election: Election = Election.ONLINE,
    target_isr: Sequence[int] | None = None,
    target_replicas: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
    target_leader_recovery_state: int | None = None,
) -> PartitionChangeRecord | None:
    """The record moving `partition` to the targets (None: keep the current value), or None
    when it would change nothing."""
    isr = partition.isr if target_isr is None else tuple(target_isr)
    replicas = partition.replicas if target_replicas is None else tuple(target_replicas)
    removing = partition.removing_replicas if target_removing is None else tuple(target_removing)
    adding = partition.adding_replicas if target_adding is None else tuple(target_adding)
    recovery_state = (partition.leader_recovery_state if target_leader_recovery_state is None
                      else target_leader_recovery_state)

    completed = completed_reassignment(replicas, removing, adding, isr)
    if completed is not None:
        replicas, isr = completed
        removing = adding = ()

    leader = NO_LEADER_CHANGE
    record_isr: tuple[int, ...] | None = None
    record_recovery_state = -1
    elected, unclean = elect_leader(partition, replicas, isr, is_acceptable_leader, election)
    if elected != partition.leader:
        leader = elected
        if unclean:
            record_isr = (elected,)
            if partition.leader_recovery_state != LeaderRecoveryState.RECOVERING:
                record_recovery_state = LeaderRecoveryState.RECOVERING

    if leader == NO_LEADER_CHANGE and not set(partition.replicas) <= set(replicas):
        leader = partition.leader  # a replica left: its fetchers must see a new epoch

    if record_isr is None and isr and isr != partition.isr:
        record_isr = isr
    if recovery_state != partition.leader_recovery_state:
        record_recovery_state = recovery_state

    record = PartitionChangeRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        isr=record_isr,
        leader=leader,
        replicas=replicas if replicas and replicas != partition.replicas else None,
        removing_replicas=removing if removing != partition.removing_replicas else None,
        adding_replicas=adding if adding != partition.adding_replicas else None,
        leader_recovery_state=record_recovery_state,
    )
    return None if record.is_noop() else record


def completed_reassignment(
    replicas: tuple[int, ...],
    removing: tuple[int, ...],
    adding: tuple[int, ...],
    isr: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, ISR) once a reassignment in progress is complete, else None (§3.8)."""
    if not removing and not adding:
        return None
    if removing:
        isr = tuple(r for r in isr if r not in removing)
        replicas = tuple(r for r in replicas if r not in removing)
        if not isr or not replicas:
            return None
    if not set(replicas) <= set(isr):
        return None
    return replicas, isr


def elect_leader(
    partition: PartitionRegistration,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    is_acceptable_leader: Callable[[int], bool],
    election: Election,
) -> tuple[int, bool]:
    """(new leader or NO_LEADER, whether the election was unclean), Kafka's electLeader."""

    def valid(replica: int) -> bool:
        return replica in isr and is_acceptable_leader(replica)

    if election is Election.PREFERRED:
        if replicas and valid(replicas[0]):
            return replicas[0], False
        if valid(partition.leader):
            return partition.leader, False
        return next((r for r in replicas[1:] if valid(r)), NO_LEADER), False

    if valid(partition.leader):
        return partition.leader, False
    clean = next((r for r in replicas if valid(r)), NO_LEADER)
    if clean != NO_LEADER or election is not Election.UNCLEAN:
        return clean, False
    unclean = next((r for r in replicas if is_acceptable_leader(r)), NO_LEADER)
    return unclean, unclean != NO_LEADER
