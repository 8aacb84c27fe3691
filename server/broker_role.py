"""BrokerRole: the broker half of a `kraft-server` process.

It shares the node's RaftNode and MetadataLoader: on a broker-only node the RaftNode is an
observer (its node.id is not a voter), in combined mode it is the controller's voter and the
broker reads the same local log. The role installs its publishers on the loader (the metadata
cache's, then the replica manager's) and adds the lifecycle against the active controller, the
data plane (partition logs, replica manager, fetchers, ISR updates), a Kafka-protocol server
per Kafka listener, the gRPC services on the `grpc.listener.names` listeners, and metrics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import socket
import time
from collections.abc import Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from prometheus_client import CollectorRegistry

from broker.cache import CacheSnapshot, MetadataCache
from broker.client_view import ClientView
from broker.group.config import GroupConfig
from broker.group.placement import OFFSETS_TOPIC
from broker.group.storage import GroupStorage
from broker.kafka.admin_auto_create import AutoTopicCreator
from broker.kafka.admin_log_api import LogDirs
from broker.kafka.apis import KafkaApis
from broker.kafka.client import KafkaClient
from broker.kafka.connection_limits import ConnectionQuotas, RequestMemoryPool, resolve_overrides
from broker.kafka.group_lag import GroupLag
from broker.kafka.request_metrics import RequestMetrics
from broker.kafka.server import KafkaServer
from broker.kafka.tls import client_ssl_context, server_ssl_context
from broker.lifecycle import AdvertisedListener, BrokerLifecycleManager
from broker.log import cleaner_metrics, recovery_metrics
from broker.log.cleaner import CleanerConfig
from broker.log.log_manager import LogManager
from broker.metrics import BrokerMetrics, BrokerSample
from broker.producer_ids import ProducerIdManager
from broker.publisher import CachePublisher
from broker.quotas import ClientQuotas
from broker.replica.fetch_sessions import FetchSessionCache
from broker.replica.fetcher import FetcherManager, LeaderClient
from broker.replica.incremental_fetch import FetchSessions
from broker.replica.isr import IsrUpdater
from broker.replica.manager import ReplicaConfig, ReplicaManager
from broker.replica.metrics import DataPlaneCollector
from broker.rpc import broker_metadata_pb2_grpc
from broker.service import BrokerAdminServicer, BrokerMetadataServicer, ServingGate
from broker.state import BrokerState
from broker.txn.producers import ReplicaProducerStates
from broker.txn.storage import TXN_TOPIC, TxnStorage
from kraft.node.raft_node import RaftNode
from kraft.node.service import QuorumServicer
from kraft.rpc import raft_pb2_grpc
from kraft.security.authorizer import AuthorizingInterceptor
from kraft.security.principal import AuthenticatingInterceptor
from kraft.security.tls import add_port, new_server
from metadata.admin_service import AdminServicer, add_admin_service
from metadata.authorizer.standard import StandardAuthorizer
from metadata.loader import MetadataLoader
from metadata.rpc import admin_pb2, broker_pb2
from metadata.scram import ScramCredential, ScramMechanism, scram_credential
from server import config_security
from server.config import NodeConfig
from server.config_listeners import Listener
from server.config_txn import txn_config


def broker_listeners(config: NodeConfig) -> list[Listener]:
    """The listeners that are not controller listeners, in config order."""
    return [lsn for name, lsn in config.listeners.items()
            if name not in config.controller_listener_names]


class LogDirFailure(Exception):
    """A log dir's I/O failed: the broker must stop (server/main.py exits with code 3)."""


def group_config(config: NodeConfig) -> GroupConfig:
    return GroupConfig(
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
        offsets_topic_replication_factor=config.offsets_topic_replication_factor,
        offsets_topic_segment_bytes=config.offsets_topic_segment_bytes,
        offsets_commit_timeout_ms=config.offsets_commit_timeout_ms,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
        offsets_retention_minutes=config.offsets_retention_minutes,
        offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        max_size=config.group_max_size,
        consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        consumer_assignors=config.group_consumer_assignors,
        consumer_max_size=config.group_consumer_max_size)


