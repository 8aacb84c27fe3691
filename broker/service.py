"""The broker listener's services.

* `BrokerMetadata` (broker/rpc/broker_metadata.proto): describe cluster and topics from the broker's
  metadata cache, with the log position the answer reflects; optional long-polls wait for an
  offset or for topics to appear, so clients need not poll.
* `Admin` (metadata/rpc/admin.proto), so `kraft-admin --bootstrap-server BROKER` works: reads answer
  from the broker's cache, writes are forwarded once to the active controller (a broker never
  writes metadata itself).
* `ServingGate`: until the broker is RUNNING (caught up and unfenced) and again from its
  controlled shutdown on, both services answer gRPC UNAVAILABLE, which clients treat as "try
  another server". Health and Quorum status stay reachable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from broker.cache import CacheSnapshot, MetadataCache
from broker.rpc import broker_metadata_pb2 as pb
from broker.rpc import broker_metadata_pb2_grpc as rpc
from kraft.client import ControllerEndpoints, RaftClient
from kraft.errors import Errors
from kraft.security.authorizer import current_caller
from kraft.security.tls import TlsConfig
from metadata.admin_service import AdminServicer
from metadata.authorizer.admin_checks import admin_caller
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.controller import NotControllerError
from metadata.errors import ControllerResult
from metadata.image import MetadataImage

MAX_WAIT_MS = 60_000
GATED_SERVICES = ("/kraft.brokermetadata.v1.BrokerMetadata/", "/kraft.admin.v1.Admin/")


def _position(snap: CacheSnapshot) -> pb.MetadataPosition:
    provenance = snap.image.provenance
    return pb.MetadataPosition(
        offset=snap.applied_offset, epoch=provenance.epoch,
        high_watermark=snap.high_watermark, timestamp_ms=provenance.timestamp_ms)


class BrokerMetadataServicer(rpc.BrokerMetadataServicer):
    def __init__(
        self,
        cache: MetadataCache,
        cluster_id: str,
        broker_id: int,
        controller_id: Callable[[], int],
        broker_state: Callable[[], str],
    ) -> None:
        self.cache = cache
        self.cluster_id = cluster_id
        self.broker_id = broker_id
        self._controller_id = controller_id
        self._broker_state = broker_state

    async def DescribeCluster(self, request, context):  # type: ignore[no-untyped-def]
        snap = self.cache.snapshot()
        if request.wait_ms > 0:
            wait_s = min(request.wait_ms, MAX_WAIT_MS) / 1000
            snap = await self.cache.wait_until(
                lambda s: s.applied_offset >= request.min_offset, wait_s)
        brokers = snap.image.cluster.brokers
        return pb.DescribeClusterResponse(
            cluster_id=self.cluster_id, controller_id=self._controller_id(),
            brokers=[_broker_info(brokers[b]) for b in sorted(brokers)
                     if request.include_fenced_brokers or not brokers[b].fenced],
            position=_position(snap), broker_id=self.broker_id,
            broker_state=self._broker_state(),
        )

    async def DescribeTopics(self, request, context):  # type: ignore[no-untyped-def]
        names = list(dict.fromkeys(request.names))
        if len(names) > 10_000 or any(len(n) > 249 for n in names):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "at most 10,000 topic names of at most 249 characters")
        snap = self.cache.snapshot()
        if request.wait_ms > 0 and names:
            wait_s = min(request.wait_ms, MAX_WAIT_MS) / 1000
            snap = await self.cache.wait_until(
                lambda s: all(s.image.topic(n) is not None for n in names), wait_s)
        image = snap.image
        wanted = names or sorted(image.topics.by_name)
        return pb.DescribeTopicsResponse(
            topics=_authorized(wanted, bool(names), lambda name: _topic_info(image, name)),
            position=_position(snap))


def _authorized(names: list[str], named: bool,
                describe: Callable[[str], pb.TopicInfo]) -> list[pb.TopicInfo]:
    """Kafka's Metadata rule: only topics the caller may DESCRIBE; a named one it may not is
    TOPIC_AUTHORIZATION_FAILED, the others are left out of a listing of all."""
    caller = current_caller()
    if caller is None:  # no authorizer configured
        return [describe(name) for name in names]
    checker = admin_caller(caller)
    infos = []
    for name in names:
        if checker.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=named):
            infos.append(describe(name))
        elif named:
            code, text = checker.refusal(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            infos.append(pb.TopicInfo(name=name, error_code=code, error_message=text))
    return infos


def _broker_info(b) -> pb.BrokerInfo:  # type: ignore[no-untyped-def]
    return pb.BrokerInfo(
        broker_id=b.id, broker_epoch=b.epoch,
        endpoints=[pb.BrokerEndpoint(name=e.name, host=e.host, port=e.port)
                   for e in b.endpoints],
        rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown)


def _topic_info(image: MetadataImage, name: str) -> pb.TopicInfo:
    topic = image.topic(name)
    if topic is None:
        return pb.TopicInfo(name=name, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=f"The topic '{name}' does not exist.")
    cluster = image.cluster

    def offline(replicas: tuple[int, ...]) -> Iterator[int]:
        # Kafka's metadata cache: replicas on fenced (or unknown) brokers are offline.
        for r in replicas:
            registration = cluster.broker(r)
            if registration is None or registration.fenced:
                yield r

    return pb.TopicInfo(name=name, topic_id=topic.topic_id, partitions=[
        pb.PartitionInfo(
            partition_index=i, leader=p.leader, replicas=p.replicas, isr=p.isr,
            leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
            offline_replicas=list(offline(p.replicas)))
        for i, p in sorted(topic.partitions.items())
    ])


# ---- Admin on a broker ----


T = TypeVar("T")


class _BrokerControllerView:
    """What AdminServicer asks of a controller, as a broker answers it: never active (so
    every write is forwarded to the active controller), reads from the metadata cache."""

    @property
    def is_active(self) -> bool:
        return False

    def __init__(self, client: RaftClient, cache: MetadataCache) -> None:
        self.client = client
        self.cache = cache

    @property
    def committed_image(self) -> MetadataImage:
        return self.cache.image

    @property
    def leader_id(self) -> int:
        return self.client.leader_and_epoch().leader_id

    @property
    def node_id(self) -> int:
        node_id = self.client.node_id
        return -1 if node_id is None else node_id

    async def write(self, rule: Callable[[MetadataImage], ControllerResult[T]]) -> T:
        raise NotControllerError(self.leader_id, "A broker does not write metadata; ask the "
                                 "active controller")


class BrokerAdminServicer(AdminServicer):
    """The Admin service on a broker-only node's listener."""

    def __init__(
        self, client: RaftClient, cache: MetadataCache, cluster_id: str,
        tls: TlsConfig | None = None, acls_enabled: bool = False,
    ) -> None:
        super().__init__(_BrokerControllerView(client, cache), cluster_id,
                         ControllerEndpoints(client), tls=tls, acls_enabled=acls_enabled)


# ---- serving only when running ----


class ServingGate(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    """UNAVAILABLE for the gated services while `not_serving()` gives a reason."""

    def __init__(self, not_serving: Callable[[], str | None]) -> None:
        self._not_serving = not_serving

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        if handler_call_details.method.startswith(GATED_SERVICES):
            reason = self._not_serving()
            if reason is not None:
                return _refusal(reason)
        return await continuation(handler_call_details)


def _refusal(reason: str) -> grpc.RpcMethodHandler[Any, Any]:
    async def refuse(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, reason)

    return grpc.unary_unary_rpc_method_handler(refuse)
