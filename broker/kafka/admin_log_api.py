"""DescribeLogDirs (API 35, v1-4) and DeleteRecords (API 21, v0-2): broker-local, as in Kafka.

DescribeLogDirs describes this broker's own log directories (clients ask each broker): every
partition log in each, its size and its offset lag (Kafka's max(HW - LEO, 0)), and from v4 the
disk's total and usable bytes. An offline directory carries KAFKA_STORAGE_ERROR and no
partitions. DeleteRecords is served by the partition leader through the data plane
(broker.api.DataPlane.delete_records).

Authorization (Kafka): DescribeLogDirs needs DESCRIBE on the cluster (else no directories, and
CLUSTER_AUTHORIZATION_FAILED from v3, which has the field); DeleteRecords DELETE on each topic
(TOPIC_AUTHORIZATION_FAILED on its partitions).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from broker.api import DataPlane, DeleteRecordsPartition, DeleteRecordsResult
from broker.kafka.admin_common import timeout_ms
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation

TopicPartition = tuple[str, int]
UNKNOWN_BYTES = -1


class PartitionLogView(Protocol):
    @property
    def directory(self) -> str: ...

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def end_offset(self) -> int: ...


class LogManagerView(Protocol):
    @property
    def log_dirs(self) -> list[str]: ...

    def logs(self) -> Mapping[TopicPartition, PartitionLogView]: ...


@dataclass(frozen=True, slots=True)
class LogDirs:
    """What DescribeLogDirs reads: the broker's log manager and its partitions' HWs."""

    manager: LogManagerView
    high_watermarks: Callable[[], Mapping[TopicPartition, int]]


def _wanted(request: Any) -> Callable[[TopicPartition], bool]:
    if request.topics is None:
        return lambda tp: True
    asked = {(t.topic, p) for t in request.topics for p in t.partitions}
    return lambda tp: tp in asked


def handle_describe_log_dirs(log_dirs: LogDirs, version: int, request: Any,
                             auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.DESCRIBE_LOG_DIRS, version)
    if not auth.cluster(AclOperation.DESCRIBE):
        return Reply(build(module, "DescribeLogDirsResponse", throttle_time=NO_THROTTLE,
                           error_code=error_code(Errors.CLUSTER_AUTHORIZATION_FAILED),
                           results=()))
    wanted = _wanted(request)
    hws = log_dirs.high_watermarks()
    # The log manager marks failed directories where it tracks them (path -> reason).
    offline: Mapping[str, str] = getattr(log_dirs.manager, "offline_dirs", {})
    by_dir: dict[str, dict[str, list[Any]]] = {d: {} for d in log_dirs.manager.log_dirs}
    for (topic, partition), log in sorted(log_dirs.manager.logs().items()):
        parent = os.path.dirname(log.directory)
        if parent not in by_dir or parent in offline or not wanted((topic, partition)):
            continue
        lag = max(hws.get((topic, partition), log.end_offset) - log.end_offset, 0)
        by_dir[parent].setdefault(topic, []).append(build(
            module, "DescribeLogDirsPartition", partition_index=partition,
            partition_size=log.size_in_bytes, offset_lag=lag, is_future_key=False))
    results = []
    for directory, topics in by_dir.items():
        total, usable = _disk(directory) if directory not in offline else (UNKNOWN_BYTES,) * 2
        results.append(build(
            module, "DescribeLogDirsResult",
            error_code=error_code(Errors.KAFKA_STORAGE_ERROR if directory in offline
                                  else Errors.NONE),
            log_dir=directory, total_bytes=total, usable_bytes=usable, topics=tuple(
                build(module, "DescribeLogDirsTopic", name=name, partitions=tuple(parts))
                for name, parts in topics.items())))
    return Reply(build(module, "DescribeLogDirsResponse", throttle_time=NO_THROTTLE,
                       error_code=error_code(Errors.NONE), results=tuple(results)))


def _disk(directory: str) -> tuple[int, int]:
    try:
        usage = shutil.disk_usage(directory)
    except OSError:
        return UNKNOWN_BYTES, UNKNOWN_BYTES
    return usage.total, usage.free


async def handle_delete_records(data_plane: DataPlane, version: int, request: Any,
                                auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    deletable = {t.name: auth.topic(AclOperation.DELETE, t.name) for t in request.topics}
    asked = [DeleteRecordsPartition(t.name, p.partition_index, p.offset)
             for t in request.topics for p in t.partitions]
    allowed = [p for p in asked if deletable[p.topic]]
    done = iter(await data_plane.delete_records(timeout_ms(request), allowed) if allowed else [])
    results = [next(done) if deletable[p.topic]
               else DeleteRecordsResult(error=Errors.TOPIC_AUTHORIZATION_FAILED) for p in asked]
    module = response_module(ApiKey.DELETE_RECORDS, version)
    by_topic: dict[str, list[Any]] = {}
    for partition, result in zip(asked, results, strict=True):
        by_topic.setdefault(partition.topic, []).append(build(
            module, "DeleteRecordsPartitionResult", partition_index=partition.partition,
            low_watermark=result.low_watermark, error_code=error_code(result.error)))
    return Reply(build(module, "DeleteRecordsResponse", throttle_time=NO_THROTTLE, topics=tuple(
        build(module, "DeleteRecordsTopicResult", name=name, partitions=tuple(parts))
        for name, parts in by_topic.items())))
