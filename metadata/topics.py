"""Topic creation, partition creation and topic deletion as pure rules (spec §3.7, §3.9).

Each rule validates a request against an image, in Kafka's order and with Kafka's messages, and
returns the records of one atomic batch with the per-topic results. Nothing changes until the
records are replayed.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from metadata.config_keys import validate_topic_configs
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.image import (
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    collision_key,
    has_collision_chars,
)
from metadata.placement import place_replicas
from metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    Record,
    RemoveTopicRecord,
    TopicRecord,
)

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# The metadata log's directory under metadata.log.dir: Kafka's <topic>-<partition> name.
METADATA_PARTITION_DIR = f"{CLUSTER_METADATA_TOPIC}-0"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """A CreateTopics entry: -1 asks for the default; `assignments` places replicas by hand
    (then both counts must be -1); a config value of None is refused, as Kafka does."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[ReplicaAssignment, ...] = ()
    configs: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    name: str
    error: ControllerApiError | None = None
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    name: str
    count: int  # the new total
    assignments: tuple[tuple[int, ...], ...] | None = None  # one per added partition


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopicResult:
    name: str
    error: ControllerApiError | None = None


@dataclass(frozen=True, slots=True)
class TopicRef:
    """A DeleteTopics entry: a name or an id, not both."""

    name: str | None = None
    topic_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str | None
    topic_id: str | None
    error: ControllerApiError | None = None


# ---- names and configs ----

def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate message for an invalid name, else None."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = (f"the length of '{name}' is longer than the max allowed length "
                  f"{MAX_TOPIC_NAME_LENGTH}")
    elif not _LEGAL_CHARACTERS.issuperset(name):
        reason = (f"'{name}' contains one or more characters other than ASCII alphanumerics, "
                  "'.', '_' and '-'")
    else:
        return None
    return f"Topic name is invalid: {reason}"


def _config_records(topic: CreatableTopic) -> list[Record]:
    missing = [key for key, value in topic.configs if value is None]
    if missing:
        raise ControllerApiError(
            Errors.INVALID_CONFIG,
            "Null value not supported for topic configs: " + ",".join(missing),
        )
    values = {key: value for key, value in topic.configs if value is not None}
    error = validate_topic_configs(values)
    if error is not None:
        raise error
    return [ConfigRecord(ConfigResourceType.TOPIC, topic.name, key, value)
            for key, value in values.items()]


def colliding_topic(image: MetadataImage, name: str, created: dict[str, str]) -> str | None:
    """An existing topic whose name differs from `name` only by '.' versus '_'. Unlike Kafka
    we also check the topics created earlier in the same request (`created`)."""
    if not has_collision_chars(name):
        return None
    key = collision_key(name)
    others = set(image.topics.colliding_names.get(key, frozenset()))
    if key in created:
        others.add(created[key])
    others.discard(name)
    return min(others) if others else None


# ---- manual assignments ----

def validate_manual_assignment(
    image: MetadataImage, replicas: Sequence[int], replication_factor: int | None
) -> None:
    """Kafka's validateManualPartitionAssignment (INVALID_REPLICA_ASSIGNMENT)."""
    if not replicas:
        raise _bad_assignment("The manual partition assignment includes an empty replica list.")
    previous = None
    for broker in sorted(replicas):
        if broker not in image.cluster.brokers:
            raise _bad_assignment(f"The manual partition assignment includes broker {broker}, "
                                  "but no such broker is registered.")
        if broker == previous:
            raise _bad_assignment(f"The manual partition assignment includes the broker "
                                  f"{broker} more than once.")
        previous = broker
    if replication_factor is not None and len(replicas) != replication_factor:
        raise _bad_assignment(
            f"The manual partition assignment includes a partition with {len(replicas)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s)."
        )


def _bad_assignment(message: str) -> ControllerApiError:
    return ControllerApiError(Errors.INVALID_REPLICA_ASSIGNMENT, message)


def new_partition(image: MetadataImage, replicas: Sequence[int]) -> PartitionRegistration:
    """A new partition: the ISR is the active replicas, the leader the first of them."""
    replicas = tuple(replicas)
    isr = tuple(r for r in replicas if image.cluster.is_active(r))
    return PartitionRegistration(replicas, isr, leader=isr[0] if isr else -1)


def placement_start(topic_name: str) -> int:
    """Where a topic's striping starts: a stable hash of its name, so that partition 0 of
    every topic does not land on the same broker, and the same request places the same way."""
    return zlib.crc32(topic_name.encode())


# ---- CreateTopics ----

