"""The partition replay as it was first written, one Python step per record: the executable
statement of the partition rules, kept to check the JVM replay against
(test_replay_rules.py). Rows must come sorted by (topic_id, partition, offset, record_index).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from audit.findings import VIOLATION, WARNING

ROW_FIELDS = ("node_id", "offset", "record_index", "timestamp_ms", "record_type", "topic_id",
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


class ReferenceReplayer:
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

    def feed(self, rows: list[dict]) -> list[dict]:
        out: list[dict] = []
        for row in rows:
            r = _Row(*(row[name] for name in ROW_FIELDS))
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
            # Without the earlier history, a broker with no event yet is unknown.
            if state != "unfenced" and (self.complete or state != "unregistered"):
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
