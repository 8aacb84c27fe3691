"""Side by side with the peers, in one run on one machine:
`python -m bench.peers [--install] [--parts writes,failover,scale] [--scale 100000,1000000]`.

1. writes     1, 16, 64 closed-loop writers of 100-byte values: this project through its user
              paths, the Admin API (one config change per request) and the leader's append API
              over gRPC; etcd 3 members through its gRPC API (KV/Put from a grpc.aio client:
              the etcd row every ratio and verdict uses) and, labelled, through its JSON
              gateway; PySyncObj 3 nodes (with its defaults, and with a 5 ms tick).
              writes/s, p50, p99, client and server CPU. This project's leader append API
              called inside the benchmark process is measured too, and reported apart: it is
              not a user path and is in no ratio or verdict.
              All systems run at once and take turns under the same load (the machine is
              shared; interleaving keeps each ratio within the same minutes).
2. failover   for every system: kill -9 of the leader, SIGSTOP of the leader (SIGCONT after,
              then wait for a healthy cluster), and graceful handover (this project SIGTERM,
              etcd move-leader, PySyncObj transferLeadership) -> first write acknowledged by a
              new leader (--trials each).
3. scale      N partitions (--scale): kill -9 of this project's active controller -> first
              Admin write a new active controller accepts; against ZooKeeper: a full read of
              the same metadata in Kafka's znode layout by one client, with kazoo (Python) and
              with ZooKeeper's own Java client (bench/peers/java/ZkFullRead.java, compiled
              with javac at run time), read for read interleaved.

--install lets the harness `apt-get install -y etcd-server zookeeper` and
`pip install pysyncobj kazoo` into this environment; without it, a peer that is missing is
skipped with a message saying so. Everything started runs under a temporary directory and is
stopped on the way out (process groups, PR_SET_PDEATHSIG); results go to --json, the tables
to stdout (markdown), the plots to --plots."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.log_bench import filesystem, machine
from bench.peers import etcd as etcd_mod
from bench.peers import etcd_grpc, kraft_side, report, syncobj_peer, zk, zk_java
from bench.peers.failover import handover_trials, kill_trials, stop_trials
from bench.peers.load import Target, Write, interleaved, summary
from bench.quorum_bench import git
from metadata.topics import METADATA_PARTITION_DIR

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


def http_target(peer: Any, name: str, leader: str) -> Target:
    """Writers on a peer's leader, each on its own keep-alive HTTP connection."""
    conns: dict[int, list[Any]] = {}

    async def make(count: int) -> list[Write]:
        pairs = [peer.writer(leader, i) for i in range(count)]
        conns[count] = [c for _, c in pairs]
        return [w for w, _ in pairs]

    async def close(writers: list[Write]) -> None:
        for conn in conns.pop(len(writers)):
            conn.close()

    return Target(name, make, close, peer.cpu_seconds)


async def part_writes(root: Path, args: argparse.Namespace, skip: dict[str, str | None],
                      results: dict[str, Any]) -> None:
    """Every system up at once, then the same load on each in turn (`load.interleaved`)."""
    stops: list[Callable[[], Awaitable[None]]] = []
    targets: list[Target] = []
    try:
        target, stop = await kraft_side.grpc_append_target(root / "w-kraft-raft")
        stops.append(stop)
        targets.append(target)
        meta = kraft_side.MetadataCluster(root / "w-kraft-metadata")
        stops.append(_async(meta.stop))
        await meta.start()
        targets.append(await meta.target())
        if not skip["etcd"]:
            binary = etcd_mod.binary()
            assert binary is not None
            etcd = etcd_mod.EtcdCluster(root / "w-etcd", binary)
            stops.append(_async(etcd.stop_all))
            etcd.start_all()
            leader, _ = await etcd.leader()
            # Its own API, as etcdctl and the Go client use it: the row the ratios use.
            targets.append(etcd_grpc.grpc_target(etcd, leader, report.ETCD_GRPC))
            targets.append(http_target(etcd, report.ETCD_GATEWAY, leader))
        if not skip["pysyncobj"]:
            variants = [("pysyncobj", syncobj_peer.DEFAULT_TICK_S)]
            if args.syncobj_tick > 0:
                variants.append((f"pysyncobj (tick {args.syncobj_tick * 1000:g} ms)",
                                 args.syncobj_tick))
            for name, tick in variants:
                syncobj = syncobj_peer.SyncObjCluster(root / f"w-syncobj-{tick}", tick)
                stops.append(_async(syncobj.stop_all))
                syncobj.start_all()
                leader, _ = await syncobj.leader()
                targets.append(http_target(syncobj, name, leader))
        # Last: its leader runs in this event loop, and the set-up of the others (storage
        # formatting in subprocess.run) would block the loop past its check-quorum timeout.
        target, stop = await kraft_side.in_process_target(root / "w-kraft-inprocess")
        stops.append(stop)
        targets.insert(0, target)
        print(f"  {len(targets)} systems up: {', '.join(t.name for t in targets)}", flush=True)
        results["writes"] = await interleaved(targets, args.writers, args.seconds, args.repeat,
                                              args.warmup)
    finally:
        for stop in reversed(stops):
            await stop()


