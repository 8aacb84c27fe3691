"""CreateTopics, DeleteTopics and CreatePartitions on the Kafka front (broker/kafka/
admin_topics_api.py) through the whole codec, against the admin operations of a real active
controller (metadata/admin_ops.py on a one-voter QuorumController), as a combined node runs
them; and the broker's controller channel (NOT_CONTROLLER retried, then REQUEST_TIMED_OUT).

The other test_kafka_admin_* modules reuse `AdminFront` from here."""

from __future__ import annotations

import asyncio
import datetime
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from broker.api import Request
from broker.kafka import admin_common
from broker.kafka.admin_auto_create import AutoTopicCreator
from broker.kafka.admin_common import call_controller
from broker.kafka.apis import KafkaApis
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.topic_ids import from_wire, to_wire
from broker.kafka.versions import ApiKey
from kraft.core.config import RaftConfig
from kraft.errors import Errors
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.admin_ops import AdminOperations
from metadata.configs import ConfigSource
from metadata.controller import QuorumController
from metadata.errors import ControllerResult
from metadata.image import MetadataImage
from metadata.rpc import admin_pb2 as pb
from tests.unit.controller_harness import attach_controller
from tests.unit.test_admin_service import broker_record, until
from tests.unit.test_kafka_fakes import InMemoryDataPlane

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
BROKER_ID = 1
REQUEST_NAMES = {
    ApiKey.CREATE_TOPICS: "CreateTopicsRequest", ApiKey.DELETE_TOPICS: "DeleteTopicsRequest",
    ApiKey.CREATE_PARTITIONS: "CreatePartitionsRequest",
    ApiKey.DESCRIBE_CONFIGS: "DescribeConfigsRequest",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigsRequest",
    ApiKey.ALTER_CONFIGS: "AlterConfigsRequest",
    ApiKey.DESCRIBE_CLUSTER: "DescribeClusterRequest",
    ApiKey.ELECT_LEADERS: "ElectLeadersRequest",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignmentsRequest",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignmentsRequest",
    ApiKey.METADATA: "MetadataRequest",
}
TIMEOUT = datetime.timedelta(seconds=10)


class AdminFront:
    """KafkaApis with the admin operations of a live one-voter controller; brokers 1-4 are
    registered (PLAINTEXT on localhost:9091-9094) and unfenced."""

    def __init__(self, root: Path, auto_create: bool = False) -> None:
        self.root = root
        self.auto_create_enabled = auto_create

    async def start(self) -> None:
        self.node = RaftNode(RaftConfig(CLUSTER_ID, 1, {1: "127.0.0.1:1"}),
                             SegmentedLog(self.root / "log"),
                             QuorumStateStore(self.root / "quorum-state"), rng=random.Random(1))
        self.controller: QuorumController = attach_controller(self.node, noop_interval_ms=0)
        await self.node.start()
        await until(lambda: self.controller.is_active)
        for b in (1, 2, 3, 4):
            await self.controller.write(lambda _image, b=b: broker_record(b))
        self.ops = AdminOperations(self.controller, CLUSTER_ID, {1: "127.0.0.1:1"})
        self.creator = AutoTopicCreator(self.ops, self.auto_create_enabled)
        self.apis = KafkaApis(InMemoryDataPlane(), lambda: self.image, CLUSTER_ID,
                              admin=self.ops, broker_id=BROKER_ID, auto_create=self.creator)

    async def close(self) -> None:
        await self.creator.close()
        await self.ops.close()
        await self.controller.close()
        await self.node.stop()

    @property
    def image(self) -> MetadataImage:
        return self.controller.committed_image

    async def write(self, rule: Callable[[MetadataImage], ControllerResult[Any]]) -> Any:
        return await self.controller.write(rule)

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """Encode the request, decode it as the server does, handle, and decode the answer."""
        module = request_module(api_key, version)
        frame = encode_request(7, "test-client", build(module, REQUEST_NAMES[api_key], **fields))
        request = decode_request(frame[4:])
        reply = await self.apis.handle(request, Request(client_id="test-client",
                                                        listener="PLAINTEXT", peer="p",
                                                        api_version=version))
        assert reply.response is not None and not reply.close
        correlation_id, response = decode_response(
            api_key, version, encode_response(7, reply.response)[4:])
        assert correlation_id == 7
        return response

    def module(self, api_key: int, version: int) -> Any:
        return request_module(api_key, version)


def run(tmp_path: Path, scenario: Callable[[AdminFront], Awaitable[None]],
        auto_create: bool = False) -> None:
    async def main() -> None:
        front = AdminFront(tmp_path, auto_create)
        await front.start()
        try:
            await scenario(front)
        finally:
            await front.close()

    asyncio.run(main())


# ---- CreateTopics ----

def creatable(module: Any, name: str, partitions: int = 1, rf: int = 1,
              assignments: dict[int, tuple[int, ...]] | None = None,
              configs: dict[str, str | None] | None = None) -> Any:
    return build(
        module, "CreatableTopic", name=name, num_partitions=partitions, replication_factor=rf,
        assignments=tuple(build(module, "CreatableReplicaAssignment", partition_index=i,
                                broker_ids=ids) for i, ids in (assignments or {}).items()),
        configs=tuple(build(module, "CreatableTopicConfig", name=k, value=v)
                      for k, v in (configs or {}).items()))


