"""Metadata invariants and timelines, by replaying one copy of the log in offset order.

The canonical log takes each offset from the lowest node id that holds it (the consistency
checks report where nodes differ), seeded from a snapshot when no node's log starts at 0.
Broker, topic, ACL and SCRAM credential records are few: the driver replays them into fence
intervals, topic lifetimes, the broker timeline, the ACL ids and the credentials in force.
Partition records are most of a log: Spark tasks on the JVM replay them in offset order, each
for the partitions that hash to it, with those intervals at hand, checking every rule at every
record (audit/jvm/src/io/kraft/audit/PartitionReplay.java).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TypedDict

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from audit import jvm
from audit.consistency import NodeRange
from audit.decode import ReadOptions
from audit.findings import VIOLATION, Finding
from audit.layout import NodeLog
from audit.source import FilePartition, KraftMetadataReader
from metadata.scram import ScramMechanism

BROKER_TYPES = ("REGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD",
                "UNREGISTER_BROKER_RECORD")
TOPIC_TYPES = ("TOPIC_RECORD", "REMOVE_TOPIC_RECORD", "CONFIG_RECORD")
ACL_TYPES = ("ACCESS_CONTROL_ENTRY_RECORD", "REMOVE_ACCESS_CONTROL_ENTRY_RECORD")
SCRAM_TYPES = ("USER_SCRAM_CREDENTIAL_RECORD", "REMOVE_USER_SCRAM_CREDENTIAL_RECORD")
PARTITION_TYPES = ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD")
TOPIC_RESOURCE = 2

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


class BrokerEvent(TypedDict):
    """A row of broker_events.parquet: a registration or a controlled shutdown."""

    offset: int
    timestamp_ms: int
    broker_id: int
    event: str  # REGISTER, CONTROLLED_SHUTDOWN, FENCE, UNFENCE or UNREGISTER
    broker_epoch: int
    state: str  # the broker's state from here: fenced, unfenced, shutdown, gone


@dataclass
class ClusterHistory:
    """Broker states by offset, topic lifetimes, the broker timeline and driver findings."""

    # broker -> sorted offsets and the state from each: "fenced", "unfenced", "shutdown", "gone"
    broker_offsets: dict[int, list[int]] = field(default_factory=dict)
    broker_states: dict[int, list[str]] = field(default_factory=dict)
    topics: dict[str, tuple[str, int, int | None]] = field(default_factory=dict)
    broker_events: list[BrokerEvent] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def cluster_history(rows: DataFrame, complete: bool) -> ClusterHistory:
    small = rows.where(F.col("record_type").isin(
        *BROKER_TYPES, *TOPIC_TYPES, *ACL_TYPES, *SCRAM_TYPES)).select(
        "node_id", "offset", "record_index", "timestamp_ms", "record_type", "broker_id",
        "broker_epoch", "incarnation_id", "fenced", "in_controlled_shutdown", "topic_id",
        "topic_name",
        "config_resource_type", "config_resource_name", "config_key", "acl_id", "scram_user",
        "scram_mechanism",
    ).orderBy("offset", "record_index").collect()
    h = ClusterHistory()
    offsets: dict[int, list[int]] = defaultdict(list)
    states: dict[int, list[str]] = defaultdict(list)
    epochs: dict[int, int] = {}
    incarnations: dict[int, str] = {}
    current: dict[int, str] = {}
    names: dict[str, str] = {}
    acls = _AclIds(complete)
    scram = _ScramCredentials(complete)

    def event(r: Row, broker: int, what: str, state: str) -> None:
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
        elif kind in ACL_TYPES:
            finding = acls.replay(r)
            if finding is not None:
                h.findings.append(finding)
        elif kind in SCRAM_TYPES:
            finding = scram.replay(r)
            if finding is not None:
                h.findings.append(finding)
    h.broker_offsets, h.broker_states = dict(offsets), dict(states)
    return h


class _AclIds:
    """The ACL ids in force, replayed as Kafka's AclControlManager.replay does: an id names one
    binding for good, so creating an id in force (`duplicate-acl`) or removing one that is not
    (`unknown-acl`) breaks the rule every node's replay enforces (metadata/delta.py stops on
    it). Without the earlier history a removal is not judged: its creation may lie before."""

    def __init__(self, complete: bool) -> None:
        self.complete = complete
        self.created: dict[str, int] = {}  # id in force -> offset of its creation
        self.removed: dict[str, int] = {}  # id removed -> offset of its removal

    def replay(self, r: Row) -> Finding | None:
        acl_id, offset = r["acl_id"], r["offset"]
        if r["record_type"] == "ACCESS_CONTROL_ENTRY_RECORD":
            if acl_id in self.created:
                return Finding(VIOLATION, "duplicate-acl", r["node_id"], offset,
                               f"AccessControlEntryRecord creates ACL id {acl_id}, already in "
                               f"force since offset {self.created[acl_id]}")
            self.created[acl_id] = offset
            self.removed.pop(acl_id, None)
            return None
        if acl_id in self.created:
            del self.created[acl_id]
            self.removed[acl_id] = offset
            return None
        if not self.complete:
            return None
        why = (f"removed at offset {self.removed[acl_id]}" if acl_id in self.removed
               else "never created")
        return Finding(VIOLATION, "unknown-acl", r["node_id"], offset,
                       f"RemoveAccessControlEntryRecord removes ACL id {acl_id}, which is not in "
                       f"force ({why})")


class _ScramCredentials:
    """The (user, mechanism) credentials in force, replayed as Kafka's
    ScramControlManager.replay does: a UserScramCredentialRecord creates or replaces one, a
    RemoveUserScramCredentialRecord must find one (`unknown-scram-credential`), or every
    node's replay stops (metadata/delta.py). Without the earlier history a removal is not
    judged: its credential may have been created before the log start."""

    def __init__(self, complete: bool) -> None:
        self.complete = complete
        self.in_force: set[tuple[str, int]] = set()
        self.removed: dict[tuple[str, int], int] = {}  # removed -> offset of its removal

    def replay(self, r: Row) -> Finding | None:
        key = (r["scram_user"], r["scram_mechanism"])
        if r["record_type"] == "USER_SCRAM_CREDENTIAL_RECORD":
            self.in_force.add(key)
            self.removed.pop(key, None)
            return None
        if key in self.in_force:
            self.in_force.remove(key)
            self.removed[key] = r["offset"]
            return None
        if not self.complete:
            return None
        why = (f"removed at offset {self.removed[key]}" if key in self.removed
               else "never created")
        mechanism = ScramMechanism.of_code(key[1])
        name = (f"mechanism {key[1]}" if mechanism is ScramMechanism.UNKNOWN
                else mechanism.mechanism_name)
        return Finding(VIOLATION, "unknown-scram-credential", r["node_id"], r["offset"],
                       f"RemoveUserScramCredentialRecord removes the {name} credential of user "
                       f"{key[0]!r}, which is not in force ({why})")


# -- partitions, on the JVM ------------------------------------------------------------------


def canonical_files(logs: list[NodeLog], plan: CanonicalPlan, node_ranges_option: str,
                    spark: SparkSession | None = None) -> list[FilePartition]:
    """The files of the canonical copy in offset order: the seeding snapshot, then every
    node's segments within its planned ranges."""
    reader = KraftMetadataReader({
        "paths": json.dumps([log.partition_dir for log in logs]),
        "nodeids": ",".join(str(log.node_id) for log in logs),
        "includejson": "false", "includesnapshots": "false",
        "noderanges": node_ranges_option})
    segments = [p for p in reader.plan(spark) if isinstance(p, FilePartition)]
    segments.sort(key=lambda p: max(p.log_file.base_offset, p.options.start_offset))
    if plan.seed is None:
        return segments
    seed = next(s for log in logs for s in log.snapshots if s.path == plan.seed[2])
    return [FilePartition(seed, ReadOptions(with_json=False)), *segments]


def history_json(history: ClusterHistory) -> str:
    """The fence intervals and topic lifetimes, for the JVM replay (ClusterHistory.java)."""
    return json.dumps({
        "brokers": {str(b): [[o, s] for o, s in zip(offsets, history.broker_states[b],
                                                    strict=True)]
                    for b, offsets in history.broker_offsets.items()},
        "topics": [[tid, name, created, removed]
                   for tid, (name, created, removed) in history.topics.items()],
    })


def partition_replay(spark: SparkSession, files: list[FilePartition], history: ClusterHistory,
                     complete: bool, shards: int) -> DataFrame:
    """Findings and leader changes of every partition, as rows of OUT_SCHEMA: `shards` Spark
    tasks (io.kraft.audit.PartitionReplay), each replaying the partitions that hash to it
    over the canonical files in offset order. The log is in offset order already, so this
    needs no shuffle and no sort; a Spark SQL version with window functions did the same at
    a tenth of the speed (docs/benchmarks.md)."""
    return jvm.replay(spark, files, history_json(history), complete, shards, OUT_DDL)
