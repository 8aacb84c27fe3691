"""The data plane (issue 19): `python -m bench.data_plane_bench [--quick] [--json PATH]`.

Three controllers and three brokers as `kraft-server` subprocesses on loopback (every
setting at its default; fsync on), driven by confluent-kafka (librdkafka) in *other*
processes: every client runs in a fresh `python -m bench.data_plane_bench --worker ...`
subprocess that reports its measurements as JSON. Times are taken in the client, from the
send (the first produce() call, or each record's scheduled send) to the answer. Every
target's client settings are printed before the run; verdicts follow one rule
(bench/data_plane_targets.py, VERDICT_RULE): the target's client at its defaults but for what
the target names; tuned clients are secondary rows in no verdict.

* **Produce throughput**: 1 KiB values, linger.ms=5, topics of --partitions partitions, RF 3,
  min.insync.replicas=2; acks=all and acks=1, --trials each, interleaved (all, 1, all, 1...).
  MB/s = records x 1024 / (first produce() -> last delivery callback).
* **Consume throughput**: a Consumer with assign() of every partition of the acks=all topic
  from offset 0 (everything step 1 wrote), until it has every record; MB/s of values.
* **Latency**: acks=all, paced at --rate records/s (default 1,000) for --seconds, each record's
  *scheduled* send (start + seq / rate) -> its delivery callback; p50 / p99 / max. A record
  due while the client stalled is sent late and its wait counts (no coordinated omission);
  the p99 from the actual produce() call is printed beside it, in no verdict.
* **Failover**: one partition, RF 3, min.insync.replicas=2, an idempotent acks=all producer
  paced at --failover-rate; --kills times: kill -9 the partition leader's broker, then the
  time from the kill to the first delivery callback of a record *sent after the kill* with an
  offset beyond every offset acknowledged before the kill (it can only have been accepted by
  the new leader). The killed broker is restarted and the next kill waits until it is back in
  the ISR. At the end every acknowledged record is read back (lost = acked but absent,
  duplicates = present more than once).
* **Physical limits, same run** (before and after the above): the disk's raw rate of 1 KiB
  write + fdatasync in the brokers' data directory, and TCP loopback bandwidth between two
  processes (1 MiB sends). Each figure is reported with its ratio to them.
* **CPU**: the CPU% (utime+stime over wall time, /proc) of every server process and of the
  client during each phase, so a missed target says which process was the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench._cluster import _LAUNCHER, Cluster, ClusterError, proc_cpu_seconds
from bench.data_plane_targets import (
    CONSUMER_NO_BACKOFF,
    TARGETS,
    paced_figures,
    percentile,
    summarize,
    target_lines,
)
from bench.log_bench import filesystem, machine
from harness.cluster import write_broker_configs

PYTHON = sys.executable
BROKERS = [4, 5, 6]
CONTROLLERS = [1, 2, 3]
VALUE_SIZE = 1024
MB = 1_000_000
# Only what a benchmark needs: no test hooks on the controllers. Every timing stays at its
# default (broker.liveness.grace.ms 500, replica.lag.time.max.ms 30 s, ...).
SETTINGS = {"internal.test.hooks.enable": "false"}


def spread(values: list[float], digits: int = 1) -> dict[str, Any]:
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits),
            "all": [round(v, digits) for v in values]}


# ------------------------------------------------------------------------------------------
# Client workers: each runs in its own process (`--worker KIND --spec JSON`).


def _producer(bootstrap: str, **settings: Any) -> Any:
    """A Producer at confluent-kafka's defaults but for `settings` (the target's)."""
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, **settings})


def worker_produce(spec: dict[str, Any]) -> dict[str, Any]:
    """--count records of 1 KiB as fast as librdkafka takes them; time from the first
    produce() to the last delivery callback."""
    p = _producer(spec["bootstrap"], **spec["settings"])
    value = os.urandom(VALUE_SIZE)
    topic, count, partitions = spec["topic"], spec["count"], spec["partitions"]
    errors: list[str] = []
    done = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal done
        done += 1
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    p.list_topics(topic, timeout=30)  # metadata first: the clock starts at the send
    cpu0 = time.process_time()
    t0 = time.monotonic()
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - started
    return {"records": count, "seconds": elapsed, "undelivered": left, "done": done,
            "window": [t0, time.monotonic()],
            "errors": errors, "mb_s": count * VALUE_SIZE / elapsed / MB,
            "records_s": count / elapsed,
            "client_cpu_pct": 100 * (time.process_time() - cpu0) / elapsed}


def worker_consume(spec: dict[str, Any]) -> dict[str, Any]:
    """Every partition of the topic from offset 0 with assign(), until `count` records; with
    `values`, also return every value (the failover read-back)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": f"bench-{os.getpid()}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  **spec.get("settings", {})})
    c.list_topics(spec["topic"], timeout=30)
    count, want_values = spec["count"], spec.get("values", False)
    got, size = 0, 0
    values: list[tuple[int, str]] = []
    eof: set[int] = set()
    cpu0 = time.process_time()
    t0 = time.monotonic()
    started = time.perf_counter()
    c.assign([TopicPartition(spec["topic"], p, 0) for p in range(spec["partitions"])])
    deadline = time.monotonic() + spec.get("timeout_s", 300)
    while got < count and time.monotonic() < deadline:
        for m in c.consume(num_messages=10_000, timeout=0.5):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    if want_values and len(eof) == spec["partitions"] and got >= count:
                        break
                    continue
                raise RuntimeError(str(err))
            got += 1
            size += len(m.value())
            if want_values:
                values.append((m.offset(), m.value().decode()))
        if want_values and len(eof) == spec["partitions"] and got >= count:
            break
    elapsed = time.perf_counter() - started
    t1 = time.monotonic()
    if want_values:
        # drain to the end: records beyond `count` (duplicates) must be seen too
        end = time.monotonic() + 3
        while time.monotonic() < end:
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error() is None:
                    values.append((m.offset(), m.value().decode()))
    c.close()
    out: dict[str, Any] = {"records": got, "bytes": size, "seconds": elapsed, "window": [t0, t1],
                           "mb_s": size / elapsed / MB, "records_s": got / elapsed,
                           "client_cpu_pct": 100 * (time.process_time() - cpu0) / elapsed}
    if want_values:
        out["values"] = values
    return out


