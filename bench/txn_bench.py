"""Transactions (issue 30, Performance): `python -m bench.txn_bench [--quick] [--json PATH]`.

Three controllers and three brokers as `kraft-server` subprocesses (bench/data_plane_bench.py's
Bench: every setting at its default, fsync on), topics of --partitions partitions, RF 3,
min.insync.replicas=2, and `__transaction_state` at its defaults (50 partitions, RF 3, min ISR
2). Every client is confluent-kafka (librdkafka) at its defaults but for what the goal names,
each in a fresh `python -m bench.txn_bench --worker ...` subprocess reporting JSON.

* **Transactional vs idempotent produce** (goal: ratio >= 0.7): --records 1 KiB records per
  trial; transactional: `transactional.id` set, transactions of --txn-records records
  (begin_transaction, produce, commit_transaction); idempotent: `enable.idempotence=true`,
  produce then flush. Both acks=all (librdkafka's default, and forced by idempotence).
  MB/s = records x 1024 / (first produce() -> last commit_transaction() return, or flush()
  return). --trials of each, interleaved (txn, idem, idem, txn, ...: the order flips every
  round so neither arm always runs first); the ratio of the medians.
* **Commit latency** (goal: p99 <= 50 ms at 10 transactions/s): a transactional producer
  paced at --rate transactions/s for --seconds per trial, each transaction --latency-records
  records over every partition; per transaction, flush() first and then the duration of
  commit_transaction() in the client: the EndTxn round trip as a user sees it (the coordinator
  answers once PrepareCommit is replicated; markers go out after). The flush()+commit sum
  is printed beside it, in no verdict. The first 5 % of each trial are dropped (set-up).
* **read_committed vs read_uncommitted consume** (goal: ratio >= 0.9): the transactional
  topic step 1 wrote (only committed transactions, their markers between), read from offset 0
  by a Consumer with assign() until every record is in, `isolation.level` read_committed
  (librdkafka's default) or read_uncommitted, --trials each, interleaved.

The load average is read before and after each phase; the CPU seconds of every server process
over each trial are kept, so a miss says which process was busy. The produce phase also prints
the brokers' CPU per 1,000 records (one transaction): on this 2-core machine both arms are
CPU-bound, so the ratio is about the inverse ratio of the CPU each spends per record
(docs/benchmarks-history.md, "Where a transaction's CPU goes").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.data_plane_bench import BROKERS, Bench, spread, worker_consume
from bench.data_plane_targets import percentile
from bench.log_bench import filesystem, machine

PYTHON = sys.executable
VALUE_SIZE = 1024
MB = 1_000_000
GOALS = {
    "produce_ratio": (0.7, "transactional produce >= 0.7x idempotent produce (1 KiB records, "
                           "transactions of 1,000 records, RF 3, acks=all)"),
    "commit_p99_ms": (50.0, "commit latency p99 <= 50 ms at 10 transactions/s "
                            "(commit_transaction()'s duration in the client)"),
    "consume_ratio": (0.9, "read_committed consume >= 0.9x read_uncommitted (same data)"),
}


# ------------------------------------------------------------------------------------------
# Client workers: each in its own process (`--worker KIND --spec JSON --out PATH`).


def _producer(spec: dict[str, Any]) -> Any:
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": spec["bootstrap"], **spec["settings"]})


def _produce(p: Any, topic: str, value: bytes, partition: int) -> None:
    while True:
        try:
            p.produce(topic, value, partition=partition)
            return
        except BufferError:
            p.poll(0.001)


def worker_produce(spec: dict[str, Any]) -> dict[str, Any]:
    """`count` 1 KiB records, in transactions of `txn_records` when `transactional`, else
    produced and flushed; seconds from the first produce() to the last commit or flush."""
    p = _producer(spec)
    topic, count, partitions = spec["topic"], spec["count"], spec["partitions"]
    transactional, size = spec["transactional"], spec["txn_records"]
    value = os.urandom(VALUE_SIZE)
    if transactional:
        p.init_transactions(60)
    p.list_topics(topic, timeout=30)  # metadata first: the clock starts at the first send
    commits: list[float] = []
    cpu0 = time.process_time()
    started = time.perf_counter()
    if transactional:
        for first in range(0, count, size):
            p.begin_transaction()
            for i in range(first, min(count, first + size)):
                _produce(p, topic, value, i % partitions)
                p.poll(0)
            t0 = time.perf_counter()
            p.commit_transaction(60)
            commits.append((time.perf_counter() - t0) * 1000)
        left = 0
    else:
        for i in range(count):
            _produce(p, topic, value, i % partitions)
            p.poll(0)
        left = p.flush(120)
    elapsed = time.perf_counter() - started
    return {"records": count, "seconds": elapsed, "undelivered": left,
            "mb_s": count * VALUE_SIZE / elapsed / MB,
            "commit_ms_median": statistics.median(commits) if commits else None,
            "client_cpu_pct": 100 * (time.process_time() - cpu0) / elapsed}


def worker_paced(spec: dict[str, Any]) -> dict[str, Any]:
    """Transactions started at `rate`/s for `seconds` (transaction i at start + i / rate, or
    at once when the previous one ended late), each `records` 1 KiB records over every
    partition, flush(), then commit_transaction() timed."""
    p = _producer(spec)
    topic, partitions, records = spec["topic"], spec["partitions"], spec["records"]
    value = os.urandom(VALUE_SIZE)
    p.init_transactions(60)
    p.list_topics(topic, timeout=30)
    p.begin_transaction()  # one transaction before the clock: the first AddPartitionsToTxn
    _produce(p, topic, value, 0)  # of a new producer epoch is not what is measured
    p.commit_transaction(60)
    commit_ms: list[float] = []
    flush_commit_ms: list[float] = []
    late_ms: list[float] = []
    start = time.perf_counter() + 0.2
    total = int(spec["rate"] * spec["seconds"])
    for n in range(total):
        due = start + n / spec["rate"]
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)  # pacing: the next transaction's scheduled start
        late_ms.append(max(0.0, -wait) * 1000)
        p.begin_transaction()
        for i in range(records):
            _produce(p, topic, value, i % partitions)
        t_flush = time.perf_counter()
        p.flush(60)
        t_commit = time.perf_counter()
        p.commit_transaction(60)
        t_end = time.perf_counter()
        commit_ms.append((t_end - t_commit) * 1000)
        flush_commit_ms.append((t_end - t_flush) * 1000)
    return {"commit_ms": commit_ms, "flush_commit_ms": flush_commit_ms, "late_ms": late_ms}


WORKERS = {"produce": worker_produce, "paced": worker_paced, "consume": worker_consume}


def broker_cpu_ms_per_1000(result: dict[str, Any]) -> float:
    """The brokers' CPU milliseconds over a produce trial per 1,000 of its records."""
    cpu = sum(float(s) for node, s in result["server_cpu_s"].items() if int(node) in BROKERS)
    return round(1000 * cpu / (int(result["records"]) / 1000), 1)


