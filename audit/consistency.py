"""Log consistency across nodes, on batch rows (one per batch, not per record):

* each node's log is whole: no corrupt or truncated file, contiguous offsets, epochs that
  never decrease with offset;
* two nodes hold the same batch (same base, last offset and CRC) at every offset both have,
  as Raft's log matching requires. A difference is a violation when it lies below both nodes'
  known committed ends, or below a later batch the two agree on (log matching then says it
  was never a legitimately truncatable tail); otherwise it is a warning: an uncommitted tail
  may differ and Raft truncates it;
* one LEADER_CHANGE record per epoch, naming one leader, across all nodes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row, Window
from pyspark.sql import functions as F

from audit.findings import VIOLATION, WARNING, Finding
from audit.layout import NodeLog

# Every column the batch-level checks read (the job caches only these).
HEADER_COLUMNS = ("node_id", "source_file", "source_kind", "offset", "epoch", "batch_base_offset",
                  "batch_last_offset", "batch_crc", "timestamp_ms", "record_type",
                  "quorum_leader_id", "error")


@dataclass(frozen=True)
class NodeRange:
    node_id: int
    start: int  # first offset in the node's segments
    end: int  # one past the last
    committed_end: int | None


def batch_rows(records: DataFrame) -> DataFrame:
    """One row per segment batch (the row of its first record)."""
    return records.where(
        (F.col("source_kind") == "segment") & (F.col("offset") == F.col("batch_base_offset"))
    ).select("node_id", F.col("batch_base_offset").alias("base"),
             F.col("batch_last_offset").alias("last"), F.col("batch_crc").alias("crc"),
             "epoch", "source_file", "timestamp_ms")


def node_ranges(batches: DataFrame, logs: list[NodeLog]) -> list[NodeRange]:
    spans = {r["node_id"]: (r["start"], r["end"]) for r in batches.groupBy("node_id").agg(
        F.min("base").alias("start"), (F.max("last") + 1).alias("end")).collect()}
    return [NodeRange(log.node_id, *spans.get(log.node_id, (0, 0)), log.committed_end)
            for log in logs]


def file_problems(records: DataFrame, logs: list[NodeLog]) -> list[Finding]:
    """CORRUPT rows (a bad frame stopped a file) and records that do not decode."""
    last_segment = {log.node_id: log.segments[-1].path for log in logs if log.segments}
    committed = {log.node_id: log.committed_end for log in logs}
    out = []
    for row in records.where(F.col("error").isNotNull()).select(
            "node_id", "source_file", "source_kind", "offset", "record_type", "error").collect():
        node, offset, error = row["node_id"], row["offset"], row["error"]
        if row["record_type"] == "UNDECODABLE":
            out.append(Finding(VIOLATION, "undecodable-record", node, offset,
                               f"{row['source_file']}: {error}"))
            continue
        if row["source_kind"] == "snapshot":
            out.append(Finding(VIOLATION, "corrupt-snapshot", node, offset,
                               f"{row['source_file']}: {error}"))
            continue
        torn = error.startswith("torn tail")
        if torn and row["source_file"] == last_segment.get(node):
            end = committed[node]
            # Past the committed end a torn tail is what a crash leaves; Raft cuts it.
            severity = VIOLATION if end is not None and end > offset else WARNING
            out.append(Finding(severity, "torn-tail", node, offset,
                               f"{row['source_file']}: log ends in a partial batch: {error}"))
        else:
            check = "truncated-segment" if torn else "corrupt-batch"
            out.append(Finding(VIOLATION, check, node, offset,
                               f"{row['source_file']}: data stops at offset {offset}: {error}"))
    return out


def per_node_order(batches: DataFrame) -> list[Finding]:
    """Gaps and overlaps between consecutive batches, and epochs that go down."""
    w = Window.partitionBy("node_id").orderBy("base")
    rows = batches.select(
        "node_id", "base", "epoch", "source_file",
        F.lag("last").over(w).alias("prev_last"), F.lag("epoch").over(w).alias("prev_epoch"),
    ).where((F.col("base") != F.col("prev_last") + 1) | (F.col("epoch") < F.col("prev_epoch"))
            ).orderBy("node_id", "base").limit(1000).collect()
    out = []
    for r in rows:
        if r["base"] != r["prev_last"] + 1:
            kind = "offset-gap" if r["base"] > r["prev_last"] + 1 else "offset-overlap"
            out.append(Finding(VIOLATION, kind, r["node_id"], r["prev_last"] + 1,
                               f"batch after offset {r['prev_last']} starts at {r['base']} "
                               f"({r['source_file']})"))
        if r["prev_epoch"] is not None and r["epoch"] < r["prev_epoch"]:
            out.append(Finding(VIOLATION, "epoch-decrease", r["node_id"], r["base"],
                               f"epoch {r['epoch']} after epoch {r['prev_epoch']}"))
    return out


def cross_node(batches: DataFrame, ranges: list[NodeRange]) -> list[Finding]:
    """Compare every batch of a node with the batch at the same base on every other node
    whose log covers that offset."""
    # Built from literals, not spark.createDataFrame(list): that is a Python RDD, whose
    # tasks would need a Python with pyspark on every executor. The job runs on the JVM only.
    spans = [F.struct(F.lit(r.node_id).cast("int").alias("other_node"),
                      F.lit(r.start).cast("bigint").alias("other_start"),
                      F.lit(r.end).cast("bigint").alias("other_end")) for r in ranges]
    other = batches.sparkSession.range(1).select(
        F.explode(F.array(*spans)).alias("span")).select("span.*")
    a = batches.alias("a")
    cand = a.join(F.broadcast(other), (F.col("other_node") != F.col("a.node_id"))
                  & (F.col("a.base") >= F.col("other_start"))
                  & (F.col("a.base") < F.col("other_end")))
    b = batches.select(F.col("node_id").alias("b_node"), F.col("base").alias("b_base"),
                       F.col("last").alias("b_last"), F.col("crc").alias("b_crc"),
                       F.col("epoch").alias("b_epoch"))
    # One row per batch per node: small enough to broadcast, which spares a shuffle of both.
    joined = cand.join(F.broadcast(b), (F.col("b_node") == F.col("other_node"))
                       & (F.col("b_base") == F.col("a.base")), "left")
    same = (F.col("b_crc") == F.col("a.crc")) & (F.col("b_last") == F.col("a.last"))
    joined = joined.select(
        F.col("a.node_id").alias("node"), F.col("other_node"), F.col("a.base").alias("base"),
        F.col("a.epoch").alias("epoch"), F.col("a.crc").alias("crc"), "b_crc", "b_epoch",
        F.coalesce(same, F.lit(False)).alias("same"))
    differs = F.when(~F.col("same"), F.col("base"))
    summary = joined.groupBy("node", "other_node").agg(
        F.max(F.when(F.col("same"), F.col("base"))).alias("last_agree"),
        F.min(differs).alias("first_diff"),
        F.sum(F.when(~F.col("same"), 1).otherwise(0)).alias("diff_batches"),
        # The two sides of the first difference, in the same pass.
        F.min_by(F.struct("crc", "epoch", "b_crc", "b_epoch"), differs).alias("first"),
    ).where(F.col("first_diff").isNotNull()).collect()
    committed = {r.node_id: r.committed_end for r in ranges}
    out = []
    for s in sorted(summary, key=lambda r: (r["node"], r["other_node"])):
        node, other_node, first = s["node"], s["other_node"], s["first_diff"]
        if node > other_node:
            continue  # each pair once (both directions see the same first difference)
        detail_row = s["first"]
        ends = (committed[node], committed[other_node])
        below_committed = None not in ends and first < min(e for e in ends if e is not None)
        below_agreement = s["last_agree"] is not None and s["last_agree"] > first
        severity = VIOLATION if below_committed or below_agreement else WARNING
        theirs = ("no batch starting there" if detail_row["b_crc"] is None else
                  f"CRC {detail_row['b_crc']:#010x} in epoch {detail_row['b_epoch']}")
        why = ("below both committed ends" if below_committed else
               f"below offset {s['last_agree']} where the logs agree again"
               if below_agreement else "beyond the known committed ends: an uncommitted tail")
        out.append(Finding(
            severity, "divergent-batch", node, first,
            f"node {node} and node {other_node} first differ at offset {first}: node {node} "
            f"has CRC {detail_row['crc']:#010x} in epoch {detail_row['epoch']}, node "
            f"{other_node} {theirs} ({s['diff_batches']} differing batch(es); {why})"))
    return out


@dataclass(frozen=True)
class Leadership:
    epoch: int
    leader_id: int
    start_offset: int
    timestamp_ms: int
    nodes: tuple[int, ...]


def leader_changes(records: DataFrame) -> tuple[list[Leadership], list[Finding]]:
    """The controller leadership timeline from LEADER_CHANGE records, and the epochs that have
    more than one such record or more than one leader."""
    rows = records.where(F.col("record_type") == "LEADER_CHANGE").select(
        "node_id", "offset", "epoch", "quorum_leader_id", "timestamp_ms").collect()
    by_epoch: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        by_epoch[r["epoch"]].append(r)
    timeline, out = [], []
    for epoch in sorted(by_epoch):
        entries = by_epoch[epoch]
        leaders = sorted({r["quorum_leader_id"] for r in entries}, key=str)
        first = min(entries, key=lambda r: (r["offset"], r["node_id"]))
        timeline.append(Leadership(epoch, first["quorum_leader_id"], first["offset"],
                                   first["timestamp_ms"],
                                   tuple(sorted({r["node_id"] for r in entries}))))
        if len(leaders) > 1:
            where = ", ".join(f"node {r['node_id']} offset {r['offset']} leader "
                              f"{r['quorum_leader_id']}" for r in sorted(
                                  entries, key=lambda r: (r["offset"], r["node_id"])))
            odd = next(r for r in sorted(entries, key=lambda r: (r["offset"], r["node_id"]))
                       if r["quorum_leader_id"] != first["quorum_leader_id"])
            out.append(Finding(VIOLATION, "two-leaders-in-epoch", odd["node_id"], odd["offset"],
                               f"epoch {epoch} names leaders {leaders}: {where}"))
        per_node: dict[int, set[int]] = defaultdict(set)
        for r in entries:
            per_node[r["node_id"]].add(r["offset"])
        for node, node_offsets in sorted(per_node.items()):
            if len(node_offsets) > 1:
                out.append(Finding(VIOLATION, "duplicate-leader-change", node,
                                   sorted(node_offsets)[1],
                                   f"epoch {epoch} has LEADER_CHANGE records at offsets "
                                   f"{sorted(node_offsets)} on node {node}"))
    return timeline, out
