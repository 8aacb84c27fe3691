"""Dynamic configs as pure rules: DescribeConfigs, IncrementalAlterConfigs, CreateTopics with
full config checks, and DescribeFeatures (spec §1 ConfigRecord / FeatureLevelRecord).

Configs live in the image as ConfigRecords per resource: TOPIC <name>, BROKER <id> and the
cluster-wide default BROKER "". A topic key resolves topic value -> cluster default of its
broker synonym -> Kafka's default; a broker key resolves broker value -> cluster default ->
Kafka's default. Values are checked as Kafka's ConfigDef does (type, range, valid list) with
its messages. Departures from Kafka: broker keys must be known (Kafka lets custom broker
properties through), and `num.partitions` / `default.replication.factor` are dynamic here
because the controller reads them for CreateTopics defaults.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.image import CLUSTER_DEFAULT_BROKER, ConfigResource, MetadataImage
from metadata.records import ConfigRecord, ConfigResourceType, Record
from metadata.topics import (
    CLUSTER_METADATA_TOPIC,
    CreatableTopic,
    CreatableTopicResult,
    colliding_topic,
    create_topics,
    topic_name_error,
)


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigType ids (the ones used here)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


class AlterConfigOp(IntEnum):
    """Kafka's AlterConfigOp.OpType ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: str | None
    doc: str
    at_least: int | None = None
    valid_values: tuple[str, ...] | None = None  # LIST: Kafka's ValidList.in
    synonym: str | None = None  # a topic key's broker-level name


_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.valueOf / Long.valueOf accept
_LIST_SEPARATOR = re.compile(r"\s*,\s*")  # ConfigDef.COMMA_WITH_WHITESPACE

# Kafka's defaults (LogConfig, ServerLogConfigs, ReplicationConfigs at the spec's snapshot).
_SEGMENT_BYTES_MIN = 14  # LegacyRecord.RECORD_OVERHEAD_V0
_RETENTION_MS = "604800000"  # 7 days (Kafka derives log.retention.ms from log.retention.hours)
_MAX_MESSAGE_BYTES = "1048588"  # 1 MiB + Records.LOG_OVERHEAD


def _keys(*keys: ConfigKey) -> Mapping[str, ConfigKey]:
    return MappingProxyType({key.name: key for key in keys})


TOPIC_CONFIGS = _keys(
    ConfigKey("cleanup.policy", ConfigType.LIST, "delete",
              "The retention policy of old log segments: delete, compact or both.",
              valid_values=("compact", "delete"), synonym="log.cleanup.policy"),
    ConfigKey("max.message.bytes", ConfigType.INT, _MAX_MESSAGE_BYTES,
              "The largest record batch size allowed.", at_least=0,
              synonym="message.max.bytes"),
    ConfigKey("min.insync.replicas", ConfigType.INT, "1",
              "The ISR size below which acks=all producers are refused.", at_least=1,
              synonym="min.insync.replicas"),
    ConfigKey("retention.bytes", ConfigType.LONG, "-1",
              "The size a partition may grow to before old segments are discarded.",
              synonym="log.retention.bytes"),
    ConfigKey("retention.ms", ConfigType.LONG, _RETENTION_MS,
              "How long a log segment is kept before it is discarded; -1 for no limit.",
              at_least=-1, synonym="log.retention.ms"),
    ConfigKey("segment.bytes", ConfigType.INT, "1073741824",
              "The segment file size of the log.", at_least=_SEGMENT_BYTES_MIN,
              synonym="log.segment.bytes"),
    ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, "false",
              "Whether a replica outside the ISR may become leader as a last resort.",
              synonym="unclean.leader.election.enable"),
)

