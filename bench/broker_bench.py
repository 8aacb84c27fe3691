"""Brokers: `python -m bench.broker_bench [--json PATH] [--parts propagation,cold-start]
[--partitions N | --million]`.

Three controllers and three brokers as `kraft-server` subprocesses on loopback (fsync on).

* **Propagation**: before each CreateTopics (one partition, RF 3, sent to the active
  controller) three BrokerMetadata.DescribeTopics long-polls are parked, one per broker,
  waiting for that topic. Reported per write, as p50 / p99 / max over --iterations, timed
  **from the send** of the write (what a client sees: commit latency included) until the
  topic is visible in all three brokers' caches, and until each broker's; and, as before, from
  the client's answer (the write is committed; negative when a broker answered before the
  controller's reply reached the client, since that answer has its own trip back).
* **Cold start**: broker 6 stops (SIGTERM); --partitions partitions are created (topics of
  9,999 partitions, RF 2, each one atomic CreateTopics, so on brokers 4 and 5: a controlled
  shutdown or fencing of a broker in 100,000 ISRs is a controller-side stall measured
  separately, not a broker start); broker 6 starts once to catch up, then, --repeat times,
  starts (a) with its log on disk, replayed from the local log, and (b) with its metadata log
  deleted, fetched whole from the leader, and stops again (SIGTERM) after each. Reported:
  process start to serving (the broker listener answers: caught up and unfenced), the
  broker's own start-to-caught-up time, and its RSS (VmRSS when serving, VmHWM peak). There are no
  snapshots yet, so "from snapshot + log tail" is "from the log" here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from bench._cluster import CLIENT_OPTIONS, Cluster, ClusterError
from bench.log_bench import machine
from bench.quorum_bench import git
from broker.rpc import broker_metadata_pb2 as bmpb
from broker.rpc import broker_metadata_pb2_grpc as bmrpc
from harness.cluster import write_broker_configs
from kraft.errors import Errors
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from metadata.rpc import admin_pb2 as apb
from metadata.rpc import admin_pb2_grpc as arpc
from metadata.topics import METADATA_PARTITION_DIR

BROKERS = [4, 5, 6]
PARTITIONS_PER_TOPIC = 9_999  # + its TopicRecord = 10,000 records, one atomic batch
TOPIC_ALREADY_EXISTS = 36
SETTINGS = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "9000"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as file:
        for line in file:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def wait(condition: Any, timeout_s: float, what: str, poll_s: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except grpc.RpcError:
            pass
        time.sleep(poll_s)  # poll interval of a bounded wait
    raise ClusterError(f"timed out waiting for {what}")


class Bench:
    def __init__(self, root: Path) -> None:
        self.cluster = Cluster(root, 3, {"internal.test.hooks.enable": "false", **SETTINGS})
        brokers = write_broker_configs(root, dict(self.cluster.nodes), BROKERS, SETTINGS)
        self.cluster.nodes.update(brokers)
        self.channels: dict[str, grpc.Channel] = {}

    def channel(self, endpoint: str) -> grpc.Channel:
        if endpoint not in self.channels:
            self.channels[endpoint] = grpc.insecure_channel(endpoint, options=CLIENT_OPTIONS)
        return self.channels[endpoint]

    def endpoint(self, node_id: int) -> str:
        return self.cluster.nodes[node_id].endpoint

    def leader(self) -> str:
        def find() -> str | None:
            for i in (1, 2, 3):
                status = rpc.QuorumStub(self.channel(self.endpoint(i))).NodeStatus(
                    pb.NodeStatusRequest(), timeout=1)
                if status.state == "Leader":
                    return self.endpoint(i)
            return None
        return str(wait(find, 30, "a leader"))

    def serving(self, broker_id: int) -> bool:
        reply = bmrpc.BrokerMetadataStub(self.channel(self.endpoint(broker_id))).DescribeCluster(
            bmpb.DescribeClusterRequest(), timeout=2)
        return bool(reply.broker_state == "RUNNING")

    def start(self) -> None:
        self.cluster.format()
        for node_id in self.cluster.nodes:
            self.cluster.start(node_id)
        self.leader()
        for b in BROKERS:
            wait(lambda b=b: self.serving(b), 60, f"broker {b} serving")

    def create(self, name: str, partitions: int, rf: int) -> None:
        request = apb.CreateTopicsRequest(topics=[apb.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf)])
        retried = False
        for _ in range(100):
            try:
                reply = arpc.AdminStub(self.channel(self.leader())).CreateTopics(
                    request, timeout=60)
            except grpc.RpcError:
                retried = True  # the controller failed over under load: try the next one
                continue
            if reply.status.error_code == Errors.NOT_CONTROLLER:
                retried = True
                continue
            assert reply.status.error_code == 0, reply.status
            if retried and reply.topics[0].error_code == TOPIC_ALREADY_EXISTS:
                return  # an earlier attempt committed before the failover
            assert reply.topics[0].error_code == 0, reply.topics[0]
            return
        raise ClusterError("no active controller took the write")

    # -- propagation ---------------------------------------------------------------------------

    def propagation(self, iterations: int) -> dict[str, Any]:
        from_ack: list[float] = []
        from_send: list[float] = []
        each_from_send: list[float] = []
        leader = self.leader()
        admin = arpc.AdminStub(self.channel(leader))
        for endpoint in [leader] + [self.endpoint(b) for b in BROKERS]:
            # Connected before the clock: a first call's connect is not propagation.
            grpc.channel_ready_future(self.channel(endpoint)).result(timeout=30)
        stubs = [bmrpc.BrokerMetadataStub(self.channel(self.endpoint(b))) for b in BROKERS]
        for i in range(iterations):
            name = f"prop-{i}"
            seen: list[float] = []
            lock = threading.Lock()
            done = threading.Event()

            def on_done(_future: grpc.Future[Any], seen: list[float] = seen,
                        lock: threading.Lock = lock, done: threading.Event = done) -> None:
                with lock:
                    seen.append(time.perf_counter())
                    if len(seen) == len(BROKERS):
                        done.set()

            futures = []
            for stub in stubs:
                future = stub.DescribeTopics.future(
                    bmpb.DescribeTopicsRequest(names=[name], wait_ms=10_000), timeout=15)
                future.add_done_callback(on_done)
                futures.append(future)
            time.sleep(0.002)  # let the long-polls reach the brokers before the write
            sent = time.perf_counter()
            reply = admin.CreateTopics(apb.CreateTopicsRequest(topics=[apb.CreatableTopic(
                name=name, num_partitions=1, replication_factor=3)]), timeout=10)
            acked = time.perf_counter()
            assert reply.status.error_code == 0 and reply.topics[0].error_code == 0, reply
            if not done.wait(15):
                raise ClusterError(f"{name} did not reach every broker")
            for future in futures:
                assert future.result().topics[0].error_code == 0, future.result()
            visible = max(seen)
            from_ack.append((visible - acked) * 1000)
            from_send.append((visible - sent) * 1000)
            each_from_send.extend((t - sent) * 1000 for t in seen)

        def summary(values: list[float]) -> dict[str, float]:
            return {"p50_ms": round(percentile(values, 0.5), 2),
                    "p99_ms": round(percentile(values, 0.99), 2),
                    "max_ms": round(max(values), 2), "min_ms": round(min(values), 2)}

        return {"iterations": iterations, "send_to_all_brokers": summary(from_send),
                "send_to_each_broker": summary(each_from_send),
                "commit_to_all_brokers": summary(from_ack)}

    # -- cold start ------------------------------------------------------------------------------

    def fill(self, partitions: int) -> float:
        started = time.perf_counter()
        topics = -(-partitions // PARTITIONS_PER_TOPIC)
        for t in range(topics):
            count = min(PARTITIONS_PER_TOPIC, partitions - t * PARTITIONS_PER_TOPIC)
            self.create(f"big-{t}", count, 2)
        return time.perf_counter() - started

    def stop(self, broker: int) -> None:
        self.cluster.signal(broker, signal.SIGTERM)
        if self.cluster.wait_exit(broker, 120) != 0:
            raise ClusterError(f"broker {broker} did not stop cleanly")

    def cold_start(self, wipe: bool) -> dict[str, Any]:
        """Broker 6 is stopped: start it, measure until it serves, stop it again."""
        broker = 6
        node = self.cluster.nodes[broker]
        if wipe:
            shutil.rmtree(Path(node.config_path.parent / f"node-{broker}" /
                               METADATA_PARTITION_DIR))
        started = time.perf_counter()
        self.cluster.start(broker)
        assert node.process is not None
        peak = {"VmRSS": 0, "VmHWM": 0}

        def up() -> bool:
            nonlocal peak
            peak = rss_kib(node.process.pid)  # type: ignore[union-attr]
            return self.serving(broker)

        wait(up, 600, "broker 6 serving", poll_s=0.05)
        serving_s = time.perf_counter() - started
        memory = rss_kib(node.process.pid)
        caught_up = self.cluster.scrape(broker).get("kraft_broker_initial_catch_up_seconds")
        self.stop(broker)
        return {"log": "fetched from the leader" if wipe else "local",
                "start_to_serving_s": round(serving_s, 2),
                "start_to_caught_up_s": round(caught_up, 2) if caught_up else None,
                "rss_mib": round(memory["VmRSS"] / 1024, 1),
                "peak_rss_mib": round(max(memory["VmHWM"], peak["VmHWM"]) / 1024, 1)}

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()
        self.cluster.kill_all()


PARTS = ("propagation", "cold-start")


def run(args: argparse.Namespace, argv: list[str] | None = None) -> dict[str, Any]:
    partitions = 1_000_000 if args.million else args.partitions
    info = machine() | {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "git_commit": git("rev-parse", "HEAD"), "loadavg_at_start": os.getloadavg(),
        "uncommitted_changes_in_product": git("status", "--porcelain", "--", ":(top)kraft",
                                              ":(top)metadata", ":(top)broker",
                                              ":(top)server"),
        "command": " ".join(["python -m bench.broker_bench", *(argv if argv is not None
                                                               else sys.argv[1:])])}
    results: dict[str, Any] = {"machine": info, "partitions": partitions}
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as tmp:
        bench = Bench(Path(tmp))
        try:
            bench.start()
            if "propagation" in args.parts:
                results["propagation"] = bench.propagation(args.iterations)
                p = results["propagation"]
                print(f"propagation over {args.iterations} writes: send -> all 3 brokers "
                      f"p50 {p['send_to_all_brokers']['p50_ms']} ms, "
                      f"p99 {p['send_to_all_brokers']['p99_ms']} ms (each broker p50 "
                      f"{p['send_to_each_broker']['p50_ms']} ms, p99 "
                      f"{p['send_to_each_broker']['p99_ms']} ms); from the client's answer "
                      f"(commit) -> all 3 brokers p50 {p['commit_to_all_brokers']['p50_ms']} "
                      f"ms, p99 {p['commit_to_all_brokers']['p99_ms']} ms", flush=True)
            if "cold-start" in args.parts:
                cold_start(bench, partitions, args.repeat, results)
        except Exception:
            for node_id in bench.cluster.nodes:
                print(f"--- node {node_id} ---\n{bench.cluster.logs(node_id)}")
            raise
        finally:
            bench.close()
    info["loadavg_at_end"] = os.getloadavg()
    return results


def cold_start(bench: Bench, partitions: int, repeat: int, results: dict[str, Any]) -> None:
    bench.stop(6)
    fill_s = bench.fill(partitions)
    print(f"created {partitions} partitions in {fill_s:.1f} s", flush=True)
    warmup = bench.cold_start(wipe=False)  # fetches the new tail once
    print(f"warm-up start (local log + {partitions} partitions fetched): {warmup}", flush=True)
    runs = []
    for r in range(repeat):
        for wipe in (False, True):
            result = bench.cold_start(wipe)
            print(f"cold start {r + 1} ({result['log']}): {result}", flush=True)
            runs.append(result)
    results["fill_s"] = round(fill_s, 1)
    results["cold_start"] = runs
    for kind in ("local", "fetched from the leader"):
        times = [x["start_to_serving_s"] for x in runs if x["log"] == kind]
        rss = [x["peak_rss_mib"] for x in runs if x["log"] == kind]
        results[f"cold_start_{kind.split()[0]}_median_s"] = statistics.median(times)
        print(f"cold start ({kind}): median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}), peak RSS median "
              f"{statistics.median(rss):.0f} MiB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.broker_bench", description=__doc__)
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated: propagation, cold-start (default: both)")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--million", action="store_true", help="1,000,000 partitions (slow)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--merge", action="store_true",
                        help="replace only this run's parts in an existing --json file (its "
                             "machine record goes to machine_<part>)")
    args = parser.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    if not args.parts or not set(args.parts) <= set(PARTS):
        parser.error(f"--parts takes {', '.join(PARTS)}")
    if args.iterations < 1 or args.partitions < 1 or args.repeat < 1:
        parser.error("--iterations, --partitions and --repeat must be at least 1")
    if args.merge and not args.json:
        parser.error("--merge needs --json")
    results = run(args, argv)
    if args.json:
        if args.merge and Path(args.json).exists():
            merged = json.loads(Path(args.json).read_text())
            for part in args.parts:
                merged[f"machine_{part}"] = results["machine"]
            merged.update({k: v for k, v in results.items() if k not in ("machine",
                                                                          "partitions")})
            results = merged
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
