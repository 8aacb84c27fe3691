"""Kafka's answers to EndTxn v0-3 and AddPartitionsToTxn v0-3 retries, as a table, against a
coordinator that has just loaded the id's `__transaction_state` partition (the state a retry
finds after the coordinator moved) and against one that reached the state itself.

Kafka's rules (TransactionCoordinator.endTransaction in 3.9; endTransactionWithTV1 in 4.x,
which serves every EndTxn below v5): another producer id → INVALID_PRODUCER_ID_MAPPING; another
epoch, older or newer → PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2); a write in flight →
CONCURRENT_TRANSACTIONS; then by state: Ongoing → Prepare*; CompleteCommit + commit and
CompleteAbort + abort → NONE (a retry of an EndTxn that completed); PrepareCommit + commit and
PrepareAbort + abort → CONCURRENT_TRANSACTIONS (markers still going out); the opposite result
and Empty → INVALID_TXN_STATE. Kafka 4's abort from Empty/Complete* with an epoch bump is
transaction version 2 (EndTxn v5), which this broker does not serve.

A coordinator that loads a PrepareCommit/PrepareAbort record resumes the markers and writes
CompleteCommit/CompleteAbort (Kafka's TransactionStateManager at load)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from broker.txn.errors import TxnError
from broker.txn.records import TxnLogValue, TxnState, encode_key, encode_value
from tests.unit.txn_harness import TXN_ID, Front

E = TxnError
S = TxnState
PID, EPOCH = 4000, 3
COORDINATOR_EPOCH = 9
PARTITIONS = (("t", (0, 1)),)


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


def record(state: TxnState, epoch: int = EPOCH, partitions: tuple[tuple[str, tuple[int, ...]],
           ...] | None = None) -> tuple[bytes, bytes]:
    open_or_prepared = state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT)
    if partitions is None:
        partitions = PARTITIONS if open_or_prepared else ()
    return encode_key(TXN_ID), encode_value(TxnLogValue(
        PID, epoch, 60_000, state, partitions, 1_000_000, 999_000 if open_or_prepared else -1))


def loaded(state: TxnState, partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None,
           **config: int) -> Front:
    """A coordinator that just took over the id's partition, whose last record is `state`."""
    front = Front(load=False, **config)
    front.coordinator.begin_loading(0, COORDINATOR_EPOCH)
    assert front.coordinator.finish_loading(0, COORDINATOR_EPOCH,
                                            [record(state, partitions=partitions)]) == 1
    return front


def kafka_end_txn(state: TxnState, commit: bool) -> TxnError:
    """Kafka's answer to an EndTxn of the id's producer at its epoch, by state."""
    if state is S.ONGOING:
        return E.NONE
    done, prepared = ((S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if commit
                      else (S.COMPLETE_ABORT, S.PREPARE_ABORT))
    if state is done:
        return E.NONE
    if state is prepared:
        return E.CONCURRENT_TRANSACTIONS
    return E.INVALID_TXN_STATE


STATES = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
          S.COMPLETE_ABORT]
TABLE = [(state, commit, kafka_end_txn(state, commit))
         for state in STATES for commit in (True, False)]


@pytest.mark.parametrize(("state", "commit", "expected"), TABLE,
                         ids=[f"{s.name}-{'commit' if c else 'abort'}" for s, c, _ in TABLE])
