"""The audit as one function: read every node's log through the data source, run the
consistency checks and the replay, and return what the report needs."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit import consistency, jvm, replay
from audit.findings import VIOLATION, WARNING, Finding
from audit.fs import is_uri
from audit.layout import NodeLog
from audit.partition_checks import PartitionAudit, run_partition_audit


@dataclass
class AuditResult:
    nodes: list[consistency.NodeRange]
    records: int
    findings: list[Finding]
    leadership: list[consistency.Leadership]
    broker_events: list[replay.BrokerEvent]
    leader_changes: pa.Table
    replay_start: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase
    # The brokers' partition logs (None: no log dir holds a partition directory)
    partitions: PartitionAudit | None = None

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == VIOLATION]


def read_options(logs: list[NodeLog], level: str = "record",
                 node_ranges: dict[int, list[tuple[int, int]]] | None = None,
                 snapshots: bool = True) -> dict[str, str]:
    """kraft-metadata options for the given node logs (their committed ends explicit)."""
    options = {"includeJson": "false", "level": level,
               "includeSnapshots": str(snapshots).lower(),
               "nodeIds": ",".join(str(log.node_id) for log in logs)}
    ends = ",".join(f"{log.node_id}={log.committed_end}" for log in logs
                    if log.committed_end is not None)
    if ends:
        options["committedEnd"] = ends
    if node_ranges is not None:
        options["nodeRanges"] = json.dumps(
            {str(n): [list(s) for s in spans] for n, spans in node_ranges.items()})
    return options


def load(spark: SparkSession, logs: list[NodeLog], level: str = "record",
         node_ranges: dict[int, list[tuple[int, int]]] | None = None,
         snapshots: bool = True) -> DataFrame:
    """The kraft-metadata rows of the given node logs, decoded on the JVM (audit/jvm.py):
    the same rows as the Python source."""
    return jvm.read(spark, read_options(logs, level, node_ranges, snapshots),
                    [log.partition_dir for log in logs])


def run_audit(spark: SparkSession, logs: list[NodeLog], partitions: int = 8) -> AuditResult:
    """Every node read at batch level (a CRC scan) for the cross-node checks, then one copy
    of the log read twice at record level: for the driver's broker and topic replay, and by
    the partition replay's `min(partitions, cores)` JVM tasks."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    lap = [started]

    def phase(name: str) -> None:
        now = time.monotonic()
        timings[name] = now - lap[0]
        lap[0] = now

    headers = load(spark, logs, level="batch", snapshots=False).select(
        *consistency.HEADER_COLUMNS).cache()
    batches = consistency.batch_rows(headers)  # a filter of the cached headers
    ranges = consistency.node_ranges(batches, logs)
    findings = consistency.file_problems(headers, logs)
    findings += consistency.per_node_order(batches)
    findings += consistency.cross_node(batches, ranges)
    leadership, leader_findings = consistency.leader_changes(headers)
    findings += leader_findings
    phase("batch-level checks")
    snapshots = [(s.base_offset, log.node_id, s.path) for log in logs for s in log.snapshots]
    plan = replay.plan_canonical(ranges, snapshots)
    # Two passes over one copy of the log, both on the JVM: the few rows the driver needs
    # (brokers, topics, ACLs, SCRAM credentials, errors) with the row count, then the
    # partition replay.
    options = read_options(logs, "record", plan.node_ranges, plan.seed is not None)
    small, count = jvm.driver_rows(spark, options, [log.partition_dir for log in logs],
                                   (*replay.BROKER_TYPES, *replay.TOPIC_TYPES,
                                    *replay.ACL_TYPES, *replay.SCRAM_TYPES))
    small = small.cache()
    phase("record read")
    # Undecodable records, and snapshots that do not verify: the batch-level read above
    # covers segments only, so a corrupt snapshot (the replay's seed) is found here.
    findings += consistency.file_problems(small.where(
        (F.col("record_type") == "UNDECODABLE") | (F.col("source_kind") == "snapshot")), logs)
    notes = []
    if not plan.complete:
        notes.append(f"no log starts at offset 0 and no snapshot covers offsets below "
                     f"{plan.start}: checks that need the earlier state (topic existence) are "
                     "skipped")
        findings.append(Finding(WARNING, "incomplete-history", None, plan.start, notes[-1]))
    history = replay.cluster_history(replay.canonical_rows(small, plan), plan.complete)
    findings += history.findings
    phase("brokers and topics")
    files = replay.canonical_files(logs, plan, options["nodeRanges"], spark)
    shards = max(1, min(partitions, spark.sparkContext.defaultParallelism))
    # One pass, straight to Arrow; the driver splits and sorts it (a Spark orderBy would
    # replay twice: once to sample the range boundaries).
    out = replay.partition_replay(spark, files, history, plan.complete, shards).toArrow()
    phase("partition replay")
    kind = out.column("kind")
    for r in out.filter(pc.equal(kind, "finding")).to_pylist():
        findings.append(Finding(r["severity"], r["check"], r["node_id"], r["offset"],
                                r["detail"]))
    # Each shard gives its rows in offset order: a stable sort by offset is deterministic.
    changes = out.filter(pc.equal(kind, "leader_change")).drop_columns(
        ["kind", "severity", "check", "detail"]).sort_by("offset")
    phase("findings and leader changes")
    findings.sort(key=lambda f: (f.severity != VIOLATION, f.offset if f.offset is not None
                                 else -1, f.check, f.node_id or 0))
    for frame in (headers, small):
        frame.unpersist()
    # The data plane: the brokers' partition logs beside __cluster_metadata-0 (local paths;
    # the kraft-partitions source reads no URI), with the unclean elections just replayed.
    local = [(log.node_id, os.path.dirname(log.partition_dir)) for log in logs
             if not is_uri(log.partition_dir)]
    if len(local) < len(logs):
        notes.append("partition logs are read from local log dirs only: the URIs' are skipped")
    data_plane = run_partition_audit(spark, local, changes)
    if data_plane is not None:
        notes += data_plane.notes
        # Metadata findings then partition findings, violations of both first.
        findings = sorted(findings + data_plane.findings, key=lambda f: f.severity != VIOLATION)
    phase("partition logs")
    return AuditResult(ranges, count, findings, leadership, history.broker_events, changes,
                       plan.start, time.monotonic() - started, notes, timings, data_plane)
