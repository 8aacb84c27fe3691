"""The client half of the Raft transport: one grpc.aio channel per peer endpoint, a deadline
on every call and no hidden retries (the core owns retries). A call whose connection was refused
or reset — the peer's process is gone (or a middlebox reset the connection, which the core
confirms with one retry) — is reported as `unreachable`, which lets a follower start a pre-vote
soon instead of waiting for its fetch timeout. Every other failure is a plain one: a TLS
handshake failure, an UNAVAILABLE the server itself answered (a stopped node, a graceful
shutdown's "Cancelling all calls"), a Fetch stream the server ended with status OK, a deadline
(`is_unreachable` lists what each case looks like). After an UNAVAILABLE or an unreachable
the channel is rebuilt, so the next request dials anew: what it reports is never gRPC's cached
verdict.

Fetch travels on one long-lived stream per endpoint (`FetchStream`); its deadline is enforced
here per request, and a request that misses it cancels the stream, so a late answer can never
be taken for the next request's.

`contacts` keeps, per peer, when it was last heard from and when a request to it last failed,
for operators only (NodeStatus: which voters a node cannot reach); the core never reads it.

The fault hook (`blocked`) drops traffic to and from chosen nodes, like a network partition:
the caller sees a timeout, never a refusal. It is off unless a test turns it on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TypeAlias, cast

import grpc

from kraft.core.messages import (
    ApiVersionsRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    OutboundRequest,
    Response,
    UpdateRaftVoterRequest,
    VoteRequest,
)
from kraft.rpc import convert
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.tls import MESSAGE_SIZE_OPTIONS, TlsConfig, aio_channel

log = logging.getLogger(__name__)

# A timer firing this much later than due means the process stood still (SIGSTOP, a VM pause, a
# starved CPU) rather than was busy; what arrived meanwhile then gets one grace period to be
# read before a timeout counts. RaftNode applies the same rule to the core's timer.
STALL_S = 0.25
STALL_GRACE_S = 0.05


@contextlib.asynccontextmanager
async def stall_aware_timeout(seconds: float) -> AsyncIterator[None]:
    """asyncio.timeout, except that a timeout found far past due (the process stood still)
    first waits STALL_GRACE_S: the answer may be sitting in gRPC's queues, a few loop turns
    away, and a follower must not take its own stall for a hung leader."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(None) as timeout:
        due = loop.time() + seconds

        def expire() -> None:
            late = loop.time() - due > STALL_S
            timeout.reschedule(loop.time() + (STALL_GRACE_S if late else 0.0))

        handle = loop.call_at(due, expire)
        try:
            yield
        finally:
            handle.cancel()


CHANNEL_OPTIONS = [
    ("grpc.enable_retries", 0),
    # Each channel owns its connections: by default gRPC shares subchannels between channels
    # to the same target, so a rebuilt channel would go on using the old connection and its
    # reconnect backoff.
    ("grpc.use_local_subchannel_pool", 1),
    # A restarted peer must be reachable again within a fraction of an election timeout.
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
    *MESSAGE_SIZE_OPTIONS,
]

# gRPC reports every broken connection as UNAVAILABLE; only its details tell a dead peer from a
# refusing one. A call that never got a connection says "failed to connect to all addresses;
# last error: ..." and names the socket error; a call on an established connection that broke
# says "Stream removed (...)".
_CONNECT_FAILED = "failed to connect to all addresses"
_CONNECT_GONE = ("Connection refused", "Connection reset")
_STREAM_REMOVED = "Stream removed"
_STREAM_GONE = ("Socket closed", "Connection reset", "Broken pipe")
_CORE_INTERNAL = "Internal error from Core"


