"""Spark audit throughput: `python -m bench.audit_bench [--records N] [--cores 1,2] [--json PATH]`.

Generates a valid metadata log of N records (audit.synthetic: SegmentedLog + the metadata
record encoders; ISR changes, leader moves, broker fences, one LEADER_CHANGE per epoch) on
three nodes, then runs the whole audit (read with the kraft-metadata data source, cross-node
CRC comparison, leader-per-epoch, metadata replay, timelines) on local[C] for each core count.
Each count gets its own SparkSession; one warm-up audit on a 300,000-record log starts the JVM,
builds the reader's jar if needed and lets the JIT compile the decoder and the replay, so the
timed runs measure the audit alone. Reported: log records audited per second (every batch
compared across the three nodes, every record replayed), the time of each phase, and the load
average around each run (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from audit.layout import discover
from audit.synthetic import SyntheticLog, generate
from bench.log_bench import machine

NODES = (1, 2, 3)


def _logs(root: Path) -> list:
    return [discover(str(root / f"node-{n}")) for n in NODES]


def _generate(log: Path, records: int) -> SyntheticLog:
    """The log, generated unless `log` already holds one of this size (info.json says)."""
    saved = log / "info.json"
    if saved.is_file():
        data = json.loads(saved.read_text())
        if data["requested"] == records:
            return SyntheticLog(data["records"], {int(k): v for k, v in data["epochs"].items()},
                                data["fences"])
    shutil.rmtree(log, ignore_errors=True)
    info = generate(log, records)
    saved.write_text(json.dumps({"requested": records, "records": info.records,
                                 "epochs": info.epochs, "fences": info.fences}))
    return info


def measure(cores: int, root: Path, warm: Path, repeat: int) -> dict[str, Any]:
    from audit.job import run_audit
    from audit.session import spark_session

    spark = spark_session(f"local[{cores}]", shuffle_partitions=2 * cores)
    try:
        run_audit(spark, _logs(warm), partitions=2 * cores)
        runs: list[float] = []
        phases: list[dict[str, float]] = []
        loads: list[list[float]] = []
        for _ in range(repeat):
            before = os.getloadavg()[0]
            start = time.perf_counter()
            result = run_audit(spark, _logs(root), partitions=2 * cores)
            runs.append(time.perf_counter() - start)
            loads.append([before, os.getloadavg()[0]])
            assert not result.violations, result.violations[:3]
            phases.append(result.timings)
        rows = result.records
    finally:
        spark.stop()
    return {"cores": cores, "records": rows, "seconds": runs, "phases": phases,
            "load_average_1m": loads,
            "median_s": statistics.median(runs),
            "records_per_s": rows / statistics.median(runs),
            "records_per_s_range": [rows / max(runs), rows / min(runs)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_bench", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000,
                        help="log records per node (the issue's full size is 10,000,000)")
    parser.add_argument("--cores", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--keep-log", metavar="DIR",
                        help="generate the log into DIR and keep it; an existing one is reused "
                             "(the generator is seeded, so the same --records gives the same log)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="audit-bench-"))
    try:
        log = Path(args.keep_log) if args.keep_log else tmp / "log"
        start = time.perf_counter()
        info = _generate(log, args.records)
        generated = time.perf_counter() - start
        generate(tmp / "warm", 300_000)
        size = sum(f.stat().st_size for f in (log / "node-1").rglob("*.log"))
        print(f"generated {info.records:,} records per node ({size / 2**20:.0f} MiB, "
              f"{len(info.epochs)} epochs, {info.fences} fences) in {generated:.1f} s",
              flush=True)
        results: dict[str, Any] = {"machine": machine(), "records_per_node": info.records,
                                   "nodes": len(NODES), "log_bytes_per_node": size, "runs": []}
        for cores in args.cores:
            r = measure(cores, log, tmp / "warm", args.repeat)
            results["runs"].append(r)
            low, high = r["records_per_s_range"]
            last = ", ".join(f"{k} {v:.1f} s" for k, v in r["phases"][-1].items())
            print(f"local[{cores}]: {r['records']:,} records in {r['median_s']:.1f} s median "
                  f"({', '.join(f'{s:.1f}' for s in r['seconds'])}): "
                  f"{r['records_per_s']:,.0f} records/s ({low:,.0f}-{high:,.0f}); phases of "
                  f"the last run: {last}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
