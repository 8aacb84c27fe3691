"""What a group commit's hand-off to the flush thread costs, and why it grows with the loop's
work: one small write + fdatasync done inline, against the same job handed to a worker thread
(`run_in_executor`, as RaftNode does) while the event loop (a) waits, (b) runs Python for
`--busy-ms` right after handing it off, as a node does when it answers fetches or replays
records after an append.

    python -m bench.flush_hop_bench [--dir DIR] [--jobs 1500] [--busy-ms 0.3] [--json PATH]

The worker needs the GIL before it can issue the syscall, and again after it returns: while the
loop thread runs Python the disk sits idle, so the fsync does not overlap that work.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

RECORD = b"x" * 200


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def _measure(fd: int, jobs: int, busy_s: float) -> dict[str, float]:
    def job() -> None:
        os.write(fd, RECORD)
        os.fdatasync(fd)

    loop = asyncio.get_running_loop()
    executor = concurrent.futures.ThreadPoolExecutor(1)
    inline: list[float] = []
    idle: list[float] = []
    busy: list[float] = []
    try:
        for _ in range(jobs):  # the three modes interleaved: the disk's drift falls on each
            started = time.perf_counter()
            job()
            inline.append(time.perf_counter() - started)
            started = time.perf_counter()
            await loop.run_in_executor(executor, job)
            idle.append(time.perf_counter() - started)
            started = time.perf_counter()
            future = loop.run_in_executor(executor, job)
            spin_until = time.perf_counter() + busy_s
            while time.perf_counter() < spin_until:  # the loop thread's Python work
                pass
            await future
            busy.append(time.perf_counter() - started)
    finally:
        executor.shutdown()
    return {"inline_p50_ms": _median_ms(inline), "worker_idle_loop_p50_ms": _median_ms(idle),
            "worker_busy_loop_p50_ms": _median_ms(busy), "busy_ms": busy_s * 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flush_hop_bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where the file goes (default: $TMPDIR)")
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument("--busy-ms", type=float, default=0.3)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.busy_ms < 0:
        parser.error("--jobs must be >= 1 and --busy-ms >= 0")
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        fd = os.open(Path(directory) / "flush-hop.bin", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            result = asyncio.run(_measure(fd, args.jobs, args.busy_ms / 1000))
        finally:
            os.close(fd)
    result["loadavg"] = os.getloadavg()[0]
    print(f"write + fdatasync of {len(RECORD)} bytes, medians of {args.jobs} (load "
          f"{result['loadavg']:.2f}):\n"
          f"  inline on the loop thread          {result['inline_p50_ms']:.3f} ms\n"
          f"  worker thread, loop waiting        {result['worker_idle_loop_p50_ms']:.3f} ms\n"
          f"  worker thread, loop busy {args.busy_ms:.2f} ms   "
          f"{result['worker_busy_loop_p50_ms']:.3f} ms  (overlap would give "
          f"{max(args.busy_ms, result['worker_idle_loop_p50_ms']):.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
