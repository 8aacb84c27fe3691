"""Per-resource authorization of the admin operations (metadata/authorizer/admin_checks.py), the
one place both fronts use: what reaches the operation, and Kafka's code for each refusal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kraft.errors import Errors
from kraft.security.authorizer import METHOD_OPERATIONS
from metadata.authorizer.admin_checks import AdminCaller, authorized_admin_call
from metadata.authorizer.model import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer
from metadata.image import PartitionRegistration
from metadata.records import ConfigResourceType
from metadata.rpc import admin_pb2 as pb
from tests.unit.test_kafka_fakes import make_image, topic_id_for

ALICE = "User:alice"
ADMIN = "User:admin"
HOST = "10.0.0.9"
IMAGE = make_image({}, {name: {0: PartitionRegistration((1,), (1,), leader=1)}
                        for name in ("orders", "payments", "secret")})


def allow(resource_type: ResourceType, name: str, operation: AclOperation, *,
          pattern: PatternType = PatternType.LITERAL, principal: str = ALICE,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def caller(*bindings: AclBinding, principal: str = ALICE) -> AdminCaller:
    authorizer = StandardAuthorizer([ADMIN])
    authorizer.load(bindings)
    return AdminCaller(authorizer, principal, HOST)


class Operation:
    """The admin operation: records what reached it and answers every item with success."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.seen: list[Any] = []

    async def __call__(self, request: Any) -> Any:
        self.seen.append(request)
        if self.method == "CreateTopics":
            return pb.CreateTopicsResponse(status=pb.ResponseStatus(), topics=[
                pb.CreatableTopicResult(name=t.name) for t in request.topics])
        if self.method == "DeleteTopics":
            return pb.DeleteTopicsResponse(status=pb.ResponseStatus(), topics=[
                pb.DeletableTopicResult(name=t.name, topic_id=t.topic_id)
                for t in request.topics])
        if self.method == "CreatePartitions":
            return pb.CreatePartitionsResponse(status=pb.ResponseStatus(), topics=[
                pb.CreatePartitionsTopicResult(name=t.name) for t in request.topics])
        if self.method == "DescribeConfigs":
            return pb.DescribeConfigsResponse(status=pb.ResponseStatus(), results=[
                pb.DescribeConfigsResult(resource_type=r.resource_type,
                                         resource_name=r.resource_name)
                for r in request.resources])
        if self.method == "IncrementalAlterConfigs":
            return pb.IncrementalAlterConfigsResponse(status=pb.ResponseStatus(), results=[
                pb.AlterConfigsResourceResult(resource_type=r.resource_type,
                                              resource_name=r.resource_name)
                for r in request.resources])
        if self.method == "ListTopics":
            return pb.ListTopicsResponse(status=pb.ResponseStatus(), topics=[
                pb.ListedTopic(name=n) for n in sorted(IMAGE.topics.by_name)])
        if self.method == "DescribeTopics":
            names = list(request.names) or sorted(IMAGE.topics.by_name)
            return pb.DescribeTopicsResponse(status=pb.ResponseStatus(), topics=[
                pb.TopicDescription(name=n) for n in names])
        return getattr(pb, f"{self.method}Response")(status=pb.ResponseStatus())


def call(who: AdminCaller, method: str, request: Any) -> tuple[Any, Operation]:
    operation = Operation(method)
    response = asyncio.run(authorized_admin_call(who, method, request, IMAGE, operation))
    return response, operation


def create(*names: str) -> pb.CreateTopicsRequest:
    return pb.CreateTopicsRequest(topics=[pb.CreatableTopic(name=n) for n in names])


