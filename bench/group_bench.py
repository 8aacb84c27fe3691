"""Consumer groups (issue 16): `python -m bench.group_bench [--trials N] [--json PATH]`.

One controller and three brokers as `kraft-server` subprocesses on loopback (group settings
at Kafka's defaults except `group.initial.rebalance.delay.ms`, reported), driven by
confluent-kafka (librdkafka) consumers in this process, which is not a server's:

* **Rebalance after a member leaves**: a group of 3 consumers (heartbeat.interval.ms
  --heartbeat-ms) on a 6-partition topic; one closes (LeaveGroup); the time from its close()
  to the moment both survivors hold their new assignments covering all 6 partitions. A
  survivor learns of the rebalance from its next heartbeat, so the configured delay is the
  heartbeat interval; "beyond" subtracts it. A fresh third member rejoins between trials.
* **Coordinator failover**: the same group consuming a topic fed at --rate records/s; kill -9
  of the broker coordinating the group; from the kill to (a) the first commit the new
  coordinator acknowledges, (b) the first record produced after the kill that the group
  consumes, (c) every partition consuming such a record; and how many members got a new
  assignment across the kill (a rebalance). Members commit asynchronously, so a commit that
  waits for a coordinator never holds up consuming. The broker is restarted between trials and
  the preferred leaders restored, so every trial kills a broker leading its share of the topic.
* **OffsetCommit latency**: one consumer (assign only, a simple group) commits one offset
  synchronously, paced at --commit-rate per second for --commit-seconds: p50 / p99 / max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.log_bench import machine
from harness.cluster import ProcessCluster, kafka_cluster, run_cli, wait_for

BROKERS = [2, 3, 4]
PARTITIONS = 6
WAIT_S = 60
TARGETS = {"rebalance_beyond_s": 1.0, "failover_s": 2.0, "commit_p99_ms": 10.0}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: list[float], digits: int = 3) -> dict[str, Any]:
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits),
            "all": [round(v, digits) for v in values]}


class Member(threading.Thread):
    """A group member polling in its own thread; it records its assignments and commits
    what it read after each poll, asynchronously, so a commit waiting for a coordinator never
    holds up consuming (the commit callback records the acknowledged ones)."""

    def __init__(self, bootstrap: str, group: str, topic: str, heartbeat_ms: int) -> None:
        super().__init__(daemon=True)
        self.assigned: list[tuple[float, set[int]]] = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "latest", "heartbeat.interval.ms": heartbeat_ms,
            "session.timeout.ms": 10000, "on_commit": self._on_commit})
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.current: set[int] = set()
        self.stop = threading.Event()
        self.first_after: dict[int, float] = {}  # partition -> first post-mark record seen
        self.commits: list[float] = []  # times of acknowledged commits
        self.mark = float("inf")  # records produced after this (time.time()) are counted

    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.current = {tp.partition for tp in partitions}
        self.assigned.append((time.monotonic(), set(self.current)))

    def _on_revoke(self, _consumer: Any, _partitions: list[TopicPartition]) -> None:
        self.current = set()

    def _on_commit(self, error: Any, _partitions: list[TopicPartition]) -> None:
        if error is None:
            self.commits.append(time.time())

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                read = False
                for message in self.consumer.consume(500, timeout=0.05):
                    if message.error() is not None:
                        continue
                    read = True
                    produced = float(message.value().decode())
                    if produced > self.mark and message.partition() not in self.first_after:
                        self.first_after[message.partition()] = time.time()
                if read:
                    try:
                        self.consumer.commit(asynchronous=True)
                    except KafkaException:
                        pass  # no assignment at this moment (a rebalance): next round
        finally:
            self.consumer.close()


class Feeder(threading.Thread):
    """A producer of records whose value is their send time, at `rate` per second."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 1})
        self.topic, self.rate = topic, rate
        self.stop = threading.Event()

    def run(self) -> None:
        sent = 0
        start = time.monotonic()
        while not self.stop.is_set():
            self.producer.produce(self.topic, value=repr(time.time()).encode(),
                                  partition=sent % PARTITIONS)
            sent += 1
            self.producer.poll(0)
            pause = start + sent / self.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # pacing of the load, not a synchronisation
        self.producer.flush(30)


