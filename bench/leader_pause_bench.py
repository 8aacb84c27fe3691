"""A slow but alive leader keeps its job: `python -m bench.leader_pause_bench [--minutes 10]
[--pause-ms 300] [--every-s 5] [--json PATH]`.

Three `kraft-server` voters on loopback with Kafka's default timeouts (election 1 s, fetch
2 s). Every `--every-s` seconds the current leader is frozen with SIGSTOP for `--pause-ms`
(a GC-like pause) and continued with SIGCONT, for `--minutes`. Meanwhile a writer in this
process appends one 100-byte record through the leader's TestHooks.Append every 100 ms and
times each from its send. The verdict (issue 17): no leader change in the whole run (the
epoch at the end equals the epoch at the start); the writes' latency shows what a pause
costs a client. A hung-leader rule that fires on pauses this short would depose the leader
and bump the epoch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from bench._cluster import Clients, Cluster
from bench.quorum_bench import git

RECORD_BYTES = 100
WRITE_EVERY_S = 0.1


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def run(args: argparse.Namespace, root: Path) -> dict[str, object]:
    record = os.urandom(RECORD_BYTES)
    cluster = Cluster(root / "pauses", extra={"internal.test.hooks.enable": "true"})
    clients: Clients | None = None
    latencies_ms: list[float] = []
    failed_writes = 0
    pauses = 0
    try:
        cluster.format()
        for node_id in cluster.nodes:
            cluster.start(node_id)
        clients = Clients(cluster)
        leader, first_epoch, _ = await clients.healthy(record)
        stop = asyncio.Event()

        async def writer() -> None:
            nonlocal failed_writes
            while not stop.is_set():
                sent = time.perf_counter()
                answer = await clients.append(leader, [record], timeout_s=5.0)
                if answer is None or answer.error_code != 0:
                    failed_writes += 1
                else:
                    latencies_ms.append((time.perf_counter() - sent) * 1000)
                # Pacing of the open-loop writer, not synchronisation.
                await asyncio.sleep(max(0.0, WRITE_EVERY_S - (time.perf_counter() - sent)))

        task = asyncio.create_task(writer())
        end = time.monotonic() + args.minutes * 60
        while time.monotonic() < end:
            await asyncio.sleep(args.every_s)  # the schedule of the pauses
            cluster.signal(leader, signal.SIGSTOP)
            await asyncio.sleep(args.pause_ms / 1000)  # the pause being measured
            cluster.signal(leader, signal.SIGCONT)
            pauses += 1
        stop.set()
        await task
        views = await clients.statuses(sorted(cluster.nodes))
        epochs = {v.epoch for v in views.values()}
        leaders = {v.leader_id for v in views.values()}
    finally:
        if clients is not None:
            await clients.close()
        cluster.kill_all()
    last_epoch = max(epochs)
    return {
        "pauses": pauses, "pause_ms": args.pause_ms, "every_s": args.every_s,
        "minutes": args.minutes, "first_epoch": first_epoch, "last_epoch": last_epoch,
        "leader_changes": last_epoch - first_epoch, "leaders_at_end": sorted(leaders),
        "writes": len(latencies_ms), "failed_writes": failed_writes,
        "write_ms": {
            "median": statistics.median(latencies_ms), "p99": _percentile(latencies_ms, 0.99),
            "max": max(latencies_ms),
        } if latencies_ms else {},
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.leader_pause_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--pause-ms", type=int, default=300)
    parser.add_argument("--every-s", type=float, default=5.0)
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    if args.minutes <= 0 or args.pause_ms < 0 or args.every_s <= 0:
        parser.error("--minutes and --every-s must be > 0, --pause-ms >= 0")
    print(f"# commit {git('rev-parse', 'HEAD')}; load average at start: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="kraft-pauses-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    print(json.dumps(result, indent=2))
    changes = result["leader_changes"]
    print(f"target no leader change in {args.minutes:g} min with {args.pause_ms} ms leader "
          f"pauses every {args.every_s:g} s: {changes} change(s): "
          f"{'met' if changes == 0 else 'MISSED'}")
    print(f"# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
