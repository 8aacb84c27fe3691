"""Authorization on the Kafka listener (broker/kafka/authorization.py and every *_api.py): each
API allowed and refused with Kafka's code, through the whole codec, with a StandardAuthorizer
loaded with bindings; the replica-impersonation and auto-creation refusals; the table that
keeps every served API classified. The group APIs are in test_kafka_group_authorization.py."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from broker.api import DeleteRecordsPartition, DeleteRecordsResult, Request
from broker.kafka.admin_auto_create import AutoTopicCreator
from broker.kafka.admin_log_api import LogDirs
from broker.kafka.apis import KafkaApis
from broker.kafka.authorization import API_AUTHORIZATION
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.topic_ids import to_wire
from broker.kafka.versions import SUPPORTED, ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer
from metadata.image import MetadataImage, PartitionRegistration
from metadata.records import Endpoint
from metadata.rpc import admin_pb2 as pb
from tests.unit.test_kafka_fakes import InMemoryDataPlane, batch_header, make_image, topic_id_for

ALICE = "User:alice"
ADMIN = "User:admin"
PEER = "10.0.0.9:5555"
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
A = AclOperation
DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
REQUESTS = {
    ApiKey.PRODUCE: "ProduceRequest", ApiKey.FETCH: "FetchRequest",
    ApiKey.LIST_OFFSETS: "ListOffsetsRequest", ApiKey.METADATA: "MetadataRequest",
    ApiKey.INIT_PRODUCER_ID: "InitProducerIdRequest",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpochRequest",
    ApiKey.DELETE_RECORDS: "DeleteRecordsRequest",
    ApiKey.DESCRIBE_CLUSTER: "DescribeClusterRequest",
    ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirsRequest",
    ApiKey.CREATE_TOPICS: "CreateTopicsRequest",
    ApiKey.FIND_COORDINATOR: "FindCoordinatorRequest", ApiKey.JOIN_GROUP: "JoinGroupRequest",
    ApiKey.SYNC_GROUP: "SyncGroupRequest", ApiKey.HEARTBEAT: "HeartbeatRequest",
    ApiKey.LEAVE_GROUP: "LeaveGroupRequest", ApiKey.OFFSET_COMMIT: "OffsetCommitRequest",
    ApiKey.OFFSET_FETCH: "OffsetFetchRequest", ApiKey.LIST_GROUPS: "ListGroupsRequest",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroupsRequest", ApiKey.DELETE_GROUPS: "DeleteGroupsRequest",
}


def acl(resource_type: ResourceType, name: str, operation: AclOperation, *,
        pattern: PatternType = PatternType.LITERAL, principal: str = ALICE,
        permission: AclPermissionType = AclPermissionType.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def image() -> MetadataImage:
    leader = PartitionRegistration((1,), (1,), leader=1, leader_epoch=7)
    return make_image({1: [Endpoint("PLAINTEXT", "h1", 9091)]}, {
        "orders": {0: leader, 1: leader}, "payments": {0: leader},
        "__consumer_offsets": {0: leader}})


class Plane(InMemoryDataPlane):
    async def delete_records(self, timeout_ms: int, partitions: Sequence[DeleteRecordsPartition]
                             ) -> list[DeleteRecordsResult]:
        self.calls.append(("delete_records", tuple(partitions)))
        return [DeleteRecordsResult(low_watermark=p.offset) for p in partitions]


class Admin:
    """The admin operations: every topic created."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def call(self, method: str, request: Any, *, from_peer: bool = False) -> Any:
        self.requests.append(request)
        assert method == "CreateTopics"
        return pb.CreateTopicsResponse(status=pb.ResponseStatus(), topics=[
            pb.CreatableTopicResult(name=t.name, topic_id=topic_id_for(t.name),
                                    num_partitions=1, replication_factor=1)
            for t in request.topics])


class Creator(AutoTopicCreator):
    """Metadata's auto-creation, recording what it was asked to create."""

    def __init__(self) -> None:
        super().__init__(Admin(), enabled=True)
        self.asked: list[str] = []

    def create(self, names: Any) -> None:
        self.asked.extend(names)


class LogManager:
    def __init__(self, directory: str) -> None:
        self.log_dirs = [directory]

    def logs(self) -> Mapping[tuple[str, int], Any]:
        return {}