def run_worker(bench: Bench, kind: str, spec: dict[str, Any],
               timeout_s: float = 300) -> dict[str, Any]:
    """One worker process; its result with the server processes' CPU seconds over its run."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    try:
        cpu0 = bench.cpu()
        proc = subprocess.run([PYTHON, "-m", "bench.txn_bench", "--worker", kind,
                               "--spec", json.dumps(spec), "--out", path],
                              timeout=timeout_s, capture_output=True, text=True)
        cpu1 = bench.cpu()
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} worker failed: {proc.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(Path(path).read_text())
        result["server_cpu_s"] = {n: round(cpu1[n] - cpu0[n], 2) for n in cpu1 if n in cpu0}
        return result
    finally:
        os.unlink(path)


# ------------------------------------------------------------------------------------------
# The phases.


def produce_phase(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    arms = {"transactional": {"transactional.id": "bench-txn"},
            "idempotent": {"enable.idempotence": True}}
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for trial in range(args.trials):
        order = list(arms) if trial % 2 == 0 else list(reversed(arms))
        for arm in order:
            spec = {"bootstrap": bench.bootstrap, "topic": "txn" if arm == "transactional"
                    else "idem", "count": args.records, "partitions": args.partitions,
                    "transactional": arm == "transactional", "txn_records": args.txn_records,
                    "settings": arms[arm]}
            r = run_worker(bench, "produce", spec)
            r["broker_cpu_ms_per_1000"] = broker_cpu_ms_per_1000(r)
            runs[arm].append(r)
            print(f"  {arm:>13}: {r['mb_s']:.1f} MB/s ({r['seconds']:.2f} s; server CPU s "
                  f"{r['server_cpu_s']}, brokers {r['broker_cpu_ms_per_1000']} ms per 1,000 "
                  f"records; commit median {r['commit_ms_median']} ms)", flush=True)
    txn = statistics.median(r["mb_s"] for r in runs["transactional"])
    idem = statistics.median(r["mb_s"] for r in runs["idempotent"])
    return {"runs": runs, "settings": {k: v for k, v in arms.items()},
            "transactional_mb_s": spread([r["mb_s"] for r in runs["transactional"]]),
            "idempotent_mb_s": spread([r["mb_s"] for r in runs["idempotent"]]),
            "broker_cpu_ms_per_1000": {arm: spread([r["broker_cpu_ms_per_1000"] for r in rs])
                                       for arm, rs in runs.items()},
            "ratio": round(txn / idem, 3)}


def latency_phase(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    trials = []
    for _ in range(args.trials):
        r = run_worker(bench, "paced", {
            "bootstrap": bench.bootstrap, "topic": "txn-latency", "partitions": args.partitions,
            "records": args.latency_records, "rate": args.rate, "seconds": args.seconds,
            "settings": {"transactional.id": "bench-latency"}})
        skip = max(1, len(r["commit_ms"]) // 20)
        commit, both = r["commit_ms"][skip:], r["flush_commit_ms"][skip:]
        trial = {"transactions": len(commit), "p50_ms": round(percentile(commit, 0.5), 2),
                 "p99_ms": round(percentile(commit, 0.99), 2), "max_ms": round(max(commit), 2),
                 "flush_commit_p99_ms": round(percentile(both, 0.99), 2),
                 "late_max_ms": round(max(r["late_ms"]), 1),
                 "late_over_100ms": sum(1 for x in r["late_ms"] if x > 100),
                 "server_cpu_s": r["server_cpu_s"], "commit_ms": [round(x, 2) for x in commit]}
        trials.append(trial)
        print(f"  commit_transaction(): p50 {trial['p50_ms']} ms, p99 {trial['p99_ms']} ms, "
              f"max {trial['max_ms']} ms over {trial['transactions']} transactions "
              f"(flush+commit p99 {trial['flush_commit_p99_ms']} ms; started late by at most "
              f"{trial['late_max_ms']} ms)", flush=True)
    pooled = [x for t in trials for x in t["commit_ms"]]
    return {"trials": trials, "p99_ms": spread([t["p99_ms"] for t in trials], 2),
            "p50_ms": spread([t["p50_ms"] for t in trials], 2),
            "pooled_p99_ms": round(percentile(pooled, 0.99), 2)}


def consume_phase(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    levels = ("read_committed", "read_uncommitted")
    runs: dict[str, list[dict[str, Any]]] = {level: [] for level in levels}
    count = args.records * args.trials
    for trial in range(args.trials):
        for level in levels if trial % 2 == 0 else tuple(reversed(levels)):
            r = run_worker(bench, "consume", {
                "bootstrap": bench.bootstrap, "topic": "txn", "count": count,
                "partitions": args.partitions, "settings": {"isolation.level": level}})
            if r["records"] != count:
                raise RuntimeError(f"{level} read {r['records']} of {count} records")
            runs[level].append(r)
            print(f"  {level:>16}: {r['mb_s']:.1f} MB/s ({r['seconds']:.2f} s; server CPU s "
                  f"{r['server_cpu_s']})", flush=True)
    rc = statistics.median(r["mb_s"] for r in runs["read_committed"])
    ru = statistics.median(r["mb_s"] for r in runs["read_uncommitted"])
    return {"runs": runs, "records": count,
            "read_committed_mb_s": spread([r["mb_s"] for r in runs["read_committed"]]),
            "read_uncommitted_mb_s": spread([r["mb_s"] for r in runs["read_uncommitted"]]),
            "ratio": round(rc / ru, 3)}


def verdicts(results: dict[str, Any]) -> dict[str, str]:
    figures = {"produce_ratio": results["produce"]["ratio"],
               "commit_p99_ms": results["latency"]["p99_ms"]["median"],
               "consume_ratio": results["consume"]["ratio"]}
    out = {}
    for key, value in figures.items():
        bound, what = GOALS[key]
        met = value <= bound if key.endswith("_ms") else value >= bound
        out[key] = f"{what}: {value} -> {'met' if met else 'MISSED'}"
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "args": vars(args).copy(),
                               "goals": {k: v[1] for k, v in GOALS.items()}, "load": {}}
    results["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip()
    print("\n".join(results["goals"].values()), flush=True)
    with tempfile.TemporaryDirectory(prefix="txn-bench-") as tmp:
        bench = Bench(Path(tmp))
        results["filesystem"] = filesystem(tmp)
        try:
            results["load"]["start"] = os.getloadavg()
            bench.start()
            for topic in ("txn", "idem", "txn-latency"):
                bench.create(topic, args.partitions)
            for name, phase in (("produce", produce_phase), ("latency", latency_phase),
                                ("consume", consume_phase)):
                print(f"{name} (load average {os.getloadavg()}):", flush=True)
                results[name] = phase(bench, args)
                results["load"][name] = os.getloadavg()
        except Exception:
            for node_id in bench.cluster.nodes:
                print(f"--- node {node_id} ---\n{bench.cluster.logs(node_id)}")
            raise
        finally:
            bench.close()
    results["verdicts"] = verdicts(results)
    print("\n".join(results["verdicts"].values()))
    print(f"load average {results['load']}; commit {results['commit']}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.txn_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--records", type=int, default=60_000, help="per produce trial")
    parser.add_argument("--txn-records", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=float, default=10, help="latency: transactions/s")
    parser.add_argument("--seconds", type=float, default=8, help="latency: per trial")
    parser.add_argument("--latency-records", type=int, default=100,
                        help="latency: records per transaction")
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = WORKERS[args.worker](json.loads(args.spec))
        Path(args.out).write_text(json.dumps(result))
        return 0
    if args.quick:
        args.trials, args.records, args.seconds = 2, 5_000, 3
    results = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
