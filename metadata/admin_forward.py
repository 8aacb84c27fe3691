"""A standby controller sends an Admin write on to the active one, and takes the answer only
from a node of its own cluster: every Admin answer names its cluster (trailing metadata
`kraft-cluster-id`), and another cluster's process on the active controller's port (one that
took the port while the node was down) must not have its answer relayed as this cluster's."""

from __future__ import annotations

from typing import Any

import grpc

from kraft.errors import Errors
from kraft.security.tls import MESSAGE_SIZE_OPTIONS, TlsConfig, aio_channel
from metadata.controller import NotControllerError
from metadata.errors import ControllerApiError
from metadata.rpc import CLUSTER_ID_KEY
from metadata.rpc import admin_pb2_grpc as rpc

FORWARDED_BY = "kraft-forwarded-by"  # metadata key: the node that forwarded this request
FORWARD_TIMEOUT_S = 10.0
# One forward, never a hidden second one.
_CHANNEL_OPTIONS = [("grpc.enable_retries", 0), *MESSAGE_SIZE_OPTIONS]


class ControllerForwarder:
    """One channel per active-controller endpoint, kept until `close`."""

    def __init__(self, cluster_id: str, *, timeout_s: float = FORWARD_TIMEOUT_S,
                 tls: TlsConfig | None = None) -> None:
        self.cluster_id = cluster_id
        self.timeout_s = timeout_s
        self.tls = tls
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def forward(self, method: str, request: Any, *, node_id: int, leader: int,
                      endpoint: str) -> Any:
        """The answer of controller `leader` at `endpoint` to the Admin RPC `method`."""
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = aio_channel(endpoint, self.tls,
                                                             _CHANNEL_OPTIONS)
        call = getattr(rpc.AdminStub(channel), method)(
            request, timeout=self.timeout_s, metadata=((FORWARDED_BY, str(node_id)),))
        try:
            response = await call
            trailing = await call.trailing_metadata()
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ControllerApiError(
                    Errors.REQUEST_TIMED_OUT, f"The active controller {leader} at {endpoint} did "
                    f"not answer within {self.timeout_s} s; the request may or may not have "
                    "been applied.") from exc
            raise NotControllerError(leader, f"This is not the active controller, and "
                                     f"forwarding to controller {leader} at {endpoint} failed: "
                                     f"{exc.code().name}") from exc
        answered_for = dict(trailing or ()).get(CLUSTER_ID_KEY)
        if answered_for != self.cluster_id:
            raise NotControllerError(
                leader, f"This is not the active controller, and controller {leader}'s "
                f"endpoint {endpoint} answered for cluster {answered_for or '(none)'}, not "
                f"{self.cluster_id}: another process holds the port of a node that is down?")
        return response

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()  # type: ignore[call-arg]  # grpc-stubs 1.53 lags grpc 1.85
