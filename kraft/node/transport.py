"""The client half of the Raft transport: one grpc.aio channel per peer endpoint, a deadline
on every call and no hidden retries (the core owns retries). A call that fails with UNAVAILABLE
means the peer refused or reset the connection: reported as `unreachable`, which lets a follower
start a pre-vote at once instead of waiting for its fetch timeout.

The fault hook (`blocked`) drops traffic to and from chosen nodes, like a network partition:
the caller sees a timeout, never a refusal. It is off unless a test turns it on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import grpc

from kraft.core.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    OutboundRequest,
    Response,
    VoteRequest,
)
from kraft.rpc import convert
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.tls import TlsConfig, aio_channel

log = logging.getLogger(__name__)

CHANNEL_OPTIONS = [
    ("grpc.enable_retries", 0),
    # A restarted peer must be reachable again within a fraction of an election timeout.
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]
RECREATE_AFTER_S = 1.0  # rebuild a failing channel at most this often


def sender_of(request: object) -> int:
    """The node id a Raft request comes from (every request names its sender)."""
    if isinstance(request, FetchRequest | FetchSnapshotRequest | VoteRequest):
        return request.replica_id
    if isinstance(request, BeginQuorumEpochRequest | EndQuorumEpochRequest):
        return request.leader_id
    return -1


class RaftTransport:
    def __init__(
        self,
        on_response: Callable[[int, Response], None],
        on_failure: Callable[[int, bool], None],
        tls: TlsConfig | None = None,
    ) -> None:
        self.tls = tls  # the peers' controller listener is SSL
        self._on_response = on_response
        self._on_failure = on_failure
        self._channels: dict[str, tuple[grpc.aio.Channel, rpc.RaftStub, float]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.blocked: frozenset[int] = frozenset()

    def send(self, request: OutboundRequest) -> None:
        task = asyncio.create_task(self._call(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, out: OutboundRequest) -> None:
        timeout = out.timeout_ms / 1000
        if out.destination in self.blocked:
            await asyncio.sleep(timeout)
            self._on_failure(out.correlation_id, False)
            return
        stub = self._stub(out.endpoint)
        method = {
            FetchRequest: stub.Fetch,
            VoteRequest: stub.Vote,
            BeginQuorumEpochRequest: stub.BeginQuorumEpoch,
            EndQuorumEpochRequest: stub.EndQuorumEpoch,
            FetchSnapshotRequest: stub.FetchSnapshot,
        }[type(out.request)]
        try:
            reply = await method(convert.request_to_pb(out.request), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            unreachable = exc.code() == grpc.StatusCode.UNAVAILABLE
            if unreachable:
                self._maybe_recreate(out.endpoint)
            log.debug("%s to %s failed: %s", type(out.request).__name__, out.endpoint, exc.code())
            self._on_failure(out.correlation_id, unreachable)
            return
        except asyncio.CancelledError:
            raise
        if out.destination in self.blocked:
            self._on_failure(out.correlation_id, False)  # cut while in flight: lost
            return
        self._on_response(out.correlation_id, convert.response_from_pb(reply))

    def _stub(self, endpoint: str) -> rpc.RaftStub:
        entry = self._channels.get(endpoint)
        if entry is None:
            channel = aio_channel(endpoint, self.tls, CHANNEL_OPTIONS)
            entry = (channel, rpc.RaftStub(channel), time.monotonic())
            self._channels[endpoint] = entry
        return entry[1]

    def _maybe_recreate(self, endpoint: str) -> None:
        entry = self._channels.get(endpoint)
        if entry is not None and time.monotonic() - entry[2] >= RECREATE_AFTER_S:
            del self._channels[endpoint]
            task = asyncio.create_task(entry[0].close())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for channel, _, _ in self._channels.values():
            await channel.close()
        self._channels.clear()