def is_unreachable(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a failed call says the peer's connection was refused or reset, i.e. its process
    is gone. What grpcio 1.85 reports on loopback, every one UNAVAILABLE
    (`tests/unit/test_transport.py` pins each against a real server):

    unreachable:
      nothing listens (no process, or kill -9 earlier):
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:H:P: Failed to connect
        to remote host: Connection refused"
      the peer was killed (SIGKILL) with a call or an idle stream open:
        "Stream removed (Socket closed)"
      a middlebox reset the connection (RST): "Stream removed (recvmsg:Connection reset by
        peer (104))"
    a plain failure:
      the server stopped gracefully (server.stop, SIGTERM): "Cancelling all calls"
      the server answered UNAVAILABLE itself: its own text (a stopped node: "node stopped")
      the server refused our certificate, or we spoke plaintext to TLS:
        "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:H:P: Socket closed"
      we refused the server's certificate, or spoke TLS to plaintext:
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:H:P: Tls handshake
        failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: ..."

    A killed process's sockets are closed with a FIN, so "Socket closed" on an established
    stream is what kill -9 looks like; during the connect it is a TLS peer hanging up on a
    handshake it refused. Anything not recognised (a later gRPC wording too) is a plain
    failure, which the fetch timeout still covers.

    One more, not UNAVAILABLE: a call started on a channel whose connection the peer's death
    has just closed can end INTERNAL "Internal error from Core" (grpcio 1.85, about one in six
    kill -9s between fetches on a loaded machine). It is counted as unreachable: the core
    confirms every unreachable with one retry sent at once, which reaches a live peer on a new
    connection, so a live peer is never deposed by it."""
    if exc.code() == grpc.StatusCode.INTERNAL:
        return (exc.details() or "") == _CORE_INTERNAL
    if exc.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    details = exc.details() or ""
    if details.startswith(_CONNECT_FAILED):
        return any(reason in details for reason in _CONNECT_GONE)
    if details.startswith(_STREAM_REMOVED):
        return any(reason in details for reason in _STREAM_GONE)
    return False


def sender_of(request: object) -> int:
    """The node id a Raft request comes from (every request names its sender)."""
    if isinstance(request, FetchRequest | FetchSnapshotRequest | VoteRequest):
        return request.replica_id
    if isinstance(request, BeginQuorumEpochRequest | EndQuorumEpochRequest):
        return request.leader_id
    return -1


@dataclass
class PeerContact:
    """Monotonic seconds (None: never) of a peer's last answer or request to this node, and of
    this node's last request to it that failed, with how it failed."""

    heard_at: float | None = None
    failed_at: float | None = None
    failure: str = ""


