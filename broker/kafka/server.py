"""KafkaServer: one Kafka listener (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL) over asyncio.

Per connection: int32-size frames are read one after another; each request's handler is
started as soon as it is decoded (so handlers start in arrival order, which keeps an
idempotent producer's pipelined batches in order) and responses are written strictly in
request order, as Kafka's muted-socket processing guarantees. At most `max_in_flight`
requests per connection are being handled; the next frame is read once one is answered.

Who is calling: the client certificate's principal (SSL), User:ANONYMOUS (PLAINTEXT), or on a
SASL listener the user that authenticated (broker/kafka/sasl: nothing but ApiVersions and
SaslHandshake is served before). What a client may hold (broker/kafka/connection_limits.py):
connections (max.connections, max.connections.per.ip), bytes of request bodies in flight
(queued.max.request.bytes), a body must arrive within socket.request.body.timeout.ms once its
size is read, and a connection idle for connections.max.idle.ms is closed. An answer throttled
by a client quota (Reply.throttle_ms) is sent at once, and no further request is read from
that connection for the throttle time (KIP-219: the client is told and the channel muted).

Bad input closes only its own connection, with a rate-limited log line: a size above
socket.request.max.bytes (sasl.server.max.receive.size before authentication) or negative, a
truncated or late frame, a body that does not parse, an unsupported API or version (except
ApiVersions, answered with a v0 UNSUPPORTED_VERSION body). A handler that raises (a bug, never
bad input: errors are values) closes its connection too, logged once with its traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.api import Request
from broker.kafka.api_versions_api import unsupported_version_response
from broker.kafka.codec import (
    API_VERSIONS_KEY,
    DecodedRequest,
    FrameError,
    decode_request,
    encode_response,
    peek_head,
)
from broker.kafka.connection_limits import (
    Acceptor,
    ConnectionQuotas,
    RateLimitedLog,
    RequestMemoryPool,
    listening_sockets,
)
from broker.kafka.reply import Reply
from broker.kafka.sasl.authenticator import SaslAuthenticator, Step, answer_when_authenticated
from broker.kafka.sasl.settings import SaslSettings
from broker.kafka.versions import ApiKey, is_supported
from kraft.security.principal import PrincipalError, tls_peer_principal
from kraft.security.principal_mapping import DEFAULT_MAPPER, PrincipalMapper

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes
DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_IDLE_MS = 600000  # connections.max.idle.ms
DEFAULT_BODY_TIMEOUT_MS = 30000  # socket.request.body.timeout.ms: a client's request.timeout.ms
_SIZE = struct.Struct(">i")
_LINGER_S = 1.0
_WHOLE_BODY_BYTES = 1 << 20  # larger bodies are read in chunks (_read_in_chunks)
_CHUNK_BYTES = 1 << 20
_SASL_KEYS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


class RequestHandler(Protocol):
    async def handle(self, request: DecodedRequest, context: Request) -> Reply: ...


class _CloseConnection(Exception):
    """Bad input: the connection is closed after one (rate-limited) log line with this
    message."""


class _FailedAuthentication(_CloseConnection):
    """A failed SASL authentication: logged as one (rate-limited), not as bad input."""


class _SessionExpired(_CloseConnection):
    """A SASL session that ended without re-authentication (logged at INFO)."""


class _HandlerFailed(Exception):
    """A handler raised (a bug, logged with its traceback where it happened)."""


@dataclass(slots=True)
class _Answer:
    """One request's place in the answer order."""

    correlation_id: int
    reply: asyncio.Future[Reply]  # a done future for answers known at once
    raw: bool = False  # reply.response is a bare SASL token (after SaslHandshake v0)
    close: _CloseConnection | None = None  # close the connection after this answer


@dataclass(slots=True)
class _Connection:
    peer: str
    principal: str
    writer: asyncio.StreamWriter
    in_flight: asyncio.Semaphore
    sasl: SaslAuthenticator | None = None
    established: Callable[[], None] = lambda: None  # the login is done: frees its slot
    pending: deque[_Answer] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    reading_done: bool = False
    stop_reading: bool = False  # an answer closes the connection: read no further frame
    muted_until: float = 0.0  # loop time: a throttled answer mutes reading until then


async def _read_in_chunks(reader: asyncio.StreamReader, size: int) -> bytes:
    """A large body as the transport delivers it, joined once complete. readexactly would
    grow one buffer to the whole size by reallocation, and glibc keeps such freed buffers
    (its mmap threshold rises after the first), so each half-sent body an attacker leaves
    would add to the broker's RSS for good; chunks of a few hundred KiB are reused."""
    chunks: list[bytes] = []
    remaining = size
    try:
        while remaining:
            chunk = await reader.read(min(remaining, _CHUNK_BYTES))
            if not chunk:
                raise _CloseConnection(f"truncated frame: {size - remaining} of {size} bytes")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        # A failure's traceback keeps this frame until the cyclic GC runs: not the bytes.
        chunks.clear()


