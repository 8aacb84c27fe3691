"""Replica fetchers (broker/replica/fetcher.py) in a tiny in-process cluster: followers fetch
from another broker's ReplicaManager, truncate on a diverging epoch, recover from
OFFSET_OUT_OF_RANGE, and converge after failovers (reference/kafka-data-plane.md §3.3, §3.4,
§8, §9)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from broker.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
    ListOffsetsPartition,
    ListOffsetsResult,
)
from broker.records import build_batch, decode_records, scan_batches
from broker.replica.manager import ReplicaConfig
from kraft.errors import Errors
from metadata.records import LeaderRecoveryState
from tests.unit.replica_harness import (
    TOPIC,
    Cluster,
    InProcessLeader,
    Node,
    batch,
    broker_epoch,
    broker_record,
    run,
    settle,
)


def contents(node: Node) -> bytes:
    log = node.log()
    return log.read(log.start_offset, 1 << 30, log.end_offset)  # type: ignore[no-any-return]


def values(node: Node) -> list[bytes | None]:
    data = contents(node)
    return [r.value for frame in scan_batches(data)
            for r in decode_records(data[frame.position:frame.position + frame.size])]


async def produce_each(node: Node, *names: bytes) -> None:
    for name in names:
        result = (await node.produce(build_batch([name]), acks=1))[0]
        assert result.error == Errors.NONE, result


def test_follower_learns_the_hw_one_round_behind(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(3), acks=1)
        follower = c.nodes[2]
        await follower.pump()
        assert follower.log().end_offset == 3 and follower.partition().high_watermark == 0
        await follower.pump()
        assert c.nodes[1].partition().high_watermark == 3
        assert follower.partition().high_watermark == 3
        assert contents(follower) == contents(c.nodes[1])

    run(tmp_path, scenario, replicas=(1, 2))


def test_follower_fetch_carries_its_state(tmp_path: Path) -> None:
    """§3.3: replica id and broker epoch, fetch offset = LEO, last fetched epoch, log start."""
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(2), acks=1)
        follower = c.nodes[2]
        await follower.pump()
        await follower.pump()
        assert follower.client is not None
        params = follower.client.fetch_calls[-1]
        (request,) = params.partitions
        assert (params.replica_id, params.replica_epoch) == (2, 12)
        assert (request.fetch_offset, request.current_leader_epoch,
                request.last_fetched_epoch, request.log_start_offset) == (2, 0, 0, 0)

    run(tmp_path, scenario, replicas=(1, 2))


def test_epoch_change_restarts_fetching_in_the_new_epoch(tmp_path: Path) -> None:
    """KAFKA-7164: a new leader epoch (same leader) resets the fetcher, whose fetches then
    carry the new epoch."""
    async def scenario(c: Cluster) -> None:
        follower = c.nodes[2]
        c.change(leader=1)
        assert follower.fetcher(1).partitions[("t", 0)].leader_epoch == 1
        await c.nodes[1].produce(batch(1), acks=1)
        await follower.pump()
        assert follower.client is not None
        assert follower.client.fetch_calls[-1].partitions[0].current_leader_epoch == 1
        assert follower.log().end_offset == 1

    run(tmp_path, scenario, replicas=(1, 2))


def test_restarted_follower_keeps_records_above_its_stale_hw(tmp_path: Path) -> None:
    """KAFKA-1211 / KIP-101 scenario 1: truncate by leader epoch, never by the HW."""
    async def scenario(c: Cluster) -> None:
        leader, follower = c.nodes[1], c.nodes[2]
        await produce_each(leader, b"a", b"b")
        await follower.pump()
        assert follower.partition().high_watermark == 0 and follower.log().end_offset == 2
        c.change(leader=1)  # the leader bounced: epoch 1
        await follower.pump()
        assert values(follower) == [b"a", b"b"]
        c.change(leader=2, isr=(2,))  # now the follower leads: nothing committed is lost
        assert values(follower) == [b"a", b"b"]

    run(tmp_path, scenario, replicas=(1, 2))


def test_old_leader_truncates_its_unacked_suffix(tmp_path: Path) -> None:
    """Scenario 2 and KAFKA-14704: the restarted old leader gets a diverging epoch, truncates
    to the new epoch's start without taking that answer's HW first, then matches the new
    leader byte for byte."""
    async def scenario(c: Cluster) -> None:
        a, b, d = c.nodes[1], c.nodes[2], c.nodes[3]
        await produce_each(a, b"0", b"1", b"2", b"3", b"4")
        for _ in range(2):
            await b.pump()
            await d.pump()
        assert a.partition().high_watermark == 5
        await produce_each(a, b"x5", b"x6")  # never replicated
        c.change(leader=2, isr=(2, 3))
        await produce_each(b, b"y5", b"y6", b"y7")
        await d.pump()
        await d.pump()
        assert b.partition().high_watermark == 8
        assert a.partition().high_watermark == 5 and a.log().end_offset == 7
        await a.pump()  # the diverging answer
        assert a.log().end_offset == 5
        assert a.partition().high_watermark == 5  # not B's 8 capped at A's 7 (KAFKA-14704)
        assert a.manager.records_lost == 0
        await a.pump()
        await a.pump()
        assert contents(a) == contents(b)
        assert values(a)[5:] == [b"y5", b"y6", b"y7"]
        assert a.partition().high_watermark == 8

    run(tmp_path, scenario)


def test_kafka_14704_diverging_answer_hw_never_exposes_the_suffix(tmp_path: Path) -> None:
    """Checked at the follower: between the diverging answer and the refetch, no consumer-
    visible offset (HW) covers records the leader does not have."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await produce_each(a, b"0", b"1")
        await b.pump()
        await b.pump()
        await produce_each(a, b"x2", b"x3")
        c.change(leader=2, isr=(2,))
        await produce_each(b, b"y2", b"y3", b"y4")
        assert b.partition().high_watermark == 5
        await a.pump()
        assert a.partition().high_watermark <= a.log().end_offset == 2

    run(tmp_path, scenario, replicas=(1, 2))


