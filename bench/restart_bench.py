"""Broker restarts at scale (issue 28): `python -m bench.restart_bench [--partitions 3000]
[--trials 3] [--json PATH]`.

Three controllers and three brokers as `kraft-server` subprocesses on loopback, every setting
at its default (fsync on). One topic of --partitions partitions, RF 3 (so every broker holds
a replica of each), each seeded with --records records of 100 bytes (acks=1, then until every
partition's high watermark is past one: every ISR member holds data). The creation is timed
from CreateTopics to full ISRs (the controller's view: full from the start) and to every broker
holding its replica of every partition (its kraft_broker_partitions gauge). Then, --trials
times, on brokers 4, 5, 6 in turn:

* **kill -9 + restart**: SIGKILL, reaped, started again at once; from the start to every
  partition back in a full ISR (3 replicas), as the active controller's DescribeTopics says.
* **SIGTERM -> exit**: the same broker, once back in every ISR, gets SIGTERM; the time to its
  exit (controlled shutdown included).
* **clean restart**: started again; from the start to every partition in a full ISR.

Also from the restarted broker's own log: when its partition logs were loaded and when it
served (seconds after the start). Medians and spread (min-max) over the trials, the machine,
the commit and the load average are printed and kept in the JSON. `--spy DIR`: py-spy
(`record --format raw --gil --nonblocking`) on every node from the first trial's clean
restart until its full ISRs, one file per node, and each one's heaviest frames in the JSON.

`--logs-only`: the LogManager alone, in this process, with --partitions logs of 3 idempotent
batches: a clean start and close; an append to every log and a crash (files closed
unflushed, no marker), then the start after it and its close. And one log of 50,000 batches
in one segment: a truncation of its last 3 batches (issue 28, defect 5).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc

from bench._cluster import CLIENT_OPTIONS, Cluster, ClusterError
from bench.admin_write_bench import top_frames
from bench.log_bench import filesystem, machine
from bench.quorum_bench import git
from harness.cluster import write_broker_configs
from metadata.rpc import admin_pb2 as apb
from metadata.rpc import admin_pb2_grpc as arpc

BROKERS = [4, 5, 6]
CONTROLLERS = [1, 2, 3]
TOPIC = "restart"
SETTINGS = {"internal.test.hooks.enable": "false"}
POLL_S = 0.1
_PARTITIONS_GAUGE = re.compile(r"^kraft_broker_partitions (\S+)", re.MULTILINE)
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def spread(values: list[float], digits: int = 2) -> dict[str, Any]:
    if not values:
        return {}
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits),
            "runs": [round(v, digits) for v in values]}


class Bench:
    topic = TOPIC  # the benchmark's one topic (a subclass names its own)

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cluster = Cluster(root, 3, dict(SETTINGS))
        self.cluster.nodes.update(write_broker_configs(root, dict(self.cluster.nodes), BROKERS,
                                                       dict(SETTINGS)))
        self.bootstrap = ",".join(self.cluster.nodes[b].kafka_endpoint for b in BROKERS)
        self.channels = {c: grpc.insecure_channel(self.cluster.nodes[c].endpoint,
                                                  options=CLIENT_OPTIONS) for c in CONTROLLERS}

    def admin_call(self, method: str, request: Any, timeout_s: float = 10) -> Any:
        """Ask each controller in turn (any of them forwards to the active one)."""
        error: Exception | None = None
        for channel in self.channels.values():
            try:
                return getattr(arpc.AdminStub(channel), method)(request, timeout=timeout_s)
            except grpc.RpcError as exc:
                error = exc
        raise ClusterError(f"{method}: {error}")

    def partitions(self) -> list[Any]:
        try:
            reply = self.admin_call("DescribeTopics",
                                    apb.DescribeTopicsRequest(names=[self.topic]))
        except ClusterError:
            return []
        return [p for t in reply.topics for p in t.partitions]

    def full_isr(self, count: int) -> bool:
        found = self.partitions()
        return len(found) == count and all(
            p.leader >= 0 and len(p.isr) == len(p.replicas) for p in found)

    def wait(self, condition: Any, timeout_s: float, what: str) -> float:
        """Poll until `condition()`; the monotonic time it first held."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return time.monotonic()
            time.sleep(POLL_S)  # poll interval of a bounded wait
        raise ClusterError(f"timed out waiting for {what}")

    def incarnation(self, broker: int) -> str:
        """The broker's registered incarnation id while it is unfenced, else ""."""
        try:
            reply = self.admin_call("ListBrokers", apb.ListBrokersRequest())
        except ClusterError:
            return ""
        return next((b.incarnation_id for b in reply.brokers
                     if b.broker_id == broker and not b.fenced), "")

    def back(self, broker: int, old: str, partitions: int) -> bool:
        """A new incarnation of `broker` registered and unfenced (its registration took the
        old one out of every ISR), and every partition in a full ISR again."""
        return self.incarnation(broker) not in ("", old) and self.full_isr(partitions)

    def brokers_unfenced(self) -> bool:
        try:
            reply = self.admin_call("ListBrokers", apb.ListBrokersRequest())
        except ClusterError:
            return False
        return sorted(b.broker_id for b in reply.brokers if not b.fenced) == BROKERS

    def start(self) -> None:
        self.cluster.format()
        for node_id in self.cluster.nodes:
            self.cluster.start(node_id)
        self.wait(self.brokers_unfenced, 120, "three unfenced brokers")

    def replicas_held(self, broker: int) -> int:
        """The replicas a broker holds (its kraft_broker_partitions gauge); 0 unanswered."""
        url = f"http://127.0.0.1:{self.cluster.nodes[broker].metrics_port}/metrics"
        try:
            text = urllib.request.urlopen(url, timeout=5).read().decode()
        except OSError:
            return 0
        found = _PARTITIONS_GAUGE.search(text)
        return int(float(found.group(1))) if found else 0

    def create(self, partitions: int) -> tuple[float, float]:
        """Seconds from CreateTopics to full ISRs (the controller's view: a new partition's
        ISR is all its replicas from the start), and to every broker holding its replica of
        every partition (its log created, fetching from the leader)."""
        started = time.monotonic()
        reply = self.admin_call("CreateTopics", apb.CreateTopicsRequest(topics=[
            apb.CreatableTopic(name=self.topic, num_partitions=partitions,
                               replication_factor=3)]),
            timeout_s=60)
        if reply.status.error_code or (reply.topics and reply.topics[0].error_code):
            raise ClusterError(f"CreateTopics: {reply.topics[0].error_message}")
        full_isr = self.wait(lambda: self.full_isr(partitions), 300, "full ISRs") - started
        held = self.wait(lambda: all(self.replicas_held(b) == partitions for b in BROKERS),
                         300, "every replica held") - started
        return full_isr, held

    def seed(self, partitions: int, records: int) -> float:
        """`records` values into every partition (acks=1), until every partition's HW is past
        one: partitions whose records a leader change lost (acks=1) are written again."""
        from confluent_kafka import Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        started = time.monotonic()
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "1",
                             "linger.ms": 20, "queue.buffering.max.messages": 1_000_000})
        admin = AdminClient({"bootstrap.servers": self.bootstrap})

        def empty(among: list[int]) -> list[int]:
            futures = admin.list_offsets(
                {TopicPartition(TOPIC, p): OffsetSpec.latest() for p in among},
                request_timeout=30)
            left = []
            for tp, future in futures.items():
                try:
                    if future.result().offset < 1:
                        left.append(tp.partition)
                except Exception:  # not answering yet: look again
                    left.append(tp.partition)
            return sorted(left)

        missing = list(range(partitions))
        for _ in range(10):
            for _ in range(records):
                for p in missing:
                    producer.produce(TOPIC, b"x" * 100, partition=p)
                    producer.poll(0)
            producer.flush(300)
            deadline = time.monotonic() + 60
            while missing and time.monotonic() < deadline:
                missing = empty(missing)
                if missing:
                    time.sleep(1)  # poll interval of a bounded wait
            if not missing:
                return time.monotonic() - started
        raise ClusterError(f"{len(missing)} partition(s) never held a record")

    def log_events(self, node_id: int, since_wall: float) -> dict[str, float]:
        """Seconds after `since_wall` at which the node logged its logs loaded and serving."""
        patterns = {"logs_loaded": "loaded ", "serving": " serving cluster ",
                    "registered": "registered broker ", "unfenced": " is now unfenced",
                    "controlled_shutdown": "controlled shutdown ",
                    "logs_closed": "closed ", "stop_step": "stopping the "}
        found: dict[str, float] = {}
        text = self.cluster.nodes[node_id].log_path.read_text(errors="replace")
        for line in text.splitlines():
            match = _LOG_TIME.match(line)
            if match is None:
                continue
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if when < since_wall:
                continue
            for name, needle in patterns.items():
                if name not in found and needle in line and (
                        not name.startswith("logs_") or "partition log(s)" in line):
                    found[name] = round(when - since_wall, 2)
        return found

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()
        self.cluster.kill_all()