def _async(fn: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        fn()
    return call


async def part_failover(root: Path, args: argparse.Namespace, skip: dict[str, str | None],
                        results: dict[str, Any]) -> None:
    print("\n## failover: this project", flush=True)
    out = await kraft_side.failover_raft(root / "f-kraft", ["kill", "stop", "term"],
                                         args.trials)
    results["failover"]["kraft"] = {"kill": out["kill"], "stop": out["stop"],
                                    "handover": out["term"]}
    print("\n## failover: etcd", flush=True)
    if skip["etcd"]:
        print(f"  SKIPPED: {skip['etcd']}", flush=True)
    else:
        binary = etcd_mod.binary()
        assert binary is not None
        etcd = etcd_mod.EtcdCluster(root / "f-etcd", binary)
        try:
            etcd.start_all()
            await etcd.leader()
            fo = results["failover"].setdefault("etcd", {})
            fo["kill"] = await kill_trials(etcd, etcd_mod.NAMES, args.trials, "etcd")
            fo["stop"] = await stop_trials(etcd, etcd_mod.NAMES, args.trials, "etcd")

            async def move(leader: str) -> bool:
                target = next(n for n in etcd_mod.NAMES if n != leader)
                return await etcd.move_leader(leader, target)

            fo["handover"] = await handover_trials(etcd, etcd_mod.NAMES, args.trials, "etcd",
                                                   move)
        finally:
            etcd.stop_all()
    print("\n## failover: pysyncobj", flush=True)
    if skip["pysyncobj"]:
        print(f"  SKIPPED: {skip['pysyncobj']}", flush=True)
        return
    syncobj = syncobj_peer.SyncObjCluster(root / "f-syncobj")
    try:
        syncobj.start_all()
        await syncobj.leader()
        fo = results["failover"].setdefault("pysyncobj", {})
        fo["kill"] = await kill_trials(syncobj, syncobj_peer.NAMES, args.trials, "pysyncobj")
        fo["stop"] = await stop_trials(syncobj, syncobj_peer.NAMES, args.trials, "pysyncobj")
        fo["handover"] = await handover_trials(syncobj, syncobj_peer.NAMES, args.trials,
                                               "pysyncobj", syncobj.transfer)
    finally:
        syncobj.stop_all()


def node_footprint(cluster: Any) -> dict[str, dict[str, float]]:
    """Per controller: resident memory (VmRSS) and bytes of metadata log + snapshots."""
    out = {}
    for node_id, node in cluster.nodes.items():
        rss_kib = 0
        if node.process is not None and node.process.poll() is None:
            with open(f"/proc/{node.process.pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        rss_kib = int(line.split()[1])
        directory = node.config_path.parent / f"node-{node_id}" / METADATA_PARTITION_DIR
        size = sum(f.stat().st_size for f in directory.glob("*") if f.is_file())
        out[str(node_id)] = {"rss_mib": rss_kib / 1024, "log_and_snapshots_mib": size / 2**20}
    return out


async def part_kraft_scale(root: Path, args: argparse.Namespace,
                           results: dict[str, Any]) -> None:
    meta = kraft_side.MetadataCluster(root / "s-kraft-metadata")
    brokers: kraft_side.Brokers | None = None
    try:
        await meta.start()
        brokers = kraft_side.Brokers(meta.cluster, meta.cluster_id)
        await brokers.start()
        created = 0
        for size in args.scale:
            print(f"  kraft: creating partitions up to {size:,}", flush=True)
            grown = await meta.grow(size, created)
            grown["nodes"] = node_footprint(meta.cluster)
            created = size
            print(f"    {grown['partitions']:,} partitions, "
                  f"{grown['partitions_per_s']:,.0f} partitions/s", flush=True)
            trials = await meta.failover(args.scale_trials)
            values = [t["accepted_ms"] for t in trials if t["accepted_ms"] is not None]
            results["scale"].setdefault(str(size), {})["kraft"] = {
                "create": grown, "trials": trials, "ms": values, "summary": summary(values)}
    finally:
        if brokers is not None:
            await brokers.close()
        meta.stop()


def part_zookeeper(root: Path, args: argparse.Namespace, results: dict[str, Any]) -> None:
    """Each size: populate, then --zk-reads full reads with kazoo and as many with the Java
    client, alternating (kazoo, Java, kazoo, ...) so both see the same server state."""
    java_skip = zk_java.available()
    classpath = None
    if java_skip is None:
        classpath = zk_java.build(root / "zk-java-build")
    else:
        print(f"  zookeeper Java client: SKIPPED: {java_skip}", flush=True)
        results["machine"]["skipped"]["zookeeper java client"] = java_skip
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
            reads: list[dict[str, Any]] = []
            java_reads: list[dict[str, Any]] = []
            for i in range(args.zk_reads):
                cpu0, zk0 = time.process_time(), server.cpu_seconds()
                read = server.full_read()
                read["client_cpu_s"] = time.process_time() - cpu0
                read["server_cpu_s"] = server.cpu_seconds() - zk0
                reads.append(read)
                print(f"    kazoo full read #{i + 1}: {read['read_s']:.2f} s "
                      f"({read['znodes_per_s']:,.0f} znodes/s, client CPU "
                      f"{read['client_cpu_s']:.1f} s, server CPU {read['server_cpu_s']:.1f} s)",
                      flush=True)
                if classpath is None:
                    continue
                zk0 = server.cpu_seconds()
                jread = zk_java.full_read(classpath, server.port)
                jread["server_cpu_s"] = server.cpu_seconds() - zk0
                if jread["partitions"] != size or jread["with_leader"] != size:
                    raise RuntimeError(f"Java reader saw {jread['partitions']} partitions "
                                       f"({jread['with_leader']} with a leader), not {size}")
                java_reads.append(jread)
                print(f"    Java full read #{i + 1}: {jread['read_ms'] / 1000:.2f} s "
                      f"(JVM process {jread['process_wall_ms'] / 1000:.2f} s, client CPU "
                      f"{jread['client_cpu_s']:.1f} s, server CPU "
                      f"{jread['server_cpu_s']:.1f} s)", flush=True)
            values = [r["read_s"] * 1000 for r in reads]
            entry = results["scale"].setdefault(str(size), {})
            entry["zookeeper"] = {"client": "kazoo", "populate": populated, "reads": reads,
                                  "ms": values, "summary": summary(values)}
            if java_reads:
                jvalues = [r["read_ms"] for r in java_reads]
                entry["zookeeper_java"] = {"client": "ZooKeeper Java client (ZkFullRead)",
                                           "reads": java_reads, "ms": jvalues,
                                           "summary": summary(jvalues)}
    finally:
        server.stop()


async def run(root: Path, args: argparse.Namespace, parts: set[str],
              skip: dict[str, str | None], results: dict[str, Any]) -> None:
    if "writes" in parts:
        print("\n## writes (all systems up, interleaved)", flush=True)
        await part_writes(root, args, skip, results)
    if "failover" in parts:
        await part_failover(root, args, skip, results)
    if "scale" in parts and "kraft" in args.scale_systems:
        print("\n## scale: this project", flush=True)
        await part_kraft_scale(root, args, results)
    if "scale" in parts and "zookeeper" in args.scale_systems:
        print("\n## scale: zookeeper", flush=True)
        if skip["zookeeper"]:
            print(f"  SKIPPED: {skip['zookeeper']}", flush=True)
        else:
            # Synchronous on purpose: the server must be started by the main thread (its
            # PR_SET_PDEATHSIG follows the thread that forked it), and nothing else runs now.
            part_zookeeper(root, args, results)


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The earlier run's results with this run's parts laid over them; this run's machine
    record goes to `later_runs`, and every entry it adds names that run."""
    run_no = len(old.setdefault("later_runs", [])) + 1
    old["later_runs"].append(new["machine"])
    for part in ("writes", "failover", "scale"):
        for key, value in new[part].items():
            if part == "scale":  # per system: a later run may measure only one of them
                entry = old[part].setdefault(key, {})
                for name, system in value.items():
                    system["later_run"] = run_no
                    if name in entry:  # the replaced measurement stays in the file
                        system["replaced"] = entry[name]
                    entry[name] = system
            else:
                old[part][key] = value | {"later_run": run_no} if isinstance(value, dict) \
                    else value
    return old


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
    parser.add_argument("--trials", type=int, default=20,
                        help="failover trials per kind and system (20)")
    parser.add_argument("--scale", type=int_list, default=[100_000],
                        help="partition counts, ascending (100000; add 1000000 for the 1M "
                             "run, which takes about half an hour more)")
    parser.add_argument("--scale-trials", type=int, default=3,
                        help="kill -9 trials of the active controller per size (3)")
    parser.add_argument("--scale-systems", default="kraft,zookeeper",
                        help="comma-separated: kraft, zookeeper: which side the scale part "
                             "measures (default both; e.g. more kraft trials with --merge)")
    parser.add_argument("--zk-reads", type=int, default=3,
                        help="full reads per size with each client, kazoo and Java (3)")
    parser.add_argument("--zk-heap-mb", type=int, default=4096)
    parser.add_argument("--syncobj-tick", type=float, default=TUNED_TICK_S,
                        help="also measure PySyncObj's writes with this tick and append period "
                             "(0.005; 0 to skip)")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "peers.json"))
    parser.add_argument("--merge", action="store_true",
                        help="add this run's parts to the existing --json file (e.g. a later "
                             "1,000,000-partition scale run) instead of replacing it; each "
                             "ratio still comes from one run")
    parser.add_argument("--plots", default=str(ROOT / "docs"),
                        help="directory for bench-peers-*.png ('' for none)")
    args = parser.parse_args(argv)
    parts = {p for p in args.parts.split(",") if p}
    if not parts <= {"writes", "failover", "scale"} or not parts:
        parser.error("--parts takes writes, failover, scale")
    if args.scale != sorted(args.scale) or any(s % zk.PARTITIONS_PER_TOPIC or s <= 0
                                               for s in args.scale):
        parser.error("--scale sizes must be ascending positive multiples of 1000")
    args.scale_systems = {x for x in args.scale_systems.split(",") if x}
    if not args.scale_systems or not args.scale_systems <= {"kraft", "zookeeper"}:
        parser.error("--scale-systems takes kraft, zookeeper")
    if not args.writers or min(args.writers) < 1:
        parser.error("--writers takes positive counts, e.g. 1,16,64")
    for flag in ("repeat", "trials", "scale_trials", "zk_reads", "zk_heap_mb"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.seconds <= 0 or args.warmup < 0 or args.syncobj_tick < 0:
        parser.error("--seconds must be positive; --warmup and --syncobj-tick not negative")

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
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "git_commit": git("rev-parse", "HEAD"),
        # ":(top)": git() runs in bench/, and these paths are the repository's.
        "uncommitted_changes_in_product": git("status", "--porcelain", "--", ":(top)kraft",
                                              ":(top)metadata", ":(top)broker",
                                              ":(top)server"),
        "command": " ".join(["python -m bench.peers", *(argv if argv is not None
                                                        else sys.argv[1:])]),
        "versions": versions(skip), "record_bytes": 100, "voters": 3,
        "writers": args.writers, "seconds_per_run": args.seconds, "repeat": args.repeat,
        "trials": args.trials, "scale": args.scale,
        "scale_systems": sorted(args.scale_systems), "skipped": {k: v for k, v in skip.items()
                                                               if v},
    }
    print(f"# machine: {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}; "
          f"load average {' '.join(f'{x:.2f}' for x in info['loadavg_at_start'])}")
    print(f"# versions: {info['versions']}")
    results: dict[str, Any] = {"machine": info, "writes": {}, "failover": {}, "scale": {}}
    started = time.perf_counter()
    status = 0
    # SIGTERM ends the run like Ctrl-C: cleanup runs; children would die with us regardless.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
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
        if args.merge and Path(args.json).exists():
            results = merge(json.loads(Path(args.json).read_text()), results)
        report.write(results, args.json, args.plots)
    return status


if __name__ == "__main__":
    sys.exit(main())