def test_simultaneous_crash_different_records_at_one_offset_converge(tmp_path: Path) -> None:
    """KIP-101 scenario 2: A holds x1 at offset 1 in epoch 0, B wrote y1 there in epoch 1;
    A must end up with B's record."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await produce_each(a, b"0")
        await b.pump()
        await produce_each(a, b"x1")
        c.change(leader=2, isr=(2,))
        await produce_each(b, b"y1")
        assert values(a) == [b"0", b"x1"] and values(b) == [b"0", b"y1"]
        for _ in range(3):
            await a.pump()
        assert contents(a) == contents(b)
        assert values(a) == [b"0", b"y1"]

    run(tmp_path, scenario, replicas=(1, 2))


def test_double_fast_failover_converges(tmp_path: Path) -> None:
    """KAFKA-6361 / KIP-279, scenario 20: A in epoch 0, B briefly in epoch 1 with
    unreplicated writes, A again in epoch 2. B iterates (floor epoch) and converges."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await produce_each(a, b"0", b"1")
        await b.pump()
        await b.pump()
        await produce_each(a, b"a2")
        c.change(leader=2, isr=(2,))
        await produce_each(b, b"b2", b"b3")
        c.change(leader=1, isr=(1,))
        await produce_each(a, b"a3")
        assert a.log().epoch_entries() == [(0, 0), (2, 3)]
        assert b.log().epoch_entries() == [(0, 0), (1, 2)]
        for _ in range(4):
            await b.pump()
        assert contents(a) == contents(b)
        assert values(b) == [b"0", b"1", b"a2", b"a3"]
        assert b.log().epoch_entries() == a.log().epoch_entries()

    run(tmp_path, scenario, replicas=(1, 2))


def test_follower_that_never_had_the_epoch_checks_again(tmp_path: Path) -> None:
    """§3.4: the leader's floor epoch is one the follower lacks: truncate to its own end of
    that epoch and check again on the next fetch."""
    async def scenario(c: Cluster) -> None:
        a, b, d = c.nodes[1], c.nodes[2], c.nodes[3]
        await produce_each(a, b"0")
        for node in (b, d):
            await node.pump()
        c.change(leader=2, isr=(2, 3))           # epoch 1: B writes, D replicates
        await produce_each(b, b"b1", b"b2")
        await d.pump()
        c.change(leader=3, isr=(3,))             # epoch 2: D writes
        await produce_each(d, b"d3")
        c.change(leader=1, isr=(1,))             # epoch 3 on A, which never saw 1 or 2
        await produce_each(a, b"a1")
        for _ in range(4):
            await d.pump()
        assert contents(d) == contents(a)

    run(tmp_path, scenario)


