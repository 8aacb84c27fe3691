"""ListOffsets (API 2, v1-7) and OffsetForLeaderEpoch (API 23, v2-4)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.api import (
    CONSUMER_REPLICA_ID,
    EARLIEST_LOCAL_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_EPOCH,
    DataPlane,
    EpochEndPartition,
    EpochEndResult,
    ListOffsetsPartition,
    ListOffsetsResult,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors

# The first ListOffsets version that knows each special timestamp (KIP-734, KIP-405).
_TIMESTAMP_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9}


def handle_list_offsets(data_plane: DataPlane, version: int, request: Any) -> Reply:
    asked = [
        (topic.name, p.partition_index, p.timestamp,
         getattr(p, "current_leader_epoch", NO_EPOCH))
        for topic in request.topics for p in topic.partitions
    ]
    counts = Counter((topic, index) for topic, index, _, _ in asked)
    results: list[ListOffsetsResult | None] = []
    valid: list[ListOffsetsPartition] = []
    for topic, index, timestamp, epoch in asked:
        if counts[(topic, index)] > 1:
            results.append(ListOffsetsResult(error=Errors.INVALID_REQUEST))  # Kafka's rule
        elif version < _TIMESTAMP_MIN_VERSION.get(timestamp, 0):
            results.append(ListOffsetsResult(error=Errors.UNSUPPORTED_VERSION))
        else:
            results.append(None)
            valid.append(ListOffsetsPartition(topic, index, timestamp, epoch))
    replica_id = request.replica_id if request.replica_id >= 0 else CONSUMER_REPLICA_ID
    isolation = getattr(request, "isolation_level", 0)
    answered = iter(data_plane.list_offsets(replica_id, isolation, valid) if valid else [])
    module = response_module(ApiKey.LIST_OFFSETS, version)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index, _, _), known in zip(asked, results, strict=True):
        result = known if known is not None else next(answered)
        by_topic.setdefault(topic, []).append(build(
            module, "ListOffsetsPartitionResponse", partition_index=index,
            error_code=error_code(result.error), timestamp=result.timestamp,
            offset=result.offset, leader_epoch=result.leader_epoch,
        ))
    topics = tuple(
        build(module, "ListOffsetsTopicResponse", name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return Reply(build(module, "ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=topics))


def handle_offset_for_leader_epoch(data_plane: DataPlane, version: int, request: Any) -> Reply:
    asked = [
        EpochEndPartition(topic.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
        for topic in request.topics for p in topic.partitions
    ]
    # v2 has no replica_id: only consumers sent it then.
    replica_id = getattr(request, "replica_id", CONSUMER_REPLICA_ID)
    replica_id = replica_id if replica_id >= 0 else CONSUMER_REPLICA_ID
    results: list[EpochEndResult] = (
        data_plane.end_offsets_for_epochs(replica_id, asked) if asked else []
    )
    module = response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    by_topic: dict[str, list[Any]] = {}
    for partition, result in zip(asked, results, strict=True):
        by_topic.setdefault(partition.topic, []).append(build(
            module, "EpochEndOffset", error_code=error_code(result.error),
            partition=partition.partition, leader_epoch=result.leader_epoch,
            end_offset=result.end_offset,
        ))
    topics = tuple(
        build(module, "OffsetForLeaderTopicResult", topic=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return Reply(build(
        module, "OffsetForLeaderEpochResponse", throttle_time=NO_THROTTLE, topics=topics
    ))
