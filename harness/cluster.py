"""Real processes on loopback: a test cluster of `kraft-server` nodes with ephemeral ports,
storage in a temp dir, and cleanup of every process it started."""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc

from broker.rpc import broker_metadata_pb2 as broker_pb
from broker.rpc import broker_metadata_pb2_grpc as broker_rpc
from harness.ports import free_ports as free_ports  # re-exported: tests take it from here
from kraft.core.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from metadata.rpc import admin_pb2 as admin_pb
from metadata.rpc import admin_pb2_grpc as admin_rpc
from server.storage_cli import main as storage_main

T = TypeVar("T")
PYTHON = sys.executable


def _broker_state(stub: broker_rpc.BrokerMetadataStub) -> str:
    """A broker's own state; UNAVAILABLE (grpc.RpcError) until it serves."""
    reply = stub.DescribeCluster(broker_pb.DescribeClusterRequest(), timeout=5)
    return str(reply.broker_state)


def wait_for(condition: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.02) -> T:
    """Poll `condition` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except (grpc.RpcError, OSError) as exc:
            last_error = exc
        time.sleep(poll_s)  # polling interval of a condition wait, not a synchronisation sleep
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} ({last_error})")


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


@dataclass
class NodeProcess:
    node_id: int
    port: int
    metrics_port: int
    config_path: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    kafka_port: int = 0  # a broker's Kafka-protocol listener (0: not a broker)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def kafka_endpoint(self) -> str:
        """host:port for Kafka clients (bootstrap.servers)."""
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def write_controller_configs(
    root: Path,
    size: int,
    extra: dict[str, str],
    per_node: dict[int, dict[str, str]] | None = None,
    *,
    dynamic: bool = False,
) -> dict[int, NodeProcess]:
    """Config files for `size` controllers on loopback with ephemeral ports (Raft + metrics),
    data under `root`; `extra` goes to every file, `per_node` to one node's only. With
    `dynamic` (KIP-853) no file has controller.quorum.voters: every one lists all the
    controllers in controller.quorum.bootstrap.servers, and the voter set comes from the
    storage (format with `ProcessCluster.format_dynamic`) and from add/remove-controller."""
    root.mkdir(parents=True, exist_ok=True)
    ports = free_ports(size * 2)
    voters = ",".join(f"{i}@127.0.0.1:{ports[i - 1]}" for i in range(1, size + 1))
    quorum = ({"controller.quorum.bootstrap.servers": bootstrap_list(ports[:size])} if dynamic
              else {"controller.quorum.voters": voters})
    nodes = {}
    for i in range(1, size + 1):
        props = {
            "process.roles": "controller",
            "node.id": str(i),
            **quorum,
            "listeners": f"CONTROLLER://127.0.0.1:{ports[i - 1]}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(root / f"node-{i}"),
            "metrics.port": str(ports[size + i - 1]),
            **extra,
            **(per_node or {}).get(i, {}),
        }
        config_path = root / f"controller-{i}.properties"
        config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        nodes[i] = NodeProcess(i, ports[i - 1], ports[size + i - 1], config_path,
                               root / f"node-{i}.log")
    return nodes


def set_node_config(path: Path, settings: dict[str, str]) -> None:
    """Replace or add keys in a node's config file (one key per line, as the harness writes)."""
    lines = [line for line in path.read_text().splitlines()
             if line.split("=", 1)[0] not in settings]
    path.write_text("\n".join([*lines, *(f"{k}={v}" for k, v in settings.items())]) + "\n")


def bootstrap_list(ports: list[int]) -> str:
    """controller.quorum.bootstrap.servers for controllers on these loopback ports."""
    return ",".join(f"127.0.0.1:{port}" for port in ports)


