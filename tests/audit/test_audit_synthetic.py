"""The audit on a generated valid log, then on a copy with every fault of the issue injected:
each is found and named with its node and offset."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from audit import cli
from audit.findings import VIOLATION, Finding
from audit.job import run_audit
from audit.layout import discover
from audit.report import write_report
from kraft.log.codec import LEADER_CHANGE, encode_control_record
from metadata.records import NoOpRecord, PartitionChangeRecord, decode_record, encode_record
from tests.audit.faults import find_batch, rewrite_batch, segments

NODES = (1, 2, 3)


def _logs(root: Path) -> list:
    return [discover(os.fspath(root / f"node-{n}")) for n in NODES]


def test_a_valid_log_has_no_violation_and_its_timelines(spark, synthetic, tmp_path) -> None:
    root, info = synthetic
    result = run_audit(spark, _logs(root), partitions=2)
    assert result.violations == []
    assert result.records == info.records
    assert {x.epoch: x.leader_id for x in result.leadership} == info.epochs
    fences = [e for e in result.broker_events if e["event"] == "FENCE"]
    assert len(fences) == info.fences
    assert result.leader_changes.num_rows > 0
    files = write_report(result, os.fspath(tmp_path / "out"))
    assert {"report.md", "report.html", "findings.parquet", "fenced_brokers.png",
            "leadership_timeline.png", "leader_changes_per_partition.png"} <= set(files)
    assert "verdict: no violations" in (tmp_path / "out" / "report.md").read_text()


def test_injected_faults_are_each_named_with_node_and_offset(spark, synthetic,
                                                             tmp_path: Path) -> None:
    root, info = synthetic
    copy = tmp_path / "logs"
    shutil.copytree(root, copy)
    nodes = {n: copy / f"node-{n}" for n in NODES}

    # 1. A divergent batch on node 2 only: same offsets and epoch, other records, valid CRC.
    divergent = find_batch(nodes[2], lambda b: not b.control and len(b.records) > 10
                           and b.base_offset > 5000)
    rewrite_batch(nodes[2], divergent.base_offset,
                  [encode_record(NoOpRecord())] * len(divergent.records))

    # 2. A second LEADER_CHANGE in epoch 1, naming another leader, on every node.
    config = find_batch(nodes[1], lambda b: not b.control and len(b.records) == 1
                        and decode_record(b.records[0]).record_type.name == "CONFIG_RECORD")
    assert config.epoch == 1 and info.epochs[1] != 3
    for node in nodes.values():
        rewrite_batch(node, config.base_offset, [encode_control_record(
            LEADER_CHANGE, {"leaderId": 3, "voters": [1, 2, 3], "grantingVoters": [3]})],
            control=True)

    # 3. A PartitionChange whose leader is not in the ISR, on every node.
    changes = find_batch(nodes[1], lambda b: not b.control and len(b.records) > 10
                         and b.base_offset > 8000)
    first = decode_record(changes.records[0])
    assert isinstance(first, PartitionChangeRecord)
    bad = PartitionChangeRecord(first.partition_id, first.topic_id, isr=(0,), leader=1)
    for node in nodes.values():
        rewrite_batch(node, changes.base_offset,
                      [encode_record(bad), *changes.records[1:]])

    # 4. A truncated segment on node 3 (not its last one).
    base, path = segments(nodes[3])[1]
    os.truncate(path, os.path.getsize(path) // 2)

    # One audit, through the CLI: exit 2, and the findings table names every fault.
    out = tmp_path / "out"
    code = cli.main([*(arg for n in NODES for arg in ("--log-dir", os.fspath(nodes[n]))),
                     "--out", os.fspath(out), "--partitions", "2"])
    assert code == cli.EXIT_VIOLATIONS
    assert "VIOLATIONS FOUND" in (out / "report.md").read_text()
    violations = [Finding(**row) for row in pq.read_table(out / "findings.parquet").to_pylist()
                  if row["severity"] == VIOLATION]
    found = {(f.check, f.node_id, f.offset) for f in violations}
    by_check = {f.check: f for f in violations}
    assert ("divergent-batch", 1, divergent.base_offset) in found, by_check
    assert "node 2" in next(f.detail for f in violations
                            if f.check == "divergent-batch" and f.node_id == 1
                            and f.offset == divergent.base_offset)
    assert ("two-leaders-in-epoch", 1, config.base_offset) in found
    assert ("leader-not-in-isr", 1, changes.base_offset) in found
    truncated = by_check["truncated-segment"]
    assert truncated.node_id == 3 and truncated.offset > base and path in truncated.detail
    assert ("offset-gap", 3, truncated.offset) in found


def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, capsys) -> None:
    code = cli.main(["--log-dir", os.fspath(tmp_path / "missing"), "--out",
                     os.fspath(tmp_path / "out")])
    assert code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


def test_data_source_options(spark, synthetic) -> None:
    root, _ = synthetic
    dirs = [os.fspath(root / f"node-{n}") for n in NODES]
    df = (spark.read.format("kraft-metadata").option("startOffset", "100")
          .option("endOffset", "200").load(dirs))
    rows = df.select("node_id", "offset", "record_json", "record_type").collect()
    assert sorted({r["node_id"] for r in rows}) == list(NODES)
    assert sorted(r["offset"] for r in rows if r["node_id"] == 2) == list(range(100, 200))
    assert all(r["record_json"] and r["record_type"] in r["record_json"] for r in rows)
    committed = (spark.read.format("kraft-metadata").option("committedOnly", "true")
                 .option("committedEnd", "1=50,3=70").option("includeJson", "false")
                 .load(dirs).groupBy("node_id").agg({"offset": "max"}).collect())
    ends = {r["node_id"]: r["max(offset)"] for r in committed}
    assert ends[1] == 49 and ends[3] == 69 and ends[2] > 1000  # node 2: committed end unknown
