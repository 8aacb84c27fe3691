"""The controller on a real (single-voter) Raft node: speculative validation, commit before
answer, the committed image built only by replaying the log, NOT_CONTROLLER after losing it."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from kraft.core.config import RaftConfig
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.controller import NotControllerError, QuorumController
from metadata.delta import MetadataDelta
from metadata.errors import ApiErrors, ControllerResult
from metadata.image import EMPTY_IMAGE
from metadata.loader import MetadataLoader
from metadata.records import NoOpRecord, RegisterBrokerRecord, decode_record, random_uuid
from metadata.topics import CreatableTopic, create_topics


async def _until(condition, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)  # yields to the node's tasks; bounded by wait_for

    await asyncio.wait_for(poll(), timeout_s)


async def active_controller(tmp_path: Path, noop_ms: int = 0) -> QuorumController:
    node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}), SegmentedLog(tmp_path / "log"),
                    QuorumStateStore(tmp_path / "quorum-state"), rng=random.Random(1))
    controller = QuorumController(node, MetadataLoader(node.log), noop_interval_ms=noop_ms)
    await node.start()
    await _until(lambda: controller.is_active)
    return controller


def register(broker_id: int) -> ControllerResult[None]:
    record = RegisterBrokerRecord(broker_id=broker_id, incarnation_id=random_uuid(),
                                  broker_epoch=broker_id, endpoints=(), rack=None, fenced=False,
                                  in_controlled_shutdown=False)
    return ControllerResult((record,), None)


def test_writes_validate_against_uncommitted_writes_and_answer_after_commit(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        for broker in (1, 2, 3):
            await controller.write(lambda _img, b=broker: register(b))
        topic = [CreatableTopic("orders", num_partitions=3, replication_factor=3)]
        first = controller.write(lambda img: create_topics(img, topic))
        second = controller.write(lambda img: create_topics(img, topic))
        results = await asyncio.gather(first, second)
        assert results[0][0].error is None
        assert results[1][0].error is not None
        assert results[1][0].error.error == ApiErrors.TOPIC_ALREADY_EXISTS
        image = controller.committed_image
        assert image.topic("orders") is not None
        assert len(image.topic("orders").partitions) == 3  # type: ignore[union-attr]
        await controller.node.stop()

    asyncio.run(scenario())


def test_the_committed_image_is_exactly_the_replay_of_the_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        for broker in (1, 2, 3):
            await controller.write(lambda _img, b=broker: register(b))
        topics = [CreatableTopic(f"t{i}", num_partitions=2, replication_factor=2)
                  for i in range(5)]
        await controller.write(lambda img: create_topics(img, topics))
        node = controller.node
        delta = MetadataDelta(EMPTY_IMAGE)
        for batch in node.log.batches(0, node.status().high_watermark):
            if not batch.control:
                for i, data in enumerate(batch.records):
                    delta.replay(decode_record(data), batch.base_offset + i, batch.epoch,
                                 batch.max_timestamp_ms)
        replayed = delta.apply()
        assert replayed.topics == controller.committed_image.topics
        assert replayed.cluster == controller.committed_image.cluster
        await node.stop()

    asyncio.run(scenario())


def test_noops_keep_the_high_watermark_moving(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path, noop_ms=10)
        start = controller.node.status().high_watermark
        await _until(lambda: controller.node.status().high_watermark >= start + 3)
        node = controller.node
        records = [decode_record(r) for b in node.log.batches(0, node.log.end_offset)
                   if not b.control for r in b.records]
        assert any(isinstance(r, NoOpRecord) for r in records)
        await node.stop()

    asyncio.run(scenario())


def test_a_node_that_is_not_leader_answers_not_controller(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        controller.node.core.begin_shutdown(0)  # type: ignore[union-attr]
        controller.node._process()
        await _until(lambda: not controller.is_active)
        with pytest.raises(NotControllerError) as error:
            await controller.write(lambda _img: register(9))
        assert error.value.error == ApiErrors.NOT_CONTROLLER
        await controller.node.stop()

    asyncio.run(scenario())