class BrokerRole:
    def __init__(
        self,
        config: NodeConfig,
        cluster_id: str,
        node: RaftNode,
        loader: MetadataLoader,
        registry: CollectorRegistry,
        authorizer: StandardAuthorizer | None = None,
    ) -> None:
        self.config = config
        self.authorizer = authorizer  # the process's one authorizer, fed by its AclPublisher
        self.cluster_id = cluster_id
        self.node = node
        self.cache = MetadataCache()
        self.metrics = BrokerMetrics(registry)
        self.publisher = CachePublisher(node, self.cache, self.metrics)
        loader.install(self.publisher)
        self.logs = LogManager(
            config.log_dirs, self._high_watermarks,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            hw_checkpoint_interval_ms=config.replica_high_watermark_checkpoint_interval_ms,
            recovery_point_checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
            cleaner=CleanerConfig(
                enable=config.log_cleaner_enable, threads=config.log_cleaner_threads,
                backoff_ms=config.log_cleaner_backoff_ms,
                dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size),
            recovery_threads_per_data_dir=config.num_recovery_threads_per_data_dir,
            load=False)
        cleaner_metrics.register(registry, self.logs.cleaner)
        recovery_metrics.register(registry, self.logs.loading)
        # The logs load in worker threads from `bind` on, while the node starts; the broker
        # registers meanwhile and is unfenced once they are loaded (`start_lifecycle`).
        self._loading: asyncio.Future[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._log_dir_failure: LogDirFailure | None = None
        self.logs.on_dir_failure = self._on_log_dir_failure
        inter_broker = config.inter_broker_listener_name
        assert inter_broker is not None  # a broker has a Kafka listener (checked at load)
        replica_config = ReplicaConfig(
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            fetch_max_bytes=config.fetch_max_bytes,
            replica_fetch_max_bytes=config.replica_fetch_max_bytes,
            replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
            replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            inter_broker_listener=inter_broker)
        self._inter_broker_tls = config.tls_for(inter_broker)
        self.producer_ids = ProducerIdManager(self._allocate_producer_ids)
        self.replicas = ReplicaManager(
            config.node_id, self.logs, replica_config,
            FetcherManager(config.node_id, replica_config, self._broker_epoch,
                           self._connect_to_leader),
            IsrUpdater(config.node_id, self._alter_partition, self._broker_epoch),
            allocate_producer_id=self.producer_ids.next_producer_id)
        loader.install(self.replicas)
        self.groups = GroupStorage(self.replicas, group_config(config))
        self.groups.create_topic = functools.partial(self._create_internal_topic, OFFSETS_TOPIC)
        # The transaction coordinator; its marker sender talks to partition leaders as the
        # replica fetchers do (the inter-broker listener).
        self.txns = TxnStorage(self.replicas, txn_config(config),
                               self.producer_ids.next_producer_id, self._connect_to_leader,
                               inter_broker)
        self.txns.create_topic = functools.partial(self._create_internal_topic, TXN_TOPIC)
        # Lag of the groups this broker coordinates, on its metrics port (scraped).
        self.group_lag = GroupLag(self.groups.coordinator, self.replicas,
                                  self._connect_to_leader, inter_broker, registry)
        self._group_admin: AdminServicer | None = None  # the combined node's own controller
        DataPlaneCollector(self.replicas, registry)
        self.request_metrics = RequestMetrics(registry, lambda: self.cache.image)
        self.listeners = broker_listeners(config)
        grpc_names = set(config.grpc_listener_names or ())
        self.grpc_listeners = [lsn for lsn in self.listeners if lsn.name in grpc_names]
        self.kafka_listeners = [lsn for lsn in self.listeners if lsn.name not in grpc_names]
        self.kafka_servers: list[KafkaServer] = []
        self.server: grpc.aio.Server | None = None
        self.ports: dict[str, int] = {}
        self.health = HealthServicer()
        self.lifecycle: BrokerLifecycleManager | None = None
        self.admin: AdminServicer | None = None
        self.auto_create: AutoTopicCreator | None = None
        self._health_task: asyncio.Future[None] | None = None
        # The client quotas every Kafka listener enforces, following the image's.
        self.client_quotas = ClientQuotas(lambda: self.cache.image.client_quotas,
                                          config_security.quota_window(config))
        self.metrics.bind(self._sample)
        self.metrics.bind_quotas(self.client_quotas)

    @property
    def state(self) -> BrokerState:
        return self.lifecycle.state if self.lifecycle is not None else BrokerState.STARTING

    @property
    def fatal_error(self) -> BaseException | None:
        if self._log_dir_failure is not None:
            return self._log_dir_failure
        loading = self._loading
        if loading is not None and loading.done() and not loading.cancelled() \
                and loading.exception() is not None:
            return LogDirFailure(f"cannot load the partition logs: {loading.exception()}")
        return self.lifecycle.fatal_error if self.lifecycle is not None else None

    def _on_log_dir_failure(self, directory: str, exc: BaseException) -> None:
        """Kafka's answer when a broker's only log dir fails (KRaft without JBOD): stop. The
        process exits, its liveness stream breaks, and the controller fences it and moves its
        leaderships to ISR members within about a second; until then the dir's partitions
        answer KAFKA_STORAGE_ERROR. Recovery checks the logs at the next start."""
        self._log_dir_failure = LogDirFailure(
            f"log directory {directory} failed ({exc}); the broker stops so that its "
            "leaderships move to other replicas: fix the disk (free space, replace it) and "
            "start the broker again")

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

    def _broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch if self.lifecycle is not None else -1

    def _high_watermarks(self) -> dict[tuple[str, int], int]:
        return {tp: p.high_watermark for tp, p in self.replicas.partitions.items()}

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        if self.lifecycle is None:
            raise ConnectionError("the broker has not registered yet")
        return await self.lifecycle.allocate_producer_ids()

    async def _connect_to_leader(self, host: str, port: int) -> LeaderClient:
        tls = self._inter_broker_tls
        client = KafkaClient(host, port, client_id=f"broker-{self.config.node_id}-fetcher",
                             ssl_context=None if tls is None else client_ssl_context(tls))
        await client.connect()
        return client

    async def bind(self, combined_admin: AdminServicer | None) -> None:
        """Open the Kafka listeners and the gRPC listeners (in combined mode the node's own
        Admin servicer, backed by the real controller, serves the gRPC listeners too). The
        Kafka listeners' admin APIs run the same admin operations as that servicer."""
        self.load_logs()
        if combined_admin is None:
            self.admin = self._broker_admin()
        admin = combined_admin or self.admin
        assert admin is not None
        self.auto_create = AutoTopicCreator(admin.ops, self.config.auto_create_topics_enable,
                                            wait_unfenced=True, topics_led=self._topics_led)
        apis = KafkaApis(self.replicas,
                         ClientView(lambda: self.cache.image, self.replicas.fetchers.unreachable),
                         self.cluster_id, admin=admin.ops, broker_id=self.config.node_id,
                         log_dirs=LogDirs(self.logs, self._high_watermarks),
                         auto_create=self.auto_create, authorizer=self.authorizer,
                         fetch_sessions=FetchSessions(self.replicas, FetchSessionCache(
                             self.config.max_incremental_fetch_session_cache_slots)),
                         quotas=self.client_quotas, metrics=self.request_metrics)
        apis.groups = self.groups
        apis.txns = self.txns
        apis.producer_states = ReplicaProducerStates(self.replicas)
        self._group_admin = combined_admin
        config = self.config
        # Shared by the Kafka listeners: max.connections counts them all (replication exempt).
        limits = config_security.connection_limits(config)
        quotas = ConnectionQuotas(
            limits.max_connections, limits.max_connections_per_ip,
            resolve_overrides(limits.max_connections_per_ip_overrides),
            protected_listeners=(config.inter_broker_listener_name or "",))
        memory = RequestMemoryPool(limits.queued_max_request_bytes)
        for listener in self.kafka_listeners:
            tls = config.tls_for(listener.name)
            sasl = config_security.sasl_for(config, listener.name)
            server = KafkaServer(
                apis, listener.host, listener.port, listener=listener.name,
                ssl_context=None if tls is None else server_ssl_context(tls),
                max_request_bytes=config.socket_request_max_bytes,
                principal_mapper=config.ssl_principal_mapping_rules,
                sasl=None if sasl is None else dataclasses.replace(
                    sasl, scram_credentials=self._scram_credential),
                quotas=quotas, memory=memory,
                connections_max_idle_ms=limits.connections_max_idle_ms,
                request_body_timeout_ms=limits.socket_request_body_timeout_ms)
            try:
                self.ports[listener.name] = await server.start(accepting=False)
            except OSError as exc:
                raise OSError(f"cannot listen on {listener.host}:{listener.port} "
                              f"({listener.name}): {exc}") from exc
            self.kafka_servers.append(server)
        if self.grpc_listeners:
            await self._bind_grpc(admin)

    async def _topics_led(self, names: Sequence[str], timeout_s: float) -> None:
        """Until every partition of each of `names` has a leader in this broker's metadata."""
        def led(snapshot: CacheSnapshot) -> bool:
            topics = [snapshot.image.topic(name) for name in names]
            return all(topic is not None and topic.partitions
                       and all(p.has_leader for p in topic.partitions.values())
                       for topic in topics)

        await self.cache.wait_until(led, timeout_s)

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """A SCRAM login's stored keys: the broker's current metadata image (KIP-554)."""
        return scram_credential(self.cache.image, user, mechanism)

    async def _bind_grpc(self, admin: AdminServicer) -> None:
        mapper = self.config.ssl_principal_mapping_rules
        interceptors: list[grpc.aio.ServerInterceptor[Any, Any]] = [
            ServingGate(self._not_serving)]
        if self.authorizer is not None:
            interceptors.insert(0, AuthorizingInterceptor(self.authorizer, mapper))
        if mapper.can_refuse:  # first: a certificate no rule names gets no call
            interceptors.insert(0, AuthenticatingInterceptor(mapper))
        self.server = new_server(interceptors)
        broker_metadata_pb2_grpc.add_BrokerMetadataServicer_to_server(
            BrokerMetadataServicer(
                self.cache, self.cluster_id, self.config.node_id,
                controller_id=lambda: self.node.status().leader_id,
                broker_state=lambda: self.state.name),
            self.server)
        add_admin_service(self.server, admin)
        # The voters' listener (DescribeQuorum's endpoints, AddRaftVoter's default listener)
        # is the controllers', not the gRPC listener this service happens to be served on.
        raft_pb2_grpc.add_QuorumServicer_to_server(
            QuorumServicer(self.node, self.cluster_id, self.config.controller_listener_names[0]),
            self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        for listener in self.grpc_listeners:
            address = f"{listener.host}:{listener.port}"
            try:
                self.ports[listener.name] = add_port(
                    self.server, address, self.config.tls_for(listener.name))
            except RuntimeError as exc:
                raise OSError(f"cannot listen on {address} ({listener.name}): {exc}") from exc
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.start()

    def load_logs(self) -> None:
        """Start loading the partition logs in worker threads (idempotent)."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(self.logs.load_logs())

    def start_lifecycle(self) -> None:
        """Register and catch up with the metadata at once, and run the data plane once the
        partition logs are loaded: a replica must not be created empty while its log is still
        loading, so the broker asks to stay fenced until then (Kafka's BrokerServer registers
        first, too, and unfences only after its logs are loaded). Registering while the logs
        load overlaps the registration and the catch-up with the loading."""
        self.load_logs()
        config = self.config
        self.lifecycle = BrokerLifecycleManager(
            config.node_id, self.cluster_id, self._advertised(),
            # Where to look for the active controller before the Raft observer knows it.
            controllers=[str(ep) for ep in config.bootstrap_servers]
            or list(self.node.voters().endpoints().values()),
            leader_endpoint=self._leader_endpoint,
            applied_offset=lambda: self.publisher.applied_offset,
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            request_timeout_ms=config.request_timeout_ms,
            registration_timeout_ms=config.initial_broker_registration_timeout_ms,
            rack=config.broker_rack,
            on_state=self._on_state,
            tls=config.controller_tls,
            liveness_backoff_ms=config.broker_liveness_reconnect_backoff_ms,
            ready_to_unfence=False,
        )
        self.lifecycle.start()
        self._starting = asyncio.ensure_future(self._start_after_load(self.lifecycle))

    async def _start_after_load(self, lifecycle: BrokerLifecycleManager) -> None:
        assert self._loading is not None
        try:
            await self._loading
        except Exception:
            return  # fatal_error reports it; the server stops
        self.logs.start()
        self.replicas.start()
        self.groups.start()
        self.txns.start()
        self.group_lag.start()
        lifecycle.set_ready_to_unfence()

    async def _alter_partition(
        self, request: broker_pb2.AlterPartitionRequest
    ) -> broker_pb2.AlterPartitionResponse:
        if self.lifecycle is None:
            raise RuntimeError("the broker lifecycle has not started")
        return await self.lifecycle.alter_partition(request)

    async def _create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                     configs: dict[str, str]) -> tuple[int, str]:
        """(error code, message) of asking the active controller for __consumer_offsets or
        __transaction_state."""
        admin = self._group_admin or self.admin
        if admin is None:  # no gRPC listener: an Admin servicer of our own, to forward with
            admin = self.admin = self._broker_admin()
        response = await admin.ops.call("CreateTopics", admin_pb2.CreateTopicsRequest(topics=[
            admin_pb2.CreatableTopic(
                name=name, num_partitions=partitions,
                replication_factor=replication_factor,
                configs=[admin_pb2.ConfigValue(name=k, value=v) for k, v in configs.items()])]))
        if response.status.error_code:
            return response.status.error_code, response.status.error_message
        result = response.topics[0]
        return result.error_code, result.error_message

    def _broker_admin(self) -> BrokerAdminServicer:
        """The Admin service of a broker-only node, forwarding writes to the active controller
        at the endpoints its Raft observer knows (the voters from the log in a dynamic
        quorum: no controller.quorum.voters needed)."""
        return BrokerAdminServicer(self.node, self.cache, self.cluster_id,
                                   tls=self.config.controller_tls,
                                   acls_enabled=self.authorizer is not None)

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
        if state in (BrokerState.RECOVERY, BrokerState.RUNNING):
            self.replicas.activate()
            # Caught up with the metadata and registered: clients and replicas are served
            # from now on (Kafka enables request processing at the same point).
            for server in self.kafka_servers:
                server.accept()
        serving = state is BrokerState.RUNNING
        if serving and self.auto_create is not None:
            self.auto_create.unfenced.set()
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        # Called from the lifecycle task, which must not block on health watchers.
        self._health_task = asyncio.ensure_future(self.health.set("", status))

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        if self.lifecycle is None:
            return True
        return await self.lifecycle.controlled_shutdown(timeout_s)

    async def stop(self) -> None:
        for task in (self._starting, self._loading):
            if task is not None and not task.done():
                task.cancel()  # stopped while loading: what is loaded closes below
                await asyncio.gather(task, return_exceptions=True)
        await self.health.enter_graceful_shutdown()
        for kafka in self.kafka_servers:
            await kafka.close()
        if self.auto_create is not None:
            await self.auto_create.close()
        await self.group_lag.close()
        await self.groups.close()
        await self.txns.close()
        await self.replicas.close()
        await self.logs.close()
        if self.server is not None:
            await self.server.stop(grace=0.5)
        if self.lifecycle is not None:
            await self.lifecycle.close()
        if self.admin is not None:
            await self.admin.close()
