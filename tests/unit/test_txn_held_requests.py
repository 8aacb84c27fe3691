"""Requests held while the id's previous transaction completes (broker/txn/coordinator.py):
AddPartitionsToTxn, AddOffsetsToTxn and InitProducerId arriving in PrepareCommit/PrepareAbort
are answered once CompleteCommit/CompleteAbort is written, not CONCURRENT_TRANSACTIONS at
once as Kafka answers; CONCURRENT_TRANSACTIONS at the bound or over the cap; NOT_COORDINATOR
when the coordinator's partition is lost or reloaded meanwhile. Through the Kafka front."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from broker.group.placement import partition_for
from broker.kafka.versions import ApiKey
from broker.txn.records import TxnState
from tests.unit.txn_harness import TXN_ID, Front

T0 = {"t": (0,)}


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


async def prepared(front: Front, commit: bool = True) -> tuple[int, int]:
    """A producer whose transaction is prepared, its markers not yet written."""
    answer = await front.init()
    pid, epoch = int(answer.producer_id), int(answer.producer_epoch)
    assert await front.add(pid, epoch, T0) == {("t", 0): 0}
    assert await front.end(pid, epoch, commit) == 0
    return pid, epoch


async def held(front: Front, request: Awaitable[Any]) -> asyncio.Future[Any]:
    task = asyncio.ensure_future(request)
    await front.settle()
    assert not task.done() and front.coordinator.held == 1, "answered at once, not held"
    return task


def test_add_partitions_and_add_offsets_are_answered_once_the_commit_completes() -> None:
    async def body() -> None:
        front = Front()
        pid, epoch = await prepared(front)
        adding = await held(front, front.add(pid, epoch, {"t": (1,)}))
        offsets = asyncio.ensure_future(front.call(
            ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id=TXN_ID, producer_id=pid,
            producer_epoch=epoch, group_id="g"))
        await front.settle()
        assert not offsets.done() and front.coordinator.held == 2
        batches = front.txns.log.batches
        front.coordinator.markers_written(front.txns.markers.sent[-1])
        assert await adding == {("t", 1): 0}
        assert (await offsets).error_code == 0
        assert front.coordinator.held == 0
        # Both start the next transaction in the batch of the CompleteCommit record.
        assert front.txns.log.batches == batches + 1
        values = front.txns.log.values()
        assert [v.state for v in values if v is not None][2:] == [
            TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT, TxnState.ONGOING]
        last = values[-1]
        assert last is not None and last.partitions == (
            ("__consumer_offsets", (partition_for("g", 50),)), ("t", (1,)))
    run(body)


def test_init_producer_id_is_held_through_the_abort_it_starts() -> None:
    async def body() -> None:
        front = Front()
        answer = await front.init()
        pid, epoch = int(answer.producer_id), int(answer.producer_epoch)
        await front.add(pid, epoch, T0)
        # A new producer: the open transaction is fenced and aborted, the answer held.
        initing = await held(front, front.init())
        (job,) = front.txns.markers.sent
        assert (job.commit, job.producer_epoch) == (False, epoch + 1)
        front.coordinator.markers_written(job)
        fresh = await initing
        assert (fresh.error_code, fresh.producer_id, fresh.producer_epoch) == (0, pid, epoch + 2)
        # And one arriving in PrepareCommit gets its bump once the commit completes.
        await front.add(pid, epoch + 2, T0)
        await front.end(pid, epoch + 2, True)
        again = await held(front, front.init())
        front.coordinator.markers_written(front.txns.markers.sent[-1])
        assert ((await again).error_code, (await again).producer_epoch) == (0, epoch + 3)
    run(body)


def test_concurrent_transactions_at_the_bound_and_over_the_cap() -> None:
    async def body() -> None:
        front = Front(held_request_max_ms=50, max_held_requests=1)
        pid, epoch = await prepared(front)
        loop = asyncio.get_running_loop()
        started = loop.time()
        adding = await held(front, front.add(pid, epoch, T0))
        # The cap: a second request is not held but answered at once.
        assert (await front.init()).error_code == 51
        assert await adding == {("t", 0): 51}  # the bound passed, still PrepareCommit
        assert loop.time() - started >= 0.05
        assert front.coordinator.held == 0
        assert front.coordinator.txns[TXN_ID].state is TxnState.PREPARE_COMMIT
    run(body)


def test_a_lost_or_reloaded_coordinator_answers_not_coordinator() -> None:
    async def body() -> None:
        front = Front()
        pid, epoch = await prepared(front, commit=False)
        adding = await held(front, front.add(pid, epoch, T0))
        front.coordinator.unload(0)
        assert await adding == {("t", 0): 16}
        # Reloaded in a new epoch while held: the request was for the old coordinator.
        front.coordinator.begin_loading(0, 6)
        front.coordinator.finish_loading(0, 6, front.txns.log.records[0])
        assert front.coordinator.txns[TXN_ID].state is TxnState.PREPARE_ABORT
        initing = await held(front, front.init())
        front.coordinator.begin_loading(0, 7)
        assert (await initing).error_code == 16
        assert front.coordinator.held == 0
    run(body)


def test_a_request_taken_into_a_write_is_answered_when_the_coordinator_closes() -> None:
    async def body() -> None:
        front = Front(held_request_max_ms=100)
        pid, epoch = await prepared(front)
        adding = await held(front, front.add(pid, epoch, {"t": (1,)}))
        front.txns.log.gate = asyncio.Event()  # the CompleteCommit + Ongoing write hangs
        front.coordinator.markers_written(front.txns.markers.sent[-1])
        await front.settle()
        assert front.coordinator.txns[TXN_ID].pending is TxnState.COMPLETE_COMMIT
        await front.coordinator.close()  # cancels that write
        assert await asyncio.wait_for(adding, 2) == {("t", 1): 51}  # at its bound, not never
    run(body)