def create_topics(
    image: MetadataImage,
    topics: Sequence[CreatableTopic],
    *,
    validate_only: bool = False,
    default_num_partitions: int | None = None,
    default_replication_factor: int | None = None,
    new_topic_id: Callable[[], str] = random_uuid,
) -> ControllerResult[list[CreatableTopicResult]]:
    """One result per distinct name, in request order; one atomic batch of TopicRecord, its
    ConfigRecords and its PartitionRecords per created topic (none if validate_only). The
    defaults for -1 are the cluster's num.partitions and default.replication.factor unless
    given."""
    if default_num_partitions is None:
        default_num_partitions = image.cluster_setting("num.partitions")
    if default_replication_factor is None:
        default_replication_factor = image.cluster_setting("default.replication.factor")
    counts = Counter(topic.name for topic in topics)
    created: dict[str, str] = {}  # collision key -> name, for the topics of this request
    records: list[Record] = []
    results: dict[str, CreatableTopicResult] = {}
    for topic in topics:
        if topic.name in results:
            continue
        try:
            if counts[topic.name] > 1:
                raise ControllerApiError(Errors.INVALID_REQUEST, "Duplicate topic name.")
            topic_records, result = _create_topic(
                image, topic, created, default_num_partitions, default_replication_factor,
                new_topic_id,
            )
        except ControllerApiError as error:
            results[topic.name] = CreatableTopicResult(topic.name, error)
            continue
        created[collision_key(topic.name)] = topic.name
        records.extend(topic_records)
        results[topic.name] = result
    check_user_op_size(records)
    return ControllerResult(tuple(() if validate_only else records), list(results.values()))


def _create_topic(
    image: MetadataImage,
    topic: CreatableTopic,
    created: dict[str, str],
    default_num_partitions: int,
    default_replication_factor: int,
    new_topic_id: Callable[[], str],
) -> tuple[list[Record], CreatableTopicResult]:
    name = topic.name
    if name == CLUSTER_METADATA_TOPIC:
        raise ControllerApiError(
            Errors.INVALID_REQUEST,
            f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
        )
    name_error = topic_name_error(name)
    if name_error is not None:
        raise ControllerApiError(Errors.INVALID_TOPIC_EXCEPTION, name_error)
    if name in image.topics.by_name:
        raise ControllerApiError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    other = colliding_topic(image, name, created)
    if other is not None:
        raise ControllerApiError(Errors.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {other}")
    config_records = _config_records(topic)
    partitions = (_manual_partitions(image, topic) if topic.assignments
                  else _placed_partitions(image, topic, default_num_partitions,
                                          default_replication_factor))
    topic_id = new_topic_id()
    records: list[Record] = [TopicRecord(name, topic_id), *config_records]
    records.extend(p.to_record(topic_id, i) for i, p in enumerate(partitions))
    result = CreatableTopicResult(
        name, None, topic_id, len(partitions), len(partitions[0].replicas)
    )
    return records, result


def _manual_partitions(
    image: MetadataImage, topic: CreatableTopic
) -> list[PartitionRegistration]:
    if topic.replication_factor != -1:
        raise ControllerApiError(Errors.INVALID_REQUEST, "A manual partition assignment was "
                                 "specified, but replication factor was not set to -1.")
    if topic.num_partitions != -1:
        raise ControllerApiError(Errors.INVALID_REQUEST, "A manual partition assignment was "
                                 "specified, but numPartitions was not set to -1.")
    by_index: dict[int, PartitionRegistration] = {}
    replication_factor: int | None = None
    for assignment in topic.assignments:
        index = assignment.partition_index
        if index in by_index:
            raise _bad_assignment(
                f"Found multiple manual partition assignments for partition {index}"
            )
        validate_manual_assignment(image, assignment.broker_ids, replication_factor)
        replication_factor = len(assignment.broker_ids)
        partition = new_partition(image, assignment.broker_ids)
        if not partition.isr:
            raise _bad_assignment(
                f"All brokers specified in the manual partition assignment for partition "
                f"{index} are fenced or in controlled shutdown."
            )
        by_index[index] = partition
    if sorted(by_index) != list(range(len(by_index))):
        raise _bad_assignment("partitions should be a consecutive 0-based integer sequence")
    return [by_index[i] for i in range(len(by_index))]


def _placed_partitions(
    image: MetadataImage,
    topic: CreatableTopic,
    default_num_partitions: int,
    default_replication_factor: int,
) -> list[PartitionRegistration]:
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise ControllerApiError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must "
                                 "be larger than 0, or -1 to use the default value.")
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise ControllerApiError(Errors.INVALID_PARTITIONS, "Number of partitions was set "
                                 "to an invalid non-positive value.")
    count = default_num_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = (default_replication_factor if topic.replication_factor == -1
              else topic.replication_factor)
    try:
        placed = place_replicas(image.cluster.brokers.values(), count, factor,
                                placement_start(topic.name))
    except ControllerApiError as error:
        raise ControllerApiError(
            error.error, f"Unable to replicate the partition {factor} time(s): {error.message}"
        ) from None
    partitions = [new_partition(image, replicas) for replicas in placed]
    if any(not p.isr for p in partitions):
        raise ControllerApiError(
            Errors.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {factor} time(s): All brokers are currently "
            "fenced or in controlled shutdown.",
        )
    return partitions


# ---- CreatePartitions ----

