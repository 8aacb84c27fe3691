"""The partition logs of the data plane, checked with Spark on the rows of the
`kraft-partitions` source (audit/partition_source.py), one row per batch per replica:

* every segment reads cleanly: `partition-corrupt-batch` (a violation) names the file and the
  byte offset; a torn tail at the end of a replica's last segment is `partition-torn-tail`
  (a warning: the broker's recovery cuts it);
* leader epochs never go back along a replica's log (`partition-epoch-decrease`);
* every pair of replicas of a partition (of the same topic id, when both know it) holds
  identical batches (base and last offset, leader
  epoch, CRC and digest of bytes [12:]) below the smaller of their high watermarks (from each
  log dir's `replication-offset-checkpoint`): `partition-divergence`, a violation, unless an
  unclean election of that partition explains it;
* each unclean election (from the metadata replay's leader changes: a leader from outside
  the ISR, or RECOVERING) is joined to the offsets it cut: the records another replica holds
  in an older epoch at or above the new leader's log end at its election (the first offset
  of its epoch E, or its log end when it has not written in E). They are reported as
  `unclean-election-cut` (a warning): "unclean election of t-p in epoch E cut offsets X..Y
  on node N". A replica that has truncated them already shows nothing.
* transactions (audit/txn_checks.py): each ends with one marker, the aborted-transaction
  index names exactly the aborted batches, and the LSO it records never passes an open
  transaction.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from audit.findings import VIOLATION, WARNING, Finding
from audit.partition_source import NAME, KraftPartitionsDataSource, Replica, discover_replicas
from audit.txn_checks import run_txn_checks

KEY = ("topic", "partition")


@dataclass(frozen=True)
class ReplicaSummary:
    node_id: int
    topic: str
    partition: int
    topic_id: str | None
    start: int | None  # first offset of its batches (None: an empty log)
    end: int | None  # one past the last
    hw: int | None  # replication-offset-checkpoint (None: no entry)
    batches: int


@dataclass(frozen=True)
class Cut:
    """Offsets `first`..`last` that `node_id` held in epochs before `epoch` at or above the
    log end of `leader` when it was elected uncleanly (metadata offset `election_offset`)."""

    topic: str
    partition: int
    epoch: int
    leader: int
    election_offset: int
    leader_log_end: int
    node_id: int
    first: int
    last: int
    node_hw: int | None

    def line(self) -> str:
        acked = ""
        if self.node_hw is not None and self.node_hw > self.first:
            acked = (f"; offsets {self.first}..{min(self.last, self.node_hw - 1)} were below "
                     f"node {self.node_id}'s high watermark {self.node_hw}")
        return (f"unclean election of {self.topic}-{self.partition} in epoch {self.epoch} cut "
                f"offsets {self.first}..{self.last} on node {self.node_id} (new leader "
                f"{self.leader} ended at offset {self.leader_log_end}; metadata offset "
                f"{self.election_offset}{acked})")


@dataclass
class PartitionAudit:
    replicas: list[ReplicaSummary]
    cuts: list[Cut]
    findings: list[Finding]
    batches: int
    notes: list[str] = field(default_factory=list)


def load(spark: SparkSession, dirs: list[tuple[int, str]], table: str = "batches") -> DataFrame:
    """The kraft-partitions rows of the given (node id, log dir) pairs."""
    # Registered here too: a session the caller built (a notebook) may not have it.
    spark.dataSource.register(KraftPartitionsDataSource)
    return (spark.read.format(NAME).option("table", table)
            .option("nodeIds", ",".join(str(n) for n, _ in dirs))
            .load([d for _, d in dirs]))


def unclean_elections(leader_changes: pa.Table | None) -> list[dict[str, object]]:
    """The unclean leader changes of the metadata replay (offset, topic_name, partition, leader,
    leader_epoch), in offset order."""
    if leader_changes is None or leader_changes.num_rows == 0:
        return []
    rows = leader_changes.select(["offset", "topic_name", "partition", "leader",
                                  "leader_epoch", "unclean"]).to_pylist()
    return [r for r in rows if r["unclean"] and r["leader"] is not None and r["leader"] >= 0]


def run_partition_audit(spark: SparkSession, dirs: list[tuple[int, str]],
                        leader_changes: pa.Table | None) -> PartitionAudit | None:
    """The partition checks over the brokers' log dirs `dirs` ((node id, path) pairs); None
    when no log dir holds a partition directory (controllers only)."""
    replicas = [r for node, d in dirs for r in discover_replicas(d, node)]
    if not replicas:
        return None
    findings: list[Finding] = []
    for r in replicas:
        for problem in r.problems:
            findings.append(Finding(WARNING, "partition-checkpoint", r.node_id, None,
                                    f"{r.topic}-{r.partition}: {problem}"))
    with_data = sorted({(n, d) for n, d in dirs
                        if any(r.node_id == n and r.segments for r in replicas)})
    if not with_data:
        return PartitionAudit(_summaries(replicas, {}), [], findings, 0)
    rows = load(spark, with_data).cache()
    try:
        findings += _file_problems(rows)
        batches = rows.where(F.col("error").isNull()).drop("error")
        spans = {(r["node_id"], r["topic"], r["partition"]): r for r in batches.groupBy(
            "node_id", *KEY).agg(F.min("base_offset").alias("start"),
                                 (F.max("last_offset") + 1).alias("end"),
                                 F.count(F.lit(1)).alias("batches"),
                                 F.max(F.col("is_transactional").cast("int")).alias("txn"),
                                 ).collect()}
        findings += _epoch_decreases(batches)
        cuts, notes = _cuts(batches, replicas, unclean_elections(leader_changes))
        findings += _divergences(batches, replicas, spans, cuts)
        if any(s["txn"] for s in spans.values()):  # (a Spark job only for transactional logs)
            findings += run_txn_checks(batches, replicas, spans)
        findings += [Finding(WARNING, "unclean-election-cut", c.node_id, c.first, c.line())
                     for c in cuts]
        count = sum(r["batches"] for r in spans.values())
    finally:
        rows.unpersist()
    return PartitionAudit(_summaries(replicas, spans), cuts, findings, count, notes)


def _summaries(replicas: list[Replica], spans: dict[tuple[int, str, int], Row]
               ) -> list[ReplicaSummary]:
    out = []
    for r in replicas:
        s = spans.get((r.node_id, r.topic, r.partition))
        out.append(ReplicaSummary(
            r.node_id, r.topic, r.partition, r.topic_id,
            None if s is None else s["start"], None if s is None else s["end"],
            r.hw, 0 if s is None else s["batches"]))
    return sorted(out, key=lambda x: (x.topic, x.partition, x.node_id))


def _file_problems(rows: DataFrame) -> list[Finding]:
    out = []
    for r in rows.where(F.col("error").isNotNull()).select(
            "node_id", "topic", "partition", "base_offset", "file", "position", "error"
    ).orderBy("node_id", "topic", "partition", "file").collect():
        torn = r["error"].startswith("torn tail")
        out.append(Finding(
            WARNING if torn else VIOLATION,
            "partition-torn-tail" if torn else "partition-corrupt-batch", r["node_id"],
            r["base_offset"],
            f"{r['topic']}-{r['partition']}: data stops at offset {r['base_offset']}, "
            f"{r['file']} byte {r['position']}: {r['error']}"))
    return out


def _epoch_decreases(batches: DataFrame) -> list[Finding]:
    w = Window.partitionBy("node_id", *KEY).orderBy("base_offset")
    rows = batches.select(
        "node_id", *KEY, "base_offset", "leader_epoch", "file",
        F.lag("leader_epoch").over(w).alias("prev_epoch"),
        F.lag("base_offset").over(w).alias("prev_base"),
    ).where(F.col("leader_epoch") < F.col("prev_epoch")).orderBy(
        "node_id", *KEY, "base_offset").limit(1000).collect()
    return [Finding(VIOLATION, "partition-epoch-decrease", r["node_id"], r["base_offset"],
                    f"{r['topic']}-{r['partition']}: leader epoch {r['leader_epoch']} at offset "
                    f"{r['base_offset']} after epoch {r['prev_epoch']} at offset "
                    f"{r['prev_base']} ({r['file']})") for r in rows]


def _cuts(batches: DataFrame, replicas: list[Replica], elections: list[dict[str, object]]
          ) -> tuple[list[Cut], list[str]]:
    """Each unclean election joined to the offsets it cut, from every replica's epoch spans
    (first and last offset per leader epoch: one small row per replica and epoch)."""
    if not elections:
        return [], []
    hws = {(r.node_id, r.topic, r.partition): r.hw for r in replicas}
    nodes_of: dict[tuple[str, int], set[int]] = defaultdict(set)
    for r in replicas:
        nodes_of[(r.topic, r.partition)].add(r.node_id)
    epoch_spans: dict[tuple[str, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    for row in batches.groupBy("node_id", *KEY, "leader_epoch").agg(
            F.min("base_offset").alias("first"), F.max("last_offset").alias("last")).collect():
        epoch_spans[(row["topic"], row["partition"])].append(
            (row["node_id"], row["leader_epoch"], row["first"], row["last"]))
    cuts, notes = [], []
    for e in elections:
        topic, partition = str(e["topic_name"]), int(e["partition"])  # type: ignore[call-overload]
        leader, epoch = int(e["leader"]), int(e["leader_epoch"])  # type: ignore[call-overload]
        key = (topic, partition)
        if key not in nodes_of:
            continue  # a partition no audited broker holds
        if leader not in nodes_of[key]:
            notes.append(f"unclean election of {topic}-{partition} in epoch {epoch}: its new "
                         f"leader {leader} is not among the log dirs; the offsets it cut are "
                         "not computed")
            continue
        spans = epoch_spans.get(key, [])
        mine = [s for s in spans if s[0] == leader]
        later = [s[2] for s in mine if s[1] >= epoch]
        end = min(later) if later else max((s[3] + 1 for s in mine), default=0)
        for node in sorted(nodes_of[key] - {leader}):
            lost = [s for s in spans if s[0] == node and s[1] < epoch and s[3] >= end]
            if lost:
                cuts.append(Cut(topic, partition, epoch, leader, int(e["offset"]),  # type: ignore[call-overload]
                                end, node, max(end, min(s[2] for s in lost)),
                                max(s[3] for s in lost), hws.get((node, topic, partition))))
    return cuts, notes


def _divergences(batches: DataFrame, replicas: list[Replica],
                 spans: dict[tuple[int, str, int], Row], cuts: list[Cut]) -> list[Finding]:
    """Every pair of replicas compared batch by batch in [the later log start, the smaller HW)."""
    pairs = []
    by_partition: dict[tuple[str, int], list[Replica]] = defaultdict(list)
    for r in replicas:
        by_partition[(r.topic, r.partition)].append(r)
    for (topic, partition), group in sorted(by_partition.items()):
        for a in group:
            for b in group:
                if a.node_id >= b.node_id or a.hw is None or b.hw is None:
                    continue
                if None not in (a.topic_id, b.topic_id) and a.topic_id != b.topic_id:
                    continue  # a deleted topic's leftover beside a new one of the same name
                sa = spans.get((a.node_id, topic, partition))
                sb = spans.get((b.node_id, topic, partition))
                lo = max((s["start"] for s in (sa, sb) if s is not None), default=0)
                limit = min(a.hw, b.hw)
                if lo < limit:
                    pairs.append(F.struct(
                        F.lit(topic).alias("topic"),
                        F.lit(partition).cast("int").alias("partition"),
                        F.lit(a.node_id).cast("int").alias("a"),
                        F.lit(b.node_id).cast("int").alias("b"),
                        F.lit(lo).cast("bigint").alias("lo"),
                        F.lit(limit).cast("bigint").alias("limit"),
                        F.lit(a.hw).cast("bigint").alias("hw_a"),
                        F.lit(b.hw).cast("bigint").alias("hw_b")))
    if not pairs:
        return []
    spark = batches.sparkSession
    pair_df = spark.range(1).select(F.explode(F.array(*pairs)).alias("p")).select("p.*")
    cols = ("base_offset", "last_offset", "leader_epoch", "batch_crc", "digest")

    def side(name: str) -> DataFrame:
        joined = batches.join(F.broadcast(pair_df), [*KEY]).where(
            (F.col("node_id") == F.col(name)) & (F.col("base_offset") < F.col("limit"))
            & (F.col("last_offset") >= F.col("lo")))
        return joined.select(*KEY, "a", "b", "hw_a", "hw_b",
                             F.col("base_offset").alias("base"),
                             *[F.col(c).alias(f"{name}_{c}") for c in cols])

    both = side("a").join(side("b"), [*KEY, "a", "b", "hw_a", "hw_b", "base"], "full_outer")
    same = F.lit(True)
    for c in cols:
        same = same & F.coalesce(F.col(f"a_{c}") == F.col(f"b_{c}"), F.lit(False))
    detail = F.struct(*[F.col(f"{s}_{c}") for s in "ab" for c in ("last_offset", "leader_epoch",
                                                                     "batch_crc")])
    summary = both.where(~same).groupBy(*KEY, "a", "b", "hw_a", "hw_b").agg(
        F.min("base").alias("first"), F.max("base").alias("max_base"),
        F.count(F.lit(1)).alias("batches"), F.min_by(detail, F.col("base")).alias("d"),
    ).orderBy(*KEY, "a", "b").collect()
    out = []
    for s in summary:
        topic, partition, first = s["topic"], s["partition"], s["first"]
        if any(c.topic == topic and c.partition == partition and c.node_id in (s["a"], s["b"])
               and c.first <= first and s["max_base"] <= c.last for c in cuts):
            continue  # reported as the unclean election's cut
        d = s["d"]
        sides = []
        for name in "ab":
            if d[f"{name}_last_offset"] is None:
                sides.append(f"node {s[name]} has no batch starting there")
            else:
                sides.append(f"node {s[name]} has offsets {first}..{d[f'{name}_last_offset']} "
                             f"in epoch {d[f'{name}_leader_epoch']} CRC "
                             f"{d[f'{name}_batch_crc']:#010x}")
        out.append(Finding(
            VIOLATION, "partition-divergence", s["a"], first,
            f"{topic}-{partition}: node {s['a']} and node {s['b']} differ at offset {first}, "
            f"below both high watermarks ({s['hw_a']}, {s['hw_b']}): {'; '.join(sides)} "
            f"({s['batches']} differing batch(es); no unclean election of the partition "
            "explains it)"))
    return out
