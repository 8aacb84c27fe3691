"""Where a remote Admin write's time and CPU go, against etcd over its gRPC API (issue 17).

    python -m bench.admin_write_bench [--writers 1,64] [--seconds 3] [--repeat 3]
        [--baseline COMMIT] [--no-etcd] [--floor] [--profile DIR [--profile-writers 64]]

Systems, all up at once and taking turns under the same closed-loop load
(`bench.peers.load`): this project's Admin API (one IncrementalAlterConfigs per request to
the active controller, `kraft_side.config_write`), the same at `--baseline` (that commit's
tree exported with `git archive` and run as the controllers' code, so an idea is measured
against the code before it in the same minutes), and etcd 3 members driven through its gRPC
API by grpc.aio (`bench.peers.etcd_grpc`). With --floor, also a grpc.aio server that does no
work at all (`bench.grpc_rtt_bench`'s echo, one unary call per write, same client): the most
any Python gRPC server could do on this machine, the platform's floor under every goal.

Per run, besides writes/s and latency: the servers' CPU per committed write (all three
nodes), and from the controllers' Prometheus metrics the mean append->commit time at the
leader, the mean fsync (write + fdatasync of one group commit) at the leader and at the
followers, and records per leader fsync — the phases of the table in docs/benchmarks-history.md.
With --profile, py-spy samples all three controllers during one extra run at
--profile-writers and the top frames per node are printed (raw stacks kept in DIR).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from bench import grpc_rtt_bench
from bench._cluster import _LAUNCHER, CLIENT_OPTIONS, PYTHON, Cluster, ClusterError
from bench.peers import etcd as etcd_mod
from bench.peers import procs
from bench.peers.etcd_grpc import grpc_target
from bench.peers.kraft_side import MetadataCluster
from bench.peers.load import RECORD_BYTES, Target, Write, closed_loop

ROOT = Path(__file__).resolve().parents[1]
# The same server with some code run first in its process (--prelude; e.g. uvloop's event loop,
# which is a measurement only: uvloop is not a dependency).
_PRELUDE_LAUNCHER = _LAUNCHER.replace(
    "os.execv(sys.executable, [sys.executable, '-m', 'server.main', sys.argv[1]])",
    "import runpy; exec(sys.argv[2]); sys.argv = ['server.main', sys.argv[1]]; "
    "runpy.run_module('server.main', run_name='__main__', alter_sys=True)")
UVLOOP = "import uvloop; uvloop.install()"
Probe = Callable[[], dict[str, float]]


@dataclass
class CodeCluster(Cluster):
    """A Cluster whose controllers run the code under `code_dir` (the working tree if None):
    `python -m server.main` resolves the project's packages from its working directory."""

    code_dir: Path | None = None
    prelude: str = ""

    def start(self, node_id: int) -> Any:
        if self.code_dir is None and not self.prelude:
            return super().start(node_id)
        node = self.nodes[node_id]
        if node.alive:
            raise ClusterError(f"node {node_id} is already running")
        command = ([PYTHON, "-c", _PRELUDE_LAUNCHER, str(node.config_path), self.prelude]
                   if self.prelude else [PYTHON, "-c", _LAUNCHER, str(node.config_path)])
        with node.log_path.open("ab") as log_file:
            node.process = subprocess.Popen(
                command, cwd=self.code_dir,
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        return node


def export_tree(commit: str, into: Path) -> Path:
    """`commit`'s tree under `into` (git archive: the shared working tree is not touched)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def start_echo_server() -> tuple[str, int, Callable[[], None]]:
    """grpc_rtt_bench's do-nothing grpc.aio server (unary and stream echo) in a process of its
    own: its endpoint, its pid and how to stop it."""
    ports: multiprocessing.Queue[int] = multiprocessing.Queue()
    server = multiprocessing.Process(target=grpc_rtt_bench._serve, args=(ports,), daemon=True)
    server.start()
    endpoint = f"127.0.0.1:{ports.get(timeout=30)}"

    def stop() -> None:
        server.kill()
        server.join()

    assert server.pid is not None
    return endpoint, server.pid, stop


def echo_target() -> tuple[Target, Probe, Callable[[], None]]:
    """A grpc.aio server in its own process that answers each call with its request and does
    nothing else (no Raft, no fsync): what one unary call costs a Python gRPC server."""
    endpoint, pid, stop = start_echo_server()
    channels: dict[int, list[grpc.aio.Channel]] = {}
    payload = b"x" * RECORD_BYTES

    def writer(channel: grpc.aio.Channel) -> Write:
        call = channel.unary_unary(f"/{grpc_rtt_bench.SERVICE}/Unary",
                                   request_serializer=grpc_rtt_bench._same,
                                   response_deserializer=grpc_rtt_bench._same)

        async def write() -> bool:
            return await call(payload, timeout=5) == payload
        return write

    async def make(count: int) -> list[Write]:
        channels[count] = [grpc.aio.insecure_channel(endpoint, options=CLIENT_OPTIONS)
                           for _ in range(count)]
        return [writer(c) for c in channels[count]]

    async def close(writers: list[Write]) -> None:
        for channel in channels.pop(len(writers)):
            await channel.close()

    target = Target("grpc.aio echo server (no work: the floor)", make, close)
    return target, lambda: {"cpu": procs.proc_cpu_seconds(pid)}, stop


def kraft_probe(cluster: Cluster, leader_port: int) -> Probe:
    """Counters of the controllers: CPU seconds, and the leader's / followers' metric sums."""
    def probe() -> dict[str, float]:
        out: dict[str, float] = {"cpu": sum(cluster.cpu_seconds(n) for n in cluster.nodes)}
        for node_id, node in cluster.nodes.items():
            role = "leader" if node.port == leader_port else "follower"
            metrics = cluster.scrape(node_id)
            for name in ("kraft_commit_latency_seconds_sum", "kraft_commit_latency_seconds_count",
                         "kraft_log_fsync_duration_seconds_sum",
                         "kraft_log_fsync_duration_seconds_count", "kraft_records_appended_total",
                         'kraft_fetch_answers_total{carrying="records"}',
                         'kraft_fetch_answers_total{carrying="none"}'):
                key = f"{role}:{name}"
                out[key] = out.get(key, 0.0) + metrics.get(name, 0.0)
        return out
    return probe


def phases(delta: dict[str, float], writes: int) -> dict[str, float]:
    def mean_ms(role: str, metric: str) -> float:
        count = delta.get(f"{role}:{metric}_count", 0.0)
        return 1000 * delta.get(f"{role}:{metric}_sum", 0.0) / count if count else float("nan")

    fsyncs = delta.get("leader:kraft_log_fsync_duration_seconds_count", 0.0)
    return {
        "server_cpu_ms_per_write": 1000 * delta["cpu"] / writes if writes else float("nan"),
        "leader_append_to_commit_ms": mean_ms("leader", "kraft_commit_latency_seconds"),
        "leader_fsync_ms": mean_ms("leader", "kraft_log_fsync_duration_seconds"),
        "follower_fsync_ms": mean_ms("follower", "kraft_log_fsync_duration_seconds"),
        "records_per_leader_fsync": (delta.get("leader:kraft_records_appended_total", 0.0)
                                     / fsyncs if fsyncs else float("nan")),
        # per write, both followers together: the long poll's answers with and without records
        "fetch_answers_per_write": (
            (delta.get('leader:kraft_fetch_answers_total{carrying="records"}', 0.0)
             + delta.get('leader:kraft_fetch_answers_total{carrying="none"}', 0.0)) / writes
            if writes else float("nan")),
        "empty_fetch_answers_per_write": (
            delta.get('leader:kraft_fetch_answers_total{carrying="none"}', 0.0) / writes
            if writes else float("nan")),
    }


async def measure(systems: list[tuple[Target, Probe]], counts: list[int], seconds: float,
                  repeat: int, warmup_s: float) -> dict[str, list[dict[str, Any]]]:
    """`load.interleaved` with the probes read around every run."""
    out: dict[str, list[dict[str, Any]]] = {t.name: [] for t, _ in systems}
    for count in counts:
        writers: dict[str, list[Write]] = {}
        runs: dict[str, list[dict[str, Any]]] = {t.name: [] for t, _ in systems}
        try:
            for target, _ in systems:
                writers[target.name] = await target.make(count)
                await closed_loop(writers[target.name], warmup_s)
            for round_no in range(repeat):
                shift = round_no % len(systems)
                for target, probe in systems[shift:] + systems[:shift]:
                    before = probe()
                    run = await closed_loop(writers[target.name], seconds)
                    after = probe()
                    delta = {k: after[k] - before.get(k, 0.0) for k in after}
                    run |= phases(delta, run["writes"]) | {"round": round_no,
                                                            "loadavg": os.getloadavg()[0]}
                    runs[target.name].append(run)
        finally:
            for target, _ in systems:
                if target.name in writers:
                    await target.close(writers[target.name])
        for target, _ in systems:
            rs = runs[target.name]
            out[target.name].append({"writers": count, "runs": rs})
            med = {k: statistics.median(r[k] for r in rs) for k in
                   ("writes_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_write",
                    "leader_append_to_commit_ms", "leader_fsync_ms", "follower_fsync_ms",
                    "records_per_leader_fsync", "fetch_answers_per_write",
                    "empty_fetch_answers_per_write")}
            print(f"  {target.name:32} {count:3} writers: {med['writes_per_s']:7,.0f}/s "
                  f"p50 {med['p50_ms']:6.2f} p99 {med['p99_ms']:6.2f} ms | server CPU "
                  f"{med['server_cpu_ms_per_write']:.2f} ms/write | leader append->commit "
                  f"{med['leader_append_to_commit_ms']:.2f} ms, fsync L "
                  f"{med['leader_fsync_ms']:.2f} F {med['follower_fsync_ms']:.2f} ms, "
                  f"{med['records_per_leader_fsync']:.1f} rec/fsync, "
                  f"{med['fetch_answers_per_write']:.2f} Fetch answers/write "
                  f"({med['empty_fetch_answers_per_write']:.2f} without records)", flush=True)
    return out


def top_frames(raw: Path, limit: int = 45) -> list[tuple[str, float, float]]:
    """From py-spy's raw (collapsed) stacks: (frame, self %, total %) by total time."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1]
                  + ")" if " (" in f else f for f in stack.split(";")]
        samples += count
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    if not samples:
        return []
    return [(f, 100 * own[f] / samples, 100 * t / samples) for f, t in total.most_common(limit)]