def start_spies(bench: Bench, out_dir: Path) -> dict[int, subprocess.Popen[bytes]]:
    """py-spy on every running node, sampling the thread holding the GIL (the Python work)
    without pausing the process; stopped (and written) by stop_spies."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--spy needs py-spy (pip install py-spy into the venv)")
    out_dir.mkdir(parents=True, exist_ok=True)
    return {node_id: subprocess.Popen(
        [spy, "record", "--pid", str(node.process.pid), "--format", "raw", "--gil", "--nonblocking",
         "-o", str(out_dir / f"node-{node_id}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for node_id, node in bench.cluster.nodes.items() if node.process is not None}


def stop_spies(spies: dict[int, subprocess.Popen[bytes]], out_dir: Path) -> dict[str, Any]:
    """SIGINT ends a recording and writes it; each node's 15 heaviest frames."""
    for process in spies.values():
        process.send_signal(signal.SIGINT)
    frames: dict[str, Any] = {}
    for node_id, process in spies.items():
        process.wait(60)
        raw = out_dir / f"node-{node_id}.txt"
        if raw.exists():
            frames[str(node_id)] = [(f, round(own, 1), round(tot, 1))
                                    for f, own, tot in top_frames(raw, 15)]
    return frames


def trial(bench: Bench, broker: int, partitions: int,
          spy_dir: Path | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"broker": broker}
    old = bench.incarnation(broker)
    bench.cluster.signal(broker, signal.SIGKILL)
    bench.cluster.wait_exit(broker, 30)
    wall, started = time.time(), time.monotonic()
    bench.cluster.start(broker)
    out["kill9_restart_full_isr_s"] = round(
        bench.wait(lambda: bench.back(broker, old, partitions), 300,
                   "full ISRs after kill -9") - started, 2)
    out["kill9_events"] = bench.log_events(broker, wall)
    old = bench.incarnation(broker)
    started = time.monotonic()
    bench.cluster.signal(broker, signal.SIGTERM)
    code = bench.cluster.wait_exit(broker, 120)
    out["sigterm_exit_s"] = round(time.monotonic() - started, 2)
    out["sigterm_exit_code"] = code
    out["sigterm_events"] = bench.log_events(broker, time.time() - out["sigterm_exit_s"] - 1)
    wall, started = time.time(), time.monotonic()
    bench.cluster.start(broker)
    spies = start_spies(bench, spy_dir) if spy_dir is not None else {}
    out["clean_restart_full_isr_s"] = round(
        bench.wait(lambda: bench.back(broker, old, partitions), 300,
                   "full ISRs after a clean restart") - started, 2)
    out["clean_events"] = bench.log_events(broker, wall)
    if spy_dir is not None:
        out["clean_restart_top_frames"] = stop_spies(spies, spy_dir)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="restart-bench-", dir=args.dir))
    bench = Bench(root)
    result: dict[str, Any] = {
        "bench": "restart", "commit": args.label or git("rev-parse", "--short", "HEAD"),
        "machine": machine(), "filesystem": filesystem(str(root)),
        "load_average_before": os.getloadavg(), "partitions": args.partitions,
        "records_per_partition": args.records, "started": datetime.now().isoformat()}
    try:
        bench.start()
        full_isr, held = bench.create(args.partitions)
        result["create_full_isr_s"] = round(full_isr, 2)
        result["create_replicas_held_s"] = round(held, 2)
        print(f"created {args.partitions} partitions: full ISR in {full_isr:.2f} s, every "
              f"replica held by its broker in {held:.2f} s", flush=True)
        result["seed_s"] = round(bench.seed(args.partitions, args.records), 2)
        print(f"seeded in {result['seed_s']} s", flush=True)
        trials = []
        for index in range(args.trials):
            spy_dir = Path(args.spy) if args.spy and index == 0 else None
            one = trial(bench, BROKERS[index % len(BROKERS)], args.partitions, spy_dir)
            print(json.dumps(one), flush=True)
            trials.append(one)
        result["trials"] = trials
        for key in ("kill9_restart_full_isr_s", "sigterm_exit_s", "clean_restart_full_isr_s"):
            result[key] = spread([t[key] for t in trials])
        result["load_average_after"] = os.getloadavg()
    finally:
        bench.close()
    return result


