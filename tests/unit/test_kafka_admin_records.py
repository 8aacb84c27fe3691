"""DeleteRecords on the partition leader (ReplicaManager.delete_records, Kafka's
deleteRecords + DelayedDeleteRecords) and DescribeLogDirs (broker/kafka/admin_log_api.py),
against real partition logs with followers pumped by hand (tests/unit/replica_harness.py)."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

from broker.api import DeleteRecordsPartition, DeleteRecordsResult
from broker.kafka.admin_log_api import LogDirs, handle_delete_records, handle_describe_log_dirs
from broker.kafka.codec import build, request_module
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.records import ConfigRecord, ConfigResourceType
from tests.unit.replica_harness import TOPIC, Cluster, Node, batch, run, settle


async def replicate(c: Cluster, *followers: int, rounds: int = 2) -> None:
    for _ in range(rounds):
        for f in followers:
            await c.nodes[f].pump()
        await settle()


async def ten_records(c: Cluster) -> None:
    [produced] = await c.nodes[1].produce(batch(10), acks=1)
    assert produced.error == Errors.NONE
    await replicate(c, 2, 3)
    assert c.nodes[1].partition().high_watermark == 10


def delete(node: Node, offset: int, partition: int = 0, topic: str = TOPIC,
           timeout_ms: int = 5_000) -> asyncio.Future[list[DeleteRecordsResult]]:
    return asyncio.ensure_future(node.manager.delete_records(
        timeout_ms, [DeleteRecordsPartition(topic, partition, offset)]))


def test_delete_records_moves_the_log_start_once_every_replica_follows(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await ten_records(c)
        pending = delete(c.nodes[1], 4)
        await settle()
        assert c.nodes[1].log().start_offset == 4  # the leader's at once
        assert not pending.done()  # the followers still start at 0
        await replicate(c, 2)  # learns the new start, then reports it
        assert c.nodes[2].log().start_offset == 4
        assert not pending.done()
        await replicate(c, 3)
        [result] = await asyncio.wait_for(pending, 5)
        assert (result.error, result.low_watermark) == (Errors.NONE, 4)

    run(tmp_path, scenario)


def test_delete_records_to_the_high_watermark_and_never_past_it(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await ten_records(c)
        await c.nodes[1].produce(batch(2), acks=1)  # LEO 12, HW still 10
        [beyond] = await delete(c.nodes[1], 11)
        [negative] = await delete(c.nodes[1], -2)
        assert [beyond.error, negative.error] == [Errors.OFFSET_OUT_OF_RANGE] * 2
        assert c.nodes[1].log().start_offset == 0
        pending = delete(c.nodes[1], -1)  # -1: the high watermark
        await replicate(c, 2, 3)
        [result] = await asyncio.wait_for(pending, 5)
        assert (result.error, result.low_watermark) == (Errors.NONE, 10)

    run(tmp_path, scenario)


def test_delete_records_refusals(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await ten_records(c)
        [follower] = await delete(c.nodes[2], 1)
        [unknown] = await delete(c.nodes[1], 1, partition=9)
        assert (follower.error, unknown.error) == (
            Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        [slow] = await delete(c.nodes[1], 3, timeout_ms=30)  # nobody follows in time
        assert slow.error == Errors.REQUEST_TIMED_OUT
        c.metadata.replay(ConfigRecord(ConfigResourceType.TOPIC, TOPIC, "cleanup.policy",
                                       "compact"))
        c.publish()
        [compacted] = await delete(c.nodes[1], 5)
        assert compacted.error == Errors.POLICY_VIOLATION
        assert c.nodes[1].log().start_offset == 3

    run(tmp_path, scenario)


def test_the_kafka_front_answers_delete_records_per_partition(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await ten_records(c)
        m = request_module(ApiKey.DELETE_RECORDS, 2)
        request = build(m, "DeleteRecordsRequest", timeout=datetime.timedelta(milliseconds=50),
                        topics=(build(m, "DeleteRecordsTopic", name=TOPIC, partitions=(
                            build(m, "DeleteRecordsPartition", partition_index=0, offset=11),
                            build(m, "DeleteRecordsPartition", partition_index=3, offset=1))),))
        reply = await handle_delete_records(c.nodes[1].manager, 2, request)
        [topic] = reply.response.topics
        assert [(p.partition_index, p.error_code, p.low_watermark) for p in topic.partitions] \
            == [(0, Errors.OFFSET_OUT_OF_RANGE, -1), (3, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]

    run(tmp_path, scenario, partitions=1)


def describe_log_dirs(node: Node, version: int, topics: dict[str, tuple[int, ...]] | None,
                      offline: dict[str, str] | None = None) -> Any:
    m = request_module(ApiKey.DESCRIBE_LOG_DIRS, version)
    asked = None if topics is None else tuple(
        build(m, "DescribableLogDirTopic", topic=t, partitions=p) for t, p in topics.items())
    if offline is not None:
        node.logs.offline_dirs = offline  # type: ignore[attr-defined]
    hws = {tp: p.high_watermark for tp, p in node.manager.partitions.items()}
    reply = handle_describe_log_dirs(LogDirs(node.logs, lambda: hws), version,
                                     build(m, "DescribeLogDirsRequest", topics=asked))
    return reply.response


def test_describe_log_dirs_lists_this_brokers_partition_logs(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        await ten_records(c)
        node = c.nodes[2]
        response = describe_log_dirs(node, 4, None)
        [result] = response.results
        assert (response.error_code, result.error_code) == (Errors.NONE, Errors.NONE)
        assert result.log_dir == node.logs.log_dirs[0]
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
        [topic] = result.topics
        assert [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                for p in topic.partitions] == [
            (0, node.log().size_in_bytes, 0, False), (1, node.log(1).size_in_bytes, 0, False)]
        assert node.log().size_in_bytes > 0
        only = describe_log_dirs(node, 1, {TOPIC: (1,), "other": (0,)}).results[0].topics
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in only] == [
            (TOPIC, [1])]
        none = describe_log_dirs(node, 4, {}).results[0]
        assert none.topics == () and none.error_code == Errors.NONE

    run(tmp_path, scenario, partitions=2)


def test_describe_log_dirs_marks_an_offline_dir(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        node = c.nodes[1]
        [result] = describe_log_dirs(node, 4, None, {node.logs.log_dirs[0]: "disk gone"}).results
        assert (result.error_code, result.topics) == (Errors.KAFKA_STORAGE_ERROR, ())
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)

    run(tmp_path, scenario)
