"""Metadata invariants and timelines, by replaying one copy of the log in offset order.

The canonical log takes each offset from the lowest node id that holds it (the consistency
checks report where nodes differ), seeded from a snapshot when no node's log starts at 0.
Broker and topic records are few: the driver replays them into fence intervals, topic
lifetimes and the broker timeline. Partition records are most of a log: Spark groups them by
partition, sorts by offset, and each task replays its partitions with those intervals at
hand (`mapInArrow`), checking every rule at every record.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import pyarrow as pa
from pyspark.sql import DataFrame
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


# -- partitions, in Spark tasks ---------------------------------------------------------------


def partition_replay(rows: DataFrame, history: ClusterHistory, complete: bool,
                     partitions: int) -> DataFrame:
    """Findings and leader changes of every partition, as rows of OUT_SCHEMA."""
    parts = rows.where(F.col("record_type").isin(*PARTITION_TYPES)).select(
        *_ROW_FIELDS).repartition(partitions, "topic_id", "partition").sortWithinPartitions(
        "topic_id", "partition", "offset", "record_index")
    broker_offsets, broker_states = history.broker_offsets, history.broker_states
    topics = history.topics

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        replayer = _PartitionReplayer(broker_offsets, broker_states, topics, complete)
        for batch in batches:
            out = replayer.feed(batch)
            if out:
                yield pa.RecordBatch.from_pylist(out, schema=OUT_SCHEMA)

    return parts.mapInArrow(run, OUT_DDL)


_ROW_FIELDS = ("node_id", "offset", "record_index", "timestamp_ms", "record_type", "topic_id",
               "partition", "leader", "replicas", "isr", "leader_epoch", "partition_epoch",
               "leader_recovery_state")


class _Row(NamedTuple):
    node_id: int
    offset: int
    record_index: int | None
    timestamp_ms: int
    record_type: str
    topic_id: str
    partition: int
    leader: int | None
    replicas: list[int] | None
    isr: list[int] | None
    leader_epoch: int | None
    partition_epoch: int | None
    leader_recovery_state: int | None


class _PartitionReplayer:
    """Replays one task's rows (sorted by partition, then offset); keeps one partition's
    state at a time."""

    def __init__(self, broker_offsets: dict[int, list[int]],
                 broker_states: dict[int, list[str]],
                 topics: dict[str, tuple[str, int, int | None]], complete: bool) -> None:
        self.broker_offsets = broker_offsets
        self.broker_states = broker_states
        self.topics = topics
        self.complete = complete
        self.key: tuple[str, int] | None = None
        self.state: dict | None = None

    def broker_state(self, broker: int, offset: int) -> str:
        offsets = self.broker_offsets.get(broker)
        if not offsets:
            return "unregistered"
        i = bisect_right(offsets, offset)
        return self.broker_states[broker][i - 1] if i else "unregistered"

    def feed(self, batch: pa.RecordBatch) -> list[dict]:
        out: list[dict] = []
        # Column lists zipped into tuples: a dict per row (to_pylist) costs twice as much.
        columns = [batch.column(name).to_pylist() for name in _ROW_FIELDS]
        for values in zip(*columns, strict=True):
            r = _Row(*values)
            key = (r.topic_id, r.partition)
            if key != self.key:
                self.key, self.state = key, None
            self.step(r, out)
        return out

    def finding(self, out: list[dict], r: _Row, severity: str, check: str,
                detail: str) -> None:
        name = self.topics.get(r.topic_id, ("?",))[0]
        out.append({"kind": "finding", "severity": severity, "check": check,
                    "node_id": r.node_id, "offset": r.offset,
                    "timestamp_ms": r.timestamp_ms, "topic_id": r.topic_id,
                    "topic_name": name, "partition": r.partition,
                    "detail": f"{name}-{r.partition}: {detail}"})

    def step(self, r: _Row, out: list[dict]) -> None:
        offset, tid = r.offset, r.topic_id
        topic = self.topics.get(tid)
        alive = topic is not None and topic[1] <= offset and (topic[2] is None
                                                               or offset < topic[2])
        if not alive and (self.complete or topic is not None):
            self.finding(out, r, VIOLATION, "unknown-topic",
                         f"{r.record_type} names topic id {tid}, which does not exist at "
                         f"offset {offset}")
        prev = self.state
        if r.record_type == "PARTITION_RECORD":
            new = {"leader": r.leader, "replicas": r.replicas, "isr": r.isr,
                   "leader_epoch": r.leader_epoch, "partition_epoch": r.partition_epoch}
            if prev is not None:
                for epoch in ("leader_epoch", "partition_epoch"):
                    if new[epoch] < prev[epoch]:
                        self.finding(out, r, VIOLATION, f"{epoch.replace('_', '-')}-decrease",
                                     f"{epoch} {new[epoch]} after {prev[epoch]}")
            leader_set = True
        else:
            if prev is None:
                if self.complete:
                    self.finding(out, r, VIOLATION, "unknown-partition",
                                 "PartitionChangeRecord for a partition never created")
                return
            new = dict(prev)
            if r.isr is not None:
                new["isr"] = r.isr
            if r.replicas is not None:
                new["replicas"] = r.replicas
            leader_set = r.leader is not None
            if leader_set:
                new["leader"] = r.leader
                new["leader_epoch"] = prev["leader_epoch"] + 1
            new["partition_epoch"] = prev["partition_epoch"] + 1
        self.state = new
        leader, isr, replicas = new["leader"], new["isr"], new["replicas"]
        if leader != -1 and leader not in isr:
            self.finding(out, r, VIOLATION, "leader-not-in-isr",
                         f"leader {leader} is not in the ISR {list(isr)}")
        if not set(isr) <= set(replicas):
            self.finding(out, r, VIOLATION, "isr-not-subset-of-replicas",
                         f"ISR {list(isr)} is not within the replicas {list(replicas)}")
        if not leader_set:
            return
        unclean = False
        if leader != -1:
            state = self.broker_state(leader, offset)
            if state != "unfenced":
                self.finding(out, r, VIOLATION, "leader-on-fenced-broker",
                             f"leader {leader} is {state} at this offset")
            recovering = (r.record_type == "PARTITION_CHANGE_RECORD"
                          and r.leader_recovery_state == 1)
            if prev is not None and prev["leader"] != leader and (
                    leader not in prev["isr"] or recovering):
                unclean = True
                lost = sorted(set(prev["isr"]) - {leader})
                self.finding(out, r, WARNING, "unclean-election",
                             f"leader {leader} was not in the ISR {list(prev['isr'])}; "
                             f"replicas that lost data: {lost}")
        if prev is None or prev["leader"] != leader or r.record_type != "PARTITION_RECORD":
            name = self.topics.get(tid, ("?",))[0]
            out.append({"kind": "leader_change", "node_id": r.node_id, "offset": offset,
                        "timestamp_ms": r.timestamp_ms, "topic_id": tid,
                        "topic_name": name, "partition": r.partition,
                        "prev_leader": None if prev is None else prev["leader"],
                        "leader": leader, "leader_epoch": new["leader_epoch"],
                        "partition_epoch": new["partition_epoch"], "unclean": unclean})
