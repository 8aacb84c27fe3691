"""ReplicaManager (broker/replica/manager.py) with IsrUpdater: Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch and metadata, against real logs and images, with followers pumped by hand
through an in-process fake network (tests/unit/replica_harness.py). Rules from
reference/kafka-data-plane.md §3–§6."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from broker.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    EpochEndPartition,
    FetchParams,
    FetchPartition,
    ListOffsetsPartition,
)
from broker.records import build_batch, scan_batches
from kraft.errors import Errors
from metadata.records import PartitionRecord, RemoveTopicRecord, TopicRecord
from tests.unit.replica_harness import (
    LAG_MS,
    OTHER_ID,
    TOPIC,
    TOPIC_ID,
    Cluster,
    batch,
    broker_record,
    run,
    settle,
)


def follower_fetch(offset: int, replica: int, epoch: int = 0, last_fetched_epoch: int = -1,
                   replica_epoch: int = -1, max_wait_ms: int = 0) -> FetchParams:
    return FetchParams([FetchPartition(TOPIC, 0, offset, 1 << 20, current_leader_epoch=epoch,
                                       last_fetched_epoch=last_fetched_epoch)],
                       max_wait_ms=max_wait_ms, replica_id=replica, replica_epoch=replica_epoch)


def list_offset(node: object, timestamp: int, replica: int = -1, epoch: int = -1) -> object:
    return node.manager.list_offsets(  # type: ignore[attr-defined]
        replica, 0, [ListOffsetsPartition(TOPIC, 0, timestamp, epoch)])[0]


async def replicate(cluster: Cluster, *followers: int, rounds: int = 2) -> None:
    for _ in range(rounds):
        for f in followers:
            await cluster.nodes[f].pump()
        await settle()


# -- Produce -----------------------------------------------------------------------------------


def test_invalid_acks_writes_nothing(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        results = await c.nodes[1].produce(batch(), batch(), acks=2)
        assert [r.error for r in results] == [Errors.INVALID_REQUIRED_ACKS] * 2
        assert c.nodes[1].log().end_offset == 0

    run(tmp_path, scenario)


def test_acks_0_and_1_answer_at_once(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        first = (await c.nodes[1].produce(batch(2), acks=0))[0]
        second = (await c.nodes[1].produce(batch(3), acks=1))[0]
        assert (first.error, first.base_offset) == (Errors.NONE, 0)
        assert (second.error, second.base_offset) == (Errors.NONE, 2)
        assert c.nodes[1].log().end_offset == 5
        assert c.nodes[1].partition().high_watermark == 0  # followers have not fetched

    run(tmp_path, scenario)


def test_acks_all_completes_when_the_isr_has_it(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        produce = asyncio.ensure_future(c.nodes[1].produce(batch(3)))
        await settle()
        assert not produce.done()
        await c.nodes[2].pump()   # gets the records
        await settle()
        assert not produce.done()
        await c.nodes[2].pump()   # its next fetch reports them
        await settle()
        assert not produce.done()  # 3 is in the ISR and has not fetched
        await replicate(c, 3)
        result = (await asyncio.wait_for(produce, 5))[0]
        assert (result.error, result.base_offset) == (Errors.NONE, 0)
        assert c.nodes[1].partition().high_watermark == 3

    run(tmp_path, scenario, min_isr=2)


def test_acks_all_below_min_isr_is_refused_before_the_append(tmp_path: Path) -> None:
    """Scenario 3: NOT_ENOUGH_REPLICAS and no bytes appended."""
    async def scenario(c: Cluster) -> None:
        result = (await c.nodes[1].produce(batch(3)))[0]
        assert result.error == Errors.NOT_ENOUGH_REPLICAS
        assert c.nodes[1].log().end_offset == 0

    run(tmp_path, scenario, isr=(1,), min_isr=2)


def test_acks_1_below_min_isr_appends_but_hw_stays(tmp_path: Path) -> None:
    """Scenario 5: the data stays invisible to consumers until the ISR recovers."""
    async def scenario(c: Cluster) -> None:
        c.controller.auto = True
        result = (await c.nodes[1].produce(batch(3), acks=1))[0]
        assert result.error == Errors.NONE
        assert c.nodes[1].partition().high_watermark == 0
        assert (await c.nodes[1].consume(0)).records == b""
        await replicate(c, 2, rounds=3)  # 2 catches up, joins the ISR
        assert c.metadata.partition().isr == (1, 2)
        assert c.nodes[1].partition().high_watermark == 3
        assert (await c.nodes[1].consume(0)).records != b""

    run(tmp_path, scenario, isr=(1,), min_isr=2)


def test_acks_all_times_out_when_the_hw_stalls(tmp_path: Path) -> None:
    """Scenario 4: a follower dies with an acks=all produce parked; the ISR shrinks below
    min ISR, the HW stalls, the request ends REQUEST_TIMED_OUT, the data stays in the log."""
    async def scenario(c: Cluster) -> None:
        c.controller.auto = True
        produce = asyncio.ensure_future(c.nodes[1].produce(batch(2), timeout_ms=200))
        await settle()
        c.clock.advance(LAG_MS + 1)
        c.nodes[1].manager.shrink_isrs()
        await settle()
        assert c.metadata.partition().isr == (1,)
        result = (await asyncio.wait_for(produce, 5))[0]
        assert result.error == Errors.REQUEST_TIMED_OUT
        assert c.nodes[1].log().end_offset == 2
        assert c.nodes[1].partition().high_watermark == 0

    run(tmp_path, scenario, replicas=(1, 2), min_isr=2)


def test_parked_acks_all_ends_not_leader_when_leadership_moves(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        produce = asyncio.ensure_future(c.nodes[1].produce(batch(1)))
        await settle()
        c.change(leader=2)
        result = (await asyncio.wait_for(produce, 5))[0]
        assert result.error == Errors.NOT_LEADER_OR_FOLLOWER

    run(tmp_path, scenario)


def test_parked_acks_all_ends_not_leader_when_the_topic_is_deleted(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        produce = asyncio.ensure_future(c.nodes[1].produce(batch(1)))
        await settle()
        c.metadata.replay(RemoveTopicRecord(TOPIC_ID))
        c.publish()
        result = (await asyncio.wait_for(produce, 5))[0]
        assert result.error == Errors.NOT_LEADER_OR_FOLLOWER

    run(tmp_path, scenario)


def test_produce_to_a_follower_or_unknown_partition(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        assert (await c.nodes[2].produce(batch(), acks=1))[0].error == \
            Errors.NOT_LEADER_OR_FOLLOWER
        assert (await c.nodes[2].produce(batch(), acks=0))[0].error == \
            Errors.NOT_LEADER_OR_FOLLOWER
        assert (await c.nodes[1].produce(batch(), acks=1, partition=7))[0].error == \
            Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert c.nodes[2].log().end_offset == 0

    run(tmp_path, scenario)


def test_produce_to_a_known_partition_not_hosted_here(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        assert (await c.nodes[3].produce(batch(), acks=1))[0].error == \
            Errors.NOT_LEADER_OR_FOLLOWER

    run(tmp_path, scenario, replicas=(1, 2))


def test_duplicate_idempotent_batch_returns_the_original_offsets(tmp_path: Path) -> None:
    """Scenario 15: the retried batch is not written again; its answer is the first one's."""
    async def scenario(c: Cluster) -> None:
        first = build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
        second = build_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2)
        assert (await c.nodes[1].produce(first, acks=1))[0].base_offset == 0
        assert (await c.nodes[1].produce(second, acks=1))[0].base_offset == 2
        again = (await c.nodes[1].produce(first, acks=1))[0]
        assert (again.error, again.base_offset) == (Errors.NONE, 0)
        assert c.nodes[1].log().end_offset == 3

    run(tmp_path, scenario)


