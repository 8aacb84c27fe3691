"""The partition-log part of the audit (audit/partition_source.py, audit/partition_checks.py)
on small synthetic broker log dirs: three nodes that are controllers and brokers at once,
each with a metadata log (tests/audit/small_log.py's writer) and the partition `events-0` as
real segment files of Kafka record batches v2 (broker/records.py's `build_batch`, stamped with
base offset and leader epoch), a leader-epoch-checkpoint, partition.metadata and the log dir's
replication-offset-checkpoint. One fault per test."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from audit import cli
from audit.findings import VIOLATION, WARNING
from audit.job import run_audit
from audit.layout import discover
from audit.partition_checks import run_partition_audit
from audit.partition_source import discover_replicas, scan_segment
from audit.txn_checks import read_index, walk_replica
from broker.records import build_batch
from metadata.records import (
    BrokerRegistrationChangeRecord,
    FencingChange,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from tests.audit.small_log import NODES, Spec, leader_change, rec, write_node

EVENTS = "AAAAAAAAAAAAAAAAAAAAHA"
INCARNATIONS = {1: "AAAAAAAAAAAAAAAAAAAAIA", 2: "AAAAAAAAAAAAAAAAAAAAJA",
                3: "AAAAAAAAAAAAAAAAAAAAKA"}
# A partition log: (base offset, leader epoch, values) per batch.
Log = list[tuple[int, int, list[bytes]]]


def metadata(unclean: bool) -> list[Spec]:
    """Brokers 1-3 registered and unfenced, `events` with one partition on all three led by 1;
    then broker 2 leads in epoch 1: after the ISR shrank to [1] (unclean, RECOVERING) or, with
    `unclean` false, from the full ISR."""
    isr = (1,) if unclean else NODES
    change = (PartitionChangeRecord(0, EVENTS, isr=(2,), leader=2, leader_recovery_state=1)
              if unclean else PartitionChangeRecord(0, EVENTS, leader=2))
    return [
        Spec(1, leader_change(1), control=True),
        Spec(1, rec(*(RegisterBrokerRecord(b, INCARNATIONS[b], 10 + b, fenced=True)
                      for b in NODES))),
        Spec(1, rec(*(BrokerRegistrationChangeRecord(b, 10 + b, FencingChange.UNFENCE)
                      for b in NODES))),
        Spec(1, rec(TopicRecord("events", EVENTS),
                    PartitionRecord(0, EVENTS, NODES, NODES, leader=1))),
        # A producer id block (api key 15): the JVM reader knows it (no undecodable-record).
        Spec(1, rec(ProducerIdsRecord(1, 11, 1000), PartitionChangeRecord(0, EVENTS, isr=isr))),
        Spec(1, rec(change)),
    ]


def shared(n: int = 5, epoch: int = 0) -> Log:
    """`n` batches of two records each from offset 0, the same on every replica."""
    return [(2 * i, epoch, [f"r{2 * i}".encode(), f"r{2 * i + 1}".encode()]) for i in range(n)]


def write_partition(node_dir: Path, log: Log, hw: int, topic: str = "events",
                    partition: int = 0, segment_batches: int = 3) -> Path:
    """The replica's directory: segments of `segment_batches` batches each, its epoch
    checkpoint and partition.metadata; the log dir's replication-offset-checkpoint."""
    directory = node_dir / f"{topic}-{partition}"
    directory.mkdir(parents=True)
    for start in range(0, len(log), segment_batches):
        chunk = log[start:start + segment_batches]
        data = b"".join(build_batch(values, base_offset=base, partition_leader_epoch=epoch,
                                    base_timestamp=1_700_000_000_000 + base)
                        for base, epoch, values in chunk)
        (directory / f"{chunk[0][0]:020d}.log").write_bytes(data)
    starts: dict[int, int] = {}
    for base, epoch, _ in log:
        starts.setdefault(epoch, base)
    (directory / "leader-epoch-checkpoint").write_text(
        f"0\n{len(starts)}\n" + "".join(f"{e} {o}\n" for e, o in starts.items()))
    (directory / "partition.metadata").write_text(f"version: 0\ntopic_id: {EVENTS}\n")
    (node_dir / "replication-offset-checkpoint").write_text(f"0\n1\n{topic} {partition} {hw}\n")
    return directory


