"""kraft-snapshot on what a real cluster wrote: three controllers with three brokers take
snapshots while topics and configs are written; the cluster stops; the CLI, run as a process on
a node's metadata.log.dir, verifies, dumps, shows the image, travels in time (checked against a
MetadataLoader over a copy of the log stopped at the same offset) and diffs; and on damaged
copies of the files it answers with one line naming the file and byte position."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

from harness.cluster import PYTHON, ProcessCluster, run_cli, wait_for
from kraft.log.segmented import SegmentedLog, list_segments
from kraft.log.snapshots import parse_snapshot_file_name
from metadata.image import MetadataImage
from metadata.loader import MetadataLoader
from metadata.topics import METADATA_PARTITION_DIR
from server.admin_client import AdminClient
from snapshots import tree
from snapshots.diff import as_loaded
from tests.integration.brokers import TestBroker
from tests.integration.test_snapshots import set_default_partitions

WAIT_S = 20


def kraft_snapshot(*args: object) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([PYTHON, "-m", "snapshots.cli", *map(str, args)], capture_output=True,
                         text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def admin(cluster: ProcessCluster, *args: str) -> None:
    endpoint = next(n.endpoint for n in cluster.nodes.values() if n.alive)
    out = run_cli("server.admin_cli", "--bootstrap-server", endpoint, *args)
    assert out.returncode == 0, out.stderr


def loader_image(partition_dir: Path, scratch: Path, offset: int) -> MetadataImage:
    """A node stopped at `offset`: a loader over a copy of the log (opening a SegmentedLog
    may cut a torn tail, so never the original)."""
    copy = scratch / f"log-{offset}"
    shutil.copytree(partition_dir, copy)
    log = SegmentedLog(copy)
    try:
        return MetadataLoader(off_loop_snapshots=False).catch_up(log, offset)
    finally:
        log.close()


def test_kraft_snapshot_on_a_real_clusters_files(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(**{
        "internal.test.hooks.enable": "false",
        "metadata.log.max.record.bytes.between.snapshots": "600",
        "metadata.log.segment.min.bytes": "2048",
        "metadata.log.segment.bytes": "2048",
    })
    cluster_id = cluster.format()
    cluster.start_all()
    wait_for(cluster.leader, WAIT_S, "an active controller")
    endpoints = [n.endpoint for n in cluster.nodes.values()]

    def metadata_offset() -> int:
        return max((s.high_watermark for s in cluster.statuses().values()), default=0)

    brokers = [TestBroker(b, cluster_id, endpoints, metadata_offset) for b in (1, 2, 3)]
    for broker in brokers:
        broker.start()
    try:
        def unfenced() -> bool:
            out = run_cli("server.admin_cli", "--bootstrap-server", endpoints[0],
                          "brokers", "list", "--json")
            return out.returncode == 0 and sum(
                not b["fenced"] for b in json.loads(out.stdout)) == 3
        wait_for(unfenced, WAIT_S, "three unfenced brokers")
        admin(cluster, "topics", "create", "--topic", "orders", "--partitions", "6",
              "--replication-factor", "3")
        # Enough records for several snapshots: 29 config changes over the Admin API (a CLI
        # process each would cost a second apiece), the 30th through the CLI.
        client = AdminClient(endpoints)
        for value in range(1, 30):
            set_default_partitions(client, value)
        admin(cluster, "configs", "alter", "--entity-type", "brokers", "--entity-default",
              "--add-config", "num.partitions=30")
        admin(cluster, "topics", "create", "--topic", "payments", "--partitions", "2",
              "--replication-factor", "2")
        node_dir = cluster.root / "node-1"
        partition_dir = node_dir / METADATA_PARTITION_DIR
        wait_for(lambda: len(list(partition_dir.glob("*.checkpoint"))) >= 2, WAIT_S,
                 "node 1 to write snapshots")
    finally:
        for broker in brokers:
            broker.stop()
    for node_id in cluster.nodes:  # SIGTERM: a clean stop, no torn tail
        cluster.signal(node_id, signal.SIGTERM)
    for node_id in cluster.nodes:
        cluster.wait_exit(node_id, 15)

    snapshots = sorted(parse_snapshot_file_name(p.name).offset  # type: ignore[union-attr]
                       for p in partition_dir.glob("*.checkpoint"))
    segments = list_segments(partition_dir)
    assert len(segments) >= 2 and segments[0][0] == 0, "the log was not cleaned"

    # verify: everything the node wrote is intact.
    out = kraft_snapshot("verify", node_dir, "--json")
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["ok"], out.stdout
    assert {f["kind"] for f in report["files"]} == {"snapshot", "segment"}

    # dump: every batch of a real snapshot and a real segment.
    snapshot_path = sorted(partition_dir.glob("*.checkpoint"))[-1]
    out = kraft_snapshot("dump", snapshot_path)
    assert out.returncode == 0 and " SnapshotHeader {" in out.stdout
    assert '"type":"PARTITION_RECORD"' in out.stdout
    out = kraft_snapshot("dump", segments[0][1], "--json")
    batches = [json.loads(line) for line in out.stdout.splitlines()][1:]
    assert out.returncode == 0 and batches[0]["records"][0]["controlType"] == "LeaderChange"

    # The latest image, and time travel: the same image as a loader stopped at each offset.
    log = SegmentedLog(shutil.copytree(partition_dir, tmp_path / "end"))
    end = log.end_offset
    log.close()
    out = kraft_snapshot("ls", node_dir, "/topics")
    assert out.stdout.split() == ["orders", "payments"]
    out = kraft_snapshot("cat", node_dir, "/configs/BROKER/num.partitions")
    assert out.stdout == "30\n"
    for offset in sorted({1, snapshots[0] - 1, snapshots[0], snapshots[0] + 3, snapshots[-1],
                          end - 2, end}):
        out = kraft_snapshot("tree", node_dir, "--at-offset", offset, "--json")
        assert out.returncode == 0, out.stderr
        expected = loader_image(partition_dir, tmp_path, offset)
        used = [s for s in snapshots if s <= offset]
        if used:
            expected = as_loaded(expected, used[-1])
        shown = json.loads(out.stdout)
        provenance = shown.pop("provenance")
        want = tree.to_json(tree.image_tree(expected))
        want.pop("provenance")
        assert shown == want, offset
        assert provenance["offset"] == max([expected.provenance.offset]
                                           + [s - 1 for s in used[-1:]]), offset

    # diff: the payments topic and the config changes between two offsets.
    before_payments = snapshots[0]
    out = kraft_snapshot("diff", node_dir, "--from", before_payments, "--to", end, "--json")
    changes = {c["path"]: c for c in json.loads(out.stdout)["changes"]}
    assert out.returncode == 0 and changes["/topics/payments"]["change"] == "added"

    # Damaged copies: one line with the path and the byte position, a non-zero exit.
    data = snapshot_path.read_bytes()
    second = int.from_bytes(data[:4], "big") + 8
    cases = {
        "flipped": (data[: second + 60] + bytes([data[second + 60] ^ 0x10])
                    + data[second + 61:], second, "CRC32C mismatch"),
        "truncated": (data[: len(data) - 7], None, ""),
        "zero": (b"", 0, "empty"),
        "magic": (data[: second + 8] + b"\x09" + data[second + 9:], second, "unknown magic"),
    }
    for name, (damaged, position, reason) in cases.items():
        copy = tmp_path / name / snapshot_path.name
        copy.parent.mkdir()
        copy.write_bytes(damaged)
        out = kraft_snapshot("cat", copy, "/provenance")
        assert out.returncode == 3 and out.stderr.count("\n") == 1, (name, out.stderr)
        assert out.stderr.startswith(f"kraft-snapshot: {copy}: byte "), out.stderr
        if position is not None:
            assert f": byte {position}: {reason}" in out.stderr, out.stderr
        out = kraft_snapshot("verify", copy)
        assert out.returncode == 1 and f"PROBLEM {copy}: byte " in out.stdout, name
    # A flipped byte in the first segment of a copied directory: reading up to an offset
    # the damaged batch holds fails with its position; verify names it.
    copy = tmp_path / "damaged-log"
    shutil.copytree(node_dir, copy)
    first = copy / METADATA_PARTITION_DIR / Path(segments[0][1]).name
    data = bytearray(first.read_bytes())
    second = int.from_bytes(data[:4], "big") + 8
    data[second + 45] ^= 0xFF
    first.write_bytes(bytes(data))
    out = kraft_snapshot("ls", copy, "--at-offset", 3)
    assert out.returncode == 3 and f"{first}: byte {second}: CRC32C mismatch" in out.stderr
    out = kraft_snapshot("verify", copy)
    assert out.returncode == 1 and f"PROBLEM {first}: byte {second}: CRC32C" in out.stdout
