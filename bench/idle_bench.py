"""Idle brokers at scale (issue 28): `python -m bench.idle_bench [--partitions 3000]
[--windows 5] [--window-seconds 10] [--json PATH] [--profile PATH]`.

Three controllers and three brokers as `kraft-server` subprocesses on loopback (every setting
at its default; fsync on). The RSS of each process is read once the cluster is up and empty;
then one topic of --partitions partitions, RF 3 (so --partitions replicas on each broker), is
created and waited for (every partition led, ISR 3), one record is written to each partition
with acks=1 by confluent-kafka in another process, and the cluster is left alone for
--settle-seconds (the followers fetch the records, the HWs move, the new segments are flushed
and the checkpoints written: about half a minute on a busy machine).

Then nothing is written or read by any client, and for --windows windows of --window-seconds
each, every server process's CPU (utime + stime over wall time, /proc/PID/stat) and the
machine's busy share (/proc/stat) are taken. Reported per broker: the median and min-max of
its windows' CPU% (100 % = one core), and its RSS (VmRSS) with and without the partitions, per
1,000 replicas. The load average before and after says how busy the shared machine was.

`--profile PATH` runs broker 4 under cProfile instead and writes its stats to PATH after the
idle windows (SIGTERM; not a measurement: the profiler slows the broker).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.data_plane_bench import BROKERS, Bench, machine_busy_seconds
from bench.log_bench import filesystem, machine

PYTHON = sys.executable
TOPIC = "idle"
GOAL_CPU_PCT = 5.0  # issue 28: each idle broker <= 5 % of a core at 3,000 partitions


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as file:
        for line in file:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise OSError(f"no VmRSS for pid {pid}")


def worker_seed(spec: dict[str, Any]) -> dict[str, Any]:
    """One record into each partition of the topic, acks=1; the count delivered."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": spec["bootstrap"], "acks": "1", "linger.ms": 5})
    p.list_topics(spec["topic"], timeout=60)
    errors: list[str] = []
    done = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal done
        done += 1
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    started = time.monotonic()
    for partition in range(spec["partitions"]):
        while True:
            try:
                p.produce(spec["topic"], b"seed", partition=partition, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(300)
    return {"delivered": done - len(errors), "errors": errors, "undelivered": left,
            "seconds": round(time.monotonic() - started, 2)}


def seed(bench: Bench, partitions: int) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    try:
        spec = {"bootstrap": bench.bootstrap, "topic": TOPIC, "partitions": partitions}
        proc = subprocess.run([PYTHON, "-m", "bench.idle_bench", "--worker", json.dumps(spec),
                               "--out", path], timeout=900, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"seed worker failed: {proc.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(Path(path).read_text())
        return result
    finally:
        os.unlink(path)


def idle_windows(bench: Bench, windows: int, seconds: float) -> dict[str, Any]:
    """CPU% of every server process (and the machine) per window of `seconds`."""
    per_node: dict[int, list[float]] = {n: [] for n in bench.cluster.nodes}
    rss: dict[int, list[int]] = {n: [] for n in bench.cluster.nodes}
    machine_pct: list[float] = []
    for _ in range(windows):
        cpu0, busy0, t0 = bench.cpu(), machine_busy_seconds()[0], time.monotonic()
        time.sleep(seconds)  # the window itself: nothing runs here but the cluster
        cpu1, busy1, t1 = bench.cpu(), machine_busy_seconds()[0], time.monotonic()
        for node_id in per_node:
            if node_id in cpu0 and node_id in cpu1:
                per_node[node_id].append(round(100 * (cpu1[node_id] - cpu0[node_id])
                                               / (t1 - t0), 2))
        machine_pct.append(round(100 * (busy1 - busy0) / (t1 - t0), 1))
        for node_id, pid in bench.pids().items():
            rss[node_id].append(rss_kib(pid))
    return {"cpu_pct": {str(n): v for n, v in per_node.items()}, "machine_busy_pct": machine_pct,
            "rss_kib": {str(n): v for n, v in rss.items()}}


def spread(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 2), "min": min(values),
            "max": max(values), "all": values}


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "args": vars(args).copy(),
                               "load_before": os.getloadavg()}
    results["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="idle-bench-") as tmp:
        bench = Bench(Path(tmp))
        results["filesystem"] = filesystem(tmp)
        profile_out = str(Path(tmp) / "broker4.prof") if args.profile else None
        try:
            bench.start(profile=profile_out)
            pids = bench.pids()
            results["rss_empty_kib"] = {str(n): rss_kib(pid) for n, pid in pids.items()}
            t0 = time.monotonic()
            bench.admin("topics", "create", "--topic", TOPIC, "--partitions",
                        str(args.partitions), "--replication-factor", "3")
            bench.wait(lambda: (len(ps := bench.partitions(TOPIC)) == args.partitions and all(
                p["leader"] >= 0 and len(p["isr"]) == 3 for p in ps)), 300,
                f"{TOPIC} led, ISR 3")
            results["created_to_full_isr_s"] = round(time.monotonic() - t0, 2)
            results["rss_created_kib"] = {str(n): rss_kib(pid) for n, pid in pids.items()}
            print(f"{args.partitions} partitions led with ISR 3 in "
                  f"{results['created_to_full_isr_s']} s", flush=True)
            results["seed"] = seed(bench, args.partitions)
            print(f"seeded: {results['seed']}", flush=True)
            time.sleep(args.settle_seconds)  # followers fetch the seed, HWs move, ISRs settle
            results["idle"] = idle_windows(bench, args.windows, args.window_seconds)
            pids = bench.pids()
            results["rss_kib"] = {str(n): rss_kib(pid) for n, pid in pids.items()}
            results["isr_full_after"] = all(len(p["isr"]) == 3
                                            for p in bench.partitions(TOPIC))
            if profile_out is not None:
                bench.cluster.signal(BROKERS[0], signal.SIGTERM)
                bench.cluster.wait_exit(BROKERS[0], 120)
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
                        shutil.copy(node.log_path, args.logs)
        if profile_out is not None:
            Path(args.profile).write_bytes(Path(profile_out).read_bytes())
    results["load_after"] = os.getloadavg()
    report(results, args.partitions)
    return results


def report(results: dict[str, Any], partitions: int) -> None:
    idle = results["idle"]
    replicas_k = partitions / 1000  # RF 3 on 3 brokers: each broker holds every partition
    print("\n| node | idle CPU % of a core: median (min-max) | RSS MiB empty -> loaded | "
          "RSS MiB per 1,000 replicas |")
    print("|---|---|---|---|")
    summary: dict[str, Any] = {}
    for node, values in idle["cpu_pct"].items():
        if not values:
            continue
        s = spread(values)
        empty, loaded = results["rss_empty_kib"].get(node), results["rss_kib"].get(node)
        row: dict[str, Any] = {"cpu": s}
        per_k = ""
        if empty is not None and loaded is not None:
            row["rss_mib"] = [round(empty / 1024, 1), round(loaded / 1024, 1)]
            if int(node) in BROKERS:
                row["rss_mib_per_1000_replicas"] = round(
                    (loaded - empty) / 1024 / replicas_k, 1)
                per_k = f"{row['rss_mib_per_1000_replicas']} (+{round(empty / 1024, 1)} base)"
        summary[node] = row
        role = "broker" if int(node) in BROKERS else "controller"
        print(f"| {role} {node} | {s['median']} ({s['min']}-{s['max']}) | "
              f"{row.get('rss_mib', ['?', '?'])[0]} -> {row.get('rss_mib', ['?', '?'])[1]} | "
              f"{per_k} |")
    brokers = [summary[str(b)]["cpu"]["median"] for b in BROKERS if str(b) in summary]
    verdict = "met" if brokers and max(brokers) <= GOAL_CPU_PCT else "missed"
    results["summary"] = summary
    results["verdict"] = f"idle broker CPU <= {GOAL_CPU_PCT} % of a core: {verdict}"
    print(f"\n{results['verdict']}; machine busy per window {idle['machine_busy_pct']} % "
          f"(of {os.cpu_count()} cores x 100); load average {results['load_before']} -> "
          f"{results['load_after']}; commit {results.get('commit')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window-seconds", type=float, default=10)
    parser.add_argument("--settle-seconds", type=float, default=60)
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--profile", metavar="PATH",
                        help="broker 4 under cProfile; its stats go to PATH (not a measurement)")
    parser.add_argument("--logs", metavar="DIR", help="copy the servers' logs here at the end")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        Path(args.out).write_text(json.dumps(worker_seed(json.loads(args.worker))))
        return 0
    if args.partitions < 1 or args.windows < 1 or args.window_seconds <= 0:
        parser.error("--partitions and --windows must be >= 1 and --window-seconds > 0")
    results = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
