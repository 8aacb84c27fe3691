"""ListOffsets (API 2, v0-7) and OffsetForLeaderEpoch (API 23, v2-4). v0 is the pre-KIP-79
form lag monitors still send (Burrow through sarama): up to max_num_offsets offsets before a
timestamp, by segment (broker/replica/legacy_offsets.py), with no duplicate-partition check.

Authorization: each topic needs DESCRIBE (OffsetForLeaderEpoch: or CLUSTER_ACTION on the
cluster, as Kafka allows brokers), else TOPIC_AUTHORIZATION_FAILED on its partitions. A request
naming a replica (replica_id >= 0: the answer is then the leader's log end, not its high
watermark) needs CLUSTER_ACTION; without it every partition is refused, so no client learns
what a follower would fetch to pose as one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
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
    LegacyOffsetsPartition,
    LegacyOffsetsResult,
    ListOffsetsPartition,
    ListOffsetsResult,
)
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation

# The first ListOffsets version that knows each special timestamp (KIP-734, KIP-405).
_TIMESTAMP_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9}


def _describable(auth: RequestAuthorization, replica_id: int, topics: Iterable[str],
                 cluster_suffices: bool) -> dict[str, bool]:
    """Topic -> may the caller have its offsets."""
    names = dict.fromkeys(topics)
    if replica_id >= 0 or cluster_suffices:
        if auth.cluster(AclOperation.CLUSTER_ACTION, log_if_denied=replica_id >= 0):
            return dict.fromkeys(names, True)
        if replica_id >= 0:
            return dict.fromkeys(names, False)
    return {name: auth.topic(AclOperation.DESCRIBE, name) for name in names}


def handle_list_offsets(data_plane: DataPlane, version: int, request: Any,
                        auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    allowed = _describable(auth, request.replica_id, (t.name for t in request.topics),
                           cluster_suffices=False)
    if version == 0:
        return _list_offsets_v0(data_plane, request, allowed)
    asked = [
        (topic.name, p.partition_index, p.timestamp,
         getattr(p, "current_leader_epoch", NO_EPOCH))
        for topic in request.topics for p in topic.partitions
    ]
    counts = Counter((topic, index) for topic, index, _, _ in asked)
    results: list[ListOffsetsResult | None] = []
    valid: list[ListOffsetsPartition] = []
    for topic, index, timestamp, epoch in asked:
        if not allowed[topic]:
            results.append(ListOffsetsResult(error=Errors.TOPIC_AUTHORIZATION_FAILED))
        elif counts[(topic, index)] > 1:
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


def _list_offsets_v0(data_plane: DataPlane, request: Any, allowed: dict[str, bool]) -> Reply:
    asked = [LegacyOffsetsPartition(topic.name, p.partition_index, p.timestamp,
                                    p.max_num_offsets)
             for topic in request.topics for p in topic.partitions]
    valid = [p for p in asked if allowed[p.topic]]
    answered = iter(data_plane.legacy_offsets(request.replica_id, valid) if valid else [])
    module = response_module(ApiKey.LIST_OFFSETS, 0)
    by_topic: dict[str, list[Any]] = {}
    for p in asked:
        result = next(answered) if allowed[p.topic] \
            else LegacyOffsetsResult(Errors.TOPIC_AUTHORIZATION_FAILED)
        by_topic.setdefault(p.topic, []).append(build(
            module, "ListOffsetsPartitionResponse", partition_index=p.partition,
            error_code=error_code(result.error), old_style_offsets=result.offsets))
    return Reply(build(module, "ListOffsetsResponse", topics=tuple(
        build(module, "ListOffsetsTopicResponse", name=name, partitions=tuple(parts))
        for name, parts in by_topic.items())))


def handle_offset_for_leader_epoch(data_plane: DataPlane, version: int, request: Any,
                                   auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    # v2 has no replica_id: only consumers sent it then.
    replica_id = getattr(request, "replica_id", CONSUMER_REPLICA_ID)
    replica_id = replica_id if replica_id >= 0 else CONSUMER_REPLICA_ID
    allowed = _describable(auth, replica_id, (t.topic for t in request.topics),
                           cluster_suffices=True)
    partitions = [
        EpochEndPartition(topic.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
        for topic in request.topics for p in topic.partitions
    ]
    asked = [p for p in partitions if allowed[p.topic]]
    answered = iter(data_plane.end_offsets_for_epochs(replica_id, asked) if asked else [])
    results: list[EpochEndResult] = [
        next(answered) if allowed[p.topic]
        else EpochEndResult(error=Errors.TOPIC_AUTHORIZATION_FAILED) for p in partitions]
    module = response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    by_topic: dict[str, list[Any]] = {}
    for partition, result in zip(partitions, results, strict=True):
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
