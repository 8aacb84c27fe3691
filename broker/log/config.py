"""A partition log's settings, with Kafka's topic config names and defaults (LogConfig)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata.image import MetadataImage

NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: "no limit" for the flush policy
PRODUCER = "producer"  # compression.type: keep each batch's own codec
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPACT = "compact"
DELETE = "delete"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Topic configs a partition log acts on; each field is the topic key with dots as
    underscores, and its default is Kafka's."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    max_message_bytes: int = 1048588
    flush_messages: int = NEVER
    flush_ms: int = NEVER
    message_timestamp_type: str = CREATE_TIME
    # Compaction (broker/log/cleaner.py): cleanup.policy as its list of policies.
    cleanup_policy: tuple[str, ...] = (DELETE,)
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = NEVER
    delete_retention_ms: int = 86400000
    # The codec batches are stored in (broker/log/validator.py): producer, uncompressed, gzip,
    # snappy, lz4 or zstd, and the levels a leader recompresses with.
    compression_type: str = PRODUCER
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3

    @property
    def compact(self) -> bool:
        """cleanup.policy holds compact: the cleaner keeps the latest record per key."""
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """cleanup.policy holds delete: retention deletes old segments."""
        return DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def for_topic(cls, image: MetadataImage, topic_name: str) -> LogConfig:
        """The topic's configs as the image resolves them: the topic's own value, else the
        cluster default of its broker synonym, else Kafka's default."""

        def setting(key: str) -> int:
            return int(image.topic_setting(topic_name, key))

        return cls(
            segment_bytes=setting("segment.bytes"),
            segment_ms=setting("segment.ms"),
            retention_ms=setting("retention.ms"),
            retention_bytes=setting("retention.bytes"),
            max_message_bytes=setting("max.message.bytes"),
            flush_messages=setting("flush.messages"),
            flush_ms=setting("flush.ms"),
            message_timestamp_type=str(image.topic_setting(topic_name, "message.timestamp.type")),
            cleanup_policy=tuple(image.topic_setting(topic_name, "cleanup.policy")),
            min_cleanable_dirty_ratio=float(
                image.topic_setting(topic_name, "min.cleanable.dirty.ratio")),
            min_compaction_lag_ms=setting("min.compaction.lag.ms"),
            max_compaction_lag_ms=setting("max.compaction.lag.ms"),
            delete_retention_ms=setting("delete.retention.ms"),
            compression_type=str(image.topic_setting(topic_name, "compression.type")),
            compression_gzip_level=setting("compression.gzip.level"),
            compression_lz4_level=setting("compression.lz4.level"),
            compression_zstd_level=setting("compression.zstd.level"),
        )
