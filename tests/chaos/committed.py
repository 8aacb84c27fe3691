"""The committed metadata as each node's files hold it: the node's log up to its
`high-watermark` file (a lower bound of what it knew committed), records decoded, and — when
a fetched snapshot replaced the start of its log — the state of the snapshot the log starts
at. A node whose log cannot be read up to its high watermark (a corrupt batch, a missing
segment, a log that ends short of it, no snapshot below a log that starts above 0) carries a
`problem` naming the file and the offset: the checks fail the run on it."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kraft.log.base import CorruptRecordError
from kraft.log.codec import decode_batches
from kraft.log.segmented import list_segments
from kraft.log.snapshots import parse_snapshot_file_name, read_snapshot_records
from metadata.records import (
    ConfigRecord,
    Record,
    RemoveTopicRecord,
    TopicRecord,
    decode_record,
)
from metadata.topics import METADATA_PARTITION_DIR


@functools.lru_cache(maxsize=1 << 18)
def decode(data: bytes) -> Record:
    """decode_record, once per distinct record: every node holds the same records."""
    return decode_record(data)


@dataclass
class ChaosState:
    """The chaos part of a metadata image: topics with the prefix (name -> id) and every
    config set on them ((topic, key) -> value; a deleted key is absent)."""

    topics: dict[str, str] = field(default_factory=dict)
    configs: dict[tuple[str, str], str] = field(default_factory=dict)

    def apply(self, data: bytes, prefix: str) -> None:
        record = decode(data)
        if isinstance(record, TopicRecord) and record.name.startswith(prefix):
            self.topics[record.name] = record.topic_id
        elif isinstance(record, ConfigRecord) and record.resource_name.startswith(prefix):
            key = (record.resource_name, record.name)
            if record.value is None:
                self.configs.pop(key, None)
            else:
                self.configs[key] = record.value
        elif isinstance(record, RemoveTopicRecord):
            for name in [n for n, i in self.topics.items() if i == record.topic_id]:
                del self.topics[name]
                for key in [k for k in self.configs if k[0] == name]:
                    del self.configs[key]

    def copy(self) -> ChaosState:
        return ChaosState(dict(self.topics), dict(self.configs))

    def config(self, topic: str, key: str) -> str | None:
        return self.configs.get((topic, key))


def state_of(records: Iterable[bytes], prefix: str, base: ChaosState | None = None
             ) -> ChaosState:
    state = base.copy() if base is not None else ChaosState()
    for data in records:
        state.apply(data, prefix)
    return state


@dataclass
class NodeLog:
    node_id: int
    start: int  # the log's first offset (above 0 only when a snapshot replaced the prefix)
    committed_end: int  # exclusive: min(high-watermark file, end of the readable log)
    hw_file: int | None
    # offset -> (epoch, record bytes), for committed offsets only
    records: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    control: set[int] = field(default_factory=set)  # committed offsets of control records
    base_snapshot: str = ""  # the snapshot the log starts at, when start > 0
    base_records: list[bytes] = field(default_factory=list)  # its state records
    problems: list[str] = field(default_factory=list)  # unreadable below the HW: fails
    note: str = ""  # harmless, e.g. a torn tail above the HW

    def data_records(self) -> list[tuple[int, bytes]]:
        """(offset, bytes) of the committed metadata records (no control records), in order."""
        return [(o, self.records[o][1]) for o in sorted(self.records) if o not in self.control]

    def base_state(self, prefix: str) -> ChaosState | None:
        return state_of(self.base_records, prefix) if self.start > 0 else None

    def state(self, prefix: str) -> ChaosState:
        """The chaos state the node's committed log describes: its base snapshot (if any)
        and then every committed record."""
        return state_of((d for _, d in self.data_records()), prefix, self.base_state(prefix))


def read_hw(partition: Path) -> int | None:
    try:
        return int((partition / "high-watermark").read_text().strip())
    except (OSError, ValueError):
        return None


def read_node_log(log_dir: Path, node_id: int) -> NodeLog:
    partition = log_dir / METADATA_PARTITION_DIR
    hw = read_hw(partition)  # first: the log files are at least as new as this
    out = NodeLog(node_id, -1, 0, hw)
    if hw is None:
        out.problems.append(f"node {node_id}: no readable high-watermark file in {partition}")
    limit = hw if hw is not None else 0
    expected: int | None = None  # the offset the next batch must start at
    for _base, path in list_segments(partition):
        data = Path(path).read_bytes()
        error: CorruptRecordError | None = None
        try:
            batches = decode_batches(data, path)
        except CorruptRecordError as exc:
            error = exc
            batches = decode_batches(data[:exc.position], path)
        jumped = False
        for batch in batches:
            if expected is None:
                out.start = expected = batch.base_offset
            if batch.base_offset != expected:
                jumped = True
                if min(batch.base_offset, expected) < limit:
                    out.problems.append(
                        f"node {node_id}: the log jumps from offset {expected} to "
                        f"{batch.base_offset} in {path} (a missing or overlapping segment), "
                        f"below its high watermark {limit}")
                else:
                    out.note = f"the log jumps from {expected} to {batch.base_offset} in {path}"
                break
            for i, record in enumerate(batch.records):
                offset = batch.base_offset + i
                if offset >= limit:
                    continue
                out.records[offset] = (batch.epoch, bytes(record))
                if batch.control:
                    out.control.add(offset)
            expected = batch.base_offset + len(batch.records)
        if jumped:
            break
        if error is not None:
            at = expected if expected is not None else _base
            if at < limit:
                out.problems.append(f"node {node_id}: {path} cannot be read at byte "
                                    f"{error.position} (offset {at}), below its high "
                                    f"watermark {limit}: {error.reason}")
            else:  # a torn tail above the HW: what kill -9 may leave
                out.note = f"stopped reading at {error} (offset {at}, HW {limit})"
            break
    end = expected if expected is not None else 0
    if out.start < 0:  # no batch at all: a log emptied by a fetched snapshot starts there
        out.start = end = _newest_snapshot_offset(partition)
    if not out.problems and end < limit:
        out.problems.append(f"node {node_id}: the log in {partition} ends at offset {end}, "
                            f"below its high watermark {limit}")
    out.committed_end = min(limit, end)
    if out.start > 0:
        _read_base_snapshot(out, partition)
    return out


def _newest_snapshot_offset(partition: Path) -> int:
    ids = [sid.offset for p in partition.glob("*.checkpoint")
           if (sid := parse_snapshot_file_name(p.name)) is not None]
    return max(ids, default=0)


def _read_base_snapshot(out: NodeLog, partition: Path) -> None:
    """A log that starts above 0 starts at a snapshot's end: that snapshot holds the state
    below it (retention is off in a campaign, so nothing else moves a log start)."""
    at_start = sorted(p for p in partition.glob("*.checkpoint")
                      if (sid := parse_snapshot_file_name(p.name)) is not None
                      and sid.offset == out.start)
    if not at_start:
        out.problems.append(f"node {out.node_id}: the log in {partition} starts at offset "
                            f"{out.start} but no snapshot ends there: offsets below it "
                            "cannot be read")
        return
    path = at_start[-1]
    try:
        out.base_records = list(read_snapshot_records(str(path)))
    except (CorruptRecordError, OSError) as exc:
        out.problems.append(f"node {out.node_id}: snapshot {path} (offsets below "
                            f"{out.start}) cannot be read: {exc}")
        return
    out.base_snapshot = str(path)


@dataclass
class NodeIndex:
    """Where each chaos write sits in one log: create -> topic name, config -> (topic,
    value) of the writers' key; offsets in the log (a snapshot holds no offsets)."""

    topics: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    configs: dict[tuple[str, str], list[int]] = field(default_factory=dict)