def test_end_txn_at_the_current_epoch_after_a_load(state: TxnState, commit: bool,
                                                   expected: TxnError,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        front = loaded(state)
        before = len(front.txns.log.values())
        for version in (0, 1, 2, 3):
            answer = await front.end(PID, EPOCH, commit, version=version)
            if state is S.ONGOING:  # the first one prepared: the others are its retries
                expected_now = E.NONE if version == 0 else kafka_end_txn(
                    S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, commit)
            else:
                expected_now = expected
            assert answer == expected_now, (version, E(answer).name)
        written = [v.state for v in front.txns.log.values()[before:] if v is not None]
        assert written == ([S.PREPARE_COMMIT if commit else S.PREPARE_ABORT]
                           if state is S.ONGOING else [])
    with caplog.at_level(logging.WARNING, logger="broker.txn.coordinator"):
        run(body)
    # Each INVALID_TXN_STATE is logged with the state it found (librdkafka takes it as fatal).
    found = [r.getMessage() for r in caplog.records if "INVALID_TXN_STATE" in r.getMessage()]
    assert len(found) == (4 if expected is E.INVALID_TXN_STATE else 0)
    assert all(f"found {state.name}" in line for line in found)


@pytest.mark.parametrize("state", STATES, ids=[s.name for s in STATES])
def test_end_txn_of_another_epoch_or_producer_after_a_load(state: TxnState) -> None:
    async def body() -> None:
        front = loaded(state)
        for commit in (True, False):
            for epoch in (EPOCH - 1, EPOCH + 1):  # Kafka: strict equality from a client
                assert await front.end(PID, epoch, commit, version=3) == E.PRODUCER_FENCED
                assert await front.end(PID, epoch, commit, version=2) == E.PRODUCER_FENCED
                assert await front.end(PID, epoch, commit, version=1) == \
                    E.INVALID_PRODUCER_EPOCH
                assert await front.end(PID, epoch, commit, version=0) == \
                    E.INVALID_PRODUCER_EPOCH
            assert await front.end(PID + 1, EPOCH, commit) == E.INVALID_PRODUCER_ID_MAPPING
            assert await front.end(PID, EPOCH, commit, txn_id="other") == \
                E.INVALID_PRODUCER_ID_MAPPING
        assert front.txns.log.values() == []  # nothing written
    run(body)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_end_txn_retried_across_a_coordinator_move(commit: bool) -> None:
    """The first EndTxn prepared the transaction on the old coordinator and its answer was
    lost; the new coordinator loads the log, resends the markers and completes: the retry
    gets CONCURRENT_TRANSACTIONS until then, NONE after, and the opposite result
    INVALID_TXN_STATE throughout."""
    async def body() -> None:
        old = loaded(S.ONGOING)
        assert await old.end(PID, EPOCH, commit) == E.NONE
        prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        log = [r for records in old.txns.log.records.values() for r in records]
        new = Front(load=False)
        new.coordinator.begin_loading(0, COORDINATOR_EPOCH + 1)
        assert await new.end(PID, EPOCH, commit) == E.COORDINATOR_LOAD_IN_PROGRESS
        new.coordinator.finish_loading(0, COORDINATOR_EPOCH + 1, [record(S.ONGOING), *log])
        (job,) = new.txns.markers.sent  # the markers go out again, under the new epoch
        assert (job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch,
                job.partitions) == (PID, EPOCH, commit, COORDINATOR_EPOCH + 1,
                                    {("t", 0), ("t", 1)})
        assert await new.end(PID, EPOCH, commit) == E.CONCURRENT_TRANSACTIONS
        assert await new.end(PID, EPOCH, not commit) == E.INVALID_TXN_STATE
        new.coordinator.markers_written(job)
        await new.settle()
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        assert [v.state for v in new.txns.log.values() if v is not None] == [done]
        assert new.coordinator.txns[TXN_ID].state is done
        assert await new.end(PID, EPOCH, commit) == E.NONE
        assert await new.end(PID, EPOCH, not commit) == E.INVALID_TXN_STATE
        assert old.coordinator.txns[TXN_ID].state is prepared  # the old one sent nothing more
    run(body)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT],
                         ids=["PrepareCommit", "PrepareAbort"])
def test_a_loaded_prepared_transaction_is_completed(state: TxnState) -> None:
    async def body() -> None:
        front = loaded(state)
        (job,) = front.txns.markers.sent
        assert job.commit is (state is S.PREPARE_COMMIT)
        assert job.coordinator_epoch == COORDINATOR_EPOCH
        for tp in sorted(job.partitions):  # each partition's marker answered
            front.coordinator.marker_written(job, tp)
        front.coordinator.markers_written(job)
        await front.settle()
        done = S.COMPLETE_COMMIT if state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        (completed,) = front.txns.log.values()
        assert completed is not None and completed.state is done
        assert (completed.producer_id, completed.producer_epoch, completed.partitions) == \
            (PID, EPOCH, ())
        # The producer goes on: its next transaction starts from the completed state.
        assert await front.add(PID, EPOCH, {"t": (0,)}) == {("t", 0): 0}
    run(body)


def test_a_loaded_prepared_transaction_without_partitions_completes_at_once() -> None:
    async def body() -> None:
        front = Front(load=False)
        front.coordinator.begin_loading(0, COORDINATOR_EPOCH)
        front.coordinator.finish_loading(0, COORDINATOR_EPOCH,
                                         [record(S.PREPARE_ABORT, partitions=())])
        await front.settle()
        assert front.txns.markers.sent == []
        assert front.coordinator.txns[TXN_ID].state is S.COMPLETE_ABORT
    run(body)


