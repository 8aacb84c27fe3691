"""The Admin service on a real single-voter controller: every call through a real gRPC client,
happy paths and Kafka's errors, request checks, forwarding from a standby controller."""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from kraft.core.config import RaftConfig
from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from kraft.node.service import RaftServicer
from kraft.rpc import raft_pb2_grpc as raft_rpc
from metadata import admin_ops, admin_service
from metadata.admin_service import AdminServicer, add_admin_service
from metadata.controller import QuorumController
from metadata.errors import ControllerResult
from metadata.image import MetadataImage
from metadata.records import Endpoint, RegisterBrokerRecord
from metadata.replication import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    alter_partition,
    fence_broker,
    unfence_broker,
)
from metadata.rpc import admin_pb2 as pb
from metadata.rpc import admin_pb2_grpc as rpc
from tests.unit.controller_harness import attach_controller

T = TypeVar("T")
E = Errors
CLUSTER_ID = "admin-test-cluster"


async def until(condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.005)  # yields to the node's tasks; bounded by wait_for

    await asyncio.wait_for(poll(), timeout_s)


def wait_for(condition: Callable[[], T], timeout_s: float = 10.0) -> T:
    """Poll a condition from the test thread until it holds; fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.01)  # polling interval of a condition wait
    raise AssertionError(f"condition not met within {timeout_s} s")


def broker_record(broker_id: int, rack: str | None = None, fenced: bool = False
                  ) -> ControllerResult[None]:
    record = RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=random_uuid(), broker_epoch=100 + broker_id,
        endpoints=(Endpoint("PLAINTEXT", "localhost", 9090 + broker_id),), rack=rack,
        fenced=fenced)
    return ControllerResult((record,), None)


class LoopThread:
    """An event loop in a background thread: the servers run there, while tests call them
    with blocking clients from the test thread, as kraft-admin does."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 15.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class AdminHarness(LoopThread):
    """A single-voter controller with the Admin service on 127.0.0.1:<ephemeral port> and
    brokers 1-4 registered and unfenced (racks r1, r2)."""

    def __init__(self, root: Path, brokers: tuple[int, ...] = (1, 2, 3, 4)) -> None:
        super().__init__()
        self.run(self._start(root))
        for b in brokers:
            self.write(lambda _image, b=b: broker_record(b, rack=f"r{b % 2 + 1}"))
        self.channel = grpc.insecure_channel(self.endpoint)
        self.stub = rpc.AdminStub(self.channel)

    async def _start(self, root: Path) -> None:
        node = RaftNode(RaftConfig(CLUSTER_ID, 1, {1: "127.0.0.1:1"}),
                        SegmentedLog(root / "log"), QuorumStateStore(root / "quorum-state"),
                        rng=random.Random(1))
        self.controller = attach_controller(node, noop_interval_ms=0)
        await node.start()
        await until(lambda: self.controller.is_active)
        self.server = grpc.aio.server()
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"127.0.0.1:{self.port}"
        self.servicer = AdminServicer(self.controller, CLUSTER_ID, {1: self.endpoint})
        add_admin_service(self.server, self.servicer)
        await self.server.start()

    def write(self, rule: Callable[[MetadataImage], ControllerResult[T]]) -> T:
        return self.run(self.controller.write(rule))

    @property
    def image(self) -> MetadataImage:
        return self.controller.committed_image

    def report_isr(self, topic: str, partition: int, isr: list[int]) -> None:
        """What a partition leader's AlterPartition would do: set the ISR."""
        topic_image = self.image.topic(topic)
        assert topic_image is not None
        p = topic_image.partitions[partition]
        epoch = self.image.cluster.brokers[p.leader].epoch
        request = AlterPartitionRequest(p.leader, epoch, (AlterPartitionTopic(
            topic_image.topic_id, (AlterPartitionData(
                partition, p.leader_epoch, tuple(BrokerState(b) for b in isr),
                p.partition_epoch),)),))
        [result] = self.write(lambda image: alter_partition(image, request))
        # NEW_LEADER_ELECTED: written, and the reporter is no longer the leader.
        assert result.error is None or result.error.error == Errors.NEW_LEADER_ELECTED

    def close(self) -> None:
        self.channel.close()

        async def stop() -> None:
            await self.server.stop(0)
            await self.servicer.close()
            await self.controller.close()
            await self.controller.client.stop()

        self.run(stop())
        self.stop()


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminHarness]:
    harness = AdminHarness(tmp_path_factory.mktemp("admin"))
    yield harness
    harness.close()