def write_broker_configs(
    root: Path,
    controllers: dict[int, NodeProcess],
    broker_ids: list[int],
    extra: dict[str, str],
    *,
    combined: bool = False,
    dynamic: bool = False,
) -> dict[int, NodeProcess]:
    """Config files for broker-only nodes observing `controllers` (or, with `combined`, turn
    the controllers' files into broker,controller ones with two more listeners). A broker's
    `port` is its gRPC listener's (ADMIN: metadata service, Admin API, DescribeQuorum), its
    `kafka_port` its Kafka-protocol listener's (PLAINTEXT). With `dynamic` the files name the
    controllers in controller.quorum.bootstrap.servers only (KIP-853)."""
    voters = ",".join(f"{i}@127.0.0.1:{n.port}" for i, n in sorted(controllers.items()))
    quorum = ({"controller.quorum.bootstrap.servers":
               bootstrap_list([n.port for _, n in sorted(controllers.items())])} if dynamic
              else {"controller.quorum.voters": voters})
    ids = list(controllers) if combined else broker_ids
    ports = free_ports(len(ids) * 3)
    nodes = {}
    for k, node_id in enumerate(ids):
        broker_port, metrics_port, kafka_port = ports[3 * k], ports[3 * k + 1], ports[3 * k + 2]
        broker_listeners = (f"PLAINTEXT://127.0.0.1:{kafka_port},"
                            f"ADMIN://127.0.0.1:{broker_port}")
        if combined:
            controller = controllers[node_id]
            props = {
                "process.roles": "broker,controller",
                "listeners": f"CONTROLLER://127.0.0.1:{controller.port},{broker_listeners}",
                "metrics.port": str(controller.metrics_port),
            }
            metrics_port = controller.metrics_port
        else:
            props = {
                "process.roles": "broker",
                "listeners": broker_listeners,
                "metrics.port": str(metrics_port),
            }
        props = {
            **props,
            "node.id": str(node_id),
            **quorum,
            "controller.listener.names": "CONTROLLER",
            "grpc.listener.names": "ADMIN",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                              "ADMIN:PLAINTEXT",
            "log.dirs": str(root / f"node-{node_id}"),
            **extra,
        }
        config_path = root / f"{'combined' if combined else 'broker'}-{node_id}.properties"
        config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        nodes[node_id] = NodeProcess(node_id, broker_port, metrics_port, config_path,
                                     root / f"node-{node_id}.log", kafka_port=kafka_port)
    return nodes


