"""CreateAcls, DescribeAcls and DeleteAcls on the brokers' Kafka listeners, driven by
confluent-kafka's AdminClient (librdkafka picks v2) and kafka-python's KafkaAdminClient (v3)
against one controller and two brokers as real processes with the authorizer on: creations
and deletions reach the active controller through a broker and are answered once committed;
every broker then describes them from its own metadata. The clients connect over PLAINTEXT as
User:ANONYMOUS, which super.users lets manage ACLs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from harness.cluster import ProcessCluster, kafka_cluster, wait_for

BROKERS = [2, 3]
WAIT_S = 60
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)

Row = tuple[str, str, str, str, str, str, str]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka-acls"), BROKERS, SETTINGS,
                       WAIT_S) as cluster:
        yield cluster


def admin_of(cluster: ProcessCluster, broker: int | None = None) -> AdminClient:
    servers = (cluster.bootstrap_servers() if broker is None
               else cluster.bootstrap_servers().split(",")[BROKERS.index(broker)])
    return AdminClient({"bootstrap.servers": servers})


def row(b: Any) -> Row:
    return (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host,
            b.operation.name, b.permission_type.name)


def binding(name: str, principal: str = "User:alice",  # librdkafka's BROKER is CLUSTER (4)
            operation: AclOperation = AclOperation.READ,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL,
            restype: ResourceType = ResourceType.TOPIC,
            permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", operation, permission)


def described(admin: AdminClient, acl_filter: AclBindingFilter = EVERYTHING) -> set[Row]:
    return {row(b) for b in admin.describe_acls(acl_filter).result(timeout=WAIT_S)}


def error_of(future: Any) -> int | None:
    try:
        future.result(timeout=WAIT_S)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return None


def test_confluent_kafka_creates_describes_and_deletes_acls(cluster: ProcessCluster) -> None:
    admin = admin_of(cluster)
    wanted = [binding("orders"), binding("orders", "User:bob", AclOperation.WRITE),
              binding("logs-", pattern=ResourcePatternType.PREFIXED),
              binding("kafka-cluster", "User:svc", AclOperation.IDEMPOTENT_WRITE,
                      restype=ResourceType.BROKER),
              binding("payments", "User:eve", AclOperation.ALL, restype=ResourceType.GROUP,
                      permission=AclPermissionType.DENY)]
    results = admin.create_acls(wanted)
    assert [error_of(results[b]) for b in wanted] == [None] * len(wanted)
    # Answered after commit: every broker describes them from its own metadata.
    for broker in BROKERS:
        wait_for(lambda broker=broker: described(admin_of(cluster, broker)) >= {
            row(b) for b in wanted}, WAIT_S, f"broker {broker} to describe the ACLs")
    # Kafka's validation per entry: the others go on.
    bad = binding("not-the-cluster", restype=ResourceType.BROKER)
    fine = binding("fine")
    results = admin.create_acls([bad, fine])
    assert (error_of(results[bad]), error_of(results[fine])) == (42, None)  # INVALID_REQUEST
    # MATCH: every binding that applies to the literal name.
    match = AclBindingFilter(ResourceType.TOPIC, "logs-app", ResourcePatternType.MATCH, None,
                             None, AclOperation.ANY, AclPermissionType.ANY)
    assert described(admin, match) == {row(wanted[2])}
    # Delete: per filter what it matched.
    by_name = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None,
                               None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([by_name, match])
    assert {row(b) for b in deleted[by_name].result(timeout=WAIT_S)} == {
        row(wanted[0]), row(wanted[1])}
    assert {row(b) for b in deleted[match].result(timeout=WAIT_S)} == {row(wanted[2])}
    # Answered once committed on the controller; the broker describing them replays the
    # removals a moment later (as in Kafka, where brokers learn ACLs from the metadata log).
    left = {row(b) for b in (wanted[3], wanted[4], fine)}
    wait_for(lambda: described(admin) == left, WAIT_S, "the deletions to reach the broker")
    everything = admin.delete_acls([EVERYTHING])[EVERYTHING].result(timeout=WAIT_S)
    assert len(everything) == 3
    wait_for(lambda: described(admin) == set(), WAIT_S, "every ACL to be gone")


def test_kafka_python_manages_acls_at_v3(cluster: ProcessCluster) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers(),
                              request_timeout_ms=30000)
    try:
        acl = ACL("User:carol", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                  ResourcePattern(KResourceType.TOPIC, "audit", ACLResourcePatternType.PREFIXED))
        created = client.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        acl_filter = ACLFilter("User:carol", None, ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(KResourceType.ANY, None,
                                                     ACLResourcePatternType.ANY))
        def carol() -> list[tuple[str, Any, str]]:
            found, error = client.describe_acls(acl_filter)
            assert error.errno == 0
            return [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found]

        # Answered once committed on the controller; the broker kafka-python asks next may
        # replay the change a moment later (as in Kafka, brokers learn ACLs from the log).
        wait_for(lambda: carol() == [("User:carol", ACLOperation.DESCRIBE, "audit")], WAIT_S,
                 "the binding to reach the describing broker")
        [(_, removed, error)] = client.delete_acls([acl_filter])
        assert error.errno == 0 and len(removed) == 1
        wait_for(lambda: carol() == [], WAIT_S, "the deletion to reach the describing broker")
    finally:
        client.close()