def logs_only(args: argparse.Namespace) -> dict[str, Any]:
    """The LogManager alone (module docstring), --trials times."""
    import asyncio
    import inspect
    import shutil

    from broker.log.config import LogConfig
    from broker.log.log_manager import LogManager
    from broker.log.partition_log import PartitionLog
    from broker.records import build_batch

    root = Path(tempfile.mkdtemp(prefix="restart-logs-", dir=args.dir))

    def batch(sequence: int, pid: int = 7) -> bytes:
        return build_batch([b"x" * 100], producer_id=pid, producer_epoch=0,
                           base_sequence=sequence, base_timestamp=1_700_000_000_000)

    logs_dir = str(root / "logs")
    manager = LogManager([logs_dir], dict)
    for p in range(args.partitions):
        log = manager.get_or_create("t", p, "5zoAlv-xEh9xRANKXt1Lbg", LogConfig())
        for sequence in range(3):
            log.append_as_leader(batch(sequence), 1, 1000)
    manager.close_now()
    runs: dict[str, list[float]] = {key: [] for key in (
        "clean_start_s", "clean_start_cpu_s", "close_s", "crash_start_s",
        "crash_start_cpu_s", "close_after_crash_s", "truncate_50000_s")}

    # A LogManager from before issue 28 loads in its constructor (this file copied into an
    # older checkout measures the "before" figures the same way).
    deferred = "load" in inspect.signature(LogManager).parameters

    async def start() -> tuple[LogManager, float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        if deferred:
            started = LogManager([logs_dir], dict, load=False)
            await started.load_logs()
        else:
            started = LogManager([logs_dir], dict)
        return started, time.perf_counter() - wall, time.process_time() - cpu

    async def one() -> None:
        started, wall, cpu = await start()
        runs["clean_start_s"].append(wall)
        runs["clean_start_cpu_s"].append(cpu)
        begun = time.perf_counter()
        await started.close()
        runs["close_s"].append(time.perf_counter() - begun)
        started, _, _ = await start()
        for log in started.logs().values():
            log.append_as_leader(batch(log.end_offset), 1, 1000)
            log.close(flush=False)  # kill -9: the page cache only, no marker
        started, wall, cpu = await start()
        runs["crash_start_s"].append(wall)
        runs["crash_start_cpu_s"].append(cpu)
        begun = time.perf_counter()
        await started.close()
        runs["close_after_crash_s"].append(time.perf_counter() - begun)

    for _ in range(args.trials):
        asyncio.run(one())
    big = PartitionLog.open(str(root / "big-0"), "5zoAlv-xEh9xRANKXt1Lbg", LogConfig())
    sequences = [0] * 10
    for n in range(50_000):
        big.append_as_leader(batch(sequences[n % 10], 1000 + n % 10), 1, 1000)
        sequences[n % 10] += 1
    for _ in range(args.trials):
        end = big.end_offset
        begun = time.perf_counter()
        big.truncate_to(end - 3)
        runs["truncate_50000_s"].append(time.perf_counter() - begun)
        for n in range(end - 3, end):  # the same batches again
            entry = big._producers.entry(1000 + n % 10)
            next_sequence = 0 if entry is None else entry.last_seq + 1
            big.append_as_leader(batch(next_sequence, 1000 + n % 10), 1, 1000)
    big.close()
    shutil.rmtree(root, ignore_errors=True)
    return {"bench": "restart --logs-only",
            "commit": args.label or git("rev-parse", "--short", "HEAD"),
            "machine": machine(), "load_average": os.getloadavg(), "logs": args.partitions,
            **{key: spread(values, 3) for key, values in runs.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--records", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the cluster's files go")
    parser.add_argument("--label", default="", help="the commit, when not run from a clone")
    parser.add_argument("--logs-only", action="store_true",
                        help="the LogManager alone, in this process (module docstring)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--spy", default="",
                        help="directory for py-spy's records of the first clean restart")
    args = parser.parse_args(argv)
    if args.logs_only:
        figures = logs_only(args)
        print(json.dumps(figures, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
        return 0
    result = run(args)
    summary = {k: result[k] for k in ("commit", "partitions", "create_replicas_held_s",
                                      "kill9_restart_full_isr_s",
                                      "sigterm_exit_s", "clean_restart_full_isr_s",
                                      "load_average_before", "load_average_after")}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