BROKER_CONFIGS = _keys(
    ConfigKey("auto.leader.rebalance.enable", ConfigType.BOOLEAN, "true",
              "Whether the controller moves leadership back to preferred replicas."),
    ConfigKey("default.replication.factor", ConfigType.INT, "1",
              "The replication factor of a topic created without one."),
    ConfigKey("leader.imbalance.check.interval.seconds", ConfigType.LONG, "300",
              "How often the controller checks for imbalanced leaders.", at_least=1),
    ConfigKey("leader.imbalance.per.broker.percentage", ConfigType.INT, "10",
              "The share of a broker's preferred partitions it may not lead before a "
              "rebalance."),
    ConfigKey("log.cleanup.policy", ConfigType.LIST, "delete",
              "The default cleanup policy of topics.", valid_values=("compact", "delete")),
    ConfigKey("log.retention.bytes", ConfigType.LONG, "-1",
              "The default retention.bytes of topics."),
    ConfigKey("log.retention.ms", ConfigType.LONG, _RETENTION_MS,
              "The default retention.ms of topics.", at_least=-1),
    ConfigKey("log.segment.bytes", ConfigType.INT, "1073741824",
              "The default segment.bytes of topics.", at_least=_SEGMENT_BYTES_MIN),
    ConfigKey("message.max.bytes", ConfigType.INT, _MAX_MESSAGE_BYTES,
              "The default max.message.bytes of topics.", at_least=0),
    ConfigKey("min.insync.replicas", ConfigType.INT, "1",
              "The default min.insync.replicas of topics.", at_least=1),
    ConfigKey("num.partitions", ConfigType.INT, "1",
              "The partition count of a topic created without one.", at_least=1),
    ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, "false",
              "The default unclean.leader.election.enable of topics."),
)


def _schema(resource_type: int) -> Mapping[str, ConfigKey]:
    return TOPIC_CONFIGS if resource_type == ConfigResourceType.TOPIC else BROKER_CONFIGS


# ---- values ----

def _invalid_value(key: str, value: str, reason: str) -> ControllerApiError:
    """Kafka's ConfigException(name, value, message) wording."""
    return ControllerApiError(Errors.INVALID_CONFIG,
                              f"Invalid value {value} for configuration {key}: {reason}")


def _list_parts(value: str) -> list[str]:
    trimmed = value.strip()
    return _LIST_SEPARATOR.split(trimmed) if trimmed else []


def validate_value(key: ConfigKey, value: str) -> ControllerApiError | None:
    """Kafka's ConfigDef.parseType then the key's validator."""
    trimmed = value.strip()
    if key.type in (ConfigType.INT, ConfigType.LONG):
        low, high = _INT_RANGE if key.type is ConfigType.INT else _LONG_RANGE
        if _INTEGER.fullmatch(trimmed) is None or not low <= int(trimmed) <= high:
            return _invalid_value(key.name, value, f"Not a number of type {key.type.name}")
        if key.at_least is not None and int(trimmed) < key.at_least:
            # ConfigDef's validator sees the parsed number, so "+07" reads back as 7.
            return _invalid_value(key.name, str(int(trimmed)),
                                  f"Value must be at least {key.at_least}")
    elif key.type is ConfigType.BOOLEAN:
        if trimmed.lower() not in ("true", "false"):
            return _invalid_value(key.name, value, "Expected value to be either true or false")
    elif key.type is ConfigType.LIST and key.valid_values is not None:
        for part in _list_parts(value):
            if part not in key.valid_values:
                return _invalid_value(key.name, part, "String must be one of: "
                                      + ", ".join(key.valid_values))
    return None


def _validate_configs(
    resource_type: int, configs: Mapping[str, str]
) -> ControllerApiError | None:
    schema = _schema(resource_type)
    kind = "topic" if resource_type == ConfigResourceType.TOPIC else "broker"
    for name in configs:  # LogConfig.validateNames runs before any value is parsed
        if name not in schema:
            return ControllerApiError(Errors.INVALID_CONFIG,
                                      f"Unknown {kind} config name: {name}")
    for name, value in configs.items():
        error = validate_value(schema[name], value)
        if error is not None:
            return error
    return None


def validate_topic_configs(configs: Mapping[str, str]) -> ControllerApiError | None:
    """Every key known, every value of its type and range (LogConfig.validate)."""
    return _validate_configs(ConfigResourceType.TOPIC, configs)


# ---- resources ----