def test_unclean_election_truncation_counts_lost_records(tmp_path: Path) -> None:
    """Scenario 9: the lagging replica leads (RECOVERING); the old ISR member truncates to
    its epoch start; exactly offsets 2..4 vanish and are counted."""
    async def scenario(c: Cluster) -> None:
        a, b, lagging = c.nodes[1], c.nodes[2], c.nodes[3]
        await produce_each(a, b"0", b"1")
        await lagging.pump()
        await settle()
        (expand,) = c.controller.calls  # it caught up once; the controller says no
        expand.answer(Errors.INELIGIBLE_REPLICA)
        await settle()
        await b.pump()
        await produce_each(a, b"2", b"3", b"4")
        await b.pump()
        await b.pump()
        assert a.partition().isr == (1, 2)
        assert a.partition().high_watermark == 5
        c.change(leader=3, isr=(3,), leader_recovery_state=LeaderRecoveryState.RECOVERING)
        assert lagging.partition().is_leader and lagging.partition().is_recovering
        await produce_each(lagging, b"n2", b"n3")
        await a.pump()
        assert a.log().end_offset == 2
        assert a.manager.records_lost == 3
        for _ in range(3):
            await a.pump()
        assert values(a) == [b"0", b"1", b"n2", b"n3"]
        consumer = await lagging.consume(5)
        assert consumer.error == Errors.OFFSET_OUT_OF_RANGE

    run(tmp_path, scenario, isr=(1, 2))


def test_follower_behind_the_leader_log_start_starts_over_there(tmp_path: Path) -> None:
    """KAFKA-7414: OFFSET_OUT_OF_RANGE is never fatal; behind the leader's log start the
    follower deletes its log and starts at the leader's start."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await produce_each(a, *(b"%d" % i for i in range(6)))
        a.log().advance_start_offset(4)
        await b.pump()
        assert (b.log().start_offset, b.log().end_offset) == (4, 4)
        assert b.partition().high_watermark == 4
        await b.pump()
        assert values(b) == [b"4", b"5"]

    run(tmp_path, scenario, replicas=(1, 2))


def test_follower_past_the_leader_end_truncates_to_it(tmp_path: Path) -> None:
    """KAFKA-7414: a follower whose log (without epochs) ends past the leader's LEO asks the
    leader's latest offset and truncates to it."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await produce_each(a, *(b"%d" % i for i in range(6)))
        b.log().truncate_fully_and_start_at(10)
        await b.pump()
        assert b.log().end_offset == 6
        await produce_each(a, b"6")
        await b.pump()
        assert b.log().end_offset == 7

    run(tmp_path, scenario, replicas=(1, 2))