def stable_with(members: list[Member]) -> bool:
    covered = [p for m in members for p in m.current]
    return sorted(covered) == list(range(PARTITIONS)) and all(m.current for m in members)


def reassigned(survivors: list[Member], marks: list[int]) -> float | None:
    """When every survivor got a new assignment and they cover every partition: the last
    assignment's time."""
    if not all(len(m.assigned) > k for m, k in zip(survivors, marks, strict=True)):
        return None
    if not stable_with(survivors):
        return None
    return max(m.assigned[-1][0] for m in survivors)


def recovered(members: list[Member], killed: float) -> bool:
    seen = set().union(*(m.first_after for m in members))
    return len(seen) == PARTITIONS and any(t > killed for m in members for t in m.commits)


def preferred_leaders(cluster: ProcessCluster, topic: str) -> bool:
    """Ask for preferred elections (every partition); True once the topic's leaders are."""
    endpoint = cluster.nodes[1].endpoint
    run_cli("server.admin_cli", "--bootstrap-server", endpoint, "leaders", "elect",
            "--election-type", "preferred", "--all-topic-partitions")
    out = run_cli("server.admin_cli", "--bootstrap-server", endpoint, "topics", "describe",
                  "--topic", topic, "--json")
    if out.returncode != 0:
        return False
    described = json.loads(out.stdout)
    described = described[0] if isinstance(described, list) else described
    return all(p["leader"] == p["replicas"][0] for p in described["partitions"])


