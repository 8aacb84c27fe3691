"""Partition (broker/replica/partition.py): follower progress, the ISR rules and the high
watermark, on a real PartitionLog (reference/kafka-data-plane.md §3.1, §3.5, §4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.partition_log import PartitionLog
from broker.records import build_batch
from broker.replica.partition import (
    FollowerState,
    IsrChange,
    NotEnoughReplicas,
    NotLeader,
    Partition,
)
from kraft.errors import Errors
from metadata.image import PartitionRegistration
from metadata.records import LeaderRecoveryState
from tests.unit.replica_harness import TOPIC_ID

LAG = 30_000
T0 = 1_000_000


def everyone(_: int) -> bool:
    return True


def nobody(_: int) -> bool:
    return False


def reg(leader: int = 1, epoch: int = 1, isr: tuple[int, ...] = (1, 2, 3),
        replicas: tuple[int, ...] = (1, 2, 3), partition_epoch: int | None = None,
        recovery: int = LeaderRecoveryState.RECOVERED) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader=leader, leader_epoch=epoch,
                                 partition_epoch=epoch if partition_epoch is None
                                 else partition_epoch,
                                 leader_recovery_state=recovery)


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    opened = PartitionLog.open(str(tmp_path / "t-0"), TOPIC_ID, LogConfig(), now_ms=T0)
    yield opened
    opened.close()


def leader_of(log: PartitionLog, **kwargs: object) -> Partition:
    partition = Partition(log, 1, 0)
    partition.make_leader(reg(**kwargs), T0)  # type: ignore[arg-type]
    return partition


def append(partition: Partition, n: int = 1) -> None:
    partition.append_as_leader(build_batch([b"x"] * n), 1, 1, T0)


# -- FollowerState (§4.1) ----------------------------------------------------------------------


def test_fetch_at_the_leader_end_is_caught_up_now() -> None:
    state = FollowerState()
    state.on_fetch(10, 0, 10, T0 + 5)
    assert state.last_caught_up_ms == T0 + 5
    assert state.leo == 10 and state.last_fetch_leader_leo == 10 and state.last_fetch_ms == T0 + 5


def test_fetch_behind_reaching_the_previous_leader_end_is_caught_up_at_the_previous_fetch() -> None:
    state = FollowerState()
    state.on_fetch(5, 0, 10, T0)          # behind: leader was at 10
    assert state.last_caught_up_ms == 0
    state.on_fetch(10, 0, 12, T0 + 100)   # reached what the leader had at the previous fetch
    assert state.last_caught_up_ms == T0


def test_fetch_behind_the_previous_leader_end_does_not_count() -> None:
    state = FollowerState()
    state.on_fetch(5, 0, 10, T0)
    state.on_fetch(9, 0, 12, T0 + 100)
    assert state.last_caught_up_ms == 0
    assert not state.is_caught_up(12, T0 + LAG + 1, LAG)


def test_last_fetch_leader_leo_never_goes_back_and_caught_up_time_never_back() -> None:
    state = FollowerState()
    state.on_fetch(10, 0, 10, T0 + 50)
    state.on_fetch(10, 0, 8, T0 + 10)  # an out-of-order (older) clock reading
    assert state.last_fetch_leader_leo == 10
    assert state.last_caught_up_ms == T0 + 50


def test_is_caught_up_by_leo_or_by_time() -> None:
    state = FollowerState(leo=7, last_caught_up_ms=T0)
    assert state.is_caught_up(7, T0 + 10 * LAG, LAG)   # at the LEO, however long ago
    assert state.is_caught_up(9, T0 + LAG, LAG)        # within the lag (inclusive)
    assert not state.is_caught_up(9, T0 + LAG + 1, LAG)


def test_scenario_7_never_at_the_leo_but_keeping_up_stays_in_the_isr(log: PartitionLog) -> None:
    """Constant tiny produces; follower 2 always one fetch behind, never exactly at the LEO,
    for 10 × replica.lag.time.max.ms: it is never shrunk out. Follower 3 stops fetching and
    is."""
    partition = leader_of(log)
    now = T0
    for _ in range(100):
        previous_leo = log.end_offset
        append(partition)
        now += LAG // 10
        partition.update_follower(2, previous_leo, 0, log.end_offset, now)
        assert partition.followers[2].leo != log.end_offset
        change = partition.isr_to_shrink(now, LAG)
        if change is not None:
            assert 2 in change.isr
    change = partition.isr_to_shrink(now, LAG)
    assert change == IsrChange((1, 2), 1, 1)


# -- make_leader / make_follower (§3.1) --------------------------------------------------------


def test_make_leader_adds_the_epoch_at_the_leo_without_a_record(log: PartitionLog) -> None:
    """KAFKA-7415: the epoch cache gets (new epoch, LEO) even when nothing is written."""
    partition = leader_of(log, epoch=1)
    append(partition, 3)
    partition.make_follower(reg(leader=2, epoch=2))
    assert partition.make_leader(reg(leader=1, epoch=3), T0)
    assert log.epoch_entries() == [(1, 0), (3, 3)]
    assert partition.leader_epoch_start_offset == 3
    assert log.end_offset_for_epoch(2) == (1, 3)


def test_make_leader_same_epoch_is_not_a_new_epoch(log: PartitionLog) -> None:
    partition = leader_of(log, epoch=1)
    append(partition, 2)
    assert not partition.make_leader(reg(epoch=1, isr=(1, 2), partition_epoch=2), T0)
    assert partition.leader_epoch_start_offset == 0
    assert partition.isr == (1, 2)


def test_make_leader_resets_follower_state(log: PartitionLog) -> None:
    partition = leader_of(log, epoch=1, isr=(1, 2))
    append(partition, 2)
    partition.update_follower(2, 2, 0, 2, T0 + 5)
    partition.update_follower(3, 1, 0, 2, T0 + 5)
    assert partition.make_leader(reg(epoch=2, isr=(1, 2)), T0 + 100)
    two, three = partition.followers[2], partition.followers[3]
    assert two.last_caught_up_ms == T0 + 100 and three.last_caught_up_ms == 0
    assert two.leo == 2  # re-elected: kept


def test_new_leader_does_not_know_follower_leos(log: PartitionLog) -> None:
    partition = Partition(log, 1, 0)
    partition.make_follower(reg(leader=2, epoch=1))
    log.append_as_follower(build_batch([b"a", b"b"], partition_leader_epoch=1))
    partition.make_leader(reg(leader=1, epoch=2), T0)
    assert all(state.leo == -1 for state in partition.followers.values())
    # ISR followers with unknown LEOs hold the HW where it was.
    assert not partition.maybe_increment_hw(1, T0, LAG, everyone)
    assert partition.high_watermark == 0


def test_make_follower_clears_leader_state(log: PartitionLog) -> None:
    partition = leader_of(log)
    partition.begin_isr_change(IsrChange((1, 2), 1, 1))
    assert partition.make_follower(reg(leader=2, epoch=2))
    assert partition.followers == {} and partition.pending_isr is None
    assert not partition.is_leader
    assert not partition.make_follower(reg(leader=2, epoch=2, partition_epoch=3))
    with pytest.raises(NotLeader):
        append(partition)


def test_stale_partition_epoch_is_ignored(log: PartitionLog) -> None:
    partition = leader_of(log, epoch=3, partition_epoch=5)
    assert partition.is_stale(reg(epoch=3, partition_epoch=4))
    assert not partition.is_stale(reg(epoch=3, partition_epoch=5))


# -- high watermark (§3.5) ---------------------------------------------------------------------


def test_hw_is_the_minimum_over_the_isr(log: PartitionLog) -> None:
    partition = leader_of(log)
    append(partition, 10)
    partition.update_follower(2, 10, 0, 10, T0)
    partition.update_follower(3, 4, 0, 10, T0)
    assert partition.maybe_increment_hw(2, T0, LAG, everyone)
    assert partition.high_watermark == 4
    partition.update_follower(3, 10, 0, 10, T0)
    assert partition.maybe_increment_hw(2, T0, LAG, everyone)
    assert partition.high_watermark == 10


def test_hw_never_goes_backwards(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1, 2))
    append(partition, 10)
    partition.update_follower(2, 8, 0, 10, T0)
    partition.maybe_increment_hw(1, T0, LAG, everyone)
    assert partition.high_watermark == 8
    # An ISR expansion brings in a replica behind the HW: the HW stays.
    partition.update_follower(3, 8, 0, 10, T0)
    partition.complete_isr_change(1, (1, 2, 3), 1, LeaderRecoveryState.RECOVERED)
    partition.update_follower(3, 5, 0, 10, T0)  # a lower fetch offset after truncation
    assert not partition.maybe_increment_hw(1, T0, LAG, everyone)
    assert partition.high_watermark == 8


def test_hw_counts_a_caught_up_eligible_non_isr_follower(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1, 2))
    append(partition, 10)
    partition.update_follower(2, 10, 0, 10, T0)
    partition.update_follower(3, 6, 0, 6, T0)  # caught up at its last fetch
    partition.maybe_increment_hw(1, T0, LAG, everyone)
    assert partition.high_watermark == 6
    # An ineligible (fenced) caught-up follower does not hold the HW back.
    other = Partition(log, 1, 6)
    other.make_leader(reg(epoch=1, isr=(1, 2)), T0)
    other.update_follower(2, 10, 0, 10, T0)
    other.update_follower(3, 6, 0, 6, T0)
    other.maybe_increment_hw(1, T0, LAG, nobody)
    assert other.high_watermark == 10


def test_hw_uses_the_maximal_isr_while_an_expand_is_pending(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1, 2))
    append(partition, 10)
    partition.update_follower(2, 10, 0, 10, T0)
    partition.update_follower(3, 7, 0, 10, T0 - 2 * LAG)
    partition.begin_isr_change(IsrChange((1, 2, 3), 1, 1))
    assert partition.maximal_isr == (1, 2, 3)
    partition.maybe_increment_hw(1, T0, LAG, nobody)
    assert partition.high_watermark == 7


def test_hw_uses_the_old_isr_while_a_shrink_is_pending(log: PartitionLog) -> None:
    partition = leader_of(log)
    append(partition, 10)
    partition.update_follower(2, 10, 0, 10, T0)
    partition.update_follower(3, 3, 0, 10, T0)
    partition.begin_isr_change(IsrChange((1, 2), 1, 1))
    assert partition.maximal_isr == (1, 2, 3)
    partition.maybe_increment_hw(1, T0, LAG, nobody)
    assert partition.high_watermark == 3


def test_hw_frozen_below_min_isr(log: PartitionLog) -> None:
    """KIP-966 / KAFKA-15583: no HW advance while |ISR| < min(min.insync.replicas, RF)."""
    partition = leader_of(log, isr=(1,))
    append(partition, 5)
    assert not partition.maybe_increment_hw(2, T0, LAG, everyone)
    assert partition.high_watermark == 0
    # min.insync.replicas above RF counts as RF: a single-replica partition advances.
    single = Partition(log, 1, 0)
    single.make_leader(reg(epoch=1, isr=(1,), replicas=(1,)), T0)
    assert single.maybe_increment_hw(3, T0, LAG, everyone)
    assert single.high_watermark == 5


# -- ISR shrink / expand (§4.2) ----------------------------------------------------------------


def test_shrink_after_replica_lag_time_max(log: PartitionLog) -> None:
    partition = leader_of(log)
    append(partition, 4)
    partition.update_follower(2, 4, 0, 4, T0)
    partition.update_follower(3, 2, 0, 4, T0)
    append(partition, 1)
    assert partition.isr_to_shrink(T0 + LAG, LAG) is None
    assert partition.isr_to_shrink(T0 + LAG + 1, LAG) == IsrChange((1,), 1, 1)
    partition.update_follower(2, 5, 0, 5, T0 + LAG + 1)
    assert partition.isr_to_shrink(T0 + LAG + 1, LAG) == IsrChange((1, 2), 1, 1)


def test_shrink_skipped_while_a_change_is_pending(log: PartitionLog) -> None:
    partition = leader_of(log)
    append(partition, 1)
    partition.begin_isr_change(IsrChange((1, 2), 1, 1))
    assert partition.isr_to_shrink(T0 + 10 * LAG, LAG) is None


def test_expand_needs_leo_at_the_hw_and_at_the_epoch_start(log: PartitionLog) -> None:
    """KAFKA-7128: a new leader's HW can lag its epoch start; a follower between them misses
    records and must not join."""
    partition = Partition(log, 1, 0)
    partition.make_follower(reg(leader=2, epoch=1))
    log.append_as_follower(build_batch([b"a"] * 10, partition_leader_epoch=1))
    partition.follower_high_watermark(4)
    partition.make_leader(reg(leader=1, epoch=2, isr=(1, 2)), T0)
    assert partition.leader_epoch_start_offset == 10 and partition.high_watermark == 4
    partition.update_follower(3, 6, 0, 10, T0)  # ≥ HW, < epoch start
    assert partition.isr_to_expand(3, everyone) is None
    partition.update_follower(3, 10, 0, 10, T0)
    assert partition.isr_to_expand(3, everyone) == IsrChange((1, 2, 3), 2, 2)


def test_expand_needs_leo_at_the_hw(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1, 2))
    append(partition, 10)
    partition.update_follower(2, 10, 0, 10, T0)
    partition.maybe_increment_hw(1, T0, LAG, nobody)
    assert partition.high_watermark == 10
    partition.update_follower(3, 9, 0, 10, T0)
    assert partition.isr_to_expand(3, everyone) is None
    partition.update_follower(3, 10, 0, 10, T0)
    assert partition.isr_to_expand(3, everyone) is not None


def test_expand_needs_an_eligible_broker_and_no_pending_change(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1, 2))
    partition.update_follower(3, 0, 0, 0, T0)
    assert partition.isr_to_expand(3, nobody) is None
    assert partition.isr_to_expand(2, everyone) is None  # already in
    assert partition.isr_to_expand(4, everyone) is None  # not a replica
    partition.begin_isr_change(IsrChange((1,), 1, 1))
    assert partition.isr_to_expand(3, everyone) is None


def test_no_expand_while_recovering_but_a_recovery_change(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1,), recovery=LeaderRecoveryState.RECOVERING)
    partition.update_follower(2, 0, 0, 0, T0)
    assert partition.isr_to_expand(2, everyone) is None
    assert partition.recovery_change() == IsrChange((1,), 1, 1, LeaderRecoveryState.RECOVERED)


# -- AlterPartition answers (§4.3) -------------------------------------------------------------


def test_complete_adopts_the_answer_and_abandon_restores(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1, 2), partition_epoch=4)
    partition.begin_isr_change(IsrChange((1, 2, 3), 1, 4))
    partition.abandon_isr_change()
    assert partition.isr == (1, 2) and partition.maximal_isr == (1, 2)
    partition.begin_isr_change(IsrChange((1, 2, 3), 1, 4))
    assert not partition.complete_isr_change(0, (1, 2, 3), 5, 0)  # another leader epoch
    assert not partition.complete_isr_change(1, (1, 2, 3), 3, 0)  # older partition epoch
    assert partition.complete_isr_change(1, (1, 2, 3), 5, 0)
    assert (partition.isr, partition.partition_epoch, partition.pending_isr) == ((1, 2, 3), 5,
                                                                                  None)


# -- appends and acks (§4.4) -------------------------------------------------------------------


def test_acks_all_under_min_isr_writes_nothing(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1,))
    with pytest.raises(NotEnoughReplicas):
        partition.append_as_leader(build_batch([b"x"]), -1, 2, T0)
    assert log.end_offset == 0
    partition.append_as_leader(build_batch([b"x"]), 1, 2, T0)  # acks=1 goes through
    assert log.end_offset == 1


def test_acks_all_min_isr_uses_the_committed_isr(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1,))
    partition.begin_isr_change(IsrChange((1, 2), 1, 1))  # pending expand does not count
    with pytest.raises(NotEnoughReplicas):
        partition.append_as_leader(build_batch([b"x"]), -1, 2, T0)


def test_check_enough_replicas(log: PartitionLog) -> None:
    partition = leader_of(log, isr=(1, 2))
    append(partition, 3)
    assert partition.check_enough_replicas(3, 2) is None
    partition.update_follower(2, 3, 0, 3, T0)
    partition.maybe_increment_hw(2, T0, LAG, everyone)
    assert partition.check_enough_replicas(3, 2) == Errors.NONE
    partition.complete_isr_change(1, (1,), 2, 0)
    assert partition.check_enough_replicas(3, 2) == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    partition.make_follower(reg(leader=2, epoch=2))
    assert partition.check_enough_replicas(3, 2) == Errors.NOT_LEADER_OR_FOLLOWER


# -- the follower's side -----------------------------------------------------------------------


def test_follower_hw_is_capped_by_its_leo(log: PartitionLog) -> None:
    partition = Partition(log, 2, 0)
    partition.make_follower(reg(leader=1, epoch=1))
    log.append_as_follower(build_batch([b"a"] * 3, partition_leader_epoch=1))
    partition.follower_high_watermark(10)
    assert partition.high_watermark == 3


def test_truncate_below_the_hw_counts_lost_records(log: PartitionLog) -> None:
    partition = Partition(log, 2, 0)
    partition.make_follower(reg(leader=1, epoch=1))
    for offset in range(10):
        log.append_as_follower(build_batch([b"a"], base_offset=offset, partition_leader_epoch=1))
    partition.follower_high_watermark(8)
    assert partition.truncate_to(9) == (1, 0)  # (records removed, of which below the HW)
    assert partition.truncate_to(5) == (4, 3)
    assert partition.high_watermark == 5 and log.end_offset == 5


def test_truncate_inside_a_batch_counts_every_lost_record(log: PartitionLog) -> None:
    partition = Partition(log, 2, 0)
    partition.make_follower(reg(leader=1, epoch=1))
    log.append_as_follower(build_batch([b"a"] * 10, partition_leader_epoch=1))
    partition.follower_high_watermark(10)
    cut = partition.truncate_to(5)
    assert log.end_offset == 0  # the batch holding offset 5 went whole
    assert cut == (10, 10)
