"""Controller write throughput: `python -m bench.controller_bench [--json PATH]`.

Three controllers as `kraft-server` subprocesses (the metadata layer on, fsync on, loopback)
and three registered, heartbeating brokers; then C concurrent clients create topics of one
partition with replication factor 3 through the Admin API for a few seconds, one topic per
CreateTopics call; and once more with a bulk call creating many partitions at a time. Reported:
topics committed per second and partitions per second, median and min–max over --repeat runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from bench._cluster import CLIENT_OPTIONS, Cluster
from bench.log_bench import machine
from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.tls import TlsConfig, aio_channel
from metadata.rpc import admin_pb2 as apb
from metadata.rpc import admin_pb2_grpc as arpc
from metadata.rpc import broker_pb2 as bpb
from metadata.rpc import broker_pb2_grpc as brpc


async def leader_endpoint(
    cluster: Cluster, timeout_s: float = 30, tls: TlsConfig | None = None
) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for node in cluster.nodes.values():
            try:
                async with aio_channel(node.endpoint, tls) as channel:
                    s = await rpc.QuorumStub(channel).NodeStatus(pb.NodeStatusRequest(), timeout=1)
                if s.state == "Leader":
                    return node.endpoint
            except grpc.RpcError:
                pass
        await asyncio.sleep(0.05)  # poll interval of a bounded wait for an election
    raise RuntimeError("no leader")


async def start_brokers(
    endpoint: str, cluster_id: str, stop: asyncio.Event, tls: TlsConfig | None = None
) -> list[asyncio.Task]:
    """Three brokers that register and heartbeat every 200 ms, so topics can be placed."""
    channel = aio_channel(endpoint, tls, CLIENT_OPTIONS)
    stub = brpc.BrokerLifecycleStub(channel)
    epochs = {}
    deadline = time.monotonic() + 30
    for broker in (1, 2, 3):
        request = bpb.BrokerRegistrationRequest(
            broker_id=broker, cluster_id=cluster_id, incarnation_id=random_uuid(),
            listeners=[bpb.Listener(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker)])
        while True:
            reply = await stub.RegisterBroker(request, timeout=5)
            if reply.error_code == 0:
                break
            # The new leader becomes the active controller once its epoch's first record
            # commits; until then it answers NOT_CONTROLLER.
            if reply.error_code != Errors.NOT_CONTROLLER or time.monotonic() > deadline:
                raise RuntimeError(f"registration failed: {reply.error_message}")
            await asyncio.sleep(0.02)  # retry pause of a bounded wait
        epochs[broker] = reply.broker_epoch

    async def beat(broker: int) -> None:
        while not stop.is_set():
            await stub.BrokerHeartbeat(bpb.BrokerHeartbeatRequest(
                broker_id=broker, broker_epoch=epochs[broker],
                current_metadata_offset=1 << 40, want_fence=False, want_shut_down=False),
                timeout=5)
            try:
                await asyncio.wait_for(stop.wait(), 0.2)  # the heartbeat interval
            except TimeoutError:
                pass

    return [asyncio.create_task(beat(b)) for b in (1, 2, 3)]


async def create_for(stub: arpc.AdminStub, prefix: str, seconds: float, partitions: int
                     ) -> tuple[int, list[float]]:
    created, latencies = 0, []
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        started = time.perf_counter()
        reply = await stub.CreateTopics(apb.CreateTopicsRequest(topics=[apb.CreatableTopic(
            name=f"{prefix}-{n}", num_partitions=partitions, replication_factor=3)]), timeout=10)
        latencies.append(time.perf_counter() - started)
        if reply.topics and reply.topics[0].error_code == 0:
            created += 1
    return created, latencies


async def measure(endpoint: str, clients: int, seconds: float, partitions: int, tag: str,
                  tls: TlsConfig | None = None) -> dict[str, float]:
    channel = aio_channel(endpoint, tls, CLIENT_OPTIONS)
    stub = arpc.AdminStub(channel)
    started = time.monotonic()
    results = await asyncio.gather(*(create_for(stub, f"{tag}-c{c}", seconds, partitions)
                                     for c in range(clients)))
    wall = time.monotonic() - started
    await channel.close()
    topics = sum(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[1])
    return {"topics_per_s": topics / wall, "partitions_per_s": topics * partitions / wall,
            "p50_ms": latencies[len(latencies) // 2] * 1000,
            "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="kraft-controller-bench-") as tmp:
        cluster = Cluster(Path(tmp))
        try:
            cluster_id = cluster.format()
            for node_id in cluster.nodes:
                cluster.start(node_id)
            endpoint = await leader_endpoint(cluster)
            stop = asyncio.Event()
            beats = await start_brokers(endpoint, cluster_id, stop)
            cases = [(c, 1) for c in args.clients] + [(1, args.bulk_partitions)]
            for clients, partitions in cases:
                runs = [await measure(endpoint, clients, args.seconds, partitions,
                                      f"r{i}-{clients}-{partitions}")
                        for i in range(args.repeat)]
                key = f"{clients} clients x {partitions} partition(s)/topic"
                results["runs"][key] = runs
                tps = [r["topics_per_s"] for r in runs]
                pps = [r["partitions_per_s"] for r in runs]
                print(f"{key}: {statistics.median(tps):,.0f} topics/s "
                      f"({min(tps):,.0f}–{max(tps):,.0f}), {statistics.median(pps):,.0f} "
                      f"partitions/s, p50 {statistics.median(r['p50_ms'] for r in runs):.1f} ms",
                      flush=True)
            stop.set()
            await asyncio.gather(*beats, return_exceptions=True)
        finally:
            cluster.kill_all()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controller_bench", description=__doc__)
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 16, 64])
    parser.add_argument("--bulk-partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
