"""A broker's partition logs: Kafka record batches in kraft.log's SegmentedLog (write-through),
leader epochs, producer state, retention, and the manager of every log under log.dirs."""

from broker.log.config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import (
    AppendError,
    LeaderAppend,
    OffsetOutOfRange,
    PartitionLog,
    PartitionMetadataError,
)

__all__ = [
    "AppendError",
    "LeaderAppend",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "PartitionMetadataError",
]
