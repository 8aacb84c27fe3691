"""The Fetch stream of the Raft transport against a real grpc.aio server on loopback: answers
in order on one stream, a missed deadline cancels the stream (a late answer is never taken for
the next request's), a vanished peer is reported as unreachable at once, not after a
timeout."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import grpc

from kraft.core.messages import FetchRequest, FetchResponse, OutboundRequest, Response
from kraft.node.transport import RaftTransport
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc

SLOW_OFFSET = 666  # the fake leader never answers this request (a long poll that never ends)


class FakeLeader(rpc.RaftServicer):
    """Answers every Fetch with its fetch offset as the high watermark."""

    def __init__(self) -> None:
        self.streams = 0
        self.holding = asyncio.Event()  # a slow request arrived

    async def Fetch(
        self, request_iterator: AsyncIterator[pb.FetchRequest], context: object
    ) -> AsyncIterator[pb.FetchResponse]:
        self.streams += 1
        async for request in request_iterator:
            if request.fetch_offset == SLOW_OFFSET:
                self.holding.set()
                await asyncio.Future()  # until the stream is cancelled
            yield pb.FetchResponse(high_watermark=request.fetch_offset)


class Outcomes:
    def __init__(self) -> None:
        self.items: dict[int, Response | str] = {}
        self.changed = asyncio.Event()

    def response(self, correlation_id: int, response: Response) -> None:
        self.items[correlation_id] = response
        self.changed.set()

    def failure(self, correlation_id: int, unreachable: bool) -> None:
        self.items[correlation_id] = "unreachable" if unreachable else "timeout"
        self.changed.set()

    async def get(self, correlation_id: int, within_s: float = 5.0) -> Response | str:
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


@dataclass
class Wiring:
    server: grpc.aio.Server
    leader: FakeLeader
    endpoint: str
    outcomes: Outcomes
    transport: RaftTransport


@contextlib.asynccontextmanager
async def wired() -> AsyncIterator[Wiring]:
    """A fake leader on an ephemeral loopback port and a transport to it; both closed after."""
    server = grpc.aio.server()
    leader = FakeLeader()
    rpc.add_RaftServicer_to_server(leader, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    outcomes = Outcomes()
    transport = RaftTransport(outcomes.response, outcomes.failure)
    try:
        yield Wiring(server, leader, f"127.0.0.1:{port}", outcomes, transport)
    finally:
        await transport.close()
        await server.stop(None)


def in_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


def high_watermark(outcome: Response | str) -> int:
    assert isinstance(outcome, FetchResponse), outcome
    return outcome.high_watermark


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
        assert await w.outcomes.get(1) == "timeout"
        w.transport.send(fetch(2, w.endpoint, offset=20))
        assert high_watermark(await w.outcomes.get(2)) == 20  # not the slow request's 666
        assert w.leader.streams == 2


@in_loop
async def test_a_peer_that_goes_away_is_unreachable_before_the_deadline() -> None:
    async with wired() as w:
        w.transport.send(fetch(1, w.endpoint, offset=10))
        assert high_watermark(await w.outcomes.get(1)) == 10
        w.transport.send(fetch(2, w.endpoint, offset=SLOW_OFFSET, timeout_ms=30_000))
        await asyncio.wait_for(w.leader.holding.wait(), 5)
        await w.server.stop(None)  # the peer goes away with the request in flight
        assert await w.outcomes.get(2, within_s=5.0) == "unreachable"
        w.transport.send(fetch(3, w.endpoint, offset=30, timeout_ms=30_000))
        assert await w.outcomes.get(3, within_s=5.0) == "unreachable"  # connection refused


@in_loop
async def test_a_blocked_peer_looks_like_a_timeout() -> None:
    async with wired() as w:
        w.transport.blocked = frozenset({1})
        w.transport.send(fetch(1, w.endpoint, offset=10, timeout_ms=50))
        assert await w.outcomes.get(1) == "timeout"
        assert w.leader.streams == 0


@in_loop
async def test_a_new_request_does_not_queue_behind_one_the_core_gave_up_on() -> None:
    async with wired() as w:
        w.transport.send(fetch(1, w.endpoint, offset=SLOW_OFFSET, timeout_ms=30_000))
        await asyncio.wait_for(w.leader.holding.wait(), 5)
        w.transport.send(fetch(2, w.endpoint, offset=20, timeout_ms=30_000))
        assert high_watermark(await w.outcomes.get(2)) == 20
        assert await w.outcomes.get(1) == "timeout"  # its stream was cancelled: no answer
        assert w.leader.streams == 2