def create_partitions(
    image: MetadataImage,
    topics: Sequence[CreatePartitionsTopic],
    *,
    validate_only: bool = False,
) -> ControllerResult[list[CreatePartitionsTopicResult]]:
    """Kafka's createPartitions: one result per distinct name, one atomic batch."""
    counts = Counter(topic.name for topic in topics)
    records: list[Record] = []
    results: dict[str, CreatePartitionsTopicResult] = {}
    for topic in topics:
        if topic.name in results:
            continue
        try:
            if counts[topic.name] > 1:
                raise ControllerApiError(Errors.INVALID_REQUEST, "Duplicate topic name.")
            records.extend(_create_partitions(image, topic))
            results[topic.name] = CreatePartitionsTopicResult(topic.name)
        except ControllerApiError as error:
            results[topic.name] = CreatePartitionsTopicResult(topic.name, error)
    check_user_op_size(records)
    return ControllerResult(tuple(() if validate_only else records), list(results.values()))


def _create_partitions(image: MetadataImage, request: CreatePartitionsTopic) -> list[Record]:
    topic = image.topic(request.name)
    if topic is None:
        raise ControllerApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    current = len(topic.partitions)
    if request.count == current:
        raise ControllerApiError(Errors.INVALID_PARTITIONS,
                                 f"Topic already has {current} partition(s).")
    if request.count < current:
        raise ControllerApiError(
            Errors.INVALID_PARTITIONS, f"The topic {request.name} currently has {current} "
            f"partition(s); {request.count} would not be an increase.")
    additional = request.count - current
    if request.assignments is not None and len(request.assignments) != additional:
        raise _bad_assignment(f"Attempted to add {additional} additional partition(s), but only "
                              f"{len(request.assignments)} assignment(s) were specified.")
    replication_factor = topic.replication_factor
    if request.assignments is not None:
        partitions = []
        for i, replicas in enumerate(request.assignments):
            validate_manual_assignment(image, replicas, replication_factor)
            partition = new_partition(image, replicas)
            if not partition.isr:
                raise _bad_assignment(
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{current + i} are fenced or in controlled shutdown."
                )
            partitions.append(partition)
    else:
        # The placer's errors go back as they are: Kafka does not prefix them here.
        placed = place_replicas(image.cluster.brokers.values(), additional, replication_factor,
                                placement_start(topic.name) + current)
        partitions = [new_partition(image, replicas) for replicas in placed]
    return [p.to_record(topic.topic_id, current + i) for i, p in enumerate(partitions)]


# ---- DeleteTopics ----

@dataclass(slots=True)
class _Deletion:
    results: dict[TopicRef, DeletableTopicResult] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)

    def fail(self, ref: TopicRef, error: ControllerApiError, topic: TopicImage | None) -> None:
        name = ref.name if topic is None else topic.name
        self.results[ref] = DeletableTopicResult(name, ref.topic_id, error)


def delete_topics(
    image: MetadataImage,
    topics: Sequence[TopicRef],
    *,
    deletion_enabled: bool = True,
) -> ControllerResult[list[DeletableTopicResult]]:
    """ControllerApis.deleteTopics + RCM.deleteTopics: a RemoveTopicRecord per topic, all in
    one batch. Results come in request order (Kafka shuffles them), one per distinct entry."""
    if not deletion_enabled:
        raise ControllerApiError(Errors.TOPIC_DELETION_DISABLED)
    counts = Counter(topics)
    # topic id -> the first entry that asked for it, to catch a name and an id for one topic
    claimed: dict[str, TopicRef] = {}
    deletion = _Deletion()
    for ref in topics:
        if ref in deletion.results:
            continue
        if ref.name is None and ref.topic_id is None:
            deletion.fail(ref, ControllerApiError(
                Errors.INVALID_REQUEST, "Neither topic name nor id were specified."), None)
        elif ref.name is not None and ref.topic_id is not None:
            deletion.fail(ref, ControllerApiError(
                Errors.INVALID_REQUEST, "You may not specify both topic name and topic id."),
                None)
        elif counts[ref] > 1:
            message = "Duplicate topic name." if ref.name is not None else "Duplicate topic id."
            deletion.fail(ref, ControllerApiError(Errors.INVALID_REQUEST, message), None)
        else:
            topic = (image.topic(ref.name) if ref.name is not None
                     else image.topic_by_id(ref.topic_id or ""))
            if topic is None:
                error = (Errors.UNKNOWN_TOPIC_OR_PARTITION if ref.name is not None
                         else Errors.UNKNOWN_TOPIC_ID)
                deletion.fail(ref, ControllerApiError(error), None)
            elif topic.topic_id in claimed:
                twice = ControllerApiError(Errors.INVALID_REQUEST, "The provided topic name "
                                           "maps to an ID that was already supplied.")
                deletion.fail(ref, twice, topic)
                deletion.fail(claimed[topic.topic_id], twice, topic)
            else:
                claimed[topic.topic_id] = ref
                deletion.results[ref] = DeletableTopicResult(topic.name, topic.topic_id)
    deletion.records = [RemoveTopicRecord(result.topic_id) for result in deletion.results.values()
                        if result.error is None and result.topic_id is not None]
    check_user_op_size(deletion.records)
    return ControllerResult(tuple(deletion.records), list(deletion.results.values()))