class Front:
    def __init__(self, *bindings: AclBinding, loaded: bool = True, log_dir: str = "/tmp",
                 authorizer: bool = True) -> None:
        self.authorizer = StandardAuthorizer([ADMIN])
        if loaded:
            self.authorizer.load(bindings)
        self.plane = Plane()
        self.plane.add("orders", 2, leader_epoch=7)
        self.plane.add("payments", 1, leader_epoch=7)
        self.admin = Admin()
        self.creator = Creator()
        self.apis = KafkaApis(
            self.plane, image, "c", admin=self.admin, auto_create=self.creator,
            log_dirs=LogDirs(LogManager(log_dir), dict),
            authorizer=self.authorizer if authorizer else None)

    async def acall(self, api_key: int, version: int, principal: str = ALICE,
                    **fields: Any) -> Any:
        module = request_module(api_key, version)
        frame = encode_request(7, "client-1", build(module, REQUESTS[ApiKey(api_key)], **fields))
        request = decode_request(frame[4:])
        context = Request(client_id="client-1", listener="PLAINTEXT", peer=PEER,
                          api_version=version, principal=principal)
        reply = await self.apis.handle(request, context)
        _, response = decode_response(api_key, version, encode_response(7, reply.response)[4:])
        return response

    def call(self, api_key: int, version: int, principal: str = ALICE, **fields: Any) -> Any:
        return asyncio.run(self.acall(api_key, version, principal, **fields))

    def plane_calls(self, kind: str) -> list[Any]:
        return [c[1] for c in self.plane.calls if c[0] == kind]


def test_every_api_the_listener_serves_is_classified() -> None:
    assert set(SUPPORTED) == set(API_AUTHORIZATION)


# ---- Produce ----


def produce(front: Front, topics: Sequence[str], principal: str = ALICE, *,
            transactional_id: str | None = None, attributes: int = 0) -> dict[str, int]:
    module = request_module(ApiKey.PRODUCE, 9)
    data = tuple(build(module, "TopicProduceData", name=name, partition_data=(
        build(module, "PartitionProduceData", index=0, records=batch_header(codec=attributes)),))
        for name in topics)
    response = front.call(ApiKey.PRODUCE, 9, principal, transactional_id=transactional_id,
                          acks=-1, timeout=datetime.timedelta(seconds=1), topic_data=data)
    return {t.name: t.partition_responses[0].error_code for t in response.responses}


def test_produce_needs_write_on_each_topic() -> None:
    front = Front(acl(TOPIC, "orders", A.WRITE))
    assert produce(front, ["orders", "payments"]) == {"orders": 0, "payments": DENIED}
    ((_, _, written),) = front.plane_calls("produce")
    assert [p.topic for p in written] == ["orders"]


def test_deny_beats_allow_and_a_prefix_covers_new_topics() -> None:
    front = Front(acl(TOPIC, "*", A.ALL), acl(TOPIC, "pay", A.WRITE, pattern=PatternType.PREFIXED),
                  acl(TOPIC, "ord", A.WRITE, pattern=PatternType.PREFIXED,
                      permission=AclPermissionType.DENY))
    assert produce(front, ["orders", "payments"]) == {"orders": DENIED, "payments": 0}


def test_a_grant_for_another_host_or_principal_does_not_apply() -> None:
    front = Front(acl(TOPIC, "orders", A.WRITE, host="10.0.0.8"),
                  acl(TOPIC, "payments", A.WRITE, principal="User:bob"))
    assert produce(front, ["orders", "payments"]) == {"orders": DENIED, "payments": DENIED}
    front = Front(acl(TOPIC, "orders", A.WRITE, host="10.0.0.9"),
                  acl(TOPIC, "payments", A.WRITE, principal="User:*"))
    assert produce(front, ["orders", "payments"]) == {"orders": 0, "payments": 0}


