"""This project's side of the peer benchmark, built on the existing benches' clusters
(each write target is a `load.Target` driven by the one load generator):

* writes through the leader's append API in process (`quorum_bench.InProcessQuorum`, the
  controller's own call) and over gRPC (`TestHooks.Append` to a `kraft-server` leader, client
  in this process like etcd's and PySyncObj's);
* writes through the Admin API: one `IncrementalAlterConfigs` per request (SET of the
  cluster-wide `log.retention.ms`, a new value each time, so every request commits one
  ConfigRecord) to the active controller of a metadata cluster (`controller_bench`'s setup);
* failover: `quorum_bench.failover_trial` (kill -9 and SIGTERM of the leader, first append
  committed by a new leader);
* metadata at scale: N partitions created in 1,000-partition topics (RF 3, three heartbeating
  brokers), then kill -9 of the active controller -> the first Admin write a new active
  controller accepts (a config change sent to both survivors, retried every 5 ms)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from bench._cluster import CLIENT_OPTIONS, Clients, Cluster, _reraise_cancellation
from bench.controller_bench import leader_endpoint
from bench.peers.load import RECORD_BYTES, Target, Write, first_success, summary
from bench.quorum_bench import InProcessQuorum, failover_trial
from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from metadata.rpc import admin_pb2 as apb
from metadata.rpc import admin_pb2_grpc as arpc
from metadata.rpc import broker_pb2 as bpb
from metadata.rpc import broker_pb2_grpc as brpc

PARTITIONS_PER_TOPIC = 1000
TOPIC_CREATORS = 4
HEARTBEAT_S = 0.2
BROKERS = (1, 2, 3)


class Brokers:
    """Three brokers that register and then heartbeat every 200 ms to whichever controller is
    active, moving to the next controller on an error or NOT_CONTROLLER, as real brokers do.
    A broker that stopped heartbeating would be fenced 9 s later; with 1,000,000 partitions
    that fencing is a batch so large that the active controller loses its leadership over it
    (see docs/benchmarks.md, Peers), so the scale test keeps its brokers alive throughout."""

    def __init__(self, cluster: Cluster, cluster_id: str) -> None:
        self.endpoints = [cluster.nodes[n].endpoint for n in sorted(cluster.nodes)]
        self.cluster_id = cluster_id
        self.channels = [grpc.aio.insecure_channel(e, options=CLIENT_OPTIONS)
                         for e in self.endpoints]
        self.stubs = [brpc.BrokerLifecycleStub(c) for c in self.channels]
        self.epochs: dict[int, int] = {}
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.current = 0

    async def _call(self, method: str, request: Any, timeout_s: float = 30.0) -> Any:
        """Send to the controller believed active; on failure try the next one."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                reply = await getattr(self.stubs[self.current], method)(request, timeout=2)
                if reply.error_code != Errors.NOT_CONTROLLER:
                    return reply
            except grpc.aio.AioRpcError:
                _reraise_cancellation()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{method}: no active controller within {timeout_s} s")
            self.current = (self.current + 1) % len(self.stubs)
            await asyncio.sleep(0.01)  # pause before asking the next controller

    async def start(self) -> None:
        for broker in BROKERS:
            reply = await self._call("RegisterBroker", bpb.BrokerRegistrationRequest(
                broker_id=broker, cluster_id=self.cluster_id, incarnation_id=random_uuid(),
                listeners=[bpb.Listener(name="PLAINTEXT", host="127.0.0.1",
                                        port=9092 + broker)]))
            if reply.error_code != 0:
                raise RuntimeError(f"registration of broker {broker}: {reply.error_message}")
            self.epochs[broker] = reply.broker_epoch
        self.tasks = [asyncio.create_task(self._beat(b)) for b in BROKERS]

    async def _beat(self, broker: int) -> None:
        while not self.stop.is_set():
            try:
                await self._call("BrokerHeartbeat", bpb.BrokerHeartbeatRequest(
                    broker_id=broker, broker_epoch=self.epochs[broker],
                    current_metadata_offset=1 << 40, want_fence=False, want_shut_down=False),
                    timeout_s=60)
            except RuntimeError as exc:
                print(f"    broker {broker}: {exc}", flush=True)
            try:
                await asyncio.wait_for(self.stop.wait(), HEARTBEAT_S)
            except TimeoutError:
                pass

    async def close(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for channel in self.channels:
            await channel.close()


async def in_process_target(root: Path) -> tuple[Target, Callable[[], Awaitable[None]]]:
    """The leader's append API in process: `quorum_bench.InProcessQuorum` (the leader is a
    `Server` in this event loop, the followers are subprocesses). Its client CPU is the whole
    process (writers and leader); its server CPU counts the two followers only."""
    quorum = InProcessQuorum(root)
    record = os.urandom(RECORD_BYTES)
    try:
        await quorum.start()
    except BaseException:
        await quorum.stop()
        raise

    async def write() -> bool:
        await quorum.append([record])
        return True

    async def make(count: int) -> list[Write]:
        return [write] * count

    async def close(_: list[Write]) -> None:
        return None

    cluster = quorum.cluster
    target = Target("kraft append (in process)", make, close,
                    lambda: cluster.cpu_seconds(2) + cluster.cpu_seconds(3))
    return target, quorum.stop


def _grpc_target(name: str, endpoint: str, call: Callable[[Any], Write],
                 server_cpu: Callable[[], float]) -> Target:
    """Writers each on their own channel (one connection each, as the HTTP clients)."""
    channels: dict[int, list[Any]] = {}

    async def make(count: int) -> list[Write]:
        opened = [grpc.aio.insecure_channel(endpoint, options=CLIENT_OPTIONS)
                  for _ in range(count)]
        channels[count] = opened
        return [call(channel) for channel in opened]

    async def close(writers: list[Write]) -> None:
        for channel in channels.pop(len(writers)):
            await channel.close()

    return Target(name, make, close, server_cpu)


def cluster_cpu(cluster: Cluster) -> float:
    return sum(cluster.cpu_seconds(n) for n in cluster.nodes)


async def grpc_append_target(root: Path) -> tuple[Target, Callable[[], Awaitable[None]]]:
    """The append API over gRPC (`TestHooks.Append`) to a `kraft-server` leader."""
    cluster = Cluster(root, extra={"internal.test.hooks.enable": "true"})
    record = os.urandom(RECORD_BYTES)

    async def stop() -> None:
        cluster.kill_all()

    try:
        cluster.format()
        for node_id in cluster.nodes:
            cluster.start(node_id)
        clients = Clients(cluster)
        try:
            leader, _, _ = await clients.healthy(record)
        finally:
            await clients.close()
    except BaseException:
        await stop()
        raise

    def call(channel: Any) -> Write:
        stub = rpc.TestHooksStub(channel)
        request = pb.AppendRequest(records=[record])

        async def write() -> bool:
            try:
                reply = await stub.Append(request, timeout=5)
            except grpc.aio.AioRpcError:
                _reraise_cancellation()  # Ctrl-C cancels the call: do not swallow it
                return False
            return reply.error_code == 0
        return write

    target = _grpc_target("kraft append (gRPC)", cluster.nodes[leader].endpoint, call,
                          lambda: cluster_cpu(cluster))
    return target, stop


def config_write(stub: arpc.AdminStub, counter: list[int]) -> Write:
    """One Admin write: SET the cluster default log.retention.ms to a value never used before."""

    async def write() -> bool:
        counter[0] += 1
        request = apb.IncrementalAlterConfigsRequest(resources=[apb.AlterConfigsResource(
            resource_type=apb.CONFIG_RESOURCE_TYPE_BROKER, resource_name="",
            configs=[apb.AlterableConfig(name="log.retention.ms", op=apb.ALTER_CONFIG_OP_SET,
                                         value=str(604_800_000 + counter[0]))])])
        try:
            reply = await stub.IncrementalAlterConfigs(request, timeout=5)
        except grpc.aio.AioRpcError:
            _reraise_cancellation()
            return False
        return bool(reply.results) and reply.results[0].error_code == 0
    return write


class MetadataCluster:
    """Three controllers with the metadata layer on (as controller_bench runs them)."""

    def __init__(self, root: Path, cluster: Cluster | None = None) -> None:
        self.cluster = cluster or Cluster(root)
        self.counter = [0]
        self.cluster_id = ""

    async def start(self) -> str:
        self.cluster_id = self.cluster.format()
        for node_id in self.cluster.nodes:
            self.cluster.start(node_id)
        return await leader_endpoint(self.cluster)

    def stop(self) -> None:
        self.cluster.kill_all()

    async def target(self, name: str = "kraft Admin API") -> Target:
        """The Admin API: one config change per request to the active controller."""
        endpoint = await leader_endpoint(self.cluster)
        return _grpc_target(name, endpoint,
                            lambda channel: config_write(arpc.AdminStub(channel), self.counter),
                            lambda: cluster_cpu(self.cluster))

    async def grow(self, partitions: int, created: int) -> dict[str, Any]:
        """Create topics of 1,000 partitions until `partitions` exist (from `created`)."""
        endpoint = await leader_endpoint(self.cluster)
        channel = grpc.aio.insecure_channel(endpoint, options=CLIENT_OPTIONS)
        stub = arpc.AdminStub(channel)
        topics = list(range(created // PARTITIONS_PER_TOPIC, partitions // PARTITIONS_PER_TOPIC))
        started = time.perf_counter()

        async def creator(mine: list[int]) -> None:
            for t in mine:
                reply = await stub.CreateTopics(apb.CreateTopicsRequest(topics=[
                    apb.CreatableTopic(name=f"scale-{t}", num_partitions=PARTITIONS_PER_TOPIC,
                                       replication_factor=3)]), timeout=60)
                if not reply.topics or reply.topics[0].error_code != 0:
                    raise RuntimeError(f"CreateTopics scale-{t} failed: {reply}")
        try:
            await asyncio.gather(*(creator(topics[i::TOPIC_CREATORS])
                                   for i in range(TOPIC_CREATORS)))
        finally:
            await channel.close()
        wall = time.perf_counter() - started
        return {"partitions": partitions, "created_s": wall,
                "partitions_per_s": (partitions - created) / wall if wall else float("nan")}

    async def _leader(self) -> int:
        endpoint = await leader_endpoint(self.cluster)
        return next(n for n, node in self.cluster.nodes.items() if node.endpoint == endpoint)

    async def _all_agree(self, timeout_s: float) -> None:
        """Every controller is up and follows one leader whose Admin write commits."""
        deadline = time.monotonic() + timeout_s
        clients = Clients(self.cluster)
        try:
            while time.monotonic() < deadline:
                views = await clients.statuses(sorted(self.cluster.nodes), timeout_s=1.0)
                leaders = {v.leader_id for v in views.values()}
                if len(views) == len(self.cluster.nodes) and len(leaders) == 1:
                    hws = {v.high_watermark for v in views.values()}
                    if len(hws) == 1 and -1 not in leaders:
                        return
                await asyncio.sleep(0.1)  # poll interval of a bounded wait for catch-up
        finally:
            await clients.close()
        raise RuntimeError(f"controllers did not agree and catch up within {timeout_s} s")

    async def failover(self, trials: int, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """kill -9 of the active controller -> first Admin write accepted by a new one."""
        out = []
        for _ in range(trials):
            await self._all_agree(600)
            victim = await self._leader()
            survivors = [n for n in self.cluster.nodes if n != victim]
            channels = [grpc.aio.insecure_channel(self.cluster.nodes[n].endpoint,
                                                  options=CLIENT_OPTIONS) for n in survivors]
            attempts = [config_write(arpc.AdminStub(c), self.counter) for c in channels]
            # Connect first, so the measurement starts with ready channels.
            await asyncio.wait_for(asyncio.gather(*(c.channel_ready() for c in channels)), 30)
            self.cluster.signal(victim, signal.SIGKILL)
            seconds = await first_success(attempts, timeout_s)
            for channel in channels:
                await channel.close()
            self.cluster.wait_exit(victim, 10)
            restarted = time.perf_counter()
            self.cluster.start(victim)
            await self._all_agree(600)
            out.append({"victim": victim, "accepted_ms": seconds * 1000 if seconds else None,
                        "restart_and_catch_up_s": time.perf_counter() - restarted})
            print(f"    kill -9 of active controller {victim}: new active accepted a write in "
                  f"{out[-1]['accepted_ms'] or float('nan'):.1f} ms "
                  f"(victim back and caught up in {out[-1]['restart_and_catch_up_s']:.1f} s)",
                  flush=True)
        return out


async def failover_raft(root: Path, kinds: list[str], trials: int) -> dict[str, Any]:
    """All-subprocess quorum with test hooks (quorum_bench's failover setup and trials)."""
    cluster = Cluster(root, extra={"internal.test.hooks.enable": "true"})
    record = os.urandom(RECORD_BYTES)
    out: dict[str, Any] = {}
    clients: Clients | None = None
    try:
        cluster.format()
        for node_id in cluster.nodes:
            cluster.start(node_id)
        clients = Clients(cluster)
        await clients.healthy(record)
        for kind in kinds:
            results = []
            for _ in range(trials):
                results.append(await failover_trial(cluster, clients, kind, record, 0.0))
            values = [t["committed_ms"] for t in results if t["committed_ms"] is not None]
            out[kind] = {"trials": results, "ms": values, "summary": summary(values),
                         "timeouts": len(results) - len(values)}
            print(f"  kraft {kind}: median {out[kind]['summary']['median']:.1f} ms, "
                  f"p99 {out[kind]['summary']['p99']:.1f} ms, {len(values)} trials", flush=True)
    finally:
        if clients is not None:
            await clients.close()
        cluster.kill_all()
    return out