def test_fetch_errors_back_off_and_recover(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        b = c.nodes[2]
        b.partition().leader_epoch = 7  # ahead of the leader: UNKNOWN_LEADER_EPOCH
        b.fetcher(1).partitions[("t", 0)].leader_epoch = 7
        await b.pump()
        assert b.fetcher(1).partitions[("t", 0)].retry_at > 0
        assert b.log().end_offset == 0

    run(tmp_path, scenario, replicas=(1, 2))


def test_live_fetchers_complete_acks_all_through_woken_long_polls(tmp_path: Path) -> None:
    """§4.4 acks=all latency path with the fetchers running by themselves: the parked follower
    fetches wake on the append, so the produce completes well before replica.fetch.wait.max.ms
    (2 s here) even once."""
    config = ReplicaConfig(replica_fetch_wait_max_ms=2000, replica_fetch_backoff_ms=10)

    async def scenario(c: Cluster) -> None:
        a = c.nodes[1]
        for _ in range(100):  # both followers connected and parked in a long poll
            if len(a.manager.waiters) == 2:
                break
            await asyncio.sleep(0.01)
        assert len(a.manager.waiters) == 2
        loop = asyncio.get_running_loop()
        start = loop.time()
        result = (await asyncio.wait_for(a.produce(batch(3)), 10))[0]
        assert result.error == Errors.NONE
        assert loop.time() - start < 1.0
        for node in (c.nodes[2], c.nodes[3]):
            assert contents(node) == contents(a)
        await settle()

    run(tmp_path, scenario, live=True, config=config, min_isr=2)


def test_partitioned_follower_leaves_the_isr_and_rejoins_without_truncation(tmp_path: Path
                                                                              ) -> None:
    """Scenarios 6 and 8: a follower cut off for longer than replica.lag.time.max.ms leaves
    the ISR (partition epoch bumped); once healed it resumes from its LEO with no truncation
    and rejoins when its LEO reaches the HW."""
    async def scenario(c: Cluster) -> None:
        c.controller.auto = True
        a, b, d = c.nodes[1], c.nodes[2], c.nodes[3]
        await produce_each(a, b"0", b"1")
        for node in (b, d, b, d):
            await node.pump()
        epoch_before = c.metadata.partition().partition_epoch
        for i in range(5):  # d is cut off; b keeps up
            await produce_each(a, b"%d" % (i + 2))
            c.clock.advance(10_000)
            await b.pump()
            a.manager.shrink_isrs()
            await settle()
        assert c.metadata.partition().isr == (1, 2)
        assert c.metadata.partition().partition_epoch == epoch_before + 1
        assert a.partition().isr == (1, 2)
        await d.pump()  # healed: from its LEO
        assert d.manager.records_lost == 0
        assert d.log().end_offset == a.log().end_offset
        await d.pump()
        await settle()
        assert c.metadata.partition().isr == (1, 2, 3)
        assert c.metadata.partition().partition_epoch == epoch_before + 2
        assert contents(d) == contents(a)

    run(tmp_path, scenario, min_isr=2)


def test_replaced_disk_follower_refetches_and_stale_epoch_fetches_are_refused(
        tmp_path: Path) -> None:
    """Scenario 14: broker 3 returns as a new incarnation (broker epoch 99) with an empty log.
    Fetches with its old epoch are refused; it refetches everything from the leader's log
    start and joins the ISR only once caught up."""
    async def scenario(c: Cluster) -> None:
        from broker.api import FetchParams, FetchPartition
        from tests.unit.replica_harness import broker_record

        c.controller.auto = True
        a, d = c.nodes[1], c.nodes[3]
        await produce_each(a, b"0", b"1", b"2")
        for node in (c.nodes[2], d, c.nodes[2], d):
            await node.pump()
        assert a.partition().high_watermark == 3
        d.log().truncate_fully_and_start_at(0)  # the empty replaced disk
        d.partition().high_watermark = 0
        c.metadata.replay(broker_record(3, epoch=99))
        c.publish()
        old = (await a.manager.fetch(FetchParams(
            [FetchPartition("t", 0, 3, 1 << 20, current_leader_epoch=0,
                            last_fetched_epoch=0)], max_wait_ms=0, replica_id=3,
            replica_epoch=13)))[0]
        assert old.error == Errors.NOT_LEADER_OR_FOLLOWER
        d.epoch = 99
        await d.pump()
        assert values(d) == [b"0", b"1", b"2"]
        await d.pump()
        assert contents(d) == contents(a)

    run(tmp_path, scenario, min_isr=2)


def test_fetcher_survives_an_unexpected_error_in_a_round(tmp_path: Path) -> None:
    """Kafka's fetcher thread logs a failed round, backs off and goes on."""
    config = ReplicaConfig(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=10)

    async def main() -> None:
        c = Cluster(tmp_path, live=True, config=config)
        c.create_topic(replicas=(1, 2))
        b = c.nodes[2]
        failures = [ValueError("undecodable answer")]

        class Flaky(InProcessLeader):
            async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
                if failures:
                    raise failures.pop()
                return await super().fetch(params)

        async def connect(host: str, port: int) -> Flaky:
            return Flaky(c.nodes[port - 9000].manager)

        b.manager.fetchers.connect = connect
        c.start()
        try:
            await produce_each(c.nodes[1], b"0")
            for _ in range(200):
                if b.log().end_offset == 1 or b.fetcher(1)._task.done():  # type: ignore[union-attr]
                    break
                await asyncio.sleep(0.01)
            assert b.log().end_offset == 1
        finally:
            await c.close()

    asyncio.run(main())


def test_restart_without_hw_checkpoint_relearns_it(tmp_path: Path) -> None:
    """Scenario 13: a follower restarted without its HW checkpoint loses nothing and learns
    the HW from the leader."""
    async def scenario(c: Cluster) -> None:
        await produce_each(c.nodes[1], b"0", b"1", b"2")
        for _ in range(2):
            await c.nodes[2].pump()
        assert c.nodes[2].partition().high_watermark == 3
        await c.stop(2)
        b = c.restart(2)
        assert b.log().end_offset == 3 and b.partition().high_watermark == 0
        await b.pump()
        assert b.partition().high_watermark == 3 and b.log().end_offset == 3
        assert b.manager.records_lost == 0

    run(tmp_path, scenario, replicas=(1, 2))



def test_former_leader_with_an_empty_epoch_at_its_end_converges(tmp_path: Path) -> None:
    """KAFKA-7415's other half: A led epoch 1 without writing (its cache ends (1, 2) at its
    LEO 2); B leads epoch 2 and writes. A's truncation point is its own LEO, and the stale
    epoch entry there must go too (Kafka's truncateTo always truncates the epoch cache), or
    A gets the same diverging answer forever and never replicates again."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await produce_each(a, b"0", b"1")
        await b.pump()
        await b.pump()
        c.change(leader=1)            # epoch 1 on A, nothing written
        assert a.log().epoch_entries() == [(0, 0), (1, 2)]
        c.change(leader=2)            # epoch 2 on B
        await produce_each(b, b"b2")
        for _ in range(4):
            await a.pump()
        assert values(a) == [b"0", b"1", b"b2"]
        assert a.log().epoch_entries() == [(0, 0), (2, 2)]

    run(tmp_path, scenario, replicas=(1, 2))


def test_live_leader_crash_during_idempotent_produce_loses_no_acked_record(
        tmp_path: Path) -> None:
    """Scenarios 1 and 2 with the fetchers running by themselves: the leader dies during
    steady acks=all idempotent produce, an ISR follower leads, the producer retries the same
    batches there; every acked record is in the new leader's log exactly once below its HW,
    and the old leader, restarted, converges to the same bytes."""
    config = ReplicaConfig(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=10)

    async def main() -> None:
        c = Cluster(tmp_path, live=True, config=config)
        c.create_topic(min_isr=2)
        c.controller.auto = True
        c.start()
        acked: list[int] = []

        async def produce(i: int) -> None:
            item = build_batch([b"%d" % i], producer_id=1, producer_epoch=0, base_sequence=i)
            for _ in range(200):
                node = c.nodes.get(c.metadata.partition().leader)
                if node is not None:
                    result = (await node.produce(item, timeout_ms=300))[0]
                    if result.error == Errors.NONE:
                        acked.append(i)
                        return
                await asyncio.sleep(0.01)
            raise AssertionError(f"record {i} never acked")

        try:
            for i in range(10):
                await produce(i)
            crash = asyncio.ensure_future(produce(10))  # in flight as the leader dies
            await asyncio.sleep(0)
            await c.stop(1)
            c.change(leader=2, isr=(2, 3))
            await asyncio.wait_for(crash, 10)
            for i in range(11, 20):
                await produce(i)
            new = c.nodes[2]
            assert new.partition().high_watermark == new.log().end_offset
            got = [int(v) for v in values(new)]  # type: ignore[arg-type]
            assert sorted(got) == list(range(20)) == acked
            old = c.restart(1)
            for _ in range(500):
                if old.log().end_offset == new.log().end_offset:
                    break
                await asyncio.sleep(0.01)
            assert contents(old) == contents(new)
        finally:
            await c.close()

    asyncio.run(main())


def test_out_of_range_with_a_failing_list_offsets_backs_off(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        b = c.nodes[2]

        class Refusing(InProcessLeader):
            async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
                return [FetchPartitionResult(Errors.OFFSET_OUT_OF_RANGE)]

            async def list_offsets(self, replica_id: int,
                                   partitions: list[ListOffsetsPartition]
                                   ) -> list[ListOffsetsResult]:
                return [ListOffsetsResult(Errors.FENCED_LEADER_EPOCH)]

        fetcher = b.fetcher(1)
        state = fetcher.partitions[("t", 0)]
        fetcher._restart = False
        fetcher._wakeup.clear()
        await fetcher._fetch_once(Refusing(c.nodes[1].manager), {("t", 0): state})
        assert state.retry_at > 0

    run(tmp_path, scenario, replicas=(1, 2))


class HeldListOffsets(InProcessLeader):
    """The leader answers one kind of ListOffsets at once, but the answer reaches the
    follower only when the test opens `gate` (it was in flight meanwhile)."""

    def __init__(self, node: Node, held: int) -> None:
        super().__init__(node.manager)
        self.held = held
        self.parked = asyncio.Event()
        self.gate = asyncio.Event()

    async def list_offsets(self, replica_id: int, partitions: list[ListOffsetsPartition]
                           ) -> list[ListOffsetsResult]:
        answer = await super().list_offsets(replica_id, partitions)
        if partitions[0].timestamp == self.held:
            self.parked.set()
            await self.gate.wait()
        return answer


@pytest.mark.parametrize("held", [LATEST_TIMESTAMP, EARLIEST_TIMESTAMP])
def test_out_of_range_answer_never_truncates_a_replica_elected_leader_meanwhile(
        tmp_path: Path, held: int) -> None:
    """Issue 28, defect 1: a follower out of range asks the leader's offsets; while an answer
    is out it is elected leader (unclean) and acknowledges writes. The late answer (the
    leader's end below ours, or its start past our end) must not wipe them."""
    async def scenario(c: Cluster) -> None:
        a, b = c.nodes[1], c.nodes[2]
        await produce_each(a, *(b"%d" % i for i in range(6)))
        if held == LATEST_TIMESTAMP:
            b.log().truncate_fully_and_start_at(10)  # b's log ends past the leader's
            written = 10
        else:
            a.log().advance_start_offset(4)  # the leader's log starts past b's end
            written = 0
        fetcher = b.fetcher(1)
        state = fetcher.partitions[(TOPIC, 0)]
        fetcher._restart = False
        fetcher._wakeup.clear()
        client = HeldListOffsets(a, held)
        pumping = asyncio.ensure_future(fetcher._fetch_once(client, {(TOPIC, 0): state}))
        await asyncio.wait_for(client.parked.wait(), 5)
        c.change(leader=2, isr=(2,), leader_recovery_state=LeaderRecoveryState.RECOVERING)
        assert b.partition().is_leader
        await produce_each(b, b"acked-1", b"acked-2")
        client.gate.set()
        await asyncio.wait_for(pumping, 5)
        assert values(b) == [b"acked-1", b"acked-2"]
        assert (b.log().start_offset, b.log().end_offset) == (written, written + 2)
        assert b.manager.records_truncated == 0

    run(tmp_path, scenario, replicas=(1, 2))


def test_a_leader_that_refuses_connections_is_taken_for_dead_until_it_answers(
        tmp_path: Path) -> None:
    """A follower whose reconnect to its leader is refused marks the leader unreachable (with
    its broker epoch); a successful connect or a new registration clears the mark."""
    from broker.kafka.client import KafkaClientError

    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        cluster.create_topic()
        node = cluster.nodes[2]
        attempts: list[int] = []

        async def refusing(host: str, port: int) -> Any:
            attempts.append(port)
            raise KafkaClientError("connect refused", refused=True)

        node.manager.fetchers.connect = refusing
        cluster.start()
        try:
            for _ in range(50):
                if node.manager.fetchers.unreachable:
                    break
                await asyncio.sleep(0.01)  # polling what the fetcher task makes true
            assert node.manager.fetchers.unreachable == {1: broker_epoch(1)}
            assert attempts
            node.manager.fetchers.mark_reachable(1)
            assert node.manager.fetchers.unreachable == {}
            node.manager.fetchers.mark_unreachable(1)
            cluster.metadata.replay(broker_record(1, epoch=broker_epoch(1) + 100))
            cluster.publish()
            assert node.manager.fetchers.unreachable == {}  # registered anew: a new process
        finally:
            await cluster.close()

    asyncio.run(scenario())


def test_an_injected_partition_stops_replication_both_ways(tmp_path: Path) -> None:
    """The chaos tool's `blocked` set: a follower does not fetch from a blocked leader, and a
    leader does not count a blocked follower's fetch (it is answered late and empty)."""
    async def scenario(cluster: Cluster) -> None:
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        follower.manager.fetchers.blocked = frozenset({1})
        await leader.produce(batch(3), acks=1)
        await settle()
        assert follower.connected == []  # never dialled the blocked leader
        leader.manager.fetchers.blocked = frozenset({2})
        params = FetchParams([FetchPartition(TOPIC, 0, 0, 1 << 20, current_leader_epoch=0)],
                             max_wait_ms=0, replica_id=2)
        [result] = await leader.manager.fetch(params)
        assert result.error == Errors.REQUEST_TIMED_OUT and result.records == b""
        assert leader.partition().followers[2].leo == -1  # the lost fetch counted for nothing

    run(tmp_path, scenario, live=True)


def test_a_follower_whose_write_fails_takes_its_log_dir_offline(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await c.nodes[1].produce(batch(3), acks=1)
        follower = c.nodes[2]
        failed: list[str] = []
        follower.logs.on_dir_failure = lambda directory, exc: failed.append(directory)
        follower.logs.faults.disk_full = True
        await follower.pump()
        assert failed == [os.path.dirname(follower.log().directory)]
        assert follower.logs.is_offline(follower.log())
        await follower.pump()  # the dir is reported once
        assert len(failed) == 1

    run(tmp_path, scenario, replicas=(1, 2))
