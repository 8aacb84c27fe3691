"""Real-quorum benchmarks: `python -m bench.quorum_bench [--json PATH] [--trials N] [parts...]`.

Three voters on loopback, fsync on, 100-byte records, temporary directories, ephemeral ports.

Parts (default: all of them, in this order):
  latency     commit latency of one writer through the leader's append API: the leader is a
              `Server` in this process (the controller's place), the two followers are
              `kraft-server` subprocesses whose controller.quorum.election.timeout.ms is 10 s,
              so the in-process node (1 s, Kafka's default) wins the first election. N
              sequential `await node.append([record])` per run; p50/p99/p99.9/max. Then one
              instrumented run that splits each append into phases, a gRPC round-trip probe
              and a raw fdatasync probe, to show what the latency is made of.
  throughput  on the same cluster: 1, 16, 64 concurrent writer tasks appending single records
              for a few seconds (committed records/s, latency under load), then bulk appends
              of 1,000-record batches (records/s, MB/s); CPU time of every process vs wall.
  failover    all three nodes as subprocesses with Kafka's default timeouts (election 1 s,
              fetch 2 s) and test hooks on; --trials trials of each kind (or name the kinds:
              kill, stop, term): kill -9 of the leader, SIGSTOP of the leader (SIGCONT after
              the measurement) and SIGTERM (graceful resignation). Each trial measures from the
              signal to the first append committed by a new leader, found by polling
              Quorum.NodeStatus of the survivors and appending through TestHooks.Append. The
              victim is then restarted (or continued) and the quorum waits until every node's
              high watermark equals the leader's before the next trial.

Every subprocess is killed and reaped on the way out, also on errors and Ctrl-C.
Percentiles are nearest-rank (with 20 trials, p99 is the maximum). Runs are summarised as the
median with min-max across runs in brackets.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench._cluster import Clients, Cluster, ClusterError
from bench.log_bench import filesystem, machine
from kraft.core.messages import FetchRequest
from server.config import load_config
from server.main import Server

RECORD_BYTES = 100
LEADER = 1  # the in-process node of the latency/throughput cluster
FOLLOWER_ELECTION_TIMEOUT_MS = 10_000
POLL_S = 0.005  # NodeStatus polling interval while a failover is in progress
TRIAL_TIMEOUT_S = 15.0
RUN_TIMEOUT_S = 30.0  # a run that stalls this long (plus its planned length) is a failure
KINDS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "term": signal.SIGTERM}
TARGETS = {
    "latency_p50_ms": 2.0, "latency_p99_ms": 5.0, "records_per_s_many_writers": 50_000,
    "bulk_records_per_s": 200_000,
    "kill": {"median": 200.0, "p99": 500.0}, "stop": {"p99": 4000.0}, "term": {"p99": 150.0},
}


# -- statistics -------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of unsorted values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        "count": len(ms), "mean_ms": statistics.fmean(ms) if ms else float("nan"),
        "p50_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90), "p99_ms": percentile(ms, 99),
        "p999_ms": percentile(ms, 99.9), "max_ms": max(ms, default=float("nan")),
        "min_ms": min(ms, default=float("nan")),
    }


def fmt(value: float) -> str:
    if value != value:  # NaN
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def spread(runs: list[dict[str, Any]], key: str) -> str:
    values = [run[key] for run in runs]
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


# -- CPU accounting -----------------------------------------------------------------------------


def system_busy_seconds() -> float:
    """CPU seconds all processes of the machine spent busy (not idle or iowait), /proc/stat."""
    with open("/proc/stat", encoding="ascii") as file:
        fields = [int(x) for x in file.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds per wall second of this process, of each follower subprocess, and of the
    whole machine (so the share of processes that are not ours shows)."""

    def __init__(self, cluster: Cluster, followers: list[int]) -> None:
        self.cluster = cluster
        self.followers = followers

    def start(self) -> None:
        self._wall = time.perf_counter()
        self._own = time.process_time()
        self._machine = system_busy_seconds()
        self._followers = {f: self.cluster.cpu_seconds(f) for f in self.followers}

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self._wall
        own = (time.process_time() - self._own) / wall
        followers = {f: (self.cluster.cpu_seconds(f) - self._followers[f]) / wall
                     for f in self.followers}
        machine_busy = (system_busy_seconds() - self._machine) / wall
        out = {"wall_s": wall, "cpu_leader_process": own,
               "cpu_machine": machine_busy,
               "cpu_others": machine_busy - own - sum(followers.values())}
        for f, value in followers.items():
            out[f"cpu_follower_{f}"] = value
        return out


