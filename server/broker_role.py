"""BrokerRole: the broker half of a `kraft-server` process.

It shares the node's RaftNode and MetadataLoader: on a broker-only node the RaftNode is an
observer (its node.id is not a voter), in combined mode it is the controller's voter and the
broker reads the same local log. The role installs its publishers on the loader (the metadata
cache's, then the ISR expander's) and adds the lifecycle against the active controller, the
services of the broker listener, and metrics.
"""

from __future__ import annotations

import asyncio
import socket
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from prometheus_client import CollectorRegistry

from broker.cache import MetadataCache
from broker.isr import IsrExpander
from broker.lifecycle import AdvertisedListener, BrokerLifecycleManager
from broker.metrics import BrokerMetrics, BrokerSample
from broker.publisher import CachePublisher
from broker.rpc import broker_metadata_pb2_grpc
from broker.service import BrokerAdminServicer, BrokerMetadataServicer, ServingGate
from broker.state import BrokerState
from kraft.node.raft_node import RaftNode
from kraft.node.service import QuorumServicer
from kraft.rpc import raft_pb2_grpc
from kraft.security.authorizer import AuthorizingInterceptor
from kraft.security.tls import MESSAGE_SIZE_OPTIONS, add_port
from metadata.admin_service import AdminServicer, add_admin_service
from metadata.loader import MetadataLoader
from metadata.rpc import broker_pb2
from server.config import Listener, NodeConfig


def broker_listeners(config: NodeConfig) -> list[Listener]:
    """The listeners that are not controller listeners, in config order."""
    return [lsn for name, lsn in config.listeners.items()
            if name not in config.controller_listener_names]


class BrokerRole:
    def __init__(
        self,
        config: NodeConfig,
        cluster_id: str,
        node: RaftNode,
        loader: MetadataLoader,
        registry: CollectorRegistry,
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.node = node
        self.cache = MetadataCache()
        self.metrics = BrokerMetrics(registry)
        self.publisher = CachePublisher(node, self.cache, self.metrics)
        loader.install(self.publisher)
        # Acts only once the lifecycle runs: registered, caught up and unfenced.
        self.isr = IsrExpander(
            config.node_id, self._alter_partition,
            lambda: self.lifecycle.broker_epoch if self.lifecycle is not None else -1,
            lambda: self.state is BrokerState.RUNNING)
        loader.install(self.isr)
        self.listeners = broker_listeners(config)
        self.server: grpc.aio.Server | None = None
        self.ports: dict[str, int] = {}
        self.health = HealthServicer()
        self.lifecycle: BrokerLifecycleManager | None = None
        self.admin: AdminServicer | None = None
        self._health_task: asyncio.Future[None] | None = None
        self.metrics.bind(self._sample)

    @property
    def state(self) -> BrokerState:
        return self.lifecycle.state if self.lifecycle is not None else BrokerState.STARTING

    @property
    def fatal_error(self) -> BaseException | None:
        return self.lifecycle.fatal_error if self.lifecycle is not None else None

    def _sample(self) -> BrokerSample:
        image = self.cache.image
        return BrokerSample(
            state=self.state, applied_offset=self.publisher.applied_offset,
            high_watermark=self.publisher.high_watermark,
            last_record_timestamp_ms=image.provenance.timestamp_ms,
            initial_catch_up_s=self.publisher.initial_catch_up_s)

    def _not_serving(self) -> str | None:
        state = self.state
        if state is BrokerState.RUNNING:
            return None
        return (f"broker {self.config.node_id} is not serving yet: state {state.name} "
                "(it serves once caught up with the metadata log and unfenced)"
                if state in (BrokerState.STARTING, BrokerState.RECOVERY)
                else f"broker {self.config.node_id} is shutting down: state {state.name}")

    async def bind(self, combined_admin: AdminServicer | None) -> None:
        """Start the broker listener's gRPC server. In combined mode the node's own Admin
        servicer (backed by the real controller) serves the broker listener too."""
        interceptors: list[grpc.aio.ServerInterceptor] = [ServingGate(self._not_serving)]
        authorizer = self.config.authorizer()
        if authorizer is not None:
            interceptors.insert(0, AuthorizingInterceptor(authorizer))
        self.server = grpc.aio.server(options=MESSAGE_SIZE_OPTIONS, interceptors=interceptors)
        voters = {vid: str(ep) for vid, ep in self.config.voters.items()}
        broker_metadata_pb2_grpc.add_BrokerMetadataServicer_to_server(
            BrokerMetadataServicer(
                self.cache, self.cluster_id, self.config.node_id,
                controller_id=lambda: self.node.status().leader_id,
                broker_state=lambda: self.state.name),
            self.server)
        if combined_admin is None:
            self.admin = BrokerAdminServicer(self.node, self.cache, self.cluster_id, voters,
                                             tls=self.config.controller_tls)
            add_admin_service(self.server, self.admin)
        else:
            add_admin_service(self.server, combined_admin)
        raft_pb2_grpc.add_QuorumServicer_to_server(
            QuorumServicer(self.node, self.cluster_id, self.listeners[0].name), self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        for listener in self.listeners:
            address = f"{listener.host}:{listener.port}"
            try:
                self.ports[listener.name] = add_port(
                    self.server, address, self.config.tls_for(listener.name))
            except RuntimeError as exc:
                raise OSError(f"cannot listen on {address} ({listener.name}): {exc}") from exc
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.start()

    def start_lifecycle(self) -> None:
        config = self.config
        self.lifecycle = BrokerLifecycleManager(
            config.node_id, self.cluster_id, self._advertised(),
            controllers=[str(ep) for ep in config.voters.values()]
            or [str(ep) for ep in config.bootstrap_servers],
            leader_endpoint=self._leader_endpoint,
            applied_offset=lambda: self.publisher.applied_offset,
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            request_timeout_ms=config.request_timeout_ms,
            registration_timeout_ms=config.initial_broker_registration_timeout_ms,
            rack=config.broker_rack,
            on_state=self._on_state,
            tls=config.controller_tls,
        )
        self.lifecycle.start()

    async def _alter_partition(
        self, request: broker_pb2.AlterPartitionRequest
    ) -> broker_pb2.AlterPartitionResponse:
        if self.lifecycle is None:
            raise RuntimeError("the broker lifecycle has not started")
        return await self.lifecycle.alter_partition(request)

    def _leader_endpoint(self) -> str | None:
        status = self.node.status()
        return self.node.leader_endpoint() or None if status.leader_id >= 0 else None

    def _advertised(self) -> list[AdvertisedListener]:
        out = []
        for listener in self.listeners:
            advertised = self.config.advertised_listeners.get(listener.name, listener)
            host = advertised.host or socket.getfqdn()
            port = advertised.port or self.ports[listener.name]
            out.append(AdvertisedListener(listener.name, host, port))
        return out

    def _on_state(self, state: BrokerState) -> None:
        if state is BrokerState.RECOVERY and self.publisher.initial_catch_up_s is None:
            self.publisher.initial_catch_up_s = time.monotonic() - self.publisher.started_at
        serving = state is BrokerState.RUNNING
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        # Called from the lifecycle task, which must not block on health watchers.
        self._health_task = asyncio.ensure_future(self.health.set("", status))

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        if self.lifecycle is None:
            return True
        return await self.lifecycle.controlled_shutdown(timeout_s)

    async def stop(self) -> None:
        await self.health.enter_graceful_shutdown()
        if self.server is not None:
            await self.server.stop(grace=0.5)
        if self.lifecycle is not None:
            await self.lifecycle.close()
        if self.admin is not None:
            await self.admin.close()