def test_create_topics_needs_create_on_the_cluster_or_on_each_topic() -> None:
    who = caller(allow(ResourceType.TOPIC, "ord", AclOperation.CREATE,
                       pattern=PatternType.PREFIXED))
    response, op = call(who, "CreateTopics", create("orders", "other"))
    assert [t.name for t in op.seen[0].topics] == ["orders"]
    assert {t.name: t.error_code for t in response.topics} == {
        "orders": 0, "other": Errors.TOPIC_AUTHORIZATION_FAILED}
    refused = next(t for t in response.topics if t.name == "other")
    assert "User:alice may not CREATE topic 'other'" in refused.error_message
    # CREATE on the cluster covers every topic.
    response, op = call(caller(allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE)),
                        "CreateTopics", create("orders", "other"))
    assert [t.error_code for t in response.topics] == [0, 0] and len(op.seen[0].topics) == 2


def test_nothing_reaches_the_operation_when_every_resource_is_refused() -> None:
    response, op = call(caller(), "CreateTopics", create("a", "b"))
    assert op.seen == []
    assert response.status.error_code == 0
    assert [t.error_code for t in response.topics] == [Errors.TOPIC_AUTHORIZATION_FAILED] * 2


def test_deny_beats_allow_and_super_users_pass() -> None:
    who = caller(allow(ResourceType.TOPIC, "*", AclOperation.ALL),
                 allow(ResourceType.TOPIC, "secret", AclOperation.DELETE,
                       permission=AclPermissionType.DENY))
    request = pb.DeleteTopicsRequest(topics=[pb.TopicRef(name="orders"),
                                             pb.TopicRef(name="secret")])
    response, op = call(who, "DeleteTopics", request)
    assert [t.name for t in op.seen[0].topics] == ["orders"]
    assert {t.name: t.error_code for t in response.topics} == {
        "orders": 0, "secret": Errors.TOPIC_AUTHORIZATION_FAILED}
    response, op = call(caller(principal=ADMIN), "DeleteTopics", request)
    assert op.seen == [request]


def test_delete_by_id_without_describe_does_not_name_the_topic() -> None:
    secret_id = topic_id_for("secret")
    request = pb.DeleteTopicsRequest(topics=[pb.TopicRef(topic_id=secret_id),
                                             pb.TopicRef(topic_id="AAAAAAAAAAAAAAAAAAAAAA")])
    response, op = call(caller(), "DeleteTopics", request)
    # An unknown id goes on (the operation answers UNKNOWN_TOPIC_ID); the hidden one does not.
    assert [t.topic_id for t in op.seen[0].topics] == ["AAAAAAAAAAAAAAAAAAAAAA"]
    (refused,) = [t for t in response.topics if t.topic_id == secret_id]
    assert (refused.name, refused.error_code) == ("", Errors.TOPIC_AUTHORIZATION_FAILED)
    assert "secret" not in refused.error_message
    # DELETE (which implies DESCRIBE) on it lets the deletion by id through.
    who = caller(allow(ResourceType.TOPIC, "secret", AclOperation.DELETE))
    response, op = call(who, "DeleteTopics", request)
    assert len(op.seen[0].topics) == 2


def test_create_partitions_needs_alter_on_each_topic() -> None:
    who = caller(allow(ResourceType.TOPIC, "orders", AclOperation.ALTER),
                 allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALL))
    request = pb.CreatePartitionsRequest(topics=[
        pb.CreatePartitionsTopic(name="orders", count=2),
        pb.CreatePartitionsTopic(name="payments", count=2)])
    response, op = call(who, "CreatePartitions", request)
    # ALL on the cluster does not cover a topic: Kafka checks the topic alone.
    assert [t.name for t in op.seen[0].topics] == ["orders"]
    assert {t.name: t.error_code for t in response.topics} == {
        "orders": 0, "payments": Errors.TOPIC_AUTHORIZATION_FAILED}


def config_resources() -> list[tuple[int, str]]:
    return [(ConfigResourceType.TOPIC, "orders"), (ConfigResourceType.BROKER, "1"),
            (ConfigResourceType.TOPIC, "secret"), (ConfigResourceType.GROUP, "g"),
            (ConfigResourceType.BROKER_LOGGER, "1")]


