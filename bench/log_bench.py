"""Log append + group commit benchmark: `python -m bench.log_bench [--json PATH]`.

Measures, in a temporary directory:
  (a) the disk's raw rate of 4 KiB append + fdatasync, the ceiling for one-sync-per-write;
  (b) SegmentedLog.append_as_leader of 100-byte records in batches of N records, K batches per
      group commit (append K batches, then begin_flush / run / complete_flush, as the driver
      does), reporting records/s, MB/s, syncs per batch and the ratio to (a), measured again
      just before each run because a shared disk's sync rate drifts;
  (c) the append paths alone (no flush), leader and follower, to show the CPU cost per record.
Every measurement is repeated (--repeat, default 5); the table shows median and min-max.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from kraft.log import SegmentedLog

RECORD_BYTES = 100


def machine() -> dict[str, Any]:
    """nproc, CPU model, Python version and the filesystem under test."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def filesystem(path: str) -> str:
    """Type and device of the mount holding `path` (from /proc/mounts)."""
    path = os.path.realpath(path)
    best = ("", "unknown", "unknown")
    try:
        with open("/proc/mounts", encoding="utf-8") as file:
            for line in file:
                device, mount, fstype = line.split()[:3]
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) > len(best[0]):
                    best = (mount, fstype, device)
    except OSError:
        pass
    return f"{best[1]} on {best[2]} (mounted at {best[0] or '?'})"


def repeat(times: int, measure: Callable[[], dict[str, float]]) -> list[dict[str, float]]:
    return [measure() for _ in range(times)]


def raw_fdatasync(directory: str, seconds: float) -> dict[str, float]:
    """4 KiB O_APPEND writes, each followed by fdatasync."""
    path = os.path.join(directory, "raw.bin")
    block = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    try:
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            os.write(fd, block)
            os.fdatasync(fd)
            count += 1
            if count >= 20 and time.perf_counter() >= deadline:
                break
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return {"syncs_per_s": count / elapsed, "us_per_sync": elapsed / count * 1e6}


def group_commit(
    directory: str, per_batch: int, per_flush: int, seconds: float
) -> dict[str, float]:
    """Append `per_flush` batches of `per_batch` records, flush, repeat for `seconds`."""
    log_dir = tempfile.mkdtemp(prefix="log-", dir=directory)
    log = SegmentedLog(log_dir)
    records = [os.urandom(RECORD_BYTES) for _ in range(per_batch)]
    batches = flushes = syncs = written = 0
    append = log.append_as_leader
    try:
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(per_flush):
                append(records, 1, 0)
            job = log.begin_flush()
            assert job is not None
            job.run()
            log.complete_flush(job)
            batches += per_flush
            flushes += 1
            syncs += job.syncs
            written += job.bytes_written
            if flushes >= 3 and time.perf_counter() >= deadline:
                break
        elapsed = time.perf_counter() - start
    finally:
        log.close()
        shutil.rmtree(log_dir)
    return {
        "records_per_s": batches * per_batch / elapsed,
        "mb_per_s": written / elapsed / 1e6,
        "batches_per_s": batches / elapsed,
        "flushes_per_s": flushes / elapsed,
        "syncs_per_batch": syncs / batches,
        "syncs_per_flush": syncs / flushes,
    }


