"""BrokerLifecycleManager: the broker's side of Kafka's broker lifecycle (spec §2).

It registers with the active controller under an incarnation id that is new for every process
start, then heartbeats, reporting the offset of the metadata it has applied:

* STARTING: registered, catching up; heartbeats come quickly and ask to stay fenced until the
  controller says the broker has applied its own registration record (`is_caught_up`) and the
  broker is ready to be unfenced (`set_ready_to_unfence`: its partition logs are loaded; it
  registers and catches up meanwhile, as Kafka's BrokerServer does).
* RECOVERY: caught up; heartbeats stop asking to be fenced, and the controller unfences it.
* RUNNING: unfenced; a heartbeat every `broker.heartbeat.interval.ms`.
* PENDING_CONTROLLED_SHUTDOWN: heartbeats ask to shut down until the controller has moved
  every leadership away and answers `should_shut_down` (bounded by the caller's timeout).
* SHUTTING_DOWN: no more heartbeats.

Beside the heartbeats the broker keeps one BrokerLiveness stream open to the active controller
(metadata/broker_liveness.py): if this process dies, the kernel closes the stream's connection
and the controller fences the broker within `broker.liveness.grace.ms` instead of a whole
session timeout. So the stream must only ever end without a goodbye when the process is gone:
it says goodbye before it ends the stream on purpose (closing, a new broker epoch, heartbeats
answered by another controller), and after a break it opens a new one at once, then with a
doubling backoff from `broker.liveness.reconnect.backoff.ms`.

The active controller is whoever the Raft observer follows, or the one a NOT_CONTROLLER answer
names, or the next endpoint in turn. Failures are retried with tenacity (exponential backoff
with jitter). A STALE_BROKER_EPOCH heartbeat answer (the registration is gone or replaced)
means register again under the same incarnation; a registration that committed just before a
controller failover is answered with the same epoch, so retrying is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
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
LIVENESS_BACKOFF_MS = 100  # broker.liveness.reconnect.backoff.ms
LIVENESS_MAX_BACKOFF_S = 1.0
LIVENESS_REFUSED_S = 10.0  # a controller without BrokerLiveness, or ACLs: ask again rarely
GOODBYE_TIMEOUT_S = 1.0
_EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # grpc-stubs 1.53 lags grpc 1.85
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
        liveness_backoff_ms: int = LIVENESS_BACKOFF_MS,
        liveness_stream: bool = True,
        ready_to_unfence: bool = True,
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
        self._ready_to_unfence = ready_to_unfence
        self._caught_up = False
        self.registrations = 0
        self.fatal_error: BaseException | None = None
        self._hint: str | None = None
        self._next_controller = 0
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._wakeup = asyncio.Event()
        self._running = asyncio.Event()
        self._shutdown_granted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.liveness_backoff_s = liveness_backoff_ms / 1000
        self._liveness_enabled = liveness_stream
        self._liveness_task: asyncio.Task[None] | None = None
        self._liveness_restart = asyncio.Event()  # a new epoch or controller, or closing
        self._liveness_endpoint: str | None = None  # where the open stream is
        self._closing = False
        self.liveness_streams = 0  # streams the controller accepted (for tests and logs)

    # -- public API ------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())
        if self._liveness_enabled:
            self._liveness_task = asyncio.ensure_future(self._keep_liveness_stream())

    def set_ready_to_unfence(self) -> None:
        """Nothing local holds the broker fenced any more (its logs are loaded). Already
        caught up (the controller said so, and it stays so): RECOVERY at once, so the
        heartbeat sent now asks to be unfenced; else the next one may leave STARTING."""
        self._ready_to_unfence = True
        if self._caught_up and self.state is BrokerState.STARTING:
            self._set_state(BrokerState.RECOVERY)
        self._wakeup.set()

    @property
    def liveness_endpoint(self) -> str | None:
        """The controller the liveness stream is open to (None: no open stream)."""
        return self._liveness_endpoint

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
        await self._end_liveness_stream()
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
        if self._caught_up and not self._ready_to_unfence:
            # Caught up, waiting for the logs: nothing to hurry; set_ready_to_unfence wakes us.
            return self.heartbeat_interval_s
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
        self._liveness_restart.set()  # (re)open the stream with this epoch
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
        self._caught_up = self._caught_up or reply.is_caught_up
        if self.state is BrokerState.STARTING and reply.is_caught_up and self._ready_to_unfence:
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
        call = getattr(rpc.BrokerLifecycleStub(self._channel(endpoint)), method)
        try:
            reply = await call(request, timeout=self.request_timeout_s)
        except grpc.aio.AioRpcError as exc:
            self._hint = None
            self._next_controller += 1
            raise _Retry(f"{endpoint}: {exc.code().name}") from exc
        if reply.error_code == Errors.NOT_CONTROLLER:
            self._follow(reply.controller, endpoint)
            raise _Retry(f"{endpoint}: NOT_CONTROLLER ({reply.error_message})")
        if reply.error_code in retry_codes:
            raise _Retry(f"{error_name(reply.error_code)}: {reply.error_message}")
        self._hint = endpoint  # it answered as the active controller: keep using it
        if self._liveness_endpoint not in (None, endpoint):
            self._liveness_restart.set()  # the stream follows the active controller
        return reply

    def _channel(self, endpoint: str) -> grpc.aio.Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = aio_channel(
                endpoint, self.tls, _CHANNEL_OPTIONS)
        return channel

    def _follow(self, hint: pb.ControllerHint, endpoint: str) -> None:
        """A NOT_CONTROLLER answer from `endpoint`: try the controller it names next."""
        named = hint.controller_endpoint
        self._hint = named if named and named != endpoint else None
        if self._hint is None:
            self._next_controller += 1

    # -- the liveness stream ---------------------------------------------------------------------

    async def _keep_liveness_stream(self) -> None:
        """Keep one stream open to the active controller while the process lives."""
        loop = asyncio.get_running_loop()
        failures = 0
        while not self._closing:
            if self.broker_epoch < 0:
                self._liveness_restart.clear()
                await self._liveness_restart.wait()  # registered, or closing
                continue
            self._liveness_restart.clear()
            started = loop.time()
            try:
                outcome = await self._liveness_stream()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the stream take the lifecycle down
                log.warning("liveness stream failed: %r", exc)
                outcome = "failed"
            if outcome == "closed":
                return
            if outcome == "restart" or (
                    outcome == "ended" and loop.time() - started >= LIVENESS_MAX_BACKOFF_S):
                failures = 0  # it was open a while: open the next one at once
                continue
            # Never opened, or ended soon after it opened: back off, so that a controller or
            # proxy that keeps ending streams does not get a tight loop of them.
            failures += 1
            if outcome == "refused":
                delay = LIVENESS_REFUSED_S
            elif failures == 1:
                continue  # one more attempt at once: the first failure may be a stale hint
            else:
                delay = min(LIVENESS_MAX_BACKOFF_S, self.liveness_backoff_s * 2 ** (failures - 2))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._liveness_restart.wait(), delay)

    async def _liveness_stream(self) -> str:
        """One stream, from opening to its end: "closed" or "restart" (ended with a goodbye),
        "ended" (it was open; the controller ended it or its connection broke), "failed" or
        "refused" (it never opened; a refusal retrying soon will not change)."""
        endpoint = self._target()
        epoch = self.broker_epoch
        call = rpc.BrokerLifecycleStub(self._channel(endpoint)).BrokerLiveness()
        restart = asyncio.ensure_future(self._liveness_restart.wait())
        read: asyncio.Future[Any] | None = None
        opened = False
        try:
            await call.write(pb.BrokerLivenessRequest(broker_id=self.broker_id,
                                                      broker_epoch=epoch))
            read = asyncio.ensure_future(call.read())
            await asyncio.wait((read, restart), timeout=self.request_timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                return await self._say_goodbye(call, read) if restart.done() else "failed"
            reply = read.result()
            if reply is _EOF:
                return "failed"
            if reply.error_code == Errors.NOT_CONTROLLER:
                self._follow(reply.controller, endpoint)
                return "failed"
            if reply.error_code == Errors.STALE_BROKER_EPOCH:
                return "failed"  # a new registration is on its way; it restarts the stream
            if reply.error_code != 0:
                log.warning("liveness stream refused by %s: %s: %s; only "
                            "broker.session.timeout.ms can fence this broker meanwhile",
                            endpoint, error_name(reply.error_code), reply.error_message)
                return "refused"
            opened = True
            self._liveness_endpoint = endpoint
            self.liveness_streams += 1
            log.debug("liveness stream open to %s with epoch %d", endpoint, epoch)
            read = asyncio.ensure_future(call.read())
            await asyncio.wait((read, restart), return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                return await self._say_goodbye(call, read)
            reply = read.result()
            if reply is not _EOF and reply.error_code == Errors.NOT_CONTROLLER:
                self._follow(reply.controller, endpoint)
            log.info("liveness stream to %s ended by the controller", endpoint)
            return "ended"
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
                log.warning("%s has no BrokerLiveness (an older controller?): only "
                            "broker.session.timeout.ms can fence this broker", endpoint)
                return "refused"
            if not opened:  # unreachable: try another controller next
                self._hint = None
                self._next_controller += 1
            else:
                log.info("liveness stream to %s broke: %s", endpoint, exc.code().name)
            return "ended" if opened else "failed"
        finally:
            self._liveness_endpoint = None
            restart.cancel()
            if read is not None and not read.done():
                read.cancel()
            call.cancel()

    async def _say_goodbye(self, call: Any, read: asyncio.Future[Any]) -> str:
        """End the stream on purpose: the controller must not take it for this process's
        death."""
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError, TimeoutError):
            await call.write(pb.BrokerLivenessRequest(
                broker_id=self.broker_id, broker_epoch=self.broker_epoch, closing=True))
            await call.done_writing()
            await asyncio.wait_for(asyncio.shield(read), GOODBYE_TIMEOUT_S)
        return "closed" if self._closing else "restart"

    async def _end_liveness_stream(self) -> None:
        self._closing = True
        self._liveness_restart.set()
        task, self._liveness_task = self._liveness_task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 2 * GOODBYE_TIMEOUT_S)
        except TimeoutError:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    def _target(self) -> str:
        if self._hint:
            return self._hint
        leader = self._leader_endpoint()
        if leader:
            return leader
        return self.controllers[self._next_controller % len(self.controllers)]

