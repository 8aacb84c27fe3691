"""The PartitionChangeBuilder equivalent: elections, ISR, epochs, reassignment completion."""

from __future__ import annotations

from collections.abc import Callable

from metadata.image import PartitionRegistration
from metadata.partition_change import Election, build_partition_change
from metadata.records import NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord
from tests.unit.test_metadata_helpers import FOO


def part(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int,
         **kwargs: tuple[int, ...] | int) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader=leader, **kwargs)  # type: ignore[arg-type]


def active(*brokers: int) -> Callable[[int], bool]:
    return lambda b: b in brokers


def test_no_change_no_record() -> None:
    p = part((1, 2, 3), (1, 2, 3), 1)
    assert build_partition_change(p, FOO, 0, active(1, 2, 3)) is None
    assert build_partition_change(p, FOO, 0, active(1, 2, 3), target_isr=(1, 2, 3)) is None


def test_isr_shrink_keeps_the_leader_and_its_epoch() -> None:
    p = part((1, 2, 3), (1, 2, 3), 1)
    assert build_partition_change(p, FOO, 0, active(1, 2, 3), target_isr=(1, 2)) == \
        PartitionChangeRecord(0, FOO, isr=(1, 2))


def test_online_election_keeps_a_valid_leader_else_first_valid_replica() -> None:
    p = part((1, 2, 3), (1, 2, 3), 2)
    assert build_partition_change(p, FOO, 0, active(1, 2, 3)) is None
    moved = build_partition_change(p, FOO, 0, active(1, 3), target_isr=(1, 3))
    assert moved == PartitionChangeRecord(0, FOO, isr=(1, 3), leader=1)


def test_removing_the_only_isr_member_leaves_isr_and_no_leader() -> None:
    p = part((1, 2), (1,), 1)
    record = build_partition_change(p, FOO, 0, active(2), target_isr=())
    assert record == PartitionChangeRecord(0, FOO, leader=NO_LEADER)
    assert p.merge(record).isr == (1,)


def test_preferred_election() -> None:
    p = part((1, 2, 3), (1, 2, 3), 2)
    assert build_partition_change(p, FOO, 0, active(1, 2, 3), election=Election.PREFERRED) == \
        PartitionChangeRecord(0, FOO, leader=1)
    # The preferred replica out of the ISR: the current leader stays.
    p = part((1, 2, 3), (2, 3), 2)
    assert build_partition_change(p, FOO, 0, active(1, 2, 3), election=Election.PREFERRED) is None
    # Neither the preferred nor the current leader is valid: the next valid replica.
    p = part((1, 2, 3), (2, 3), 2)
    assert build_partition_change(p, FOO, 0, active(1, 3),
                                  election=Election.PREFERRED) == \
        PartitionChangeRecord(0, FOO, leader=3)


def test_unclean_election_only_when_asked_for() -> None:
    p = part((1, 2, 3), (1,), NO_LEADER)
    assert build_partition_change(p, FOO, 0, active(2, 3)) is None
    unclean = build_partition_change(p, FOO, 0, active(2, 3), election=Election.UNCLEAN)
    assert unclean == PartitionChangeRecord(0, FOO, isr=(2,), leader=2, leader_recovery_state=1)
    merged = p.merge(unclean)
    assert (merged.leader, merged.isr, merged.is_recovering, merged.leader_epoch) == \
        (2, (2,), True, 1)
    # An ISR member that is acceptable wins over an unclean pick.
    clean = build_partition_change(part((1, 2, 3), (3,), NO_LEADER), FOO, 0, active(2, 3),
                                   election=Election.UNCLEAN)
    assert clean == PartitionChangeRecord(0, FOO, leader=3)


def test_recovery_state_target() -> None:
    p = part((1,), (1,), 1, leader_recovery_state=1)
    assert build_partition_change(p, FOO, 0, active(1), target_leader_recovery_state=0) == \
        PartitionChangeRecord(0, FOO, leader_recovery_state=0)


def test_reassignment_completes_when_the_isr_covers_the_target() -> None:
    # Moving [1,2,3] -> [2,3,4]: replicas [2,3,4,1], removing [1], adding [4].
    p = part((2, 3, 4, 1), (1, 2, 3), 1, removing_replicas=(1,), adding_replicas=(4,))
    assert build_partition_change(p, FOO, 0, active(1, 2, 3, 4), target_isr=(1, 2, 3)) is None
    record = build_partition_change(p, FOO, 0, active(1, 2, 3, 4), target_isr=(1, 2, 3, 4))
    assert record == PartitionChangeRecord(0, FOO, isr=(2, 3, 4), leader=2, replicas=(2, 3, 4),
                                           removing_replicas=(), adding_replicas=())


def test_a_shrinking_replica_set_bumps_the_leader_epoch() -> None:
    # Removing replica 3 (not the leader): the leader stays but its epoch must move.
    p = part((1, 2, 3), (1, 2, 3), 1, removing_replicas=(3,))
    record = build_partition_change(p, FOO, 0, active(1, 2, 3))
    assert record == PartitionChangeRecord(0, FOO, isr=(1, 2), leader=1, replicas=(1, 2),
                                           removing_replicas=())
    assert p.merge(record).leader_epoch == 1
    assert record.leader != NO_LEADER_CHANGE
