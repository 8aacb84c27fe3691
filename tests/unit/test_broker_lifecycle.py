"""BrokerLifecycleManager against scripted BrokerLifecycle servers (in-process gRPC): the state
machine, NOT_CONTROLLER hints, retries, re-registration and controlled shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from broker.lifecycle import AdvertisedListener, BrokerLifecycleManager
from broker.state import BrokerState
from kraft.errors import Errors
from metadata.rpc import broker_pb2 as pb
from metadata.rpc import broker_pb2_grpc as rpc

DEADLINE_S = 10


@dataclass
class ScriptedController(rpc.BrokerLifecycleServicer):
    """Answers as the active controller would, or NOT_CONTROLLER pointing at `redirect`."""

    registration_offset: int = 10
    redirect: str | None = None
    refuse_registrations: int = 0  # answer DUPLICATE_BROKER_REGISTRATION this many times
    stale_heartbeats: int = 0  # answer STALE_BROKER_EPOCH this many times
    leads_for: int = 0  # heartbeats in controlled shutdown before should_shut_down
    registrations: list[pb.BrokerRegistrationRequest] = field(default_factory=list)
    heartbeats: list[pb.BrokerHeartbeatRequest] = field(default_factory=list)
    fenced: bool = True

    async def RegisterBroker(self, request, context):  # type: ignore[no-untyped-def]
        if self.redirect is not None:
            return pb.BrokerRegistrationResponse(
                error_code=Errors.NOT_CONTROLLER, broker_epoch=-1,
                controller=pb.ControllerHint(controller_id=2, controller_endpoint=self.redirect))
        self.registrations.append(request)
        if self.refuse_registrations > 0:
            self.refuse_registrations -= 1
            return pb.BrokerRegistrationResponse(
                error_code=Errors.DUPLICATE_BROKER_REGISTRATION, broker_epoch=-1)
        return pb.BrokerRegistrationResponse(broker_epoch=self.registration_offset)

    async def BrokerHeartbeat(self, request, context):  # type: ignore[no-untyped-def]
        if self.redirect is not None:
            return pb.BrokerHeartbeatResponse(
                error_code=Errors.NOT_CONTROLLER, is_fenced=True,
                controller=pb.ControllerHint(controller_id=2, controller_endpoint=self.redirect))
        self.heartbeats.append(request)
        if self.stale_heartbeats > 0:
            self.stale_heartbeats -= 1
            return pb.BrokerHeartbeatResponse(error_code=Errors.STALE_BROKER_EPOCH,
                                              is_fenced=True)
        caught_up = request.current_metadata_offset >= self.registration_offset
        if request.want_shut_down:
            self.leads_for -= 1
            done = self.leads_for < 0
            self.fenced = self.fenced or done
            return pb.BrokerHeartbeatResponse(is_caught_up=caught_up, is_fenced=self.fenced,
                                              in_controlled_shutdown=not done,
                                              should_shut_down=done)
        if caught_up and not request.want_fence:
            self.fenced = False
        return pb.BrokerHeartbeatResponse(is_caught_up=caught_up, is_fenced=self.fenced)


def manager(
    controllers: list[str], offset: Callable[[], int], **kw: object
) -> BrokerLifecycleManager:
    states: list[BrokerState] = []
    m = BrokerLifecycleManager(
        4, "cluster", [AdvertisedListener("PLAINTEXT", "127.0.0.1", 9094)], controllers,
        leader_endpoint=lambda: None, applied_offset=offset, heartbeat_interval_ms=50,
        request_timeout_ms=1000, on_state=states.append, **kw)  # type: ignore[arg-type]
    m.states = states  # type: ignore[attr-defined]
    return m


async def until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)  # poll interval of a bounded condition wait


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_register_follow_the_hint_catch_up_and_run() -> None:
    async def scenario() -> None:
        active = ScriptedController(registration_offset=10)
        standby_server = grpc.aio.server()
        active_server = grpc.aio.server()
        rpc.add_BrokerLifecycleServicer_to_server(active, active_server)
        active_port = active_server.add_insecure_port("127.0.0.1:0")
        standby = ScriptedController(redirect=f"127.0.0.1:{active_port}")
        rpc.add_BrokerLifecycleServicer_to_server(standby, standby_server)
        standby_port = standby_server.add_insecure_port("127.0.0.1:0")
        await active_server.start()
        await standby_server.start()
        applied = [3]
        m = manager([f"127.0.0.1:{standby_port}"], lambda: applied[0])
        try:
            m.start()
            await until(lambda: m.broker_epoch == 10, "registration at the active controller")
            reg = active.registrations[0]
            assert (reg.broker_id, reg.cluster_id, reg.incarnation_id) == (
                4, "cluster", m.incarnation_id)
            assert [(lsn.name, lsn.port) for lsn in reg.listeners] == [("PLAINTEXT", 9094)]
            await until(lambda: len(active.heartbeats) >= 3, "heartbeats")
            # Behind its registration record: still STARTING, asking to stay fenced.
            assert m.state is BrokerState.STARTING
            assert all(h.want_fence and h.current_metadata_offset == 3 for h in active.heartbeats)
            applied[0] = 10
            await asyncio.wait_for(m.wait_running(), DEADLINE_S)
            assert m.states == [BrokerState.RECOVERY, BrokerState.RUNNING]  # type: ignore[attr-defined]
            assert not active.heartbeats[-1].want_fence and not m.fenced
        finally:
            await m.close()
            await active_server.stop(None)
            await standby_server.stop(None)

    run(scenario())


def test_duplicate_registration_is_retried_and_a_stale_epoch_registers_again() -> None:
    async def scenario() -> None:
        server = grpc.aio.server()
        controller = ScriptedController(refuse_registrations=2, stale_heartbeats=1)
        rpc.add_BrokerLifecycleServicer_to_server(controller, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        m = manager([f"127.0.0.1:{port}"], lambda: 100)
        try:
            m.start()
            await asyncio.wait_for(m.wait_running(), DEADLINE_S)
            # Two refusals, one success, one re-registration after STALE_BROKER_EPOCH; every
            # attempt carries the incarnation id of this process.
            assert len(controller.registrations) == 4
            assert {r.incarnation_id for r in controller.registrations} == {m.incarnation_id}
            assert m.registrations == 2
        finally:
            await m.close()
            await server.stop(None)

    run(scenario())


def test_controlled_shutdown_waits_for_the_controller() -> None:
    async def scenario() -> None:
        server = grpc.aio.server()
        controller = ScriptedController(leads_for=3)
        rpc.add_BrokerLifecycleServicer_to_server(controller, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        m = manager([f"127.0.0.1:{port}"], lambda: 100)
        try:
            m.start()
            await asyncio.wait_for(m.wait_running(), DEADLINE_S)
            assert await m.controlled_shutdown(DEADLINE_S)
            asking = [h for h in controller.heartbeats if h.want_shut_down]
            assert len(asking) == 4  # three "still leading" answers, then should_shut_down
            assert m.state is BrokerState.SHUTTING_DOWN
            assert m.states[-2:] == [  # type: ignore[attr-defined]
                BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUTTING_DOWN]
        finally:
            await m.close()
            await server.stop(None)

    run(scenario())


def test_controlled_shutdown_is_bounded() -> None:
    async def scenario() -> None:
        server = grpc.aio.server()
        controller = ScriptedController(leads_for=10**9)  # never lets go
        rpc.add_BrokerLifecycleServicer_to_server(controller, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        m = manager([f"127.0.0.1:{port}"], lambda: 100)
        try:
            m.start()
            await asyncio.wait_for(m.wait_running(), DEADLINE_S)
            assert not await m.controlled_shutdown(0.3)
            assert m.state is BrokerState.SHUTTING_DOWN
        finally:
            await m.close()
            await server.stop(None)

    run(scenario())


def test_registration_gives_up_after_its_timeout() -> None:
    async def scenario() -> None:
        # Nobody listens at this address: every attempt fails UNAVAILABLE.
        m = manager(["127.0.0.1:1"], lambda: 0, registration_timeout_ms=300)
        try:
            m.start()
            await until(lambda: m.fatal_error is not None, "the registration to give up")
            assert "could not register" in str(m.fatal_error)
            assert m.broker_epoch == -1
        finally:
            await m.close()

    run(scenario())


def test_a_caught_up_broker_stays_fenced_until_it_is_ready_then_unfences_at_once() -> None:
    """It registers and catches up while its logs load, asking to stay fenced; being made
    ready sends a heartbeat at once (not after a heartbeat interval) that asks to be
    unfenced (it knows it is caught up: no round trip asking to stay fenced first)."""
    async def scenario() -> None:
        server = grpc.aio.server()
        controller = ScriptedController(registration_offset=10)
        rpc.add_BrokerLifecycleServicer_to_server(controller, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        m = manager([f"127.0.0.1:{port}"], lambda: 100, ready_to_unfence=False)
        m.heartbeat_interval_s = 60.0  # one heartbeat a minute once caught up and waiting
        try:
            m.start()
            await until(lambda: len(controller.heartbeats) >= 1, "a caught-up heartbeat")
            assert m.broker_epoch == 10 and m.state is BrokerState.STARTING and m.fenced
            assert all(h.want_fence for h in controller.heartbeats)
            asked_fenced = len(controller.heartbeats)
            m.set_ready_to_unfence()
            await asyncio.wait_for(m.wait_running(), 5)
            # Known to be caught up: the first heartbeat after it asks to be unfenced.
            assert not controller.heartbeats[asked_fenced].want_fence
            assert m.states == [BrokerState.RECOVERY, BrokerState.RUNNING]  # type: ignore[attr-defined]
            assert not controller.heartbeats[-1].want_fence and not m.fenced
        finally:
            await m.close()
            await server.stop(None)

    run(scenario())