def index_records(records: Iterable[tuple[int, bytes]], prefix: str, config_key: str
                  ) -> NodeIndex:
    out = NodeIndex()
    for offset, data in records:
        record = decode(data)
        if isinstance(record, TopicRecord) and record.name.startswith(prefix):
            out.topics.setdefault(record.name, []).append((offset, record.topic_id))
        elif (isinstance(record, ConfigRecord) and record.name == config_key
              and record.resource_name.startswith(prefix) and record.value is not None):
            out.configs.setdefault((record.resource_name, record.value), []).append(offset)
    return out


@dataclass
class CommittedIndex:
    """Every node's committed log, indexed, and the canonical log: the union of all nodes'
    logs, which must agree offset by offset (`disagreements` otherwise)."""

    nodes: dict[int, NodeLog]
    per_node: dict[int, NodeIndex]
    canonical: NodeIndex
    start: int  # the canonical log's first offset (the lowest node log start)
    end: int  # exclusive: the highest committed end of any node
    records: dict[int, bytes]  # the canonical log: offset -> record bytes (no control)
    disagreements: list[str]
    base: list[bytes] = field(default_factory=list)  # the snapshot below `start`, if > 0
    # (topic, key) -> [(offset, value)] of every ConfigRecord on a chaos topic, in order
    config_history: dict[tuple[str, str], list[tuple[int, str | None]]] = field(
        default_factory=dict)
    prefix: str = ""  # the campaign's topic prefix

    def last_config_below(self, topic: str, key: str, end: int) -> tuple[int, str | None] | None:
        """(offset, value) of the last ConfigRecord (topic, key) of the canonical log below
        `end`, or None when the canonical log holds none there."""
        history = self.config_history.get((topic, key), [])
        i = bisect.bisect_left(history, end, key=lambda h: h[0])
        return history[i - 1] if i else None

    def state_below(self, end: int, prefix: str) -> ChaosState:
        """The chaos state of the canonical log below `end` (from `start`, on its base)."""
        return state_of((self.records[o] for o in sorted(self.records) if o < end), prefix,
                        state_of(self.base, prefix))

    def covers(self, end: int) -> bool:
        return self.start <= end <= self.end


