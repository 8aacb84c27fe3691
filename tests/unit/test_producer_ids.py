"""Cluster-unique producer ids: the controller's rule and record (replayed into the image), the
AllocateProducerIds RPC end to end, and the broker's ProducerIdManager (blocks, prefetch)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import grpc
import pytest

from broker.lifecycle import AdvertisedListener, BrokerLifecycleManager
from broker.producer_ids import ProducerIdManager
from kraft.core.config import RaftConfig
from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.brokers import BrokerRegistrationRequest
from metadata.controller import QuorumController
from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.errors import ControllerApiError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.lifecycle_service import BrokerLifecycleServicer, add_broker_lifecycle_service
from metadata.producer_ids import PRODUCER_ID_BLOCK_SIZE, allocate_producer_ids
from metadata.records import ProducerIdsRecord, RegisterBrokerRecord, decode_record
from tests.unit.controller_harness import attach_controller

INC = "7yd6v3LdRPy1BLJbSb6FQQ"
DEADLINE_S = 10


def replay(image: MetadataImage, *records: object) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.provenance.offset + 1):
        delta.replay(record, offset, 1, 0)  # type: ignore[arg-type]
    return delta.apply()


def with_broker(broker_id: int = 1, epoch: int = 7) -> MetadataImage:
    return replay(EMPTY_IMAGE, RegisterBrokerRecord(broker_id, INC, epoch))


# -- the rule and the record -----------------------------------------------------------------


def test_blocks_follow_each_other_from_zero() -> None:
    image = with_broker()
    assert image.producer_ids.next_producer_id == -1
    starts = []
    for _ in range(3):
        result = allocate_producer_ids(image, 1, 7)
        block = result.response
        assert result.records == (ProducerIdsRecord(1, 7, block.next_block_first_id),)
        starts.append(block.first_producer_id)
        assert block.size == PRODUCER_ID_BLOCK_SIZE and block.assigned_broker_id == 1
        image = replay(image, *result.records)
    assert starts == [0, 1000, 2000]
    assert image.producer_ids.next_producer_id == 3000


def test_only_a_registered_broker_with_its_current_epoch_gets_a_block() -> None:
    image = with_broker(1, 7)
    for broker_id, epoch in ((2, 7), (1, 6)):
        with pytest.raises(ControllerApiError) as refused:
            allocate_producer_ids(image, broker_id, epoch)
        assert refused.value.error == Errors.STALE_BROKER_EPOCH


def test_replay_never_moves_the_next_block_back() -> None:
    image = replay(with_broker(), ProducerIdsRecord(1, 7, 2000))
    for stale in (2000, 1000):
        with pytest.raises(MetadataReplayError):
            replay(image, ProducerIdsRecord(1, 7, stale))
    # A snapshot's record (no broker) carries the next block start on its own.
    assert replay(EMPTY_IMAGE, ProducerIdsRecord(-1, -1, 5000)).producer_ids.next_producer_id \
        == 5000


# -- on a real controller --------------------------------------------------------------------


async def _until(condition, timeout_s: float = DEADLINE_S) -> None:  # type: ignore[no-untyped-def]
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)  # yields to the node's tasks; bounded by wait_for

    await asyncio.wait_for(poll(), timeout_s)


async def started_controller(path: Path) -> QuorumController:
    node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}), SegmentedLog(path / "log"),
                    QuorumStateStore(path / "quorum-state"), rng=random.Random(1))
    controller = attach_controller(node, noop_interval_ms=0)
    await node.start()
    await _until(lambda: controller.is_active)
    return controller


def test_ids_never_repeat_across_a_controller_restart(tmp_path: Path) -> None:
    """The committed records are the only state: a controller started again from the log (as a
    new active controller after a failover starts from the committed image) continues after
    the last block, and concurrent requests get distinct blocks."""

    async def scenario() -> list[int]:
        controller = await started_controller(tmp_path)
        epoch = await controller.register_broker(
            BrokerRegistrationRequest(1, "c", random_uuid(), ()), "c")
        blocks = await asyncio.gather(
            *(controller.allocate_producer_ids(1, epoch) for _ in range(5)))
        with pytest.raises(ControllerApiError) as stale:
            await controller.allocate_producer_ids(1, epoch + 1)
        assert stale.value.error == Errors.STALE_BROKER_EPOCH
        await controller.client.stop()

        again = await started_controller(tmp_path)
        assert again.committed_image.producer_ids.next_producer_id == 5 * PRODUCER_ID_BLOCK_SIZE
        later = await again.allocate_producer_ids(1, epoch)
        node = again.client
        records = [decode_record(r) for b in node.log.batches(0, node.log.end_offset)
                   if not b.control for r in b.records]
        assert [r.next_producer_id for r in records if isinstance(r, ProducerIdsRecord)] == [
            1000, 2000, 3000, 4000, 5000, 6000]
        await node.stop()
        return [b.first_producer_id for b in (*blocks, later)]

    starts = asyncio.run(scenario())
    assert sorted(starts) == [i * PRODUCER_ID_BLOCK_SIZE for i in range(6)]
    assert starts[-1] == 5000


def test_a_broker_allocates_through_the_lifecycle_service(tmp_path: Path) -> None:
    """BrokerLifecycleManager.allocate_producer_ids against the real servicer and controller:
    it waits for its registration, then gets consecutive blocks; a ProducerIdManager on top
    hands out each id once."""

    async def scenario() -> None:
        controller = await started_controller(tmp_path)
        server = grpc.aio.server()
        add_broker_lifecycle_service(server, BrokerLifecycleServicer(controller, "c", {}))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        manager = BrokerLifecycleManager(
            4, "c", [AdvertisedListener("PLAINTEXT", "127.0.0.1", 9094)],
            [f"127.0.0.1:{port}"], leader_endpoint=lambda: None,
            applied_offset=lambda: controller.client.status().high_watermark,
            heartbeat_interval_ms=50)
        try:
            manager.start()
            first = await manager.allocate_producer_ids(timeout_s=DEADLINE_S)
            assert first == (0, PRODUCER_ID_BLOCK_SIZE)
            ids = ProducerIdManager(manager.allocate_producer_ids)
            handed = [await ids.next_producer_id() for _ in range(2500)]
            assert handed == list(range(1000, 3500))
        finally:
            await manager.close()
            await server.stop(None)
            await controller.client.stop()

    asyncio.run(scenario())


# -- the broker's ProducerIdManager ----------------------------------------------------------


class FakeController:
    """Hands out blocks of `size`; `gate` holds an allocation until the test opens it."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self.next = 0
        self.calls = 0
        self.failures = 0
        self.gate: asyncio.Event | None = None

    async def allocate(self) -> tuple[int, int]:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("no active controller")
        first, self.next = self.next, self.next + self.size
        return first, self.size


