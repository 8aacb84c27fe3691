"""The transaction coordinator's rules through the Kafka front (broker/kafka/txn_api.py,
broker/txn/coordinator.py), every request a real kio frame: InitProducerId with a
transactional id (new id, epoch bumps fencing the previous producer, KIP-360, the open
transaction aborted first), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn with its Prepare* ->
markers -> Complete* path, timeouts on an injected clock, id expiry, FindCoordinator key
type 1, and where the coordinator is not (loading, elsewhere)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable

import pytest

from broker.group.placement import partition_for
from broker.kafka.versions import ApiKey
from broker.txn.records import TxnState
from metadata.authorizer.model import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer
from tests.unit.txn_harness import TXN_ID, Front

T0 = {"t": (0,)}


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


async def started(front: Front) -> tuple[int, int]:
    answer = await front.init()
    assert answer.error_code == 0
    return int(answer.producer_id), int(answer.producer_epoch)


def states(front: Front) -> list[TxnState | None]:
    return [None if v is None else v.state for v in front.txns.log.values()]


def test_a_new_transactional_id_gets_a_quorum_producer_id_and_epoch_0_then_bumps() -> None:
    async def body() -> None:
        front = Front()
        first = await front.init()
        assert (first.error_code, first.producer_id, first.producer_epoch) == (0, 1000, 0)
        (value,) = front.txns.log.values()
        assert value is not None
        assert (value.state, value.producer_id, value.producer_epoch, value.timeout_ms,
                value.partitions, value.start_ms) == (TxnState.EMPTY, 1000, 0, 60000, (), -1)
        again = await front.init()  # a second producer with the same id fences the first
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, 1000, 1)
        assert await front.add(1000, 0, T0) == {("t", 0): 90}  # the old epoch is fenced
        assert await front.add(1000, 0, T0, version=1) == {("t", 0): 47}
    run(body)


def test_kip_360_bump_with_the_current_id_and_a_stale_one_fenced() -> None:
    async def body() -> None:
        front = Front()
        pid, epoch = await started(front)
        bumped = await front.init(producer_id=pid, producer_epoch=epoch)
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
        # A retry of that bump (its answer lost) gets the same epoch again, no new bump.
        retried = await front.init(producer_id=pid, producer_epoch=epoch)
        assert (retried.error_code, retried.producer_epoch) == (0, epoch + 1)
        assert (await front.init(producer_id=pid + 7, producer_epoch=0)).error_code == 90
        assert (await front.init(version=3, producer_id=pid + 7, producer_epoch=0)
                ).error_code == 47  # v3 clients know it as INVALID_PRODUCER_EPOCH
        assert (await front.init(producer_id=pid, producer_epoch=epoch - 1)).error_code == 90
    run(body)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    async def body() -> None:
        front = Front()
        await started(front)
        front.coordinator.txns[TXN_ID].producer_epoch = 32766
        rotated = await front.init()
        assert (rotated.producer_id, rotated.producer_epoch) == (1001, 0)
        assert front.coordinator.txns[TXN_ID].previous_producer_id == 1000
    run(body)


def test_request_checks() -> None:
    async def body() -> None:
        front = Front(max_timeout_ms=120000)
        assert (await front.init(txn_id="")).error_code == 42
        too_long = datetime.timedelta(minutes=3)
        assert (await front.init(timeout=too_long)).error_code == 50
        assert (await front.init(timeout=datetime.timedelta(0))).error_code == 50
        assert await front.add(5, 0, T0) == {("t", 0): 49}  # unknown transactional id
        pid, epoch = await started(front)
        assert await front.add(pid + 1, epoch, T0) == {("t", 0): 49}
        assert await front.end(pid, epoch, True) == 48  # nothing open: INVALID_TXN_STATE
        # An unknown partition fails the whole set; the others are not attempted.
        assert await front.add(pid, epoch, {"t": (0, 9), "nope": (0,)}) == {
            ("t", 0): 55, ("t", 9): 3, ("nope", 0): 3}
        assert states(front) == [TxnState.EMPTY]
    run(body)


def test_commit_prepares_sends_markers_then_completes() -> None:
    async def body() -> None:
        front = Front(held_request_max_ms=20)  # held requests answer 51 after 20 ms
        pid, epoch = await started(front)
        front.txns.clock.now += 10
        assert await front.add(pid, epoch, {"t": (0, 1)}) == {("t", 0): 0, ("t", 1): 0}
        assert await front.add(pid, epoch, {"t": (1,)}) == {("t", 1): 0}  # no second write
        offsets = await front.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id=TXN_ID,
                                   producer_id=pid, producer_epoch=epoch, group_id="g")
        assert offsets.error_code == 0
        assert states(front) == [TxnState.EMPTY, TxnState.ONGOING, TxnState.ONGOING]
        ongoing = front.txns.log.values()[-1]
        assert ongoing is not None
        group_partition = partition_for("g", 50)
        assert ongoing.partitions == (("__consumer_offsets", (group_partition,)),
                                      ("t", (0, 1)))
        assert ongoing.start_ms == front.txns.clock.now

        assert await front.end(pid, epoch, True) == 0
        assert states(front)[-1] is TxnState.PREPARE_COMMIT
        (job,) = front.txns.markers.sent
        assert (job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch) == \
            (pid, epoch, True, 5)
        assert job.partitions == {("t", 0), ("t", 1), ("__consumer_offsets", group_partition)}
        # Until the markers are written: the same EndTxn, a new partition, a new producer wait
        # (the last two held to the bound; tests/unit/test_txn_held_requests.py).
        assert await front.end(pid, epoch, True) == 51
        assert await front.add(pid, epoch, T0) == {("t", 0): 51}
        assert (await front.init()).error_code == 51
        assert await front.end(pid, epoch, False) == 48

        front.coordinator.markers_written(job)
        await front.settle()
        assert states(front)[-1] is TxnState.COMPLETE_COMMIT
        completed = front.txns.log.values()[-1]
        assert completed is not None and completed.partitions == ()
        assert await front.end(pid, epoch, True) == 0  # a retry of the completed commit
        assert await front.end(pid, epoch, False) == 48
        # The next transaction starts from CompleteCommit.
        assert await front.add(pid, epoch, T0) == {("t", 0): 0}
    run(body)


def test_a_new_producer_aborts_the_open_transaction_first() -> None:
    async def body() -> None:
        front = Front(held_request_max_ms=20)
        pid, epoch = await started(front)
        await front.add(pid, epoch, T0)
        assert (await front.init()).error_code == 51  # aborting; held to the bound
        (job,) = front.txns.markers.sent
        assert (job.commit, job.producer_epoch) == (False, epoch + 1)  # the old one fenced
        assert states(front)[-1] is TxnState.PREPARE_ABORT
        assert await front.end(pid, epoch, True, version=1) == 47
        front.coordinator.markers_written(job)
        await front.settle()
        assert states(front)[-1] is TxnState.COMPLETE_ABORT
        fresh = await front.init()
        assert (fresh.error_code, fresh.producer_id, fresh.producer_epoch) == (0, pid, epoch + 2)
    run(body)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    async def body() -> None:
        front = Front()
        pid, epoch = await started(front)
        await front.add(pid, epoch, T0)
        front.txns.clock.now += 60000
        assert await front.coordinator.abort_timed_out() == 0  # not past it yet
        front.txns.clock.now += 1
        assert await front.coordinator.abort_timed_out() == 1
        last = front.txns.log.values()[-1]
        assert last is not None
        assert (last.state, last.producer_epoch) == (TxnState.PREPARE_ABORT, epoch + 1)
        assert await front.end(pid, epoch, True) == 90  # the producer learns it is fenced
        front.coordinator.markers_written(front.txns.markers.sent[0])
        await front.settle()
        assert states(front)[-1] is TxnState.COMPLETE_ABORT
        # librdkafka's recovery: InitProducerId with its id and epoch (KIP-360).
        bumped = await front.init(producer_id=pid, producer_epoch=epoch)
        assert (bumped.error_code, bumped.producer_epoch) == (0, epoch + 1)
    run(body)


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    async def body() -> None:
        front = Front(id_expiration_ms=1000)
        pid, epoch = await started(front)
        await front.add(pid, epoch, T0)
        front.txns.clock.now += 5000
        assert await front.coordinator.expire_ids() == 0  # a transaction is open
        await front.end(pid, epoch, False)
        front.coordinator.markers_written(front.txns.markers.sent[0])
        await front.settle()
        front.txns.clock.now += 999
        assert await front.coordinator.expire_ids() == 0
        front.txns.clock.now += 1
        assert await front.coordinator.expire_ids() == 1
        assert front.txns.log.values()[-1] is None
        assert TXN_ID not in front.coordinator.txns
        again = await front.init()
        assert (again.producer_id, again.producer_epoch) == (1001, 0)
    run(body)


def test_a_failed_write_changes_nothing_and_a_write_in_flight_blocks_others() -> None:
    async def body() -> None:
        front = Front()
        pid, epoch = await started(front)
        front.txns.log.error = 19  # NOT_ENOUGH_REPLICAS
        assert await front.add(pid, epoch, T0) == {("t", 0): 15}
        front.txns.log.error = 6  # NOT_LEADER_OR_FOLLOWER
        assert await front.add(pid, epoch, T0) == {("t", 0): 16}
        assert front.coordinator.txns[TXN_ID].state is TxnState.EMPTY
        front.txns.log.error = 0
        front.txns.log.gate = asyncio.Event()
        adding = asyncio.ensure_future(front.add(pid, epoch, T0))
        await front.settle()
        assert await front.end(pid, epoch, True) == 51
        front.txns.log.gate.set()
        assert await adding == {("t", 0): 0}
    run(body)


@pytest.mark.parametrize("load", [False, True])
def test_not_coordinator_and_loading(load: bool) -> None:
    async def body() -> None:
        front = Front(partitions=4, load=False)
        home = partition_for(TXN_ID, 4)
        if load:
            front.coordinator.begin_loading(home, 1)
        expected = 14 if load else 16
        assert (await front.init()).error_code == expected
        assert await front.add(1, 0, T0) == {("t", 0): expected}
        assert await front.end(1, 0, True) == expected
    run(body)


def test_find_coordinator_for_a_transactional_id() -> None:
    async def body() -> None:
        front = Front(partitions=3)
        found = await front.call(ApiKey.FIND_COORDINATOR, 4, key_type=1,
                                 coordinator_keys=(TXN_ID,))
        entry = found.coordinators[0]
        assert (entry.error_code, entry.node_id, entry.host, entry.port) == (0, 1, "h1", 9091)
        old = await front.call(ApiKey.FIND_COORDINATOR, 1, key=TXN_ID, key_type=1)
        assert (old.error_code, old.node_id) == (0, 1)
        assert (await front.call(ApiKey.FIND_COORDINATOR, 1, key="", key_type=1)
                ).error_code == 42
        missing = Front(with_topic=False)
        answer = await missing.call(ApiKey.FIND_COORDINATOR, 2, key=TXN_ID, key_type=1)
        assert answer.error_code == 15 and missing.txns.topic_requests == 1
    run(body)


def test_transactional_apis_need_write_on_the_transactional_id() -> None:
    async def body() -> None:
        authorizer = StandardAuthorizer(["User:admin"])
        authorizer.load([
            AclBinding(ResourceType.TRANSACTIONAL_ID, "app-", PatternType.PREFIXED,
                       "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)])
        front = Front(authorizer=authorizer)
        bob = await front.call(ApiKey.INIT_PRODUCER_ID, 4, principal="User:bob",
                               transactional_id=TXN_ID, transaction_timeout=
                               datetime.timedelta(minutes=1))
        assert bob.error_code == 53
        alice = await front.call(ApiKey.INIT_PRODUCER_ID, 4, principal="User:alice",
                                 transactional_id=TXN_ID, transaction_timeout=
                                 datetime.timedelta(minutes=1))
        assert alice.error_code == 0
        pid, epoch = int(alice.producer_id), int(alice.producer_epoch)
        for principal, expected in (("User:bob", 53), ("User:alice", 0)):
            answer = await front.call(
                ApiKey.END_TXN, 3, principal=principal, transactional_id=TXN_ID,
                producer_id=pid, producer_epoch=epoch, committed=True)
            assert answer.error_code == (expected or 48)
        offsets = await front.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, principal="User:alice",
                                   transactional_id=TXN_ID, producer_id=pid,
                                   producer_epoch=epoch, group_id="g")
        assert offsets.error_code == 30  # no READ on the group
    run(body)