def test_transactional_batches_need_write_on_the_transactional_id() -> None:
    transactional = 0x10  # the batch attributes' transactional bit
    refused = {"orders": 53}  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Kafka's rule holds without an authorizer too: such batches need a transactional id.
    assert produce(Front(authorizer=False), ["orders"], attributes=transactional) == refused
    front = Front(acl(TOPIC, "orders", A.WRITE), acl(ResourceType.TRANSACTIONAL_ID, "tx", A.WRITE))
    assert produce(front, ["orders"], transactional_id="other", attributes=transactional) == \
        refused
    assert produce(front, ["orders"], transactional_id="tx", attributes=transactional) == \
        {"orders": 0}
    assert produce(front, ["orders"], transactional_id="other") == {"orders": 0}


def test_before_the_acls_are_loaded_only_super_users_pass() -> None:
    front = Front(loaded=False)
    assert produce(front, ["orders"]) == {"orders": DENIED}
    assert produce(front, ["orders"], principal=ADMIN) == {"orders": 0}


# ---- Fetch, ListOffsets, OffsetForLeaderEpoch ----


def fetch(front: Front, version: int, topics: Sequence[str], replica: tuple[int, int] = (-1, -1),
          ) -> dict[str, list[int]]:
    module = request_module(ApiKey.FETCH, version)
    keys = {to_wire(topic_id_for(t)) if version >= 13 else t: t for t in topics}
    response = front.call(
        ApiKey.FETCH, version, replica_id=replica[0],
        replica_state=build(module, "ReplicaState", replica_id=replica[0],
                            replica_epoch=replica[1]) if version >= 15 else None,
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=tuple(build(module, "FetchTopic", topic=key, topic_id=key, partitions=(
            build(module, "FetchPartition", partition=0, current_leader_epoch=7, fetch_offset=0,
                  last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1000),))
            for key in keys))
    return {keys[t.topic_id if version >= 13 else t.topic]: [p.error_code for p in t.partitions]
            for t in response.responses}


@pytest.mark.parametrize("version", [12, 13])
def test_a_consumer_fetch_needs_read_on_each_topic(version: int) -> None:
    front = Front(acl(TOPIC, "orders", A.READ))
    assert fetch(front, version, ["orders", "payments"]) == {"orders": [0], "payments": [DENIED]}
    (params,) = front.plane_calls("fetch")
    assert [p.topic for p in params.partitions] == ["orders"]


@pytest.mark.parametrize(("version", "replica"), [(12, (2, -1)), (16, (2, 5))])
def test_a_client_posing_as_a_replica_is_refused_and_never_reaches_the_log(
        version: int, replica: tuple[int, int]) -> None:
    # Even a client allowed everything on every topic: a replica's fetch moves the HW.
    front = Front(acl(TOPIC, "*", A.ALL))
    assert fetch(front, version, ["orders", "payments"], replica) == {
        "orders": [DENIED], "payments": [DENIED]}
    assert front.plane.calls == []
    front = Front(acl(CLUSTER, CLUSTER_NAME, A.CLUSTER_ACTION))
    assert fetch(front, version, ["orders"], replica) == {"orders": [0]}
    (params,) = front.plane_calls("fetch")
    assert (params.replica_id, params.replica_epoch) == replica


def list_offsets(front: Front, replica_id: int) -> dict[str, int]:
    module = request_module(ApiKey.LIST_OFFSETS, 7)
    response = front.call(ApiKey.LIST_OFFSETS, 7, replica_id=replica_id, isolation_level=0,
                          topics=tuple(build(module, "ListOffsetsTopic", name=name, partitions=(
                              build(module, "ListOffsetsPartition", partition_index=0,
                                    current_leader_epoch=7, timestamp=-1),))
                              for name in ("orders", "payments")))
    return {t.name: t.partitions[0].error_code for t in response.topics}


def epochs(front: Front, replica_id: int) -> dict[str, int]:
    module = request_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4)
    response = front.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, replica_id=replica_id,
                          topics=tuple(build(module, "OffsetForLeaderTopic", topic=name,
                                             partitions=(build(
                                                 module, "OffsetForLeaderPartition", partition=0,
                                                 current_leader_epoch=7, leader_epoch=7),))
                                       for name in ("orders", "payments")))
    return {t.topic: t.partitions[0].error_code for t in response.topics}


