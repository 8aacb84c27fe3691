"""FetchSnapshot transfer rate between real processes on loopback:
`python -m bench.snapshot_transfer_bench [--mib 200] [--trials 3] [--json PATH]`.

Two voters start with the same snapshot of `--mib` MiB (their logs begin at its end offset) and
elect a leader; the third voter starts empty, is sent to the snapshot by its first Fetch and
fetches it in 8 MiB FetchSnapshot chunks, verifies, fsyncs and installs it. The transfer time
is measured between the two lines the follower logs (sent to the snapshot → installed), so
process start-up is not counted. Each trial wipes the third node and starts it again.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import grpc

from bench._cluster import Cluster, ClusterError
from bench.log_bench import machine
from harness.cluster import wait_for
from kraft.log.base import OffsetAndEpoch
from kraft.log.snapshots import FileSnapshotStore
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from metadata.topics import METADATA_PARTITION_DIR

RECORD_BYTES = 100
_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"


def build_snapshot(directory: Path, mib: int) -> tuple[OffsetAndEpoch, int]:
    records = mib * 1024 * 1024 // RECORD_BYTES
    snapshot_id = OffsetAndEpoch(records, 1)
    store = FileSnapshotStore(directory)
    builder = store.builder(snapshot_id, int(time.time() * 1000))
    chunk = [bytes([i % 251]) * RECORD_BYTES for i in range(1000)]
    for _ in range(records // len(chunk)):
        builder.append(chunk)
    info = builder.freeze()
    return snapshot_id, info.size


def status(cluster: Cluster, node_id: int) -> pb.NodeStatusResponse | None:
    with grpc.insecure_channel(cluster.nodes[node_id].endpoint) as channel:
        try:
            return rpc.QuorumStub(channel).NodeStatus(pb.NodeStatusRequest(), timeout=1)
        except grpc.RpcError:
            return None


def _stamp(log_text: str, pattern: str) -> datetime:
    match = re.search(_STAMP + r".*" + pattern, log_text)
    if match is None:
        raise ClusterError(f"no log line matching {pattern!r}")
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")


def run(mib: int, trials: int) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="kraft-snapshot-transfer-"))
    cluster = Cluster(root, 3, {"internal.test.hooks.enable": "true"})
    try:
        cluster.format()
        started = time.perf_counter()
        snapshot_id, size = build_snapshot(root / "node-1" / METADATA_PARTITION_DIR, mib)
        build_s = time.perf_counter() - started
        source = root / "node-1" / METADATA_PARTITION_DIR
        (root / "node-2" / METADATA_PARTITION_DIR).mkdir(parents=True, exist_ok=True)
        for path in source.glob("*.checkpoint"):
            shutil.copy(path, root / "node-2" / METADATA_PARTITION_DIR / path.name)
        cluster.start(1)
        cluster.start(2)

        def leader() -> bool:
            statuses = [status(cluster, n) for n in (1, 2)]
            return any(s is not None and s.state == "Leader" for s in statuses)

        wait_for(leader, 60, "a leader among the nodes holding the snapshot")
        seconds: list[float] = []
        for _ in range(trials):
            log_path = cluster.nodes[3].log_path
            log_path.unlink(missing_ok=True)
            cluster.start(3)
            wait_for(lambda: (s := status(cluster, 3)) is not None
                 and s.log_end_offset >= snapshot_id.offset, 600, "the snapshot to arrive")
            text = log_path.read_text(errors="replace")
            sent = _stamp(text, "sends this node to snapshot")
            installed = _stamp(text, "installed snapshot")
            seconds.append((installed - sent).total_seconds())
            cluster.signal(3, 9)
            cluster.wait_exit(3, 10)
            partition = root / "node-3" / METADATA_PARTITION_DIR
            for path in partition.iterdir():
                if path.name not in ("quorum-state",):
                    path.unlink()
        rates = [size / 1e6 / s for s in seconds]
        return {
            "machine": machine(),
            "snapshot_bytes": size,
            "snapshot_records": snapshot_id.offset,
            "build_s": build_s,
            "transfer_s": seconds,
            "mb_per_s": {"median": statistics.median(rates), "min": min(rates),
                         "max": max(rates)},
        }
    finally:
        cluster.kill_all()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot_transfer_bench",
                                     description=__doc__)
    parser.add_argument("--mib", type=int, default=200, help="snapshot size in MiB")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    result = run(args.mib, args.trials)
    rate = result["mb_per_s"]
    print(f"snapshot {result['snapshot_bytes'] / 1e6:.0f} MB ({result['snapshot_records']} "
          f"records), built in {result['build_s']:.1f} s")
    print(f"FetchSnapshot transfer: median {rate['median']:.0f} MB/s "  # type: ignore[index]
          f"(min {rate['min']:.0f}, max {rate['max']:.0f}) over "  # type: ignore[index]
          f"{len(result['transfer_s'])} trials; seconds: "  # type: ignore[arg-type]
          + ", ".join(f"{s:.2f}" for s in result["transfer_s"]))  # type: ignore[union-attr]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