def cluster(root: Path, logs: dict[int, tuple[Log, int]], unclean: bool = False) -> list[str]:
    """Node dirs with the metadata log and `events-0` as given ({node: (log, hw)})."""
    for node in NODES:
        write_node(root, node, metadata(unclean))
        write_partition(root / f"node-{node}", *logs[node])
    return [os.fspath(root / f"node-{n}") for n in NODES]


def audit(spark, dirs: list[str]):  # type: ignore[no-untyped-def]
    return run_partition_audit(spark, list(zip(NODES, dirs, strict=True)), None)


def test_agreeing_replicas_have_no_finding_and_the_source_has_a_row_per_batch(
        spark, tmp_path: Path) -> None:
    dirs = cluster(tmp_path, {1: (shared(5), 10), 2: (shared(5), 10), 3: (shared(4), 8)})
    result = audit(spark, dirs)
    assert result is not None and result.findings == [] and result.cuts == []
    assert result.batches == 14
    assert [(r.node_id, r.start, r.end, r.hw) for r in result.replicas] == [
        (1, 0, 10, 10), (2, 0, 10, 10), (3, 0, 8, 8)]
    rows = spark.read.format("kraft-partitions").load(dirs).where("node_id = 2").orderBy(
        "base_offset").collect()
    assert [(r.base_offset, r.last_offset, r.leader_epoch, r.record_count) for r in rows] == [
        (b, b + 1, 0, 2) for b in range(0, 10, 2)]
    assert rows[0].topic == "events" and rows[0].partition == 0 and rows[0].topic_id == EVENTS
    assert rows[3].position == 0 and rows[3].file.endswith("events-0/00000000000000000006.log")
    assert len({r.digest for r in rows}) == 5 and all(r.error is None for r in rows)
    replicas = spark.read.format("kraft-partitions").option("table", "replicas").load(
        dirs).orderBy("node_id").collect()
    assert [(r.node_id, r.hw, r.segments) for r in replicas] == [(1, 10, 2), (2, 10, 2),
                                                                 (3, 8, 2)]


def test_a_divergence_below_both_high_watermarks_is_a_violation(spark, tmp_path: Path) -> None:
    other = shared(5)
    other[3] = (6, 0, [b"x6", b"x7"])  # same offsets and epoch, other records
    dirs = cluster(tmp_path, {1: (shared(5), 10), 2: (other, 10), 3: (shared(5), 6)})
    result = audit(spark, dirs)
    hits = [f for f in result.findings if f.check == "partition-divergence"]
    # Node 3's HW (6) is below the difference: only the pair 1-2 compares offset 6.
    assert [(f.severity, f.node_id, f.offset) for f in hits] == [(VIOLATION, 1, 6)]
    assert "events-0: node 1 and node 2 differ at offset 6" in hits[0].detail


def test_a_leader_epoch_going_back_is_a_violation(spark, tmp_path: Path) -> None:
    log = [(0, 0, [b"a"]), (1, 2, [b"b"]), (2, 1, [b"c"]), (3, 2, [b"d"])]
    dirs = cluster(tmp_path, {n: (log, 4) for n in NODES})
    result = audit(spark, dirs)
    assert [(f.check, f.node_id, f.offset) for f in result.findings] == [
        ("partition-epoch-decrease", n, 2) for n in NODES]
    assert "leader epoch 1 at offset 2 after epoch 2 at offset 1" in result.findings[0].detail


def test_a_corrupt_batch_is_named_with_its_file_and_byte(spark, tmp_path: Path) -> None:
    dirs = cluster(tmp_path, {n: (shared(5), 10) for n in NODES})
    segment = Path(dirs[1]) / "events-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    second = len(build_batch([b"r0", b"r1"], base_offset=0))  # the second batch's position
    data[second + 70] ^= 0xFF  # inside its records: the CRC no longer matches
    segment.write_bytes(bytes(data))
    torn = Path(dirs[2]) / "events-0" / "00000000000000000006.log"
    torn.write_bytes(torn.read_bytes()[:-5])  # node 3's last segment ends mid-batch
    result = audit(spark, dirs)
    corrupt = [f for f in result.findings if f.check == "partition-corrupt-batch"]
    assert [(f.severity, f.node_id, f.offset) for f in corrupt] == [(VIOLATION, 2, 2)]
    assert f"{segment} byte {second}" in corrupt[0].detail
    assert "CRC32C mismatch" in corrupt[0].detail
    tails = [f for f in result.findings if f.check == "partition-torn-tail"]
    assert [(f.severity, f.node_id, f.offset) for f in tails] == [(WARNING, 3, 8)]
    # What node 2 can no longer read is missing below both HWs: a divergence too.
    assert any(f.check == "partition-divergence" and f.offset == 2 for f in result.findings)


