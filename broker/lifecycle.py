"""BrokerLifecycleManager: the broker's side of Kafka's broker lifecycle (spec §2).

It registers with the active controller under an incarnation id that is new for every process
start, then heartbeats, reporting the offset of the metadata it has applied:

* STARTING: registered, catching up; heartbeats come quickly and ask to stay fenced until the
  controller says the broker has applied its own registration record (`is_caught_up`).
* RECOVERY: caught up; heartbeats stop asking to be fenced, and the controller unfences it.
* RUNNING: unfenced; a heartbeat every `broker.heartbeat.interval.ms`.
* PENDING_CONTROLLED_SHUTDOWN: heartbeats ask to shut down until the controller has moved
  every leadership away and answers `should_shut_down` (bounded by the caller's timeout).
* SHUTTING_DOWN: no more heartbeats.

The active controller is whoever the Raft observer follows, or the one a NOT_CONTROLLER answer
names, or the next endpoint in turn. Failures are retried with tenacity (exponential backoff
with jitter). A STALE_BROKER_EPOCH heartbeat answer (the registration is gone or replaced)
means register again under the same incarnation; a registration that committed just before a
controller failover is answered with the same epoch, so retrying is safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from broker.state import BrokerState
from kraft.errors import Errors, error_name
from kraft.log.meta_properties import random_uuid
from kraft.security.tls import MESSAGE_SIZE_OPTIONS, TlsConfig, aio_channel
from metadata.rpc import broker_pb2 as pb
from metadata.rpc import broker_pb2_grpc as rpc

log = logging.getLogger(__name__)

STARTUP_HEARTBEAT_S = 0.02  # Kafka heartbeats every 10 ms until caught up
SHUTDOWN_HEARTBEAT_S = 0.05  # Kafka's 50 ms between controlled-shutdown heartbeats
_CHANNEL_OPTIONS = [
    ("grpc.enable_retries", 0),  # tenacity retries, visibly; no hidden second attempt
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 500),
    *MESSAGE_SIZE_OPTIONS,
]


class _Retry(Exception):
    """Worth another try: no active controller reached, or it asked us to wait."""


class RegistrationError(Exception):
    """The broker could not register (a refusal that retrying cannot fix, or a timeout)."""


class ControllerRefusedError(Exception):
    """The active controller answered a request with an error retrying cannot fix."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{error_name(code)}: {message}")
        self.code = code


@dataclass(frozen=True)
class AdvertisedListener:
    name: str
    host: str
    port: int


