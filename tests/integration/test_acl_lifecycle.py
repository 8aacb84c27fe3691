"""ACLs as an operator uses them, with real clients over mTLS (issue 27, item 5): a principal
with no grant is refused with the errors Kafka's clients know (TOPIC_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED), allowed once `create_acls` commits, refused again after
`delete_acls`; a DENY beats an ALLOW; a PREFIXED grant covers topics created after it; ACLs
survive a restart of every node and reach a broker that was down when they were created.

A cluster like test_authorization's (one controller, three brokers, allow.everyone.if.no.acl
.found=false): `alice` holds a CA-signed certificate and no super-user seat.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from harness.cluster import wait_for
from kraft.security.certs import principal_of
from tests.integration.test_authorization import BROKERS, WAIT_S, Secured, secured_cluster

ALICE = principal_of("alice")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    yield from secured_cluster(tmp_path_factory)

TOPIC_DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = KafkaError.GROUP_AUTHORIZATION_FAILED


def grant(topic: str, operation: AclOperation, *,
          permission: AclPermissionType = AclPermissionType.ALLOW,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          resource: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource, topic, pattern, ALICE, "*", operation, permission)


def admin_client(secured: Secured, broker: int | None = None) -> AdminClient:
    config = secured.client_config("admin")
    if broker is not None:
        config["bootstrap.servers"] = secured.cluster.nodes[broker].kafka_endpoint
    return AdminClient(config)


def change(secured: Secured, add: list[AclBinding] = (),  # type: ignore[assignment]
           remove: list[AclBinding] = ()) -> None:  # type: ignore[assignment]
    admin = admin_client(secured)
    for future in admin.create_acls(list(add)).values() if add else ():
        future.result(timeout=WAIT_S)
    if remove:
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                    b.host, b.operation, b.permission_type) for b in remove]
        for future in admin.delete_acls(filters).values():
            assert len(future.result(timeout=WAIT_S)) == 1


def produce_error(secured: Secured, topic: str) -> int | None:
    """alice's acks=all produce of one record: None, or the error code it failed with."""
    errors: list[Any] = []
    producer = Producer({**secured.client_config("alice"), "acks": "all",
                         "message.timeout.ms": 10000})
    producer.produce(topic, b"from alice", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(20)
    if not errors:
        return -1  # not answered within the flush
    # `is None`: a KafkaError compared with None raises inside confluent-kafka.
    return None if errors[0] is None else int(errors[0].code())


def read_error(secured: Secured, topic: str, group: str) -> int | None:
    """alice reads `topic` in `group` and commits: None when she read, or the error code."""
    consumer = Consumer({**secured.client_config("alice"), "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                return int(message.error().code())
            consumer.commit(message, asynchronous=False)
            return None
        return -1
    except KafkaException as exc:
        return int(exc.args[0].code())
    finally:
        consumer.close()


def kafka_python_produce_refused(secured: Secured, topic: str) -> bool:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    producer = KafkaProducer(**secured.kafka_python_config("alice"), acks="all",
                             max_block_ms=10000)
    try:
        producer.send(topic, b"from kafka-python").get(timeout=20)
        return False
    except TopicAuthorizationFailedError:
        return True
    finally:
        producer.close(timeout=5)


def test_acls_grant_and_revoke_access_for_real_clients(cluster: Secured) -> None:
    secured = cluster
    secured.create_topic("acl-orders", 3)
    # No ACL: refused with the errors both clients raise for Kafka.
    assert produce_error(secured, "acl-orders") == TOPIC_DENIED
    assert kafka_python_produce_refused(secured, "acl-orders")
    # Granted: the next produce succeeds (brokers replay the grant a moment after commit).
    write = grant("acl-orders", AclOperation.WRITE)
    change(secured, add=[write])
    wait_for(lambda: produce_error(secured, "acl-orders") is None, WAIT_S,
             "alice's produce to be allowed")
    assert not kafka_python_produce_refused(secured, "acl-orders")
    # Reading needs READ on the topic and READ on the group.
    change(secured, add=[grant("acl-orders", AclOperation.READ)])
    wait_for(lambda: read_error(secured, "acl-orders", "alices") == GROUP_DENIED, WAIT_S,
             "a read without the group's grant to be refused GROUP_AUTHORIZATION_FAILED")
    change(secured, add=[grant("alices", AclOperation.READ, resource=ResourceType.GROUP)])
    wait_for(lambda: read_error(secured, "acl-orders", "alices") is None, WAIT_S,
             "alice to read in her group")
    # DENY beats ALLOW, and deleting it restores the grant.
    deny = grant("acl-orders", AclOperation.WRITE, permission=AclPermissionType.DENY)
    change(secured, add=[deny])
    wait_for(lambda: produce_error(secured, "acl-orders") == TOPIC_DENIED, WAIT_S,
             "a DENY to beat the ALLOW")
    change(secured, remove=[deny])
    wait_for(lambda: produce_error(secured, "acl-orders") is None, WAIT_S,
             "the produce to be allowed again once the DENY is gone")
    # delete_acls revokes.
    change(secured, remove=[write])
    wait_for(lambda: produce_error(secured, "acl-orders") == TOPIC_DENIED, WAIT_S,
             "the produce to be refused again after delete_acls")


def test_a_prefixed_grant_covers_topics_created_after_it(cluster: Secured) -> None:
    secured = cluster
    change(secured, add=[grant("team-", AclOperation.WRITE,
                               pattern=ResourcePatternType.PREFIXED)])
    secured.create_topic("team-new", 3)
    wait_for(lambda: produce_error(secured, "team-new") is None, WAIT_S,
             "the prefixed grant to cover a topic created after it")
    assert produce_error(secured, "other-new") == TOPIC_DENIED


def test_acls_survive_restarts_and_reach_a_broker_that_was_down(cluster: Secured) -> None:
    secured = cluster
    nodes = secured.cluster
    down = BROKERS[-1]
    nodes.signal(down, signal.SIGTERM)
    assert nodes.wait_exit(down, WAIT_S) == 0
    late = grant("made-while-down", AclOperation.WRITE)
    change(secured, add=[late])
    # Every node restarts (the controller first); the ACLs come back from the log.
    for node_id in [n for n in BROKERS if n != down]:
        nodes.signal(node_id, signal.SIGTERM)
        assert nodes.wait_exit(node_id, WAIT_S) == 0
    nodes.signal(1, signal.SIGTERM)
    assert nodes.wait_exit(1, WAIT_S) == 0
    for node_id in [1, *BROKERS]:
        nodes.start(node_id)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, ALICE, None,
                                  AclOperation.ANY, AclPermissionType.ANY)

    failures: list[str] = []

    def described_by(broker: int) -> set[tuple[str, str]]:
        admin = admin_client(secured, broker)  # held: a dropped client cancels its calls
        try:
            bindings = admin.describe_acls(everything).result(timeout=10)
        except (KafkaException, TimeoutError) as exc:  # the broker is still starting
            failures.append(str(exc))
            return set()
        return {(b.name, b.operation.name) for b in bindings}

    # The broker that was down when the grant was made serves it from its own image.
    wait_for(lambda: ("made-while-down", "WRITE") in described_by(down), WAIT_S * 2,
             f"broker {down} to describe the ACL made while it was down (last answer: "
             f"{failures[-1:] or described_by(down)})")
    assert {("acl-orders", "READ"), ("alices", "READ"), ("team-", "WRITE")} <= described_by(down)
    secured.create_topic("made-while-down", 3)
    wait_for(lambda: produce_error(secured, "made-while-down") is None, WAIT_S,
             "the grant made while a broker was down to allow alice's produce")


pytestmark = pytest.mark.slow
