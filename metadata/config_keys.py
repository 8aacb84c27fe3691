"""The dynamic configs the controller stores, declared with metadata.config_def: broker
configs, per broker (BROKER <id>) or cluster-wide (BROKER ""), and topic configs (Kafka's
LogConfig), each of which falls back to its broker-level synonym. Values are checked as
Kafka's ConfigDef checks them, with its messages, which go back to the client as they are.
The node's own config file (server/config.py) does not set these keys: a value there is a
warning that says how to set it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kraft.errors import Errors
from metadata.config_def import ConfigDef, ConfigKey, ConfigType, InvalidValue, java_integer
from metadata.errors import ControllerApiError
from metadata.records import ConfigResourceType

# Kafka's defaults (LogConfig, ServerLogConfigs, ReplicationConfigs at the spec's snapshot).
_SEGMENT_BYTES_MIN = 14  # LegacyRecord.RECORD_OVERHEAD_V0
_RETENTION_MS = "604800000"  # 7 days (Kafka derives log.retention.ms from log.retention.hours)
_MAX_MESSAGE_BYTES = "1048588"  # 1 MiB + Records.LOG_OVERHEAD
_CLEANUP_POLICIES = ("compact", "delete")
_LONG_MAX = str(2**63 - 1)  # Kafka's "never" for the flush policy
_WEEK_MS = "604800000"  # log.roll.hours 168
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# Kafka's BrokerCompressionType names, in its order (the message lists them so).
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _timestamp_type(value: str) -> str:
    """Kafka's ValidString.in(CreateTime, LogAppendTime)."""
    if value.strip() not in _TIMESTAMP_TYPES:
        raise InvalidValue("String must be one of: " + ", ".join(_TIMESTAMP_TYPES))
    return value.strip()


def _compression_type(value: str) -> str:
    """Kafka's ValidString.in(BrokerCompressionType.names())."""
    if value.strip() not in _COMPRESSION_TYPES:
        raise InvalidValue("String must be one of: " + ", ".join(_COMPRESSION_TYPES))
    return value.strip()


def _int(value: str) -> int:
    number = java_integer(value.strip())
    if number is None:
        raise InvalidValue("Not a number of type INT")
    return number


def _gzip_level(value: str) -> int:
    """Kafka's GzipCompression.LevelValidator: 1..9, or -1 (Deflater's default)."""
    level = _int(value)
    if level > 9 or (level < 1 and level != -1):
        raise InvalidValue("Value must be between 1 and 9 or equal to -1", str(level))
    return level


def _level_between(low: int, high: int) -> Callable[[str], int]:
    """Kafka's Range.between(low, high) over an INT."""

    def parse(value: str) -> int:
        level = _int(value)
        if level < low:
            raise InvalidValue(f"Value must be at least {low}", str(level))
        if level > high:
            raise InvalidValue(f"Value must be no more than {high}", str(level))
        return level

    return parse


def _ratio(value: str) -> float:
    """Kafka's DOUBLE with Range.between(0, 1) (min.cleanable.dirty.ratio)."""
    try:
        ratio = float(value.strip())
    except ValueError:
        raise InvalidValue("Not a number of type DOUBLE") from None
    if not 0 <= ratio <= 1:
        raise InvalidValue("Value must be no more than 1" if ratio > 1
                           else "Value must be at least 0")
    return ratio


BROKER_CONFIGS = ConfigDef()
_broker = BROKER_CONFIGS.define_kafka
_broker("auto.leader.rebalance.enable", ConfigType.BOOLEAN, "true",
        "Whether the controller moves leadership back to preferred replicas.")
# KIP-390's levels, used when the leader recompresses to compression.type (lz4 9: its fast
# compressor; zstd's range is ZSTD_minCLevel..ZSTD_maxCLevel).
BROKER_CONFIGS.define("compression.gzip.level", ConfigType.INT, "-1", _gzip_level,
                      "The gzip level a leader recompresses to gzip with.",
                      valid_values="[1,...,9] or -1")
BROKER_CONFIGS.define("compression.lz4.level", ConfigType.INT, "9", _level_between(1, 17),
                      "The lz4 level a leader recompresses to lz4 with.",
                      valid_values="[1,...,17]")