def unclean_logs() -> dict[int, tuple[Log, int]]:
    """Node 1 led epoch 0 and alone held offsets 6..9 (HW 10); node 2, which had 0..5, was
    elected in epoch 1 and wrote 6..13; node 3 follows it."""
    new = shared(3) + [(b, 1, [f"n{b}".encode(), f"n{b + 1}".encode()]) for b in (6, 8, 10, 12)]
    return {1: (shared(5), 10), 2: (new, 14), 3: (new, 14)}


def test_an_unclean_election_cut_is_reported_not_a_violation(tmp_path: Path, spark) -> None:
    dirs = cluster(tmp_path, unclean_logs(), unclean=True)
    out = tmp_path / "out"
    assert cli.main([*(a for d in dirs for a in ("--log-dir", d)), "--out", os.fspath(out),
                     "--partitions", "1"]) == cli.EXIT_OK
    findings = pq.read_table(out / "findings.parquet").to_pylist()
    cuts = [f for f in findings if f["check"] == "unclean-election-cut"]
    assert [(f["severity"], f["node_id"], f["offset"]) for f in cuts] == [(WARNING, 1, 6)]
    assert cuts[0]["detail"].startswith(
        "unclean election of events-0 in epoch 1 cut offsets 6..9 on node 1")
    assert "below node 1's high watermark 10" in cuts[0]["detail"]
    assert not [f for f in findings if f["check"] == "partition-divergence"]
    report = (out / "report.md").read_text()
    assert "## Partition logs" in report and "cut offsets 6..9 on node 1" in report
    cut_table = pq.read_table(out / "unclean_cuts.parquet").to_pylist()
    assert [(c["node_id"], c["first"], c["last"], c["leader"]) for c in cut_table] == [
        (1, 6, 9, 2)]
    assert pq.read_table(out / "partition_replicas.parquet").num_rows == 3


def test_the_same_divergence_without_an_unclean_election_is_a_violation(
        tmp_path: Path, spark, capsys) -> None:
    dirs = cluster(tmp_path, unclean_logs(), unclean=False)
    out = tmp_path / "out"
    assert cli.main([*(a for d in dirs for a in ("--log-dir", d)), "--out", os.fspath(out),
                     "--partitions", "1"]) == cli.EXIT_VIOLATIONS
    assert "violation partition-divergence (node 1, offset 6)" in capsys.readouterr().out


def test_a_bad_replication_checkpoint_is_a_warning_and_a_missing_dir_bad_input(
        tmp_path: Path, spark, capsys) -> None:
    dirs = cluster(tmp_path, {n: (shared(2), 4) for n in NODES})
    (Path(dirs[0]) / "replication-offset-checkpoint").write_text("0\n2\nevents 0 4\n")
    result = audit(spark, dirs)
    assert [(f.check, f.severity, f.node_id) for f in result.findings] == [
        ("partition-checkpoint", WARNING, 1)]
    assert "2 entries announced, 1 found" in result.findings[0].detail
    assert cli.main(["--log-dir", os.fspath(tmp_path / "nowhere"), "--out",
                     os.fspath(tmp_path / "o")]) == cli.EXIT_BAD_INPUT
    assert "does not exist" in capsys.readouterr().err


def write_txn_partition(node_dir: Path) -> None:
    """`events-0` written by the broker's own PartitionLog (markers, aborted-transaction
    index): producer 7 commits, 8 aborts while 9's transaction is open from offset 5 (the LSO
    recorded at the abort), 9 commits; offsets 0..10, all below the HW."""
    from broker.log.config import LogConfig
    from broker.log.partition_log import PartitionLog
    from broker.records import TRANSACTIONAL_BIT

    now = 1_700_000_000_000
    log = PartitionLog.open(os.fspath(node_dir / "events-0"), EVENTS, LogConfig(), now_ms=now)

    def txn(pid: int) -> bytes:
        return build_batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0,
                           attributes=TRANSACTIONAL_BIT, base_timestamp=now)

    log.append_as_leader(build_batch([b"plain"], base_timestamp=now), 0, now)
    for pid in (7, 8, 9):
        log.append_as_leader(txn(pid), 0, now)
    for pid, commit in ((7, True), (8, False), (9, True)):
        log.append_marker(pid, 0, commit, 0, 0, now)
    log.append_as_leader(build_batch([b"plain"], base_timestamp=now), 0, now)
    log.close()
    (node_dir / "replication-offset-checkpoint").write_text("0\n1\nevents 0 11\n")


