"""Side by side with the peers, in one run on one machine:
`python -m bench.peers [--install] [--parts writes,failover,scale] [--scale 100000,1000000]`.

1. writes     1, 16, 64 closed-loop writers of 100-byte values: this project through the
              leader's append API (in process, and over gRPC) and through the Admin API (one
              config change per request); etcd 3 members (v3 put over the JSON gateway);
              PySyncObj 3 nodes (with its defaults, and with a 5 ms tick). writes/s, p50,
              p99, client and server CPU.
2. failover   kill -9 of the leader -> first successful write (--trials each), and graceful
              handover: this project SIGTERM, etcd move-leader, PySyncObj transferLeadership.
3. scale      N partitions (--scale): kill -9 of this project's active controller -> first
              Admin write a new active controller accepts; against ZooKeeper: a full read of
              the same metadata in Kafka's znode layout by one client.

--install lets the harness `apt-get install -y etcd-server zookeeper` and
`pip install pysyncobj kazoo` into this environment; without it, a peer that is missing is
skipped with a message saying so. Everything started runs under a temporary directory and is
stopped on the way out (process groups, PR_SET_PDEATHSIG); results go to --json, the tables
to stdout (markdown), the plots to --plots."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.log_bench import filesystem, machine
from bench.peers import etcd as etcd_mod
from bench.peers import kraft_side, report, syncobj_peer, zk
from bench.peers.failover import handover_trials, kill_trials
from bench.peers.load import measure_writers, summary
from bench.quorum_bench import git

ROOT = Path(__file__).resolve().parents[2]
TUNED_TICK_S = 0.005


def install() -> None:
    """Install the peers (only when asked): Debian packages and the venv's Python packages."""
    if shutil.which("apt-get") is None:
        print("install: apt-get not found; etcd and ZooKeeper must be installed by hand")
    else:
        apt = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "etcd-server",
               "zookeeper"]
        if os.geteuid() != 0:
            apt = ["sudo", "-n", *apt] if shutil.which("sudo") else apt
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(apt, env=env).returncode != 0:
            subprocess.run([*apt[:apt.index("install")], "update", "-q"], env=env)
            if subprocess.run(apt, env=env).returncode != 0:
                print("install: apt-get install etcd-server zookeeper failed (see above)")
    pip = [sys.executable, "-m", "pip", "install", "-q", "pysyncobj", "kazoo"]
    if subprocess.run(pip).returncode != 0:
        print("install: pip install pysyncobj kazoo failed (see above)")


def peers_available() -> dict[str, str | None]:
    """For each peer: None if it can run here, else why not."""
    out: dict[str, str | None] = {}
    etcd = etcd_mod.binary()
    out["etcd"] = None if etcd else "etcd not found (apt-get install etcd-server)"
    out["pysyncobj"] = None if syncobj_peer.available() else \
        "pysyncobj is not installed in this environment (pip install pysyncobj)"
    reason = zk.available()
    if reason is None and shutil.which("java") is None:
        reason = "java not found (ZooKeeper needs a JRE)"
    out["zookeeper"] = reason
    return out


def versions(skip: dict[str, str | None]) -> dict[str, str]:
    out = {}
    binary = etcd_mod.binary()
    if binary:
        out["etcd"] = etcd_mod.version(binary)
    if not skip["pysyncobj"]:
        out["pysyncobj"] = str(syncobj_peer.available())
    if not skip["zookeeper"]:
        dpkg = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "zookeeper"],
                              capture_output=True, text=True)
        out["zookeeper"] = dpkg.stdout.strip() or "unknown"
        from importlib import metadata
        out["kazoo"] = metadata.version("kazoo")
    return out


# -- parts ------------------------------------------------------------------------------------


async def http_peer_writes(peer: Any, label: str, args: argparse.Namespace
                           ) -> list[dict[str, Any]]:
    leader, _ = await peer.leader()
    conns: dict[int, list[Any]] = {}

    async def make(count: int) -> list[Any]:
        pairs = [peer.writer(leader, i) for i in range(count)]
        conns[count] = [c for _, c in pairs]
        return [w for w, _ in pairs]

    async def close(writers: list[Any]) -> None:
        for conn in conns.pop(len(writers)):
            conn.close()

    return await measure_writers(make, close, args.writers, args.seconds, args.repeat,
                                 args.warmup, label, peer.cpu_seconds)


