"""CreateTopics (API 19, v2-7), DeleteTopics (API 20, v1-6) and CreatePartitions (API 37,
v0-3): translated onto the admin operations, which forward them to the active controller.

The admin operations they get are authorized per topic (metadata/authorizer/admin_checks.py);
CreateTopics shows a created topic's configs only to a caller allowed DESCRIBE_CONFIGS on it
(else TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED), as Kafka."""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.kafka.admin_common import (
    AdminBackend,
    call_controller,
    message,
    status_error,
    timeout_ms,
)
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.topic_ids import ZERO_UUID, from_wire, to_wire
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation
from metadata.config_keys import TOPIC_CONFIGS
from metadata.configs import ConfigSource
from metadata.image import CLUSTER_DEFAULT_BROKER, MetadataImage
from metadata.rpc import admin_pb2 as pb
from metadata.topics import topic_name_error

Failure = tuple[int, str | None]


# ---- CreateTopics ----

def _null_config(topic: Any) -> Failure | None:
    """Kafka refuses a null config value (ControllerApis): INVALID_CONFIG for that topic."""
    for config in topic.configs:
        if config.value is None:
            return Errors.INVALID_CONFIG, f"Null value not supported for topic configs: " \
                                          f"{config.name}"
    return None


def created_configs(module: Any, image: MetadataImage,
                    requested: dict[str, str]) -> tuple[Any, ...]:
    """CreateTopics v5+ Configs: every topic config the new topic resolves, as DescribeConfigs
    would show it once created (its own value, else the cluster default, else Kafka's)."""
    if not hasattr(module, "CreatableTopicConfigs"):
        return ()  # before v5
    cluster = image.config(CLUSTER_DEFAULT_BROKER)
    out = []
    for name in sorted(set(TOPIC_CONFIGS) | set(requested)):
        key = TOPIC_CONFIGS.get(name)
        value: str | None
        synonym = (key.synonym or name) if key is not None else name
        if name in requested:
            value, source = requested[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        elif synonym in cluster:
            value, source = cluster[synonym], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            value = key.default if key is not None else None
            source = ConfigSource.DEFAULT_CONFIG
        out.append(build(module, "CreatableTopicConfigs", name=name, value=value,
                         read_only=False, config_source=int(source), is_sensitive=False))
    return tuple(out)


def _refused_locally(topic: Any, duplicated: bool) -> Failure | None:
    """What Kafka refuses for one topic alone, the others going on (ControllerApis and
    ReplicationControlManager): a duplicated name, an illegal name, a negative partition in an
    explicit assignment, a null config value."""
    if duplicated:
        return Errors.INVALID_REQUEST, "Duplicate topic name."
    name_error = topic_name_error(topic.name)
    if name_error is not None:
        return Errors.INVALID_TOPIC_EXCEPTION, name_error
    if any(a.partition_index < 0 for a in topic.assignments):
        return Errors.INVALID_REPLICA_ASSIGNMENT, "Partition indexes must not be negative."
    return _null_config(topic)


async def handle_create_topics(admin: AdminBackend, image: MetadataImage, version: int,
                               request: Any, auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    refused: dict[str, Failure] = {}
    forwarded = []
    counts = Counter(t.name for t in request.topics)
    for topic in request.topics:
        failure = _refused_locally(topic, counts[topic.name] > 1)
        if failure is not None:
            refused.setdefault(topic.name, failure)
            continue
        forwarded.append(pb.CreatableTopic(
            name=topic.name, num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments=[pb.ReplicaAssignment(partition_index=a.partition_index,
                                              broker_ids=list(a.broker_ids))
                         for a in topic.assignments],
            configs=[pb.ConfigValue(name=c.name, value=c.value) for c in topic.configs]))
    results: dict[str, pb.CreatableTopicResult] = {}
    whole: Failure | None = None
    if forwarded:
        response = await call_controller(
            admin, "CreateTopics",
            pb.CreateTopicsRequest(topics=forwarded, validate_only=request.validate_only),
            timeout_ms(request))
        whole = status_error(response)
        results = {r.name: r for r in response.topics}
    requested = {t.name: {c.name: c.value for c in t.configs} for t in request.topics}
    module = response_module(ApiKey.CREATE_TOPICS, version)
    topics = []
    for name in dict.fromkeys(t.name for t in request.topics):
        failure = refused.get(name) or whole
        result = results.get(name)
        if failure is None and result is None:
            failure = (Errors.UNKNOWN_SERVER_ERROR, "The controller gave no result for it.")
        if failure is None and result is not None and result.error_code != Errors.NONE:
            failure = (result.error_code, message(result.error_code, result.error_message))
        if failure is not None:
            topics.append(build(
                module, "CreatableTopicResult", name=name, topic_id=ZERO_UUID,
                error_code=error_code(failure[0]), error_message=failure[1],
                topic_config_error_code=0, num_partitions=-1, replication_factor=-1,
                configs=None))
            continue
        assert result is not None
        describable = auth.topic(AclOperation.DESCRIBE_CONFIGS, name)
        topics.append(build(
            module, "CreatableTopicResult", name=name,
            topic_id=to_wire(result.topic_id) if result.topic_id else ZERO_UUID,
            error_code=error_code(Errors.NONE), error_message=None,
            topic_config_error_code=error_code(
                Errors.NONE if describable else Errors.TOPIC_AUTHORIZATION_FAILED),
            num_partitions=result.num_partitions, replication_factor=result.replication_factor,
            configs=created_configs(module, image, requested[name]) if describable else None))
    return Reply(build(module, "CreateTopicsResponse", throttle_time=NO_THROTTLE,
                       topics=tuple(topics)))


# ---- DeleteTopics ----

async def handle_delete_topics(admin: AdminBackend, version: int, request: Any) -> Reply:
    if version >= 6:
        refs = [pb.TopicRef(name=t.name or "",
                            topic_id=from_wire(t.topic_id)
                            if t.topic_id is not None and t.topic_id != ZERO_UUID else "")
                for t in request.topics]
    else:
        refs = [pb.TopicRef(name=name) for name in request.topic_names]
    module = response_module(ApiKey.DELETE_TOPICS, version)
    # An illegal name names no topic: that entry alone is UNKNOWN_TOPIC_OR_PARTITION (Kafka).
    unknown = Errors.UNKNOWN_TOPIC_OR_PARTITION
    results: list[Any] = [(ref.name, None, unknown, message(unknown)) for ref in refs
                          if ref.name and topic_name_error(ref.name) is not None]
    refs = [ref for ref in refs if not ref.name or topic_name_error(ref.name) is None]
    if refs:
        response = await call_controller(admin, "DeleteTopics",
                                         pb.DeleteTopicsRequest(topics=refs), timeout_ms(request))
        whole = status_error(response)
        if whole is not None:
            results += [(ref.name or None, ref.topic_id or None, *whole) for ref in refs]
        else:
            results += [(r.name or None, r.topic_id or None, r.error_code,
                         message(r.error_code, r.error_message)) for r in response.topics]
    return Reply(build(module, "DeleteTopicsResponse", throttle_time=NO_THROTTLE, responses=tuple(
        build(module, "DeletableTopicResult", name=name,
              topic_id=to_wire(topic_id) if topic_id else ZERO_UUID,
              error_code=error_code(code), error_message=text)
        for name, topic_id, code, text in results)))


# ---- CreatePartitions ----

async def handle_create_partitions(admin: AdminBackend, version: int, request: Any) -> Reply:
    # An empty (not null) assignment list assigns none of the new partitions: Kafka refuses
    # that topic alone rather than placing them itself.
    empty = [t.name for t in request.topics if t.assignments is not None and not t.assignments]
    topics = [pb.CreatePartitionsTopic(
        name=t.name, count=t.count,
        assignments=[pb.CreatePartitionsAssignment(broker_ids=list(a.broker_ids))
                     for a in t.assignments or ()])
        for t in request.topics if t.name not in empty]
    module = response_module(ApiKey.CREATE_PARTITIONS, version)
    results: list[tuple[str, int, str | None]] = [
        (name, Errors.INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add partitions, but 0 assignment(s) were specified.")
        for name in dict.fromkeys(empty)]
    if topics:
        response = await call_controller(
            admin, "CreatePartitions",
            pb.CreatePartitionsRequest(topics=topics, validate_only=request.validate_only),
            timeout_ms(request))
        whole = status_error(response)
        if whole is not None:
            results += [(t.name, *whole) for t in dict((t.name, t) for t in topics).values()]
        else:
            results += [(r.name, r.error_code, message(r.error_code, r.error_message))
                        for r in response.topics]
    return Reply(build(module, "CreatePartitionsResponse", throttle_time=NO_THROTTLE,
                       results=tuple(
                           build(module, "CreatePartitionsTopicResult", name=name,
                                 error_code=error_code(code), error_message=text)
                           for name, code, text in results)))
