"""The Raft transport against real grpc.aio servers on loopback: Fetch answers in order on one
stream, a missed deadline cancels the stream (a late answer is never taken for the next
request's), and which failures are `unreachable` (the peer's connection was refused or reset,
so a follower may fail over fast) and which are plain failures. Each case is produced for
real: a port nothing listens on, a leader process killed with SIGKILL, a middlebox that resets
the connection, a graceful server stop, TLS that does not match, a server that answers
UNAVAILABLE itself or ends the Fetch stream with status OK."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    OutboundRequest,
    Response,
    VoteRequest,
)
from kraft.node.transport import RaftTransport, is_unreachable, stall_aware_timeout
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.certs import make_test_certs
from kraft.security.tls import TlsConfig, add_port

SLOW_OFFSET = 666  # the fake leader never answers this request (a long poll that never ends)
LONG_MS = 30_000  # a deadline no test waits for: a failure must come long before it
PROMPT_S = 5.0  # how long a test waits for an outcome that is due at once


class FakeLeader(rpc.RaftServicer):
    """Answers every Fetch with its fetch offset as the high watermark. `mode` "end" closes the
    stream with status OK instead of answering, "unavailable" answers UNAVAILABLE itself (as
    a stopped node does)."""

    def __init__(self, mode: str = "answer") -> None:
        self.mode = mode
        self.streams = 0
        self.holding = asyncio.Event()  # a slow request arrived

    async def Fetch(
        self, request_iterator: AsyncIterator[pb.FetchRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.FetchResponse]:
        self.streams += 1
        async for request in request_iterator:
            if self.mode == "end":
                return
            if self.mode == "unavailable":
                await context.abort(grpc.StatusCode.UNAVAILABLE, "node stopped")
            if request.fetch_offset == SLOW_OFFSET:
                self.holding.set()
                print("holding", flush=True)  # tells the parent of a leader process
                await asyncio.Future()  # until the stream is cancelled
            yield pb.FetchResponse(high_watermark=request.fetch_offset)


class Outcomes:
    def __init__(self) -> None:
        self.items: dict[int, Response | str] = {}
        self.changed = asyncio.Event()

    def response(self, correlation_id: int, response: Response) -> None:
        self.items[correlation_id] = response
        self.changed.set()

    def failure(self, correlation_id: int, unreachable: bool, timed_out: bool) -> None:
        self.items[correlation_id] = (
            "unreachable" if unreachable else "timed out" if timed_out else "failed")
        self.changed.set()

    async def get(self, correlation_id: int, within_s: float = PROMPT_S) -> Response | str:
        async with asyncio.timeout(within_s):
            while correlation_id not in self.items:
                self.changed.clear()
                await self.changed.wait()
        return self.items[correlation_id]


def fetch(
    correlation_id: int, endpoint: str, offset: int, timeout_ms: int = 2000
) -> OutboundRequest:
    request = FetchRequest(None, 2, 1, offset, 1, 0, 1024)
    return OutboundRequest(correlation_id, 1, endpoint, request, timeout_ms)


def vote(correlation_id: int, endpoint: str) -> OutboundRequest:
    request = VoteRequest(None, 2, 2, 1, 0, True)
    return OutboundRequest(correlation_id, 1, endpoint, request, LONG_MS)


@dataclass
class Wiring:
    server: grpc.aio.Server
    leader: FakeLeader
    endpoint: str
    outcomes: Outcomes
    transport: RaftTransport


@contextlib.asynccontextmanager
async def wired(
    leader: FakeLeader | None = None,
    server_tls: TlsConfig | None = None,
    client_tls: TlsConfig | None = None,
) -> AsyncIterator[Wiring]:
    """A fake leader on an ephemeral loopback port and a transport to it; both closed after."""
    server = grpc.aio.server()
    leader = leader or FakeLeader()
    rpc.add_RaftServicer_to_server(leader, server)
    port = add_port(server, "127.0.0.1:0", server_tls)
    await server.start()
    outcomes = Outcomes()
    transport = RaftTransport(outcomes.response, outcomes.failure, client_tls)
    try:
        yield Wiring(server, leader, f"127.0.0.1:{port}", outcomes, transport)
    finally:
        await transport.close()
        await server.stop(None)


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def high_watermark(outcome: Response | str) -> int:
    assert isinstance(outcome, FetchResponse), outcome
    return outcome.high_watermark


def free_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_in_this_process() -> None:
    """The body of a leader process (`leader_process`): prints its port, serves until killed."""

    async def serve() -> None:
        server = grpc.aio.server()
        rpc.add_RaftServicer_to_server(FakeLeader(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await asyncio.Future()

    asyncio.run(serve())


@contextlib.asynccontextmanager
async def leader_process() -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A fake leader in its own process (so it can be killed with SIGKILL), and its endpoint."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "from tests.unit.test_transport import serve_in_this_process; serve_in_this_process()",
        stdout=asyncio.subprocess.PIPE, cwd=root, env=env)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        yield process, f"127.0.0.1:{int(line)}"
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def kill_9(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGKILL)
    assert await process.wait() == -signal.SIGKILL


class ResettingRelay:
    """A TCP relay in front of a port, standing for a middlebox: `reset()` aborts every
    connection it carries with an RST (SO_LINGER 0), as a middlebox reset or a conntrack flush
    does, while the server behind it stays up."""

    def __init__(self, port: int) -> None:
        self._target = port
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> ResettingRelay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.reset()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        self._writers += [writer, up_writer]

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, RuntimeError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def reset(self) -> None:
        for writer in self._writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self._writers.clear()


@in_loop
async def test_fetches_share_one_stream_and_get_their_own_answers() -> None:
    async with wired() as w:
        for i in range(1, 6):
            w.transport.send(fetch(i, w.endpoint, offset=i * 10))
            assert high_watermark(await w.outcomes.get(i)) == i * 10
        assert w.leader.streams == 1


@in_loop
async def test_a_missed_deadline_replaces_the_stream_and_drops_the_late_answer() -> None:
    async with wired() as w:
        w.transport.send(fetch(1, w.endpoint, offset=SLOW_OFFSET, timeout_ms=100))
        assert await w.outcomes.get(1) == "timed out"  # evidence of a hung leader (the core)
        w.transport.send(fetch(2, w.endpoint, offset=20))
        assert high_watermark(await w.outcomes.get(2)) == 20  # not the slow request's 666
        assert w.leader.streams == 2


@in_loop
async def test_a_refused_connection_is_unreachable() -> None:
    outcomes = Outcomes()
    transport = RaftTransport(outcomes.response, outcomes.failure)
    endpoint = f"127.0.0.1:{free_port()}"
    try:
        transport.send(fetch(1, endpoint, offset=10, timeout_ms=LONG_MS))
        assert await outcomes.get(1) == "unreachable"
        transport.send(vote(2, endpoint))
        assert await outcomes.get(2) == "unreachable"
    finally:
        await transport.close()


@in_loop
async def test_a_peer_that_comes_back_is_reached_by_the_next_request() -> None:
    """Every request dials anew after a refusal: a channel left in gRPC's reconnect backoff
    would answer "Connection refused" from its cache for up to the backoff after the peer is
    back (the survivor's first Fetch to a restarted node that was just elected, which the
    core's growing backoff then turns into hundreds of ms without a commit)."""
    outcomes = Outcomes()
    transport = RaftTransport(outcomes.response, outcomes.failure)
    port = free_port()
    endpoint = f"127.0.0.1:{port}"
    server = grpc.aio.server()
    try:
        for i in range(1, 5):
            transport.send(vote(i, endpoint))
            assert await outcomes.get(i) == "unreachable"
        # What NodeStatus tells operators: node 1 was never heard from, its last try refused.
        contact = transport.contacts[1]
        assert (contact.heard_at, contact.failure) == (None, "connection refused or reset")
        rpc.add_RaftServicer_to_server(FakeLeader(), server)
        assert server.add_insecure_port(endpoint) == port
        await server.start()
        transport.send(fetch(5, endpoint, offset=50))
        assert high_watermark(await outcomes.get(5)) == 50
        assert contact.heard_at is not None and contact.failed_at is not None
        assert contact.heard_at > contact.failed_at
    finally:
        await transport.close()
        await server.stop(None)


async def _until_not_ready(channel: grpc.aio.Channel) -> None:
    """Until the channel has noticed that its connection is gone."""
    state = channel.get_state()
    while state == grpc.ChannelConnectivity.READY:
        await channel.wait_for_state_change(state)
        state = channel.get_state()


@in_loop
async def test_a_leader_killed_mid_fetch_is_unreachable_at_once() -> None:
    """kill -9 with a long poll parked at the leader: the kernel closes the dead process's
    socket ("Stream removed (Socket closed)"), then connections are refused. Fast failover
    depends on both being unreachable."""
    outcomes = Outcomes()
    transport = RaftTransport(outcomes.response, outcomes.failure)
    try:
        async with leader_process() as (process, endpoint):
            transport.send(fetch(1, endpoint, offset=10))
            assert high_watermark(await outcomes.get(1)) == 10
            transport.send(fetch(2, endpoint, offset=SLOW_OFFSET, timeout_ms=LONG_MS))
            assert process.stdout is not None
            assert await asyncio.wait_for(process.stdout.readline(), PROMPT_S) == b"holding\n"
            await kill_9(process)
            assert await outcomes.get(2) == "unreachable"
            transport.send(fetch(3, endpoint, offset=30, timeout_ms=LONG_MS))
            assert await outcomes.get(3) == "unreachable"  # connection refused
    finally:
        await transport.close()


@in_loop
async def test_a_leader_killed_between_fetches_is_unreachable() -> None:
    """kill -9 while the Fetch stream is idle: the next request finds the stream already ended
    with the dead connection's status."""
    outcomes = Outcomes()
    transport = RaftTransport(outcomes.response, outcomes.failure)
    try:
        async with leader_process() as (process, endpoint):
            transport.send(fetch(1, endpoint, offset=10))
            assert high_watermark(await outcomes.get(1)) == 10
            await kill_9(process)
            channel, _ = transport._channels[endpoint]
            await asyncio.wait_for(_until_not_ready(channel), PROMPT_S)  # saw the socket close
            transport.send(fetch(2, endpoint, offset=20, timeout_ms=LONG_MS))
            assert await outcomes.get(2) == "unreachable"
    finally:
        await transport.close()


def test_grpcs_internal_error_from_core_counts_as_unreachable() -> None:
    """A call started on a channel the peer's death just closed can end INTERNAL "Internal
    error from Core" (one kill -9 between fetches in six, loaded): unreachable, so the core's
    confirming retry decides; any other INTERNAL stays a plain failure."""
    def error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)

    assert is_unreachable(error(grpc.StatusCode.INTERNAL, "Internal error from Core"))
    assert not is_unreachable(error(grpc.StatusCode.INTERNAL, "Exception serializing request!"))
    assert not is_unreachable(error(grpc.StatusCode.UNAVAILABLE, "node stopped"))