async def part_etcd(root: Path, args: argparse.Namespace, parts: set[str],
                    results: dict[str, Any]) -> None:
    binary = etcd_mod.binary()
    assert binary is not None
    cluster = etcd_mod.EtcdCluster(root / "etcd", binary)
    try:
        cluster.start_all()
        await cluster.leader()
        if "writes" in parts:
            results["writes"]["etcd"] = await http_peer_writes(cluster, "etcd", args)
        if "failover" in parts:
            fo = results["failover"].setdefault("etcd", {})
            fo["kill"] = await kill_trials(cluster, etcd_mod.NAMES, args.trials, "etcd")

            async def move(leader: str) -> bool:
                target = next(n for n in etcd_mod.NAMES if n != leader)
                return await cluster.move_leader(leader, target)

            fo["handover"] = await handover_trials(cluster, etcd_mod.NAMES, args.trials,
                                                   "etcd", move)
    finally:
        cluster.stop_all()


async def part_syncobj(root: Path, args: argparse.Namespace, parts: set[str],
                       results: dict[str, Any]) -> None:
    variants = [("pysyncobj", syncobj_peer.DEFAULT_TICK_S)]
    if args.syncobj_tick > 0 and "writes" in parts:
        variants.append((f"pysyncobj (tick {args.syncobj_tick * 1000:g} ms)",
                         args.syncobj_tick))
    for name, tick in variants:
        cluster = syncobj_peer.SyncObjCluster(root / f"syncobj-{tick}", tick)
        try:
            cluster.start_all()
            await cluster.leader()
            if "writes" in parts:
                results["writes"][name] = await http_peer_writes(cluster, name, args)
            if "failover" in parts and tick == syncobj_peer.DEFAULT_TICK_S:
                fo = results["failover"].setdefault("pysyncobj", {})
                fo["kill"] = await kill_trials(cluster, syncobj_peer.NAMES, args.trials,
                                               "pysyncobj")
                fo["handover"] = await handover_trials(cluster, syncobj_peer.NAMES,
                                                       args.trials, "pysyncobj",
                                                       cluster.transfer)
        finally:
            cluster.stop_all()


async def part_kraft(root: Path, args: argparse.Namespace, parts: set[str],
                     results: dict[str, Any]) -> None:
    if "writes" in parts:
        results["writes"]["kraft append (in process)"] = await kraft_side.writes_in_process(
            root / "kraft-inprocess", args.writers, args.seconds, args.repeat, args.warmup)
    kinds = ["kill", "term"] if "failover" in parts else []
    counts = args.writers if "writes" in parts else []
    if kinds or counts:
        out = await kraft_side.failover_raft(root / "kraft-raft", kinds, args.trials, counts,
                                             args.seconds, args.repeat, args.warmup)
        if counts:
            results["writes"]["kraft append (gRPC)"] = out["writes_grpc"]
        if kinds:
            results["failover"]["kraft"] = {"kill": out["kill"], "handover": out["term"]}
    if "writes" in parts or "scale" in parts:
        meta = kraft_side.MetadataCluster(root / "kraft-metadata")
        try:
            await meta.start()
            if "writes" in parts:
                results["writes"]["kraft Admin API"] = await meta.writes(
                    args.writers, args.seconds, args.repeat, args.warmup)
            if "scale" in parts:
                created = 0
                for size in args.scale:
                    print(f"  kraft: creating partitions up to {size:,}", flush=True)
                    grown = await meta.grow(size, created)
                    created = size
                    print(f"    {grown['partitions']:,} partitions, "
                          f"{grown['partitions_per_s']:,.0f} partitions/s", flush=True)
                    trials = await meta.failover(args.scale_trials)
                    values = [t["accepted_ms"] for t in trials if t["accepted_ms"] is not None]
                    results["scale"].setdefault(str(size), {})["kraft"] = {
                        "create": grown, "trials": trials, "ms": values,
                        "summary": summary(values)}
        finally:
            meta.stop()


def part_zookeeper(root: Path, args: argparse.Namespace, results: dict[str, Any]) -> None:
    server = zk.ZooKeeper(root / "zookeeper", heap_mb=args.zk_heap_mb)
    try:
        server.start()
        server.wait_ready()
        created = 0
        for size in args.scale:
            print(f"  zookeeper: creating znodes for {size:,} partitions", flush=True)
            populated = server.populate(size, created)
            created = size
            print(f"    {populated['znodes_per_s']:,.0f} znodes/s", flush=True)
            reads = []
            for i in range(args.zk_reads):
                cpu0, zk0 = time.process_time(), server.cpu_seconds()
                read = server.full_read()
                read["client_cpu_s"] = time.process_time() - cpu0
                read["server_cpu_s"] = server.cpu_seconds() - zk0
                reads.append(read)
                print(f"    full read #{i + 1}: {read['read_s']:.2f} s "
                      f"({read['znodes_per_s']:,.0f} znodes/s, client CPU "
                      f"{read['client_cpu_s']:.1f} s, server CPU {read['server_cpu_s']:.1f} s)",
                      flush=True)
            values = [r["read_s"] * 1000 for r in reads]
            results["scale"].setdefault(str(size), {})["zookeeper"] = {
                "populate": populated, "reads": reads, "ms": values, "summary": summary(values)}
    finally:
        server.stop()