@dataclass
class ProcessCluster:
    root: Path
    size: int = 3
    extra: dict[str, str] = field(default_factory=dict)
    nodes: dict[int, NodeProcess] = field(default_factory=dict)
    cluster_id: str = ""
    # KIP-853: bootstrap servers only, no controller.quorum.voters (see format_dynamic).
    dynamic: bool = False

    def __post_init__(self) -> None:
        self.nodes = write_controller_configs(
            self.root, self.size, {"internal.test.hooks.enable": "true", **self.extra},
            dynamic=self.dynamic,
        )

    def add_brokers(
        self, broker_ids: list[int], extra: dict[str, str] | None = None
    ) -> dict[int, NodeProcess]:
        """Broker-only nodes observing this cluster's controllers; they join `nodes` (their
        `endpoint` is the broker listener, which also serves Quorum.NodeStatus)."""
        brokers = write_broker_configs(
            self.root, dict(self.nodes), broker_ids, {**self.extra, **(extra or {})},
            dynamic=self.dynamic)
        self.nodes.update(brokers)
        return brokers

    def make_combined(self, extra: dict[str, str] | None = None) -> dict[int, NodeProcess]:
        """Rewrite every controller's config as broker,controller with a broker listener; the
        returned nodes' `endpoint` is the broker listener (`nodes` keep the controller's)."""
        combined = write_broker_configs(
            self.root, dict(self.nodes), [], {**self.extra, **(extra or {})}, combined=True,
            dynamic=self.dynamic)
        for node_id, node in combined.items():
            self.nodes[node_id].config_path = node.config_path
            self.nodes[node_id].kafka_port = node.kafka_port
        return combined

    def wait_brokers_unfenced(self, broker_ids: list[int], timeout_s: float) -> None:
        """Until the controllers list exactly `broker_ids` as registered and unfenced, and
        each of those brokers' own process says it runs: just after a restart the controllers
        still list the killed process, unfenced, until its session expires."""

        # Asked over gRPC from this process: a CLI per poll would cost a Python start each
        # time, CPU the starting cluster needs.
        with grpc.insecure_channel(self.nodes[1].endpoint) as channel:
            stub = admin_rpc.AdminStub(channel)

            def unfenced() -> bool:
                listed = stub.ListBrokers(admin_pb.ListBrokersRequest(), timeout=5).brokers
                return sorted(b.broker_id for b in listed if not b.fenced) == sorted(broker_ids)

            wait_for(unfenced, timeout_s, f"brokers {broker_ids} registered and unfenced")
        for broker_id in broker_ids:
            with grpc.insecure_channel(self.nodes[broker_id].endpoint) as channel:
                brokers = broker_rpc.BrokerMetadataStub(channel)

                wait_for(lambda stub=brokers: _broker_state(stub) == "RUNNING", timeout_s,
                         f"broker {broker_id} running")

    def bootstrap_servers(self) -> str:
        """Every broker's Kafka listener, for a Kafka client's bootstrap.servers."""
        return ",".join(n.kafka_endpoint for n in self.nodes.values() if n.kafka_port)

    # -- storage and processes -----------------------------------------------------------------

    def format(self, cluster_id: str | None = None) -> str:
        if cluster_id is None:
            cluster_id = random_uuid()
        self.cluster_id = cluster_id
        for node in self.nodes.values():
            self.format_node(node.node_id, cluster_id)
        return cluster_id

    def format_node(self, node_id: int, cluster_id: str, *flags: str) -> None:
        """`kraft-storage format` of one node; `flags` such as --standalone or -N. Run in this
        process (the CLI's own tests run it as a command)."""
        errors = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
            code = storage_main(["format", "-t", cluster_id, "-c",
                                 str(self.nodes[node_id].config_path), *flags])
        assert code == 0, errors.getvalue()

    def format_dynamic(self, standalone: int = 1, cluster_id: str | None = None) -> str:
        """A dynamic quorum (KIP-853): node `standalone` formatted with --standalone (the one
        voter), every other node with --no-initial-controllers (observers until added)."""
        if cluster_id is None:
            cluster_id = random_uuid()
        self.cluster_id = cluster_id
        for node_id in self.nodes:
            flag = "--standalone" if node_id == standalone else "--no-initial-controllers"
            self.format_node(node_id, cluster_id, flag)
        return cluster_id

    def data_dir(self, node_id: int) -> Path:
        """The node's log.dirs (its metadata directory), as the config writers set it."""
        return self.root / f"node-{node_id}"

    def start(self, node_id: int) -> NodeProcess:
        node = self.nodes[node_id]
        assert not node.alive, f"node {node_id} is already running"
        log_file = node.log_path.open("ab")
        node.process = subprocess.Popen(
            [PYTHON, "-m", "server.main", str(node.config_path)],
            stdout=log_file, stderr=subprocess.STDOUT,
        )
        log_file.close()
        return node

    def start_all(self) -> None:
        for node_id in self.nodes:
            self.start(node_id)

    def signal(self, node_id: int, sig: int) -> None:
        node = self.nodes[node_id]
        assert node.process is not None
        node.process.send_signal(sig)

    def kill(self, node_id: int) -> None:
        self.signal(node_id, signal.SIGKILL)
        self.wait_exit(node_id, 10)

    def wait_exit(self, node_id: int, timeout_s: float) -> int:
        node = self.nodes[node_id]
        assert node.process is not None
        return node.process.wait(timeout=timeout_s)

    def stop_all(self) -> None:
        for node in self.nodes.values():
            if node.alive:
                node.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        for node in self.nodes.values():
            if node.process is not None:
                node.process.wait(timeout=10)

    def logs(self, node_id: int) -> str:
        path = self.nodes[node_id].log_path
        return path.read_text(errors="replace") if path.exists() else ""

    # -- RPCs ----------------------------------------------------------------------------------

    def _stub(self, node_id: int, kind: type[T]) -> tuple[grpc.Channel, T]:
        channel = grpc.insecure_channel(self.nodes[node_id].endpoint)
        return channel, kind(channel)  # type: ignore[call-arg]

    def status(self, node_id: int) -> pb.NodeStatusResponse:
        channel, stub = self._stub(node_id, rpc.QuorumStub)
        with channel:
            return stub.NodeStatus(pb.NodeStatusRequest(), timeout=2)

    def describe(self, node_id: int) -> pb.DescribeQuorumResponse:
        channel, stub = self._stub(node_id, rpc.QuorumStub)
        with channel:
            return stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=2)

    def append(self, node_id: int, records: list[bytes], timeout_s: float = 5) -> pb.AppendResponse:
        channel, stub = self._stub(node_id, rpc.TestHooksStub)
        with channel:
            return stub.Append(pb.AppendRequest(records=records), timeout=timeout_s)

    def set_faults(self, node_id: int, blocked: list[int]) -> None:
        channel, stub = self._stub(node_id, rpc.TestHooksStub)
        with channel:
            stub.SetFaults(pb.FaultRequest(blocked_node_ids=blocked), timeout=2)

    def statuses(self) -> dict[int, pb.NodeStatusResponse]:
        out = {}
        for node_id, node in self.nodes.items():
            if node.alive:
                try:
                    out[node_id] = self.status(node_id)
                except grpc.RpcError:
                    pass
        return out

    def leader(self, among: set[int] | None = None) -> int | None:
        """The leader every live node (of `among`) agrees on, or None."""
        statuses = {k: v for k, v in self.statuses().items() if among is None or k in among}
        expected = len([n for n in self.nodes.values() if n.alive and
                        (among is None or n.node_id in among)])
        if len(statuses) < expected or not statuses:
            return None
        leaders = {(s.leader_id, s.epoch) for s in statuses.values()}
        if len(leaders) != 1:
            return None
        leader_id, _ = leaders.pop()
        if leader_id < 0 or statuses.get(leader_id) is None:
            return None
        return leader_id if statuses[leader_id].state == "Leader" else None

    def append_committed(self, records: list[bytes], timeout_s: float = 10) -> tuple[int, int]:
        """Append at whoever leads, retrying through elections; (last offset, epoch)."""
        def attempt() -> tuple[int, int] | None:
            leader = self.leader()
            if leader is None:
                return None
            resp = self.append(leader, records)
            if resp.error_code != Errors.NONE:
                return None
            return (resp.last_offset, resp.epoch)

        return wait_for(attempt, timeout_s, "an append to commit")


@contextmanager
def kafka_cluster(root: Path, brokers: list[int], settings: dict[str, str],
                  wait_s: float = 60) -> Iterator[ProcessCluster]:
    """One controller (node 1) and `brokers`, started, the controller active and every broker
    unfenced; stopped on the way out. What the Kafka-client test modules and benchmarks share."""
    cluster = ProcessCluster(root, 1, dict(settings))
    try:
        cluster.add_brokers(brokers)
        cluster.format()
        cluster.start_all()
        wait_for(lambda: cluster.leader(among={1}), wait_s, "an active controller")
        cluster.wait_brokers_unfenced(brokers, wait_s)
        yield cluster
    finally:
        cluster.stop_all()


def add_fault_dirs(cluster: ProcessCluster) -> dict[int, Path]:
    """Give every node (call it after add_brokers) an `internal.test.faults.dir` under the
    cluster's root, where the harness drops fault files (kraft/node/faults.py)."""
    dirs = {}
    for node_id, node in cluster.nodes.items():
        directory = cluster.root / f"faults-{node_id}"
        directory.mkdir(exist_ok=True)
        with node.config_path.open("a") as config:
            config.write(f"internal.test.faults.dir={directory}\n")
        dirs[node_id] = directory
    return dirs
