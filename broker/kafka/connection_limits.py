"""What one broker's Kafka listeners let clients hold (kafka-security.md §6, Kafka's
SocketServer and ConnectionQuotas), before any API is decoded:

* `max.connections` across the broker's listeners: at the limit the acceptor waits (the kernel
  keeps new connections in the listen backlog) until one closes; the inter-broker listener is
  exempt, so replication always gets in.
* `max.connections.per.ip` (+ `max.connections.per.ip.overrides`): a connection over its
  address's limit is closed as soon as it is accepted.
* `queued.max.request.bytes`: a broker-wide budget for request bodies being received or
  handled (Kafka's non-strict SimpleMemoryPool: a body is admitted while any budget is left, so
  one larger than the budget still gets in; with none left, connections stop reading until a
  request is answered). <= 0: no budget (Kafka's default).
* RateLimitedLog: the first closed connection logs a line; more within the interval become one
  line with their count, so a flood of bad frames cannot flood the log.

The body deadline and connections.max.idle.ms are per connection: broker/kafka/server.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from types import MappingProxyType

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1  # Kafka's default max.connections / max.connections.per.ip
LOG_INTERVAL_S = 10.0
_BACKLOG = 128
_ACCEPT_RETRY_S = 1.0  # asyncio's own pause after EMFILE/ENFILE


class TooManyConnections(Exception):
    """A connection over max.connections.per.ip for its address."""


def ip_key(address: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 as IPv4, IPv6 compressed, zone kept."""
    bare, _, zone = address.partition("%")
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip) + (f"%{zone}" if zone else "")


def resolve_overrides(overrides: Mapping[str, int]) -> Mapping[str, int]:
    """max.connections.per.ip.overrides with host names resolved to their addresses once, at
    start, as Kafka does (InetAddress.getByName). Raises ValueError (one line) for a name
    that does not resolve."""
    resolved: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            resolved[str(ipaddress.ip_address(host))] = limit
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ValueError(f"max.connections.per.ip.overrides names {host}, which does not "
                             f"resolve ({exc.strerror}): use its IP address") from None
        for info in infos:
            resolved[ip_key(str(info[4][0]))] = limit
    return MappingProxyType(resolved)


class ConnectionQuotas:
    """The broker's connection counts (one instance shared by its Kafka listeners)."""

    def __init__(self, max_connections: int = UNLIMITED, max_per_ip: int = UNLIMITED,
                 per_ip_overrides: Mapping[str, int] | None = None,
                 protected_listeners: Collection[str] = ()) -> None:
        if max_connections < 0 or max_per_ip < 0:
            raise ValueError("connection limits must be >= 0")
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self._overrides = {ip_key(host): n for host, n in (per_ip_overrides or {}).items()}
        self._protected = frozenset(protected_listeners)
        self._per_ip: dict[str, int] = {}
        self.total = 0
        self._slot_free = asyncio.Event()

    def limit_for(self, ip: str) -> int:
        return self._overrides.get(ip_key(ip), self.max_per_ip)

    def count(self, ip: str) -> int:
        return self._per_ip.get(ip_key(ip), 0)

    async def wait_for_slot(self, listener: str) -> None:
        """Return once `listener` may accept a connection under max.connections."""
        if listener in self._protected:
            return
        while self.total >= self.max_connections:
            self._slot_free.clear()
            await self._slot_free.wait()

    def register(self, ip: str) -> None:
        """Count an accepted connection; TooManyConnections over its address's limit."""
        key = ip_key(ip)
        count = self._per_ip.get(key, 0)
        limit = self._overrides.get(key, self.max_per_ip)
        if count >= limit:
            raise TooManyConnections(
                f"{key} already has {count} connection(s) (max.connections.per.ip"
                f"{'.overrides' if key in self._overrides else ''} {limit})")
        self._per_ip[key] = count + 1
        self.total += 1

    def release(self, ip: str) -> None:
        key = ip_key(ip)
        count = self._per_ip.get(key, 0)
        if count <= 1:
            self._per_ip.pop(key, None)
        else:
            self._per_ip[key] = count - 1
        self.total = max(0, self.total - 1)
        self._slot_free.set()


