"""Produce (API 0, v3-10): the checks Kafka makes before the log (ProduceRequest.validateRecords:
one magic-2 batch per partition, zstd only from v7, acks in {-1, 0, 1}), then the data plane.

The data plane is called before this handler's first await: it appends synchronously, and
the connection starts handlers in arrival order, so pipelined batches keep their order.

Each topic needs WRITE (Kafka: TOPIC_AUTHORIZATION_FAILED on its partitions, checked before
anything about the topic or its records). A request carrying transactional batches needs a
transactional id and WRITE on it, else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
as Kafka answers it even without an authorizer."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Sequence
from typing import Any

from broker.api import DataPlane, ProducePartition, ProducePartitionResult
from broker.kafka.authorization import (
    ALLOW_ALL,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.metadata_api import INTERNAL_TOPICS, node_endpoints
from broker.kafka.reply import NO_THROTTLE, Reply, millis
from broker.kafka.request_metrics import TopicStats
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.image import MetadataImage

BATCH_HEADER_SIZE = 61  # magic v2 (DefaultRecordBatch.RECORD_BATCH_OVERHEAD)
_LENGTH_AND_EPOCH = struct.Struct(">iib")  # batchLength, partitionLeaderEpoch, magic at 8
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
TRANSACTIONAL_BIT = 0x10
ZSTD = 4
ZSTD_MIN_VERSION = 7
VALID_ACKS = (-1, 0, 1)
_LEADER_ERRORS = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH)
# A partition's answer once its batch is in the leader's log (acks=all may still time out or
# lose the ISR): what Kafka's BytesInPerSec counts.
_APPENDED = (Errors.NONE, Errors.REQUEST_TIMED_OUT, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def check_batch(records: bytes | None, version: int) -> Errors:
    """NONE, or the error Kafka gives a partition's records before reaching the log."""
    if not records:
        return Errors.INVALID_RECORD  # v3+ must carry exactly one batch
    if len(records) < BATCH_HEADER_SIZE:
        return Errors.CORRUPT_MESSAGE
    batch_length, _, magic = _LENGTH_AND_EPOCH.unpack_from(records, 8)
    if magic != 2:
        return Errors.INVALID_RECORD
    if batch_length + 12 < len(records):
        return Errors.INVALID_RECORD  # more than one batch
    if batch_length + 12 > len(records):
        return Errors.CORRUPT_MESSAGE  # a batch cut short
    codec = _ATTRIBUTES.unpack_from(records, 21)[0] & 0x7
    if codec == ZSTD and version < ZSTD_MIN_VERSION:
        return Errors.UNSUPPORTED_COMPRESSION_TYPE
    return Errors.NONE


async def handle_produce(
    data_plane: DataPlane, image: MetadataImage, listener: str, version: int, request: Any,
    auth: RequestAuthorization = ALLOW_ALL, stats: TopicStats | None = None,
) -> Reply:
    acks = request.acks
    transaction_refused = _transaction_refused(request, auth)
    writable = {topic.name: auth.topic(AclOperation.WRITE, topic.name)
                for topic in request.topic_data}
    entries = [
        (topic.name, partition.index, partition.records)
        for topic in request.topic_data
        for partition in topic.partition_data
    ]
    results: list[ProducePartitionResult | None] = []
    valid: list[ProducePartition] = []
    for topic, index, records in entries:
        if transaction_refused:
            error = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif acks not in VALID_ACKS:
            error = Errors.INVALID_REQUIRED_ACKS
        elif not writable[topic]:
            error = Errors.TOPIC_AUTHORIZATION_FAILED
        elif topic in INTERNAL_TOPICS:
            error = Errors.INVALID_TOPIC_EXCEPTION  # only the broker writes there (Kafka's rule)
        else:
            error = check_batch(records, version)
        if error == Errors.INVALID_TOPIC_EXCEPTION:
            results.append(ProducePartitionResult(
                error=error, error_message=f"Cannot append to internal topic {topic}"))
        elif error != Errors.NONE:
            results.append(ProducePartitionResult(error=error))
        else:
            results.append(None)
            valid.append(ProducePartition(topic, index, bytes(records)))
    if valid:
        # No await before this call: see the module docstring.
        done = await data_plane.produce(acks, millis(request.timeout), valid)
        if stats is not None:
            for sent, result in zip(valid, done, strict=True):
                if result.error in _APPENDED:
                    stats.produced(sent.topic, sent.records)
        appended = iter(done)
        results = [r if r is not None else next(appended) for r in results]
    final = [r if r is not None else ProducePartitionResult() for r in results]
    if acks == 0:
        # No response; a failed partition closes the connection so the client notices.
        return Reply(None, close=any(r.error != Errors.NONE for r in final))
    return Reply(_response(image, listener, version, entries, final))


def _transaction_refused(request: Any, auth: RequestAuthorization) -> bool:
    """Kafka's hasTransactionalRecords check: such batches need WRITE on the request's
    transactional id."""
    transactional = any(
        records is not None and len(records) >= BATCH_HEADER_SIZE
        and _ATTRIBUTES.unpack_from(records, 21)[0] & TRANSACTIONAL_BIT
        for topic in request.topic_data for partition in topic.partition_data
        for records in (partition.records,))
    if not transactional:
        return False
    transactional_id = request.transactional_id
    return transactional_id is None or not auth.allows(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _response(
    image: MetadataImage, listener: str, version: int,
    entries: Sequence[tuple[str, int, Any]], results: Sequence[ProducePartitionResult],
) -> Any:
    module = response_module(ApiKey.PRODUCE, version)
    by_topic: dict[str, list[Any]] = {}
    leaders: list[int] = []
    for (topic, index, _), result in zip(entries, results, strict=True):
        fields: dict[str, Any] = {}
        if version >= 10 and result.error in _LEADER_ERRORS:
            # KIP-951: name the leader this broker knows, so the client skips a Metadata round.
            leader = _leader_of(image, topic, index)
            if leader is not None:
                fields["current_leader"] = build(
                    module, "LeaderIdAndEpoch", leader_id=leader[0], leader_epoch=leader[1]
                )
                leaders.append(leader[0])
        by_topic.setdefault(topic, []).append(build(
            module, "PartitionProduceResponse", index=index, error_code=error_code(result.error),
            base_offset=result.base_offset, log_append_time=_timestamp(result.log_append_time_ms),
            log_start_offset=result.log_start_offset, record_errors=(),
            error_message=result.error_message, **fields,
        ))
    topics = tuple(
        build(module, "TopicProduceResponse", name=name, partition_responses=tuple(parts))
        for name, parts in by_topic.items()
    )
    return build(
        module, "ProduceResponse", responses=topics, throttle_time=NO_THROTTLE,
        node_endpoints=node_endpoints(module, image, leaders, listener),
    )


def _leader_of(image: MetadataImage, topic: str, index: int) -> tuple[int, int] | None:
    topic_image = image.topic(topic)
    partition = topic_image.partition(index) if topic_image is not None else None
    if partition is None or not partition.has_leader:
        return None
    return partition.leader, partition.leader_epoch


def _timestamp(millis_since_epoch: int) -> datetime.datetime | None:
    """kio's log_append_time (None is Kafka's -1: CreateTime)."""
    if millis_since_epoch < 0:
        return None
    return datetime.datetime.fromtimestamp(millis_since_epoch / 1000, tz=datetime.UTC)