# -- the in-process leader --------------------------------------------------------------------


class InProcessQuorum:
    """Node 1 as a `Server` in this event loop, nodes 2 and 3 as kraft-server subprocesses."""

    def __init__(self, root: Path) -> None:
        slow = {"controller.quorum.election.timeout.ms": str(FOLLOWER_ELECTION_TIMEOUT_MS)}
        # Raw 100-byte records measure the Raft layer alone: with the test hooks on, the nodes
        # run no metadata layer (which would refuse records that are not metadata records).
        self.cluster = Cluster(root, extra={"internal.test.hooks.enable": "true"},
                               per_node={2: slow, 3: slow})
        self.server: Server | None = None

    async def start(self, timeout_s: float = 30.0) -> None:
        self.cluster.format()
        for node_id in (2, 3):
            self.cluster.start(node_id)
        self.server = Server(load_config(str(self.cluster.nodes[LEADER].config_path)))
        await self.server.start()
        node = self.server.node
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = node.status()
            if status.state == "Leader" and status.high_watermark > 0:
                return
            if status.leader_id not in (-1, LEADER):
                raise ClusterError(f"node {status.leader_id} won the election, not node {LEADER}")
            await asyncio.sleep(0.01)  # poll interval of a bounded wait
        raise ClusterError(f"node {LEADER} did not become leader within {timeout_s} s")

    async def stop(self) -> None:
        try:
            if self.server is not None:
                await self.server.stop(graceful=False)
                self.server = None
        finally:
            self.cluster.kill_all()

    @property
    def node(self):
        assert self.server is not None
        return self.server.node

    def cpu_meter(self) -> CpuMeter:
        return CpuMeter(self.cluster, [2, 3])

    async def append(self, records: list[bytes]) -> int:
        """The controller's call, unwrapped (a wait_for per append would add a task and a
        timer to every call); the callers bound whole runs with asyncio.timeout instead."""
        return await self.node.append(records)


async def sequential(quorum: InProcessQuorum, count: int, record: bytes) -> dict[str, Any]:
    meter = quorum.cpu_meter()
    latencies = []
    meter.start()
    async with asyncio.timeout(RUN_TIMEOUT_S + count * 0.05):
        for _ in range(count):
            started = time.perf_counter()
            await quorum.append([record])
            latencies.append(time.perf_counter() - started)
    return latency_summary(latencies) | meter.stop()


async def concurrent_writers(quorum: InProcessQuorum, writers: int, batch: int, seconds: float,
                             record: bytes) -> dict[str, Any]:
    """`writers` tasks, each appending `batch` records per call in a loop for `seconds`."""
    records = [record] * batch
    latencies: list[float] = []
    meter = quorum.cpu_meter()
    meter.start()
    deadline = time.perf_counter() + seconds

    async def writer() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await quorum.append(records)
            latencies.append(time.perf_counter() - started)

    begin = time.perf_counter()
    async with asyncio.timeout(seconds + RUN_TIMEOUT_S):
        await asyncio.gather(*(writer() for _ in range(writers)))
    elapsed = time.perf_counter() - begin
    committed = len(latencies) * batch
    return latency_summary(latencies) | meter.stop() | {
        "writers": writers, "records_per_append": batch, "appends": len(latencies),
        "records": committed, "records_per_s": committed / elapsed,
        "appends_per_s": len(latencies) / elapsed,
        "mb_per_s": committed * RECORD_BYTES / elapsed / 1e6,
    }


# -- what a commit is made of ------------------------------------------------------------------


class _TimedExecutor(concurrent.futures.ThreadPoolExecutor):
    """The node's flush executor, timing the hand-over to the thread and the job itself."""

    def __init__(self, events: list[tuple[float, float, float]]) -> None:
        super().__init__(1, thread_name_prefix="kraft-log")
        self.events = events

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        submitted = time.perf_counter()

        def timed():
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.events.append((submitted, began, time.perf_counter()))

        return super().submit(timed)