RESET_ROUNDS = 10


@in_loop
async def test_a_reset_connection_is_unreachable_and_the_retry_gets_through() -> None:
    """A middlebox reset (RST) looks like a dead peer here; the core confirms it with one
    retry sent at once, which must reach the leader that was alive all along: on a fresh
    connection, never on the one that was just reset (where it would fail too, ~1 time in 30,
    "Stream removed (Transport closed (... Connection reset by peer ...))", and "confirm" a
    dead leader that is not)."""
    async with wired() as w:
        port = int(w.endpoint.rsplit(":", 1)[1])
        async with ResettingRelay(port) as relay:
            endpoint = f"127.0.0.1:{relay.port}"
            for i in range(0, 3 * RESET_ROUNDS, 3):
                w.transport.send(fetch(i, endpoint, offset=10))
                assert high_watermark(await w.outcomes.get(i)) == 10
                w.leader.holding.clear()
                w.transport.send(fetch(i + 1, endpoint, offset=SLOW_OFFSET, timeout_ms=LONG_MS))
                await asyncio.wait_for(w.leader.holding.wait(), PROMPT_S)
                relay.reset()
                assert await w.outcomes.get(i + 1) == "unreachable"
                w.transport.send(fetch(i + 2, endpoint, offset=30))  # the confirming retry
                assert high_watermark(await w.outcomes.get(i + 2)) == 30, f"round {i // 3}"