class RequestMemoryPool:
    """queued.max.request.bytes: bytes of request bodies admitted and not yet answered."""

    def __init__(self, max_bytes: int = -1) -> None:
        self.max_bytes = max_bytes
        self.available = max_bytes
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def unlimited(self) -> bool:
        return self.max_bytes <= 0

    @property
    def waiting(self) -> int:
        return sum(1 for _, future in self._waiters if not future.done())

    async def allocate(self, size: int) -> None:
        """Admit a body of `size` bytes, waiting (first come, first served) while no budget
        is left."""
        if self.unlimited:
            return
        while self._waiters and self._waiters[0][1].done():
            self._waiters.popleft()  # waiters that went away
        if not self._waiters and self.available > 0:
            self.available -= size
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((size, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(size)  # admitted as the waiter went away
            raise

    def release(self, size: int) -> None:
        if self.unlimited:
            return
        self.available += size
        while self._waiters and self.available > 0:
            waiting, future = self._waiters.popleft()
            if future.done():
                continue
            self.available -= waiting
            future.set_result(None)


class RateLimitedLog:
    """One kind of event (a connection closed for bad input, a failed authentication, a
    refused connection): the first after a quiet interval is logged at once; later ones in the
    interval are counted and logged as one line when it ends."""

    def __init__(self, logger: logging.Logger, level: int, what: str,
                 interval_s: float = LOG_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._level = level
        self._what = what
        self._interval_s = interval_s
        self._clock = clock
        self._window_end = float("-inf")
        self._suppressed = 0
        self._last = ""
        self._timer: asyncio.TimerHandle | None = None
        self.events = 0

    def log(self, peer: str, reason: str) -> None:
        self.events += 1
        now = self._clock()
        if now >= self._window_end:
            self.flush()
            self._logger.log(self._level, "%s: %s: %s", self._what, peer, reason)
            self._window_end = now + self._interval_s
            return
        self._suppressed += 1
        self._last = f"{peer}: {reason}"
        if self._timer is None:
            with contextlib.suppress(RuntimeError):  # no running loop: flushed by the caller
                self._timer = asyncio.get_running_loop().call_later(
                    self._window_end - now, self.flush)

    def flush(self) -> None:
        """Log the count of the events held back, if any; a new interval starts then, so a
        steady flood makes one line per interval."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._suppressed:
            self._logger.log(self._level, "%s: %d more in the last %.0f s (the last: %s)",
                             self._what, self._suppressed, self._interval_s, self._last)
            self._suppressed = 0
            self._window_end = self._clock() + self._interval_s


# ---- the acceptor ----

# (reader, writer, established): the handler calls `established` once the client has
# authenticated (or needs no authentication), which frees its establishment slot.
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Callable[[], None]],
                   Awaitable[None]]
ESTABLISHING = 16  # connections in their TLS handshake or SASL login at once, per listener
ESTABLISH_SLOT_S = 1.0  # the longest one connection holds its establishment slot


class _Slot:
    """One establishment slot, given back once (established, closed, or after a second)."""

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self._semaphore: asyncio.Semaphore | None = semaphore
        self._timer = asyncio.get_running_loop().call_later(ESTABLISH_SLOT_S, self.release)

    def release(self) -> None:
        if self._semaphore is not None:
            self._semaphore.release()
            self._semaphore = None
            self._timer.cancel()


# Listening sockets a launcher bound before this process started serving (kraft-server --dev
# binds the Kafka port before it imports the node: a client connecting during the start-up
# waits in the backlog instead of being refused and backing off), by the (host, port) the
# listener's config names.
_INHERITED: dict[tuple[str, int], socket.socket] = {}


def inherit_listening_socket(host: str, port: int, sock: socket.socket) -> None:
    """Have the listener configured as host:port use `sock`, already bound and listening."""
    _INHERITED[(host, port)] = sock


async def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for host:port, as asyncio.start_server makes
    them (every address of the host; an empty host: every interface), or the one a launcher
    handed over for it (inherit_listening_socket)."""
    inherited = _INHERITED.pop((host, port), None)
    if inherited is not None:
        inherited.setblocking(False)
        return [inherited]
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, type_, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, type_, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(_BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Acceptor:
    """Accepts on a listener's sockets under the broker's ConnectionQuotas, does the TLS
    handshake (bounded) and hands each connection to `handler`.

    At most ESTABLISHING connections are being established (TLS handshake, SASL login) at
    once; the next is accepted when one is done, or has had its second. A hundred clients
    connecting together then cost the event loop a few handshakes per turn instead of a
    hundred in a row, which would stall every other connection's requests (a TLS handshake
    and a login are each a fraction of a millisecond to a few of CPU)."""

    def __init__(self, sockets: list[socket.socket], listener: str, quotas: ConnectionQuotas,
                 handler: Handler, ssl_context: ssl.SSLContext | None,
                 refused: RateLimitedLog) -> None:
        self._sockets = sockets
        self._listener = listener
        self._quotas = quotas
        self._handler = handler
        self._ssl = ssl_context
        self._refused = refused
        self._loops: list[asyncio.Task[None]] = []
        self.connections: set[asyncio.Task[None]] = set()
        self._establishing = asyncio.Semaphore(ESTABLISHING)

    def start(self) -> None:
        if not self._loops:
            self._loops = [asyncio.create_task(self._accept(sock)) for sock in self._sockets]

    async def close(self) -> None:
        tasks = [*self._loops, *self.connections]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sock in self._sockets:
            sock.close()

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._quotas.wait_for_slot(self._listener)
            await self._establishing.acquire()
            try:
                client, address = await loop.sock_accept(sock)
            except OSError as exc:  # EMFILE and the like: wait, as asyncio's server does
                self._establishing.release()
                log.error("Kafka listener %s: accept failed: %s", self._listener, exc)
                await asyncio.sleep(_ACCEPT_RETRY_S)
                continue
            except BaseException:
                self._establishing.release()
                raise
            ip = ip_key(str(address[0]))
            slot = _Slot(self._establishing)
            try:
                self._quotas.register(ip)
            except TooManyConnections as exc:
                slot.release()
                client.close()
                self._refused.log(f"{ip}:{address[1]}", str(exc))
                continue
            task = loop.create_task(self._connection(client, ip, slot))
            self.connections.add(task)
            task.add_done_callback(self.connections.discard)

    async def _connection(self, client: socket.socket, ip: str, slot: _Slot) -> None:
        loop = asyncio.get_running_loop()
        try:
            reader = asyncio.StreamReader(limit=2**16)
            protocol = asyncio.StreamReaderProtocol(reader)
            try:
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol, client, ssl=self._ssl,
                    # TLS handshakes that never finish must not pile up.
                    ssl_handshake_timeout=10.0 if self._ssl is not None else None)
            except (OSError, ssl.SSLError, TimeoutError) as exc:
                client.close()
                log.debug("Kafka listener %s: %s: no connection: %s", self._listener, ip, exc)
                return
            except BaseException:  # the listener closing during the handshake
                client.close()
                raise
            await self._handler(reader, asyncio.StreamWriter(transport, protocol, reader, loop),
                                slot.release)
        finally:
            slot.release()
            self._quotas.release(ip)
