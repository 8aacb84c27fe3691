"""Metadata (API 3, v0-12): brokers, cluster id, controller and topics from the broker's
metadata image, as Kafka's KRaftMetadataCache answers it; missing topics may be auto-created
(admin_auto_create.py).

Authorization (Kafka's handleTopicMetadataRequest): a listing of all topics shows only those
the caller may DESCRIBE; a topic named (or asked by id) that it may not is
TOPIC_AUTHORIZATION_FAILED (by id: without its name). A missing topic is auto-created only for
a caller allowed CREATE on the cluster or on that topic; for the others it is
TOPIC_AUTHORIZATION_FAILED. The authorized-operations bitfields are filled when asked."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from broker.kafka.authorization import (
    ALLOW_ALL,
    AUTHORIZED_OPERATIONS_OMITTED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.topic_ids import ZERO_UUID, from_wire, to_wire
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import CLUSTER_NAME, AclOperation, ResourceType
from metadata.image import MetadataImage, PartitionRegistration, TopicImage
from metadata.records import NO_LEADER, Endpoint
from metadata.topics import topic_name_error

# Kafka's Topic.INTERNAL_TOPICS: clients hide them from listings and refuse to produce there.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
CLUSTER_OPERATIONS_LAST_VERSION = 10  # v11 moved them to DescribeCluster (KIP-700)


def live_endpoint(image: MetadataImage, broker_id: int, listener: str) -> Endpoint | None:
    """The broker's endpoint on `listener` if it is registered and not fenced."""
    registration = image.cluster.broker(broker_id)
    if registration is None or registration.fenced:
        return None
    for endpoint in registration.endpoints:
        if endpoint.name == listener:
            return endpoint
    return None


def controller_id_for(live_broker_ids: Sequence[int], self_id: int) -> int:
    """The `controller_id` a KRaft broker names: clients cannot reach the controllers, so Kafka
    names a random live broker (admin clients send controller-bound requests there, and it
    forwards them). The answering broker itself when it is live — the one broker the client is
    known to reach, which matters while others restart — else the first live one."""
    if self_id in live_broker_ids:
        return self_id
    return live_broker_ids[0] if live_broker_ids else NO_LEADER


def node_endpoints(
    module: Any, image: MetadataImage, broker_ids: Iterable[int], listener: str
) -> tuple[Any, ...]:
    """NodeEndpoint entries (Produce v10+, Fetch v16+) for the leaders named in an answer."""
    if not hasattr(module, "NodeEndpoint"):
        return ()  # an older version
    nodes = []
    for broker_id in sorted(set(broker_ids)):
        endpoint = live_endpoint(image, broker_id, listener)
        if endpoint is not None:
            registration = image.cluster.broker(broker_id)
            nodes.append(build(
                module, "NodeEndpoint", node_id=broker_id, host=endpoint.host,
                port=endpoint.port, rack=registration.rack if registration else None,
            ))
    return tuple(nodes)


def handle_metadata(
    image: MetadataImage, cluster_id: str, listener: str, version: int, request: Any,
    auto_create: Callable[[Sequence[str]], None] | None = None,
    auth: RequestAuthorization = ALLOW_ALL, broker_id: int = NO_LEADER,
) -> Reply:
    """`auto_create`: start creating missing topics (None: auto.create.topics.enable off)."""
    module = response_module(ApiKey.METADATA, version)
    brokers = []
    for node_id in sorted(image.cluster.brokers):
        registration = image.cluster.brokers[node_id]
        endpoint = live_endpoint(image, node_id, listener)
        if endpoint is not None:
            brokers.append(build(
                module, "MetadataResponseBroker", node_id=node_id, host=endpoint.host,
                port=endpoint.port, rack=registration.rack,
            ))
    controller_id = controller_id_for([b.node_id for b in brokers], broker_id)

    requested = _requested_topics(image, version, request.topics)
    named = not _all_topics(version, request.topics)
    # A topic the caller may not DESCRIBE is refused when asked for and hidden from a listing.
    refused: set[str | None] = set()
    visible = []
    for name, topic_id, topic in requested:
        key = topic.name if topic is not None else name
        if key is None or auth.topic(AclOperation.DESCRIBE, key, log_if_denied=named):
            visible.append((name, topic_id, topic))
        elif named:
            visible.append((name, topic_id, topic))
            refused.add(key)
    # Kafka's rule: enabled on the broker, allowed by the request (v4+; implied before), and
    # never for an all-topics request; then only what the caller may CREATE.
    if auto_create is not None and request.topics and \
            getattr(request, "allow_auto_topic_creation", True):
        missing = [name for name, _, topic in visible if topic is None and name is not None
                   and name not in refused and name not in INTERNAL_TOPICS
                   and topic_name_error(name) is None]
        if missing and not auth.cluster(AclOperation.CREATE, log_if_denied=False):
            refused.update(n for n in missing if not auth.topic(AclOperation.CREATE, n))
            missing = [n for n in missing if n not in refused]
        if missing:
            auto_create(missing)
    topic_operations = version >= 8 and getattr(
        request, "include_topic_authorized_operations", False)
    topics = []
    for name, topic_id, topic in visible:
        key = topic.name if topic is not None else name
        if key in refused:
            entry = _refused_topic(module, name, topic_id, topic)
        else:
            entry = _topic(module, image, listener, version, name, topic_id, topic)
        if topic_operations and key is not None:
            entry = dataclasses.replace(
                entry, topic_authorized_operations=auth.operations(ResourceType.TOPIC, key))
        topics.append(entry)
    return Reply(build(
        module, "MetadataResponse", throttle_time=NO_THROTTLE, brokers=tuple(brokers),
        cluster_id=cluster_id, controller_id=controller_id, topics=tuple(topics),
        cluster_authorized_operations=_cluster_operations(version, request, auth),
    ))


