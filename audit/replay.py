"""Metadata invariants and timelines, by replaying one copy of the log in offset order.

The canonical log takes each offset from the lowest node id that holds it (the consistency
checks report where nodes differ), seeded from a snapshot when no node's log starts at 0.
Broker and topic records are few: the driver replays them into fence intervals, topic
lifetimes and the broker timeline. Partition records are most of a log: Spark SQL groups them
by partition, orders them by offset and replays them with window functions (a forward fill of
the fields a change sets, running counts for the epochs), then checks every rule at every
record as column expressions, with the fence intervals and topic lifetimes broadcast.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from audit.consistency import NodeRange
from audit.findings import VIOLATION, WARNING, Finding

BROKER_TYPES = ("REGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD",
                "UNREGISTER_BROKER_RECORD")
TOPIC_TYPES = ("TOPIC_RECORD", "REMOVE_TOPIC_RECORD", "CONFIG_RECORD")
PARTITION_TYPES = ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD")
TOPIC_RESOURCE = 2

# Every column the replay and its filters read.
REPLAY_COLUMNS = (
    "node_id", "source_file", "source_kind", "offset", "record_index", "timestamp_ms",
    "is_control", "record_type", "error", "broker_id", "broker_epoch", "incarnation_id", "fenced",
    "in_controlled_shutdown", "topic_id", "topic_name", "partition", "leader", "replicas",
    "isr", "leader_epoch", "partition_epoch", "leader_recovery_state", "config_resource_type",
    "config_resource_name", "config_key",
)
OUT_SCHEMA = pa.schema([
    ("kind", pa.string()),  # "finding" | "leader_change"
    ("severity", pa.string()),
    ("check", pa.string()),
    ("node_id", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp_ms", pa.int64()),
    ("topic_id", pa.string()),
    ("topic_name", pa.string()),
    ("partition", pa.int32()),
    ("prev_leader", pa.int32()),
    ("leader", pa.int32()),
    ("leader_epoch", pa.int32()),
    ("partition_epoch", pa.int32()),
    ("unclean", pa.bool_()),
    ("detail", pa.string()),
])
OUT_DDL = ("kind string, severity string, check string, node_id int, offset bigint, "
           "timestamp_ms bigint, topic_id string, topic_name string, partition int, "
           "prev_leader int, leader int, leader_epoch int, partition_epoch int, "
           "unclean boolean, detail string")


@dataclass(frozen=True)
class CanonicalPlan:
    """Which node supplies which offsets of the one copy the replay reads, and the snapshot
    that seeds it when no node's log starts at 0."""

    node_ranges: dict[int, list[tuple[int, int]]]
    start: int  # the offset the replay starts from
    complete: bool  # whether it starts from a complete state (offset 0 or a snapshot)
    seed: tuple[int, int, str] | None  # (end offset, node, path) of the seeding snapshot


def plan_canonical(ranges: list[NodeRange],
                   snapshots: list[tuple[int, int, str]]) -> CanonicalPlan:
    """Each offset from the lowest node id that holds it (the consistency checks report where
    nodes differ). `snapshots` is (end offset, node, path) of every snapshot."""
    covered: list[tuple[int, int]] = []
    pieces: dict[int, list[tuple[int, int]]] = {}
    for r in sorted(ranges, key=lambda r: r.node_id):
        pieces[r.node_id] = _subtract((r.start, r.end), covered)
        covered.append((r.start, r.end))
    log_start = min((lo for lo, hi in covered if hi > lo), default=0)
    seed = max((s for s in snapshots if s[0] >= log_start), default=None) if log_start else None
    if seed is not None:
        # Everything below the snapshot's end comes from the snapshot.
        pieces = {n: [(max(lo, seed[0]), hi) for lo, hi in spans if hi > seed[0]]
                  for n, spans in pieces.items()}
        return CanonicalPlan(pieces, seed[0], True, seed)
    return CanonicalPlan(pieces, log_start, log_start == 0, None)


def canonical_rows(records: DataFrame, plan: CanonicalPlan) -> DataFrame:
    """The plan's rows out of a record-level read that already follows its node ranges."""
    segments = records.where((F.col("source_kind") == "segment") & F.col("error").isNull())
    if plan.seed is None:
        return segments
    return segments.unionByName(records.where(
        (F.col("source_file") == plan.seed[2]) & (F.col("is_control") == F.lit(False))
        & F.col("error").isNull()))


