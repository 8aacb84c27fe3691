"""Fast broker failure detection. The controller's rule (BrokerLivenessTracker) with the clock
as a value; then the BrokerLiveness stream over gRPC against a real controller, and the
broker's side (BrokerLifecycleManager) opening, following and ending its stream."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from broker.lifecycle import AdvertisedListener, BrokerLifecycleManager
from kraft.core.config import RaftConfig
from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.broker_liveness import BrokerLivenessTracker, LivenessProbe, StreamState
from metadata.brokers import BrokerHeartbeatRequest, BrokerRegistrationRequest
from metadata.controller import QuorumController
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.lifecycle_service import BrokerLifecycleServicer, add_broker_lifecycle_service
from metadata.liveness_probe import all_refused
from metadata.records import (
    BrokerRegistrationChangeRecord,
    Endpoint,
    FencingChange,
    RegisterBrokerRecord,
)
from metadata.rpc import broker_pb2 as pb
from metadata.rpc import broker_pb2_grpc as rpc
from tests.unit.controller_harness import attach_controller

INC = "7yd6v3LdRPy1BLJbSb6FQQ"
GRACE = 500
T0 = 1_000_000  # any monotonic start


def image_of(*brokers: int, fenced: tuple[int, ...] = ()) -> MetadataImage:
    """Brokers registered with epoch 10 * id, unfenced unless listed."""
    delta = MetadataDelta(EMPTY_IMAGE)
    for offset, b in enumerate(brokers):
        delta.replay(RegisterBrokerRecord(b, INC, 10 * b, fenced=b in fenced), offset, 1, 0)
    return delta.apply()


def fence(image: MetadataImage, broker_id: int) -> MetadataImage:
    delta = MetadataDelta(image)
    delta.replay(BrokerRegistrationChangeRecord(broker_id, 10 * broker_id, FencingChange.FENCE),
                 image.provenance.offset + 1, 1, 0)
    return delta.apply()


# -- the rule --------------------------------------------------------------------------------


def test_a_lost_stream_not_reopened_within_the_grace_window_is_a_death() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    assert tracker.lost(streams[2], T0) == T0 + GRACE
    assert tracker.next_deadline_ms(T0) == T0 + GRACE
    assert tracker.dead_brokers(image, T0 + GRACE - 1) == []
    assert tracker.dead_brokers(image, T0 + GRACE) == [2]
    assert tracker.next_deadline_ms(T0 + GRACE) is None  # nothing left to wake up for
    # Once fenced it is not fenced again.
    assert tracker.dead_brokers(fence(image, 2), T0 + 10 * GRACE) == []


def test_a_broker_that_reconnects_within_the_window_is_alive() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    tracker.lost(streams[2], T0)
    again = tracker.opened(2, 20)
    assert tracker.state(2) is StreamState.OPEN
    assert tracker.dead_brokers(image, T0 + 100 * GRACE) == []
    # The first stream's end, reported late, is news of nothing: a newer stream supersedes it.
    assert tracker.lost(streams[2], T0 + GRACE) is None
    assert tracker.dead_brokers(image, T0 + 100 * GRACE) == []
    tracker.lost(again, T0 + 2 * GRACE)
    assert tracker.dead_brokers(image, T0 + 3 * GRACE) == [2]


def test_silence_and_goodbyes_are_never_deaths() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    tracker.closed(streams[3])  # controlled shutdown: the broker ended its stream itself
    assert tracker.lost(streams[3], T0) is None  # the connection's end after the goodbye
    # Broker 1's stream is open but silent for an hour (frozen, GC, overloaded): alive here;
    # only the session timeout can fence it.
    assert tracker.dead_brokers(image, T0 + 3_600_000) == []
    assert tracker.state(1) is StreamState.OPEN and tracker.state(3) is StreamState.CLOSED


def test_after_a_failover_only_a_stream_seen_and_lost_counts() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    tracker.lost(streams[1], T0)
    tracker.reset()  # a new active controller: it has seen no stream
    assert tracker.dead_brokers(image, T0 + 10 * GRACE) == []
    assert tracker.state(1) is None
    # Streams from before the reset that end now are not this controller's news.
    assert tracker.lost(streams[2], T0 + GRACE) is None
    assert tracker.dead_brokers(image, T0 + 10 * GRACE) == []


def test_a_stream_of_an_old_broker_epoch_fences_nothing() -> None:
    tracker = BrokerLivenessTracker(GRACE)
    old = tracker.opened(1, 10)
    tracker.opened(2, 20)
    tracker.opened(3, 30)
    tracker.lost(old, T0)
    reregistered = MetadataDelta(image_of(1, 2, 3))
    reregistered.replay(RegisterBrokerRecord(1, random_uuid(), 99, fenced=False), 5, 1, 0)
    assert tracker.dead_brokers(reregistered.apply(), T0 + GRACE) == []


def test_many_streams_lost_at_once_are_left_to_the_session_timeout() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    tracker.lost(streams[1], T0)
    tracker.lost(streams[2], T0 + 10)
    now = T0 + 2 * GRACE
    assert tracker.dead_brokers(image, now) == []  # 2 of 3: this controller's network?
    assert tracker.held_back(image, now) == [1, 2]
    tracker.opened(2, 20)  # broker 2 was alive after all: broker 1 alone is gone
    assert tracker.dead_brokers(image, now) == [1]
    assert tracker.held_back(image, now) == []


def test_one_death_after_another_is_fast_each_time() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    tracker.lost(streams[1], T0)
    assert tracker.dead_brokers(image, T0 + GRACE) == [1]
    image = fence(image, 1)  # fenced brokers are no longer watched
    tracker.lost(streams[2], T0 + 5 * GRACE)
    assert tracker.dead_brokers(image, T0 + 6 * GRACE) == [2]  # 1 of the 2 still watched


def test_a_zero_grace_turns_the_fast_path_off() -> None:
    tracker, image = BrokerLivenessTracker(0), image_of(1, 2, 3)
    stream = tracker.opened(1, 10)
    assert tracker.lost(stream, T0) is None
    assert tracker.dead_brokers(image, T0 + 3_600_000) == []
    assert tracker.next_deadline_ms(T0) is None


def test_brokers_without_a_stream_and_fenced_ones_are_not_watched() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3, 4, fenced=(4,))
    tracker.lost(tracker.opened(4, 40), T0)  # a fenced broker's stream
    tracker.lost(tracker.opened(1, 10), T0)
    tracker.opened(2, 20)
    # Watched: 1 (lost) and 2 (open); 3 never opened a stream, 4 is fenced.
    assert tracker.dead_brokers(image, T0 + GRACE) == [1]


def test_listeners_that_refuse_end_the_window_at_once() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    assert not tracker.refused(streams[2])  # an open stream: the probe came too early
    tracker.lost(streams[2], T0)
    assert tracker.refused(streams[2])
    assert tracker.dead_brokers(image, T0) == [2]  # no grace window left to wait for
    assert tracker.next_deadline_ms(T0) is None
    # A stream reopened meanwhile wins over a refusal about its predecessor.
    tracker.opened(2, 20)
    assert not tracker.refused(streams[2])
    assert tracker.dead_brokers(image, T0) == []


def test_refusals_do_not_bypass_the_many_at_once_rule_or_a_zero_grace() -> None:
    tracker, image = BrokerLivenessTracker(GRACE), image_of(1, 2, 3)
    streams = {b: tracker.opened(b, 10 * b) for b in (1, 2, 3)}
    for b in (1, 2):
        tracker.lost(streams[b], T0)
        tracker.refused(streams[b])
    assert tracker.dead_brokers(image, T0) == []  # 2 of 3: this controller's network?
    assert tracker.held_back(image, T0) == [1, 2]
    off = BrokerLivenessTracker(0)
    stream = off.opened(1, 10)
    off.lost(stream, T0)
    assert not off.refused(stream)
    assert off.dead_brokers(image, T0 + 3_600_000) == []


def test_the_probe_says_refused_only_when_nothing_listens() -> None:
    async def scenario() -> None:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        listening = server.sockets[0].getsockname()[1]
        closed = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        free = closed.sockets[0].getsockname()[1]
        closed.close()
        await closed.wait_closed()
        try:
            def at(*ports: int, host: str = "127.0.0.1") -> tuple[Endpoint, ...]:
                return tuple(Endpoint(f"L{i}", host, p) for i, p in enumerate(ports))

            assert await all_refused(at(free), 1.0)
            assert await all_refused(at(free, free), 1.0)
            assert not await all_refused(at(listening), 1.0)
            assert not await all_refused(at(free, listening), 1.0)  # one listener answers
            assert not await all_refused((), 1.0)  # nothing registered: no proof
            # Unroutable registrations would ask this machine: never proof of death.
            assert not await all_refused(at(free, host="0.0.0.0"), 1.0)
            assert not await all_refused(at(free, host=""), 1.0)
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


# -- the stream against a real controller ----------------------------------------------------


async def until(condition: Callable[[], Any], timeout_s: float = 10.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.002)  # poll interval of a bounded condition wait

    await asyncio.wait_for(poll(), timeout_s)


class Cluster:
    """A single-voter controller with the BrokerLifecycle service on a local port."""

    def __init__(self, controller: QuorumController, server: grpc.aio.Server, port: int) -> None:
        self.controller = controller
        self.server = server
        self.endpoint = f"127.0.0.1:{port}"
        self.channel = grpc.aio.insecure_channel(self.endpoint)
        self.stub = rpc.BrokerLifecycleStub(self.channel)
        self.epochs: dict[int, int] = {}

    @classmethod
    async def start(cls, path: Path, grace_ms: int,
                    probe: LivenessProbe | None = None) -> Cluster:
        node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}), SegmentedLog(path / "log"),
                        QuorumStateStore(path / "quorum-state"), rng=random.Random(1))
        controller = attach_controller(node, noop_interval_ms=0, session_timeout_ms=60_000,
                                       liveness_grace_ms=grace_ms, liveness_probe=probe)
        await node.start()
        await until(lambda: controller.is_active)
        server = grpc.aio.server()
        add_broker_lifecycle_service(server, BrokerLifecycleServicer(controller, "c", {}))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return cls(controller, server, port)

    async def unfenced_brokers(self, *broker_ids: int) -> None:
        for b in broker_ids:
            self.epochs[b] = await self.controller.register_broker(
                BrokerRegistrationRequest(b, "c", random_uuid(), ()), "c")
            hw = self.controller.client.status().high_watermark
            reply = await self.controller.broker_heartbeat(
                BrokerHeartbeatRequest(b, self.epochs[b], hw, False, False))
            assert not reply.is_fenced

    def fenced(self, broker_id: int) -> bool:
        return self.controller.committed_image.cluster.brokers[broker_id].fenced

    async def open_stream(self, broker_id: int, epoch: int | None = None) -> Any:
        call = self.stub.BrokerLiveness()
        await call.write(pb.BrokerLivenessRequest(
            broker_id=broker_id,
            broker_epoch=self.epochs[broker_id] if epoch is None else epoch))
        return call

    async def stop(self) -> None:
        await self.channel.close()
        await self.server.stop(None)
        await self.controller.client.stop()


def test_a_broken_stream_fences_the_broker_a_goodbye_does_not(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await Cluster.start(tmp_path, grace_ms=100)
        try:
            await cluster.unfenced_brokers(1, 2, 3)
            calls = {b: await cluster.open_stream(b) for b in (1, 2, 3)}
            for call in calls.values():
                assert (await call.read()).error_code == 0
            liveness = cluster.controller.liveness
            await until(lambda: all(liveness.state(b) is StreamState.OPEN for b in (1, 2, 3)))

            # Broker 3 says goodbye (controlled shutdown): not a death.
            await calls[3].write(pb.BrokerLivenessRequest(closing=True))
            await calls[3].done_writing()
            await until(lambda: liveness.state(3) is StreamState.CLOSED)
            # Broker 2's stream breaks without a goodbye (its process died): fenced.
            calls[2].cancel()
            await until(lambda: cluster.fenced(2))
            assert not cluster.fenced(1) and not cluster.fenced(3)
            far = 10**12  # long after every grace window
            assert liveness.dead_brokers(cluster.controller.committed_image, far) == []
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_a_refusing_broker_is_fenced_long_before_its_grace_window_ends(
        tmp_path: Path) -> None:
    """A one-minute window: only the probe's answer can fence within the test's time, and a
    probe that reached a listener fences nobody."""
    asked: dict[int, tuple[Endpoint, ...]] = {}
    answered = asyncio.Event()

    async def probe(endpoints: tuple[Endpoint, ...], timeout_s: float) -> bool:
        port = endpoints[0].port
        asked[port] = endpoints
        answered.set()
        assert 0 < timeout_s <= 60.0  # what is left of the grace window bounds the probe
        return port == 9002  # broker 2's listener refuses, broker 3's answers

    async def scenario() -> None:
        cluster = await Cluster.start(tmp_path, grace_ms=60_000, probe=probe)
        try:
            for b in (1, 2, 3):
                cluster.epochs[b] = await cluster.controller.register_broker(
                    BrokerRegistrationRequest(b, "c", random_uuid(),
                                              (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + b),)),
                    "c")
                hw = cluster.controller.client.status().high_watermark
                await cluster.controller.broker_heartbeat(
                    BrokerHeartbeatRequest(b, cluster.epochs[b], hw, False, False))
            calls = {b: await cluster.open_stream(b) for b in (1, 2, 3)}
            for call in calls.values():
                await call.read()
            calls[3].cancel()
            await asyncio.wait_for(answered.wait(), 10)
            liveness = cluster.controller.liveness
            assert liveness.state(3) is StreamState.LOST  # its listener answered: it waits
            assert liveness.dead_brokers(cluster.controller.committed_image,
                                         10**12) == [3]  # ...for the window's end only
            calls[3] = await cluster.open_stream(3)  # a live broker reconnects
            await calls[3].read()
            calls[2].cancel()
            await until(lambda: cluster.fenced(2))
            assert set(asked) == {9002, 9003}
            assert not cluster.fenced(3) and not cluster.fenced(1)
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_two_deaths_a_moment_apart_are_both_fenced(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await Cluster.start(tmp_path, grace_ms=100)
        try:
            brokers = (1, 2, 3, 4, 5)
            await cluster.unfenced_brokers(*brokers)
            calls = {b: await cluster.open_stream(b) for b in brokers}
            for call in calls.values():
                await call.read()
            liveness = cluster.controller.liveness
            calls[4].cancel()
            await until(lambda: liveness.state(4) is StreamState.LOST)
            calls[5].cancel()  # its window ends while broker 4's fencing is being written
            await until(lambda: cluster.fenced(4) and cluster.fenced(5))
            assert not any(cluster.fenced(b) for b in (1, 2, 3))
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_a_broker_that_reopens_its_stream_in_time_stays_unfenced(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await Cluster.start(tmp_path, grace_ms=60_000)  # no deadline can pass here
        try:
            await cluster.unfenced_brokers(1, 2, 3)
            liveness = cluster.controller.liveness
            calls = {b: await cluster.open_stream(b) for b in (1, 2, 3)}
            for call in calls.values():
                await call.read()
            calls[1].cancel()
            await until(lambda: liveness.state(1) is StreamState.LOST)
            again = await cluster.open_stream(1)
            assert (await again.read()).error_code == 0
            assert liveness.state(1) is StreamState.OPEN
            image = cluster.controller.committed_image
            assert liveness.dead_brokers(image, 10**12) == []
            # A stream with a stale epoch, or from an unknown broker, is refused.
            stale = await cluster.open_stream(1, epoch=cluster.epochs[1] + 1)
            assert (await stale.read()).error_code == Errors.STALE_BROKER_EPOCH
            unknown = cluster.stub.BrokerLiveness()
            await unknown.write(pb.BrokerLivenessRequest(broker_id=9, broker_epoch=1))
            assert (await unknown.read()).error_code == Errors.STALE_BROKER_EPOCH
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_a_controller_that_steps_down_ends_the_streams_with_not_controller(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        cluster = await Cluster.start(tmp_path, grace_ms=100)
        try:
            await cluster.unfenced_brokers(1, 2, 3)
            call = await cluster.open_stream(1)
            assert (await call.read()).error_code == 0
            cluster.controller._deactivate("test: leadership moved")
            reply = await asyncio.wait_for(call.read(), 5)
            assert reply.error_code == Errors.NOT_CONTROLLER
            assert cluster.controller.liveness.state(1) is None  # nothing left to fence with
        finally:
            await cluster.stop()

    asyncio.run(scenario())


# -- the broker's side -----------------------------------------------------------------------


def test_the_broker_opens_its_stream_and_says_goodbye_when_it_closes(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = await Cluster.start(tmp_path, grace_ms=100)
        await cluster.unfenced_brokers(1, 2)
        controller = cluster.controller
        manager = BrokerLifecycleManager(
            4, "c", [AdvertisedListener("PLAINTEXT", "127.0.0.1", 9094)], [cluster.endpoint],
            leader_endpoint=lambda: None,
            applied_offset=lambda: controller.client.status().high_watermark,
            heartbeat_interval_ms=50, liveness_backoff_ms=20)
        try:
            manager.start()
            await asyncio.wait_for(manager.wait_running(), 10)
            await until(lambda: controller.liveness.state(4) is StreamState.OPEN)
            assert manager.liveness_endpoint == cluster.endpoint
            # The controller ends the stream (it stepped down and back): the broker opens a
            # new one at once.
            opened = manager.liveness_streams
            controller._inactive.set()
            controller._inactive.clear()
            await until(lambda: manager.liveness_streams > opened)
            await until(lambda: controller.liveness.state(4) is StreamState.OPEN)
            # Closing the broker ends its stream with a goodbye: not taken for a death.
            await manager.close()
            assert controller.liveness.state(4) is StreamState.CLOSED
            assert not cluster.fenced(4)
        finally:
            await manager.close()
            await cluster.stop()

    asyncio.run(scenario())


def test_the_stream_can_be_turned_off() -> None:
    async def scenario() -> None:
        manager = BrokerLifecycleManager(
            4, "c", [], ["127.0.0.1:1"], leader_endpoint=lambda: None,
            applied_offset=lambda: 0, liveness_stream=False)
        manager.start()
        assert manager._liveness_task is None
        await manager.close()

    asyncio.run(scenario())
