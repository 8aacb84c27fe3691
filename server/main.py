"""`kraft-server CONFIG`: start a node from its role config file.

`process.roles` picks the roles: `controller` serves the Raft, Quorum, Admin, BrokerLifecycle
and health services on the controller listener; `broker` fetches the metadata log as a Raft
observer and serves its metadata cache on the broker listener(s) (broker/); `broker,controller`
runs both over the one local metadata log. It refuses an unformatted or mismatched storage
directory, serves Prometheus metrics on `metrics.port`, and stops gracefully on
SIGTERM/SIGINT: a broker first completes a controlled shutdown (its leaderships moved,
bounded), then a leader resigns with EndQuorumEpoch and waits (bounded) for a successor.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import functools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIServer

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from prometheus_client import start_http_server

from kraft.client import ControllerEndpoints, SnapshotReader
from kraft.core.config import RaftConfig
from kraft.log.base import CorruptRecordError
from kraft.log.meta_properties import StorageError, read_meta_properties
from kraft.log.quorum_state import QuorumStateError, QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.log.snapshots import FileSnapshotStore, SnapshotGapError
from kraft.node.faults import FaultInjector
from kraft.node.metrics import RaftMetrics
from kraft.node.raft_node import RaftNode, Retention, monotonic_ms
from kraft.node.service import QuorumServicer, RaftServicer, TestHooksServicer
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.authorizer import AuthorizingInterceptor
from kraft.security.principal import AuthenticatingInterceptor
from kraft.security.tls import (
    TlsConfigError,
    add_port,
    key_file_is_private,
    new_server,
)
from metadata.admin_service import AdminServicer, add_admin_service
from metadata.authorizer.publisher import AclPublisher
from metadata.authorizer.standard import StandardAuthorizer
from metadata.controller import QuorumController
from metadata.controller_metrics import ControllerCollector
from metadata.lifecycle_service import BrokerLifecycleServicer, add_broker_lifecycle_service
from metadata.liveness_probe import all_refused
from metadata.loader import MetadataLoader, MetadataLoadError
from metadata.topics import METADATA_PARTITION_DIR
from server.bootstrap_metadata import read_bootstrap_records
from server.config import ConfigError, NodeConfig, load_config
from server.config_listeners import Listener
from server.data_plane_faults import DataPlaneFaults
from server.logging_setup import configure_logging, set_status_source
from server.quorum_bootstrap import has_bootstrap_snapshot
from server.storage import ensure_formatted
from snapshots.generator import SnapshotGenerator

if TYPE_CHECKING:
    from server.broker_role import BrokerRole

log = logging.getLogger("server")

SHUTDOWN_TIMEOUT_S = 5.0
SLOW_STOP_STEP_S = 2.0
STOP_GRACE_S = 5.0  # for the steps after the handover: servers, tasks, the final flush
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0  # a broker's wait for its leaderships to move


class StartupError(Exception):
    """A one-line reason the node cannot start."""


def raft_config(config: NodeConfig, cluster_id: str, directory_id: str = "") -> RaftConfig:
    """A controller is a voter (or, in a dynamic quorum, may become one) reachable at its
    advertised controller listener; a broker-only node is an observer that nobody dials.
    `directory_id` (the metadata directory's) makes the node's replica key (KIP-853)."""
    local_endpoint = ""
    listener = config.controller_listener
    if config.is_controller and listener is not None:
        advertised = config.advertised_listeners.get(listener.name, listener)
        # As `kraft-storage format` writes it into the voter set (Kafka: localhost if no host).
        local_endpoint = f"{advertised.host or 'localhost'}:{advertised.port}"
    return RaftConfig(
        cluster_id=cluster_id,
        node_id=config.node_id,
        voters={vid: f"{ep.host}:{ep.port}" for vid, ep in config.voters.items()},
        local_endpoint=local_endpoint,
        bootstrap=tuple(
            (-(i + 2), f"{ep.host}:{ep.port}") for i, ep in enumerate(config.bootstrap_servers)
        ),
        directory_id=directory_id,
        controller=config.is_controller,
        listener=config.controller_listener_names[0],
        election_timeout_ms=config.election_timeout_ms,
        fetch_timeout_ms=config.fetch_timeout_ms,
        election_backoff_max_ms=config.election_backoff_max_ms,
        request_timeout_ms=config.request_timeout_ms,
        retry_backoff_ms=config.retry_backoff_ms,
    )


def _check_roles(config: NodeConfig) -> None:
    if config.is_broker and config.test_hooks_enabled:
        raise StartupError(
            f"{config.source}: internal.test.hooks.enable=true makes a bare Raft node without "
            "metadata, which a broker needs; remove it or run process.roles=controller"
        )


def metadata_directory_id(config: NodeConfig) -> str:
    """The metadata directory's directory.id: with node.id, this replica's key. ensure_formatted
    has written one if the directory lacked it."""
    meta = read_meta_properties(config.metadata_log_dir)
    if meta is None or meta.directory_id is None:
        raise StartupError(f"{config.metadata_log_dir} has no directory.id in meta.properties")
    return meta.directory_id


def _check_quorum_storage(config: NodeConfig) -> None:
    """Say how the voter set will be found when the config and the storage disagree or the
    node starts outside the voter set (a -N controller waits to be added)."""
    if not config.is_controller:
        return
    if config.voters and has_bootstrap_snapshot(config):
        log.warning(
            "%s was formatted with a bootstrap voter set (--standalone/--initial-controllers, "
            "kraft.version 1): controller.quorum.voters is ignored once the log holds the "
            "voters; replace it with controller.quorum.bootstrap.servers", config.metadata_log_dir)
    elif not config.voters and not has_bootstrap_snapshot(config):
        log.info(
            "node %d learns the voter set from the quorum (formatted with "
            "--no-initial-controllers); until it is a voter it replicates as an observer: add "
            "it with kraft-admin --bootstrap-controller <controller> quorum add-controller "
            "--command-config %s", config.node_id, config.source)


def _controller_listener(config: NodeConfig) -> Listener:
    listener = config.controller_listener
    if listener is None or not config.is_controller:
        raise StartupError(f"{config.source}: this node has no controller listener")
    return listener


def _security(config: NodeConfig) -> StandardAuthorizer | None:
    """Read every TLS file now, so a bad one stops the node with one line before anything
    listens; the process's one authorizer (fed by an AclPublisher), if any."""
    try:
        for name in {*config.listeners, *config.controller_listener_names}:
            tls = config.tls_for(name)
            if tls is not None:
                tls.key_and_chain()
                tls.trusted()
                if not key_file_is_private(tls.keystore):
                    log.warning("%s is readable by other users; chmod 600 it", tls.keystore)
        return config.authorizer()
    except (TlsConfigError, ConfigError) as exc:
        raise StartupError(str(exc)) from exc


def lock_directory(directory: str) -> int:
    """Hold an exclusive lock on the metadata log directory for the life of the process: two
    nodes writing one log would corrupt it. The kernel drops the lock when the process dies."""
    path = os.path.join(directory, ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StartupError(
            f"{directory} is in use by another kraft-server process (lock file {path}); stop "
            "it first or point this node's log.dirs elsewhere"
        ) from None
    return fd


class Server:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        _check_roles(config)
        self.authorizer = _security(config)
        self.cluster_id = ensure_formatted(config)
        self.directory_id = metadata_directory_id(config)
        _check_quorum_storage(config)
        self._lock = lock_directory(config.metadata_log_dir)
        partition_dir = os.path.join(config.metadata_log_dir, METADATA_PARTITION_DIR)
        try:
            self.log = SegmentedLog(
                partition_dir, segment_bytes=config.metadata_log_segment_bytes
            )
        except CorruptRecordError as exc:
            raise StartupError(
                f"{exc}. The metadata log is damaged before its tail; restore this directory "
                "or move it away and let the node re-replicate from the quorum."
            ) from exc
        try:
            store = QuorumStateStore(os.path.join(partition_dir, "quorum-state"))
            store.read()
            self.snapshots = FileSnapshotStore(partition_dir)
        except (QuorumStateError, CorruptRecordError) as exc:
            self.log.close()
            raise StartupError(str(exc)) from exc
        self.metrics = RaftMetrics(config.node_id)
        self.node = RaftNode(
            raft_config(config, self.cluster_id, self.directory_id), self.log, store,
            self.metrics,
            snapshots=self.snapshots,
            retention=Retention(
                config.metadata_max_retention_bytes, config.metadata_max_retention_ms,
            ),
            hw_path=os.path.join(partition_dir, "high-watermark"),
            tls=config.controller_tls,
        )
        # The metadata layer replays the log, so it runs only where the log holds metadata
        # records: the test hooks append raw payloads and make this a bare Raft node.
        self.controller: QuorumController | None = None
        self.broker: BrokerRole | None = None
        self.snapshot_generator: SnapshotGenerator | None = None
        self.loader: MetadataLoader | None = None
        if not config.test_hooks_enabled:
            self.loader = self._metadata_layer(config)
        self.server: grpc.aio.Server | None = None
        self.faults: FaultInjector | None = None
        self.data_plane_faults: DataPlaneFaults | None = None
        self.port = 0
        self.metrics_port: int | None = None
        self._metrics_server: WSGIServer | None = None

    def _metadata_layer(self, config: NodeConfig) -> MetadataLoader:
        """One MetadataLoader, the log's only listener, and its publishers in the order they
        see each image: the broker's cache and ISR expander, the controller, the snapshot
        generator."""
        loader = MetadataLoader()
        self.node.register(loader)
        if self.authorizer is not None:
            # First, so every other publisher's image is already the authorizer's.
            loader.install(AclPublisher(self.authorizer))
        if config.is_broker:
            # Imported here: the Kafka protocol (kio) costs a controller-only process ~0.3 s
            # of start-up it does not need.
            from server.broker_role import BrokerRole

            self.broker = BrokerRole(config, self.cluster_id, self.node, loader,
                                     self.metrics.registry, authorizer=self.authorizer)
        if config.is_controller:
            self.controller = QuorumController(
                self.node,
                noop_interval_ms=config.metadata_max_idle_interval_ms,
                session_timeout_ms=config.broker_session_timeout_ms,
                liveness_grace_ms=config.broker_liveness_grace_ms,
                liveness_probe=all_refused if config.broker_liveness_probe_enable else None,
                # The node's wall clock, so an injected clock step (kraft/node/faults.py)
                # reaches the controller too; sessions run on the monotonic clock regardless.
                wall_clock_ms=lambda: self.node.wall_clock_ms(monotonic_ms()),
                bootstrap_records=read_bootstrap_records(config),  # --add-scram's users
            )
            loader.install(self.controller)
            ControllerCollector(self.controller, self.metrics.registry)
        self.snapshot_generator = SnapshotGenerator(
            self.node,
            config.metadata_log_max_record_bytes_between_snapshots,
            config.metadata_log_max_snapshot_interval_ms,
        )
        loader.install(self.snapshot_generator)
        return loader

    async def start(self) -> None:
        self.admin: AdminServicer | None = None
        self.health = HealthServicer()
        # Before anything listens: a Raft request must not reach a node that has not started.
        await self._load_latest_snapshot()
        if self.config.is_controller:
            await self._start_controller_listener()
        if self.broker is not None:
            try:
                await self.broker.bind(self.admin)
            except OSError as exc:
                raise StartupError(str(exc)) from exc
        try:
            await self.node.start()
        except SnapshotGapError as exc:
            raise StartupError(str(exc)) from exc
        faults_dir = self.config.test_faults_dir
        if faults_dir is not None:
            self.faults = FaultInjector(faults_dir, self.node, self.log.faults)
            self.faults.start()
            if self.broker is not None:
                self.data_plane_faults = DataPlaneFaults(
                    faults_dir, self.broker.replicas.fetchers, self.broker.logs.faults)
                self.data_plane_faults.start()
        set_status_source(lambda: (lambda s: (s.state, s.epoch))(self.node.status()))
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        if self.config.metrics_port is not None:
            address = self.config.metrics_address
            self._metrics_server, _ = start_http_server(
                self.config.metrics_port, addr=address.host if address else "",
                registry=self.metrics.registry,
            )
            self.metrics_port = self._metrics_server.server_port
        if self.broker is not None:
            self.broker.start_lifecycle()
        where = [f"{name}:{port}" for name, port in self._bound_ports().items()]
        log.info(
            "node %d (%s) serving cluster %s on %s (metrics: %s)", self.config.node_id,
            ",".join(sorted(self.config.process_roles)), self.cluster_id, ", ".join(where),
            self.metrics_port or "off",
        )

    async def _load_latest_snapshot(self) -> None:
        """The image is built from the latest snapshot before the node joins the quorum: a
        voter that joined first could win an election while its loader still replayed the
        snapshot (seconds at a million partitions) and lead all that time with no active
        controller, its leadership queued behind the load."""
        latest = self.snapshots.latest_id()
        if self.loader is None or latest is None:
            return
        # At a million partitions this takes seconds, and the ports stay closed meanwhile.
        log.info("replaying snapshot %d-%d before listening or joining the quorum",
                 latest.offset, latest.epoch)
        try:
            await self.loader.load_snapshot(SnapshotReader.of(self.snapshots, latest))
        except MetadataLoadError as exc:
            raise StartupError(str(exc)) from exc

    def _bound_ports(self) -> dict[str, int]:
        ports = dict(self.broker.ports) if self.broker is not None else {}
        listener = self.config.controller_listener
        if self.server is not None and listener is not None:
            ports[listener.name] = self.port
        return ports

    async def _start_controller_listener(self) -> None:
        listener = _controller_listener(self.config)
        mapper = self.config.ssl_principal_mapping_rules
        interceptors: list[grpc.aio.ServerInterceptor[Any, Any]] = (
            [] if self.authorizer is None else [AuthorizingInterceptor(self.authorizer, mapper)])
        if mapper.can_refuse:  # first: a certificate no rule names gets no call at all
            interceptors.insert(0, AuthenticatingInterceptor(mapper))
        self.server = new_server(interceptors)
        rpc.add_RaftServicer_to_server(RaftServicer(self.node), self.server)
        quorum = QuorumServicer(self.node, self.cluster_id, listener.name)
        rpc.add_QuorumServicer_to_server(quorum, self.server)
        if self.config.test_hooks_enabled:
            rpc.add_TestHooksServicer_to_server(TestHooksServicer(self.node), self.server)
        if self.controller is not None:
            # The voters of a dynamic quorum live in the log: hand out the live set.
            self.admin = AdminServicer(self.controller, self.cluster_id,
                                       ControllerEndpoints(self.node),
                                       tls=self.config.controller_tls,
                                       acls_enabled=self.authorizer is not None)
            add_admin_service(self.server, self.admin)
            add_broker_lifecycle_service(
                self.server,
                BrokerLifecycleServicer(
                    self.controller, self.cluster_id, self.admin.controller_endpoints),
            )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        address = f"{listener.host}:{listener.port}"
        try:
            self.port = add_port(self.server, address, self.config.tls_for(listener.name))
        except RuntimeError as exc:
            raise StartupError(f"cannot listen on {address} ({listener.name}): {exc}") from exc
        await self.server.start()

    @property
    def fatal_error(self) -> BaseException | None:
        if self.node.fatal_error is not None:
            return self.node.fatal_error
        if self.loader is not None and self.loader.fatal_error is not None:
            return self.loader.fatal_error
        return self.broker.fatal_error if self.broker is not None else None

    async def stop(self, graceful: bool) -> None:
        if graceful and self.broker is not None:
            moved = await self.broker.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
            log.info("controlled shutdown %s", "complete" if moved else "timed out")
        if graceful:
            handed_over = await self.node.shutdown(SHUTDOWN_TIMEOUT_S)
            log.info("graceful shutdown %s", "complete" if handed_over else "timed out")
        await self.health.enter_graceful_shutdown()
        steps: list[tuple[str, Callable[[], Awaitable[object]] | None]] = [
            ("broker", self.broker.stop if self.broker is not None else None),
            ("gRPC server", functools.partial(self.server.stop, grace=0.5)
             if self.server is not None else None),
            ("admin", self.admin.close if self.admin is not None else None),
            ("controller", self.controller.close if self.controller is not None else None),
            ("snapshot generator", self.snapshot_generator.close
             if self.snapshot_generator is not None else None),
            ("fault injector", self.faults.stop if self.faults is not None else None),
            ("data-plane faults", self.data_plane_faults.stop
             if self.data_plane_faults is not None else None),
            ("raft node", self.node.stop),
        ]
        for name, step in steps:
            if step is None:
                continue
            started = time.monotonic()
            await step()
            took = time.monotonic() - started
            if took > SLOW_STOP_STEP_S:
                # A stop that overruns its budget ends in exit code 4: say which step.
                log.warning("stopping the %s took %.1f s", name, took)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()


async def serve(config: NodeConfig) -> int:
    server = Server(config)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass
        if server.fatal_error is not None:
            log.critical("stopping: %s", server.fatal_error)
            await _stop(server, graceful=False)
            return 3
    # A stop that hangs must not keep the process (and its directory lock) alive: after the
    # bounded handover steps and a grace period the process exits anyway. What it had not
    # flushed is lost exactly as in a crash, which the protocol tolerates by design.
    deadline_s = SHUTDOWN_TIMEOUT_S + STOP_GRACE_S + (
        CONTROLLED_SHUTDOWN_TIMEOUT_S if server.broker is not None else 0)
    watchdog = threading.Timer(deadline_s, _exit_after_hung_stop, args=(deadline_s,))
    watchdog.daemon = True
    watchdog.start()
    stopped = await _stop(server, graceful=True)
    watchdog.cancel()
    return 0 if stopped else 4


async def _stop(server: Server, graceful: bool) -> bool:
    """Stop the server; a stop that fails (say the last flush, on a full disk) is one line and
    an exit code, not a traceback: what was not flushed is lost exactly as in a crash."""
    try:
        await server.stop(graceful=graceful)
    except Exception as exc:
        log.critical("the stop did not complete: %s", exc)
        return False
    return True


def _exit_after_hung_stop(deadline_s: float) -> None:
    log.critical("the graceful stop did not finish within %.0f s; exiting now", deadline_s)
    logging.shutdown()
    os._exit(4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kraft-server", description=__doc__)
    parser.add_argument("config", help="the node's role config file (Java properties)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"kraft-server: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.node_id)
    for warning in config.warnings:
        log.warning("%s", warning)
    try:
        code = asyncio.run(serve(config))
    except (StartupError, StorageError) as exc:
        print(f"kraft-server: {exc}", file=sys.stderr)
        return 2
    # Stopped: every log is flushed and closed. The interpreter's own teardown of the heap
    # (thousands of partition logs, the metadata image) took 3.5 s of a SIGTERM's exit.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