@in_loop
async def test_a_graceful_stop_is_a_plain_failure_then_the_connection_is_refused() -> None:
    """A server that stops gracefully cancels its calls itself ("Cancelling all calls"): the
    follower hears at once but learns nothing about the connection; the next Fetch is refused."""
    async with wired() as w:
        w.transport.send(fetch(1, w.endpoint, offset=10))
        assert high_watermark(await w.outcomes.get(1)) == 10
        w.transport.send(fetch(2, w.endpoint, offset=SLOW_OFFSET, timeout_ms=LONG_MS))
        await asyncio.wait_for(w.leader.holding.wait(), PROMPT_S)
        await w.server.stop(None)
        assert await w.outcomes.get(2) == "failed"
        w.transport.send(fetch(3, w.endpoint, offset=30, timeout_ms=LONG_MS))
        assert await w.outcomes.get(3) == "unreachable"  # connection refused


@pytest.mark.parametrize("mismatch", [
    "server refuses the client's certificate",
    "client refuses the server's certificate",
    "plaintext client, TLS server",
    "TLS client, plaintext server",
])
@in_loop
async def test_a_tls_failure_is_a_plain_failure(tmp_path: Path, mismatch: str) -> None:
    """A bad certificate fails every connect at once, as UNAVAILABLE, but the peer is alive:
    a plain failure, so a follower does not fail over on it."""
    ours = make_test_certs(tmp_path / "ours", ["leader", "follower"])
    theirs = make_test_certs(tmp_path / "theirs", ["intruder"])
    server_tls: TlsConfig | None = TlsConfig(str(ours["leader"]), str(ours["ca"]))
    client_tls: TlsConfig | None = {
        "server refuses the client's certificate":
            TlsConfig(str(theirs["intruder"]), str(ours["ca"])),
        "client refuses the server's certificate":
            TlsConfig(str(ours["follower"]), str(theirs["ca"])),
        "plaintext client, TLS server": None,
        "TLS client, plaintext server": TlsConfig(str(ours["follower"]), str(ours["ca"])),
    }[mismatch]
    if mismatch == "TLS client, plaintext server":
        server_tls = None
    async with wired(server_tls=server_tls, client_tls=client_tls) as w:
        w.transport.send(fetch(1, w.endpoint, offset=10, timeout_ms=LONG_MS))
        assert await w.outcomes.get(1) == "failed"
        w.transport.send(vote(2, w.endpoint))
        assert await w.outcomes.get(2) == "failed"
        assert w.leader.streams == 0


