"""Every hop of one remote Admin write, one writer (issue 17): where the milliseconds go.

    python -m bench.write_trace_bench [--seconds 3] [--repeat 3] [--prelude CODE] [--no-etcd]
        [--json PATH]

Three controllers run with `bench._write_trace` installed (timestamps on one clock for every
process, see there); one closed-loop writer sets a config through the Admin API as in
`bench.admin_write_bench`. Each write is followed along its critical path: the request to the
leader's handler, the rule and the append, the Fetch answer to the follower whose
acknowledgement commits it, that follower's append and group commit, its next Fetch back, the
leader's commit step and the answer. The medians of every phase come out as a table.

In the same run, taking turns with the traced writer: a grpc.aio server that does no work (one
unary call: the least any Python gRPC request costs here; and one message out and back on an
open stream), an Admin read (DescribeFeatures: the Admin server's cost without Raft) and etcd's
put over gRPC (when etcd is installed). From them, the floor: one unary call + one stream
message each way + the follower's write and fdatasync — what any design that replicates over
gRPC from Python pays before doing any work — against etcd's whole put.

`--prelude CODE` runs CODE in each controller after the tracer (an idea traced beside nothing:
run the bench twice and compare, e.g. a flush run inline on the loop).
"""

from __future__ import annotations

import argparse
import bisect
import json
import signal
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from bench import grpc_rtt_bench
from bench.admin_write_bench import (
    CodeCluster,
    echo_target,
    run_in_scratch,
    start_echo_server,
)
from bench.peers import etcd as etcd_mod
from bench.peers.etcd_grpc import grpc_target
from bench.peers.kraft_side import (
    MetadataCluster,
    _grpc_target,
    _reraise_cancellation,
    cluster_cpu,
)
from bench.peers.load import RECORD_BYTES, Target, Write, closed_loop
from metadata.rpc import admin_pb2 as apb
from metadata.rpc import admin_pb2_grpc as arpc

STREAM_ECHO = "grpc.aio echo stream: one message out and back"
# (phase, from event, to event) along one write's critical path; "F:" events are the
# follower's whose next Fetch reached the leader first (the acknowledgement that commits).
PHASES = (
    ("request: client -> leader's Admin handler", "C:client+", "L:admin+"),
    ("handler: checks, rule, speculative apply, encode", "L:admin+", "L:submit+"),
    ("leader: append -> first Fetch answer out", "L:submit+", "L:answer_out_records"),
    (LEG_OUT := "gRPC stream message leader -> follower (from the first answer)",
     "L:answer_out_records", "F:fetch_call-"),
    ("follower: take the answer (core, append, replay)", "F:fetch_call-", "F:process-"),
    ("  of which replay of the previous commit", "F:listeners+", "F:listeners-"),
    ("follower: hand the flush to the log thread", "F:process-", "F:flush_job+"),
    (FSYNC := "follower: write + fdatasync (log thread)", "F:flush_job+", "F:flush_job-"),
    ("follower: log thread -> back on the loop", "F:flush_job-", "F:flush_done+"),
    ("follower: flushed -> next Fetch out", "F:flush_done+", "F:fetch_call+"),
    (LEG_BACK := "gRPC stream message follower -> leader", "F:fetch_call+", "L:fetch_in+"),
    ("leader: acknowledgement -> commit -> answer built", "L:fetch_in+", "L:admin-"),
    ("  of which replay of the commit", "L:listeners+", "L:listeners-"),
    ("response: leader's handler -> client", "L:admin-", "C:client-"),
)
# The order events are looked up in (each after the previous), per role.
_CHAIN = ("C:client+", "L:admin+", "L:submit+", "L:answer_out_records", "F:fetch_call-",
          "F:process-", "F:flush_job+", "F:flush_job-", "F:flush_done+", "F:fetch_call+",
          "L:fetch_in+", "L:admin-", "C:client-")
# A replay inside a step: (its events, the step's first and last event); absent when that
# step replayed nothing.
_INSIDE = (("F:listeners", "F:fetch_call-", "F:process-"),
           ("L:listeners", "L:fetch_in+", "L:admin-"))


def read_events(directory: Path, leader_pid: int) -> dict[str, dict[str, list[int]]]:
    """{role: {event: sorted timestamps}}; roles L (the leader), F<pid> (followers)."""
    roles: dict[str, dict[str, list[int]]] = {}
    for path in directory.glob("events-*.txt"):
        pid = int(path.stem.split("-")[1])
        role = "L" if pid == leader_pid else f"F{pid}"
        events: dict[str, list[int]] = defaultdict(list)
        for line in path.read_text().splitlines():
            stamp, name = line.split()
            events[name].append(int(stamp))
        for stamps in events.values():
            stamps.sort()
        roles[role] = events
    return roles