def test_a_transactional_log_audits_clean_and_planted_index_faults_are_caught(
        spark, tmp_path: Path) -> None:
    for node in NODES:
        write_node(tmp_path, node, metadata(False))
        write_txn_partition(tmp_path / f"node-{node}")
    # The source's rows of the broker's log (no Spark job): markers and flags decoded, and the
    # rules find nothing on it.
    (replica,) = discover_replicas(os.fspath(tmp_path / "node-1"))
    rows = [r for base, path in replica.segments
            for r in scan_segment(replica, base, path, last=True)]
    assert [(r["base_offset"], r["producer_id"], r["is_transactional"], r["control_type"])
            for r in rows][-4:] == [(7, 7, True, 1), (8, 8, True, 0), (9, 9, True, 1),
                                    (10, -1, False, None)]
    txn_rows = [(r["base_offset"], r["producer_id"], r["producer_epoch"], r["is_control"],
                 r["control_type"]) for r in rows if r["is_transactional"]]
    assert walk_replica(1, "events-0", txn_rows, read_index(replica.directory), 0, 11) == []
    # Through the audit: node 1 as written; node 2's index records an LSO past producer 9's
    # open transaction at producer 8's abort; node 3's index lost that abort.
    index = "events-0/aborted-transactions.txnindex"
    entry = bytearray((tmp_path / "node-2" / index).read_bytes())
    entry[26:34] = (9).to_bytes(8, "big")
    (tmp_path / "node-2" / index).write_bytes(bytes(entry))
    (tmp_path / "node-3" / index).write_bytes(b"")
    dirs = [os.fspath(tmp_path / f"node-{n}") for n in NODES]
    found = [(f.check, f.severity, f.node_id, f.offset) for f in audit(spark, dirs).findings]
    assert found == [("txn-lso-past-open", VIOLATION, 2, 8),
                     ("txn-aborted-exposed", VIOLATION, 3, 3)]


@pytest.mark.slow
def test_a_real_clusters_unclean_election_cut(spark, tmp_path: Path) -> None:
    """Scenario 9 of tests/integration/test_data_plane.py on real brokers (confluent-kafka):
    the ISR of `fragile-0` shrinks to its leader, which takes 50 records alone and dies; the
    out-of-sync replica is elected uncleanly and takes 10. Audited with the old leader still
    down, its offsets 100..149 are the election's cut, and nothing is a violation."""
    from harness.cluster import ProcessCluster, wait_for
    from tests.integration.test_data_plane import (
        BROKERS,
        CONTROLLERS,
        TIMINGS,
        WAIT_S,
        unclean_election,
    )

    root = tmp_path / "cluster"
    root.mkdir()
    cluster = ProcessCluster(root, 3, {k.replace("_", "."): v for k, v in TIMINGS.items()})
    try:
        cluster.add_brokers(BROKERS)
        cluster.format()
        cluster.start_all()
        wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "an active controller")
        cluster.wait_brokers_unfenced(BROKERS, WAIT_S)
        old_leader, survivor = unclean_election(cluster)
        new_checkpoint = root / f"node-{survivor}" / "replication-offset-checkpoint"
        wait_for(lambda: new_checkpoint.exists()
                 and "fragile 0 110" in new_checkpoint.read_text(), WAIT_S,
                 "the new leader's HW checkpoint to reach 110")
    finally:
        cluster.stop_all()
    logs = [discover(os.fspath(root / f"node-{n}")) for n in sorted(CONTROLLERS | set(BROKERS))]
    result = run_audit(spark, logs, partitions=2)
    assert result.partitions is not None
    part_findings = [f for f in result.findings if f in result.partitions.findings]
    seen = "\n".join(f.line() for f in part_findings)
    assert [f for f in part_findings if f.severity == VIOLATION] == [], seen
    cuts = [(c.topic, c.node_id, c.first, c.last, c.leader) for c in result.partitions.cuts]
    assert cuts == [("fragile", old_leader, 100, 149, survivor)], seen
    assert "cut offsets 100..149 on node" in result.partitions.cuts[0].line()
    assert "below node" in result.partitions.cuts[0].line()