def test_ids_are_unique_and_the_next_block_is_fetched_at_ninety_percent() -> None:
    async def scenario() -> None:
        controller = FakeController(size=10)
        ids = ProducerIdManager(controller.allocate)
        got = [await ids.next_producer_id() for _ in range(8)]
        assert got == list(range(8)) and controller.calls == 1
        got.append(await ids.next_producer_id())  # the 9th of 10: 90% used
        await asyncio.sleep(0)  # the prefetch task's first step
        assert controller.calls == 2  # the prefetch started without waiting for it
        got += [await ids.next_producer_id() for _ in range(21)]
        await asyncio.sleep(0)
        assert got == list(range(30)) and controller.calls == 4  # one block ahead

    asyncio.run(scenario())


def test_concurrent_callers_share_one_fetch_and_a_cancelled_caller_does_not_cancel_it() -> None:
    async def scenario() -> None:
        controller = FakeController(size=4)
        controller.gate = asyncio.Event()
        ids = ProducerIdManager(controller.allocate)
        impatient = asyncio.ensure_future(ids.next_producer_id())
        waiters = [asyncio.ensure_future(ids.next_producer_id()) for _ in range(6)]
        await asyncio.sleep(0)  # let them all reach the fetch
        impatient.cancel()
        controller.gate.set()
        got = await asyncio.gather(*waiters)
        assert sorted(got) == list(range(6))
        assert controller.calls == 2

    asyncio.run(scenario())


def test_a_failed_fetch_raises_and_the_next_call_tries_again() -> None:
    async def scenario() -> None:
        controller = FakeController(size=5)
        controller.failures = 1
        ids = ProducerIdManager(controller.allocate)
        with pytest.raises(ConnectionError):
            await ids.next_producer_id()
        assert await ids.next_producer_id() == 0

    asyncio.run(scenario())


def test_a_block_that_goes_back_is_refused() -> None:
    async def scenario() -> None:
        blocks = iter([(100, 10), (50, 10)])

        async def allocate() -> tuple[int, int]:
            return next(blocks)

        ids = ProducerIdManager(allocate)
        assert [await ids.next_producer_id() for _ in range(10)] == list(range(100, 110))
        with pytest.raises(RuntimeError, match="does not follow"):
            await ids.next_producer_id()

    asyncio.run(scenario())