def _after(stamps: list[int], t: int) -> int | None:
    i = bisect.bisect_left(stamps, t)
    return stamps[i] if i < len(stamps) else None


def follow(client: list[tuple[int, int]], roles: dict[str, dict[str, list[int]]]
           ) -> list[dict[str, int]]:
    """The critical path of every write (client start, end): a timestamp per `_CHAIN` event,
    through the follower whose next Fetch went out first. Writes the trace lost are skipped."""
    followers = [r for r in roles if r.startswith("F")]
    paths = []
    for start, end in client:
        best: dict[str, int] | None = None
        for follower in followers:
            path = {"C:client+": start, "C:client-": end}
            t = start
            for name in _CHAIN[1:-1]:
                role, event = name.split(":")
                stamps = roles["L" if role == "L" else follower].get(event, [])
                found = _after(stamps, t)
                if found is None:
                    break
                path[name] = t = found
            else:
                for replay, first, last in _INSIDE:
                    role, event = replay.split(":")
                    of_role = roles["L" if role == "L" else follower]
                    began = _after(of_role.get(event + "+", []), path[first])
                    ended = _after(of_role.get(event + "-", []), began or path[last])
                    if began is not None and ended is not None and ended <= path[last]:
                        path[replay + "+"], path[replay + "-"] = began, ended
                if path["L:admin-"] <= end and (
                        best is None or path["F:fetch_call+"] < best["F:fetch_call+"]):
                    best = path
        if best is not None:
            paths.append(best)
    return paths


def phase_table(paths: list[dict[str, int]]) -> list[dict[str, Any]]:
    rows = []
    for name, begin, end in PHASES:
        ms = sorted((p[end] - p[begin]) / 1e6 if begin in p else 0.0 for p in paths)
        rows.append({"phase": name, "p50_ms": statistics.median(ms),
                     "p90_ms": ms[int(len(ms) * 0.9)]})
    total = sorted((p["C:client-"] - p["C:client+"]) / 1e6 for p in paths)
    rows.append({"phase": "the whole write, at the client", "p50_ms": statistics.median(total),
                 "p90_ms": total[int(len(total) * 0.9)]})
    return rows


def read_target(endpoint: str, cluster_cpu_s: Callable[[], float]) -> Target:
    """An Admin read at the leader: DescribeFeatures (the Admin server, no Raft, no rule)."""
    def reader(channel: grpc.aio.Channel) -> Write:
        stub = arpc.AdminStub(channel)

        async def read() -> bool:
            try:
                reply = await stub.DescribeFeatures(apb.DescribeFeaturesRequest(), timeout=5)
            except grpc.aio.AioRpcError:
                _reraise_cancellation()
                return False
            return bool(reply.status.error_code == 0)
        return read
    return _grpc_target("Admin read at the leader (DescribeFeatures)", endpoint, reader,
                        cluster_cpu_s)


def stream_echo_target() -> tuple[Target, Callable[[], None]]:
    """One message out and back on an open bidirectional stream of a grpc.aio server that does
    no work: what a Fetch answer and the next Fetch cost the transport alone."""
    endpoint, _, stop = start_echo_server()
    channels: list[grpc.aio.Channel] = []
    payload = b"x" * RECORD_BYTES

    async def make(count: int) -> list[Write]:
        writers = []
        for _ in range(count):
            channel = grpc.aio.insecure_channel(endpoint)
            channels.append(channel)
            call = channel.stream_stream(f"/{grpc_rtt_bench.SERVICE}/Stream",
                                         request_serializer=grpc_rtt_bench._same,
                                         response_deserializer=grpc_rtt_bench._same)()

            async def message(call: Any = call) -> bool:
                await call.write(payload)
                return bool(await call.read() == payload)
            writers.append(message)
        return writers

    async def close(writers: list[Write]) -> None:
        for channel in channels:
            await channel.close()
        channels.clear()

    return Target(STREAM_ECHO, make, close), stop


def traced(writers: list[Write], calls: list[tuple[int, int]]) -> list[Write]:
    """The same writers, recording (start, end) on the tracer's clock for each success."""
    def wrap(write: Write) -> Write:
        async def timed() -> bool:
            started = time.monotonic_ns()
            ok = await write()
            if ok:
                calls.append((started, time.monotonic_ns()))
            return ok
        return timed
    return [wrap(w) for w in writers]


