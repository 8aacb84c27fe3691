"""A partition log's settings, with Kafka's topic config names and defaults (LogConfig)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata.image import MetadataImage

NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: "no limit" for the flush policy
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


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
        )