def coordinator_of(bootstrap: str, group: str) -> int | None:
    """The group's coordinator broker (None while a lookup races a leadership change). A fresh
    admin client each time: a long-lived one keeps asking a broker killed by a trial."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        described = admin.describe_consumer_groups([group])[group].result(10)
    except (KafkaException, TimeoutError):
        return None
    return int(described.coordinator.id)


def rebalance_trials(bootstrap: str, topic: str, args: argparse.Namespace) -> list[float]:
    group = f"rebalance-{uuid.uuid4().hex[:6]}"
    members = [Member(bootstrap, group, topic, args.heartbeat_ms) for _ in range(3)]
    for member in members:
        member.start()
    times = []
    for _ in range(args.trials):
        group_now = list(members)
        wait_for(lambda g=group_now: stable_with(g), WAIT_S, "3 members with assignments")
        leaving, survivors = members[-1], members[:-1]
        marks = [len(m.assigned) for m in survivors]
        started = time.monotonic()
        leaving.stop.set()
        leaving.join(WAIT_S)  # close(): LeaveGroup
        done = wait_for(lambda s=survivors, k=marks: reassigned(s, k), WAIT_S,
                        "the survivors' new assignments")
        times.append(done - started)
        members = [*survivors, Member(bootstrap, group, topic, args.heartbeat_ms)]
        members[-1].start()
    for member in members:
        member.stop.set()
    for member in members:
        member.join(WAIT_S)
    return times


def failover_trials(cluster: ProcessCluster, topic: str,
                    args: argparse.Namespace) -> dict[str, list[float]]:
    bootstrap = cluster.bootstrap_servers()
    group = f"failover-{uuid.uuid4().hex[:6]}"
    feeder = Feeder(bootstrap, topic, args.rate)
    feeder.start()
    members = [Member(bootstrap, group, topic, args.heartbeat_ms) for _ in range(3)]
    for member in members:
        member.start()
    out: dict[str, list[float]] = {"first_commit_s": [], "first_record_s": [],
                                   "all_partitions_s": [], "rebalances": []}
    try:
        for _ in range(args.trials):
            wait_for(lambda: stable_with(members), WAIT_S, "3 members with assignments")
            coordinator = wait_for(lambda: coordinator_of(bootstrap, group), WAIT_S,
                                   "the group's coordinator")
            killed = time.time()
            assignments = sum(len(m.assigned) for m in members)
            for member in members:
                member.mark = killed
                member.first_after = {}
            cluster.kill(coordinator)
            wait_for(lambda k=killed: recovered(members, k), WAIT_S,
                     "the group consuming and committing again")
            firsts = [t for m in members for t in m.first_after.values()]
            per_partition: dict[int, float] = {}
            for m in members:
                for p, t in m.first_after.items():
                    per_partition[p] = min(t, per_partition.get(p, t))
            out["first_commit_s"].append(
                min(t for m in members for t in m.commits if t > killed) - killed)
            out["first_record_s"].append(min(firsts) - killed)
            out["all_partitions_s"].append(max(per_partition.values()) - killed)
            # Members that got a new assignment (a rebalance) across the coordinator's kill.
            out["rebalances"].append(sum(len(m.assigned) for m in members) - assignments)
            cluster.start(coordinator)
            cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
            # Back to the preferred leaders, so every trial kills a broker that leads its
            # share of the topic (else the restarted broker leads nothing of it).
            wait_for(lambda: preferred_leaders(cluster, topic), WAIT_S, "preferred leaders")
    finally:
        feeder.stop.set()
        for member in members:
            member.stop.set()
        feeder.join(WAIT_S)
        for member in members:
            member.join(WAIT_S)
    return out


def commit_latency(bootstrap: str, topic: str, args: argparse.Namespace) -> list[float]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"commits-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # warm up
    latencies = []
    count = args.commit_rate * args.commit_seconds
    start = time.monotonic()
    for i in range(count):
        pause = start + i / args.commit_rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # pacing at --commit-rate, not a synchronisation
        sent = time.perf_counter()
        consumer.commit(offsets=[TopicPartition(topic, i % PARTITIONS, i)], asynchronous=False)
        latencies.append((time.perf_counter() - sent) * 1000)
    consumer.close()
    return latencies


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "args": vars(args).copy(),
                               "load_before": os.getloadavg()}
    results["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip()
    settings = {"internal.test.hooks.enable": "false",
                "group.initial.rebalance.delay.ms": str(args.initial_delay_ms)}
    with tempfile.TemporaryDirectory(prefix="group-bench-") as root, \
            kafka_cluster(Path(root), BROKERS, settings, WAIT_S) as cluster:
        bootstrap = cluster.bootstrap_servers()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("bench", PARTITIONS, 3)])["bench"].result(WAIT_S)
        wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(
            "bench", timeout=10).topics["bench"].partitions.values()), WAIT_S, "leaders")
        results["commit_ms"] = commit_latency(bootstrap, "bench", args)
        results["rebalance_s"] = rebalance_trials(bootstrap, "bench", args)
        results["failover"] = failover_trials(cluster, "bench", args)
    results["load_after"] = os.getloadavg()
    return results


def summarize(results: dict[str, Any], heartbeat_ms: int) -> list[str]:
    lat = results["commit_ms"]
    rebalance = results["rebalance_s"]
    beyond = [t - heartbeat_ms / 1000 for t in rebalance]
    lines = [
        f"OffsetCommit latency (ms, {len(lat)} commits): p50 {percentile(lat, 0.5):.2f}, "
        f"p99 {percentile(lat, 0.99):.2f}, max {max(lat):.2f} "
        f"(target p99 <= {TARGETS['commit_p99_ms']})",
        f"rebalance after a leave (s): {spread(rebalance)}; beyond the {heartbeat_ms} ms "
        f"heartbeat interval: {spread(beyond)} (target <= {TARGETS['rebalance_beyond_s']})",
    ]
    for name, values in results["failover"].items():
        target = "" if name == "rebalances" else f" (target <= {TARGETS['failover_s']})"
        lines.append(f"failover {name}: {spread(values)}{target}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--initial-delay-ms", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--commit-rate", type=int, default=100)
    parser.add_argument("--commit-seconds", type=int, default=20)
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    for line in summarize(results, args.heartbeat_ms):
        print(line)
    print(f"machine {results['machine']}; commit {results['commit']}; load average "
          f"{results['load_before']} -> {results['load_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