def create(admin: AdminHarness, name: str, partitions: int = 1, rf: int = 1,
           **kwargs: Any) -> pb.CreatableTopicResult:
    topic = pb.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf,
                              **kwargs)
    response = admin.stub.CreateTopics(pb.CreateTopicsRequest(topics=[topic]), timeout=10)
    assert response.status.error_code == 0, response.status
    [result] = response.topics
    return result


def manual(admin: AdminHarness, name: str, *replicas: list[int]) -> pb.CreatableTopicResult:
    assignments = [pb.ReplicaAssignment(partition_index=i, broker_ids=r)
                   for i, r in enumerate(replicas)]
    return create(admin, name, -1, -1, assignments=assignments)


def describe(admin: AdminHarness, name: str) -> pb.TopicDescription:
    [topic] = admin.stub.DescribeTopics(pb.DescribeTopicsRequest(names=[name])).topics
    return topic


def alter(admin: AdminHarness, rtype: int, name: str, *changes: tuple[str, int, str],
          validate_only: bool = False) -> pb.AlterConfigsResourceResult:
    resource = pb.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
        pb.AlterableConfig(name=k, op=op, value=v) for k, op, v in changes])
    response = admin.stub.IncrementalAlterConfigs(pb.IncrementalAlterConfigsRequest(
        resources=[resource], validate_only=validate_only))
    assert response.status.error_code == 0, response.status
    [result] = response.results
    return result


TOPIC = pb.CONFIG_RESOURCE_TYPE_TOPIC
BROKER = pb.CONFIG_RESOURCE_TYPE_BROKER
SET, DELETE, APPEND = pb.ALTER_CONFIG_OP_SET, pb.ALTER_CONFIG_OP_DELETE, pb.ALTER_CONFIG_OP_APPEND


# ---- topics ----

