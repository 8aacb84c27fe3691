"""The controller on a real (single-voter) Raft node: speculative validation, commit before
answer, the committed image built only by replaying the log, NOT_CONTROLLER after losing it."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from kraft.core.config import RaftConfig
from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.brokers import BrokerHeartbeatRequest, BrokerRegistrationRequest
from metadata.controller import NotControllerError, QuorumController
from metadata.delta import MetadataDelta
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import CLUSTER_DEFAULT_BROKER, EMPTY_IMAGE
from metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    NoOpRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    decode_record,
)
from metadata.topics import CreatableTopic, create_topics
from tests.unit.controller_harness import attach_controller


async def _until(condition, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)  # yields to the node's tasks; bounded by wait_for

    await asyncio.wait_for(poll(), timeout_s)


async def active_controller(tmp_path: Path, noop_ms: int = 0) -> QuorumController:
    node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}), SegmentedLog(tmp_path / "log"),
                    QuorumStateStore(tmp_path / "quorum-state"), rng=random.Random(1))
    controller = attach_controller(node, noop_interval_ms=noop_ms)
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
        assert results[1][0].error.error == Errors.TOPIC_ALREADY_EXISTS
        image = controller.committed_image
        assert image.topic("orders") is not None
        assert len(image.topic("orders").partitions) == 3  # type: ignore[union-attr]
        await controller.client.stop()

    asyncio.run(scenario())


def test_the_committed_image_is_exactly_the_replay_of_the_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        for broker in (1, 2, 3):
            await controller.write(lambda _img, b=broker: register(b))
        topics = [CreatableTopic(f"t{i}", num_partitions=2, replication_factor=2)
                  for i in range(5)]
        await controller.write(lambda img: create_topics(img, topics))
        node = controller.client
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
        start = controller.client.status().high_watermark
        await _until(lambda: controller.client.status().high_watermark >= start + 3)
        node = controller.client
        records = [decode_record(r) for b in node.log.batches(0, node.log.end_offset)
                   if not b.control for r in b.records]
        assert any(isinstance(r, NoOpRecord) for r in records)
        await node.stop()

    asyncio.run(scenario())


def test_a_node_that_is_not_leader_answers_not_controller(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        controller.client.core.begin_shutdown(0)  # type: ignore[union-attr]
        controller.client._process()
        await _until(lambda: not controller.is_active)
        with pytest.raises(NotControllerError) as error:
            await controller.write(lambda _img: register(9))
        assert error.value.error == Errors.NOT_CONTROLLER
        await controller.client.stop()

    asyncio.run(scenario())


def test_broker_lifecycle_register_unfence_fence_on_session_expiry(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}), SegmentedLog(tmp_path / "log"),
                        QuorumStateStore(tmp_path / "quorum-state"), rng=random.Random(1))
        controller = attach_controller(node, noop_interval_ms=0,
                                      session_timeout_ms=300)
        await node.start()
        await _until(lambda: controller.is_active)
        epochs = {}
        for broker in (1, 2, 3):
            request = BrokerRegistrationRequest(broker, "c", random_uuid(), ())
            epochs[broker] = await controller.register_broker(request, "c")
        image = controller.committed_image
        assert all(image.cluster.brokers[b].fenced for b in (1, 2, 3))
        assert epochs[1] < epochs[2] < epochs[3]  # epochs are registration offsets

        def beat(broker: int) -> BrokerHeartbeatRequest:
            return BrokerHeartbeatRequest(broker, epochs[broker], node.status().high_watermark,
                                          want_fence=False, want_shutdown=False)

        replies = [await controller.broker_heartbeat(beat(b)) for b in (1, 2, 3)]
        assert all(r.is_caught_up and not r.is_fenced for r in replies)
        assert not any(controller.committed_image.cluster.brokers[b].fenced for b in (1, 2, 3))
        await controller.write(lambda img: create_topics(
            img, [CreatableTopic("t", num_partitions=6, replication_factor=3)]))

        # Brokers 1 and 2 keep heartbeating; broker 3 goes silent and is fenced.
        async def keep_alive() -> None:
            while True:
                for b in (1, 2):
                    await controller.broker_heartbeat(beat(b))
                await asyncio.sleep(0.05)  # the heartbeat interval of this test's brokers

        alive = asyncio.ensure_future(keep_alive())
        await _until(lambda: controller.committed_image.cluster.brokers[3].fenced, 5)
        alive.cancel()
        image = controller.committed_image
        for partition in image.topic("t").partitions.values():  # type: ignore[union-attr]
            assert 3 not in partition.isr and partition.leader != 3
        # A stale epoch is refused with Kafka's error.
        with pytest.raises(ControllerApiError) as stale:
            await controller.broker_heartbeat(BrokerHeartbeatRequest(1, 12345, 0, False, False))
        assert stale.value.error == Errors.STALE_BROKER_EPOCH
        await node.stop()

    asyncio.run(scenario())


def test_a_live_broker_id_cannot_be_registered_twice(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        first = BrokerRegistrationRequest(1, "c", random_uuid(), ())
        epoch = await controller.register_broker(first, "c")
        hw = controller.client.status().high_watermark
        await controller.broker_heartbeat(BrokerHeartbeatRequest(1, epoch, hw, False, False))
        with pytest.raises(ControllerApiError) as duplicate:
            await controller.register_broker(
                BrokerRegistrationRequest(1, "c", random_uuid(), ()), "c")
        assert duplicate.value.error == Errors.DUPLICATE_BROKER_REGISTRATION
        with pytest.raises(ControllerApiError) as foreign:
            await controller.register_broker(
                BrokerRegistrationRequest(2, "other", random_uuid(), ()), "c")
        assert foreign.value.error == Errors.INCONSISTENT_CLUSTER_ID
        # The same incarnation re-registering keeps its epoch.
        assert await controller.register_broker(first, "c") == epoch
        await controller.client.stop()

    asyncio.run(scenario())


class ManualClock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.mark.parametrize("jump_ms", [3_600_000, -3_600_000])
def test_a_wall_clock_jump_neither_fences_every_broker_nor_stops_fencing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jump_ms: int) -> None:
    """Issue 28, defect 3: broker sessions run on the monotonic clock, as Kafka's
    BrokerHeartbeatManager's do. The wall clock steps by an hour either way while the
    monotonic one stands still: nobody is fenced; then the silent broker alone is, once its
    session has expired on the monotonic clock."""
    async def scenario() -> None:
        session = ManualClock()
        node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}), SegmentedLog(tmp_path / "log"),
                        QuorumStateStore(tmp_path / "quorum-state"), rng=random.Random(1))
        controller = attach_controller(node, noop_interval_ms=0, session_timeout_ms=9000,
                                       session_clock_ms=session)
        await node.start()
        await _until(lambda: controller.is_active)
        epochs = {}
        for broker in (1, 2, 3):
            request = BrokerRegistrationRequest(broker, "c", random_uuid(), ())
            epochs[broker] = await controller.register_broker(request, "c")

        async def beat(*brokers: int) -> None:
            for b in brokers:
                await controller.broker_heartbeat(BrokerHeartbeatRequest(
                    b, epochs[b], node.status().high_watermark, False, False))

        async def fenced() -> set[int]:
            await controller.fence_stale_broker()
            # A write with no records answers once every write before it (the periodic
            # fencer's too) has committed.
            await controller.write(lambda _img: ControllerResult((), None))
            cluster = controller.committed_image.cluster
            return {b for b in (1, 2, 3) if cluster.brokers[b].fenced}

        await beat(1, 2, 3)
        assert await fenced() == set()
        wall = time.time
        monkeypatch.setattr(time, "time", lambda: wall() + jump_ms / 1000)
        assert await fenced() == set()  # no storm
        session.now_ms += 5000
        await beat(1, 2)
        assert await fenced() == set()
        session.now_ms += 4001  # broker 3's session (9000 ms) has now expired
        assert await fenced() == {3}  # fencing still works
        await node.stop()

    asyncio.run(scenario())


def test_auto_leader_rebalance_restores_preferred_leaders(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        epochs = {}
        for broker in (1, 2, 3):
            request = BrokerRegistrationRequest(broker, "c", random_uuid(), ())
            epochs[broker] = await controller.register_broker(request, "c")
        for broker in (1, 2, 3):
            await controller.broker_heartbeat(BrokerHeartbeatRequest(
                broker, epochs[broker], controller.client.status().high_watermark, False, False))
        await controller.write(lambda img: create_topics(
            img, [CreatableTopic("t", num_partitions=3, replication_factor=3)]))
        topic = controller.committed_image.topic("t")
        assert topic is not None
        # Move partition 0's leadership off its preferred replica.
        preferred = topic.partitions[0].replicas[0]
        other = topic.partitions[0].replicas[1]
        change = PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=other)
        await controller.write(lambda _img: ControllerResult((change,), None))
        assert controller.committed_image.partition(topic.topic_id, 0).leader == other  # type: ignore[union-attr]
        # Check every second, rebalance any imbalance (the percentage is honoured: 0 %).
        settings = {"leader.imbalance.check.interval.seconds": "1",
                    "leader.imbalance.per.broker.percentage": "0"}
        records = tuple(ConfigRecord(ConfigResourceType.BROKER, "", k, v)
                        for k, v in settings.items())
        await controller.write(lambda _img: ControllerResult(records, None))
        await _until(lambda: controller.committed_image.partition(  # type: ignore[union-attr]
            topic.topic_id, 0).leader == preferred, timeout_s=10)
        await controller.client.stop()

    asyncio.run(scenario())


def test_a_failed_append_renounces_and_a_new_epoch_starts_from_the_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}, fetch_max_bytes=4096),
                        SegmentedLog(tmp_path / "log"),
                        QuorumStateStore(tmp_path / "quorum-state"), rng=random.Random(1))
        controller = attach_controller(node, noop_interval_ms=0)
        await node.start()
        await _until(lambda: controller.is_active)
        epoch = node.status().epoch
        # One atomic write too large for a batch: its records reached the speculative image,
        # so the controller must not go on in this epoch.
        huge = tuple(ConfigRecord(ConfigResourceType.BROKER, "", f"k{i}", "v" * 200)
                     for i in range(40))
        with pytest.raises(NotControllerError):
            await controller.write(lambda _img: ControllerResult(huge, None))
        await _until(lambda: controller.is_active and node.status().epoch > epoch)
        assert controller.committed_image.config(CLUSTER_DEFAULT_BROKER) == {}
        await controller.write(lambda _img: register(1))
        assert 1 in controller.committed_image.cluster.brokers
        await node.stop()

    asyncio.run(scenario())


def test_a_big_non_atomic_result_yields_to_the_event_loop_between_slices(tmp_path: Path) -> None:
    from metadata.controller import NON_ATOMIC_SLICE

    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        count = NON_ATOMIC_SLICE * 2 + 7
        records = tuple(
            ConfigRecord(ConfigResourceType.BROKER, "", "num.partitions", str(i))
            for i in range(count)
        )
        seen: set[int] = set()

        async def ticker() -> None:  # another task: what does it see while the write runs?
            while True:
                seen.add(controller._next_offset)
                await asyncio.sleep(0)

        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        base = controller._next_offset
        await controller.write(lambda _img: ControllerResult(records, None, atomic=False))
        task.cancel()
        image = controller.committed_image
        assert image.configs[CLUSTER_DEFAULT_BROKER]["num.partitions"] == str(count - 1)
        # The loop ran other tasks between slices, not only before and after the write.
        assert any(base < offset < base + count for offset in seen), sorted(seen)
        batches = [b for b in controller.client.log.batches(0, 1 << 62) if not b.control]
        sizes = [len(b.records) for b in batches if len(b.records) > 1]
        assert max(sizes) <= NON_ATOMIC_SLICE
        await controller.client.stop()

    asyncio.run(scenario())


def _config_write(value: int, order: list[int]) -> ControllerResult[int]:
    order.append(value)
    record = ConfigRecord(ConfigResourceType.BROKER, "", "log.retention.ms", str(value))
    return ControllerResult((record,), value)


def _logged_values(controller: QuorumController) -> list[int]:
    """The log.retention.ms values in the log, in log order, and the batches holding them."""
    return [int(record.value)
            for batch in controller.client.log.batches(0, 1 << 62) if not batch.control
            for record in map(decode_record, batch.records)
            if isinstance(record, ConfigRecord) and record.name == "log.retention.ms"
            and record.value is not None]


def test_concurrent_writes_commit_in_the_order_their_rules_ran_sharing_batches(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        order: list[int] = []
        writes = [controller.write(lambda _img, v=v: _config_write(v, order))
                  for v in random.Random(7).sample(range(1000), 60)]
        answers = await asyncio.gather(*writes)
        assert sorted(answers) == sorted(order)
        assert _logged_values(controller) == order  # the log holds them as the rules ran
        batches = [b for b in controller.client.log.batches(0, 1 << 62) if not b.control]
        assert len(batches) < len(order)  # concurrent writes share Raft batches
        assert controller.committed_image.config(CLUSTER_DEFAULT_BROKER)[
            "log.retention.ms"] == str(order[-1])
        await controller.client.stop()

    asyncio.run(scenario())


def test_one_refused_write_among_concurrent_ones_fails_alone(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        order: list[int] = []

        def rule(value: int) -> ControllerResult[int]:
            if value == 13:
                raise ControllerApiError(Errors.INVALID_REQUEST, "13 is refused")
            return _config_write(value, order)

        writes = [controller.write(lambda _img, v=v: rule(v)) for v in range(30)]
        answers = await asyncio.gather(*writes, return_exceptions=True)
        refused = [a for a in answers if isinstance(a, BaseException)]
        assert len(refused) == 1 and isinstance(refused[0], ControllerApiError)
        assert refused[0].code == Errors.INVALID_REQUEST
        assert answers[:13] + answers[14:] == [v for v in range(30) if v != 13]
        assert _logged_values(controller) == [v for v in range(30) if v != 13]
        assert controller.is_active
        await controller.client.stop()

    asyncio.run(scenario())


def test_a_cancelled_writer_does_not_fail_the_writes_beside_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        controller = await active_controller(tmp_path)
        order: list[int] = []
        tasks = [asyncio.ensure_future(controller.write(lambda _img, v=v: _config_write(v, order)))
                 for v in range(10)]
        await _until(lambda: len(order) == 10)  # every rule ran and its append was issued
        tasks[4].cancel()  # the client went away: its records are in the log regardless
        answers = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(answers[4], asyncio.CancelledError)
        assert answers[:4] + answers[5:] == [v for v in range(10) if v != 4]
        await _until(lambda: controller.committed_image.config(CLUSTER_DEFAULT_BROKER).get(
            "log.retention.ms") == "9")
        assert _logged_values(controller) == list(range(10))
        assert controller.is_active
        await controller.client.stop()

    asyncio.run(scenario())