BROKER_CONFIGS.define("compression.type", ConfigType.STRING, "producer", _compression_type,
                      "The codec a leader stores batches in; producer keeps the producer's.",
                      valid_values=", ".join(_COMPRESSION_TYPES))
BROKER_CONFIGS.define("compression.zstd.level", ConfigType.INT, "3",
                      _level_between(-131072, 22),
                      "The zstd level a leader recompresses to zstd with.",
                      valid_values="[-131072,...,22]")
_broker("default.replication.factor", ConfigType.INT, "1",
        "The replication factor of a topic created without one.")
_broker("leader.imbalance.check.interval.seconds", ConfigType.LONG, "300",
        "How often the controller checks for imbalanced leaders.", at_least=1)
_broker("leader.imbalance.per.broker.percentage", ConfigType.INT, "10",
        "The share of a broker's preferred partitions it may not lead before a rebalance.")
_broker("log.cleanup.policy", ConfigType.LIST, "delete",
        "The default cleanup policy of topics.", valid_list=_CLEANUP_POLICIES)
_broker("log.cleaner.delete.retention.ms", ConfigType.LONG, "86400000",
        "The default delete.retention.ms of topics.", at_least=0)
_broker("log.cleaner.max.compaction.lag.ms", ConfigType.LONG, _LONG_MAX,
        "The default max.compaction.lag.ms of topics.", at_least=1)
BROKER_CONFIGS.define("log.cleaner.min.cleanable.ratio", ConfigType.DOUBLE, "0.5",
                      _ratio, "The default min.cleanable.dirty.ratio of topics.",
                      valid_values="[0,...,1]")
_broker("log.cleaner.min.compaction.lag.ms", ConfigType.LONG, "0",
        "The default min.compaction.lag.ms of topics.", at_least=0)
_broker("log.flush.interval.messages", ConfigType.LONG, _LONG_MAX,
        "The default flush.messages of topics.", at_least=1)
_broker("log.flush.interval.ms", ConfigType.LONG, _LONG_MAX,
        "The default flush.ms of topics.", at_least=0)
BROKER_CONFIGS.define("log.message.timestamp.type", ConfigType.STRING, "CreateTime",
                      _timestamp_type, "The default message.timestamp.type of topics.",
                      valid_values=", ".join(_TIMESTAMP_TYPES))
_broker("log.retention.bytes", ConfigType.LONG, "-1", "The default retention.bytes of topics.")
_broker("log.retention.ms", ConfigType.LONG, _RETENTION_MS,
        "The default retention.ms of topics.", at_least=-1)
_broker("log.roll.ms", ConfigType.LONG, _WEEK_MS,
        "The default segment.ms of topics.", at_least=1)
_broker("log.segment.bytes", ConfigType.INT, "1073741824",
        "The default segment.bytes of topics.", at_least=_SEGMENT_BYTES_MIN)
_broker("message.max.bytes", ConfigType.INT, _MAX_MESSAGE_BYTES,
        "The default max.message.bytes of topics.", at_least=0)
_broker("min.insync.replicas", ConfigType.INT, "1",
        "The default min.insync.replicas of topics.", at_least=1)
_broker("num.partitions", ConfigType.INT, "1",
        "The partition count of a topic created without one.", at_least=1)
_broker("unclean.leader.election.enable", ConfigType.BOOLEAN, "false",
        "The default unclean.leader.election.enable of topics.")

# Topic configs (Kafka's LogConfig): each is its broker-level synonym's type, default and
# validator under a topic's name, and a topic without a value falls back to the synonym.
TOPIC_CONFIGS = ConfigDef()


def _topic(name: str, synonym: str, doc: str) -> None:
    broker = BROKER_CONFIGS[synonym]
    TOPIC_CONFIGS.define(name, broker.type, broker.default, broker.parse, doc,
                         valid_values=broker.valid_values, synonym=synonym)


_topic("cleanup.policy", "log.cleanup.policy",
       "The retention policy of old log segments: delete, compact or both.")
_topic("compression.gzip.level", "compression.gzip.level",
       "The gzip level used when the leader recompresses to gzip.")