def test_a_loaded_partition_resends_only_its_own_prepared_transactions() -> None:
    """A record of an id that another partition owns (e.g. a partition count that changed)
    is neither taken nor given markers."""
    async def body() -> None:
        front = Front(load=False, partitions=2)
        other = next(f"id-{n}" for n in range(100)
                     if front.coordinator.partition_of(f"id-{n}") == 1)
        own = next(f"id-{n}" for n in range(100)
                   if front.coordinator.partition_of(f"id-{n}") == 0)
        stray = (encode_key(other), record(S.PREPARE_COMMIT)[1])
        mine = (encode_key(own), record(S.PREPARE_COMMIT)[1])
        front.coordinator.begin_loading(0, COORDINATOR_EPOCH)
        front.coordinator.finish_loading(0, COORDINATOR_EPOCH, [stray, mine])
        assert [job.transactional_id for job in front.txns.markers.sent] == [own]
        assert other not in front.coordinator.txns
    run(body)


ADD_TABLE = [  # (state the id is in, its partitions, partitions asked, Kafka's answer, a write?)
    (S.EMPTY, (), (0,), E.NONE, True),
    (S.ONGOING, (0, 1), (0, 1), E.NONE, False),  # a retry: every partition already in it
    (S.ONGOING, (0, 1), (1,), E.NONE, False),
    (S.ONGOING, (0,), (0, 1), E.NONE, True),  # one new partition
    (S.COMPLETE_COMMIT, (), (0,), E.NONE, True),
    (S.COMPLETE_ABORT, (), (0,), E.NONE, True),
    (S.PREPARE_COMMIT, (0, 1), (0,), E.CONCURRENT_TRANSACTIONS, False),  # held to the bound
    (S.PREPARE_ABORT, (0, 1), (0,), E.CONCURRENT_TRANSACTIONS, False),
]


@pytest.mark.parametrize(("state", "has", "asked", "expected", "writes"), ADD_TABLE,
                         ids=[f"{s.name}-{h}-{a}" for s, h, a, _, _ in ADD_TABLE])
def test_add_partitions_retries_after_a_load(state: TxnState, has: tuple[int, ...],
                                             asked: tuple[int, ...], expected: TxnError,
                                             writes: bool) -> None:
    async def body() -> None:
        front = loaded(state, (("t", has),) if has else (), held_request_max_ms=5)
        partitions = {("t", p) for p in asked}
        for version in (0, 1, 2, 3):  # the first and its retries
            answers = await front.add(PID, EPOCH, {"t": asked}, version=version)
            assert answers == dict.fromkeys(partitions, expected), version
        written = front.txns.log.values()
        assert len(written) == (1 if writes else 0)  # the retries wrote nothing
        if writes:
            assert written[0] is not None and written[0].state is S.ONGOING
            assert partitions <= front.coordinator.txns[TXN_ID].partitions
        for version, fenced in ((3, E.PRODUCER_FENCED), (1, E.INVALID_PRODUCER_EPOCH)):
            for epoch in (EPOCH - 1, EPOCH + 1):
                assert await front.add(PID, epoch, {"t": asked}, version=version) == \
                    dict.fromkeys(partitions, fenced)
        assert await front.add(PID + 1, EPOCH, {"t": asked}) == \
            dict.fromkeys(partitions, E.INVALID_PRODUCER_ID_MAPPING)
    run(body)


def test_end_txn_while_the_coordinator_fences_the_producer() -> None:
    """The coordinator aborts a timed-out transaction with the epoch bumped; Kafka takes the
    bumped epoch at once (TransactionMetadata.prepareFenceProducerEpoch), so the producer's
    EndTxn meanwhile is PRODUCER_FENCED, not CONCURRENT_TRANSACTIONS; another write in flight
    (its own EndTxn) is CONCURRENT_TRANSACTIONS."""
    async def body() -> None:
        front = loaded(S.ONGOING)
        front.txns.clock.now += 120_000
        front.txns.log.gate = asyncio.Event()
        aborting = asyncio.ensure_future(front.coordinator.abort_timed_out())
        await front.settle()
        assert await front.end(PID, EPOCH, False) == E.PRODUCER_FENCED
        assert await front.end(PID, EPOCH, True, version=1) == E.INVALID_PRODUCER_EPOCH
        assert await front.add(PID, EPOCH, {"t": (0,)}) == {("t", 0): E.PRODUCER_FENCED}
        front.txns.log.gate.set()
        assert await aborting == 1
        assert await front.end(PID, EPOCH, False) == E.PRODUCER_FENCED
        assert await front.end(PID, EPOCH + 1, False) == E.CONCURRENT_TRANSACTIONS

        other = loaded(S.ONGOING)
        other.txns.log.gate = asyncio.Event()
        ending = asyncio.ensure_future(other.end(PID, EPOCH, True))
        await other.settle()
        assert await other.end(PID, EPOCH, True) == E.CONCURRENT_TRANSACTIONS
        other.txns.log.gate.set()
        assert await ending == E.NONE
    run(body)