def _validate_resource(resource_type: int, name: str) -> None:
    """ControllerConfigurationValidator.validate(resource)."""
    if resource_type == ConfigResourceType.TOPIC:
        if not name:
            raise ControllerApiError(Errors.INVALID_REQUEST,
                                     "Default topic resources are not allowed.")
        error = topic_name_error(name)
        if error is not None:
            raise ControllerApiError(Errors.INVALID_TOPIC_EXCEPTION, error)
    elif resource_type == ConfigResourceType.BROKER:
        if name:
            if _INTEGER.fullmatch(name) is None or not _INT_RANGE[0] <= int(name) <= _INT_RANGE[1]:
                raise ControllerApiError(Errors.INVALID_REQUEST,
                                         "Unable to parse broker name as a base 10 number.")
            if int(name) < 0:
                raise ControllerApiError(Errors.INVALID_REQUEST, "Invalid negative broker ID.")
    else:
        type_name = (ConfigResourceType(resource_type).name
                     if resource_type in ConfigResourceType._value2member_map_ else resource_type)
        raise ControllerApiError(Errors.INVALID_REQUEST, f"Unknown resource type {type_name}")


def _check_topic_exists(image: MetadataImage, name: str) -> None:
    if image.topic(name) is None:
        raise ControllerApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"The topic '{name}' does not exist.")


# ---- DescribeConfigs ----

@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    config_type: ConfigType
    synonyms: tuple[ConfigSynonym, ...]
    documentation: str = ""
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    config_names: tuple[str, ...] = ()  # empty: all


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    resource_type: int
    resource_name: str
    error: ControllerApiError | None = None
    entries: tuple[ConfigEntry, ...] = ()


def _entry(name: str, key: ConfigKey | None, chain: list[ConfigSynonym]) -> ConfigEntry:
    if not chain:  # a stored key the schema does not know: shown as it is
        chain = [ConfigSynonym(name, None, ConfigSource.UNKNOWN)]
    first = chain[0]
    return ConfigEntry(name, first.value, first.source,
                       key.type if key is not None else ConfigType.UNKNOWN, tuple(chain),
                       key.doc if key is not None else "")