def _subtract(span: tuple[int, int], covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    pieces = [span]
    for lo, hi in covered:
        nxt = []
        for a, b in pieces:
            if hi <= a or lo >= b:
                nxt.append((a, b))
                continue
            if a < lo:
                nxt.append((a, lo))
            if hi < b:
                nxt.append((hi, b))
        pieces = nxt
    return [(a, b) for a, b in pieces if b > a]


# -- brokers and topics, on the driver ---------------------------------------------------------


@dataclass
class ClusterHistory:
    """Broker states by offset, topic lifetimes, the broker timeline and driver findings."""

    # broker -> sorted offsets and the state from each: "fenced", "unfenced", "shutdown", "gone"
    broker_offsets: dict[int, list[int]] = field(default_factory=dict)
    broker_states: dict[int, list[str]] = field(default_factory=dict)
    topics: dict[str, tuple[str, int, int | None]] = field(default_factory=dict)
    broker_events: list[dict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def cluster_history(rows: DataFrame, complete: bool) -> ClusterHistory:
    small = rows.where(F.col("record_type").isin(*BROKER_TYPES, *TOPIC_TYPES)).select(
        "node_id", "offset", "record_index", "timestamp_ms", "record_type", "broker_id",
        "broker_epoch", "incarnation_id", "fenced", "in_controlled_shutdown", "topic_id",
        "topic_name",
        "config_resource_type", "config_resource_name", "config_key",
    ).orderBy("offset", "record_index").collect()
    h = ClusterHistory()
    offsets: dict[int, list[int]] = defaultdict(list)
    states: dict[int, list[str]] = defaultdict(list)
    epochs: dict[int, int] = {}
    incarnations: dict[int, str] = {}
    current: dict[int, str] = {}
    names: dict[str, str] = {}

    def event(r, broker: int, what: str, state: str) -> None:  # type: ignore[no-untyped-def]
        offsets[broker].append(r["offset"])
        states[broker].append(state)
        current[broker] = state
        h.broker_events.append({"offset": r["offset"], "timestamp_ms": r["timestamp_ms"],
                                "broker_id": broker, "event": what,
                                "broker_epoch": r["broker_epoch"], "state": state})

    for r in small:
        kind, broker, offset = r["record_type"], r["broker_id"], r["offset"]
        if kind == "REGISTER_BROKER_RECORD":
            last = epochs.get(broker)
            # A registration re-sent by the same incarnation (its answer was lost with a
            # controller) keeps its epoch, as in Kafka; a new incarnation needs a higher one.
            resent = incarnations.get(broker) == r["incarnation_id"]
            if last is not None and not resent and r["broker_epoch"] <= last:
                h.findings.append(Finding(
                    VIOLATION, "stale-broker-epoch", r["node_id"], offset,
                    f"broker {broker} registers with epoch {r['broker_epoch']}, not above its "
                    f"previous epoch {last}"))
            epochs[broker] = r["broker_epoch"]
            incarnations[broker] = r["incarnation_id"]
            state = "shutdown" if r["in_controlled_shutdown"] else (
                "fenced" if r["fenced"] else "unfenced")
            event(r, broker, "REGISTER", state)
        elif kind == "BROKER_REGISTRATION_CHANGE_RECORD":
            if epochs.get(broker) != r["broker_epoch"]:
                h.findings.append(Finding(
                    VIOLATION, "stale-broker-epoch", r["node_id"], offset,
                    f"registration change for broker {broker} with epoch {r['broker_epoch']}; "
                    f"its registration has epoch {epochs.get(broker)}"))
            if r["in_controlled_shutdown"]:
                event(r, broker, "CONTROLLED_SHUTDOWN", "shutdown")
            if r["fenced"] is True:
                event(r, broker, "FENCE", "fenced")
            elif r["fenced"] is False:
                event(r, broker, "UNFENCE", "shutdown" if current.get(broker) == "shutdown"
                      else "unfenced")
        elif kind == "UNREGISTER_BROKER_RECORD":
            event(r, broker, "UNREGISTER", "gone")
            epochs.pop(broker, None)
        elif kind == "TOPIC_RECORD":
            name, tid = r["topic_name"], r["topic_id"]
            if name in names:
                h.findings.append(Finding(VIOLATION, "duplicate-topic", r["node_id"], offset,
                                          f"topic {name} created again (id {tid}) while "
                                          f"{names[name]} exists"))
            names[name] = tid
            h.topics[tid] = (name, offset, None)
        elif kind == "REMOVE_TOPIC_RECORD":
            tid = r["topic_id"]
            if tid not in h.topics or h.topics[tid][2] is not None:
                if complete:
                    h.findings.append(Finding(VIOLATION, "unknown-topic", r["node_id"], offset,
                                              f"RemoveTopicRecord names topic id {tid}, which "
                                              "does not exist"))
                continue
            name, created, _ = h.topics[tid]
            h.topics[tid] = (name, created, offset)
            names.pop(name, None)
        elif (kind == "CONFIG_RECORD" and r["config_resource_type"] == TOPIC_RESOURCE
              and r["config_resource_name"] not in names and complete):
            h.findings.append(Finding(
                VIOLATION, "unknown-topic", r["node_id"], offset,
                f"ConfigRecord {r['config_key']} for topic {r['config_resource_name']}, which "
                "does not exist"))
    h.broker_offsets, h.broker_states = dict(offsets), dict(states)
    return h


# -- partitions, in Spark SQL -----------------------------------------------------------------
#
# A partition's state after a record is its last PartitionRecord with the later changes applied:
# ISR, replicas and leader are the last value set (a forward fill, `last(..., ignorenulls)`);
# each change bumps the partition epoch and each leader move the leader epoch, so an epoch is
# the PartitionRecord's value plus the number of changes (moves) since it. The state before a
# record is the same over the rows before it. Every rule is then a column expression.

_ROW_FIELDS = ("node_id", "offset", "record_index", "timestamp_ms", "record_type", "topic_id",
               "partition", "leader", "replicas", "isr", "leader_epoch", "partition_epoch",
               "leader_recovery_state")
_OFFSET_BUCKETS = 64  # a broker state lookup compares a handful of intervals, not all


def partition_replay(rows: DataFrame, history: ClusterHistory, complete: bool,
                     partitions: int, end_offset: int) -> DataFrame:
    """Findings and leader changes of every partition, as rows of OUT_SCHEMA. `end_offset`
    (one past the last offset) sizes the offset buckets of the broker state lookup."""
    spark = rows.sparkSession
    col, lit = F.col, F.lit
    w = Window.partitionBy("topic_id", "partition").orderBy("offset", "record_index")
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    create = col("record_type") == "PARTITION_RECORD"
    change = (~create).cast("int")
    move = (~create & col("leader").isNotNull()).cast("int")
    parts = rows.where(col("record_type").isin(*PARTITION_TYPES)).select(
        *_ROW_FIELDS).repartition(partitions, "topic_id", "partition")
    filled = parts.select(
        "*",
        F.sum(create.cast("int")).over(upto).alias("creates"),
        F.sum(change).over(upto).alias("changes"),
        F.sum(move).over(upto).alias("moves"),
        F.last("leader", True).over(upto).alias("new_leader"),
        F.last("isr", True).over(upto).alias("new_isr"),
        F.last("replicas", True).over(upto).alias("new_replicas"),
        F.last("leader", True).over(before).alias("prev_leader"),
        F.last("isr", True).over(before).alias("prev_isr"),
    )
    leader_base = F.when(create, col("leader_epoch") - col("moves"))
    partition_base = F.when(create, col("partition_epoch") - col("changes"))
    state = filled.select(
        "*",
        (F.last(leader_base, True).over(upto) + col("moves")).alias("new_leader_epoch"),
        (F.last(partition_base, True).over(upto) + col("changes")).alias("new_partition_epoch"),
        (F.last(leader_base, True).over(before) + col("moves") - move).alias("prev_leader_epoch"),
        (F.last(partition_base, True).over(before) + col("changes") - change).alias(
            "prev_partition_epoch"),
    )
    bits = max(16, (max(end_offset, 1) // _OFFSET_BUCKETS).bit_length())
    state = state.join(F.broadcast(_topics_frame(spark, history)), "topic_id", "left")
    state = state.withColumn("broker_key", F.when(
        (create | col("leader").isNotNull()) & (col("new_leader") != -1), col("new_leader")))
    brokers = F.broadcast(_broker_intervals(spark, history, bits, end_offset))
    state = state.join(brokers, (col("broker_key") == col("b_broker"))
                       & (F.shiftright(col("offset"), bits) == col("b_bucket"))
                       & (col("offset") >= col("b_from")) & (col("offset") < col("b_to")),
                       "left")
    return state.select(F.explode(F.array_compact(F.array(*_events(create, complete)))).alias(
        "e"), "*").select(
        col("e.kind").alias("kind"), col("e.severity").alias("severity"),
        col("e.check").alias("check"), "node_id", "offset", "timestamp_ms", "topic_id",
        F.coalesce("topic_name", lit("?")).alias("topic_name"), "partition",
        *[F.when(col("e.kind") == "leader_change", c).alias(name) for c, name in (
            (F.when(col("creates") - create.cast("int") >= 1, col("prev_leader")),
             "prev_leader"),
            (col("new_leader"), "leader"),
            (col("new_leader_epoch").cast("int"), "leader_epoch"),
            (col("new_partition_epoch").cast("int"), "partition_epoch"),
            (col("e.unclean"), "unclean"))],
        col("e.detail").alias("detail"))


def _list(ints: Column) -> Column:
    """An int array as Python prints a list: [1, 2, 3]."""
    return F.concat(F.lit("["), F.array_join(ints, ", "), F.lit("]"))


def _events(create: Column, complete: bool) -> list[Column]:
    """Per row, a struct for each rule it breaks and one for a leader change (else null)."""
    col, lit = F.col, F.lit
    leader, offset = col("new_leader"), col("offset")
    has_prev = col("creates") - create.cast("int") >= 1  # a state before this record
    known = create | (col("creates") >= 1)  # a change to a partition that exists
    leader_set = known & (create | col("leader").isNotNull())
    alive = (col("created").isNotNull() & (col("created") <= offset)
             & (col("removed").isNull() | (offset < col("removed"))))
    broker_state = F.coalesce(col("b_state"), lit("unregistered"))
    recovering = ~create & (col("leader_recovery_state") == 1)
    unclean = (leader_set & (leader != -1) & has_prev & (col("prev_leader") != leader)
               & (~F.array_contains(col("prev_isr"), leader) | recovering))
    lost = F.array_sort(F.array_distinct(F.array_remove(col("prev_isr"), leader)))
    name = F.concat(F.coalesce(col("topic_name"), lit("?")), lit("-"), col("partition"),
                    lit(": "))

    def finding(hit: Column, severity: str, check: str, detail: Column) -> Column:
        return F.when(hit, F.struct(lit("finding").alias("kind"), lit(severity).alias(
            "severity"), lit(check).alias("check"), F.concat(name, detail).alias("detail"),
            lit(None).cast("boolean").alias("unclean")))

    rules = [
        finding(~alive & (lit(complete) | col("created").isNotNull()), VIOLATION,
                "unknown-topic", F.format_string(
                    "%s names topic id %s, which does not exist at offset %d",
                    col("record_type"), col("topic_id"), offset)),
        finding(~known & lit(complete), VIOLATION, "unknown-partition",
                lit("PartitionChangeRecord for a partition never created")),
        *[finding(create & has_prev & (col(f"new_{e}") < col(f"prev_{e}")), VIOLATION,
                  f"{e.replace('_', '-')}-decrease",
                  F.format_string(f"{e} %d after %d", col(f"new_{e}"), col(f"prev_{e}")))
          for e in ("leader_epoch", "partition_epoch")],
        finding(known & (leader != -1) & ~F.array_contains(col("new_isr"), leader), VIOLATION,
                "leader-not-in-isr", F.concat(lit("leader "), leader,
                                              lit(" is not in the ISR "), _list(col("new_isr")))),
        finding(known & (F.size(F.array_except(col("new_isr"), col("new_replicas"))) > 0),
                VIOLATION, "isr-not-subset-of-replicas",
                F.concat(lit("ISR "), _list(col("new_isr")), lit(" is not within the replicas "),
                         _list(col("new_replicas")))),
        finding(leader_set & (leader != -1) & (broker_state != "unfenced"), VIOLATION,
                "leader-on-fenced-broker", F.concat(lit("leader "), leader, lit(" is "),
                                                    broker_state, lit(" at this offset"))),
        finding(unclean, WARNING, "unclean-election", F.concat(
            lit("leader "), leader, lit(" was not in the ISR "), _list(col("prev_isr")),
            lit("; replicas that lost data: "), _list(lost))),
        F.when(leader_set & (~has_prev | (col("prev_leader") != leader) | ~create), F.struct(
            lit("leader_change").alias("kind"), lit(None).cast("string").alias("severity"),
            lit(None).cast("string").alias("check"), lit(None).cast("string").alias("detail"),
            F.coalesce(unclean, lit(False)).alias("unclean"))),
    ]
    return rules


def _topics_frame(spark: SparkSession, history: ClusterHistory) -> DataFrame:
    return spark.createDataFrame(
        [(tid, name, created, removed) for tid, (name, created, removed) in
         history.topics.items()],
        "topic_id string, topic_name string, created bigint, removed bigint")


def _broker_intervals(spark: SparkSession, history: ClusterHistory, bits: int,
                      end_offset: int) -> DataFrame:
    """Each broker state as [from, to) offsets, split by offset bucket (offset >> bits) so the
    lookup joins on (broker, bucket) and compares only the intervals in that bucket. Before
    its first record a broker is unregistered (no interval: the lookup's default)."""
    rows = []
    last_bucket = max(end_offset - 1, 0) >> bits
    for broker, offsets in history.broker_offsets.items():
        states = history.broker_states[broker]
        for i, (start, state) in enumerate(zip(offsets, states, strict=True)):
            stop = offsets[i + 1] if i + 1 < len(offsets) else 1 << 62
            if stop <= start:
                continue  # a later event at the same offset wins
            top = last_bucket if i + 1 == len(offsets) else (stop - 1) >> bits
            for bucket in range(start >> bits, max(top, start >> bits) + 1):
                rows.append((broker, bucket, start, stop, state))
    return spark.createDataFrame(
        rows, "b_broker int, b_bucket bigint, b_from bigint, b_to bigint, b_state string")