def test_offsets_need_describe_and_a_replica_id_needs_cluster_action() -> None:
    front = Front(acl(TOPIC, "orders", A.READ))  # READ implies DESCRIBE
    assert list_offsets(front, -1) == {"orders": 0, "payments": DENIED}
    assert epochs(front, -1) == {"orders": 0, "payments": DENIED}
    # A replica id would show the leader's log end: refused everywhere without CLUSTER_ACTION.
    front = Front(acl(TOPIC, "*", A.ALL))
    assert list_offsets(front, 2) == epochs(front, 2) == {"orders": DENIED, "payments": DENIED}
    assert front.plane.calls == []
    # CLUSTER_ACTION (a broker) covers every topic, as a replica id.
    front = Front(acl(CLUSTER, CLUSTER_NAME, A.CLUSTER_ACTION))
    assert list_offsets(front, 2) == epochs(front, 2) == epochs(front, -1) == {
        "orders": 0, "payments": 0}


# ---- Metadata ----


def metadata(front: Front, topics: Sequence[str] | None, *, by_id: bool = False,
             auto_create: bool = False, with_operations: bool = False) -> Any:
    version = 12 if by_id else 10  # names are nullable from v12; cluster bits end at v10
    module = request_module(ApiKey.METADATA, version)
    asked = None if topics is None else tuple(
        build(module, "MetadataRequestTopic", name=None if by_id else t,
              topic_id=to_wire(topic_id_for(t)) if by_id else None) for t in topics)
    return front.call(ApiKey.METADATA, version, topics=asked, allow_auto_topic_creation=auto_create,
                      include_cluster_authorized_operations=with_operations,
                      include_topic_authorized_operations=with_operations)


def test_metadata_lists_only_what_the_caller_may_describe() -> None:
    front = Front(acl(TOPIC, "orders", A.DESCRIBE))
    assert [(t.name, t.error_code) for t in metadata(front, None).topics] == [("orders", 0)]
    named = metadata(front, ["payments", "orders"]).topics
    assert [(t.name, t.error_code, len(t.partitions)) for t in named] == [
        ("payments", DENIED, 0), ("orders", 0, 2)]
    (hidden,) = metadata(front, ["payments"], by_id=True).topics
    assert (hidden.name, hidden.error_code) == (None, DENIED)
    assert hidden.topic_id == uuid.UUID(bytes=to_wire(topic_id_for("payments")).bytes)


def test_metadata_auto_creates_only_for_a_caller_allowed_create() -> None:
    front = Front(acl(TOPIC, "*", A.DESCRIBE), acl(TOPIC, "new-a", A.CREATE))
    answer = metadata(front, ["new-a", "new-b"], auto_create=True).topics
    assert front.creator.asked == ["new-a"]
    assert [(t.name, t.error_code) for t in answer] == [
        ("new-a", Errors.UNKNOWN_TOPIC_OR_PARTITION), ("new-b", DENIED)]
    # A topic the caller may not even describe is neither created nor shown.
    front = Front(acl(TOPIC, "new-a", A.CREATE))
    assert [t.error_code for t in metadata(front, ["new-a"], auto_create=True).topics] == \
        [DENIED]
    assert front.creator.asked == []
    front = Front(acl(TOPIC, "*", A.DESCRIBE), acl(CLUSTER, CLUSTER_NAME, A.CREATE))
    metadata(front, ["new-a", "new-b"], auto_create=True)
    assert front.creator.asked == ["new-a", "new-b"]


def bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


def test_metadata_authorized_operations() -> None:
    front = Front(acl(TOPIC, "orders", A.READ), acl(CLUSTER, CLUSTER_NAME, A.ALTER))
    answer = metadata(front, ["orders"], with_operations=True)
    assert answer.cluster_authorized_operations == bits(A.ALTER, A.DESCRIBE)
    assert answer.topics[0].topic_authorized_operations == bits(A.READ, A.DESCRIBE)
    # Without DESCRIBE on the cluster its bitfield is 0, as in Kafka.
    answer = metadata(Front(acl(TOPIC, "orders", A.READ)), ["orders"], with_operations=True)
    assert answer.cluster_authorized_operations == 0
    assert metadata(front, ["orders"]).cluster_authorized_operations == -(2**31)
    # No authorizer: every operation the resource type has.
    answer = metadata(Front(authorizer=False), ["orders"], with_operations=True)
    assert answer.topics[0].topic_authorized_operations == bits(
        A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS,
        A.ALTER_CONFIGS)


