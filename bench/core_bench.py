"""Protocol core and simulator benchmarks: `python -m bench.core_bench [--json PATH]`.

(a) The core alone: three RaftCores over in-memory logs with an instant network (messages are
    delivered in the same call, flushes complete at once). A writer appends batches of N
    100-byte records at the leader and runs the cluster until they commit. Reported as records
    committed per CPU-second of the whole cluster: the protocol core must not be what limits
    a real node.
(b) The simulator: events per CPU-second over a fixed set of seeds, which sets the seed budget
    of `make test` and `make sim`.
Each measurement is repeated (--repeat, default 5): median and min–max.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import time
from collections import deque
from typing import Any

from bench.log_bench import machine
from kraft.core.config import RaftConfig
from kraft.core.messages import OutboundRequest, Reply
from kraft.core.raft import RaftCore
from kraft.election_state import PRIMORDIAL
from kraft.log.memory import MemoryLog
from kraft.sim.__main__ import plan, run_seed

RECORD = b"x" * 100


class InstantCluster:
    """Three cores wired back to back: every message and flush completes before `run` returns
    (followers' long-poll fetches park at the leader, which is what makes the cluster quiet)."""

    def __init__(self) -> None:
        voters = {1: "n1", 2: "n2", 3: "n3"}
        self.now = 0
        self.logs = {i: MemoryLog() for i in voters}
        self.cores = {
            i: RaftCore(RaftConfig("bench", i, voters), self.logs[i],
                        PRIMORDIAL, 0, random.Random(i))
            for i in voters
        }
        self.inbound: dict[int, tuple[int, int]] = {}  # token -> (requester, correlation id)
        self.queue: deque[tuple[int, OutboundRequest | Reply]] = deque()
        self._token = 0
        while not any(c.is_leader for c in self.cores.values()):
            self.now += 50
            for core in self.cores.values():
                core.poll(self.now)
            self.run()

    def leader(self) -> RaftCore:
        return next(c for c in self.cores.values() if c.is_leader)

    def _drain(self, node_id: int) -> None:
        """Flush what the node appended, then queue what it sends (as a driver would)."""
        core, log = self.cores[node_id], self.logs[node_id]
        if log.flushed_offset < log.end_offset:
            log.flush()
            core.on_log_flushed(self.now)
        out = core.take_output()
        if out.election_state is not None:
            core.election_state_persisted(out.election_state)
        for message in (*out.requests, *out.replies):
            self.queue.append((node_id, message))

    def run(self) -> None:
        """Deliver messages and complete flushes until the cluster is quiet."""
        for node_id in self.cores:
            self._drain(node_id)
        while self.queue:
            source, message = self.queue.popleft()
            if isinstance(message, OutboundRequest):
                self._token += 1
                self.inbound[self._token] = (source, message.correlation_id)
                target = message.destination
                self.cores[target].handle_request(self._token, message.request, self.now)
            else:
                target, cid = self.inbound.pop(message.token)
                self.cores[target].handle_response(cid, message.response, self.now)
            self._drain(target)


def core_throughput(batch_records: int, seconds: float) -> float:
    cluster = InstantCluster()
    batch = [RECORD] * batch_records
    committed = 0
    started = time.process_time()
    while time.process_time() - started < seconds:
        leader = cluster.leader()
        last = leader.append(batch, cluster.now)
        cluster.run()
        if leader.high_watermark > last:
            committed += batch_records
    return committed / (time.process_time() - started)


def simulator_rate(seeds: int) -> tuple[float, int]:
    started = time.process_time()
    events = sum(run_seed(name, seed).events for name, seed in plan(seeds, 0, None))
    return events / (time.process_time() - started), events


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.core_bench", description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--sim-seeds", type=int, default=40)
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    results: dict[str, Any] = {"machine": machine(), "core": {}, "simulator": {}}
    print("(a) core, 3 voters, instant network: records committed per CPU-second")
    for n in (1, 10, 100, 1000):
        runs = [core_throughput(n, args.seconds) for _ in range(args.repeat)]
        results["core"][str(n)] = {"runs": runs, **summary(runs)}
        s = summary(runs)
        print(f"  {n:>5} records/batch: {s['median']:>12,.0f}  ({s['min']:,.0f}–{s['max']:,.0f})")
    runs = []
    for _ in range(args.repeat):
        rate, events = simulator_rate(args.sim_seeds)
        runs.append(rate)
    results["simulator"] = {"seeds": args.sim_seeds, "events": events, "runs": runs,
                            **summary(runs)}
    s = summary(runs)
    print(f"(b) simulator: {s['median']:,.0f} events per CPU-second "
          f"({s['min']:,.0f}–{s['max']:,.0f}), {events} events in {args.sim_seeds} seeds")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
