"""Paced writes and seeding at scale (issue 28): `python -m bench.scale_bench [--partitions
3000] [--seed-rounds 3] [--json PATH]`.

Three controllers and three brokers as `kraft-server` subprocesses on loopback, every setting
at its default (fsync on; the cluster start of bench.restart_bench). One topic of
--partitions partitions, RF 3 (each broker holds a replica of every partition, leads a third),
created and waited for (every broker holding its replicas). Every client is confluent-kafka in
another process (bench.data_plane_bench's worker pattern), at its defaults but for what each
goal names; the paced producer can be kafka-python or aiokafka instead (--paced-client,
bench/paced_clients.py):
librdkafka sends one partition per ProduceRequest (its issue 1700) with at most 5 requests in
flight per broker under idempotence, so each paced partition waits its turn in the client;
kafka-python, like Kafka's Java client, sends every ready partition of a broker in one.

* **Seeding** (goal: <= 10 s at 3,000 partitions): one record into each partition with
  acks=all, --seed-rounds times (each round adds a record to every partition: the topic holds
  data from the first); from the first produce() to the last delivery callback.
* **Paced writes** (goal: send -> ack p99 <= 50 ms and no partition more than 3 s without an
  acknowledgement, before and through a broker kill; 0 lost): an idempotent acks=all producer
  (enable.idempotence, acks=all) of --rate records/s of 1 KiB over the first --paced-partitions
  partitions in turn, each record timed from its *scheduled* send (no coordinated omission).
  --before-seconds of steady writes; then kill -9 of the broker leading partition 0, started
  again at once; once every partition is back in a full ISR, --after-seconds more. "Before" is
  every record scheduled before the kill, "through" every record scheduled from the kill on
  (the first 10 % of the run, connection set-up, left out of "before"). The longest gap per
  partition is the longest stretch of time between two of its acknowledgements (or from the
  phase's start to its first, or from its last to the phase's end). At the end every
  partition is read back: lost = acknowledged but absent, duplicates = present more than
  once.

The load average is taken before and after each phase (the machine is shared); the CPU% of
every server process per phase says which one was the bottleneck. `--py-spy PATH` records the
leader of partition 0 with py-spy (`--format raw`) through the steady phase, and `--seed-spy
PATH` through the first seeding round (diagnosis, not measurements). `--probe SECONDS` adds
short paced runs (500 and 50 records/s over 200 partitions, 500 over 1, and without
idempotence) with the brokers' own Produce latency beside the client's (see `probe`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench._cluster import ClusterError, proc_cpu_seconds
from bench.data_plane_bench import run_worker
from bench.data_plane_targets import percentile
from bench.log_bench import filesystem, machine
from bench.paced_clients import PACED_CLIENTS, start_paced
from bench.quorum_bench import git
from bench.restart_bench import BROKERS
from bench.restart_bench import Bench as ClusterBench

PYTHON = sys.executable
TOPIC = "scale"
PY_SPY = "/tmp/spyenv/bin/py-spy"
GOALS = {"seed_s": 10.0, "p99_ms": 50.0, "max_gap_s": 3.0}
PACED_SETTINGS = {"acks": "all", "enable.idempotence": True}
SEED_SETTINGS = {"acks": "all"}


def spread(values: list[float], digits: int = 2) -> dict[str, Any]:
    if not values:
        return {}
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits),
            "runs": [round(v, digits) for v in values]}


class Bench(ClusterBench):
    """bench.restart_bench's cluster, with this benchmark's topic."""

    topic = TOPIC

    def create_topic(self, partitions: int) -> float:
        """Seconds from CreateTopics to every broker holding its replica of each partition."""
        return self.create(partitions)[1]

    def leader_of(self, partition: int) -> int:
        return int(next(p.leader for p in self.partitions() if p.partition_index == partition))

    def cpu(self) -> dict[int, float]:
        out = {}
        for node_id, node in self.cluster.nodes.items():
            if node.alive and node.process is not None:
                try:
                    out[node_id] = proc_cpu_seconds(node.process.pid)
                except OSError:
                    pass
        return out


def cpu_pct(before: dict[int, float], after: dict[int, float], seconds: float
            ) -> dict[str, float]:
    return {f"node{n}": round(100 * (after[n] - before[n]) / seconds)
            for n in after if n in before and after[n] >= before[n]}


def py_spy(pid: int, seconds: float, out: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([PY_SPY, "record", "--pid", str(pid), "--duration",
                             str(int(seconds)), "-o", out, "--format", "raw"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def end_spy(spy: subprocess.Popen[bytes]) -> None:
    """Wait for a py-spy recording; one still sampling a minute past its duration (a loaded
    machine) is told to stop, which writes what it has (it must not end the benchmark)."""
    try:
        spy.wait(60)
    except subprocess.TimeoutExpired:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()


# ------------------------------------------------------------------------------------------
# Seeding.


def worker_seed(spec: dict[str, Any]) -> dict[str, Any]:
    """One record into each partition (confluent-kafka at its defaults but for acks=all);
    from the first produce() to the last delivery callback, and each record's latency."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": spec["bootstrap"], **spec["settings"]})
    p.list_topics(spec["topic"], timeout=60)  # metadata first: the clock starts at the send
    errors: list[str] = []
    latencies: list[float] = []

    def delivered(sent_at: float) -> Any:
        def callback(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                latencies.append(time.monotonic() - sent_at)
        return callback

    started = time.monotonic()
    for partition in range(spec["partitions"]):
        while True:
            try:
                p.produce(spec["topic"], b"seed", partition=partition,
                          on_delivery=delivered(time.monotonic()))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(600)
    seconds = time.monotonic() - started
    latencies.sort()
    return {"seconds": round(seconds, 3), "delivered": len(latencies), "errors": errors[:5],
            "error_count": len(errors), "undelivered": left,
            "p50_s": round(percentile(latencies, 0.5), 3) if latencies else None,
            "max_s": round(latencies[-1], 3) if latencies else None}


def seeding(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    rounds = []
    for index in range(args.seed_rounds):
        load = os.getloadavg()
        spy = None
        if args.seed_spy and index == 0:
            spy = py_spy(bench.cluster.nodes[BROKERS[0]].process.pid,  # type: ignore[union-attr]
                         30, args.seed_spy)
        cpu0, t0 = bench.cpu(), time.monotonic()
        result = run_worker_here("seed", {"bootstrap": bench.bootstrap, "topic": TOPIC,
                                          "partitions": args.partitions,
                                          "settings": SEED_SETTINGS})
        result["server_cpu_pct"] = cpu_pct(cpu0, bench.cpu(), time.monotonic() - t0)
        result["load_average_before"] = load
        if spy is not None:
            end_spy(spy)
        if result["undelivered"] or result["error_count"]:
            raise ClusterError(f"seeding round {index + 1}: {result}")
        rounds.append(result)
        print(f"  seed round {index + 1}: {result['seconds']} s for {args.partitions} records "
              f"(record latency p50 {result['p50_s']} s, max {result['max_s']} s); CPU% "
              f"{result['server_cpu_pct']}; load average {load}", flush=True)
    return {"rounds": rounds, "seconds": spread([r["seconds"] for r in rounds])}


# ------------------------------------------------------------------------------------------
# Paced writes through a broker kill.


def phase_figures(scheduled: list[float], acked: list[tuple[int, float, int]],
                  partitions: int, start: float, end: float,
                  sent: list[float] | None = None) -> dict[str, Any]:
    """Latency from the scheduled send of every record scheduled in [start, end), and each
    partition's longest stretch without an acknowledgement in that span; with `sent`, also
    from the actual send() (the difference is the client's own lateness in calling it)."""
    ms = sorted((t - scheduled[seq]) * 1000 for seq, t, _ in acked
                if start <= scheduled[seq] < end)
    from_send = sorted((t - sent[seq]) * 1000 for seq, t, _ in acked
                       if start <= scheduled[seq] < end) if sent else []
    acks: dict[int, list[float]] = {p: [] for p in range(partitions)}
    for seq, t, _ in acked:
        if start <= t < end:
            acks[seq % partitions].append(t)
    gaps = {}
    for partition, times in acks.items():
        times.sort()
        gaps[partition] = max(b - a for a, b in itertools.pairwise([start, *times, end]))
    worst = max(gaps, key=lambda p: gaps[p])
    return {"records": len(ms), "p50_ms": round(percentile(ms, 0.5), 1) if ms else None,
            "p99_ms": round(percentile(ms, 0.99), 1) if ms else None,
            "max_ms": round(ms[-1], 1) if ms else None,
            "max_gap_s": round(gaps[worst], 2), "max_gap_partition": worst,
            "partitions_over_3s": sum(1 for g in gaps.values() if g > GOALS["max_gap_s"]),
            "seconds": round(end - start, 1),
            "from_send_p50_ms": round(percentile(from_send, 0.5), 1) if from_send else None,
            "from_send_p99_ms": round(percentile(from_send, 0.99), 1) if from_send else None}


def paced(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    stop_file = str(bench.root / "paced.stop")
    progress_file = str(bench.root / "paced.progress")
    out_file = str(bench.root / "paced.json")

    def acked_count() -> int:
        try:
            return int(Path(progress_file).read_text() or 0)
        except (OSError, ValueError):
            return 0

    out: dict[str, Any] = {"rate": args.rate, "partitions": args.paced_partitions,
                           "client": args.paced_client, "settings": PACED_SETTINGS,
                           "load_average_start": os.getloadavg()}
    proc = start_paced(args.paced_client, {"bootstrap": bench.bootstrap, "topic": TOPIC,
                                  "rate": args.rate, "partitions": args.paced_partitions,
                                  "settings": PACED_SETTINGS, "stop_file": stop_file,
                                  "progress_file": progress_file}, out_file)
    try:
        bench.wait(lambda: acked_count() > 0, 60, "the paced stream to run")
        victim = bench.leader_of(0)
        spy = None
        if args.py_spy:
            spy = py_spy(bench.cluster.nodes[victim].process.pid,  # type: ignore[union-attr]
                         args.before_seconds, args.py_spy)
        cpu0, t0 = bench.cpu(), time.monotonic()
        time.sleep(args.before_seconds)  # the steady phase: the worker writes meanwhile
        out["cpu_pct_before"] = cpu_pct(cpu0, bench.cpu(), time.monotonic() - t0)
        out["load_average_kill"] = os.getloadavg()
        if spy is not None:
            end_spy(spy)
        old = bench.incarnation(victim)
        killed_at = time.monotonic()
        bench.cluster.signal(victim, signal.SIGKILL)
        bench.cluster.wait_exit(victim, 30)
        bench.cluster.start(victim)
        back_at = bench.wait(lambda: bench.back(victim, old, args.partitions), 300,
                             "full ISRs after kill -9")
        out["killed"] = victim
        out["kill_to_full_isr_s"] = round(back_at - killed_at, 2)
        print(f"  killed broker {victim} (leader of partition 0), restarted: every partition "
              f"in a full ISR after {out['kill_to_full_isr_s']} s", flush=True)
        time.sleep(args.after_seconds)  # writes go on after the recovery
        Path(stop_file).write_text("stop")
        proc.wait(300)
        if proc.returncode != 0:
            raise ClusterError(f"paced producer failed: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out["load_average_end"] = os.getloadavg()
    r = json.loads(Path(out_file).read_text())
    scheduled, acked = r["scheduled"], r["acked"]
    begin, end = r["window"]
    warm = begin + 0.1 * (killed_at - begin)
    sent = r.get("sent")
    out["first_ack_s"] = round(min((t for _, t, _ in acked), default=end) - begin, 2)
    out["before"] = phase_figures(scheduled, acked, args.paced_partitions, warm, killed_at, sent)
    out["through"] = phase_figures(scheduled, acked, args.paced_partitions, killed_at,
                                   scheduled[-1] if scheduled else end, sent)
    out["records_sent"], out["records_acked"] = len(scheduled), len(acked)
    out["error_count"], out["errors"] = len(r["errors"]), r["errors"][:5]
    out["undelivered"] = r["undelivered"]
    out["client_cpu_s"] = r.get("client_cpu_s")  # kafka-python and aiokafka report it
    # Read back every paced partition: each acknowledged record exactly once.
    back = run_worker("consume", {"bootstrap": bench.bootstrap, "topic": TOPIC,
                                  "count": len(acked), "partitions": args.paced_partitions,
                                  "values": True, "timeout_s": 300})
    seqs = [int(v.split()[0]) for _, v in back["values"] if v.split()[0].isdigit()]
    present = set(seqs)
    out["read_back"] = len(seqs)
    out["lost"] = len({seq for seq, _, _ in acked} - present)
    out["duplicates"] = len(seqs) - len(present)
    for name in ("before", "through"):
        f = out[name]
        print(f"  {name} the kill: {f['records']} records, p50 {f['p50_ms']} ms, p99 "
              f"{f['p99_ms']} ms, max {f['max_ms']} ms; longest gap without an ack "
              f"{f['max_gap_s']} s (partition {f['max_gap_partition']}), "
              f"{f['partitions_over_3s']} partition(s) over 3 s; from the actual send p50 "
              f"{f['from_send_p50_ms']} ms, p99 {f['from_send_p99_ms']} ms", flush=True)
    print(f"  first acknowledgement {out['first_ack_s']} s after the stream began", flush=True)
    print(f"  sent {out['records_sent']}, acked {out['records_acked']}, errors "
          f"{out['error_count']}, read back {out['read_back']}, lost {out['lost']}, "
          f"duplicates {out['duplicates']}; CPU% before the kill {out['cpu_pct_before']}",
          flush=True)
    return out


# ------------------------------------------------------------------------------------------
# Where a paced record's time goes (--probe).

PROBES = [(500, 200, PACED_SETTINGS), (50, 200, PACED_SETTINGS), (500, 1, PACED_SETTINGS),
          (500, 200, {"acks": "all"})]
_PRODUCE = 'kraft_broker_request_latency_seconds_{}{{api="Produce"{}}}'


def produce_latency(bench: Bench) -> dict[str, float]:
    """The brokers' Produce request latency histogram (decode to answer), summed."""
    out = {"count": 0.0, "sum": 0.0, "le_0.025": 0.0, "le_0.05": 0.0, "le_0.1": 0.0}
    for broker in BROKERS:
        metrics = bench.cluster.scrape(broker)
        out["count"] += metrics.get(_PRODUCE.format("count", ""), 0.0)
        out["sum"] += metrics.get(_PRODUCE.format("sum", ""), 0.0)
        for le in ("0.025", "0.05", "0.1"):
            out[f"le_{le}"] += metrics.get(_PRODUCE.format("bucket", f',le="{le}"'), 0.0)
    return out


def probe(bench: Bench, seconds: float) -> list[dict[str, Any]]:
    """Paced runs of `seconds` at a few rates and partition counts, each with the client's
    latency from the scheduled send and the brokers' own Produce latency over the run: the
    client's share is what librdkafka queues (it sends one partition per ProduceRequest, at
    most 5 in flight per broker with idempotence)."""
    from bench.data_plane_targets import paced_figures
    out = []
    for rate, partitions, settings in PROBES:
        before, load = produce_latency(bench), os.getloadavg()
        r = run_worker("paced", {"bootstrap": bench.bootstrap, "topic": TOPIC, "rate": rate,
                                 "partitions": partitions, "seconds": seconds,
                                 "settings": settings})
        after = produce_latency(bench)
        delta = {k: after[k] - before[k] for k in after}
        requests = max(delta["count"], 1.0)
        row = {"rate": rate, "partitions": partitions, "settings": settings,
               "client": paced_figures(r), "load_average": load,
               "broker_produce_requests": int(delta["count"]),
               "broker_produce_mean_ms": round(1000 * delta["sum"] / requests, 1),
               "broker_produce_within_ms": {le: round(delta[f"le_{le}"] / requests, 3)
                                            for le in ("0.025", "0.05", "0.1")},
               "records_per_request": round(len(r["acked"]) / requests, 2)}
        out.append(row)
        print(f"  probe {rate} rec/s over {partitions} partition(s) {settings}: client p50 "
              f"{row['client']['p50_ms']} ms, p99 {row['client']['p99_ms']} ms; brokers' "
              f"Produce {row['broker_produce_requests']} requests, mean "
              f"{row['broker_produce_mean_ms']} ms, share within 25/50/100 ms "
              f"{row['broker_produce_within_ms']}, {row['records_per_request']} records per "
              f"request; load average {load}", flush=True)
    return out


# ------------------------------------------------------------------------------------------


WORKERS = {"seed": worker_seed}


def run_worker_here(kind: str, spec: dict[str, Any], timeout_s: float = 900) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    try:
        proc = subprocess.run([PYTHON, "-m", "bench.scale_bench", "--worker", kind,
                               "--spec", json.dumps(spec), "--out", path],
                              timeout=timeout_s, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ClusterError(f"{kind} worker failed: {proc.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(Path(path).read_text())
        return result
    finally:
        os.unlink(path)


def verdicts(result: dict[str, Any]) -> list[str]:
    out = []
    if "seeding" in result:
        median = result["seeding"]["seconds"]["median"]
        first = result["seeding"]["rounds"][0]["seconds"]
        out.append(f"seeding {result['partitions']} partitions acks=all <= "
                   f"{GOALS['seed_s']} s: {'met' if median <= GOALS['seed_s'] else 'MISSED'} "
                   f"(median {median} s; the first round, into empty partitions, {first} s)")
    if "paced" in result:
        p = result["paced"]
        for name in ("before", "through"):
            f = p[name]
            ok = (f["p99_ms"] is not None and f["p99_ms"] <= GOALS["p99_ms"]
                  and f["max_gap_s"] <= GOALS["max_gap_s"])
            out.append(f"paced ({p['client']}) {name} the kill: p99 <= {GOALS['p99_ms']} ms "
                       f"and no gap > {GOALS['max_gap_s']} s: {'met' if ok else 'MISSED'} (p99 "
                       f"{f['p99_ms']} ms, longest gap {f['max_gap_s']} s)")
        out.append(f"0 lost: {'met' if p['lost'] == 0 else 'MISSED'} ({p['lost']} lost, "
                   f"{p['duplicates']} duplicates)")
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="scale-bench-", dir=args.dir))
    bench = Bench(root)
    result: dict[str, Any] = {
        "bench": "scale", "commit": args.label or git("rev-parse", "--short", "HEAD"),
        "machine": machine(), "filesystem": filesystem(str(root)),
        "load_average_before": os.getloadavg(), "partitions": args.partitions,
        "args": vars(args).copy(), "started": datetime.now().isoformat()}
    try:
        bench.start()
        result["create_replicas_held_s"] = round(bench.create_topic(args.partitions), 2)
        print(f"created {args.partitions} partitions RF 3: every replica held after "
              f"{result['create_replicas_held_s']} s", flush=True)
        if args.seed_rounds:
            result["seeding"] = seeding(bench, args)
        if not args.no_paced:
            result["paced"] = paced(bench, args)
        if args.probe:  # after the paced run's read-back: it writes the same partitions
            result["probe"] = probe(bench, args.probe)
        result["load_average_after"] = os.getloadavg()
    except Exception:
        for node_id in bench.cluster.nodes:
            print(f"--- node {node_id} ---\n{bench.cluster.logs(node_id)}")
        raise
    finally:
        bench.close()
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            for node in bench.cluster.nodes.values():
                if node.log_path.exists():
                    Path(args.logs, node.log_path.name).write_bytes(node.log_path.read_bytes())
    result["verdicts"] = verdicts(result)
    print("\n".join(result["verdicts"]), flush=True)
    print(f"load average {result['load_average_before']} -> "
          f"{result['load_average_after']}; commit {result['commit']}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--seed-rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=500, help="paced records/s")
    parser.add_argument("--paced-partitions", type=int, default=200)
    parser.add_argument("--before-seconds", type=float, default=30)
    parser.add_argument("--after-seconds", type=float, default=15)
    parser.add_argument("--no-paced", action="store_true", help="no paced run with a kill")
    parser.add_argument("--paced-client", choices=sorted(PACED_CLIENTS), default="confluent",
                        help="the paced producer: confluent-kafka (librdkafka: one partition "
                        "per ProduceRequest), or kafka-python or aiokafka (every ready "
                        "partition of a broker in one request, as Kafka's Java client; "
                        "bench/paced_clients.py)")
    parser.add_argument("--probe", type=float, default=0, metavar="SECONDS",
                        help="paced runs of SECONDS at a few rates and partition counts, with "
                        "the brokers' Produce latency (where a record's time goes)")
    parser.add_argument("--py-spy", metavar="PATH", help="py-spy of partition 0's leader "
                        "through the steady paced phase (raw format)")
    parser.add_argument("--seed-spy", metavar="PATH", help="py-spy of broker 4 through the "
                        "first seeding round (raw format)")
    parser.add_argument("--dir", default=None, help="where the cluster's files go")
    parser.add_argument("--logs", metavar="DIR", help="copy the servers' logs here at the end")
    parser.add_argument("--label", default="", help="the commit, when not run from a clone")
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        Path(args.out).write_text(json.dumps(WORKERS[args.worker](json.loads(args.spec))))
        return 0
    if args.partitions < args.paced_partitions or args.rate < 1:
        parser.error("--partitions must be >= --paced-partitions, --rate >= 1")
    result = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