def stop_gracefully(meta: MetadataCluster) -> None:
    """SIGTERM: each controller shuts down cleanly, and the tracer writes its events at exit."""
    for node in meta.cluster.nodes.values():
        if node.alive and node.process is not None:
            node.process.send_signal(signal.SIGTERM)
    for node in meta.cluster.nodes.values():
        if node.process is not None:
            node.process.wait(timeout=60)


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    events = root / "events"
    events.mkdir()
    prelude = f"import bench._write_trace as t; t.install({str(events)!r})\n{args.prelude}"
    meta = MetadataCluster(root / "kraft", CodeCluster(root / "kraft", prelude=prelude))
    stops: list[Callable[[], None]] = [meta.stop]
    calls: list[tuple[int, int]] = []
    others: list[Target] = []
    try:
        endpoint = await meta.start()
        leader_pid = next(n.process.pid for n in meta.cluster.nodes.values()
                          if n.endpoint == endpoint and n.process is not None)
        write_target = await meta.target("kraft Admin write (traced)")
        others.append(read_target(endpoint, lambda: cluster_cpu(meta.cluster)))
        echo, _, echo_stop = echo_target()
        stops.append(echo_stop)
        others.append(echo)
        stream_echo, stream_stop = stream_echo_target()
        stops.append(stream_stop)
        others.append(stream_echo)
        binary = None if args.no_etcd else etcd_mod.binary()
        if binary is None and not args.no_etcd:
            print("# etcd is not installed (apt-get install etcd-server): no ratio to etcd")
        if binary is not None:
            etcd = etcd_mod.EtcdCluster(root / "etcd", binary)
            stops.append(etcd.stop_all)
            etcd.start_all()
            etcd_leader, _ = await etcd.leader()
            others.append(grpc_target(etcd, etcd_leader))
        writers = {t.name: await t.make(1) for t in [write_target, *others]}
        for target in [write_target, *others]:
            await closed_loop(writers[target.name], args.warmup)
        writers[write_target.name] = traced(writers[write_target.name], calls)
        p50s: dict[str, list[float]] = defaultdict(list)
        for _ in range(args.repeat):  # interleaved: every system in every round
            for target in [write_target, *others]:
                result = await closed_loop(writers[target.name], args.seconds)
                p50s[target.name].append(result["p50_ms"])
        for target in [write_target, *others]:
            await target.close(writers[target.name])
        stop_gracefully(meta)
        paths = follow(calls, read_events(events, leader_pid))
    finally:
        for stop in reversed(stops):
            stop()
    if not paths:
        raise SystemExit("no write could be followed through the trace")
    rows = phase_table(paths)
    medians = {name: statistics.median(v) for name, v in p50s.items()}
    by_phase = {r["phase"]: r["p50_ms"] for r in rows}
    transport = medians[echo.name] + medians[STREAM_ECHO]
    return {"writes_followed": len(paths), "writes": len(calls), "phases": rows,
            "p50_ms": medians, "floor_ms": transport + by_phase[FSYNC],
            "with_our_stream_legs_ms": (medians[echo.name] + by_phase[LEG_OUT]
                                        + by_phase[LEG_BACK] + by_phase[FSYNC])}


def report(results: dict[str, Any]) -> None:
    print(f"\n{results['writes_followed']} of {results['writes']} writes followed; "
          "medians per phase (ms):")
    for row in results["phases"]:
        print(f"  {row['phase']:52} p50 {row['p50_ms']:6.3f}   p90 {row['p90_ms']:6.3f}")
    print("\nwhole calls, p50 of the per-round medians (ms):")
    for name, p50 in results["p50_ms"].items():
        print(f"  {name:52} {p50:6.3f}")
    etcd = results["p50_ms"].get("etcd put (gRPC)")

    def versus(ms: float) -> str:
        return f"{ms:.3f} ms" + (f" = {ms / etcd:.2f}x etcd's whole put" if etcd else "")
    print("\nfloor: one unary call + one stream message each way (both do-nothing servers) + "
          f"the follower's write and fdatasync: {versus(results['floor_ms'])}")
    print("the same with the two stream messages as measured inside the cluster: "
          f"{versus(results['with_our_stream_legs_ms'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.write_trace_bench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--prelude", default="", help="Python code run in each controller "
                        "after the tracer is installed")
    parser.add_argument("--no-etcd", action="store_true")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.repeat < 1 or args.warmup < 0:
        parser.error("--seconds must be > 0, --repeat >= 1, --warmup >= 0")
    results = run_in_scratch("kraft-write-trace-", lambda root: run(args, root))
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
