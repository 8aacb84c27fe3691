"""ListOffsets v0's answer for one partition, as Kafka 3.9 computed it (Partition.
legacyFetchOffsetsForTimestamp over UnifiedLog.legacyFetchOffsetsBefore).

v0 predates record timestamps: the log is a list of points, each segment's base offset (never
below the log start) with its file's last-modified time, then the log end offset "now" when the
active segment holds data. A timestamp picks the newest point modified at or before it (-1 the
last point, -2 the first) and the answer is up to `max_num_offsets` points from there back,
newest first. A consumer never sees past the high watermark: offsets above it are replaced by
the high watermark itself (for every negative replica id: Kafka leaves the debugging id -2
unclamped, but only a replica with CLUSTER_ACTION may learn what lies past the watermark here,
as in v1+). The debugging id may ask a follower. Lag monitors (Burrow through sarama) ask -1
with one offset."""

from __future__ import annotations

import os

from broker.api import (
    DEBUGGING_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LegacyOffsetsPartition,
    LegacyOffsetsResult,
)
from broker.log.partition_log import PartitionLog
from broker.replica.partition import Partition
from kraft.errors import Errors


def _last_modified_ms(path: str) -> int:
    try:
        return int(os.stat(path).st_mtime * 1000)
    except OSError:
        return 0  # Java's File.lastModified of a file that is gone


def offsets_before(log: PartitionLog, timestamp: int, max_num_offsets: int,
                   now_ms: int) -> list[int]:
    """Kafka's legacyFetchOffsetsBefore: newest first."""
    segments = log.segment_views()
    if not segments:
        return []
    points = [(max(view.base_offset, log.start_offset), _last_modified_ms(view.path))
              for view in segments]
    if segments[-1].size > 0:
        points.append((log.end_offset, now_ms))
    if timestamp == LATEST_TIMESTAMP:
        start = len(points) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > timestamp:
            start -= 1
    count = min(max_num_offsets, start + 1)
    return sorted((points[start - j][0] for j in range(count)), reverse=True)


def legacy_offsets(partition: Partition, replica_id: int, request: LegacyOffsetsPartition,
                   now_ms: int) -> LegacyOffsetsResult:
    """One partition of ListOffsets v0 on this broker's replica of it."""
    if replica_id != DEBUGGING_REPLICA_ID and not partition.is_leader:
        return LegacyOffsetsResult(Errors.NOT_LEADER_OR_FOLLOWER)
    if request.max_num_offsets < 0:
        # Kafka fails on the negative array size (UNKNOWN_SERVER_ERROR); say what is wrong.
        return LegacyOffsetsResult(Errors.INVALID_REQUEST)
    try:
        offsets = offsets_before(partition.log, request.timestamp, request.max_num_offsets,
                                 now_ms)
    except OSError:
        return LegacyOffsetsResult(Errors.KAFKA_STORAGE_ERROR)
    if replica_id < 0:  # Kafka clamps only -1; -2 and the rest are clients too (see offsets_api)
        high_watermark = partition.high_watermark
        if any(offset > high_watermark for offset in offsets):
            offsets = [high_watermark, *(o for o in offsets if o <= high_watermark)]
    return LegacyOffsetsResult(offsets=tuple(offsets))