def _resolve(future: asyncio.Future[Reply], reply: Reply) -> None:
    if not future.done():  # not cancelled by the connection's end meanwhile
        future.set_result(reply)


class KafkaServer:
    def __init__(
        self,
        handler: RequestHandler,
        host: str = "0.0.0.0",
        port: int = 0,
        *,
        listener: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        connections_max_idle_ms: int = DEFAULT_MAX_IDLE_MS,
        principal_mapper: PrincipalMapper = DEFAULT_MAPPER,
        sasl: SaslSettings | None = None,
        quotas: ConnectionQuotas | None = None,
        memory: RequestMemoryPool | None = None,
        request_body_timeout_ms: int = DEFAULT_BODY_TIMEOUT_MS,
    ) -> None:
        """`sasl`: this is a SASL_PLAINTEXT / SASL_SSL listener. `quotas` and `memory` are
        the broker's, shared by its listeners (by default this listener's own, unlimited)."""
        self._handler = handler
        self._host = host
        self._port = port
        self.listener = listener
        self._ssl = ssl_context
        self._max_request_bytes = max_request_bytes
        self._max_in_flight = max_in_flight
        # connections.max.idle.ms -1: never idle.
        self._max_idle_s = connections_max_idle_ms / 1000 if connections_max_idle_ms >= 0 \
            else None
        self._body_timeout_s = request_body_timeout_ms / 1000
        self._principal_mapper = principal_mapper  # ssl.principal.mapping.rules
        self._sasl = sasl
        self.quotas = quotas or ConnectionQuotas()
        self.memory = memory or RequestMemoryPool()
        self._acceptor: Acceptor | None = None
        self._connections: set[asyncio.Task[None]] = set()
        where = f"Kafka listener {listener}"
        self.bad_input_log = RateLimitedLog(log, logging.WARNING, f"{where}: closed for bad input")
        self.failed_authentication_log = RateLimitedLog(
            log, logging.INFO, f"{where}: failed authentication")
        self.refused_log = RateLimitedLog(log, logging.WARNING, f"{where}: refusing")
        self.idle_log = RateLimitedLog(log, logging.INFO, f"{where}: closed")

    @property
    def port(self) -> int:
        return self._port

    @property
    def connections_closed_for_bad_input(self) -> int:
        """For tests and metrics."""
        return self.bad_input_log.events

    @property
    def failed_authentications(self) -> int:
        return self.failed_authentication_log.events

    async def start(self, accepting: bool = True) -> int:
        """Listen; the port (the one chosen by the OS when constructed with port 0). Without
        `accepting`, connections wait in the kernel's backlog until `accept()`: a broker binds
        its ports at start but serves once it has caught up with the metadata, as Kafka's
        enableRequestProcessing does, so no client sees a broker with an empty image."""
        sockets = await listening_sockets(self._host, self._port)
        self._port = sockets[0].getsockname()[1]
        self._acceptor = Acceptor(sockets, self.listener, self.quotas, self._accept, self._ssl,
                                  self.refused_log)
        if accepting:
            self._acceptor.start()
        log.info("Kafka listener %s on %s:%d%s", self.listener, self._host, self._port,
                 "" if accepting else " (accepting once caught up with the metadata)")
        return self._port

    def accept(self) -> None:
        """Start accepting connections (idempotent)."""
        if self._acceptor is not None:
            self._acceptor.start()

    async def close(self) -> None:
        if self._acceptor is not None:
            await self._acceptor.close()  # the accept loops and every connection
            self._acceptor = None
        for limited in (self.bad_input_log, self.failed_authentication_log, self.refused_log,
                        self.idle_log):
            limited.flush()

    @property
    def open_connections(self) -> int:
        """Client connections being served now."""
        return len(self._connections)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      established: Callable[[], None]) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer, established)
        finally:
            self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     established: Callable[[], None]) -> None:
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        sasl = None
        if self._sasl is not None:  # SASL_SSL: the SASL identity, not the certificate's
            principal = "User:ANONYMOUS"
            sasl = SaslAuthenticator(self._sasl, asyncio.get_running_loop().time)
        else:
            established()  # the TLS handshake, if any, is done
            ssl_object = writer.get_extra_info("ssl_object")
            try:
                principal = tls_peer_principal(
                    ssl_object.getpeercert(binary_form=True) if ssl_object is not None
                    else None, self._principal_mapper)
            except PrincipalError as exc:  # Kafka fails such a login: nothing is served
                self.refused_log.log(peer, str(exc))
                writer.close()
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(2):
                        await writer.wait_closed()
                return
        conn = _Connection(peer, principal, writer, asyncio.Semaphore(self._max_in_flight),
                           sasl, established)
        responder = asyncio.create_task(self._respond(conn))
        reading = asyncio.create_task(self._read(reader, conn))
        try:
            # Either side may end the connection: the reader at EOF or bad input, the
            # responder on a reply that asks to close, a handler failure or a write error.
            await asyncio.wait((responder, reading), return_when=asyncio.FIRST_EXCEPTION)
            if reading.done() and reading.exception() is None:
                # EOF: answer what was asked, then close. Waited on, not awaited: a client
                # gone meanwhile (a reset on the write) ends the connection like any other
                # responder failure, below, and must not escape as an unhandled error.
                await asyncio.wait((responder,))
        except asyncio.CancelledError:
            pass
        finally:
            for task in (reading, responder):
                task.cancel()
            for answer in conn.pending:
                answer.reply.cancel()
            for task in (reading, responder):
                with contextlib.suppress(BaseException):
                    await task
            closing = next((task.exception() for task in (reading, responder)
                            if not task.cancelled()
                            and isinstance(task.exception(), _CloseConnection)), None)
            if closing is not None:
                self._log_close(peer, closing)  # one line per connection
            if isinstance(closing, _FailedAuthentication):
                await self._linger(reader)
            writer.close()
            # Bounded: a TLS peer that never answers close_notify must not hold close().
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await writer.wait_closed()

    @staticmethod
    async def _linger(reader: asyncio.StreamReader) -> None:
        """After a failed authentication's answer, let the client close first (bounded): a
        TLS client that reads the answer and the close together may drop the answer
        (kafka-python does), and would retry instead of reporting the failure."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_LINGER_S):
                while await reader.read(65536):
                    pass

    def _release(self, size: int, _: object) -> None:
        self.memory.release(size)

    def _log_close(self, peer: str, exc: BaseException | None) -> None:
        if isinstance(exc, _SessionExpired):
            log.info("Kafka listener %s: closing %s: %s", self.listener, peer, exc)
        elif isinstance(exc, _FailedAuthentication):
            self.failed_authentication_log.log(peer, str(exc))
        else:
            self.bad_input_log.log(peer, str(exc))

    # ---- reading ----

    async def _read(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        try:
            while not conn.stop_reading:
                await self._unmuted(conn)
                frame = await self._read_frame(reader, conn)
                if frame is None:
                    return
                try:
                    await self._unmuted(conn)  # a throttle that began while it arrived
                    await conn.in_flight.acquire()
                    answer = self._start(frame, conn)
                except BaseException:
                    self.memory.release(len(frame))
                    raise
                # The body's bytes count against queued.max.request.bytes until answered.
                answer.reply.add_done_callback(functools.partial(self._release, len(frame)))
                conn.pending.append(answer)
                conn.ready.set()
                # Let the handler's first step run (a Produce's append, and the mute its
                # bytes may earn) before the next frame is read.
                await asyncio.sleep(0)
        except (ConnectionError, ssl.SSLError, OSError) as exc:
            log.debug("Kafka listener %s: %s: %s", self.listener, conn.peer, exc)
        finally:
            conn.reading_done = True
            conn.ready.set()

    @staticmethod
    def _mute(conn: _Connection, throttle_ms: int) -> None:
        until = asyncio.get_running_loop().time() + throttle_ms / 1000
        conn.muted_until = max(conn.muted_until, until)

    @staticmethod
    async def _unmuted(conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        while (delay := conn.muted_until - loop.time()) > 0:
            await asyncio.sleep(delay)

    async def _read_frame(
        self, reader: asyncio.StreamReader, conn: _Connection
    ) -> bytes | None:
        """The next frame; None when the client closed, or left the connection idle (nothing
        asked, nothing pending) for connections.max.idle.ms, as Kafka's selector does."""
        while True:
            try:
                # Not wait_for, which in 3.11 swallows a cancel that races a completed read;
                # and a timeout loses nothing: readexactly takes bytes only once all are there.
                async with asyncio.timeout(self._max_idle_s):
                    size_bytes = await reader.readexactly(4)
                break
            except TimeoutError:
                if not conn.pending:
                    self.idle_log.log(conn.peer, f"idle for {self._max_idle_s:.0f} s "
                                                 "(connections.max.idle.ms)")
                    return None
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise _CloseConnection("truncated frame size") from None
                return None  # the client closed the connection between requests
        size = _SIZE.unpack(size_bytes)[0]
        limit = self._max_request_bytes
        if conn.sasl is not None and not conn.sasl.authenticated:
            limit = conn.sasl.max_frame_bytes(limit)
            if size < 0 or size > limit:
                raise _FailedAuthentication(
                    f"Failing SASL authentication due to invalid receive size {size} (outside "
                    f"0..{limit}, sasl.server.max.receive.size)")
        if size < 0 or size > limit:
            raise _CloseConnection(
                f"request size {size} outside 0..{limit} (socket.request.max.bytes)")
        # No budget left: stop reading this connection until a request is answered.
        await self.memory.allocate(size)
        try:
            async with asyncio.timeout(self._body_timeout_s):
                if size <= _WHOLE_BODY_BYTES:
                    return await reader.readexactly(size)
                return await _read_in_chunks(reader, size)
        except asyncio.IncompleteReadError as exc:
            self.memory.release(size)
            raise _CloseConnection(
                f"truncated frame: {len(exc.partial)} of {size} bytes"
            ) from None
        except TimeoutError:
            self.memory.release(size)
            raise _CloseConnection(
                f"a {size}-byte request body did not arrive within "
                f"{self._body_timeout_s * 1000:.0f} ms (socket.request.body.timeout.ms)"
            ) from None
        except BaseException:
            self.memory.release(size)
            raise

    def _start(self, frame: bytes, conn: _Connection) -> _Answer:
        """Decode a frame and start its handler (no await: handlers start in order)."""
        if conn.sasl is not None:
            step = conn.sasl.receive(frame)
            if conn.sasl.authenticated or step.close is not None:
                conn.established()
            if not step.forward:
                return self._answer(step, conn)
            conn.principal = conn.sasl.principal or conn.principal
        try:
            head = peek_head(frame)
        except FrameError as exc:
            raise _CloseConnection(str(exc)) from None
        if head.api_key in _SASL_KEYS:  # not a SASL listener, or authenticated already
            return self._answer(answer_when_authenticated(head, frame), conn)
        if not is_supported(head.api_key, head.api_version):
            if head.api_key == API_VERSIONS_KEY:
                done: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
                done.set_result(Reply(unsupported_version_response()))
                return _Answer(head.correlation_id, done)
            raise _CloseConnection(
                f"unsupported api key {head.api_key} version {head.api_version}"
            )
        try:
            request = decode_request(frame)
        except FrameError as exc:
            raise _CloseConnection(
                f"api key {head.api_key} v{head.api_version} does not parse: {exc}"
            ) from None
        context = Request(
            client_id=request.client_id, listener=self.listener, peer=conn.peer,
            api_version=request.api_version, principal=conn.principal,
            mute=functools.partial(self._mute, conn),
        )
        return _Answer(request.correlation_id, asyncio.ensure_future(
            self._handler.handle(request, context)
        ))

    def _answer(self, step: Step, conn: _Connection) -> _Answer:
        """The answer the SASL front decided; a failed authentication is answered, and the
        connection closed, only after connection.failed.authentication.delay.ms."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Reply] = loop.create_future()
        result = Reply(step.raw if step.raw is not None else step.response)
        close: _CloseConnection | None = None
        if step.close is not None:
            conn.stop_reading = True
            kind = (_FailedAuthentication if step.failed
                    else _SessionExpired if step.expired else _CloseConnection)
            close = kind(step.close)
        if step.failed and self._sasl is not None:
            loop.call_later(self._sasl.failed_authentication_delay_ms / 1000,
                            _resolve, reply, result)
        else:
            reply.set_result(result)
        return _Answer(step.correlation_id, reply, raw=step.raw is not None, close=close)

    # ---- responding ----

    async def _respond(self, conn: _Connection) -> None:
        while True:
            while not conn.pending:
                if conn.reading_done:
                    return
                conn.ready.clear()
                await conn.ready.wait()
            answer = conn.pending[0]
            try:
                reply = await answer.reply
            except Exception as exc:
                log.exception("Kafka listener %s: closing %s: the handler of correlation id %d "
                              "failed", self.listener, conn.peer, answer.correlation_id)
                raise _HandlerFailed() from exc
            conn.pending.popleft()
            conn.in_flight.release()
            if answer.raw:
                conn.writer.write(_SIZE.pack(len(reply.response)) + reply.response)
                await conn.writer.drain()
            elif reply.response is not None:
                conn.writer.write(encode_response(answer.correlation_id, reply.response))
                await conn.writer.drain()
            if reply.throttle_ms > 0:
                self._mute(conn, reply.throttle_ms)
            if answer.close is not None:
                raise answer.close
            if reply.close:
                raise _CloseConnection("a request without response failed (acks=0)")