def worker_paced(spec: dict[str, Any]) -> dict[str, Any]:
    """Records paced at `rate`/s (value = sequence number, padded to 1 KiB) until `seconds`
    pass or the stop file appears; per record: scheduled send time (seq / rate after the
    start), actual send time, ack time (time.monotonic, the machine-wide clock the benchmark's
    kill times use), offset, error. Record seq goes to partition seq % `partitions` (default
    1). A record due while the client was stalled is sent as soon
    as it can be, and its latency counts from when it was due (no coordinated omission)."""
    settings: dict[str, Any] = dict(spec["settings"])
    if spec.get("debug_log"):
        import logging
        logger = logging.getLogger("rdkafka")
        handler = logging.FileHandler(spec["debug_log"])
        handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        settings["debug"] = "metadata,topic,broker"
        settings["logger"] = logger
    p = _producer(spec["bootstrap"], **settings)
    topic, rate = spec["topic"], spec["rate"]
    partitions = spec.get("partitions", 1)  # record seq goes to partition seq % partitions
    stop_file = spec.get("stop_file")
    progress_file = spec.get("progress_file")
    scheduled: list[float] = []
    sent: list[float] = []
    acked: list[tuple[int, float, int]] = []  # (seq, ack time, offset)
    errors: list[tuple[int, str]] = []

    def callback(seq: int) -> Any:
        def delivered(err: Any, msg: Any) -> None:
            now = time.monotonic()
            if err is None:
                acked.append((seq, now, msg.offset()))
            else:
                errors.append((seq, str(err)))
        return delivered

    p.list_topics(topic, timeout=30)
    pad = b" " * VALUE_SIZE
    started = time.monotonic()
    end = started + spec.get("seconds", 1e9)
    last_progress = 0.0
    seq = 0
    cpu0 = time.process_time()
    while True:
        due = started + seq / rate
        wait_until(p, due)
        now = time.monotonic()
        if now >= end or (stop_file and seq % 50 == 0 and os.path.exists(stop_file)):
            break
        value = (str(seq).encode() + pad)[:VALUE_SIZE]
        scheduled.append(due)
        sent.append(time.monotonic())
        p.produce(topic, value, partition=seq % partitions, on_delivery=callback(seq))
        p.poll(0)
        seq += 1
        if progress_file and now - last_progress > 0.1:
            last_progress = now
            Path(progress_file + ".tmp").write_text(str(len(acked)))
            os.replace(progress_file + ".tmp", progress_file)
    left = p.flush(150)
    elapsed = time.monotonic() - started
    return {"scheduled": scheduled, "sent": sent, "acked": acked, "errors": errors,
            "undelivered": left, "client_cpu_pct": round(
                100 * (time.process_time() - cpu0) / elapsed),
            "seconds": elapsed, "window": [started, time.monotonic()]}


# librdkafka's poll takes whole milliseconds and confluent-kafka truncates a shorter timeout to
# 0, a poll that does not wait: waiting out the < 1 ms to a paced record's due time with poll()
# alone spun the client at a full core, on a 2-core machine the brokers share (the acks=all
# latency's tail was partly the servers waiting for that core).
POLL_RESOLUTION_S = 0.001