def append_only(directory: str, per_batch: int, follower: bool, seconds: float) -> dict[str, float]:
    """The append path alone: encode (leader) or CRC-scan (follower) and index, no I/O."""
    log_dir = tempfile.mkdtemp(prefix="log-", dir=directory)
    log = SegmentedLog(log_dir)
    records = [os.urandom(RECORD_BYTES) for _ in range(per_batch)]
    shipped: list[bytes] = []
    if follower:  # batches as a leader would ship them, one per call
        source_dir = tempfile.mkdtemp(prefix="src-", dir=directory)
        source = SegmentedLog(source_dir)
        for _ in range(max(1, 20_000 // per_batch)):
            offset = source.append_as_leader(records, 1, 0)
            shipped.append(source.read(offset, 1 << 30, offset + per_batch))
        source.close()
        shutil.rmtree(source_dir)
    count = 0
    try:
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            if follower:
                if count // per_batch >= len(shipped):
                    break
                log.append_as_follower(shipped[count // per_batch])
            else:
                log.append_as_leader(records, 1, 0)
            count += per_batch
            if count % 1000 < per_batch and time.perf_counter() >= deadline:
                break
        elapsed = time.perf_counter() - start
    finally:
        log.close()
        shutil.rmtree(log_dir)
    return {"records_per_s": count / elapsed, "us_per_batch": elapsed / (count / per_batch) * 1e6}


def summary(runs: list[dict[str, float]], key: str) -> tuple[float, float, float]:
    values = [run[key] for run in runs]
    return statistics.median(values), min(values), max(values)


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def spread(runs: list[dict[str, float]], key: str) -> str:
    median, low, high = summary(runs, key)
    return f"{fmt(median)} ({fmt(low)}-{fmt(high)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.log_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="where to create the temporary directory (default: $TMPDIR)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (default 5)")
    parser.add_argument("--seconds", type=float, default=0.5,
                        help="minimum duration of one run (default 0.5)")
    parser.add_argument("--batch-sizes", default="1,10,100,1000",
                        help="records per batch, comma-separated (default 1,10,100,1000)")
    parser.add_argument("--batches-per-flush", default="1,10,100",
                        help="batches per group commit, comma-separated (default 1,10,100)")
    parser.add_argument("--json", metavar="PATH", help="also write the raw numbers here")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.seconds <= 0:
        parser.error("--repeat must be >= 1 and --seconds > 0")
    batch_sizes = [int(x) for x in args.batch_sizes.split(",")]
    per_flush = [int(x) for x in args.batches_per_flush.split(",")]

    directory = tempfile.mkdtemp(prefix="kraft-log-bench-", dir=args.dir)
    info = machine() | {"filesystem": filesystem(directory),
                        "command": " ".join(["python -m bench.log_bench", *(argv or sys.argv[1:])]),
                        "repeat": args.repeat, "seconds_per_run": args.seconds}
    results: dict[str, Any] = {"machine": info, "raw_fdatasync": [], "group_commit": [],
                               "append_only": []}
    try:
        print(f"# machine: {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}")
        print(f"# filesystem: {info['filesystem']}")
        print(f"# {args.repeat} runs of >= {args.seconds}s each; median (min-max)\n")

        raw = repeat(args.repeat, lambda: raw_fdatasync(directory, max(1.0, args.seconds)))
        results["raw_fdatasync"] = raw
        print(f"(a) raw 4 KiB append + fdatasync: {spread(raw, 'syncs_per_s')} syncs/s, "
              f"{spread(raw, 'us_per_sync')} µs each\n")

        print("(b) SegmentedLog.append_as_leader, 100-byte records, group commit")
        print("| records/batch | batches/flush | records/s | MB/s | syncs/batch "
              "| raw syncs/s | flushes/s ÷ raw | batches/s ÷ raw |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in batch_sizes:
            for k in per_flush:
                runs = []
                for _ in range(args.repeat):
                    # The disk's sync rate drifts (shared VMs): pair each run with a fresh
                    # raw measurement and compare the two.
                    raw_now = raw_fdatasync(directory, args.seconds / 2)["syncs_per_s"]
                    run = group_commit(directory, n, k, args.seconds)
                    run["raw_syncs_per_s"] = raw_now
                    run["flush_ratio"] = run["flushes_per_s"] / raw_now
                    run["batch_ratio"] = run["batches_per_s"] / raw_now
                    runs.append(run)
                results["group_commit"].append({"records_per_batch": n, "batches_per_flush": k,
                                                "runs": runs})
                print(f"| {n} | {k} | {spread(runs, 'records_per_s')} "
                      f"| {spread(runs, 'mb_per_s')} | {fmt(summary(runs, 'syncs_per_batch')[0])} "
                      f"| {fmt(summary(runs, 'raw_syncs_per_s')[0])} "
                      f"| {fmt(summary(runs, 'flush_ratio')[0])} "
                      f"| {fmt(summary(runs, 'batch_ratio')[0])} |", flush=True)

        print("\n(c) append path alone (no flush, no I/O)")
        print("| path | records/batch | records/s | µs/batch |")
        print("|---|---:|---:|---:|")
        for follower in (False, True):
            for n in batch_sizes:
                runs = repeat(args.repeat, partial(append_only, directory, n, follower,
                                                   min(args.seconds, 0.3)))
                name = "follower" if follower else "leader"
                results["append_only"].append({"path": name, "records_per_batch": n,
                                               "runs": runs})
                print(f"| {name} | {n} | {spread(runs, 'records_per_s')} "
                      f"| {spread(runs, 'us_per_batch')} |", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=2)
        print(f"\nraw numbers written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
