"""Dynamic configs as pure rules: DescribeConfigs, IncrementalAlterConfigs and
DescribeFeatures (spec §1 ConfigRecord / FeatureLevelRecord).

Configs live in the image as ConfigRecords per resource: TOPIC <name>, BROKER <id> and the
cluster-wide default BROKER "". The keys are declared in metadata/config_keys.py. A topic key
resolves topic value -> cluster default of its broker synonym -> Kafka's default; a broker key
resolves broker value -> cluster default -> Kafka's default. Values are checked as Kafka's
ConfigDef does (type, range, valid list) with its messages. Departures from Kafka: broker keys
must be known (Kafka lets custom broker properties through), and `num.partitions` /
`default.replication.factor` are dynamic here because the controller reads them for
CreateTopics defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Any

from kraft.errors import Errors
from metadata.config_def import ConfigKey, ConfigType, java_integer
from metadata.config_keys import BROKER_CONFIGS, TOPIC_CONFIGS, schema, validate_configs
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.image import CLUSTER_DEFAULT_BROKER, ConfigResource, MetadataImage
from metadata.records import ConfigRecord, ConfigResourceType, Record
from metadata.topics import topic_name_error


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterConfigOp(IntEnum):
    """Kafka's AlterConfigOp.OpType ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


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
            if java_integer(name) is None:
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


def _entry(name: str, key: ConfigKey[Any] | None, chain: list[ConfigSynonym]) -> ConfigEntry:
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
    error = validate_configs(rtype, updated)
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
        key = schema(resource_type).get(change.name)
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