async def create(front: AdminFront, version: int, *topics: Any,
                 validate_only: bool = False) -> dict[str, Any]:
    response = await front.call(ApiKey.CREATE_TOPICS, version, topics=topics, timeout=TIMEOUT,
                                validate_only=validate_only)
    return {t.name: t for t in response.topics}


@pytest.mark.parametrize("version", [4, 7])
def test_create_topics_creates_and_answers_what_it_created(tmp_path: Path, version: int) -> None:
    async def scenario(front: AdminFront) -> None:
        m = front.module(ApiKey.CREATE_TOPICS, version)
        result = (await create(front, version, creatable(m, "orders", 3, 2, configs={
            "retention.ms": "1000"})))["orders"]
        assert (result.error_code, result.error_message) == (Errors.NONE, None)
        if version >= 5:
            assert (result.num_partitions, result.replication_factor) == (3, 2)
        topic = front.image.topic("orders")
        assert topic is not None and len(topic.partitions) == 3
        if version >= 7:
            assert from_wire(result.topic_id) == topic.topic_id
        if version >= 5:
            configs = {c.name: c for c in result.configs}
            assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
                "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
            assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG

    run(tmp_path, scenario)


def test_create_topics_refusals_are_kafkas_per_topic(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        m = front.module(ApiKey.CREATE_TOPICS, 7)
        await create(front, 7, creatable(m, "exists"))
        results = await create(
            front, 7, creatable(m, "exists"), creatable(m, "too-many-replicas", 1, 5),
            creatable(m, "no-partitions", 0), creatable(m, "bad-config", configs={"x.y": "1"}),
            creatable(m, "null-config", configs={"retention.ms": None}),
            creatable(m, "bad name"), creatable(m, "twice"), creatable(m, "twice"))
        codes = {name: r.error_code for name, r in results.items()}
        assert codes == {
            "exists": Errors.TOPIC_ALREADY_EXISTS,
            "too-many-replicas": Errors.INVALID_REPLICATION_FACTOR,
            "no-partitions": Errors.INVALID_PARTITIONS, "bad-config": Errors.INVALID_CONFIG,
            "null-config": Errors.INVALID_CONFIG, "bad name": Errors.INVALID_TOPIC_EXCEPTION,
            "twice": Errors.INVALID_REQUEST,
        }
        assert results["null-config"].error_message == \
            "Null value not supported for topic configs: retention.ms"
        assert results["exists"].error_message == "Topic 'exists' already exists."
        assert {(r.topic_id, r.num_partitions, r.configs) for r in results.values()} == {
            (None, -1, None)}  # a zero topic id reads back as null
        assert sorted(front.image.topics.by_name) == ["exists"]
        # One bad entry fails alone (a review finding: it used to fail the whole request):
        # a control character, a negative partition index, a duplicate with a null config.
        results = await create(
            front, 7, creatable(m, "good"), creatable(m, "bad\x01"),
            creatable(m, "good2"), creatable(m, "neg", 1, 1, assignments={-1: (1,)}),
            creatable(m, "dup", configs={"retention.ms": None}), creatable(m, "dup"))
        assert {name: r.error_code for name, r in results.items()} == {
            "good": Errors.NONE, "bad\x01": Errors.INVALID_TOPIC_EXCEPTION,
            "good2": Errors.NONE, "neg": Errors.INVALID_REPLICA_ASSIGNMENT,
            "dup": Errors.INVALID_REQUEST}
        assert results["dup"].error_message == "Duplicate topic name."
        assert sorted(front.image.topics.by_name) == ["exists", "good", "good2"]
        deleted = await front.call(ApiKey.DELETE_TOPICS, 5, topic_names=("good", "x\x01"),
                                   timeout=TIMEOUT)
        assert {r.name: r.error_code for r in deleted.responses} == {
            "good": Errors.NONE, "x\x01": Errors.UNKNOWN_TOPIC_OR_PARTITION}

    run(tmp_path, scenario)


def test_create_topics_validate_only_and_explicit_assignments(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        m = front.module(ApiKey.CREATE_TOPICS, 7)
        checked = await create(front, 7, creatable(m, "dry", 2, 2), validate_only=True)
        assert checked["dry"].error_code == Errors.NONE and checked["dry"].num_partitions == 2
        assert front.image.topic("dry") is None
        placed = await create(front, 7, creatable(m, "placed", -1, -1,
                                                  assignments={0: (2, 3), 1: (3, 4)}))
        assert placed["placed"].error_code == Errors.NONE
        topic = front.image.topic("placed")
        assert topic is not None
        assert [topic.partitions[i].replicas for i in (0, 1)] == [(2, 3), (3, 4)]
        counted = await create(front, 7, creatable(m, "counted", 2, -1, assignments={0: (1,)}))
        assert counted["counted"].error_code == Errors.INVALID_REQUEST

    run(tmp_path, scenario)


# ---- DeleteTopics ----

def test_delete_topics_by_name_and_by_id(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        m = front.module(ApiKey.CREATE_TOPICS, 7)
        await create(front, 7, creatable(m, "a"), creatable(m, "b"))
        by_name = await front.call(ApiKey.DELETE_TOPICS, 4, topic_names=("a", "nope"),
                                   timeout=TIMEOUT)
        assert {r.name: r.error_code for r in by_name.responses} == {
            "a": Errors.NONE, "nope": Errors.UNKNOWN_TOPIC_OR_PARTITION}
        topic = front.image.topic("b")
        assert topic is not None
        dm = front.module(ApiKey.DELETE_TOPICS, 6)
        by_id = await front.call(ApiKey.DELETE_TOPICS, 6, timeout=TIMEOUT, topics=(
            build(dm, "DeleteTopicState", name=None, topic_id=to_wire(topic.topic_id)),
            build(dm, "DeleteTopicState", name=None, topic_id=to_wire("AAAAAAAAAAAAAAAAAAAAAQ"))))
        assert [(r.name, r.error_code) for r in by_id.responses] == [
            ("b", Errors.NONE), (None, Errors.UNKNOWN_TOPIC_ID)]
        assert front.image.topics.by_name == {}

    run(tmp_path, scenario)


# ---- CreatePartitions ----

def test_create_partitions_grows_and_refuses_as_kafka(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        m = front.module(ApiKey.CREATE_TOPICS, 7)
        await create(front, 7, creatable(m, "grow", 1, 2), creatable(m, "fixed", 2, 1))
        pm = front.module(ApiKey.CREATE_PARTITIONS, 3)

        def grow(name: str, count: int, assignments: Any = None) -> Any:
            return build(pm, "CreatePartitionsTopic", name=name, count=count,
                         assignments=assignments)

        response = await front.call(
            ApiKey.CREATE_PARTITIONS, 3, timeout=TIMEOUT, validate_only=False, topics=(
                grow("grow", 3, (build(pm, "CreatePartitionsAssignment", broker_ids=(3, 4)),
                                 build(pm, "CreatePartitionsAssignment", broker_ids=(4, 1)))),
                grow("fixed", 1), grow("missing", 2)))
        assert {r.name: r.error_code for r in response.results} == {
            "grow": Errors.NONE, "fixed": Errors.INVALID_PARTITIONS,
            "missing": Errors.UNKNOWN_TOPIC_OR_PARTITION}
        topic = front.image.topic("grow")
        assert topic is not None and [topic.partitions[i].replicas for i in (1, 2)] == [
            (3, 4), (4, 1)]
        wrong = await front.call(ApiKey.CREATE_PARTITIONS, 0, timeout=TIMEOUT,
                                 validate_only=False, topics=(grow("grow", 5, (
                                     build(pm, "CreatePartitionsAssignment", broker_ids=(1,)),)),))
        assert wrong.results[0].error_code == Errors.INVALID_REPLICA_ASSIGNMENT
        # An empty (not null) list assigns nothing: refused for that topic, not auto-placed.
        empty = await front.call(ApiKey.CREATE_PARTITIONS, 3, timeout=TIMEOUT,
                                 validate_only=False, topics=(grow("grow", 4, ()),
                                                              grow("fixed", 3)))
        assert {r.name: r.error_code for r in empty.results} == {
            "grow": Errors.INVALID_REPLICA_ASSIGNMENT, "fixed": Errors.NONE}
        grown = front.image.topic("grow")
        assert grown is not None and len(grown.partitions) == 3

    run(tmp_path, scenario)


# ---- the controller channel ----

class Flaky:
    """Answers NOT_CONTROLLER `failures` times (an election in progress), then succeeds."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def call(self, method: str, request: Any, *, from_peer: bool = False) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            return pb.CreateTopicsResponse(status=pb.ResponseStatus(
                error_code=Errors.NOT_CONTROLLER, error_message="no leader yet"))
        return pb.CreateTopicsResponse(status=pb.ResponseStatus(), topics=[
            pb.CreatableTopicResult(name="t", num_partitions=1, replication_factor=1)])


def test_not_controller_is_retried_and_never_reaches_the_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_common, "RETRY_BACKOFF_S", 0.001)
    flaky = Flaky(3)
    response = asyncio.run(call_controller(flaky, "CreateTopics", pb.CreateTopicsRequest(), 0))
    assert flaky.calls == 4 and response.status.error_code == Errors.NONE


def test_no_controller_within_the_timeout_is_request_timed_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_common, "RETRY_BACKOFF_S", 0.001)
    monkeypatch.setattr(admin_common, "MIN_WAIT_MS", 20)
    flaky = Flaky(10**9)
    response = asyncio.run(call_controller(flaky, "CreateTopics", pb.CreateTopicsRequest(), 0))
    assert response.status.error_code == Errors.REQUEST_TIMED_OUT
    assert response.status.error_message == \
        "No active controller answered within 20 ms (no leader yet)"
    assert flaky.calls > 1