# Where a GIL sample goes: the first of these found in its stack; else, with only asyncio's
# frames under the event loop, grpc.aio's Cython (cygrpc) callbacks and asyncio machinery.
CATEGORIES = (
    ("admin service + controller write", ("metadata/admin_service.py", "metadata/admin_ops.py",
                                          "metadata/controller.py", "metadata/configs.py")),
    ("loader: replay of committed batches", ("metadata/loader.py", "metadata/delta.py",
                                             "metadata/image.py")),
    ("Raft node, core, log, transport", ("kraft/node/", "kraft/core/", "kraft/log/",
                                         "kraft/delivery.py")),
    ("fsync thread and executor", ("concurrent/futures/thread.py",)),
)


def categories(raw: Path) -> dict[str, float]:
    """% of the samples per CATEGORIES entry, "grpc.aio (Cython)" and "other"."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        for name, markers in CATEGORIES:
            if any(m in stack for m in markers):
                counts[name] += int(count_text)
                break
        else:
            # Only asyncio's own frames under the loop: grpc.aio's Cython callbacks and the
            # asyncio calls they make (per RPC it awaits asyncio.wait, for one).
            inner = stack.split("BaseEventLoop._run_once", 1)[-1].split(";")[1:]
            machinery = all("asyncio/" in frame or "selectors.py" in frame for frame in inner)
            counts["grpc.aio (Cython) and asyncio machinery" if machinery
                   else "other"] += int(count_text)
    total = sum(counts.values()) or 1
    return {k: 100 * v / total for k, v in counts.most_common()}


async def profile(meta: MetadataCluster, target: Target, writers: int, seconds: float,
                  out_dir: Path, native: bool = False) -> dict[str, Any]:
    """py-spy on all three controllers while `writers` write for `seconds`: samples of
    threads holding the GIL (the Python work; fsync and gRPC's C core run without it)."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy into the venv)")
    out_dir.mkdir(parents=True, exist_ok=True)
    ws = await target.make(writers)
    procs = {}
    cluster = meta.cluster
    try:
        await closed_loop(ws, 1.0)
        cpu0 = {n: cluster.cpu_seconds(n) for n in cluster.nodes}
        for node_id, node in meta.cluster.nodes.items():
            assert node.process is not None
            procs[node_id] = subprocess.Popen(
                [spy, "record", "--gil", "-r", "200", "-d", str(int(seconds)), "-f", "raw",
                 "-o", str(out_dir / f"node-{node_id}.txt"), "-p", str(node.process.pid),
                 *(["--native"] if native else ["--nonblocking"])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run = await closed_loop(ws, seconds)
        run["cpu_per_node"] = {n: (cluster.cpu_seconds(n) - cpu0[n]) / run["wall_s"]
                               for n in cluster.nodes}
    finally:
        await target.close(ws)
    print(f"  profiled run: {run['writes_per_s']:,.0f} writes/s, p50 {run['p50_ms']:.2f} ms, "
          f"CPU per node {run['cpu_per_node']}")
    for proc in procs.values():
        proc.wait(timeout=60)
    out: dict[str, Any] = {"run": run}
    for node_id in procs:
        frames = top_frames(out_dir / f"node-{node_id}.txt")
        cats = categories(out_dir / f"node-{node_id}.txt")
        out[str(node_id)] = {"frames": frames, "categories": cats}
        print(f"\n  node {node_id}: " + ", ".join(f"{k} {v:.1f} %" for k, v in cats.items()))
        print(f"  node {node_id}: top frames by total % (self %)")
        for frame, own, total in frames:
            print(f"    {total:5.1f}  ({own:4.1f})  {frame}")
    return out


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    stops: list[Callable[[], None]] = []
    systems: list[tuple[Target, Probe]] = []
    results: dict[str, Any] = {}
    try:
        meta = MetadataCluster(root / "kraft", CodeCluster(root / "kraft"))
        stops.append(meta.stop)
        endpoint = await meta.start()
        target = await meta.target()
        systems.append((target, kraft_probe(meta.cluster, int(endpoint.rsplit(":", 1)[1]))))
        if args.baseline:
            code = export_tree(args.baseline, root / "baseline-code")
            old = MetadataCluster(root / "kraft-old",
                                  CodeCluster(root / "kraft-old", code_dir=code))
            stops.append(old.stop)
            old_endpoint = await old.start()
            systems.append((await old.target(f"kraft Admin API @{args.baseline[:8]}"),
                            kraft_probe(old.cluster, int(old_endpoint.rsplit(":", 1)[1]))))
        prelude = UVLOOP if args.uvloop else args.prelude
        if prelude:
            fast = MetadataCluster(root / "kraft-prelude",
                                   CodeCluster(root / "kraft-prelude", prelude=prelude))
            stops.append(fast.stop)
            fast_endpoint = await fast.start()
            systems.append((await fast.target(f"kraft Admin API ({prelude})"),
                            kraft_probe(fast.cluster, int(fast_endpoint.rsplit(":", 1)[1]))))
        if not args.no_etcd:
            binary = etcd_mod.binary()
            if binary is None:
                raise SystemExit("etcd not found (apt-get install etcd-server) or --no-etcd")
            etcd = etcd_mod.EtcdCluster(root / "etcd", binary)
            stops.append(etcd.stop_all)
            etcd.start_all()
            leader, _ = await etcd.leader()
            systems.append((grpc_target(etcd, leader), lambda: {"cpu": etcd.cpu_seconds()}))
        if args.floor:
            echo, echo_probe, echo_stop = echo_target()
            stops.append(echo_stop)
            systems.append((echo, echo_probe))
        results["writes"] = await measure(systems, args.writers, args.seconds, args.repeat,
                                          args.warmup)
        if args.profile:
            results["profile"] = await profile(meta, target, args.profile_writers,
                                               args.profile_seconds, Path(args.profile),
                                               args.native)
    finally:
        for stop in reversed(stops):
            stop()
    return results


def run_in_scratch(prefix: str,
                   main: Callable[[Path], Coroutine[Any, Any, dict[str, Any]]]) -> dict[str, Any]:
    """`main(a scratch directory)` in a new event loop, the load average printed before and
    after and kept in the results (`loadavg_at_end`); the directory is removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        results = asyncio.run(main(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results["loadavg_at_end"] = os.getloadavg()
    print(f"# load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.admin_write_bench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", default="1,64",
                        type=lambda t: [int(x) for x in t.split(",") if x])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--baseline", default="", help="a commit to measure beside the tree")
    parser.add_argument("--no-etcd", action="store_true")
    parser.add_argument("--floor", action="store_true",
                        help="also a grpc.aio echo server that does no work (the floor)")
    parser.add_argument("--uvloop", action="store_true",
                        help="also the working tree's controllers on uvloop (pip install uvloop)")
    parser.add_argument("--prelude", default="",
                        help="also the working tree's controllers with this Python code run "
                             "first in each (e.g. 'import gc; gc.disable()')")
    parser.add_argument("--profile", default="", help="directory for py-spy's raw stacks")
    parser.add_argument("--profile-writers", type=int, default=64)
    parser.add_argument("--profile-seconds", type=float, default=10.0)
    parser.add_argument("--native", action="store_true",
                        help="py-spy --native (C frames too; pauses the processes to sample)")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    results = run_in_scratch("kraft-admin-write-bench-", lambda root: run(args, root))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