def _topic_entries(image: MetadataImage, topic: str) -> dict[str, ConfigEntry]:
    own = image.config(ConfigResource(ConfigResourceType.TOPIC, topic))
    cluster = image.config(CLUSTER_DEFAULT_BROKER)
    entries = {}
    for name in sorted(set(TOPIC_CONFIGS) | set(own)):
        key = TOPIC_CONFIGS.get(name)
        chain = []
        if name in own:
            chain.append(ConfigSynonym(name, own[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if key is not None:
            broker_name = key.synonym or name
            if broker_name in cluster:
                chain.append(ConfigSynonym(broker_name, cluster[broker_name],
                                           ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
            chain.append(ConfigSynonym(broker_name, key.default, ConfigSource.DEFAULT_CONFIG))
        entries[name] = _entry(name, key, chain)
    return entries


def _broker_entries(image: MetadataImage, broker: str) -> dict[str, ConfigEntry]:
    own = image.config(ConfigResource(ConfigResourceType.BROKER, broker)) if broker else {}
    cluster = image.config(CLUSTER_DEFAULT_BROKER)
    entries = {}
    for name in sorted(set(BROKER_CONFIGS) | set(own) | set(cluster)):
        key = BROKER_CONFIGS.get(name)
        chain = []
        if name in own:
            chain.append(ConfigSynonym(name, own[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in cluster:
            chain.append(ConfigSynonym(name, cluster[name],
                                       ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if key is not None:
            chain.append(ConfigSynonym(name, key.default, ConfigSource.DEFAULT_CONFIG))
        entries[name] = _entry(name, key, chain)
    return entries


def _describe_one(image: MetadataImage, resource: DescribeConfigsResource) -> DescribeConfigsResult:
    _validate_resource(resource.resource_type, resource.resource_name)
    if resource.resource_type == ConfigResourceType.TOPIC:
        _check_topic_exists(image, resource.resource_name)
        entries = _topic_entries(image, resource.resource_name)
    else:
        entries = _broker_entries(image, resource.resource_name)
    if resource.config_names:  # Kafka answers only the names it found
        entries = {n: entries[n] for n in dict.fromkeys(resource.config_names) if n in entries}
    return DescribeConfigsResult(resource.resource_type, resource.resource_name, None,
                                 tuple(entries.values()))


def describe_configs(
    image: MetadataImage, resources: Sequence[DescribeConfigsResource]
) -> list[DescribeConfigsResult]:
    """DescribeConfigs: every entry of each resource with its source and synonyms."""
    results = []
    for resource in resources:
        try:
            results.append(_describe_one(image, resource))
        except ControllerApiError as error:
            results.append(DescribeConfigsResult(resource.resource_type,
                                                 resource.resource_name, error))
    return results


def non_default_topic_configs(image: MetadataImage, topic: str) -> list[ConfigEntry]:
    """The entries kafka-topics --describe prints after `Configs:`."""
    return [e for e in _topic_entries(image, topic).values() if not e.is_default]


def cluster_default_int(image: MetadataImage, key: str) -> int:
    """A BROKER config as the controller uses it: the cluster default, else Kafka's."""
    value = image.config(CLUSTER_DEFAULT_BROKER).get(key)
    try:
        return int(value) if value is not None else int(BROKER_CONFIGS[key].default or 0)
    except ValueError:  # written before validation existed: fall back to Kafka's default
        return int(BROKER_CONFIGS[key].default or 0)


# ---- IncrementalAlterConfigs ----

@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    op: int  # AlterConfigOp
    value: str | None = None


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource_type: int
    resource_name: str
    error: ControllerApiError | None = None


def incremental_alter_configs(
    image: MetadataImage,
    resources: Sequence[AlterConfigsResource],
    *,
    validate_only: bool = False,
    controller_ids: frozenset[int] = frozenset(),
) -> ControllerResult[list[AlterConfigsResult]]:
    """Kafka's incrementalAlterConfigs (ConfigAdminManager.preprocess, the controller's
    validator, ConfigurationControlManager): one result per resource in request order, the
    records of every accepted resource in one atomic batch (none if validate_only)."""
    counts: dict[tuple[int, str], int] = {}
    for resource in resources:
        ident = (resource.resource_type, resource.resource_name)
        counts[ident] = counts.get(ident, 0) + 1
    records: list[Record] = []
    results = []
    for resource in resources:
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise ControllerApiError(Errors.INVALID_REQUEST,
                                         "Each resource must appear at most once.")
            records.extend(_alter_one(image, resource, controller_ids))
            results.append(AlterConfigsResult(resource.resource_type, resource.resource_name))
        except ControllerApiError as error:
            results.append(AlterConfigsResult(resource.resource_type, resource.resource_name,
                                              error))
    check_user_op_size(records)
    return ControllerResult(tuple(() if validate_only else records), results)


def _alter_one(
    image: MetadataImage, resource: AlterConfigsResource, controller_ids: frozenset[int]
) -> list[Record]:
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise ControllerApiError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
    missing = [c.name for c in resource.configs
               if c.op != AlterConfigOp.DELETE and c.value is None]
    if missing:
        raise ControllerApiError(Errors.INVALID_REQUEST,
                                 "Null value not supported for : " + ", ".join(missing))
    rtype, rname = resource.resource_type, resource.resource_name
    if rtype not in (ConfigResourceType.TOPIC, ConfigResourceType.BROKER):
        _validate_resource(rtype, rname)  # raises: unknown resource type
    current = image.config(ConfigResource(rtype, rname))
    updated = dict(current)
    records: list[Record] = []
    for change in resource.configs:
        old = current.get(change.name)
        new = _apply_op(rtype, change, old)
        if new is None:
            updated.pop(change.name, None)
        else:
            updated[change.name] = new
        # Kafka writes broker records even when unchanged, so brokers reload (KAFKA-14136).
        if new != old or rtype == ConfigResourceType.BROKER:
            records.append(ConfigRecord(rtype, rname, change.name, new))
    _validate_resource(rtype, rname)
    # As Kafka: the whole resulting config is validated, then the resource must exist.
    error = _validate_configs(rtype, updated)
    if error is not None:
        raise error
    if rtype == ConfigResourceType.TOPIC:
        _check_topic_exists(image, rname)
    elif rname and int(rname) not in image.cluster.brokers and int(rname) not in controller_ids:
        raise ControllerApiError(Errors.BROKER_ID_NOT_REGISTERED,
                                 f"No node with id {int(rname)} found.")
    return records


def _apply_op(resource_type: int, change: AlterableConfig, old: str | None) -> str | None:
    if change.op == AlterConfigOp.SET:
        return change.value
    if change.op == AlterConfigOp.DELETE:
        return None
    if change.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
        key = _schema(resource_type).get(change.name)
        op_name = AlterConfigOp(change.op).name
        if key is None or key.type is not ConfigType.LIST:
            raise ControllerApiError(Errors.INVALID_CONFIG, f"Can't {op_name} to key "
                                     f"{change.name} because its type is not LIST.")
        parts = [p for p in (old if old is not None else key.default or "").split(",") if p]
        for value in (change.value or "").split(","):
            if change.op == AlterConfigOp.APPEND and value not in parts:
                parts.append(value)
            elif change.op == AlterConfigOp.SUBTRACT and value in parts:
                parts.remove(value)
        return ",".join(parts)
    raise ControllerApiError(Errors.INVALID_REQUEST, f"Unknown config operation {change.op}")


# ---- CreateTopics with every config checked ----

def create_topics_checked(
    image: MetadataImage,
    topics: Sequence[CreatableTopic],
    *,
    validate_only: bool = False,
    **kwargs: object,
) -> ControllerResult[list[CreatableTopicResult]]:
    """topics.create_topics, with each topic's configs validated against the full schema
    (create_topics itself checks only the keys the controller reads). A topic that passes
    Kafka's earlier checks (name, existence, collision) but has a bad config gets
    INVALID_CONFIG, at the point where Kafka checks configs; the others go to the rule.
    Defaults come from the cluster's num.partitions and default.replication.factor."""
    counts: dict[str, int] = {}
    for topic in topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    refused: dict[str, CreatableTopicResult] = {}
    for topic in topics:
        if (counts[topic.name] > 1 or topic.name == CLUSTER_METADATA_TOPIC
                or topic_name_error(topic.name) is not None
                or image.topic(topic.name) is not None
                or colliding_topic(image, topic.name, {}) is not None
                or any(value is None for _, value in topic.configs)):
            continue  # the rule answers these with Kafka's error
        error = validate_topic_configs({k: v for k, v in topic.configs if v is not None})
        if error is not None:
            refused[topic.name] = CreatableTopicResult(topic.name, error)
    accepted = [t for t in topics if t.name not in refused]
    kwargs.setdefault("default_num_partitions", cluster_default_int(image, "num.partitions"))
    kwargs.setdefault("default_replication_factor",
                      cluster_default_int(image, "default.replication.factor"))
    result = create_topics(image, accepted, validate_only=validate_only, **kwargs)  # type: ignore[arg-type]
    by_name = {r.name: r for r in result.response} | refused
    ordered = [by_name[name] for name in dict.fromkeys(t.name for t in topics)]
    return ControllerResult(result.records, ordered, result.atomic)


# ---- features ----

METADATA_VERSION = "metadata.version"
# 7 (3.3-IV3) is the first level with every record this controller writes; 21 (3.9-IV0) is the
# last before ELR (4.0-IV1), which is not modelled. The rules behave as at the latest level.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = MappingProxyType({METADATA_VERSION: (7, 21)})

_METADATA_VERSIONS = (
    "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0",
    "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV1",
    "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.0-IV2",
    "4.0-IV3",
)


def feature_level_name(feature: str, level: int) -> str:
    """Kafka's FeatureCommand.levelToString: metadata.version levels by release name."""
    if feature != METADATA_VERSION:
        return str(level)
    if 1 <= level <= len(_METADATA_VERSIONS):
        return _METADATA_VERSIONS[level - 1]
    return f"UNKNOWN {level}"


@dataclass(frozen=True, slots=True)
class FeaturesDescription:
    supported: Mapping[str, tuple[int, int]]
    finalized: Mapping[str, int]
    epoch: int  # the metadata offset the finalized levels come from, -1 if none


def describe_features(image: MetadataImage) -> FeaturesDescription:
    return FeaturesDescription(SUPPORTED_FEATURES, dict(sorted(image.features.items())),
                               image.provenance.offset)
