"""A three-voter quorum on loopback for the quorum benchmarks: config files with ephemeral ports
in a temporary directory, storage formatted with `server.storage_cli format`, nodes run as
`python -m server.main CONFIG` subprocesses (or, for one node, in the caller's process),
gRPC clients for Quorum.NodeStatus and TestHooks.Append, and cleanup of every process started.

Every subprocess is started in its own session (a Ctrl-C at the terminal reaches only the
benchmark, which then kills and reaps them) with PR_SET_PDEATHSIG=SIGKILL (the kernel kills it
should the benchmark itself die without cleaning up).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from harness.cluster import NodeProcess as Node
from harness.cluster import write_controller_configs
from kraft.log.meta_properties import random_uuid
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.tls import MESSAGE_SIZE_OPTIONS

PYTHON = sys.executable
CLIENT_OPTIONS = [
    ("grpc.enable_retries", 0),
    # A restarted node must be reachable again at once, not after gRPC's default 1 s backoff.
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 200),
    *MESSAGE_SIZE_OPTIONS,
]
# Runs in the child before it becomes kraft-server: ask the kernel to SIGKILL it when the
# benchmark dies, then exec the server (exec keeps the death signal).
_LAUNCHER = (
    "import ctypes, os, sys; ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0); "
    "os.getppid() == 1 and os._exit(1); "
    "os.execv(sys.executable, [sys.executable, '-m', 'server.main', sys.argv[1]])"
)


class ClusterError(Exception):
    """The quorum did not reach the state a benchmark needs in time."""


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Cluster:
    """Three voters (ids 1..size). `per_node` adds config keys to one node's file only."""

    root: Path
    size: int = 3
    extra: dict[str, str] = field(default_factory=dict)
    per_node: dict[int, dict[str, str]] = field(default_factory=dict)
    nodes: dict[int, Node] = field(default_factory=dict)
    cluster_id: str = ""

    def __post_init__(self) -> None:
        self.nodes = write_controller_configs(self.root, self.size, self.extra, self.per_node)

    # -- storage and processes -----------------------------------------------------------------

    def format(self) -> str:
        self.cluster_id = random_uuid()
        for node in self.nodes.values():
            out = subprocess.run(
                [PYTHON, "-m", "server.storage_cli", "format", "-t", self.cluster_id,
                 "-c", str(node.config_path)],
                capture_output=True, text=True, timeout=60,
            )
            if out.returncode != 0:
                raise ClusterError(f"format of node {node.node_id} failed: {out.stderr.strip()}")
        return self.cluster_id

    def start(self, node_id: int) -> Node:
        node = self.nodes[node_id]
        if node.alive:
            raise ClusterError(f"node {node_id} is already running")
        with node.log_path.open("ab") as log_file:
            node.process = subprocess.Popen(
                [PYTHON, "-c", _LAUNCHER, str(node.config_path)],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return node

    def signal(self, node_id: int, sig: int) -> None:
        process = self.nodes[node_id].process
        if process is None or process.poll() is not None:
            raise ClusterError(f"node {node_id} is not running")
        process.send_signal(sig)

    def wait_exit(self, node_id: int, timeout_s: float) -> int:
        process = self.nodes[node_id].process
        assert process is not None
        return process.wait(timeout=timeout_s)

    def kill_all(self) -> None:
        """SIGKILL (after SIGCONT, harmless) every process still running, then reap them all."""
        for node in self.nodes.values():
            if node.alive:
                assert node.process is not None
                for sig in (signal.SIGKILL, signal.SIGCONT):
                    try:
                        node.process.send_signal(sig)
                    except ProcessLookupError:
                        pass
        for node in self.nodes.values():
            if node.process is not None:
                try:
                    node.process.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be caught
                    print(f"warning: node {node.node_id} (pid {node.process.pid}) did not exit",
                          file=sys.stderr)

    def cpu_seconds(self, node_id: int) -> float:
        process = self.nodes[node_id].process
        if process is None or process.poll() is not None:
            return float("nan")
        return proc_cpu_seconds(process.pid)

    def logs(self, node_id: int, tail: int = 3000) -> str:
        path = self.nodes[node_id].log_path
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def scrape(self, node_id: int) -> dict[str, float]:
        """The node's Prometheus metrics (unlabelled samples and `name{labels}` keys)."""
        url = f"http://127.0.0.1:{self.nodes[node_id].metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    continue
        return out


def _reraise_cancellation() -> None:
    """A cancelled task (Ctrl-C) may see its RPC end as an AioRpcError(CANCELLED): swallowing
    that would lose the cancellation, so raise it again."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Clients:
    """grpc.aio stubs to every node of a cluster; a node's channel can be rebuilt (after a
    restart) so that no reconnect backoff of the old one delays it."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._quorum: dict[int, rpc.QuorumStub] = {}
        self._hooks: dict[int, rpc.TestHooksStub] = {}
        for node_id in cluster.nodes:
            self._open(node_id)

    def _open(self, node_id: int) -> None:
        channel = grpc.aio.insecure_channel(self.cluster.nodes[node_id].endpoint,
                                            options=CLIENT_OPTIONS)
        self._channels[node_id] = channel
        self._quorum[node_id] = rpc.QuorumStub(channel)
        self._hooks[node_id] = rpc.TestHooksStub(channel)

    async def reopen(self, node_id: int) -> None:
        old = self._channels.pop(node_id)
        self._open(node_id)
        await old.close()

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    async def status(self, node_id: int, timeout_s: float = 1.0) -> pb.NodeStatusResponse | None:
        try:
            return await self._quorum[node_id].NodeStatus(pb.NodeStatusRequest(),
                                                          timeout=timeout_s)
        except grpc.aio.AioRpcError:
            _reraise_cancellation()
            return None

    async def statuses(self, node_ids: list[int], timeout_s: float = 1.0
                       ) -> dict[int, pb.NodeStatusResponse]:
        answers = await asyncio.gather(*(self.status(n, timeout_s) for n in node_ids))
        return {n: a for n, a in zip(node_ids, answers, strict=True) if a is not None}

    async def append(self, node_id: int, records: list[bytes], timeout_s: float = 2.0
                     ) -> pb.AppendResponse | None:
        try:
            return await self._hooks[node_id].Append(pb.AppendRequest(records=records),
                                                     timeout=timeout_s)
        except grpc.aio.AioRpcError:
            _reraise_cancellation()
            return None

    async def healthy(self, record: bytes, timeout_s: float = 30.0) -> tuple[int, int, int]:
        """Wait until all voters agree on one leader, an append through it commits, and every
        node's high watermark equals the leader's; return (leader, epoch, high watermark)."""
        deadline = time.monotonic() + timeout_s
        ids = sorted(self.cluster.nodes)
        appended_in: tuple[int, int] | None = None
        while time.monotonic() < deadline:
            views = await self.statuses(ids, timeout_s=0.5)
            agreed = {(v.leader_id, v.epoch) for v in views.values()}
            if len(views) == len(ids) and len(agreed) == 1:
                leader, epoch = agreed.pop()
                if leader in views and views[leader].state == "Leader":
                    if appended_in != (leader, epoch):
                        response = await self.append(leader, [record])
                        if response is not None and response.error_code == 0:
                            appended_in = (leader, epoch)
                        continue
                    hws = {v.high_watermark for v in views.values()}
                    if len(hws) == 1:
                        return leader, epoch, hws.pop()
            await asyncio.sleep(0.02)  # poll interval of a bounded wait
        raise ClusterError(f"the quorum was not healthy within {timeout_s} s")