def wait_until(producer: Any, due: float) -> None:
    """Serve delivery callbacks until `due` (time.monotonic) without spinning: poll() for
    whole milliseconds, sleep what is left below one. A delivery report arriving during that
    sleep is stamped up to 1 ms late: the measured latency is never lower for it."""
    while (left := due - time.monotonic()) > 0:
        if left >= POLL_RESOLUTION_S:
            producer.poll(left)
        else:
            time.sleep(left)  # the sub-millisecond rest of a paced wait, not synchronisation


def worker_blast(spec: dict[str, Any]) -> dict[str, Any]:
    """The sending side of the loopback measurement: push 1 MiB writes for `seconds`."""
    sock = socket.create_connection(("127.0.0.1", spec["port"]))
    chunk = os.urandom(1 << 20)
    end = time.monotonic() + spec["seconds"]
    sent = 0
    while time.monotonic() < end:
        sock.sendall(chunk)
        sent += len(chunk)
    sock.close()
    return {"sent": sent}


WORKERS = {"produce": worker_produce, "consume": worker_consume, "paced": worker_paced,
           "blast": worker_blast}


def run_worker(kind: str, spec: dict[str, Any], timeout_s: float = 900) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    try:
        proc = subprocess.run([PYTHON, "-m", "bench.data_plane_bench", "--worker", kind,
                               "--spec", json.dumps(spec), "--out", path],
                              timeout=timeout_s, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ClusterError(f"{kind} worker failed: {proc.stderr[-3000:]}")
        return json.loads(Path(path).read_text())
    finally:
        os.unlink(path)


def start_worker(kind: str, spec: dict[str, Any], out: str) -> subprocess.Popen[str]:
    return subprocess.Popen([PYTHON, "-m", "bench.data_plane_bench", "--worker", kind,
                             "--spec", json.dumps(spec), "--out", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


# ------------------------------------------------------------------------------------------
# Physical limits.


def fsync_rate(directory: Path, seconds: float) -> dict[str, float]:
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    block = os.urandom(VALUE_SIZE)
    count = 0
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < seconds:
            os.write(fd, block)
            os.fdatasync(fd)
            count += 1
    finally:
        os.close(fd)
        path.unlink()
    elapsed = time.perf_counter() - started
    return {"fsyncs_s": round(count / elapsed), "fsync_us": round(elapsed / count * 1e6, 1)}


def loopback_bandwidth(seconds: float) -> dict[str, float]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    proc = start_worker("blast", {"port": server.getsockname()[1], "seconds": seconds},
                        os.devnull)
    conn, _ = server.accept()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    received = 0
    first = None
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        if first is None:
            first = time.perf_counter()
        received += n
    elapsed = time.perf_counter() - (first or time.perf_counter())
    conn.close()
    server.close()
    proc.wait(30)
    return {"mb_s": round(received / elapsed / MB)}


# ------------------------------------------------------------------------------------------
# The cluster.


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cluster = Cluster(root, 3, dict(SETTINGS))
        self.cluster.nodes.update(write_broker_configs(root, dict(self.cluster.nodes), BROKERS,
                                                       dict(SETTINGS)))
        self.bootstrap = ",".join(self.cluster.nodes[b].kafka_endpoint for b in BROKERS)

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([PYTHON, "-m", "server.admin_cli", "--bootstrap-server",
                              ",".join(self.cluster.nodes[c].endpoint for c in CONTROLLERS),
                              *args], capture_output=True, text=True, timeout=60)
        if check and out.returncode != 0:
            raise ClusterError(f"kraft-admin {' '.join(args)}: {out.stderr.strip()}")
        return out

    def wait(self, condition: Any, timeout_s: float, what: str, poll_s: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(poll_s)  # poll interval of a bounded wait
        raise ClusterError(f"timed out waiting for {what}")

    def brokers_unfenced(self) -> bool:
        out = self.admin("brokers", "list", "--json", check=False)
        listed = json.loads(out.stdout) if out.returncode == 0 else []
        return sorted(b["id"] for b in listed if not b["fenced"]) == BROKERS

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        out = self.admin("topics", "describe", "--topic", topic, "--json", check=False)
        if out.returncode != 0:
            return []
        found = json.loads(out.stdout)
        if isinstance(found, list):
            found = found[0] if found else {}
        return list(found.get("partitions", []))

    def start(self, profile: str | None = None) -> None:
        self.cluster.format()
        for node_id in self.cluster.nodes:
            if profile and node_id == BROKERS[0]:
                self.start_profiled(node_id, profile)
            else:
                self.cluster.start(node_id)
        self.wait(self.brokers_unfenced, 90, "three unfenced brokers")

    def start_profiled(self, node_id: int, out: str) -> None:
        """The broker under cProfile (its event loop thread; written when it exits)."""
        node = self.cluster.nodes[node_id]
        launcher = _LAUNCHER.replace(
            "[sys.executable, '-m', 'server.main', sys.argv[1]]",
            "[sys.executable, '-m', 'cProfile', '-o', sys.argv[2], '-m', 'server.main', "
            "sys.argv[1]]")
        assert launcher != _LAUNCHER
        with node.log_path.open("ab") as log_file:
            node.process = subprocess.Popen(
                [PYTHON, "-c", launcher, str(node.config_path), out], stdout=log_file,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def create(self, topic: str, partitions: int) -> None:
        self.admin("topics", "create", "--topic", topic, "--partitions", str(partitions),
                   "--replication-factor", "3", "--config", "min.insync.replicas=2")
        self.wait(lambda: (len(ps := self.partitions(topic)) == partitions and all(
            p["leader"] >= 0 and len(p["isr"]) == 3 for p in ps)), 60, f"{topic} led, ISR 3")

    def pids(self) -> dict[int, int]:
        return {n: node.process.pid for n, node in self.cluster.nodes.items()
                if node.alive and node.process is not None}

    def cpu(self) -> dict[int, float]:
        out = {}
        for node_id, pid in self.pids().items():
            try:
                out[node_id] = proc_cpu_seconds(pid)
            except OSError:
                pass
        return out

    def disk_read_bytes(self) -> int:
        """Bytes the brokers read from storage (not the page cache), /proc/PID/io."""
        total = 0
        for node_id, pid in self.pids().items():
            if node_id in BROKERS:
                with open(f"/proc/{pid}/io", encoding="ascii") as file:
                    for line in file:
                        if line.startswith("read_bytes:"):
                            total += int(line.split()[1])
        return total

    def close(self) -> None:
        self.cluster.kill_all()


def machine_busy_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine spent busy (every process, both cores) and in iowait,
    from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as file:
        fields = [int(x) for x in file.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    tick = os.sysconf("SC_CLK_TCK")
    return busy / tick, fields[4] / tick


class CpuSampler:
    """Samples every server process's CPU seconds every 50 ms in a thread, so a phase's CPU%
    covers exactly the client's timed window (the worker reports it, on time.monotonic)."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.samples: list[tuple[float, dict[int, float]]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            cpu = self.bench.cpu()
            cpu[0], cpu[-1] = machine_busy_seconds()
            self.samples.append((time.monotonic(), cpu))
            self.stopped.wait(0.05)

    def between(self, t0: float, t1: float) -> dict[str, float]:
        deadline = time.monotonic() + 2
        while self.samples[-1][0] < t1 and time.monotonic() < deadline:
            time.sleep(0.01)  # the sampler's next round (it can lag on a loaded machine)
        samples = list(self.samples)
        before = [s for s in samples if s[0] <= t0]
        after = [s for s in samples if s[0] >= t1]
        if not before or not after:
            return {}
        (a_t, a), (b_t, b) = before[-1], after[0]
        names = {0: "machine", -1: "iowait"}
        return {names.get(n, f"node{n}"): round(100 * (b[n] - a[n]) / (b_t - a_t))
                for n in b if n in a}

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()


# ------------------------------------------------------------------------------------------
# The phases.


def throughput(bench: Bench, sampler: CpuSampler, args: argparse.Namespace
               ) -> dict[str, Any]:
    topics = {"all": "tp-acks-all", "1": "tp-acks-1"}
    for topic in topics.values():
        bench.create(topic, args.partitions)
    runs: dict[str, list[dict[str, Any]]] = {"all": [], "1": []}
    for trial in range(args.trials):
        for acks in ("all", "1"):
            target = TARGETS["produce_all_mb_s" if acks == "all" else "produce_1_mb_s"]
            r = run_worker("produce", {"bootstrap": bench.bootstrap, "topic": topics[acks],
                                       "settings": target["settings"], "count": args.records,
                                       "partitions": args.partitions})
            r["server_cpu_pct"] = sampler.between(*r["window"])
            if r["undelivered"] or r["errors"]:
                raise ClusterError(f"acks={acks}: {r['undelivered']} undelivered, {r['errors']}")
            runs[acks].append(r)
            print(f"  produce acks={acks} trial {trial + 1}: {r['mb_s']:.1f} MB/s "
                  f"({r['records_s']:,.0f} rec/s, {r['seconds']:.1f} s); CPU% client "
                  f"{r['client_cpu_pct']:.0f}, servers {r['server_cpu_pct']}", flush=True)
    consume: list[dict[str, Any]] = []
    no_backoff: list[dict[str, Any]] = []
    total = args.records * args.trials
    for trial, (runs_of, settings) in enumerate(
            [(consume, TARGETS["consume_mb_s"]["settings"]),
             (no_backoff, CONSUMER_NO_BACKOFF)] * args.trials):
        disk0 = bench.disk_read_bytes()
        r = run_worker("consume", {"bootstrap": bench.bootstrap, "topic": topics["all"],
                                   "count": total, "partitions": args.partitions,
                                   "settings": settings})
        r["server_cpu_pct"] = sampler.between(*r["window"])
        r["broker_disk_read_mb"] = round((bench.disk_read_bytes() - disk0) / MB, 1)
        if r["records"] < total:
            raise ClusterError(f"consume read {r['records']} of {total}")
        runs_of.append(r)
        print(f"  consume {settings or 'defaults'} trial {trial // 2 + 1}: "
              f"{r['mb_s']:.1f} MB/s ({r['records_s']:,.0f} "
              f"rec/s, {r['seconds']:.1f} s); CPU% client {r['client_cpu_pct']:.0f}, "
              f"servers {r['server_cpu_pct']}; brokers read {r['broker_disk_read_mb']} MB "
              "from the disk", flush=True)
    return {"produce": runs, "consume": consume, "consume_no_backoff": no_backoff}


def histogram(metrics: dict[str, float], name: str, labels: str = "") -> dict[float, float]:
    """One histogram series of a scrape (Cluster.scrape): upper bound (s) -> cumulative
    count. `labels`: the series' labels before `le`, as the exposition writes them."""
    prefix = f"{name}_bucket{{{labels + ',' if labels else ''}le=\""
    out = {}
    for key, value in metrics.items():
        if key.startswith(prefix):
            bound = key[len(prefix):-2]
            out[float("inf") if bound == "+Inf" else float(bound)] = value
    return out


def over(before: dict[float, float], after: dict[float, float], bound_s: float
         ) -> tuple[int, int]:
    """(observations between two scrapes, how many of them exceeded `bound_s`, a bucket
    bound)."""
    total = after.get(float("inf"), 0) - before.get(float("inf"), 0)
    within = after.get(bound_s, 0) - before.get(bound_s, 0)
    return int(total), int(total - within)


class ServerSide:
    """Where a paced run's slow acknowledgements were spent, from the brokers' own metrics
    scraped around it: the leader's Produce requests answered later than 10 / 25 ms (decode
    to answer: the wait for the followers included, the client's linger and the network
    not), and each broker's event-loop stalls (kraft_event_loop_lag_seconds, a sample every
    50 ms) of 10 ms or more. A slow ack with neither is the client or the machine's CPU."""

    def __init__(self, bench: Bench, leader: int) -> None:
        self.bench, self.leader = bench, leader
        self.before = self._scrape()

    def _scrape(self) -> dict[int, dict[str, float]]:
        return {b: self.bench.cluster.scrape(b) for b in BROKERS}

    def figures(self) -> dict[str, Any]:
        after = self._scrape()
        produce = "kraft_broker_request_latency_seconds"
        label = 'api="Produce"'
        lag = "kraft_event_loop_lag_seconds"
        requests, over_10 = over(histogram(self.before[self.leader], produce, label),
                                 histogram(after[self.leader], produce, label), 0.01)
        _, over_25 = over(histogram(self.before[self.leader], produce, label),
                          histogram(after[self.leader], produce, label), 0.025)
        stalls = {f"node{b}": over(histogram(self.before[b], lag), histogram(after[b], lag),
                                   0.01)[1] for b in BROKERS}
        self.before = after
        return {"leader_produce_requests": requests, "leader_produce_over_10ms": over_10,
                "leader_produce_over_25ms": over_25, "loop_stalls_10ms": stalls}


def latency(bench: Bench, sampler: CpuSampler, args: argparse.Namespace) -> dict[str, Any]:
    """The target's figure is linger.ms=5 (the issue's producer, and librdkafka's default);
    linger.ms=0 runs interleaved with it, a secondary row, to show how much of the latency is
    the client's own linger."""
    bench.create("latency", 1)
    runs: dict[str, list[dict[str, Any]]] = {"5": [], "0": []}
    settings = TARGETS["latency_p99_ms"]["settings"]
    server = ServerSide(bench, bench.partitions("latency")[0]["leader"])
    for trial in range(args.trials):
        for linger in ("5", "0"):
            server.figures()  # from here
            r = run_worker("paced", {"bootstrap": bench.bootstrap, "topic": "latency",
                                     "rate": args.rate, "seconds": args.seconds,
                                     "settings": {**settings, "linger.ms": int(linger)}})
            side = server.figures()
            cpu = sampler.between(*r["window"])
            if r["errors"] or r["undelivered"]:
                raise ClusterError(f"latency run: {r['errors'][:3]}, {r['undelivered']} "
                                   "undelivered")
            out = {**paced_figures(r), "achieved_rate": round(len(r["sent"]) / r["seconds"]),
                   "server_cpu_pct": cpu, "client_cpu_pct": r["client_cpu_pct"],
                   "server_side": side}
            runs[linger].append(out)
            print(f"  latency linger.ms={linger} trial {trial + 1}: p50 {out['p50_ms']} ms, "
                  f"p99 {out['p99_ms']} ms, max {out['max_ms']} ms from the scheduled send "
                  f"(p99 {out['from_actual_send_p99_ms']} ms from the actual send) at "
                  f"{out['achieved_rate']} rec/s; CPU% servers {cpu}, client "
                  f"{r['client_cpu_pct']}; leader's Produce answers > 10 / 25 ms: "
                  f"{side['leader_produce_over_10ms']} / {side['leader_produce_over_25ms']} "
                  f"of {side['leader_produce_requests']}; loop stalls >= 10 ms "
                  f"{side['loop_stalls_10ms']}", flush=True)
    return {"runs": runs["5"], "linger0": runs["0"]}


LOG_TIME = "%Y-%m-%d %H:%M:%S,%f"


def log_events(bench: Bench, after: float, patterns: dict[str, tuple[list[int], str]]
               ) -> dict[str, float | None]:
    """Seconds from `after` (time.time()) to the first line of each pattern in the given
    nodes' logs (their asctime stamps, millisecond resolution)."""
    out: dict[str, float | None] = {}
    for name, (nodes, needle) in patterns.items():
        best = None
        for node_id in nodes:
            path = bench.cluster.nodes[node_id].log_path
            if not path.exists():
                continue
            for line in path.read_text(errors="replace").splitlines():
                if needle not in line:
                    continue
                try:
                    stamp = datetime.strptime(line[:23], LOG_TIME).timestamp()
                except ValueError:
                    continue
                if stamp >= after - 0.001 and (best is None or stamp < best):
                    best = stamp
                    break
        out[name] = round(best - after, 3) if best is not None else None
    return out


def client_timeline(log_path: str, kill_wall: float, old: int, new: int,
                    window_s: float = 5.0) -> dict[str, Any]:
    """From librdkafka's debug log (wall-clock stamps): seconds from the kill to the first
    metadata answer naming the new leader, how many metadata answers still named the dead
    one, and whether the partition then fell back to librdkafka's internal broker (the dead
    broker, absent from the answer's broker list, is decommissioned and takes the partition
    with it until the next 1 s leader re-query)."""
    out: dict[str, Any] = {"metadata_named_old_leader": 0, "new_leader_seen_s": None,
                           "fell_back_to_internal_broker": False}
    moved = f"-> leader {new} epoch"
    try:
        lines = Path(log_path).read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        stamp, _, text = line.partition(" ")
        try:
            at = float(stamp) - kill_wall
        except ValueError:
            continue
        if at < 0 or at > window_s:
            continue
        if f"leader {old} epoch" in text and f"-> leader {old} epoch" in text:
            out["metadata_named_old_leader"] += 1
        elif moved in text and out["new_leader_seen_s"] is None:
            out["new_leader_seen_s"] = round(at, 3)
        elif ":0/internal for partition" in text and out["new_leader_seen_s"] is not None:
            out["fell_back_to_internal_broker"] = True
    return out


def failover(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    topic = "failover"
    bench.create(topic, 1)
    stop_file = str(bench.root / "failover.stop")
    progress_file = str(bench.root / "failover.progress")
    out_file = str(bench.root / "failover.json")

    def acked_count() -> int:
        try:
            return int(Path(progress_file).read_text() or 0)
        except (OSError, ValueError):
            return 0

    proc = start_worker("paced", {"bootstrap": bench.bootstrap, "topic": topic,
                                  "rate": args.failover_rate,
                                  "settings": TARGETS["failover"]["settings"],
                                  "stop_file": stop_file, "progress_file": progress_file,
                                  "debug_log": args.client_log},
                        out_file)
    kills: list[dict[str, Any]] = []
    try:
        bench.wait(lambda: acked_count() > args.failover_rate, 60, "the stream to run")
        for k in range(args.kills):
            part = bench.wait(lambda: next((p for p in bench.partitions(topic)
                                            if len(p["isr"]) == 3 and p["leader"] >= 0), None),
                              120, "ISR of 3 before a kill")
            leader = part["leader"]
            time.sleep(1.0)  # steady state under the restored ISR
            before = acked_count()
            killed_wall = time.time()
            killed_at = time.monotonic()
            bench.cluster.signal(leader, signal.SIGKILL)
            bench.cluster.wait_exit(leader, 10)
            bench.wait(lambda b=before: acked_count() > b + args.failover_rate, 60,
                       "acknowledged writes after the kill", poll_s=0.05)
            new = bench.wait(lambda old=leader: next((p for p in bench.partitions(topic)
                                                      if p["leader"] not in (-1, old)), None),
                             30, "a new leader")
            kills.append({"killed": leader, "at": killed_at, "wall": killed_wall,
                          "new_leader": new["leader"]})
            print(f"  kill {k + 1}: broker {leader} (leader) killed; new leader "
                  f"{new['leader']}", flush=True)
            bench.cluster.start(leader)
        Path(stop_file).write_text("stop")
        proc.wait(200)
        if proc.returncode != 0:
            raise ClusterError(f"failover producer failed: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    r = json.loads(Path(out_file).read_text())
    sent, acked = r["sent"], r["acked"]
    by_ack = sorted(acked, key=lambda a: a[1])
    gaps = []
    for kill in kills:
        at = kill["at"]
        old_max = max((off for _, t, off in by_ack if t < at), default=-1)
        first_new = next(((seq, t, off) for seq, t, off in by_ack
                          if t > at and sent[seq] > at and off > old_max), None)
        first_any = next(((seq, t, off) for seq, t, off in by_ack
                          if t > at and off > old_max), None)
        kill["to_first_new_ack_s"] = round(first_new[1] - at, 3) if first_new else None
        kill["to_first_any_ack_s"] = round(first_any[1] - at, 3) if first_any else None
        kill["old_leader_max_acked_offset"] = old_max
        others = [b for b in BROKERS if b != kill["killed"]]
        kill["timeline_s"] = log_events(bench, kill["wall"], {
            "controller_saw_stream_break": (CONTROLLERS,
                                            f"broker {kill['killed']}'s liveness stream broke"),
            "controller_fenced": (CONTROLLERS, f"fencing broker {kill['killed']}"),
            "new_leader_leading": (others, f"leading {topic}-0 in epoch"),
        })
        gaps.append(kill["to_first_new_ack_s"])
        if args.client_log:
            kill["client_timeline"] = client_timeline(args.client_log, kill["wall"],
                                                      kill["killed"], kill["new_leader"])
        print(f"  kill of broker {kill['killed']}: first new-leader ack of a record sent after "
              f"the kill {kill['to_first_new_ack_s']} s (first ack beyond the old leader's: "
              f"{kill['to_first_any_ack_s']} s); server timeline {kill['timeline_s']}; "
              f"client {kill.get('client_timeline')}", flush=True)
    # Read back: every acknowledged record, exactly once.
    total = len(acked)
    bench.wait(lambda: all(len(p["isr"]) >= 2 for p in bench.partitions(topic)), 60, "ISR")
    back = run_worker("consume", {"bootstrap": bench.bootstrap, "topic": topic, "count": total,
                                  "partitions": 1, "values": True, "timeout_s": 120})
    seqs = [int(v.split()[0]) for _, v in back["values"]]
    present = set(seqs)
    acked_seqs = {seq for seq, _, _ in acked}
    lost = sorted(acked_seqs - present)
    duplicates = len(seqs) - len(present)
    offsets = [o for o, _ in back["values"]]
    offsets_ok = offsets == list(range(len(offsets)))
    # every acked record at the offset its delivery callback reported
    at_offset = dict(back["values"])
    moved = sum(1 for seq, _, off in acked
                if at_offset.get(off, "").split()[:1] != [str(seq)])
    valid = [g for g in gaps if g is not None]
    result = {"kills": kills, "records_sent": len(sent), "records_acked": total,
              "errors": r["errors"][:5], "error_count": len(r["errors"]),
              "undelivered": r["undelivered"], "read_back": len(seqs), "lost": len(lost),
              "lost_sample": lost[:10], "duplicates": duplicates, "offsets_dense": offsets_ok,
              "acked_not_at_reported_offset": moved, "rate": args.failover_rate}
    if valid:
        result["median_s"] = round(statistics.median(valid), 3)
        result["p99_s"] = round(percentile(valid, 0.99), 3)
        result["max_s"] = round(max(valid), 3)
    print(f"  failover: {len(valid)} kills, median {result.get('median_s')} s, p99 "
          f"{result.get('p99_s')} s; sent {len(sent)}, acked {total}, errors "
          f"{len(r['errors'])}, read back {len(seqs)}, lost {len(lost)}, duplicates "
          f"{duplicates}, offsets dense {offsets_ok}, acked records not at their offset {moved}",
          flush=True)
    return result


def limits(bench: Bench, seconds: float) -> dict[str, Any]:
    data_dir = bench.root / "node-4"
    out = {"fsync": fsync_rate(data_dir, seconds), "loopback": loopback_bandwidth(seconds)}
    print(f"  limits: raw 1 KiB write+fdatasync {out['fsync']['fsyncs_s']:,}/s "
          f"({out['fsync']['fsync_us']} us); TCP loopback between two processes "
          f"{out['loopback']['mb_s']:,} MB/s", flush=True)
    return out


PARTS = ("throughput", "latency", "failover")


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "args": vars(args).copy(),
                               "load_before": os.getloadavg()}
    try:
        results["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    results["targets"] = target_lines()
    print("\n".join(results["targets"]), flush=True)
    with tempfile.TemporaryDirectory(prefix="data-plane-bench-") as tmp:
        bench = Bench(Path(tmp))
        results["filesystem"] = filesystem(tmp)
        sampler: CpuSampler | None = None
        try:
            bench.start()
            sampler = CpuSampler(bench)
            print("physical limits (before):", flush=True)
            results["limits"] = [limits(bench, args.limit_seconds)]
            parts = set(args.only.split(",")) if args.only else set(PARTS)
            if "throughput" in parts:
                print("throughput:", flush=True)
                results["throughput"] = throughput(bench, sampler, args)
            if "latency" in parts:
                print("latency:", flush=True)
                results["latency"] = latency(bench, sampler, args)
            if "failover" in parts:
                print("failover:", flush=True)
                results["failover"] = failover(bench, args)
            print("physical limits (after):", flush=True)
            results["limits"].append(limits(bench, args.limit_seconds))
        except Exception:
            for node_id in bench.cluster.nodes:
                print(f"--- node {node_id} ---\n{bench.cluster.logs(node_id)}")
            raise
        finally:
            if sampler is not None:
                sampler.close()
            bench.close()
    results["load_after"] = os.getloadavg()
    rows = summarize(results)
    results["summary"] = rows
    print("\n| figure | measured (median, min-max) | target | vs physical limits |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    lim = results["limits"]
    print(f"\nlimits: raw fsync {[x['fsync']['fsyncs_s'] for x in lim]} /s, loopback "
          f"{[x['loopback']['mb_s'] for x in lim]} MB/s (before, after); load average "
          f"{results['load_before']} -> {results['load_after']}; commit {results.get('commit')}")
    return results


def profile(args: argparse.Namespace) -> None:
    """Broker 4 under cProfile through --trials produce trials of each acks and one consume;
    then it stops (SIGTERM) and the top of its profile is printed. Not a measurement: the
    profiler slows the broker."""
    import pstats
    with tempfile.TemporaryDirectory(prefix="data-plane-profile-") as tmp:
        bench = Bench(Path(tmp))
        out = str(Path(tmp) / "broker4.prof")
        sampler: CpuSampler | None = None
        try:
            bench.start(profile=out)
            sampler = CpuSampler(bench)
            throughput(bench, sampler, args)
            bench.cluster.signal(BROKERS[0], signal.SIGTERM)
            bench.cluster.wait_exit(BROKERS[0], 120)
        finally:
            if sampler is not None:
                sampler.close()
            bench.close()
        if args.profile != "-":
            Path(args.profile).write_bytes(Path(out).read_bytes())
        stats = pstats.Stats(out)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.data_plane_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--records", type=int, default=250_000, help="per produce trial")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=int, default=1000, help="latency: records/s")
    parser.add_argument("--seconds", type=float, default=15, help="latency: per trial")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--failover-rate", type=int, default=1000)
    parser.add_argument("--only", default="",
                        help=f"a comma-separated subset of {','.join(PARTS)} (default: all)")
    parser.add_argument("--limit-seconds", type=float, default=3)
    parser.add_argument("--client-log", help="failover: write librdkafka's metadata/broker "
                        "debug log here (wall-clock stamps; the kill times are in the JSON)")
    parser.add_argument("--profile", metavar="PATH", help="instead of the benchmark: broker 4 "
                        "under cProfile through the throughput phase; its stats go to PATH "
                        "('-': printed only)")
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = WORKERS[args.worker](json.loads(args.spec))
        if args.out and args.out != os.devnull:
            Path(args.out).write_text(json.dumps(result))
        return 0
    if args.quick:
        args.trials, args.records, args.seconds, args.kills = 2, 20_000, 5, 2
        args.limit_seconds = 1
    if args.profile:
        profile(args)
        return 0
    results = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