def build_index(logs: dict[int, NodeLog], prefix: str, config_key: str) -> CommittedIndex:
    disagreements: list[str] = []
    canonical: dict[int, tuple[int, bytes, int]] = {}  # offset -> (epoch, bytes, node)
    control: set[int] = set()
    for node_id in sorted(logs):
        log = logs[node_id]
        for offset, entry in log.records.items():
            other = canonical.get(offset)
            if other is None:
                canonical[offset] = (*entry, node_id)
                if offset in log.control:
                    control.add(offset)
            elif other[:2] != entry and len(disagreements) <= 20:
                disagreements.append(
                    f"offset {offset}: node {node_id} has epoch {entry[0]}, node {other[2]} "
                    f"epoch {other[0]} (a different committed record)")
    records = {o: e[1] for o, e in canonical.items() if o not in control}
    history: dict[tuple[str, str], list[tuple[int, str | None]]] = {}
    for offset in sorted(records):
        record = decode(records[offset])
        if isinstance(record, ConfigRecord) and record.resource_name.startswith(prefix):
            history.setdefault((record.resource_name, record.name), []).append(
                (offset, record.value))
    lowest = min(logs.values(), key=lambda log: (log.start, log.node_id), default=None)
    ends = [log.committed_end for log in logs.values()] or [0]
    return CommittedIndex(
        nodes=logs,
        per_node={n: index_records(log.data_records(), prefix, config_key)
                  for n, log in logs.items()},
        canonical=index_records(sorted(records.items()), prefix, config_key),
        start=lowest.start if lowest else 0, end=max(ends), records=records,
        disagreements=disagreements, base=lowest.base_records if lowest else [],
        config_history=history, prefix=prefix)