def test_duplicate_is_recognised_by_a_new_leader(tmp_path: Path) -> None:
    """Scenario 17: the new leader's producer state came through replication."""
    async def scenario(c: Cluster) -> None:
        first = build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
        await c.nodes[1].produce(first, acks=1)
        await replicate(c, 2, 3)
        c.change(leader=2)
        again = (await c.nodes[2].produce(first, acks=1))[0]
        assert (again.error, again.base_offset) == (Errors.NONE, 0)
        gap = build_batch([b"z"], producer_id=7, producer_epoch=0, base_sequence=5)
        assert (await c.nodes[2].produce(gap, acks=1))[0].error == \
            Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert c.nodes[2].log().end_offset == 2

    run(tmp_path, scenario)


def test_hw_rechecked_after_a_successful_alter_partition(tmp_path: Path) -> None:
    """KAFKA-13091: a shrink committed by AlterPartition must release a parked acks=all
    produce that only waited for the dropped replica."""
    async def scenario(c: Cluster) -> None:
        produce = asyncio.ensure_future(c.nodes[1].produce(batch(1), timeout_ms=60_000))
        await replicate(c, 2)
        assert not produce.done()
        c.clock.advance(LAG_MS + 1)
        await c.nodes[2].pump()  # 2 keeps up
        c.nodes[1].manager.shrink_isrs()
        await settle()
        (call,) = c.controller.calls
        assert call.isr() == (1, 2)
        assert not produce.done()  # pending shrink: the maximal ISR still holds 3
        call.answer()
        result = (await asyncio.wait_for(produce, 5))[0]
        assert result.error == Errors.NONE

    run(tmp_path, scenario, min_isr=2)


# -- ISR changes (AlterPartition) --------------------------------------------------------------


def test_expand_sends_the_maximal_isr_and_the_hw_waits_for_it(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(4), acks=1)
        await replicate(c, 2)
        assert leader.partition().high_watermark == 4
        await replicate(c, 3)
        (call,) = c.controller.calls
        assert call.isr() == (1, 2, 3)
        assert call.isr_epochs() == {1: 11, 2: 12, 3: 13}
        assert (call.request.broker_id, call.request.broker_epoch) == (1, 11)
        assert leader.partition().maximal_isr == (1, 2, 3)
        await leader.produce(batch(1), acks=1)
        await replicate(c, 2)
        assert leader.partition().high_watermark == 4  # 3 is in the maximal ISR, at 4
        call.answer()
        await settle()
        assert leader.partition().isr == (1, 2, 3)
        assert leader.partition().partition_epoch == 1

    run(tmp_path, scenario, isr=(1, 2), replicas=(1, 2, 3))


@pytest.mark.parametrize("error", [Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA])
def test_certain_failure_goes_back_to_the_committed_isr(tmp_path: Path, error: int) -> None:
    async def scenario(c: Cluster) -> None:
        await replicate(c, 3, rounds=1)
        (call,) = c.controller.calls
        call.answer(error)
        await settle()
        partition = c.nodes[1].partition()
        assert partition.pending_isr is None and partition.isr == (1, 2)
        await replicate(c, 3, rounds=1)  # a later fetch tries again
        assert len(c.controller.calls) == 2

    run(tmp_path, scenario, isr=(1, 2))