@in_loop
async def test_matching_tls_gets_answers(tmp_path: Path) -> None:
    certs = make_test_certs(tmp_path, ["leader", "follower"])
    async with wired(server_tls=TlsConfig(str(certs["leader"]), str(certs["ca"])),
                     client_tls=TlsConfig(str(certs["follower"]), str(certs["ca"]))) as w:
        w.transport.send(fetch(1, w.endpoint, offset=10))
        assert high_watermark(await w.outcomes.get(1)) == 10


@in_loop
async def test_a_server_answering_unavailable_is_a_plain_failure() -> None:
    async with wired(FakeLeader(mode="unavailable")) as w:
        w.transport.send(fetch(1, w.endpoint, offset=10, timeout_ms=LONG_MS))
        assert await w.outcomes.get(1) == "failed"


@in_loop
async def test_a_stream_ended_with_status_ok_is_a_plain_failure() -> None:
    async with wired(FakeLeader(mode="end")) as w:
        w.transport.send(fetch(1, w.endpoint, offset=10, timeout_ms=LONG_MS))
        assert await w.outcomes.get(1) == "failed"
        w.leader.mode = "answer"
        w.transport.send(fetch(2, w.endpoint, offset=20))  # on a new stream
        assert high_watermark(await w.outcomes.get(2)) == 20
        assert w.leader.streams == 2


@in_loop
async def test_a_blocked_peer_looks_like_a_timeout() -> None:
    async with wired() as w:
        w.transport.blocked = frozenset({1})
        w.transport.send(fetch(1, w.endpoint, offset=10, timeout_ms=50))
        assert await w.outcomes.get(1) == "timed out"
        assert w.leader.streams == 0
        assert w.transport.contacts[1].failure == "no answer within 0.05 s"


@in_loop
async def test_a_new_request_does_not_queue_behind_one_the_core_gave_up_on() -> None:
    async with wired() as w:
        w.transport.send(fetch(1, w.endpoint, offset=SLOW_OFFSET, timeout_ms=LONG_MS))
        await asyncio.wait_for(w.leader.holding.wait(), PROMPT_S)
        w.transport.send(fetch(2, w.endpoint, offset=20, timeout_ms=LONG_MS))
        assert high_watermark(await w.outcomes.get(2)) == 20
        assert await w.outcomes.get(1) == "failed"  # its stream was cancelled: no answer
        assert w.leader.streams == 2


async def _answer_after_standing_still(stand_still_s: float) -> str:
    """A 50 ms timeout; the loop then stands still for `stand_still_s` (the fault), and the
    answer that arrived meanwhile is two loop turns from the waiter, as gRPC's are."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    async def wait() -> str:
        async with stall_aware_timeout(0.05):
            return await answer

    waiter = asyncio.ensure_future(wait())
    await asyncio.sleep(0)  # the waiter is inside its timeout

    def stand_still() -> None:
        time.sleep(stand_still_s)  # the fault: the whole process stands still
        loop.call_soon(loop.call_soon, answer.set_result, "answer")

    loop.call_soon(stand_still)
    return await waiter


def test_a_timeout_found_long_overdue_reads_what_arrived_meanwhile_first() -> None:
    assert asyncio.run(_answer_after_standing_still(0.5)) == "answer"


def test_a_timeout_that_is_merely_due_still_fires() -> None:
    with pytest.raises(TimeoutError):
        asyncio.run(_answer_after_standing_still(0.1))  # 50 ms late: busy, not stood still