def test_create_describe_list_and_delete_a_topic(admin: AdminHarness) -> None:
    created = create(admin, "orders", 3, 2, configs=[
        pb.ConfigValue(name="retention.ms", value="60000")])
    assert (created.error_code, created.num_partitions, created.replication_factor) == (0, 3, 2)
    topic = describe(admin, "orders")
    assert topic.error_code == 0 and topic.topic_id == created.topic_id
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    for p in topic.partitions:
        assert len(p.replicas) == 2 and list(p.isr) == list(p.replicas)
        assert p.leader == p.replicas[0] and (p.leader_epoch, p.partition_epoch) == (0, 0)
    assert {c.name: c.value for c in topic.configs} == {"retention.ms": "60000"}
    listed = admin.stub.ListTopics(pb.ListTopicsRequest()).topics
    assert ("orders", 3, 2) in [(t.name, t.partition_count, t.replication_factor)
                                for t in listed]

    response = admin.stub.DeleteTopics(pb.DeleteTopicsRequest(topics=[
        pb.TopicRef(name="orders"), pb.TopicRef(name="no-such-topic")]))
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("orders", 0), ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert admin.image.topic("orders") is None
    missing = describe(admin, "orders")
    assert (missing.error_code, missing.error_message) == (
        E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'orders' does not exist.")


def test_create_topic_errors_have_kafkas_codes_and_messages(admin: AdminHarness) -> None:
    create(admin, "dup")
    again = create(admin, "dup")
    assert (again.error_code, again.error_message) == (
        E.TOPIC_ALREADY_EXISTS, "Topic 'dup' already exists.")
    too_many = create(admin, "wide", 1, 5)
    assert (too_many.error_code, too_many.error_message) == (
        E.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 5 time(s): The target "
        "replication factor of 5 cannot be reached because only 4 broker(s) are registered.")
    bad_name = create(admin, "a/b")
    assert bad_name.error_code == E.INVALID_TOPIC_EXCEPTION
    zero = create(admin, "zero", 0)
    assert zero.error_code == E.INVALID_PARTITIONS
    unknown_key = create(admin, "cfg1", configs=[pb.ConfigValue(name="retention.mss",
                                                                value="1")])
    assert (unknown_key.error_code, unknown_key.error_message) == (
        E.INVALID_CONFIG, "Unknown topic config name: retention.mss")
    bad_value = create(admin, "cfg2", configs=[pb.ConfigValue(name="segment.bytes",
                                                              value="10")])
    assert (bad_value.error_code, bad_value.error_message) == (
        E.INVALID_CONFIG, "Invalid value 10 for configuration segment.bytes: Value must be "
        "at least 14")
    # Kafka's order: an existing topic is refused as such, whatever its configs.
    exists = create(admin, "dup", configs=[pb.ConfigValue(name="nope", value="1")])
    assert exists.error_code == E.TOPIC_ALREADY_EXISTS
    for name in ("wide", "a/b", "zero", "cfg1", "cfg2"):
        assert admin.image.topic(name) is None


def test_validate_only_and_cluster_defaults_for_partitions(admin: AdminHarness) -> None:
    topic = pb.CreatableTopic(name="dry", num_partitions=2, replication_factor=2)
    response = admin.stub.CreateTopics(pb.CreateTopicsRequest(topics=[topic],
                                                              validate_only=True))
    assert response.topics[0].error_code == 0 and admin.image.topic("dry") is None
    assert alter(admin, BROKER, "", ("num.partitions", SET, "3"),
                 ("default.replication.factor", SET, "2")).error_code == 0
    defaulted = create(admin, "defaults", -1, -1)
    assert (defaulted.num_partitions, defaulted.replication_factor) == (3, 2)
    assert alter(admin, BROKER, "", ("num.partitions", DELETE, ""),
                 ("default.replication.factor", DELETE, "")).error_code == 0
    assert create(admin, "defaults2", -1, -1).num_partitions == 1


def test_create_partitions(admin: AdminHarness) -> None:
    create(admin, "grow", 1, 2)

    def add(count: int, *assignments: list[int]) -> pb.CreatePartitionsTopicResult:
        topic = pb.CreatePartitionsTopic(name="grow", count=count, assignments=[
            pb.CreatePartitionsAssignment(broker_ids=a) for a in assignments])
        [result] = admin.stub.CreatePartitions(pb.CreatePartitionsRequest(topics=[topic])).topics
        return result

    assert add(3).error_code == 0
    assert add(4, [4, 3]).error_code == 0
    assert list(describe(admin, "grow").partitions[3].replicas) == [4, 3]
    same = add(4)
    assert (same.error_code, same.error_message) == (
        E.INVALID_PARTITIONS, "Topic already has 4 partition(s).")
    fewer = add(2)
    assert fewer.error_message == "The topic grow currently has 4 partition(s); 2 would not " \
        "be an increase."
    assert add(5, [1]).error_code == E.INVALID_REPLICA_ASSIGNMENT
    huge = admin.stub.CreatePartitions(pb.CreatePartitionsRequest(topics=[
        pb.CreatePartitionsTopic(name="grow", count=2**31 - 1)]))
    assert (huge.status.error_code, huge.status.error_message) == (
        E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


# ---- brokers and cluster ----

def test_brokers_list_describe_and_unregister(admin: AdminHarness) -> None:
    brokers = admin.stub.ListBrokers(pb.ListBrokersRequest()).brokers
    assert [b.broker_id for b in brokers][:4] == [1, 2, 3, 4]
    first = brokers[0]
    assert (first.epoch, first.rack, first.fenced, first.in_controlled_shutdown) == (
        101, "r2", False, False)
    assert [(e.name, e.host, e.port) for e in first.endpoints] == [("PLAINTEXT", "localhost",
                                                                    9091)]
    manual(admin, "on-9", [1])
    admin.write(lambda _image: broker_record(9))
    described = admin.stub.DescribeBroker(pb.DescribeBrokerRequest(broker_id=1))
    assert described.status.error_code == 0 and described.broker.broker_id == 1
    assert described.leader_count >= 1 and described.isr_count >= described.leader_count

    response = admin.stub.UnregisterBroker(pb.UnregisterBrokerRequest(broker_id=9))
    assert response.status.error_code == 0 and 9 not in admin.image.cluster.brokers
    again = admin.stub.UnregisterBroker(pb.UnregisterBrokerRequest(broker_id=9))
    assert (again.status.error_code, again.status.error_message) == (
        E.BROKER_ID_NOT_REGISTERED, "Broker ID 9 is not currently registered")
    unknown = admin.stub.DescribeBroker(pb.DescribeBrokerRequest(broker_id=9))
    assert unknown.status.error_code == E.BROKER_ID_NOT_REGISTERED


def test_describe_cluster_and_features(admin: AdminHarness) -> None:
    cluster = admin.stub.DescribeCluster(pb.DescribeClusterRequest())
    assert (cluster.cluster_id, cluster.controller_id, cluster.controller_endpoint) == (
        CLUSTER_ID, 1, admin.endpoint)
    assert [(c.id, c.endpoint) for c in cluster.controllers] == [(1, admin.endpoint)]
    assert {1, 2, 3, 4} <= {b.broker_id for b in cluster.brokers}
    assert cluster.metadata_offset == admin.image.provenance.offset
    features = admin.stub.DescribeFeatures(pb.DescribeFeaturesRequest())
    assert [(f.name, f.min_version, f.max_version) for f in features.supported] == [
        ("metadata.version", 7, 21)]
    # A new cluster's first write finalizes the highest metadata.version it supports.
    assert [(f.name, f.level) for f in features.finalized] == [("metadata.version", 21)]


# ---- elections and reassignments ----

def test_preferred_and_unclean_elections(admin: AdminHarness) -> None:
    for b in (11, 12):
        admin.write(lambda _image, b=b: broker_record(b))
    manual(admin, "elect", [11, 12])
    # Broker 11 leaves (fenced), comes back and rejoins the ISR: 12 still leads.
    admin.write(lambda image: fence_broker(image, 11))
    admin.write(lambda image: unfence_broker(image, 11))
    admin.report_isr("elect", 0, [12, 11])
    assert admin.image.topic("elect").partitions[0].leader == 12  # type: ignore[union-attr]

    def elect(kind: int, all_partitions: bool = False, partitions: tuple[int, ...] = (0,),
              topic: str = "elect") -> pb.ElectLeadersResponse:
        named = [] if all_partitions else [pb.TopicPartitions(topic=topic,
                                                              partitions=partitions)]
        return admin.stub.ElectLeaders(pb.ElectLeadersRequest(
            election_type=kind, topic_partitions=named, all_partitions=all_partitions))

    preferred = pb.ELECTION_TYPE_PREFERRED
    assert [(r.topic, r.partition, r.error_code) for r in elect(preferred).results] == [
        ("elect", 0, 0)]
    p = admin.image.topic("elect").partitions[0]  # type: ignore[union-attr]
    assert (p.leader, p.leader_epoch) == (11, 2)  # fencing moved it once
    [not_needed] = elect(preferred).results
    assert (not_needed.error_code, not_needed.error_message) == (
        E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
    assert [r.topic for r in elect(preferred, all_partitions=True).results
            if r.topic == "elect"] == []  # not-needed ones are left out
    [unclean] = elect(pb.ELECTION_TYPE_UNCLEAN).results
    assert unclean.error_code == E.ELECTION_NOT_NEEDED  # it has a leader
    [unknown] = elect(preferred, topic="nope").results
    assert (unknown.error_code, unknown.error_message) == (
        E.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")
    [bad] = elect(preferred, partitions=(7,)).results
    assert bad.error_message == "No such partition as elect-7"


def test_reassignment_executes_completes_and_cancels(admin: AdminHarness) -> None:
    manual(admin, "move", [1, 2], [1, 2])

    def reassign(*targets: tuple[int, list[int] | None]) -> list[tuple[int, str]]:
        request = pb.AlterPartitionReassignmentsRequest(partitions=[
            pb.ReassignablePartition(topic="move", partition=p, replicas=r or [],
                                     cancel=r is None) for p, r in targets])
        response = admin.stub.AlterPartitionReassignments(request)
        assert response.status.error_code == 0, response.status
        return [(r.error_code, r.error_message) for r in response.results]

    def ongoing() -> list[tuple[int, list[int], list[int], list[int]]]:
        listed = admin.stub.ListPartitionReassignments(pb.ListPartitionReassignmentsRequest())
        return [(r.partition, list(r.replicas), list(r.adding_replicas),
                 list(r.removing_replicas)) for r in listed.reassignments if r.topic == "move"]

    assert reassign((0, [2, 3]), (1, [2, 4])) == [(0, ""), (0, "")]
    assert ongoing() == [(0, [2, 3, 1], [3], [1]), (1, [2, 4, 1], [4], [1])]
    text = describe(admin, "move").partitions[0]
    assert (list(text.adding_replicas), list(text.removing_replicas)) == ([3], [1])
    # Partition 0 completes once its leader reports the new replica in sync.
    admin.report_isr("move", 0, [1, 2, 3])
    done = describe(admin, "move").partitions[0]
    assert (list(done.replicas), list(done.isr), done.leader) == ([2, 3], [2, 3], 2)
    assert reassign((1, None)) == [(0, "")]  # cancel partition 1
    assert ongoing() == []
    # Kafka's revert keeps the current order without the adding replicas: [2, 4, 1] - [4].
    assert list(describe(admin, "move").partitions[1].replicas) == [2, 1]
    assert reassign((1, None)) == [(E.NO_REASSIGNMENT_IN_PROGRESS,
                                    "No partition reassignment is in progress.")]
    unknown = admin.stub.AlterPartitionReassignments(pb.AlterPartitionReassignmentsRequest(
        partitions=[pb.ReassignablePartition(topic="nope", partition=0, replicas=[1])]))
    assert unknown.results[0].error_message == "Unable to find a topic named nope."
    bad_target = reassign((0, [2, 99]))
    assert bad_target[0][0] == E.INVALID_REPLICA_ASSIGNMENT


# ---- configs ----

def test_alter_and_describe_topic_configs(admin: AdminHarness) -> None:
    create(admin, "cfg")
    assert alter(admin, TOPIC, "cfg", ("retention.ms", SET, "1000"),
                 ("cleanup.policy", SET, "compact")).error_code == 0
    assert alter(admin, TOPIC, "cfg", ("cleanup.policy", APPEND, "delete")).error_code == 0
    response = admin.stub.DescribeConfigs(pb.DescribeConfigsRequest(resources=[
        pb.DescribeConfigsResource(resource_type=TOPIC, resource_name="cfg")]))
    entries = {c.name: c for c in response.results[0].configs}
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source == pb.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.value, s.source) for s in entries["retention.ms"].synonyms] == [
        ("retention.ms", "1000", pb.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "604800000", pb.CONFIG_SOURCE_DEFAULT_CONFIG)]
    assert entries["cleanup.policy"].value == "compact,delete"
    assert entries["cleanup.policy"].config_type == pb.CONFIG_TYPE_LIST
    assert entries["segment.bytes"].source == pb.CONFIG_SOURCE_DEFAULT_CONFIG
    assert alter(admin, TOPIC, "cfg", ("retention.ms", DELETE, "")).error_code == 0
    assert "retention.ms" not in {c.name for c in describe(admin, "cfg").configs}

    def refused(*changes: tuple[str, int, str], name: str = "cfg") -> tuple[int, str]:
        result = alter(admin, TOPIC, name, *changes)
        return result.error_code, result.error_message

    assert refused(("retention.ms", SET, "abc")) == (
        E.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of "
        "type LONG")
    assert refused(("min.insync.replicas", SET, "0")) == (
        E.INVALID_CONFIG, "Invalid value 0 for configuration min.insync.replicas: Value must "
        "be at least 1")
    assert refused(("unclean.leader.election.enable", SET, "yes")) == (
        E.INVALID_CONFIG, "Invalid value yes for configuration unclean.leader.election.enable: "
        "Expected value to be either true or false")
    assert refused(("cleanup.policy", SET, "compact,purge")) == (
        E.INVALID_CONFIG, "Invalid value purge for configuration cleanup.policy: String must "
        "be one of: compact, delete")
    assert refused(("nope", SET, "1")) == (E.INVALID_CONFIG, "Unknown topic config name: nope")
    assert refused(("retention.ms", APPEND, "1")) == (
        E.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    assert refused(("retention.ms", SET, "1"), ("retention.ms", SET, "2")) == (
        E.INVALID_REQUEST, "Error due to duplicate config keys")
    assert refused(("retention.ms", SET, "1"), name="ghost") == (
        E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'ghost' does not exist.")
    assert refused(("retention.ms", SET, "1"), name="") == (
        E.INVALID_REQUEST, "Default topic resources are not allowed.")
    # validate_only writes nothing
    alter(admin, TOPIC, "cfg", ("retention.ms", SET, "5"), validate_only=True)
    assert "retention.ms" not in {c.name for c in describe(admin, "cfg").configs}


def test_broker_configs_including_the_cluster_default(admin: AdminHarness) -> None:
    assert alter(admin, BROKER, "", ("unclean.leader.election.enable", SET, "true")).error_code \
        == 0
    assert alter(admin, BROKER, "2", ("min.insync.replicas", SET, "2")).error_code == 0
    response = admin.stub.DescribeConfigs(pb.DescribeConfigsRequest(resources=[
        pb.DescribeConfigsResource(resource_type=BROKER, resource_name="2",
                                   config_names=["min.insync.replicas",
                                                 "unclean.leader.election.enable"])]))
    entries = {c.name: c for c in response.results[0].configs}
    assert (entries["min.insync.replicas"].value, entries["min.insync.replicas"].source) == (
        "2", pb.CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG)
    unclean = entries["unclean.leader.election.enable"]
    assert (unclean.value, unclean.source) == ("true",
                                               pb.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    # A topic inherits the cluster default through its synonym.
    create(admin, "inherits")
    [topic] = admin.stub.DescribeConfigs(pb.DescribeConfigsRequest(resources=[
        pb.DescribeConfigsResource(resource_type=TOPIC, resource_name="inherits",
                                   config_names=["unclean.leader.election.enable"])])).results
    assert topic.configs[0].source == pb.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
    assert alter(admin, BROKER, "", ("unclean.leader.election.enable", DELETE, "")) \
        .error_code == 0
    for name, message in (("x", "Unable to parse broker name as a base 10 number."),
                          ("-1", "Invalid negative broker ID.")):
        result = alter(admin, BROKER, name, ("num.partitions", SET, "2"))
        assert (result.error_code, result.error_message) == (E.INVALID_REQUEST, message)
    missing = alter(admin, BROKER, "77", ("num.partitions", SET, "2"))
    assert (missing.error_code, missing.error_message) == (E.BROKER_ID_NOT_REGISTERED,
                                                           "No node with id 77 found.")
    unknown = alter(admin, BROKER, "", ("log.flush.interval", SET, "2"))
    assert unknown.error_message == "Unknown broker config name: log.flush.interval"
    interval = alter(admin, BROKER, "", ("leader.imbalance.check.interval.seconds", SET, "0"))
    assert interval.error_code == E.INVALID_CONFIG
    duplicate = admin.stub.IncrementalAlterConfigs(pb.IncrementalAlterConfigsRequest(
        resources=[pb.AlterConfigsResource(resource_type=BROKER, resource_name="1")] * 2))
    assert [r.error_message for r in duplicate.results] == [
        "Each resource must appear at most once."] * 2


# ---- request checks and failures ----

@pytest.mark.parametrize("call, request_message, expected", [
    ("ElectLeaders", pb.ElectLeadersRequest(election_type=7), "Unknown election type 7."),
    ("ElectLeaders", pb.ElectLeadersRequest(all_partitions=True, topic_partitions=[
        pb.TopicPartitions(topic="t", partitions=[0])]),
     "Name partitions or ask for all partitions, not both."),
    ("ElectLeaders", pb.ElectLeadersRequest(topic_partitions=[
        pb.TopicPartitions(topic="t", partitions=[-1])]), "Invalid negative partition -1."),
    ("AlterPartitionReassignments", pb.AlterPartitionReassignmentsRequest(partitions=[
        pb.ReassignablePartition(topic="t", partition=0, replicas=[1], cancel=True)]),
     "Cancelling the reassignment of t-0 takes no target replicas."),
    ("AlterPartitionReassignments", pb.AlterPartitionReassignmentsRequest(partitions=[
        pb.ReassignablePartition(topic="t", partition=0, replicas=[1])] * 2),
     "Duplicate partition t-0 in the request."),
    ("IncrementalAlterConfigs", pb.IncrementalAlterConfigsRequest(resources=[
        pb.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[
            pb.AlterableConfig(name="retention.ms", op=9, value="1")])]),
     "Unknown config operation 9 for retention.ms."),
    ("IncrementalAlterConfigs", pb.IncrementalAlterConfigsRequest(resources=[
        pb.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[
            pb.AlterableConfig(name="retention.ms", value="1\n2")])]),
     "The config value '1\\n2' contains control characters."),
    ("CreateTopics", pb.CreateTopicsRequest(topics=[pb.CreatableTopic(name="x" * 40_000)]),
     "The topic name is longer than 32768 characters."),
    ("CreateTopics", pb.CreateTopicsRequest(topics=[pb.CreatableTopic(name=f"t{i}")
                                                    for i in range(10_001)]),
     "Too many topics in one request: 10001 (at most 10000)."),
    ("DescribeBroker", pb.DescribeBrokerRequest(broker_id=-3), "Invalid negative broker ID -3."),
])
def test_malformed_requests_are_refused_whole(admin: AdminHarness, call: str,
                                              request_message: Any, expected: str) -> None:
    before = admin.image.provenance.offset
    response = getattr(admin.stub, call)(request_message, timeout=10)
    assert (response.status.error_code, response.status.error_message) == (
        E.INVALID_REQUEST, expected)
    assert admin.image.provenance.offset == before


def test_describe_configs_of_unknown_resources(admin: AdminHarness) -> None:
    response = admin.stub.DescribeConfigs(pb.DescribeConfigsRequest(resources=[
        pb.DescribeConfigsResource(resource_type=TOPIC, resource_name="ghost"),
        pb.DescribeConfigsResource(resource_type=16, resource_name="x")]))
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'ghost' does not exist."),
        (E.INVALID_REQUEST, "Unknown resource type CLIENT_METRICS")]


def test_a_huge_partition_count_is_refused_before_placement(admin: AdminHarness) -> None:
    response = admin.stub.CreateTopics(pb.CreateTopicsRequest(topics=[
        pb.CreatableTopic(name="huge", num_partitions=2**31 - 1, replication_factor=1)]))
    assert (response.status.error_code, response.status.error_message) == (
        E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def test_an_unexpected_exception_is_an_unknown_server_error(
    admin: AdminHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(admin_ops, "list_partition_reassignments", broken)
    response = admin.stub.ListPartitionReassignments(pb.ListPartitionReassignmentsRequest())
    assert (response.status.error_code, response.status.error_message) == (
        E.UNKNOWN_SERVER_ERROR,
        "Unexpected error in ListPartitionReassignments: RuntimeError: boom")
    monkeypatch.undo()
    assert admin.stub.ListTopics(pb.ListTopicsRequest()).status.error_code == 0


# ---- a node that is not the active controller ----

def test_an_inactive_controller_with_no_other_to_forward_to_answers_not_controller(
    tmp_path: Path,
) -> None:
    harness = AdminHarness(tmp_path, brokers=())
    try:
        core = harness.controller.client.core
        assert core is not None

        async def resign() -> None:
            core.begin_shutdown(0)
            harness.controller.client._process()
            await until(lambda: not harness.controller.is_active)

        harness.run(resign())
        response = harness.stub.CreateTopics(pb.CreateTopicsRequest(topics=[
            pb.CreatableTopic(name="t", num_partitions=1, replication_factor=1)]))
        assert response.status.error_code == E.NOT_CONTROLLER
        # Reads still answer, from this node's committed image.
        assert harness.stub.ListBrokers(pb.ListBrokersRequest()).status.error_code == 0
    finally:
        harness.close()


class TwoControllers(LoopThread):
    """Two voters on loopback, each serving Raft and Admin: one becomes active, and the
    other forwards writes to it."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.run(self._start(root))

    async def _start(self, root: Path) -> None:
        self.servers = {i: grpc.aio.server() for i in (1, 2)}
        ports = {i: s.add_insecure_port("127.0.0.1:0") for i, s in self.servers.items()}
        self.endpoints = {i: f"127.0.0.1:{p}" for i, p in ports.items()}
        self.controllers: dict[int, QuorumController] = {}
        self.servicers: dict[int, AdminServicer] = {}
        for i, server in self.servers.items():
            # A quick first election, but a fetch timeout that a loaded CI machine's stalls
            # cannot reach: the tests assume the active controller stays active (with 600 ms
            # the standby sometimes took over mid-test and answered a forward itself).
            config = RaftConfig(CLUSTER_ID, i, self.endpoints, local_endpoint=self.endpoints[i],
                                election_timeout_ms=300, fetch_timeout_ms=5000,
                                election_backoff_max_ms=100, request_timeout_ms=2000)
            node = RaftNode(config, SegmentedLog(root / f"log-{i}"),
                            QuorumStateStore(root / f"state-{i}"), rng=random.Random(i))
            self.controllers[i] = attach_controller(node, noop_interval_ms=0)
            raft_rpc.add_RaftServicer_to_server(RaftServicer(node), server)
            self.servicers[i] = AdminServicer(self.controllers[i], CLUSTER_ID, self.endpoints)
            add_admin_service(server, self.servicers[i])
            await server.start()
        for controller in self.controllers.values():
            await controller.client.start()

        def settled() -> bool:
            active = [i for i, c in self.controllers.items() if c.is_active]
            return len(active) == 1 and all(
                c.client.status().leader_id == active[0] for c in self.controllers.values())

        await until(settled)
        self.active = next(i for i, c in self.controllers.items() if c.is_active)
        self.standby = 3 - self.active
        await self.controllers[self.active].write(lambda _image: broker_record(1))

    def close(self) -> None:
        async def stop() -> None:
            for i in self.servers:
                await self.servers[i].stop(0)
                await self.servicers[i].close()
                await self.controllers[i].close()
                await self.controllers[i].client.stop()

        self.run(stop())
        self.stop()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoControllers]:
    controllers = TwoControllers(tmp_path_factory.mktemp("pair"))
    yield controllers
    controllers.close()


def test_a_standby_forwards_writes_and_serves_reads_from_its_committed_image(
    pair: TwoControllers,
) -> None:
    with grpc.insecure_channel(pair.endpoints[pair.standby]) as channel:
        standby = rpc.AdminStub(channel)
        response = standby.CreateTopics(pb.CreateTopicsRequest(topics=[
            pb.CreatableTopic(name="via-standby", num_partitions=2, replication_factor=1)]),
            timeout=10)
        assert response.status.error_code == 0 and response.topics[0].error_code == 0
        assert pair.controllers[pair.active].committed_image.topic("via-standby") is not None
        replica = pair.controllers[pair.standby]
        wait_for(lambda: replica.committed_image.topic("via-standby") is not None)
        [topic] = standby.DescribeTopics(pb.DescribeTopicsRequest(names=["via-standby"])).topics
        assert topic.error_code == 0 and len(topic.partitions) == 2
        cluster = standby.DescribeCluster(pb.DescribeClusterRequest())
        assert (cluster.controller_id, cluster.controller_endpoint) == (
            pair.active, pair.endpoints[pair.active])


def test_a_forwarded_write_is_never_forwarded_again(pair: TwoControllers) -> None:
    with grpc.insecure_channel(pair.endpoints[pair.standby]) as channel:
        response = rpc.AdminStub(channel).UnregisterBroker(
            pb.UnregisterBrokerRequest(broker_id=1),
            metadata=((admin_service.FORWARDED_BY, "9"),), timeout=10)
    assert response.status.error_code == E.NOT_CONTROLLER
    assert (response.status.controller_id, response.status.controller_endpoint) == (
        pair.active, pair.endpoints[pair.active])
    assert response.status.error_message == (
        f"This is not the active controller; the active controller is {pair.active}")
    assert 1 in pair.controllers[pair.active].committed_image.cluster.brokers


def dead_endpoint() -> str:
    """An address nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_failed_forward_is_not_controller_and_a_slow_one_a_timeout(
    pair: TwoControllers,
) -> None:
    async def serve(servicer: AdminServicer) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        add_admin_service(server, servicer)
        await server.start()
        return server, port

    standby = pair.controllers[pair.standby]
    unreachable = AdminServicer(standby, CLUSTER_ID, {pair.active: dead_endpoint()})
    # A "controller" that accepts the connection and never answers: the forward must time out
    # whatever the machine's speed (a 1 µs deadline against the real one raced its answer).
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    hung = f"127.0.0.1:{silent.getsockname()[1]}"
    impatient = AdminServicer(standby, CLUSTER_ID, {pair.active: hung}, forward_timeout_s=0.2)
    request = pb.CreateTopicsRequest(topics=[pb.CreatableTopic(name="never", num_partitions=1,
                                                               replication_factor=1)])
    for servicer, code, start in (
        (unreachable, E.NOT_CONTROLLER, "This is not the active controller, and forwarding to "
         f"controller {pair.active} at 127.0.0.1:"),
        (impatient, E.REQUEST_TIMED_OUT, f"The active controller {pair.active} at "),
    ):
        server, port = pair.run(serve(servicer))
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                response = rpc.AdminStub(channel).CreateTopics(request, timeout=10)
            assert response.status.error_code == code
            assert response.status.error_message.startswith(start), response.status
        finally:
            pair.run(server.stop(0))
            pair.run(servicer.close())
    silent.close()