def _all_topics(version: int, requested: Any) -> bool:
    return requested is None or (version == 0 and not requested)


def _cluster_operations(version: int, request: Any, auth: RequestAuthorization) -> int:
    if not (8 <= version <= CLUSTER_OPERATIONS_LAST_VERSION
            and getattr(request, "include_cluster_authorized_operations", False)):
        return AUTHORIZED_OPERATIONS_OMITTED
    return cluster_operations(auth)


def cluster_operations(auth: RequestAuthorization) -> int:
    """Kafka's cluster bitfield: 0 unless the caller may DESCRIBE the cluster."""
    if not auth.cluster(AclOperation.DESCRIBE):
        return 0
    return auth.operations(ResourceType.CLUSTER, CLUSTER_NAME)


def _refused_topic(module: Any, name: str | None, topic_id: str | None,
                   topic: TopicImage | None) -> Any:
    """A topic the caller may not see: no partitions, and no name when asked by id."""
    wire_id = to_wire(topic_id) if topic_id else ZERO_UUID
    return build(
        module, "MetadataResponseTopic",
        error_code=error_code(Errors.TOPIC_AUTHORIZATION_FAILED), name=name,
        topic_id=wire_id if name is None else ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS, partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _requested_topics(
    image: MetadataImage, version: int, requested: Any
) -> list[tuple[str | None, str | None, TopicImage | None]]:
    """(name, id, topic or None if unknown) in the order asked; every topic for a null list
    (and for an empty one in v0, where empty meant all)."""
    if _all_topics(version, requested):
        return [(topic.name, topic.topic_id, topic)
                for topic in sorted(image.topics.by_name.values(), key=lambda t: t.name)]
    result: list[tuple[str | None, str | None, TopicImage | None]] = []
    for entry in requested:
        name = entry.name
        wire_id = getattr(entry, "topic_id", None)
        if name is None and wire_id is not None and wire_id != ZERO_UUID:
            topic_id = from_wire(wire_id)
            result.append((None, topic_id, image.topic_by_id(topic_id)))
        else:
            result.append((name, None, image.topic(name) if name is not None else None))
    return result


def _topic(
    module: Any, image: MetadataImage, listener: str, version: int,
    name: str | None, topic_id: str | None, topic: TopicImage | None,
) -> Any:
    if topic is None:
        # Also while it is being auto-created (a KRaft broker's answer); an illegal name is
        # INVALID_TOPIC_EXCEPTION, as Kafka answers it.
        unknown = Errors.UNKNOWN_TOPIC_ID if name is None else (
            Errors.INVALID_TOPIC_EXCEPTION if topic_name_error(name) is not None
            else Errors.UNKNOWN_TOPIC_OR_PARTITION)
        return build(
            module, "MetadataResponseTopic", error_code=error_code(unknown), name=name,
            topic_id=to_wire(topic_id) if topic_id else ZERO_UUID, is_internal=False,
            partitions=(), topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
    partitions = tuple(
        _partition(module, image, listener, version, index, partition)
        for index, partition in sorted(topic.partitions.items())
    )
    return build(
        module, "MetadataResponseTopic", error_code=error_code(Errors.NONE), name=topic.name,
        topic_id=to_wire(topic.topic_id), is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partitions, topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _partition(
    module: Any, image: MetadataImage, listener: str, version: int,
    index: int, partition: PartitionRegistration,
) -> Any:
    offline = tuple(b for b in partition.replicas if not _alive(image, b))
    replicas, isr = partition.replicas, partition.isr
    leader = partition.leader
    if live_endpoint(image, leader, listener) is not None:
        error = Errors.NONE
    elif leader != NO_LEADER and _alive(image, leader) and version >= 6:
        error = Errors.LISTENER_NOT_FOUND  # alive, but not reachable on this listener
        leader = NO_LEADER
    else:
        error = Errors.LEADER_NOT_AVAILABLE
        leader = NO_LEADER
    if version == 0 and offline:
        # Only v0 reports dead replicas as an error, and leaves them out of the lists.
        replicas = tuple(b for b in replicas if b not in offline)
        isr = tuple(b for b in isr if b not in offline)
        if error == Errors.NONE:
            error = Errors.REPLICA_NOT_AVAILABLE
    return build(
        module, "MetadataResponsePartition", error_code=error_code(error),
        partition_index=index, leader_id=leader, leader_epoch=partition.leader_epoch,
        replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline,
    )


def _alive(image: MetadataImage, broker_id: int) -> bool:
    registration = image.cluster.broker(broker_id)
    return registration is not None and not registration.fenced