@pytest.mark.parametrize("error", [Errors.FENCED_LEADER_EPOCH, Errors.INVALID_UPDATE_VERSION,
                                   Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.INVALID_REQUEST,
                                   Errors.NEW_LEADER_ELECTED])
def test_stale_answer_stays_pending_until_new_metadata(tmp_path: Path, error: int) -> None:
    async def scenario(c: Cluster) -> None:
        await replicate(c, 3, rounds=1)
        (call,) = c.controller.calls
        call.answer(error)
        await settle()
        partition = c.nodes[1].partition()
        assert partition.pending_isr == (1, 2, 3)
        await replicate(c, 3, rounds=1)
        assert len(c.controller.calls) == 1  # no new change while pending
        c.change(isr=(1, 2))  # new metadata replaces the pending state
        assert partition.pending_isr is None

    run(tmp_path, scenario, isr=(1, 2))


def test_other_errors_are_retried(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await replicate(c, 3, rounds=1)
        (call,) = c.controller.calls
        call.answer(Errors.NOT_CONTROLLER)
        for _ in range(200):
            if len(c.controller.calls) == 2:
                break
            await asyncio.sleep(0.005)  # the updater's retry backoff (50 ms) is real time
        assert len(c.controller.calls) == 2
        assert c.controller.calls[1].isr() == (1, 2, 3)
        c.controller.calls[1].answer()
        await settle()
        assert c.nodes[1].partition().isr == (1, 2, 3)

    run(tmp_path, scenario, isr=(1, 2))


def test_late_answer_after_a_new_leader_epoch_is_ignored(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await replicate(c, 3, rounds=1)
        (call,) = c.controller.calls
        c.change(leader=1)  # a new leader epoch for the same leader
        call.answer()
        await settle()
        partition = c.nodes[1].partition()
        assert partition.isr == (1, 2) and partition.leader_epoch == 1

    run(tmp_path, scenario, isr=(1, 2))


def test_shrink_after_lag_and_not_before(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(1), acks=1)
        await replicate(c, 2)
        c.clock.advance(LAG_MS)
        c.nodes[1].manager.shrink_isrs()
        await settle()
        assert c.controller.calls == []
        c.clock.advance(1)
        c.nodes[1].manager.shrink_isrs()
        await settle()
        (call,) = c.controller.calls
        assert call.isr() == (1, 2)

    run(tmp_path, scenario)


def test_sibling_partition_change_keeps_the_pending_isr_change(tmp_path: Path) -> None:
    """§4.3: one change in flight per partition; metadata about partition 1 must not drop
    partition 0's pending state (Kafka's makeLeader runs only for partitions in the delta),
    or the leader sends a second AlterPartition for the same version."""
    async def scenario(c: Cluster) -> None:
        await replicate(c, 3, rounds=1)
        assert len(c.controller.calls) == 1
        assert c.nodes[1].partition().pending_isr == (1, 2, 3)
        c.change(partition=1, isr=(1,))
        assert c.nodes[1].partition().pending_isr == (1, 2, 3)
        await replicate(c, 3, rounds=1)
        assert len(c.controller.calls) == 1

    run(tmp_path, scenario, isr=(1, 2), partitions=2)


def test_unclean_leader_recovers_before_anyone_joins(tmp_path: Path) -> None:
    """Scenario 9: a RECOVERING leader first says RECOVERED with the ISR = itself."""
    async def scenario(c: Cluster) -> None:
        c.change(leader=3, isr=(3,), leader_recovery_state=1)
        await settle()
        (call,) = c.controller.calls
        assert call.isr() == (3,) and call.data().leader_recovery_state == 0
        await c.nodes[1].pump()
        await settle()
        assert len(c.controller.calls) == 1  # no expansion while recovering
        call.answer()
        await settle()
        assert not c.nodes[3].partition().is_recovering
        await c.nodes[1].pump()
        await settle()
        assert [x.isr() for x in c.controller.calls[1:]] == [(1, 3)]

    run(tmp_path, scenario, isr=(1, 2))


@pytest.mark.parametrize("state", ["fenced", "shutting_down"])
def test_no_expand_for_an_ineligible_broker(tmp_path: Path, state: str) -> None:
    async def scenario(c: Cluster) -> None:
        c.metadata.replay(broker_record(3, **{state: True}))  # type: ignore[arg-type]
        c.publish()
        await replicate(c, 3)
        assert c.controller.calls == []

    run(tmp_path, scenario, isr=(1, 2))


def test_alter_partition_carries_the_broker_epoch_of_the_fetch(tmp_path: Path) -> None:
    """KIP-903 / KAFKA-14139: the ISR member epochs sent are those the follower fetched with.
    Broker 3 fetched as epoch 13 and then re-registered (empty replaced disk) as epoch 99
    before the request went out: the controller must see 13 and refuse it."""
    async def scenario(c: Cluster) -> None:
        c.nodes[3].epoch = 13
        leader = c.nodes[1].manager
        await leader.fetch(follower_fetch(0, 3, replica_epoch=13))
        c.metadata.replay(broker_record(3, epoch=99))
        c.publish()
        await settle()
        (call,) = c.controller.calls
        assert call.isr_epochs()[3] == 13

    run(tmp_path, scenario, isr=(1, 2))


# -- Fetch -------------------------------------------------------------------------------------


def test_fetch_epoch_fencing(tmp_path: Path) -> None:
    """§3.2 and scenario 18."""
    async def scenario(c: Cluster) -> None:
        c.change(leader=1)  # epoch 1
        leader, follower = c.nodes[1], c.nodes[2]
        assert (await leader.consume(0, epoch=0)).error == Errors.FENCED_LEADER_EPOCH
        assert (await leader.consume(0, epoch=2)).error == Errors.UNKNOWN_LEADER_EPOCH
        assert (await leader.consume(0, epoch=1)).error == Errors.NONE
        assert (await leader.consume(0, epoch=-1)).error == Errors.NONE
        assert (await follower.consume(0, epoch=1)).error == Errors.NOT_LEADER_OR_FOLLOWER
        fenced = await leader.consume(0, epoch=0)
        assert fenced.current_leader == (1, 1)
        for ts in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
            assert list_offset(leader, ts, epoch=0).error == Errors.FENCED_LEADER_EPOCH
            assert list_offset(leader, ts, epoch=2).error == Errors.UNKNOWN_LEADER_EPOCH
            assert list_offset(follower, ts, epoch=1).error == Errors.NOT_LEADER_OR_FOLLOWER

    run(tmp_path, scenario)


def test_consumer_reads_only_below_the_hw(tmp_path: Path) -> None:
    """§6 rule 1, 2 and scenario 19."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        for _ in range(3):
            await leader.produce(batch(2), acks=1)
        await leader.manager.fetch(follower_fetch(2, 2))
        await leader.manager.fetch(follower_fetch(4, 3))
        assert leader.partition().high_watermark == 2
        below = await leader.consume(0)
        assert below.error == Errors.NONE and below.high_watermark == 2
        assert below.records == leader.log().read(0, 1 << 20, 2)
        for offset in (2, 3, 6):  # [HW, LEO]: empty, not an error
            empty = await leader.consume(offset)
            assert (empty.error, empty.records) == (Errors.NONE, b"")
        assert (await leader.consume(7)).error == Errors.OFFSET_OUT_OF_RANGE
        assert (await leader.consume(-1)).error == Errors.OFFSET_OUT_OF_RANGE

    run(tmp_path, scenario)


def test_consumer_offset_below_log_start_is_out_of_range(tmp_path: Path) -> None:
    """Scenario 21."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        for _ in range(3):
            await leader.produce(batch(2), acks=1)
        leader.log().advance_start_offset(4)
        assert (await leader.consume(2)).error == Errors.OFFSET_OUT_OF_RANGE
        assert list_offset(leader, EARLIEST_TIMESTAMP).offset == 4

    run(tmp_path, scenario, replicas=(1,))


def test_follower_fetch_from_a_non_replica(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1].manager
        with_epoch = (await leader.fetch(follower_fetch(0, 3, epoch=0)))[0]
        without = (await leader.fetch(follower_fetch(0, 3, epoch=-1)))[0]
        assert with_epoch.error == Errors.UNKNOWN_LEADER_EPOCH
        assert without.error == Errors.NOT_LEADER_OR_FOLLOWER

    run(tmp_path, scenario, replicas=(1, 2))


def test_follower_fetch_with_a_stale_broker_epoch_is_refused(tmp_path: Path) -> None:
    """KIP-903: and it neither moves the follower's state nor the ISR."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(2), acks=1)
        stale = (await leader.manager.fetch(follower_fetch(2, 3, replica_epoch=5)))[0]
        assert stale.error == Errors.NOT_LEADER_OR_FOLLOWER
        assert leader.partition().followers[3].leo == -1
        assert c.controller.calls == []
        current = (await leader.manager.fetch(follower_fetch(2, 3, replica_epoch=13)))[0]
        assert current.error == Errors.NONE
        await settle()
        assert [call.isr() for call in c.controller.calls] == [(1, 2, 3)]

    run(tmp_path, scenario, isr=(1, 2))


def test_follower_fetch_with_a_newer_broker_epoch_is_served(tmp_path: Path) -> None:
    """Kafka's Replica.updateFetchStateOrThrow fences `replicaEpoch < registered epoch` only:
    a broker that re-registered (epoch 14) may fetch before this leader's image shows it."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(2), acks=1)
        newer = (await leader.manager.fetch(follower_fetch(0, 3, replica_epoch=14)))[0]
        assert newer.error == Errors.NONE and newer.records != b""

    run(tmp_path, scenario)


def test_follower_reads_up_to_the_leo(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(3), acks=1)
        result = (await leader.manager.fetch(follower_fetch(0, 2)))[0]
        assert result.records == leader.log().read(0, 1 << 20, 3)
        assert result.high_watermark == 0

    run(tmp_path, scenario)


def test_diverging_follower_gets_the_epoch_end_and_no_state_update(tmp_path: Path) -> None:
    """§3.3 step 2: leader epochs {0: 0, 1: 2}; a follower at 4 with last epoch 0 diverges at
    (0, 2); one with an epoch the leader never had below the latest gets the floor epoch."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(2), acks=1)
        c.change(leader=1)
        await leader.produce(batch(2), acks=1)
        assert leader.log().epoch_entries() == [(0, 0), (1, 2)]
        result = (await leader.manager.fetch(follower_fetch(4, 2, epoch=1,
                                                            last_fetched_epoch=0)))[0]
        assert result.diverging_epoch is not None
        assert (result.diverging_epoch.epoch, result.diverging_epoch.end_offset) == (0, 2)
        assert result.records == b""
        assert leader.partition().followers[2].leo == -1
        ok = (await leader.manager.fetch(follower_fetch(2, 2, epoch=1,
                                                        last_fetched_epoch=0)))[0]
        assert ok.diverging_epoch is None and ok.records != b""
        ahead = (await leader.manager.fetch(follower_fetch(4, 3, epoch=1,
                                                           last_fetched_epoch=5)))[0]
        assert ahead.error == Errors.OFFSET_OUT_OF_RANGE  # epoch undefined on the leader

    run(tmp_path, scenario)


def test_consumer_long_poll_is_woken_by_the_hw(tmp_path: Path) -> None:
    """§6 rule 5: a consumer fetch at the HW waits, and an append that moves the HW (ISR =
    the leader) answers it before max_wait."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        poll = asyncio.ensure_future(leader.consume(0, max_wait_ms=30_000))
        await settle()
        assert not poll.done()
        await leader.produce(batch(2), acks=1)
        result = await asyncio.wait_for(poll, 5)
        assert result.error == Errors.NONE and result.records != b""
        assert result.high_watermark == 2

    run(tmp_path, scenario, replicas=(1,))


def test_follower_long_poll_is_woken_by_an_append(tmp_path: Path) -> None:
    """§4.4: a parked follower fetch completes when the LEO grows, not the HW."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        poll = asyncio.ensure_future(
            leader.manager.fetch(follower_fetch(0, 2, max_wait_ms=30_000)))
        await settle()
        assert not poll.done()
        await leader.produce(batch(2), acks=1)
        result = (await asyncio.wait_for(poll, 5))[0]
        assert result.records != b"" and result.high_watermark == 0

    run(tmp_path, scenario)


def test_long_poll_min_bytes_and_max_wait(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(1), acks=1)
        loop = asyncio.get_running_loop()
        start = loop.time()
        result = await leader.consume(0, max_wait_ms=50, min_bytes=1 << 20)
        assert loop.time() - start >= 0.04  # waited for more, then answered what it has
        assert result.records != b""
        quick = await leader.consume(1, max_wait_ms=0)
        assert quick.records == b""

    run(tmp_path, scenario, replicas=(1,))


def test_consumer_long_poll_ends_not_leader_when_leadership_moves(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        poll = asyncio.ensure_future(c.nodes[1].consume(0, max_wait_ms=30_000))
        await settle()
        c.change(leader=2)
        result = await asyncio.wait_for(poll, 5)
        assert result.error == Errors.NOT_LEADER_OR_FOLLOWER

    run(tmp_path, scenario)


# -- ListOffsets and OffsetForLeaderEpoch ------------------------------------------------------


def test_list_offsets_earliest_latest(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(5), acks=1)
        await leader.manager.fetch(follower_fetch(3, 2))
        assert list_offset(leader, EARLIEST_TIMESTAMP).offset == 0
        latest = list_offset(leader, LATEST_TIMESTAMP)
        assert (latest.error, latest.offset, latest.leader_epoch) == (Errors.NONE, 3, 0)
        assert list_offset(leader, LATEST_TIMESTAMP, replica=2).offset == 5

    run(tmp_path, scenario, replicas=(1, 2))


def test_list_offsets_latest_not_available_while_hw_below_epoch_start(tmp_path: Path) -> None:
    """§3.5 rule 3: a new leader whose HW lags its epoch start answers OFFSET_NOT_AVAILABLE."""
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(4), acks=1)
        await replicate(c, 2, rounds=1)  # 2 has 4 records but a HW of 0
        c.change(leader=2)
        new = c.nodes[2]
        assert new.partition().leader_epoch_start_offset == 4
        assert new.partition().high_watermark < 4
        assert list_offset(new, LATEST_TIMESTAMP).error == Errors.OFFSET_NOT_AVAILABLE
        await new.manager.fetch(follower_fetch(4, 1, epoch=1, last_fetched_epoch=0))
        assert new.partition().high_watermark == 4
        assert list_offset(new, LATEST_TIMESTAMP).offset == 4

    run(tmp_path, scenario, replicas=(1, 2))


def test_consumer_fetch_waits_while_a_new_leaders_hw_is_below_its_epoch_start(
        tmp_path: Path) -> None:
    """The HW a consumer sees never steps back across a leader change: the new leader's HW
    (learned as a follower, a fetch behind) is not shown until the followers confirm the
    epoch's start; meanwhile a consumer fetch parks, and answers OFFSET_NOT_AVAILABLE when
    its wait runs out."""
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(4), acks=1)
        await replicate(c, 2, rounds=1)  # 2 has 4 records but a HW of 0
        c.change(leader=2)
        new = c.nodes[2]
        assert new.partition().high_watermark < new.partition().leader_epoch_start_offset == 4
        timed_out = await new.consume(0, epoch=1, max_wait_ms=0)
        assert (timed_out.error, timed_out.high_watermark, timed_out.records) == \
            (Errors.OFFSET_NOT_AVAILABLE, -1, b"")
        parked = asyncio.ensure_future(new.consume(0, epoch=1, max_wait_ms=30_000))
        await settle()
        assert not parked.done()
        await new.manager.fetch(follower_fetch(4, 1, epoch=1, last_fetched_epoch=0))
        answer = await asyncio.wait_for(parked, 5)
        assert (answer.error, answer.high_watermark) == (Errors.NONE, 4)
        assert answer.records

    run(tmp_path, scenario, replicas=(1, 2))


def test_consumer_below_the_hw_reads_while_an_isr_member_is_paused_after_a_leader_change(
        tmp_path: Path) -> None:
    """Issue 28, defect 6: after a leader change the new leader's HW (4, learned a fetch
    behind) is below its epoch's start (6) until every ISR member has fetched from it; with
    member 3 paused that lasts up to replica.lag.time.max.ms. A consumer below the HW reads
    up to it meanwhile, as in Kafka; one that had read up to the old leader's HW (6) is not
    shown the lower one (it waits, as the test above shows) and sees 6 once the paused
    member is back."""
    async def scenario(c: Cluster) -> None:
        old = c.nodes[1]
        await old.produce(batch(4), acks=1)
        await replicate(c, 2, 3, rounds=3)  # everyone holds 0-3 and knows HW 4
        await old.produce(batch(2), acks=1)
        await replicate(c, 2, 3, rounds=1)
        await c.nodes[2].pump()  # 2 fetches at 6 and learns HW 4; then 3 confirms 6
        await c.nodes[3].pump()
        assert old.partition().high_watermark == 6 == (await old.consume(6)).high_watermark
        c.change(leader=2, isr=(2, 3))  # 1 is gone; 3 is paused from here on
        new = c.nodes[2]
        assert (new.partition().high_watermark, new.partition().leader_epoch_start_offset) \
            == (4, 6)

        behind = await new.consume(0, epoch=1)
        assert (behind.error, behind.high_watermark) == (Errors.NONE, 4)
        assert [(b.base_offset, b.next_offset) for b in scan_batches(behind.records)] \
            == [(0, 4)]
        caught_up = await new.consume(6, epoch=1)
        assert (caught_up.error, caught_up.high_watermark) == (Errors.OFFSET_NOT_AVAILABLE, -1)

        await c.nodes[3].pump()  # the paused member is back and fetches at 6
        answer = await new.consume(6, epoch=1)
        assert (answer.error, answer.high_watermark, answer.records) == (Errors.NONE, 6, b"")

    run(tmp_path, scenario)


def test_a_write_that_fails_takes_the_log_dir_offline(tmp_path: Path) -> None:
    """An I/O error on an append takes the whole log dir offline (the broker then stops:
    server/broker_role.py); nothing in it is served any more, even once the disk has room."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        failed: list[str] = []
        leader.logs.on_dir_failure = lambda directory, exc: failed.append(directory)
        assert (await leader.produce(batch(2), acks=1))[0].error == Errors.NONE
        leader.logs.faults.disk_full = True
        full = (await leader.produce(batch(1), acks=1))[0]
        assert full.error == Errors.KAFKA_STORAGE_ERROR
        assert failed == [os.path.dirname(leader.log().directory)]
        leader.logs.faults.disk_full = False
        assert (await leader.produce(batch(1), acks=1))[0].error == Errors.KAFKA_STORAGE_ERROR
        assert (await leader.consume(0)).error == Errors.KAFKA_STORAGE_ERROR
        assert (await leader.manager.fetch(follower_fetch(2, 2)))[0].error == \
            Errors.KAFKA_STORAGE_ERROR
        assert len(failed) == 1

    run(tmp_path, scenario)


def test_a_new_replica_on_an_offline_log_dir_stays_offline_and_the_metadata_goes_on(
        tmp_path: Path) -> None:
    """Found by the chaos campaign: after a full disk took the dir offline, a metadata update
    that gave the broker a new replica made get_or_create raise into the Raft listener,
    which stopped the node with that error instead of the log dir's."""
    async def scenario(c: Cluster) -> None:
        node = c.nodes[2]
        node.logs.fail_dir(node.log().directory, OSError(28, "No space left on device"))
        c.create_topic(topic="later", topic_id="0b7e6f0e-0000-4000-8000-0000000000cc")
        c.publish()
        assert ("later", 0) not in node.manager.partitions
        assert node.logs.get("later", 0) is None
        assert ("later", 0) in c.nodes[1].manager.partitions  # the others carry on

    run(tmp_path, scenario)


def test_offset_for_leader_epoch(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(2), acks=1)
        c.change(leader=1)
        c.change(leader=1)
        await leader.produce(batch(1), acks=1)
        answers = leader.manager.end_offsets_for_epochs(-1, [
            EpochEndPartition(TOPIC, 0, 0, 2), EpochEndPartition(TOPIC, 0, 1, 2),
            EpochEndPartition(TOPIC, 0, 2, 2), EpochEndPartition(TOPIC, 0, 3, 2),
            EpochEndPartition(TOPIC, 0, 0, 1)])
        assert [(a.error, a.leader_epoch, a.end_offset) for a in answers] == [
            (Errors.NONE, 0, 2), (Errors.NONE, 0, 2), (Errors.NONE, 2, 3),
            (Errors.NONE, -1, -1), (Errors.FENCED_LEADER_EPOCH, -1, -1)]

    run(tmp_path, scenario)


# -- metadata ----------------------------------------------------------------------------------


def test_removed_replica_deletes_its_log(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(2), acks=1)
        await replicate(c, 3, rounds=1)
        directory = c.nodes[3].log().directory
        assert os.path.isdir(directory)
        c.change(replicas=(1, 2), isr=(1, 2))
        assert (TOPIC, 0) not in c.nodes[3].manager.partitions
        assert c.nodes[3].log() is None and not os.path.exists(directory)
        assert c.nodes[3].manager.fetchers.fetchers[1].partitions == {}

    run(tmp_path, scenario)


def test_deleted_topic_deletes_its_logs(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(2), acks=1)
        dirs = [n.log().directory for n in c.nodes.values()]
        c.metadata.replay(RemoveTopicRecord(TOPIC_ID))
        c.publish()
        for node, directory in zip(c.nodes.values(), dirs, strict=True):
            assert node.manager.partitions == {}
            assert not os.path.exists(directory)
        assert (await c.nodes[1].produce(batch(1), acks=1))[0].error == \
            Errors.UNKNOWN_TOPIC_OR_PARTITION

    run(tmp_path, scenario)


def test_recreated_topic_never_serves_old_data(tmp_path: Path) -> None:
    """Scenario 27: same name, new id, deleted and created in one image."""
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(3, b"old"), acks=1)
        c.metadata.replay(RemoveTopicRecord(TOPIC_ID), TopicRecord(TOPIC, OTHER_ID),
                          PartitionRecord(0, OTHER_ID, (1, 2, 3), (1, 2, 3), leader=1))
        c.publish()
        leader = c.nodes[1]
        assert leader.log().topic_id == OTHER_ID and leader.log().end_offset == 0
        assert (await leader.consume(0)).records == b""
        old = (await leader.manager.fetch(FetchParams([FetchPartition(
            TOPIC, 0, 0, 1 << 20, topic_id=TOPIC_ID)], max_wait_ms=0)))[0]
        assert old.error == Errors.INCONSISTENT_TOPIC_ID and old.records == b""

    run(tmp_path, scenario, replicas=(1,))