class RaftTransport:
    def __init__(
        self,
        on_response: Callable[[int, Response], None],
        on_failure: Callable[[int, bool, bool], None],  # (correlation id, unreachable, timed out)
        tls: TlsConfig | None = None,
    ) -> None:
        self.tls = tls  # the peers' controller listener is SSL
        self._on_response = on_response
        self._on_failure = on_failure
        self._channels: dict[str, tuple[grpc.aio.Channel, rpc.RaftStub]] = {}
        self._fetch_streams: dict[str, FetchStream] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.blocked: frozenset[int] = frozenset()
        self.contacts: dict[int, PeerContact] = {}

    def heard_from(self, node_id: int) -> None:
        if node_id >= 0:  # bootstrap servers of unknown id are negative
            self.contacts.setdefault(node_id, PeerContact()).heard_at = time.monotonic()

    def _failed(self, node_id: int, failure: str) -> None:
        if node_id >= 0:
            contact = self.contacts.setdefault(node_id, PeerContact())
            contact.failed_at, contact.failure = time.monotonic(), failure

    def send(self, request: OutboundRequest) -> None:
        task = asyncio.create_task(self._call(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, out: OutboundRequest) -> None:
        timeout = out.timeout_ms / 1000
        if out.destination in self.blocked:
            await asyncio.sleep(timeout)
            self._failed(out.destination, f"no answer within {timeout:g} s")
            self._on_failure(out.correlation_id, False, True)
            return
        stub = self._stub(out.endpoint)
        try:
            if isinstance(out.request, FetchRequest):
                reply = await self._fetch_stream(out.endpoint, stub).fetch(
                    convert.fetch_request_to_pb(out.request), timeout)
            elif isinstance(out.request, UpdateRaftVoterRequest):
                # The one request a voter sends to the Quorum service (rare: an endpoint moved).
                quorum = rpc.QuorumStub(self._channels[out.endpoint][0])
                reply = await quorum.UpdateRaftVoter(
                    convert.request_to_pb(out.request), timeout=timeout)
            else:
                method = {
                    VoteRequest: stub.Vote,
                    BeginQuorumEpochRequest: stub.BeginQuorumEpoch,
                    EndQuorumEpochRequest: stub.EndQuorumEpoch,
                    FetchSnapshotRequest: stub.FetchSnapshot,
                    ApiVersionsRequest: stub.ApiVersions,
                }[type(out.request)]
                reply = await method(convert.request_to_pb(out.request), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            unreachable = is_unreachable(exc)
            if unreachable or exc.code() == grpc.StatusCode.UNAVAILABLE:
                self._recreate(out.endpoint, stub)  # the confirming retry dials anew
            log.debug("%s to %s failed%s: %s %s", type(out.request).__name__, out.endpoint,
                      " (unreachable)" if unreachable else "", exc.code().name, exc.details())
            timed_out = exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            self._failed(out.destination, "connection refused or reset" if unreachable
                         else f"no answer within {timeout:g} s" if timed_out
                         else exc.code().name)
            self._on_failure(out.correlation_id, unreachable, timed_out)
            return
        except TimeoutError:
            log.debug("Fetch to %s timed out after %.3f s", out.endpoint, timeout)
            self._failed(out.destination, f"no answer within {timeout:g} s")
            self._on_failure(out.correlation_id, False, True)
            return
        if out.destination in self.blocked:
            self._on_failure(out.correlation_id, False, False)  # cut while in flight: lost
            return
        self.heard_from(out.destination)
        self._on_response(out.correlation_id, convert.response_from_pb(reply))

    def _stub(self, endpoint: str) -> rpc.RaftStub:
        entry = self._channels.get(endpoint)
        if entry is None:
            channel = aio_channel(endpoint, self.tls, CHANNEL_OPTIONS)
            entry = (channel, rpc.RaftStub(channel))
            self._channels[endpoint] = entry
        return entry[1]

    def _fetch_stream(self, endpoint: str, stub: rpc.RaftStub) -> FetchStream:
        stream = self._fetch_streams.get(endpoint)
        if stream is None:
            stream = self._fetch_streams[endpoint] = FetchStream(stub)
        return stream

    def _recreate(self, endpoint: str, stub: rpc.RaftStub) -> None:
        """Replace the channel to `endpoint` after an UNAVAILABLE on it, so that the next
        request dials anew and what it reports is news: gRPC would start it on a connection
        that just broke (failing with the same reset: a "confirmed" dead leader that is alive),
        or answer it from its reconnect backoff ("Connection refused" for a peer that is back).
        The core's backoff bounds how often this happens; a fresh channel also re-reads the
        TLS files. A late failure from a channel already replaced leaves the new one alone."""
        entry = self._channels.get(endpoint)
        if entry is None or entry[1] is not stub:
            return
        del self._channels[endpoint]
        stream = self._fetch_streams.pop(endpoint, None)
        if stream is not None:
            stream.close()
        task = asyncio.create_task(entry[0].close())  # type: ignore[call-arg]  # grpc-stubs 1.53 lags grpc 1.85
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for stream in self._fetch_streams.values():
            stream.close()
        self._fetch_streams.clear()
        for channel, _ in self._channels.values():
            await channel.close()  # type: ignore[call-arg]  # grpc-stubs 1.53 lags grpc 1.85
        self._channels.clear()


_FetchCall: TypeAlias = grpc.aio.StreamStreamCall[pb.FetchRequest, pb.FetchResponse]


class FetchStream:
    """Fetch requests to one endpoint over one bidirectional stream, one at a time.

    A stream that failed, ended or missed a deadline is cancelled and replaced by a new one on
    the next request: a request is never retried here (the core decides what to send next),
    and a late response is never read as the answer to a later request. A new request while
    one is in flight means the core gave up on the older one (its state changed): the stream
    is replaced rather than making the new request queue behind a long poll.
    """

    def __init__(self, stub: rpc.RaftStub) -> None:
        self._stub = stub
        self._call: _FetchCall | None = None
        self._busy = False

    async def fetch(self, request: pb.FetchRequest, timeout: float) -> pb.FetchResponse:
        """The response to `request`; raises AioRpcError (the stream failed) or TimeoutError."""
        if self._busy or self._call is None or self._call.done():
            self.close()
            self._call = self._stub.Fetch()
        call = self._call
        self._busy = True
        try:
            async with stall_aware_timeout(timeout):
                await call.write(request)
                reply = await call.read()
        except asyncio.InvalidStateError:  # the stream ended before this request was written
            self._drop(call)
            raise await _ended(call) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                self._drop(call)
                raise  # this task is being cancelled (the transport is closing)
            # A newer request replaced the stream: this one ends without an answer.
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.CANCELLED, grpc.aio.Metadata(), grpc.aio.Metadata(),
                "replaced by a newer Fetch",
            ) from None  # type: ignore[call-arg]  # grpc-stubs 1.53 lags grpc 1.85
        except BaseException:
            self._drop(call)
            raise
        if reply is grpc.aio.EOF:  # type: ignore[attr-defined]  # grpc-stubs 1.53 lags grpc 1.85
            self._drop(call)
            raise await _ended(call)
        if self._call is call:
            self._busy = False
        # Not EOF, so a FetchResponse (grpc-stubs types EOF as object, which absorbs the union).
        return cast(pb.FetchResponse, reply)

    def _drop(self, call: _FetchCall) -> None:
        if self._call is call:
            self.close()
        else:
            call.cancel()  # already replaced by a newer request's stream

    def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None
        self._busy = False


async def _ended(call: _FetchCall) -> grpc.aio.AioRpcError:
    """The error for a stream that ended between requests: its own status. A stream the server
    closed with status OK broke the one-answer-per-request contract but says nothing about the
    connection, so it is a plain failure (INTERNAL), never UNAVAILABLE."""
    code = await call.code()
    details = await call.details()
    if code == grpc.StatusCode.OK:
        code, details = grpc.StatusCode.INTERNAL, "the Fetch stream ended with status OK"
    return grpc.aio.AioRpcError(  # type: ignore[call-arg]  # grpc-stubs 1.53 lags grpc 1.85
        code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)