_topic("compression.lz4.level", "compression.lz4.level",
       "The lz4 level used when the leader recompresses to lz4.")
_topic("compression.type", "compression.type",
       "uncompressed, gzip, snappy, lz4 or zstd: the codec batches are stored in (the leader "
       "recompresses others); producer keeps each batch's own.")
_topic("compression.zstd.level", "compression.zstd.level",
       "The zstd level used when the leader recompresses to zstd.")
_topic("delete.retention.ms", "log.cleaner.delete.retention.ms",
       "How long tombstones of a compacted topic are kept after the cleaner first sees them.")
_topic("flush.messages", "log.flush.interval.messages",
       "The number of records after which a partition's log is fsynced.")
_topic("flush.ms", "log.flush.interval.ms",
       "The time after which a partition's unflushed records are fsynced.")
_topic("max.message.bytes", "message.max.bytes", "The largest record batch size allowed.")
_topic("message.timestamp.type", "log.message.timestamp.type",
       "CreateTime (the producer's timestamps) or LogAppendTime (the leader's clock).")
_topic("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
       "The longest a record may stay uncompacted (cleaned whatever the dirty ratio).")
_topic("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio",
       "The share of dirty bytes in a log above which the cleaner compacts it.")
_topic("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms",
       "The shortest time a record stays uncompacted.")
_topic("min.insync.replicas", "min.insync.replicas",
       "The ISR size below which acks=all producers are refused.")
_topic("retention.bytes", "log.retention.bytes",
       "The size a partition may grow to before old segments are discarded.")
_topic("retention.ms", "log.retention.ms",
       "How long a log segment is kept before it is discarded; -1 for no limit.")
_topic("segment.bytes", "log.segment.bytes", "The segment file size of the log.")
_topic("segment.ms", "log.roll.ms",
       "The time after which a segment is rolled even if it is not full.")
_topic("unclean.leader.election.enable", "unclean.leader.election.enable",
       "Whether a replica outside the ISR may become leader as a last resort.")


def schema(resource_type: int) -> ConfigDef:
    return TOPIC_CONFIGS if resource_type == ConfigResourceType.TOPIC else BROKER_CONFIGS


# ---- values ----

def validate_value(key: ConfigKey[Any], value: str) -> ControllerApiError | None:
    """Kafka's ConfigDef.parseType then the key's validator, as a ConfigException would say."""
    try:
        key.parse(value)
    except InvalidValue as error:
        shown = value if error.shown is None else error.shown
        return ControllerApiError(Errors.INVALID_CONFIG,
                                  f"Invalid value {shown} for configuration {key.name}: {error}")
    return None


def validate_configs(
    resource_type: int, configs: Mapping[str, str]
) -> ControllerApiError | None:
    """Every key known (LogConfig.validateNames, before any value is parsed), then every value
    of its type and range, as Kafka checks a resource's whole resulting config."""
    keys = schema(resource_type)
    kind = "topic" if resource_type == ConfigResourceType.TOPIC else "broker"
    for name in configs:
        if name not in keys:
            return ControllerApiError(Errors.INVALID_CONFIG,
                                      f"Unknown {kind} config name: {name}")
    for name, value in configs.items():
        error = validate_value(keys[name], value)
        if error is not None:
            return error
    if resource_type == ConfigResourceType.TOPIC:
        return _compaction_lags(configs)
    return None


def _compaction_lags(configs: Mapping[str, str]) -> ControllerApiError | None:
    """Kafka's LogConfig.validateValues: min.compaction.lag.ms may not exceed
    max.compaction.lag.ms (a key not set counts as its default)."""
    lags = []
    for name in ("min.compaction.lag.ms", "max.compaction.lag.ms"):
        key = TOPIC_CONFIGS[name]
        lags.append(int(key.parse(configs.get(name, key.default or "0"))))
    if lags[0] > lags[1]:
        return ControllerApiError(
            Errors.INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms "
            f"({lags[0]}) > max.compaction.lag.ms ({lags[1]})")
    return None


def validate_topic_configs(configs: Mapping[str, str]) -> ControllerApiError | None:
    """Every key known, every value of its type and range (LogConfig.validate)."""
    return validate_configs(ConfigResourceType.TOPIC, configs)