def test_stray_log_of_a_deleted_topic_is_removed_at_activation(tmp_path: Path) -> None:
    """The broker was down while the topic was deleted and recreated."""
    async def main() -> None:
        c = Cluster(tmp_path, brokers=(1,))
        c.create_topic(replicas=(1,))
        c.start()
        await c.nodes[1].produce(batch(3, b"old"), acks=1)
        await c.close()
        c.metadata.replay(RemoveTopicRecord(TOPIC_ID), TopicRecord(TOPIC, OTHER_ID),
                          PartitionRecord(0, OTHER_ID, (1,), (1,), leader=1))
        again = Cluster(tmp_path, brokers=())
        again.metadata = c.metadata
        node = again.add_node(1)
        assert node.log().topic_id == TOPIC_ID
        again.start()
        try:
            assert node.log().topic_id == OTHER_ID and node.log().end_offset == 0
        finally:
            await again.close()

    asyncio.run(main())


def test_stale_partition_epoch_is_ignored(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.change(isr=(1, 2))
        c.change(isr=(1, 2, 3))
        partition = c.nodes[1].partition()
        assert partition.partition_epoch == 2
        # An AlterPartition answer already applied a newer version than this image holds.
        partition.partition_epoch = 5
        c.change(isr=(1,))
        assert partition.isr == (1, 2, 3)

    run(tmp_path, scenario)


def test_metadata_is_ignored_until_activated(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        c.create_topic()
        c.publish()
        try:
            assert c.nodes[1].manager.partitions == {}
            c.nodes[1].manager.activate()
            assert c.nodes[1].partition().is_leader
        finally:
            await c.close()

    asyncio.run(main())


def test_dedup_window_is_five_batches(tmp_path: Path) -> None:
    """Scenario 16 / KAFKA-5494: a duplicate at every position of the last 5 answers the
    original offsets; one older than the window gets OUT_OF_ORDER_SEQUENCE_NUMBER; never a
    second copy. An older producer epoch is fenced."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        batches = [build_batch([b"%d" % i], producer_id=9, producer_epoch=1, base_sequence=i)
                   for i in range(6)]
        for i, item in enumerate(batches):
            assert (await leader.produce(item, acks=1))[0].base_offset == i
        for i in range(1, 6):
            again = (await leader.produce(batches[i], acks=1))[0]
            assert (again.error, again.base_offset) == (Errors.NONE, i)
        oldest = (await leader.produce(batches[0], acks=1))[0]
        assert oldest.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        fenced = build_batch([b"z"], producer_id=9, producer_epoch=0, base_sequence=6)
        assert (await leader.produce(fenced, acks=1))[0].error == Errors.INVALID_PRODUCER_EPOCH
        assert leader.log().end_offset == 6

    run(tmp_path, scenario)


def test_truncated_idempotent_batch_is_not_a_duplicate_afterwards(tmp_path: Path) -> None:
    """KAFKA-12153: producer state is rebuilt when truncation drops a producer's batch, so the
    retried batch is written again instead of answering an offset that now holds another
    record."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await a.produce(build_batch([b"r0"]), acks=1)
        await b.pump()
        retried = build_batch([b"p0"], producer_id=7, producer_epoch=0, base_sequence=0)
        assert (await a.produce(retried, acks=1))[0].base_offset == 1  # never replicated
        c.change(leader=2, isr=(2,))
        await b.produce(build_batch([b"r1"]), acks=1)
        await a.pump()  # diverging: A drops p0
        await a.pump()
        assert a.log().end_offset == 2
        c.change(leader=1, isr=(1, 2))
        again = (await a.produce(retried, acks=1))[0]
        assert (again.error, again.base_offset) == (Errors.NONE, 2)
        assert a.log().end_offset == 3

    run(tmp_path, scenario, replicas=(1, 2))


def test_first_batch_rule_and_later_partitions_that_do_not_fit(tmp_path: Path) -> None:
    """§6 rule 4 / scenario 22: the first batch comes whole past both limits; a later
    partition whose first batch does not fit gets empty records, no error."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        big = build_batch([b"x" * 1000])
        for p in (0, 1):
            await leader.produce(big, acks=1, partition=p)
        params = FetchParams([FetchPartition(TOPIC, p, 0, 100) for p in (0, 1)],
                             max_wait_ms=0, max_bytes=200)
        first, second = await leader.manager.fetch(params)
        assert first.records == leader.log(0).read(0, 1 << 20, 1)
        assert len(first.records) > 1000
        assert (second.error, second.records) == (Errors.NONE, b"")

    run(tmp_path, scenario, replicas=(1,), partitions=2)


def test_controlled_shutdown_stops_fetching_partitions_left(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        assert ("t", 0) in c.nodes[3].fetcher(1).partitions
        c.metadata.replay(broker_record(3, shutting_down=True))
        c.change(isr=(1, 2))  # the controller takes it out of the ISR
        assert ("t", 0) not in c.nodes[3].fetcher(1).partitions

    run(tmp_path, scenario)


def test_fencing_a_caught_up_non_isr_follower_releases_the_hw(tmp_path: Path) -> None:
    """§3.5: a caught-up eligible replica outside the ISR holds the HW; once the image fences
    it, the HW is re-evaluated at once (no fetch needed)."""
    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        await leader.produce(batch(2), acks=1)
        await leader.manager.fetch(follower_fetch(2, 2))
        await leader.manager.fetch(follower_fetch(2, 3))  # caught up: expand requested
        await settle()
        (call,) = c.controller.calls
        call.answer(Errors.INELIGIBLE_REPLICA)
        await settle()
        await leader.produce(batch(2), acks=1)
        await leader.manager.fetch(follower_fetch(4, 2))
        assert leader.partition().high_watermark == 2  # 3 (caught up by time) holds it
        c.metadata.replay(broker_record(3, fenced=True))
        c.publish()
        assert leader.partition().high_watermark == 4

    run(tmp_path, scenario, isr=(1, 2))


def test_init_producer_id(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path, brokers=(1,))
        ids = iter([1000, 1001])

        async def allocate() -> int:
            value = next(ids, None)
            if value is None:
                raise ConnectionError("controller unreachable")
            return value

        manager = c.nodes[1].manager
        try:
            assert (await manager.init_producer_id(None)).error == \
                Errors.COORDINATOR_NOT_AVAILABLE  # no allocator
            manager._allocate_producer_id = allocate
            first = await manager.init_producer_id(None)
            second = await manager.init_producer_id(None)
            assert [(r.error, r.producer_id, r.producer_epoch) for r in (first, second)] == [
                (Errors.NONE, 1000, 0), (Errors.NONE, 1001, 0)]
            assert (await manager.init_producer_id(None)).error == \
                Errors.COORDINATOR_NOT_AVAILABLE
            assert (await manager.init_producer_id("txn")).error == Errors.UNSUPPORTED_VERSION
        finally:
            await c.close()

    asyncio.run(main())


# -- big images ----------------------------------------------------------------------------------


def test_a_big_image_is_applied_in_turns_that_leave_the_loop_free(tmp_path: Path) -> None:
    """A topic of 1,000 partitions is applied a few at a time: other tasks run between turns,
    every partition is there at the end, and each turn holds the loop about APPLY_TURN_S."""
    async def scenario(cluster: Cluster) -> None:
        node = cluster.nodes[1]
        cluster.create_topic(replicas=(1, 2), partitions=1000, topic="big",
                             topic_id=OTHER_ID)
        ticks = 0
        stop = False

        async def ticker() -> None:
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.ensure_future(ticker())
        cluster.publish(only=[1])
        assert len([tp for tp in node.manager.partitions if tp[0] == "big"]) < 1000
        while node.manager._apply_task is not None and not node.manager._apply_task.done():
            await asyncio.sleep(0)
        stop = True
        await task
        assert len([tp for tp in node.manager.partitions if tp[0] == "big"]) == 1000
        assert ticks > 1  # the loop ran other work while the image was being applied

    run(tmp_path, scenario)


def test_a_newer_image_replaces_the_rest_of_a_big_apply(tmp_path: Path) -> None:
    """The topic is deleted while its partitions are still being created: what was created is
    deleted, nothing more is, and no log of it is left."""
    async def scenario(cluster: Cluster) -> None:
        node = cluster.nodes[1]
        cluster.create_topic(replicas=(1, 2), partitions=1000, topic="big",
                             topic_id=OTHER_ID)
        cluster.publish(only=[1])
        await asyncio.sleep(0)
        assert node.manager._apply_task is not None and not node.manager._apply_task.done()
        cluster.metadata.replay(RemoveTopicRecord(OTHER_ID))
        cluster.publish(only=[1])
        await settle()
        assert not [tp for tp in node.manager.partitions if tp[0] == "big"]
        assert node.manager.logs.get("big", 0) is None

    run(tmp_path, scenario)
