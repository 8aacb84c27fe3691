"""KafkaServer: one Kafka listener (PLAINTEXT or SSL) over asyncio streams.

Per connection: int32-size frames are read one after another; each request's handler is
started as soon as it is decoded (so handlers start in arrival order, which keeps an
idempotent producer's pipelined batches in order) and responses are written strictly in
request order, as Kafka's muted-socket processing guarantees. At most `max_in_flight`
requests per connection are being handled; the next frame is read once one is answered.

Bad input closes only its own connection, with one log line: a size above
socket.request.max.bytes or negative, a truncated frame, a body that does not parse, an
unsupported API or version (except ApiVersions, answered with a v0 UNSUPPORTED_VERSION body).
A handler that raises (a bug, never bad input: errors are values) closes its connection
too, logged once with its traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections import deque
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
from broker.kafka.reply import Reply
from broker.kafka.versions import is_supported
from kraft.security.principal import PrincipalError, tls_peer_principal
from kraft.security.principal_mapping import DEFAULT_MAPPER, PrincipalMapper

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes
DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_IDLE_MS = 600000  # connections.max.idle.ms
_SIZE = struct.Struct(">i")


class RequestHandler(Protocol):
    async def handle(self, request: DecodedRequest, context: Request) -> Reply: ...


class _CloseConnection(Exception):
    """Bad input: the connection is closed after one log line with this message."""


class _HandlerFailed(Exception):
    """A handler raised (a bug, logged with its traceback where it happened)."""


@dataclass(slots=True)
class _Connection:
    peer: str
    principal: str
    writer: asyncio.StreamWriter
    in_flight: asyncio.Semaphore
    # Replies in request order; a done future for answers known at once.
    pending: deque[tuple[int, asyncio.Future[Reply]]] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    reading_done: bool = False


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
    ) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self.listener = listener
        self._ssl = ssl_context
        self._max_request_bytes = max_request_bytes
        self._max_in_flight = max_in_flight
        self._max_idle_s = connections_max_idle_ms / 1000
        self._principal_mapper = principal_mapper  # ssl.principal.mapping.rules
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.connections_closed_for_bad_input = 0  # for tests and metrics

    @property
    def port(self) -> int:
        return self._port

    async def start(self) -> int:
        """Listen; the port (the one chosen by the OS when constructed with port 0)."""
        self._server = await asyncio.start_server(
            self._accept, self._host, self._port, ssl=self._ssl,
            # TLS handshakes that never finish must not pile up.
            ssl_handshake_timeout=10.0 if self._ssl is not None else None,
        )
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("Kafka listener %s on %s:%d", self.listener, self._host, self._port)
        return self._port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def open_connections(self) -> int:
        """Client connections being served now."""
        return len(self._connections)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        ssl_object = writer.get_extra_info("ssl_object")
        try:
            principal = tls_peer_principal(
                ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None,
                self._principal_mapper)
        except PrincipalError as exc:  # Kafka fails such a login: nothing is served
            log.warning("Kafka listener %s: refusing %s: %s", self.listener, peer, exc)
            writer.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await writer.wait_closed()
            return
        conn = _Connection(peer, principal, writer, asyncio.Semaphore(self._max_in_flight))
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
            for _, reply in conn.pending:
                reply.cancel()
            for task in (reading, responder):
                with contextlib.suppress(BaseException):
                    await task
            for task in (reading, responder):
                if not task.cancelled() and isinstance(task.exception(), _CloseConnection):
                    self.connections_closed_for_bad_input += 1
                    log.warning("Kafka listener %s: closing %s: %s",
                                self.listener, peer, task.exception())
                    break  # one line per connection
            writer.close()
            # Bounded: a TLS peer that never answers close_notify must not hold close().
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await writer.wait_closed()

    # ---- reading ----

    async def _read(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        try:
            while True:
                frame = await self._read_frame(reader, conn)
                if frame is None:
                    return
                await conn.in_flight.acquire()
                conn.pending.append(self._start(frame, conn))
                conn.ready.set()
        except (ConnectionError, ssl.SSLError, OSError) as exc:
            log.debug("Kafka listener %s: %s: %s", self.listener, conn.peer, exc)
        finally:
            conn.reading_done = True
            conn.ready.set()

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
                    log.info("Kafka listener %s: closing %s: idle for %.0f s",
                             self.listener, conn.peer, self._max_idle_s)
                    return None
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise _CloseConnection("truncated frame size") from None
                return None  # the client closed the connection between requests
        size = _SIZE.unpack(size_bytes)[0]
        if size < 0 or size > self._max_request_bytes:
            raise _CloseConnection(
                f"request size {size} outside 0..{self._max_request_bytes} "
                "(socket.request.max.bytes)"
            )
        try:
            return await reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            raise _CloseConnection(
                f"truncated frame: {len(exc.partial)} of {size} bytes"
            ) from None

    def _start(self, frame: bytes, conn: _Connection) -> tuple[int, asyncio.Future[Reply]]:
        """Decode a frame and start its handler (no await: handlers start in order)."""
        try:
            head = peek_head(frame)
        except FrameError as exc:
            raise _CloseConnection(str(exc)) from None
        if not is_supported(head.api_key, head.api_version):
            if head.api_key == API_VERSIONS_KEY:
                done: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
                done.set_result(Reply(unsupported_version_response()))
                return head.correlation_id, done
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
        )
        return request.correlation_id, asyncio.ensure_future(
            self._handler.handle(request, context)
        )

    # ---- responding ----

    async def _respond(self, conn: _Connection) -> None:
        while True:
            while not conn.pending:
                if conn.reading_done:
                    return
                conn.ready.clear()
                await conn.ready.wait()
            correlation_id, future = conn.pending[0]
            try:
                reply = await future
            except Exception as exc:
                log.exception("Kafka listener %s: closing %s: the handler of correlation id %d "
                              "failed", self.listener, conn.peer, correlation_id)
                raise _HandlerFailed() from exc
            conn.pending.popleft()
            conn.in_flight.release()
            if reply.response is not None:
                conn.writer.write(encode_response(correlation_id, reply.response))
                await conn.writer.drain()
            if reply.close:
                raise _CloseConnection("a request without response failed (acks=0)")