async def breakdown(quorum: InProcessQuorum, count: int, record: bytes) -> dict[str, Any]:
    """Sequential appends with the leader instrumented from outside (wrapped methods, restored
    afterwards), splitting each commit into:
      leader_flush    append() -> the leader's flush covering the record completes
                      (to_thread: flush loop wake-up + hand-over to the log thread;
                      fsync: the job's write + fdatasync; back_to_loop: the job's end -> loop)
      replication     that flush -> the first follower Fetch acknowledging the record arrives
                      (response to the follower, its append and fsync, its next Fetch)
      completion      that Fetch -> append() returns (HW update, future, task wake-up)
    plus the followers' own fsync time over the run, from their Prometheus histograms."""
    node = quorum.node
    log_ = node.log
    flushes: list[tuple[float, int]] = []
    fetches: list[tuple[float, int]] = []
    jobs: list[tuple[float, float, float]] = []
    original_complete = log_.complete_flush
    original_handle = node.handle_request
    original_io = node._io

    def complete_flush(job):
        original_complete(job)
        flushes.append((time.perf_counter(), log_.flushed_offset))

    async def handle_request(request):
        if isinstance(request, FetchRequest):
            fetches.append((time.perf_counter(), request.fetch_offset))
        return await original_handle(request)

    before = {f: quorum.cluster.scrape(f) for f in (2, 3)}
    log_.complete_flush = complete_flush
    node.handle_request = handle_request
    node._io = _TimedExecutor(jobs)
    appends: list[tuple[float, int, float]] = []
    try:
        async with asyncio.timeout(RUN_TIMEOUT_S + count * 0.05):
            for _ in range(count):
                started = time.perf_counter()
                last = await quorum.append([record])
                appends.append((started, last, time.perf_counter()))
    finally:
        del log_.complete_flush
        del node.handle_request
        timed, node._io = node._io, original_io
        timed.shutdown(wait=True)
    after = {f: quorum.cluster.scrape(f) for f in (2, 3)}

    phases: dict[str, list[float]] = {k: [] for k in (
        "total", "leader_flush", "replication", "completion")}
    job_phases: dict[str, list[float]] = {"to_thread": [], "fsync": [], "back_to_loop": []}
    flush_i = fetch_i = 0
    for started, last, ended in appends:
        while flushes[flush_i][1] <= last:
            flush_i += 1
        flushed = flushes[flush_i][0]
        while fetches[fetch_i][1] <= last:
            fetch_i += 1
        acked = fetches[fetch_i][0]
        phases["total"].append(ended - started)
        phases["leader_flush"].append(flushed - started)
        phases["replication"].append(acked - flushed)
        phases["completion"].append(ended - acked)
    completes = [t for t, _ in flushes]
    for (submitted, began, finished), completed in zip(jobs, completes, strict=False):
        job_phases["to_thread"].append(began - submitted)
        job_phases["fsync"].append(finished - began)
        job_phases["back_to_loop"].append(completed - finished)
    out: dict[str, Any] = {name: latency_summary(values)
                           for name, values in (phases | job_phases).items()}
    for f in (2, 3):
        key = "kraft_log_fsync_duration_seconds"
        syncs = after[f][f"{key}_count"] - before[f][f"{key}_count"]
        total = after[f][f"{key}_sum"] - before[f][f"{key}_sum"]
        out[f"follower_{f}_flush"] = {"count": syncs,
                                      "mean_ms": total / syncs * 1000 if syncs else float("nan")}
    return out


