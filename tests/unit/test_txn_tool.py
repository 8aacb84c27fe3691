"""`kraft-admin transactions` (server/txn_commands.py, txn_tool.py, txn_client.py): its
command line, kafka-transactions.sh's tables and messages, and every command against a real
Kafka front in-process (KafkaApis on a KafkaServer socket, the transaction coordinator on a
fake log, the partitions' producer states given by the test)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from broker.kafka.apis import KafkaApis
from broker.kafka.server import KafkaServer
from broker.replica.txn_markers import MarkerResults, TxnMarker
from broker.txn.config import TxnConfig
from broker.txn.producers import ActiveProducer
from kraft.errors import Errors
from metadata.image import MetadataImage
from server import admin_cli, txn_tool
from server.admin_client import CommandError
from server.txn_client import TxnAdmin
from tests.unit.test_kafka_fakes import InMemoryDataPlane, single_broker_image
from tests.unit.txn_harness import Txns

MINUTE = 60_000


def parse(*argv: str) -> argparse.Namespace:
    return admin_cli.build_parser().parse_args(
        ["--bootstrap-server", "127.0.0.1:9092", "transactions", *argv])


def test_the_command_line_is_kafka_transactions_shape() -> None:
    args = parse("describe-producers", "--topic", "t", "--partition", "3", "--broker-id", "2")
    assert (args.command, args.topic, args.partition, args.broker_id, args.json) == (
        "describe-producers", "t", 3, 2, False)
    args = parse("find-hanging", "--broker-id", "1", "--json")
    assert (args.max_transaction_timeout, args.topic, args.json) == (15, None, True)
    args = parse("abort", "--topic", "t", "--partition", "0", "--start-offset", "42")
    assert (args.start_offset, args.producer_id) == (42, None)
    assert parse("list", "--duration-filter", "60000").duration_filter == 60000
    with pytest.raises(SystemExit):
        parse("describe")  # --transactional-id is required


def test_tables_are_kafkas_pretty_print() -> None:
    assert txn_tool.table(["A", "Longer"], [["wide-cell", "1"], ["x", "22"]]).split("\n") == [
        "A        \tLonger", "wide-cell\t1", "x        \t22"]
    assert txn_tool.table(["ProducerId"], []) == "ProducerId"


@dataclass
class Producers:
    by_partition: dict[tuple[str, int], list[ActiveProducer]] = field(default_factory=dict)

    def active_producers(self, topic: str, partition: int) -> list[ActiveProducer] | int:
        found = self.by_partition.get((topic, partition))
        return Errors.NOT_LEADER_OR_FOLLOWER if found is None else found


class MarkerPlane(InMemoryDataPlane):
    """A data plane that writes markers (WriteTxnMarkers served)."""

    def __init__(self) -> None:
        super().__init__()
        self.markers: list[TxnMarker] = []

    async def write_txn_markers(self, markers: list[TxnMarker]) -> list[MarkerResults]:
        self.markers.extend(markers)
        return [dict.fromkeys(m.partitions, 0) for m in markers]


@dataclass
class Broker:
    port: int
    txns: Txns
    producers: Producers
    plane: InMemoryDataPlane

    async def tool(self, *argv: str) -> str:
        args = admin_cli.build_parser().parse_args(
            ["--bootstrap-server", f"127.0.0.1:{self.port}", "transactions", *argv])
        admin = TxnAdmin([f"127.0.0.1:{self.port}"], retry_for_s=2)
        try:
            return await txn_tool.HANDLERS[args.command](admin, args)
        finally:
            await admin.close()

    async def failure(self, *argv: str) -> str:
        with pytest.raises(CommandError) as failed:
            await self.tool(*argv)
        return str(failed.value)


def run(scenario: Callable[[Broker], Awaitable[None]], markers: bool = False) -> None:
    async def main() -> None:
        plane = MarkerPlane() if markers else InMemoryDataPlane()
        image: list[MetadataImage] = [MetadataImage()]
        apis = KafkaApis(plane, lambda: image[0], "c1")
        txns = Txns(TxnConfig(state_log_num_partitions=1))
        txns.coordinator.begin_loading(0, 4)
        txns.coordinator.finish_loading(0, 4, [])
        producers = Producers()
        apis.txns = txns  # type: ignore[assignment]
        apis.producer_states = producers
        server = KafkaServer(apis, "127.0.0.1", 0)
        port = await server.start()
        image[0] = single_broker_image(port, {"t": 2, "__transaction_state": 1})
        try:
            await scenario(Broker(port, txns, producers, plane))
        finally:
            await server.close()

    asyncio.run(main())


async def open_transaction(broker: Broker, txn_id: str, *partitions: int) -> int:
    coordinator = broker.txns.coordinator
    init = await coordinator.init_producer_id(txn_id, 60_000)
    if partitions:
        assert await coordinator.add_partitions(txn_id, init.producer_id, init.producer_epoch,
                                                [("t", p) for p in partitions]) == 0
    return init.producer_id


def test_list_and_describe_show_an_empty_id_and_an_ongoing_one() -> None:
    async def scenario(broker: Broker) -> None:
        idle = await open_transaction(broker, "idle")
        busy = await open_transaction(broker, "busy", 1, 0)
        assert (await broker.tool("list")).split("\n") == [
            "TransactionalId\tCoordinator\tProducerId\tTransactionState",
            f"busy           \t1          \t{busy}      \tOngoing",
            f"idle           \t1          \t{idle}      \tEmpty"]
        listed = json.loads(await broker.tool("list", "--json"))
        assert listed[1] == {"transactionalId": "idle", "coordinator": 1, "producerId": idle,
                             "state": "Empty"}
        header, row = (await broker.tool("describe", "--transactional-id", "idle")).split("\n")
        assert header.split("\t") == [
            "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
            "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
            "TransactionDurationMs", "TopicPartitions"]
        assert [c.strip() for c in row.split("\t")] == [
            "1", "idle", str(idle), "0", "Empty", "60000", "None", "None"]
        described = json.loads(await broker.tool("describe", "--transactional-id", "busy",
                                                 "--json"))
        assert described["state"] == "Ongoing" and described["producerEpoch"] == 0
        assert described["currentTransactionStartTimeMs"] == 1_000_000  # the fake clock's
        assert described["topicPartitions"] == [{"topic": "t", "partition": 0},
                                                {"topic": "t", "partition": 1}]
        row = (await broker.tool("describe", "--transactional-id", "busy")).split("\n")[1]
        assert row.rstrip().endswith("t-0,t-1")
        assert await broker.failure("describe", "--transactional-id", "nobody") == (
            "Failed to describe transaction state of transactional-id `nobody`: "
            "TRANSACTIONAL_ID_NOT_FOUND")
    run(scenario)


def test_describe_producers_prints_none_for_no_open_transaction() -> None:
    async def scenario(broker: Broker) -> None:
        broker.producers.by_partition[("t", 0)] = [
            ActiveProducer(7, 2, 11, 1_500, -1, -1), ActiveProducer(9, 0, 0, 2_000, 3, 40)]
        lines = (await broker.tool("describe-producers", "--topic", "t", "--partition",
                                   "0")).split("\n")
        assert [line.split("\t") for line in lines] == [
            ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
             "LastTimestamp", "CurrentTransactionStartOffset"],
            ["7         ", "2            ", "-1                    ", "11          ",
             "1500         ", "None"],
            ["9         ", "0            ", "3                     ", "0           ",
             "2000         ", "40"]]
        as_json = json.loads(await broker.tool("describe-producers", "--topic", "t",
                                               "--partition", "0", "--json"))
        assert as_json[0]["currentTransactionStartOffset"] is None
        assert as_json[1]["currentTransactionStartOffset"] == 40
        assert await broker.failure("describe-producers", "--topic", "t", "--partition",
                                    "1") == ("Failed to describe producers for partition t-1 "
                                             "on leader: NOT_LEADER_OR_FOLLOWER")
        assert "UNKNOWN_TOPIC_OR_PARTITION" in await broker.failure(
            "describe-producers", "--topic", "nope", "--partition", "0")
    run(scenario)


def test_find_hanging_keeps_only_transactions_no_coordinator_will_finish() -> None:
    async def scenario(broker: Broker) -> None:
        now = int(time.time() * 1000)
        busy = await open_transaction(broker, "busy", 0)
        broker.producers.by_partition[("t", 0)] = [
            ActiveProducer(busy, 0, 4, now - 20 * MINUTE, 4, 5),  # its coordinator has t-0
            ActiveProducer(4242, 1, 9, now - 30 * MINUTE, 2, 3),  # no coordinator knows it
            ActiveProducer(5, 0, 9, now - 40 * MINUTE, -1, -1)]  # no transaction open
        broker.producers.by_partition[("t", 1)] = [
            ActiveProducer(busy, 0, 2, now - 20 * MINUTE, 4, 7),  # t-1 is not in it
            ActiveProducer(6, 0, 1, now - MINUTE, -1, 8)]  # too young to tell
        assert await broker.failure("find-hanging") == (
            "The `find-hanging` command requires either --topic or --broker-id to limit the "
            "scope of the search")
        assert await broker.failure("find-hanging", "--broker-id", "1", "--partition",
                                    "0") == "The --partition argument requires --topic to be " \
                                            "provided"
        found = json.loads(await broker.tool("find-hanging", "--broker-id", "1", "--json"))
        assert [(f["topic"], f["partition"], f["producerId"], f["startOffset"])
                for f in found] == [("t", 0, 4242, 3), ("t", 1, busy, 7)]
        assert found[0]["durationMinutes"] == 30 and found[0]["coordinatorEpoch"] == 2
        lines = (await broker.tool("find-hanging", "--topic", "t", "--partition", "1")
                 ).split("\n")
        assert lines[0].split("\t") == [
            "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
            "StartOffset", "LastTimestamp", "Duration(min)"]
        assert [c.strip() for c in lines[1].split("\t")][:6] == [
            "t", "1", str(busy), "0", "4", "7"]
        assert len(lines) == 2
        # A longer timeout: nothing is old enough to be called hanging.
        assert json.loads(await broker.tool("find-hanging", "--broker-id", "1", "--json",
                                            "--max-transaction-timeout", "60")) == []
        # A broker that holds no replica: nothing searched.
        assert json.loads(await broker.tool("find-hanging", "--broker-id", "3", "--json")) == []
    run(scenario)


def test_abort_checks_its_arguments_and_finds_the_transaction_by_start_offset() -> None:
    async def scenario(broker: Broker) -> None:
        broker.producers.by_partition[("t", 0)] = [ActiveProducer(4242, 3, 9, 1, -1, 17)]
        assert (await broker.failure("abort", "--topic", "t", "--partition", "0")).startswith(
            "The transaction to abort must be identified either with --start-offset")
        assert await broker.failure("abort", "--topic", "t", "--partition", "0",
                                    "--producer-id", "1") == \
            "Missing required argument --producer-epoch"
        assert await broker.failure("abort", "--topic", "t", "--partition", "0",
                                    "--start-offset", "16") == \
            "Could not find any open transactions starting at offset 16 on partition t-0"
        assert await broker.tool("abort", "--topic", "t", "--partition", "0",
                                 "--start-offset", "17") == ""
        assert isinstance(broker.plane, MarkerPlane)
        # Kafka's abortTransaction: an ABORT marker, coordinator epoch -1 sent as 0.
        assert broker.plane.markers == [TxnMarker(4242, 3, False, 0, (("t", 0),))]
        done = json.loads(await broker.tool(
            "abort", "--topic", "t", "--partition", "0", "--producer-id", "8",
            "--producer-epoch", "1", "--coordinator-epoch", "5", "--json"))
        assert done == {"topic": "t", "partition": 0, "producerId": 8, "producerEpoch": 1,
                        "coordinatorEpoch": 5, "aborted": True}
        assert broker.plane.markers[-1] == TxnMarker(8, 1, False, 5, (("t", 0),))
    run(scenario, markers=True)


def test_abort_fails_in_one_line_where_the_leader_writes_no_markers() -> None:
    async def scenario(broker: Broker) -> None:
        # This leader's data plane has no marker writer: it answers UNSUPPORTED_VERSION.
        assert await broker.failure(
            "abort", "--topic", "t", "--partition", "0", "--producer-id", "8",
            "--producer-epoch", "1", "--coordinator-epoch", "-1") == (
            "Failed to abort transaction AbortTransactionSpec(topicPartition=t-0, "
            "producerId=8, producerEpoch=1, coordinatorEpoch=0): UNSUPPORTED_VERSION")
    run(scenario)
