"""Metadata (API 3, v0-12): brokers, cluster id, controller and topics from the broker's
metadata image, as Kafka's KRaftMetadataCache answers it; missing topics may be auto-created
(admin_auto_create.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.topic_ids import ZERO_UUID, from_wire, to_wire
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.image import MetadataImage, PartitionRegistration, TopicImage
from metadata.records import NO_LEADER, Endpoint
from metadata.topics import topic_name_error

# Kafka's Topic.INTERNAL_TOPICS: clients hide them from listings and refuse to produce there.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def live_endpoint(image: MetadataImage, broker_id: int, listener: str) -> Endpoint | None:
    """The broker's endpoint on `listener` if it is registered and not fenced."""
    registration = image.cluster.broker(broker_id)
    if registration is None or registration.fenced:
        return None
    for endpoint in registration.endpoints:
        if endpoint.name == listener:
            return endpoint
    return None


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
) -> Reply:
    """`auto_create`: start creating missing topics (None: auto.create.topics.enable off)."""
    module = response_module(ApiKey.METADATA, version)
    brokers = []
    for broker_id in sorted(image.cluster.brokers):
        registration = image.cluster.brokers[broker_id]
        endpoint = live_endpoint(image, broker_id, listener)
        if endpoint is not None:
            brokers.append(build(
                module, "MetadataResponseBroker", node_id=broker_id, host=endpoint.host,
                port=endpoint.port, rack=registration.rack,
            ))
    # KRaft has no controller among the brokers: Kafka names a random live broker; the first
    # keeps answers stable.
    controller_id = brokers[0].node_id if brokers else NO_LEADER

    requested = _requested_topics(image, version, request.topics)
    # Kafka's rule: enabled on the broker, allowed by the request (v4+; implied before), and
    # never for an all-topics request.
    if auto_create is not None and request.topics and \
            getattr(request, "allow_auto_topic_creation", True):
        missing = [name for name, _, topic in requested if topic is None and name is not None
                   and name not in INTERNAL_TOPICS and topic_name_error(name) is None]
        if missing:
            auto_create(missing)
    topics = [
        _topic(module, image, listener, version, name, topic_id, topic)
        for name, topic_id, topic in requested
    ]
    return Reply(build(
        module, "MetadataResponse", throttle_time=NO_THROTTLE, brokers=tuple(brokers),
        cluster_id=cluster_id, controller_id=controller_id, topics=tuple(topics),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    ))


def _requested_topics(
    image: MetadataImage, version: int, requested: Any
) -> list[tuple[str | None, str | None, TopicImage | None]]:
    """(name, id, topic or None if unknown) in the order asked; every topic for a null list
    (and for an empty one in v0, where empty meant all)."""
    if requested is None or (version == 0 and not requested):
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
