"""The Admin write path's own CPU, without gRPC and replication: `AdminOperations.call`
("IncrementalAlterConfigs", as the Admin service calls it) -> QuorumController.write -> a
single-voter RaftNode with its log on disk (fsync included), W concurrent writers in one event
loop, in this process.

    python -m bench.admin_path_bench [--writers 64] [--writes 100] [--rounds 5]
        [--baseline COMMIT] [--profile]

With --baseline the commit's tree is exported (git archive) and each round runs it and the
working tree in turn, each in a fresh subprocess (`--code DIR` runs one side), so an idea in
metadata/ is measured against the code before it within the same minutes: on a shared,
loaded machine a cluster run spreads by +-12 % even between two copies of the same code,
while this path spreads by a few percent. --profile prints cProfile's top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


async def _measure(data: Path, writers: int, writes: int, profile: bool) -> dict[str, float]:
    # Imported here: with --code, sys.path points at another tree first.
    from kraft.core.config import RaftConfig
    from kraft.log.quorum_state import QuorumStateStore
    from kraft.log.segmented import SegmentedLog
    from kraft.node.raft_node import RaftNode
    from metadata.admin_ops import AdminOperations
    from metadata.controller import QuorumController
    from metadata.loader import MetadataLoader
    from metadata.rpc import admin_pb2 as apb

    node = RaftNode(RaftConfig("c", 1, {1: "127.0.0.1:1"}), SegmentedLog(data / "log"),
                    QuorumStateStore(data / "quorum-state"), rng=random.Random(1))
    loader = MetadataLoader()
    node.register(loader)
    controller = QuorumController(node, noop_interval_ms=0)
    loader.install(controller)
    await node.start()
    while not controller.is_active:
        await asyncio.sleep(0.01)  # poll interval of the single voter's election
    ops = AdminOperations(controller, "bench", {1: "127.0.0.1:1"})
    counter = [0]

    async def writer(count: int) -> None:
        for _ in range(count):
            counter[0] += 1
            request = apb.IncrementalAlterConfigsRequest(resources=[apb.AlterConfigsResource(
                resource_type=apb.CONFIG_RESOURCE_TYPE_BROKER, resource_name="",
                configs=[apb.AlterableConfig(name="log.retention.ms",
                                             op=apb.ALTER_CONFIG_OP_SET,
                                             value=str(604_800_000 + counter[0]))])])
            reply = await ops.call("IncrementalAlterConfigs", request)
            if reply.results[0].error_code != 0:
                raise RuntimeError(f"write refused: {reply}")

    try:
        await asyncio.gather(*(writer(writes // 5 or 1) for _ in range(writers)))  # warm-up
        profiler = cProfile.Profile() if profile else None
        wall0, cpu0 = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        await asyncio.gather(*(writer(writes) for _ in range(writers)))
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        await node.stop()
    if profiler is not None:
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    total = writers * writes
    return {"writes_per_s": total / wall, "cpu_ms_per_write": 1000 * cpu / total}


def _side(code: Path, args: argparse.Namespace) -> dict[str, float]:
    out = subprocess.run(
        # This file as a script (a baseline tree may not have it); --code puts `code` first
        # on sys.path, so the product's packages come from there.
        [sys.executable, str(Path(__file__).resolve()), "--code", str(code),
         "--writers", str(args.writers), "--writes", str(args.writes)],
        cwd=code, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.admin_path_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--writes", type=int, default=100, help="per writer")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default="")
    parser.add_argument("--code", default="", help=argparse.SUPPRESS)  # one side, JSON out
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    if args.code:
        sys.path.insert(0, args.code)
        with tempfile.TemporaryDirectory() as data:
            print(json.dumps(asyncio.run(_measure(Path(data), args.writers, args.writes,
                                                  args.profile))))
        return 0
    sides = {"working tree": ROOT}
    with tempfile.TemporaryDirectory() as scratch:
        if args.baseline:
            old = Path(scratch) / "baseline"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            sides[f"@{args.baseline[:8]}"] = old
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
        for round_no in range(args.rounds):
            names = list(sides)[round_no % len(sides):] + list(sides)[:round_no % len(sides)]
            for name in names:
                runs[name].append(_side(sides[name], args))
    for name, rs in runs.items():
        print(f"{name:16} {statistics.median(r['writes_per_s'] for r in rs):8,.0f} writes/s, "
              f"{statistics.median(r['cpu_ms_per_write'] for r in rs) * 1000:6.1f} us CPU per "
              f"write  (runs: {[round(r['cpu_ms_per_write'] * 1000, 1) for r in rs]})")
    if args.baseline:
        new, old_runs = runs["working tree"], runs[f"@{args.baseline[:8]}"]
        ratio = statistics.median(n["cpu_ms_per_write"] / o["cpu_ms_per_write"]
                                  for n, o in zip(new, old_runs, strict=True))
        print(f"CPU per write, working tree / baseline: {ratio:.3f} (median of the rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