# ---- InitProducerId, DescribeCluster, DescribeLogDirs, DeleteRecords, CreateTopics ----


def init_producer_id(front: Front, transactional_id: str | None = None) -> int:
    response = front.call(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=transactional_id,
                          transaction_timeout=datetime.timedelta(seconds=60),
                          producer_id=-1, producer_epoch=-1)
    return int(response.error_code)


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic() -> None:
    assert init_producer_id(Front(acl(TOPIC, "orders", A.READ))) == \
        Errors.CLUSTER_AUTHORIZATION_FAILED
    assert init_producer_id(Front(acl(CLUSTER, CLUSTER_NAME, A.IDEMPOTENT_WRITE))) == 0
    assert init_producer_id(Front(acl(TOPIC, "pay", A.WRITE, pattern=PatternType.PREFIXED))) == 0
    # A WRITE that a DENY on the same literal cancels is no WRITE anywhere (KIP-679).
    assert init_producer_id(Front(
        acl(TOPIC, "orders", A.WRITE),
        acl(TOPIC, "orders", A.WRITE, permission=AclPermissionType.DENY))) == \
        Errors.CLUSTER_AUTHORIZATION_FAILED
    assert init_producer_id(Front(acl(CLUSTER, CLUSTER_NAME, A.IDEMPOTENT_WRITE)), "tx") == 53


def test_describe_cluster_answers_everyone_and_its_bitfield_needs_describe() -> None:
    def described(front: Front) -> Any:
        return front.call(ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True,
                          endpoint_type=1)

    answer = described(Front())
    assert (answer.error_code, [b.broker_id for b in answer.brokers]) == (0, [1])
    assert answer.cluster_authorized_operations == 0
    answer = described(Front(acl(CLUSTER, CLUSTER_NAME, A.DESCRIBE)))
    assert answer.cluster_authorized_operations == bits(A.DESCRIBE)


def test_describe_log_dirs_needs_describe_on_the_cluster(tmp_path: Path) -> None:
    def described(front: Front) -> Any:
        return front.call(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)

    answer = described(Front(acl(TOPIC, "*", A.ALL), log_dir=str(tmp_path)))
    assert (answer.error_code, answer.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, ())
    answer = described(Front(acl(CLUSTER, CLUSTER_NAME, A.DESCRIBE), log_dir=str(tmp_path)))
    assert (answer.error_code, [r.log_dir for r in answer.results]) == (0, [str(tmp_path)])


def test_delete_records_needs_delete_on_each_topic() -> None:
    module = request_module(ApiKey.DELETE_RECORDS, 2)
    front = Front(acl(TOPIC, "orders", A.DELETE))
    answer = front.call(ApiKey.DELETE_RECORDS, 2, timeout=datetime.timedelta(seconds=1),
                        topics=tuple(build(module, "DeleteRecordsTopic", name=name, partitions=(
                            build(module, "DeleteRecordsPartition", partition_index=0,
                                  offset=1),)) for name in ("orders", "payments")))
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        "orders": 0, "payments": DENIED}
    ((asked,),) = front.plane_calls("delete_records")
    assert asked.topic == "orders"


def test_create_topics_per_topic_and_its_configs_need_describe_configs() -> None:
    module = request_module(ApiKey.CREATE_TOPICS, 7)
    front = Front(acl(TOPIC, "new-", A.CREATE, pattern=PatternType.PREFIXED),
                  acl(TOPIC, "new-a", A.DESCRIBE_CONFIGS))
    answer = front.call(ApiKey.CREATE_TOPICS, 7, timeout=datetime.timedelta(seconds=1),
                        validate_only=False, topics=tuple(build(
                            module, "CreatableTopic", name=name, num_partitions=1,
                            replication_factor=1, assignments=(), configs=())
                            for name in ("new-a", "new-b", "other")))
    results = {t.name: t for t in answer.topics}
    assert [t.name for t in front.admin.requests[0].topics] == ["new-a", "new-b"]
    assert results["other"].error_code == DENIED
    assert (results["new-a"].error_code, results["new-a"].topic_config_error_code) == (0, 0)
    assert results["new-a"].configs
    assert (results["new-b"].error_code, results["new-b"].topic_config_error_code,
            results["new-b"].configs) == (0, DENIED, None)