def test_configs_are_authorized_per_resource_type_and_answered_in_request_order() -> None:
    who = caller(allow(ResourceType.TOPIC, "orders", AclOperation.ALTER_CONFIGS),
                 allow(ResourceType.GROUP, "g", AclOperation.DESCRIBE_CONFIGS))
    describe = pb.DescribeConfigsRequest(resources=[
        pb.DescribeConfigsResource(resource_type=t, resource_name=n)  # type: ignore[arg-type]
        for t, n in config_resources()])
    response, op = call(who, "DescribeConfigs", describe)
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS; brokers and loggers are the cluster's.
    assert [r.resource_name for r in op.seen[0].resources] == ["orders", "g"]
    assert [(r.resource_name, r.error_code) for r in response.results] == [
        ("orders", 0), ("1", Errors.CLUSTER_AUTHORIZATION_FAILED),
        ("secret", Errors.TOPIC_AUTHORIZATION_FAILED), ("g", 0),
        ("1", Errors.CLUSTER_AUTHORIZATION_FAILED)]
    alter = pb.IncrementalAlterConfigsRequest(resources=[
        pb.AlterConfigsResource(resource_type=t, resource_name=n)  # type: ignore[arg-type]
        for t, n in config_resources()])
    response, op = call(who, "IncrementalAlterConfigs", alter)
    assert [r.resource_name for r in op.seen[0].resources] == ["orders"]
    assert [r.error_code for r in response.results] == [
        0, Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED,
        Errors.GROUP_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED]


def test_topic_reads_list_only_what_the_caller_may_describe() -> None:
    who = caller(allow(ResourceType.TOPIC, "orders", AclOperation.READ),
                 allow(ResourceType.TOPIC, "pay", AclOperation.DESCRIBE,
                       pattern=PatternType.PREFIXED))
    listed, _ = call(who, "ListTopics", pb.ListTopicsRequest())
    assert [t.name for t in listed.topics] == ["orders", "payments"]
    everything, _ = call(who, "DescribeTopics", pb.DescribeTopicsRequest())
    assert [(t.name, t.error_code) for t in everything.topics] == [
        ("orders", 0), ("payments", 0)]
    named, _ = call(who, "DescribeTopics", pb.DescribeTopicsRequest(names=["secret", "orders"]))
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("secret", Errors.TOPIC_AUTHORIZATION_FAILED), ("orders", 0)]


def test_cluster_operations_are_refused_as_a_whole() -> None:
    request = pb.ElectLeadersRequest(all_partitions=True)
    response, op = call(caller(allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE)),
                        "ElectLeaders", request)
    assert op.seen == []
    assert response.status.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert "may not ALTER on the cluster (ElectLeaders)" in response.status.error_message
    response, op = call(caller(allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALTER)),
                        "ElectLeaders", request)
    assert op.seen == [request] and response.status.error_code == 0
    # Kafka shows the cluster's brokers to any authenticated client.
    _, op = call(caller(), "DescribeCluster", pb.DescribeClusterRequest())
    assert len(op.seen) == 1


def test_an_unclassified_operation_is_for_super_users_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    everything = caller(allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALL))
    _, op = call(everything, "DescribeFeatures", pb.DescribeFeaturesRequest())
    assert op.seen  # classified NO_CHECK
    # Unlisted, as a new RPC would be: refused to everyone but super users.
    monkeypatch.delitem(METHOD_OPERATIONS, "/kraft.admin.v1.Admin/DescribeFeatures")
    response, op = call(everything, "DescribeFeatures", pb.DescribeFeaturesRequest())
    assert op.seen == []
    assert response.status.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    _, op = call(caller(principal=ADMIN), "DescribeFeatures", pb.DescribeFeaturesRequest())
    assert op.seen


def test_before_the_first_load_only_super_users_pass() -> None:
    who = AdminCaller(StandardAuthorizer([ADMIN], allow_everyone_if_no_acl_found=True),
                      ALICE, HOST)
    response, op = call(who, "CreateTopics", create("orders"))
    assert op.seen == [] and response.topics[0].error_code == Errors.TOPIC_AUTHORIZATION_FAILED