async def grpc_round_trip(cluster: Cluster, node_id: int, count: int) -> dict[str, float]:
    """Sequential Quorum.NodeStatus calls from this process to a kraft-server: the cost of one
    request/response hop pair through Python gRPC on loopback."""
    clients = Clients(cluster)
    try:
        latencies = []
        for _ in range(count):
            started = time.perf_counter()
            if await clients.status(node_id) is None:
                raise ClusterError(f"NodeStatus of node {node_id} failed")
            latencies.append(time.perf_counter() - started)
    finally:
        await clients.close()
    return latency_summary(latencies[count // 10:])


def raw_fdatasync(directory: str, count: int) -> dict[str, float]:
    """200-byte O_APPEND writes each followed by fdatasync, as one follower's flush would."""
    path = os.path.join(directory, "raw.bin")
    block = os.urandom(200)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    latencies = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        os.unlink(path)
    return latency_summary(latencies)


# -- parts 1 and 2 ------------------------------------------------------------------------------


async def run_inprocess(args: argparse.Namespace, parts: set[str], root: Path,
                        results: dict[str, Any]) -> None:
    record = os.urandom(RECORD_BYTES)
    quorum = InProcessQuorum(root / "inprocess")
    try:
        started = time.perf_counter()
        await quorum.start()
        print(f"# in-process leader elected and its epoch committed in "
              f"{time.perf_counter() - started:.1f} s (followers: pids "
              f"{quorum.cluster.nodes[2].process.pid}, {quorum.cluster.nodes[3].process.pid})",
              flush=True)
        async with asyncio.timeout(RUN_TIMEOUT_S + args.warmup * 0.05):
            for _ in range(args.warmup):
                await quorum.append([record])
        if "latency" in parts:
            await part_latency(args, quorum, record, root, results)
        if "throughput" in parts:
            await part_throughput(args, quorum, record, results)
    finally:
        await quorum.stop()


async def part_latency(args: argparse.Namespace, quorum: InProcessQuorum, record: bytes,
                       root: Path, results: dict[str, Any]) -> None:
    print(f"\n## 1. Commit latency, one writer, {args.appends:,} sequential "
          f"`await node.append([record])` per run, {args.repeat} runs")
    runs = []
    for _ in range(args.repeat):
        runs.append(await sequential(quorum, args.appends, record))
        print(f"  run: p50 {fmt(runs[-1]['p50_ms'])} ms, p99 {fmt(runs[-1]['p99_ms'])} ms, "
              f"max {fmt(runs[-1]['max_ms'])} ms", flush=True)
    print("\n| p50 ms | p99 ms | p99.9 ms | max ms | mean ms | CPU leader proc | CPU follower "
          "2 | CPU follower 3 | CPU others |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {spread(runs, 'p50_ms')} | {spread(runs, 'p99_ms')} | {spread(runs, 'p999_ms')} "
          f"| {spread(runs, 'max_ms')} | {spread(runs, 'mean_ms')} "
          f"| {spread(runs, 'cpu_leader_process')} | {spread(runs, 'cpu_follower_2')} "
          f"| {spread(runs, 'cpu_follower_3')} | {spread(runs, 'cpu_others')} |")
    p50 = statistics.median(r["p50_ms"] for r in runs)
    p99 = statistics.median(r["p99_ms"] for r in runs)
    print(f"\ntarget p50 <= {TARGETS['latency_p50_ms']} ms: "
          f"{verdict(p50 <= TARGETS['latency_p50_ms'])}; target p99 <= "
          f"{TARGETS['latency_p99_ms']} ms: {verdict(p99 <= TARGETS['latency_p99_ms'])}")

    print(f"\n### What one commit is made of ({args.breakdown:,} instrumented appends)")
    parts = await breakdown(quorum, args.breakdown, record)
    print("| phase | p50 ms | p90 ms | p99 ms | mean ms |")
    print("|---|---:|---:|---:|---:|")
    for name in ("total", "leader_flush", "to_thread", "fsync", "back_to_loop", "replication",
                 "completion"):
        s = parts[name]
        print(f"| {name} | {fmt(s['p50_ms'])} | {fmt(s['p90_ms'])} | {fmt(s['p99_ms'])} "
              f"| {fmt(s['mean_ms'])} |")
    for f in (2, 3):
        s = parts[f"follower_{f}_flush"]
        print(f"| follower {f} flush (its histogram: hand-over + write + fdatasync) | | | "
              f"| {fmt(s['mean_ms'])} |")
    rtt = await grpc_round_trip(quorum.cluster, 2, args.probe)
    disk = raw_fdatasync(str(root), args.probe)
    print(f"| gRPC round trip (NodeStatus to a kraft-server) | {fmt(rtt['p50_ms'])} "
          f"| {fmt(rtt['p90_ms'])} | {fmt(rtt['p99_ms'])} | {fmt(rtt['mean_ms'])} |")
    print(f"| raw 200-byte append + fdatasync (this process, no quorum traffic) "
          f"| {fmt(disk['p50_ms'])} | {fmt(disk['p90_ms'])} | {fmt(disk['p99_ms'])} "
          f"| {fmt(disk['mean_ms'])} |", flush=True)
    results["latency"] = {"runs": runs, "breakdown": parts, "grpc_round_trip": rtt,
                          "raw_fdatasync": disk, "appends_per_run": args.appends}


async def part_throughput(args: argparse.Namespace, quorum: InProcessQuorum, record: bytes,
                          results: dict[str, Any]) -> None:
    print(f"\n## 2. Throughput, concurrent writers through `node.append`, {args.seconds} s "
          f"per run, {args.repeat} runs")
    rows: list[dict[str, Any]] = []
    configs = [(w, 1) for w in args.writers] + [(w, args.bulk_batch) for w in args.bulk_writers]
    for writers, batch in configs:
        await concurrent_writers(quorum, writers, batch, min(0.5, args.seconds), record)
        runs = [await concurrent_writers(quorum, writers, batch, args.seconds, record)
                for _ in range(args.repeat)]
        rows.append({"writers": writers, "records_per_append": batch, "runs": runs})
        print(f"  {writers} writers x {batch} records/append: "
              f"{spread(runs, 'records_per_s')} records/s", flush=True)
    print("\n| writers | records/append | records/s | MB/s | latency p50 ms | p99 ms | p99.9 ms "
          "| max ms | CPU leader proc | CPU follower 2 | CPU follower 3 | CPU others |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        runs = row["runs"]
        print(f"| {row['writers']} | {row['records_per_append']} "
              f"| {spread(runs, 'records_per_s')} | {spread(runs, 'mb_per_s')} "
              f"| {spread(runs, 'p50_ms')} | {spread(runs, 'p99_ms')} "
              f"| {spread(runs, 'p999_ms')} | {spread(runs, 'max_ms')} "
              f"| {spread(runs, 'cpu_leader_process')} | {spread(runs, 'cpu_follower_2')} "
              f"| {spread(runs, 'cpu_follower_3')} | {spread(runs, 'cpu_others')} |")
    single = [statistics.median(r["records_per_s"] for r in row["runs"]) for row in rows
              if row["records_per_append"] == 1]
    bulk = [statistics.median(r["records_per_s"] for r in row["runs"]) for row in rows
            if row["records_per_append"] > 1]
    if single:
        print(f"\ntarget >= {TARGETS['records_per_s_many_writers']:,} records/s with many "
              f"writers: best {fmt(max(single))}: "
              f"{verdict(max(single) >= TARGETS['records_per_s_many_writers'])}")
    if bulk:
        print(f"target >= {TARGETS['bulk_records_per_s']:,} records/s in bulk: best "
              f"{fmt(max(bulk))}: {verdict(max(bulk) >= TARGETS['bulk_records_per_s'])}")
    results["throughput"] = rows


# -- part 3: failover ---------------------------------------------------------------------------


async def measure_failover(clients: Clients, victim: int, epoch: int, survivors: list[int],
                           send_signal: Callable[[], None], record: bytes) -> dict[str, Any]:
    """Signal the leader, then poll the survivors' NodeStatus every POLL_S; as soon as one says
    it leads a newer epoch, append through it. Times are ms from the signal."""
    detected = elected = None
    attempts = 0
    started = time.perf_counter()
    send_signal()
    deadline = started + TRIAL_TIMEOUT_S
    while time.perf_counter() < deadline:
        views = await clients.statuses(survivors, timeout_s=0.5)
        now = (time.perf_counter() - started) * 1000
        if detected is None and any(v.state != "Follower" or v.epoch > epoch
                                    for v in views.values()):
            detected = now
        leaders = [n for n, v in views.items() if v.state == "Leader" and v.epoch > epoch]
        if leaders:
            if elected is None:
                elected = now
            attempts += 1
            response = await clients.append(leaders[0], [record], timeout_s=2.0)
            if response is not None and response.error_code == 0 and response.epoch > epoch:
                committed = (time.perf_counter() - started) * 1000
                return {"victim": victim, "old_epoch": epoch, "new_leader": leaders[0],
                        "new_epoch": response.epoch, "detected_ms": detected,
                        "elected_ms": elected, "committed_ms": committed,
                        "append_attempts": attempts}
            continue
        await asyncio.sleep(POLL_S)  # polling interval of a bounded wait
    return {"victim": victim, "old_epoch": epoch, "detected_ms": detected, "elected_ms": elected,
            "committed_ms": None, "append_attempts": attempts}


async def failover_trial(cluster: Cluster, clients: Clients, kind: str, record: bytes,
                         settle_s: float) -> dict[str, Any]:
    healthy_at = time.perf_counter()
    leader, epoch, _ = await clients.healthy(record)
    healthy_s = time.perf_counter() - healthy_at
    if settle_s > 0:
        await asyncio.sleep(settle_s)  # --settle: let a restarted node's peers reconnect
        leader, epoch, _ = await clients.healthy(record)
    survivors = [n for n in sorted(cluster.nodes) if n != leader]
    sig = KINDS[kind]
    result = await measure_failover(clients, leader, epoch, survivors,
                                    lambda: cluster.signal(leader, sig), record)
    result["healthy_wait_s"] = healthy_s
    # Recovery: the next trial starts from a healthy quorum again.
    if kind == "stop":
        cluster.signal(leader, signal.SIGCONT)
    else:
        try:
            result["exit_code"] = await asyncio.to_thread(cluster.wait_exit, leader, 10.0)
        except Exception:  # a graceful stop that hangs is a finding, not a crash of the bench
            cluster.signal(leader, signal.SIGKILL)
            result["exit_code"] = await asyncio.to_thread(cluster.wait_exit, leader, 10.0)
            result["note"] = "did not exit within 10 s of SIGTERM; killed"
        cluster.start(leader)
        await clients.reopen(leader)
    return result


def failover_summary(trials: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [t[key] for t in trials if t.get(key) is not None]
    return {"n": len(values), "median": statistics.median(values) if values else float("nan"),
            "p90": percentile(values, 90), "p99": percentile(values, 99),
            "max": max(values, default=float("nan")), "min": min(values, default=float("nan"))}


async def part_failover(args: argparse.Namespace, kinds: list[str], root: Path,
                        results: dict[str, Any]) -> None:
    print(f"\n## 3. Failover, {args.trials} trials per kind, Kafka's default timeouts "
          "(election 1 s, fetch 2 s), all nodes kraft-server subprocesses"
          + (f", {args.settle} s settle after each recovery" if args.settle else ""))
    record = os.urandom(RECORD_BYTES)
    cluster = Cluster(root / "failover", extra={"internal.test.hooks.enable": "true"})
    clients: Clients | None = None
    out: dict[str, Any] = {}
    try:
        cluster.format()
        for node_id in cluster.nodes:
            cluster.start(node_id)
        clients = Clients(cluster)
        await clients.healthy(record)
        for kind in kinds:
            trials = []
            for i in range(args.trials):
                trial = await failover_trial(cluster, clients, kind, record, args.settle)
                trials.append(trial)
                committed = trial["committed_ms"]
                print(f"  {kind} #{i + 1}: leader {trial['victim']} -> "
                      f"{trial.get('new_leader', '?')}, committed "
                      f"{fmt(committed) if committed is not None else 'TIMEOUT'} ms "
                      f"(detected {fmt(trial['detected_ms'] or float('nan'))}, elected "
                      f"{fmt(trial['elected_ms'] or float('nan'))})", flush=True)
            out[kind] = {"trials": trials,
                         "committed_ms": failover_summary(trials, "committed_ms"),
                         "detected_ms": failover_summary(trials, "detected_ms"),
                         "elected_ms": failover_summary(trials, "elected_ms"),
                         "timeouts": sum(1 for t in trials if t["committed_ms"] is None)}
        await clients.healthy(record)
    except BaseException:
        for node_id in cluster.nodes:
            print(f"----- node {node_id} log (tail) -----\n{cluster.logs(node_id)}",
                  file=sys.stderr)
        raise
    finally:
        if clients is not None:
            await clients.close()
        cluster.kill_all()
    names = {"kill": "kill -9", "stop": "SIGSTOP", "term": "SIGTERM"}
    print("\n| signal to the leader | phase | n | median ms | p90 ms | p99 ms | max ms "
          "| min ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for kind, data in out.items():
        for phase in ("detected_ms", "elected_ms", "committed_ms"):
            s = data[phase]
            print(f"| {names[kind]} | {phase[:-3]} | {s['n']} | {fmt(s['median'])} "
                  f"| {fmt(s['p90'])} | {fmt(s['p99'])} | {fmt(s['max'])} | {fmt(s['min'])} |")
    print()
    for kind, data in out.items():
        slow = [t for t in data["trials"] if (t["committed_ms"] or 1e9) > 500]
        if slow:
            print(f"{names[kind]}: {len(slow)} of {len(data['trials'])} trials over 500 ms: "
                  + ", ".join(fmt(t["committed_ms"] or float("nan")) for t in slow))
    for kind, data in out.items():
        s = data["committed_ms"]
        for stat, limit in TARGETS[kind].items():
            value = s[stat]
            ok = value <= limit and data["timeouts"] == 0
            print(f"target {names[kind]} {stat} <= {limit:.0f} ms: {fmt(value)} ms: "
                  f"{verdict(ok)}" + (f" ({data['timeouts']} timeouts)" if data["timeouts"]
                                      else ""))
    results["failover"] = out


# -- main ---------------------------------------------------------------------------------------


def git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


async def run(args: argparse.Namespace, parts: set[str], kinds: list[str], root: Path,
              results: dict[str, Any]) -> None:
    steps: list[Callable[[], Awaitable[None]]] = []
    if parts & {"latency", "throughput"}:
        steps.append(lambda: run_inprocess(args, parts, root, results))
    if kinds:
        steps.append(lambda: part_failover(args, kinds, root, results))
    for step in steps:
        await step()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quorum_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help="latency, throughput, failover, or failover kinds kill, stop, "
                             "term (default: all)")
    parser.add_argument("--json", metavar="PATH", help="also write the raw numbers here")
    parser.add_argument("--trials", type=int, default=20, help="trials per failover kind (20)")
    parser.add_argument("--appends", type=int, default=3000,
                        help="sequential appends per latency run (3000)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per latency/throughput measurement (3)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="duration of one throughput run (3)")
    parser.add_argument("--writers", type=int_list, default=[1, 16, 64, 256, 1024],
                        help="concurrent single-record writers, comma-separated "
                             "(1,16,64,256,1024)")
    parser.add_argument("--bulk-writers", type=int_list, default=[1, 4],
                        help="concurrent writers of bulk batches, comma-separated (1,4)")
    parser.add_argument("--bulk-batch", type=int, default=1000,
                        help="records per bulk append (1000)")
    parser.add_argument("--warmup", type=int, default=500,
                        help="appends before the first measurement (500)")
    parser.add_argument("--breakdown", type=int, default=1000,
                        help="instrumented appends for the latency breakdown (1000)")
    parser.add_argument("--probe", type=int, default=1000,
                        help="calls of the gRPC and fdatasync probes (1000)")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="failover: extra seconds to wait once the quorum is healthy again "
                             "before the next trial (default 0)")
    parser.add_argument("--dir", help="where to create the temporary directory (default: $TMPDIR)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory (configs, node logs, data)")
    args = parser.parse_args(argv)
    known = {"latency", "throughput", "failover", *KINDS}
    unknown = [p for p in args.parts if p not in known]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    if min(args.trials, args.appends, args.repeat, args.breakdown, args.probe) < 1 or \
            args.seconds <= 0:
        parser.error("counts must be >= 1 and --seconds > 0")
    parts = set(args.parts or ["latency", "throughput", "failover"])
    kinds = [k for k in KINDS if "failover" in parts or k in parts]

    root = Path(tempfile.mkdtemp(prefix="kraft-quorum-bench-", dir=args.dir))
    info = machine() | {
        "filesystem": filesystem(str(root)),
        "command": " ".join(["python -m bench.quorum_bench", *(argv or sys.argv[1:])]),
        "loadavg_at_start": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "record_bytes": RECORD_BYTES, "trials": args.trials, "appends": args.appends,
        "repeat": args.repeat, "seconds_per_run": args.seconds, "settle_s": args.settle,
        "git_commit": git("rev-parse", "HEAD"),
        "kraft_uncommitted_changes": git("status", "--porcelain", "--", "kraft"),
    }
    results: dict[str, Any] = {"machine": info, "targets": TARGETS}
    print(f"# machine: {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}")
    print(f"# filesystem: {info['filesystem']}")
    print(f"# load average at start: {' '.join(f'{x:.2f}' for x in info['loadavg_at_start'])}")
    print(f"# commit {info['git_commit']}"
          + (" (kraft/ has uncommitted changes)" if info["kraft_uncommitted_changes"] else ""))
    started = time.perf_counter()
    status = 0
    try:
        asyncio.run(run(args, parts, kinds, root, results))
    except KeyboardInterrupt:
        print("\ninterrupted; every process was stopped", file=sys.stderr)
        status = 130
    except ClusterError as exc:
        print(f"\nquorum_bench: {exc} (logs in {root}; kept)", file=sys.stderr)
        args.keep = True
        status = 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    info["loadavg_at_end"] = os.getloadavg()
    info["duration_s"] = time.perf_counter() - started
    print(f"\n# total {info['duration_s']:.0f} s; load average at end: "
          f"{' '.join(f'{x:.2f}' for x in info['loadavg_at_end'])}")
    if args.json and status == 0:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=2)
        print(f"raw numbers written to {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