class BrokerLifecycleManager:
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        listeners: Sequence[AdvertisedListener],
        controllers: Sequence[str],
        leader_endpoint: Callable[[], str | None],
        applied_offset: Callable[[], int],
        *,
        heartbeat_interval_ms: int = 2000,
        request_timeout_ms: int = 2000,
        registration_timeout_ms: int = 60_000,
        rack: str | None = None,
        on_state: Callable[[BrokerState], None] | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self.tls = tls  # the controllers' listener is SSL
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.listeners = tuple(listeners)
        self.controllers = tuple(controllers)
        self._leader_endpoint = leader_endpoint
        self._applied_offset = applied_offset
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.request_timeout_s = request_timeout_ms / 1000
        self.registration_timeout_s = registration_timeout_ms / 1000
        self.rack = rack
        self._on_state = on_state
        self.incarnation_id = random_uuid()
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        self.fenced = True
        self.registrations = 0
        self.fatal_error: BaseException | None = None
        self._hint: str | None = None
        self._next_controller = 0
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._wakeup = asyncio.Event()
        self._running = asyncio.Event()
        self._shutdown_granted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- public API ------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def wait_running(self) -> None:
        await self._running.wait()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away and wait (bounded) until
        it says the broker may stop. True when it did."""
        if self.state in (BrokerState.SHUTTING_DOWN, BrokerState.NOT_RUNNING):
            return self._shutdown_granted.is_set()
        if self.broker_epoch < 0:  # never registered: nothing to hand over
            self._set_state(BrokerState.SHUTTING_DOWN)
            return True
        self._set_state(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
        self._wakeup.set()
        try:
            await asyncio.wait_for(self._shutdown_granted.wait(), timeout_s)
        except TimeoutError:
            log.warning("controlled shutdown not acknowledged within %.1f s", timeout_s)
        granted = self._shutdown_granted.is_set()
        self._set_state(BrokerState.SHUTTING_DOWN)
        return granted

    async def alter_partition(self, request: pb.AlterPartitionRequest) -> pb.AlterPartitionResponse:
        """AlterPartition at the active controller, retried (bounded) like heartbeats."""
        try:
            response: pb.AlterPartitionResponse = await self._with_retries(
                "AlterPartition", request, max(self.heartbeat_interval_s, 1.0))
            return response
        except RetryError as exc:
            raise ConnectionError(str(exc.last_attempt.exception())) from None

    async def allocate_producer_ids(self, timeout_s: float = 30.0) -> tuple[int, int]:
        """A block of cluster-unique producer ids from the active controller (Kafka's
        AllocateProducerIds): (first id, count). Retried with backoff, for at most `timeout_s`,
        across controller failovers and while this broker is not (re)registered: the request
        carries the broker epoch of each attempt. ConnectionError when it gives up,
        ControllerRefusedError for any other refusal."""
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Retry),
            wait=wait_exponential_jitter(multiplier=0.02, max=1.0, jitter=0.02),
            stop=stop_after_delay(timeout_s),
            reraise=False,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if self.broker_epoch < 0:
                        raise _Retry(f"broker {self.broker_id} is not registered yet")
                    request = pb.AllocateProducerIdsRequest(
                        broker_id=self.broker_id, broker_epoch=self.broker_epoch)
                    reply: pb.AllocateProducerIdsResponse = await self._call_once(
                        "AllocateProducerIds", request, (Errors.STALE_BROKER_EPOCH,))
        except RetryError as exc:
            raise ConnectionError(
                f"no producer ids within {timeout_s:.0f} s: "
                f"{exc.last_attempt.exception()}") from None
        if reply.error_code != 0:
            raise ControllerRefusedError(reply.error_code, reply.error_message)
        if reply.producer_id_start < 0 or reply.producer_id_len <= 0:
            raise ControllerRefusedError(
                Errors.UNKNOWN_SERVER_ERROR,
                f"bad producer id block {reply.producer_id_start}+{reply.producer_id_len}")
        return reply.producer_id_start, reply.producer_id_len

    async def close(self) -> None:
        if self.state is not BrokerState.SHUTTING_DOWN:
            self._set_state(BrokerState.SHUTTING_DOWN)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()  # type: ignore[call-arg]  # grpc-stubs 1.53 lags grpc 1.85

    # -- the loop --------------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._register(self.registration_timeout_s)
            while self.state is not BrokerState.SHUTTING_DOWN:
                await self._heartbeat_once()
                if self.state is BrokerState.SHUTTING_DOWN:  # type: ignore[comparison-overlap]
                    break  # (mypy cannot see that the heartbeat moves the state)
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), self._pause_s())
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.critical("broker lifecycle failed: %s", exc)
            self.fatal_error = exc

    def _pause_s(self) -> float:
        if self.state in (BrokerState.STARTING, BrokerState.RECOVERY):
            return min(STARTUP_HEARTBEAT_S, self.heartbeat_interval_s)
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            return min(SHUTDOWN_HEARTBEAT_S, self.heartbeat_interval_s)
        return self.heartbeat_interval_s

    async def _register(self, timeout_s: float) -> None:
        request = pb.BrokerRegistrationRequest(
            broker_id=self.broker_id, cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[pb.Listener(name=lsn.name, host=lsn.host, port=lsn.port)
                       for lsn in self.listeners],
            rack=self.rack,
        )
        try:
            reply = await self._with_retries(
                "RegisterBroker", request, timeout_s,
                retry_codes=(Errors.DUPLICATE_BROKER_REGISTRATION,))
        except RetryError as exc:
            raise RegistrationError(
                f"broker {self.broker_id} could not register with the active controller "
                f"within {timeout_s:.0f} s (initial.broker.registration.timeout.ms): "
                f"{exc.last_attempt.exception()}") from None
        if reply.error_code != 0:
            raise RegistrationError(
                f"broker {self.broker_id}: the controller refused the registration: "
                f"{error_name(reply.error_code)}: {reply.error_message}")
        self.broker_epoch = reply.broker_epoch
        self.registrations += 1
        log.info("registered broker %d with epoch %d (incarnation %s)", self.broker_id,
                 self.broker_epoch, self.incarnation_id)

    async def _heartbeat_once(self) -> None:
        state = self.state
        request = pb.BrokerHeartbeatRequest(
            broker_id=self.broker_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self._applied_offset(),
            want_fence=state is BrokerState.STARTING,
            want_shut_down=state is BrokerState.PENDING_CONTROLLED_SHUTDOWN,
        )
        try:
            # One heartbeat period of retries; the next period sends a fresh offset anyway.
            reply = await self._with_retries(
                "BrokerHeartbeat", request, max(self.heartbeat_interval_s, 0.5))
        except RetryError as exc:
            log.warning("heartbeat failed: %s", exc.last_attempt.exception())
            return
        if reply.error_code == Errors.STALE_BROKER_EPOCH:
            log.warning("heartbeat refused (%s); registering again", reply.error_message)
            await self._register(self.registration_timeout_s)
            return
        if reply.error_code != 0:
            log.warning("heartbeat refused: %s: %s", error_name(reply.error_code),
                        reply.error_message)
            return
        self._apply_reply(reply)

    def _apply_reply(self, reply: pb.BrokerHeartbeatResponse) -> None:
        if reply.is_fenced != self.fenced:
            log.info("broker %d is now %s", self.broker_id,
                     "fenced" if reply.is_fenced else "unfenced")
        self.fenced = reply.is_fenced
        if self.state is BrokerState.STARTING and reply.is_caught_up:
            self._set_state(BrokerState.RECOVERY)
            self._wakeup.set()  # ask to be unfenced at once
        elif self.state is BrokerState.RECOVERY and not reply.is_fenced:
            self._set_state(BrokerState.RUNNING)
            self._running.set()
        elif self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN and reply.should_shut_down:
            self._shutdown_granted.set()
            self._set_state(BrokerState.SHUTTING_DOWN)

    def _set_state(self, state: BrokerState) -> None:
        if state is self.state:
            return
        log.info("broker state %s -> %s", self.state.name, state.name)
        self.state = state
        if self._on_state is not None:
            self._on_state(state)

    # -- talking to the active controller --------------------------------------------------------

    async def _with_retries(
        self, method: str, request: object, timeout_s: float,
        retry_codes: tuple[int, ...] = (),
    ) -> Any:  # the RPC's response message
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Retry),
            wait=wait_exponential_jitter(multiplier=0.02, max=1.0, jitter=0.02),
            stop=stop_after_delay(timeout_s),
            reraise=False,
        )
        async for attempt in retrying:
            with attempt:
                return await self._call_once(method, request, retry_codes)
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def _call_once(
        self, method: str, request: object, retry_codes: tuple[int, ...]
    ) -> Any:  # the RPC's response message
        endpoint = self._target()
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = aio_channel(
                endpoint, self.tls, _CHANNEL_OPTIONS)
        call = getattr(rpc.BrokerLifecycleStub(channel), method)
        try:
            reply = await call(request, timeout=self.request_timeout_s)
        except grpc.aio.AioRpcError as exc:
            self._hint = None
            self._next_controller += 1
            raise _Retry(f"{endpoint}: {exc.code().name}") from exc
        if reply.error_code == Errors.NOT_CONTROLLER:
            hint = reply.controller.controller_endpoint
            self._hint = hint if hint and hint != endpoint else None
            if self._hint is None:
                self._next_controller += 1
            raise _Retry(f"{endpoint}: NOT_CONTROLLER ({reply.error_message})")
        if reply.error_code in retry_codes:
            raise _Retry(f"{error_name(reply.error_code)}: {reply.error_message}")
        self._hint = endpoint  # it answered as the active controller: keep using it
        return reply

    def _target(self) -> str:
        if self._hint:
            return self._hint
        leader = self._leader_endpoint()
        if leader:
            return leader
        return self.controllers[self._next_controller % len(self.controllers)]

