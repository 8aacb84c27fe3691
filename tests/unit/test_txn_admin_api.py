"""DescribeTransactions (65), ListTransactions (66) and DescribeProducers (61) through the Kafka
front (broker/kafka/txn_admin_api.py), every request and answer a real kio frame: the
coordinator's states and errors, the filters, a real partition log's producer state, and
Kafka's authorization of each."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from broker.api import Request
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.versions import SUPPORTED, ApiKey
from broker.log.config import LogConfig
from broker.log.partition_log import PartitionLog
from broker.log.producer_state import ProducerEntry
from broker.records import TRANSACTIONAL_BIT, build_batch
from broker.txn.errors import TxnError
from broker.txn.producers import ActiveProducer, ReplicaProducerStates, log_producers
from kraft.errors import Errors
from metadata.authorizer.model import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer
from tests.unit.txn_harness import TXN_ID, Front

NAMES = {ApiKey.DESCRIBE_TRANSACTIONS: "DescribeTransactionsRequest",
         ApiKey.LIST_TRANSACTIONS: "ListTransactionsRequest",
         ApiKey.DESCRIBE_PRODUCERS: "DescribeProducersRequest"}
MS = datetime.timedelta(milliseconds=1)


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


async def call(front: Front, api: ApiKey, version: int, principal: str = "User:ANONYMOUS",
               **fields: Any) -> Any:
    frame = encode_request(3, "admin", build(request_module(api, version), NAMES[api],
                                             **fields))
    context = Request(client_id="admin", listener="PLAINTEXT", peer="10.0.0.1:4000",
                      api_version=version, principal=principal)
    reply = await front.apis.handle(decode_request(frame[4:]), context)
    correlation_id, answer = decode_response(api, version, encode_response(3, reply.response)[4:])
    assert correlation_id == 3
    return answer


async def describe(front: Front, *ids: str, principal: str = "User:ANONYMOUS") -> list[Any]:
    answer = await call(front, ApiKey.DESCRIBE_TRANSACTIONS, 0, principal,
                        transactional_ids=ids)
    return list(answer.transaction_states)


async def listed(front: Front, version: int = 1, principal: str = "User:ANONYMOUS",
                 **filters: Any) -> Any:
    return await call(front, ApiKey.LIST_TRANSACTIONS, version, principal, **filters)


def test_the_three_apis_are_advertised_with_kafka_39s_ranges() -> None:
    assert SUPPORTED[ApiKey.DESCRIBE_PRODUCERS] == (0, 0)
    assert SUPPORTED[ApiKey.DESCRIBE_TRANSACTIONS] == (0, 0)
    assert SUPPORTED[ApiKey.LIST_TRANSACTIONS] == (0, 1)


def test_describe_shows_an_id_empty_then_ongoing_with_its_partitions() -> None:
    async def body() -> None:
        front = Front()
        init = await front.init()
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        (empty,) = await describe(front, TXN_ID)
        assert (empty.error_code, empty.transaction_state, empty.producer_id,
                empty.producer_epoch) == (0, "Empty", pid, epoch)
        assert empty.transaction_timeout == datetime.timedelta(minutes=1)
        assert empty.transaction_start_time_ms == -1 and empty.topics == ()
        front.txns.clock.now = 2_000_000
        assert await front.add(pid, epoch, {"t": (1, 0)}) == {("t", 1): 0, ("t", 0): 0}
        (ongoing,) = await describe(front, TXN_ID)
        assert ongoing.transaction_state == "Ongoing"
        assert ongoing.transaction_start_time_ms == 2_000_000
        assert [(t.topic, tuple(t.partitions)) for t in ongoing.topics] == [("t", (0, 1))]
        assert await front.end(pid, epoch, commit=False) == 0
        (prepared,) = await describe(front, TXN_ID)
        assert prepared.transaction_state == "PrepareAbort"  # markers not written yet
        assert [(t.topic, tuple(t.partitions)) for t in prepared.topics] == [("t", (0, 1))]
    run(body)


def test_describe_errors_per_id() -> None:
    async def body() -> None:
        front = Front(partitions=3, load=False)
        front.coordinator.begin_loading(0, 1)
        front.coordinator.finish_loading(0, 1, [])
        front.coordinator.begin_loading(1, 1)  # partition 2 led elsewhere
        ids = {p: next(f"id-{i}" for i in range(100)
                       if front.coordinator.partition_of(f"id-{i}") == p) for p in range(3)}
        answers = await describe(front, ids[0], ids[1], ids[2], "")
        assert [(a.transactional_id, a.error_code) for a in answers] == [
            (ids[0], 105),  # TRANSACTIONAL_ID_NOT_FOUND
            (ids[1], TxnError.COORDINATOR_LOAD_IN_PROGRESS),
            (ids[2], TxnError.NOT_COORDINATOR), ("", TxnError.INVALID_REQUEST)]
        front.apis.txns = None
        (alone,) = await describe(front, ids[0])
        assert alone.error_code == TxnError.COORDINATOR_NOT_AVAILABLE
    run(body)


def test_list_filters_by_state_producer_id_and_duration() -> None:
    async def body() -> None:
        front = Front()
        a = await front.init(txn_id="a")
        await front.init(txn_id="b")
        front.txns.clock.now += 1_000
        assert await front.add(int(a.producer_id), 0, {"t": (0,)}, txn_id="a") == {
            ("t", 0): 0}
        every = await listed(front)
        assert every.error_code == 0 and every.unknown_state_filters == ()
        assert [(t.transactional_id, t.transaction_state) for t in every.transaction_states] \
            == [("a", "Ongoing"), ("b", "Empty")]
        ongoing = await listed(front, state_filters=("Ongoing", "Bogus"))
        assert [t.transactional_id for t in ongoing.transaction_states] == ["a"]
        assert ongoing.unknown_state_filters == ("Bogus",)
        by_id = await listed(front, version=0, producer_id_filters=(int(a.producer_id) + 1,))
        assert [t.transactional_id for t in by_id.transaction_states] == ["b"]
        front.txns.clock.now += 500
        # v1: running longer than the filter; an id with no open transaction starts at -1.
        young = await listed(front, state_filters=("Ongoing",), duration_filter=500)
        assert young.transaction_states == ()
        old = await listed(front, state_filters=("Ongoing",), duration_filter=499)
        assert [t.transactional_id for t in old.transaction_states] == ["a"]
    run(body)


def test_list_while_a_partition_loads_and_without_a_coordinator() -> None:
    async def body() -> None:
        front = Front(partitions=2)
        front.coordinator.begin_loading(1, 9)
        assert (await listed(front)).error_code == TxnError.COORDINATOR_LOAD_IN_PROGRESS
        front.apis.txns = None
        assert (await listed(front)).error_code == TxnError.COORDINATOR_NOT_AVAILABLE
    run(body)


def authorizer() -> StandardAuthorizer:
    allow = AclPermissionType.ALLOW
    acls = StandardAuthorizer(["User:admin"])
    acls.load([
        AclBinding(ResourceType.TRANSACTIONAL_ID, "app-", PatternType.PREFIXED, "User:ops",
                   "*", AclOperation.DESCRIBE, allow),
        AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:ops", "*",
                   AclOperation.READ, allow)])  # READ implies DESCRIBE
    return acls


def test_transactions_need_describe_on_the_id_and_partitions_on_the_topic() -> None:
    async def body() -> None:
        front = Front(authorizer=authorizer())
        answer = await front.call(ApiKey.INIT_PRODUCER_ID, 4, principal="User:admin",
                                  transactional_id=TXN_ID,
                                  transaction_timeout=datetime.timedelta(minutes=1))
        await front.call(ApiKey.INIT_PRODUCER_ID, 4, principal="User:admin",
                         transactional_id="other", transaction_timeout=MS * 1000)
        pid = int(answer.producer_id)
        topics = {"t": (0,), "__transaction_state": (0,)}
        module = request_module(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
        added = await front.call(
            ApiKey.ADD_PARTITIONS_TO_TXN, 3, principal="User:admin",
            v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=0, v3_and_below_topics=tuple(
                build(module, "AddPartitionsToTxnTopic", name=n, partitions=p)
                for n, p in topics.items()))
        assert {p.partition_error_code for t in added.results_by_topic_v3_and_below
                for p in t.results_by_partition} == {0}
        ops, other = await describe(front, TXN_ID, "other", principal="User:ops")
        assert ops.error_code == 0 and [t.topic for t in ops.topics] == ["t"]
        assert other.error_code == 53 and other.transaction_state == ""
        (admin,) = await describe(front, TXN_ID, principal="User:admin")
        assert sorted(t.topic for t in admin.topics) == ["__transaction_state", "t"]
        seen = await listed(front, principal="User:ops")
        assert [t.transactional_id for t in seen.transaction_states] == [TXN_ID]
        (nobody,) = await describe(front, TXN_ID, principal="User:eve")
        assert nobody.error_code == 53
        assert (await listed(front, principal="User:eve")).transaction_states == ()
    run(body)


# ---- DescribeProducers ----------------------------------------------------------------------

class Producers:
    """The producer states of one broker: real partition logs by topic-partition."""

    def __init__(self, logs: dict[tuple[str, int], PartitionLog]) -> None:
        self.logs = logs

    def active_producers(self, topic: str, partition: int) -> list[ActiveProducer] | int:
        log = self.logs.get((topic, partition))
        return Errors.NOT_LEADER_OR_FOLLOWER if log is None else log_producers(log)


def open_log(tmp_path: Path) -> PartitionLog:
    log = PartitionLog.open(str(tmp_path / "t-0"), "AAAAAAAAAAAAAAAAAAAAAA", LogConfig())
    log.assign_epoch(0, 0)
    log.append_as_leader(build_batch([b"a", b"b", b"c"], producer_id=7, producer_epoch=2,
                                     base_sequence=0, base_timestamp=1_000), 0, 5_000)
    log.append_as_leader(build_batch([b"d"], producer_id=7, producer_epoch=2,
                                     base_sequence=3, base_timestamp=1_500), 0, 5_000)
    log.append_as_leader(build_batch([b"x"], producer_id=9, producer_epoch=0, base_sequence=0,
                                     base_timestamp=2_000, attributes=TRANSACTIONAL_BIT), 0,
                         5_000)
    return log


async def producers_of(front: Front, topics: dict[str, tuple[int, ...]],
                       principal: str = "User:ANONYMOUS") -> dict[tuple[str, int], Any]:
    module = request_module(ApiKey.DESCRIBE_PRODUCERS, 0)
    answer = await call(front, ApiKey.DESCRIBE_PRODUCERS, 0, principal, topics=tuple(
        build(module, "TopicRequest", name=n, partition_indexes=p) for n, p in topics.items()))
    return {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}


def test_describe_producers_shows_a_partition_logs_producer_state(tmp_path: Path) -> None:
    async def body() -> None:
        log = open_log(tmp_path)
        front = Front()
        front.apis.producer_states = Producers({("t", 0): log})
        found = await producers_of(front, {"t": (0, 1, 5), "nope": (0,)})
        assert found[("t", 0)].error_code == 0
        idempotent, transactional = found[("t", 0)].active_producers
        assert (idempotent.producer_id, idempotent.producer_epoch, idempotent.last_sequence,
                idempotent.last_timestamp, idempotent.coordinator_epoch,
                idempotent.current_txn_start_offset) == (7, 2, 3, 1_500, -1, -1)
        # The open transaction's first offset once the partition side tracks transactions
        # (issue 30 item 2); -1 from a producer state without them.
        tracked = "txn_first_offset" in getattr(ProducerEntry, "__slots__", ())
        assert (transactional.producer_id, transactional.current_txn_start_offset) == (
            9, 4 if tracked else -1)
        assert found[("t", 1)].error_code == Errors.NOT_LEADER_OR_FOLLOWER
        assert found[("t", 5)].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert found[("nope", 0)].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        front.apis.producer_states = None
        assert (await producers_of(front, {"t": (0,)}))[("t", 0)].error_code == \
            Errors.NOT_LEADER_OR_FOLLOWER
        log.close()
    run(body)


def test_describe_producers_needs_read_on_the_topic(tmp_path: Path) -> None:
    async def body() -> None:
        log = open_log(tmp_path)
        front = Front(authorizer=authorizer())
        front.apis.producer_states = Producers({("t", 0): log})
        eve = await producers_of(front, {"t": (0, 1)}, "User:eve")
        assert {p.error_code for p in eve.values()} == {Errors.TOPIC_AUTHORIZATION_FAILED}
        assert all(p.active_producers == () for p in eve.values())
        ops = await producers_of(front, {"t": (0,)}, "User:ops")
        assert len(ops[("t", 0)].active_producers) == 2
        log.close()
    run(body)


class _Logs:
    def __init__(self, offline: set[tuple[str, int]]) -> None:
        self.offline = offline

    def partition_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.offline


class _Replica:
    def __init__(self, log: PartitionLog) -> None:
        self.log = log


class _Replicas:
    def __init__(self, log: PartitionLog) -> None:
        self.partitions = {("t", 0): _Replica(log)}
        self.logs = _Logs({("t", 2)})


def test_a_broker_answers_for_every_replica_it_holds(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    states = ReplicaProducerStates(_Replicas(log))  # type: ignore[arg-type]
    found = states.active_producers("t", 0)
    assert not isinstance(found, int) and [p.producer_id for p in found] == [7, 9]
    assert states.active_producers("t", 1) == Errors.NOT_LEADER_OR_FOLLOWER
    assert states.active_producers("t", 2) == Errors.KAFKA_STORAGE_ERROR
    log.close()