async def run(root: Path, args: argparse.Namespace, parts: set[str],
              skip: dict[str, str | None], results: dict[str, Any]) -> None:
    if parts & {"writes", "failover", "scale"}:
        print("\n## this project", flush=True)
        await part_kraft(root, args, parts, results)
    if parts & {"writes", "failover"}:
        for name, step in (("etcd", part_etcd), ("pysyncobj", part_syncobj)):
            print(f"\n## {name}", flush=True)
            if skip[name]:
                print(f"  SKIPPED: {skip[name]}", flush=True)
                continue
            await step(root, args, parts, results)
    if "scale" in parts:
        print("\n## zookeeper", flush=True)
        if skip["zookeeper"]:
            print(f"  SKIPPED: {skip['zookeeper']}", flush=True)
        else:
            # Synchronous on purpose: the server must be started by the main thread (its
            # PR_SET_PDEATHSIG follows the thread that forked it), and nothing else runs now.
            part_zookeeper(root, args, results)


def int_list(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="writes,failover,scale",
                        help="comma-separated: writes, failover, scale (default: all)")
    parser.add_argument("--install", action="store_true",
                        help="apt-get install etcd-server zookeeper; pip install pysyncobj kazoo")
    parser.add_argument("--writers", type=int_list, default=[1, 16, 64])
    parser.add_argument("--seconds", type=float, default=3.0, help="per write run (3)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per writer count (3)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds (1)")
    parser.add_argument("--trials", type=int, default=20, help="failover trials per kind (20)")
    parser.add_argument("--scale", type=int_list, default=[100_000],
                        help="partition counts, ascending (100000; add 1000000 for the 1M "
                             "run, which takes about half an hour more)")
    parser.add_argument("--scale-trials", type=int, default=3,
                        help="kill -9 trials of the active controller per size (3)")
    parser.add_argument("--zk-reads", type=int, default=3, help="full reads per size (3)")
    parser.add_argument("--zk-heap-mb", type=int, default=4096)
    parser.add_argument("--syncobj-tick", type=float, default=TUNED_TICK_S,
                        help="also measure PySyncObj's writes with this tick and append period "
                             "(0.005; 0 to skip)")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "peers.json"))
    parser.add_argument("--plots", default=str(ROOT / "docs"),
                        help="directory for bench-peers-*.png ('' for none)")
    args = parser.parse_args(argv)
    parts = {p for p in args.parts.split(",") if p}
    if not parts <= {"writes", "failover", "scale"} or not parts:
        parser.error("--parts takes writes, failover, scale")
    if args.scale != sorted(args.scale) or any(s % zk.PARTITIONS_PER_TOPIC for s in args.scale):
        parser.error("--scale sizes must be ascending multiples of 1000")

    if args.install:
        install()
    skip = peers_available()
    for name, reason in skip.items():
        if reason:
            print(f"# {name}: SKIPPED: {reason}" + ("" if args.install else
                                                    " (or run with --install)"))
    root = Path(tempfile.mkdtemp(prefix="kraft-peers-bench-"))
    info = machine() | {
        "filesystem": filesystem(str(root)), "loadavg_at_start": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "git_commit": git("rev-parse", "HEAD"),
        "uncommitted_changes_in_product": git("status", "--porcelain", "--", "kraft",
                                              "metadata", "broker"),
        "command": " ".join(["python -m bench.peers", *(argv if argv is not None
                                                        else sys.argv[1:])]),
        "versions": versions(skip), "record_bytes": 100, "voters": 3,
        "writers": args.writers, "seconds_per_run": args.seconds, "repeat": args.repeat,
        "trials": args.trials, "scale": args.scale, "skipped": {k: v for k, v in skip.items()
                                                               if v},
    }
    print(f"# machine: {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}; "
          f"load average {' '.join(f'{x:.2f}' for x in info['loadavg_at_start'])}")
    print(f"# versions: {info['versions']}")
    results: dict[str, Any] = {"machine": info, "writes": {}, "failover": {}, "scale": {}}
    started = time.perf_counter()
    status = 0
    try:
        asyncio.run(run(root, args, parts, skip, results))
    except KeyboardInterrupt:
        print("\ninterrupted; every process started was stopped", file=sys.stderr)
        status = 130
    finally:
        shutil.rmtree(root, ignore_errors=True)
    info["loadavg_at_end"] = os.getloadavg()
    info["duration_s"] = time.perf_counter() - started
    if status == 0:
        report.write(results, args.json, args.plots)
    return status


if __name__ == "__main__":
    sys.exit(main())
