"""The committed metadata as the nodes' files hold it: every node's log up to its
`high-watermark` file (a lower bound of what it knew committed), records decoded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kraft.log.codec import CorruptRecordError, decode_batches
from kraft.log.segmented import list_segments
from metadata.records import ConfigRecord, TopicRecord, decode_record

PARTITION_DIR = "__cluster_metadata-0"


@dataclass
class NodeLog:
    node_id: int
    start: int  # first offset in the files
    committed_end: int  # exclusive: min(high-watermark file, end of the readable log)
    hw_file: int | None
    # offset -> (epoch, record bytes), for committed offsets only
    records: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    control: set[int] = field(default_factory=set)  # committed offsets of control records
    note: str = ""


def read_hw(partition: Path) -> int | None:
    try:
        return int((partition / "high-watermark").read_text().strip())
    except (OSError, ValueError):
        return None


def read_node_log(log_dir: Path, node_id: int) -> NodeLog:
    partition = log_dir / PARTITION_DIR
    hw = read_hw(partition)
    out = NodeLog(node_id, -1, 0, hw)
    limit = hw if hw is not None else 0
    end = None
    for _base, path in list_segments(partition):
        data = Path(path).read_bytes()
        try:
            batches = decode_batches(data, path)
        except CorruptRecordError as exc:
            # A torn tail above the HW is what kill -9 may leave; below it, a damaged log
            # (then committed_end falls short of the HW file and the checks say so).
            out.note = f"stopped reading at {exc}"
            batches = decode_batches(data[:exc.position], path)
        for batch in batches:
            if out.start < 0:
                out.start = batch.base_offset
            for i, record in enumerate(batch.records):
                offset = batch.base_offset + i
                end = offset + 1
                if offset >= limit:
                    continue
                out.records[offset] = (batch.epoch, bytes(record))
                if batch.control:
                    out.control.add(offset)
        if out.note:
            break
    out.committed_end = min(limit, end if end is not None else 0)
    if out.start < 0:
        out.start = out.committed_end
    return out


@dataclass
class CommittedIndex:
    """Where each chaos write sits in the reference log (the committed log of a node that
    holds it from offset 0 and furthest)."""

    reference: int
    end: int
    topics: dict[str, list[tuple[int, str]]]  # name -> [(offset, topic id)]
    configs: dict[tuple[str, str], list[int]]  # (topic, value) -> [offset]
    last_config: dict[str, tuple[int, str | None]]  # topic -> (offset, value) of the last set
    disagreements: list[str]


def build_index(logs: dict[int, NodeLog], prefix: str, config_key: str) -> CommittedIndex:
    full = [log for log in logs.values() if log.start == 0]
    if not full:
        raise AssertionError("no node holds the log from offset 0 (were snapshots cleaned?)")
    ref = max(full, key=lambda log: (log.committed_end, -log.node_id))
    disagreements = []
    for log in logs.values():
        if log is ref:
            continue
        for offset, entry in log.records.items():
            other = ref.records.get(offset)
            if other is None:
                if offset < ref.committed_end:
                    disagreements.append(f"node {log.node_id} has offset {offset}, the "
                                         f"reference node {ref.node_id} does not")
            elif other != entry:
                disagreements.append(f"offset {offset}: node {log.node_id} has epoch "
                                     f"{entry[0]}, node {ref.node_id} epoch {other[0]} "
                                     "(a different committed record)")
            if len(disagreements) > 20:
                break
    topics: dict[str, list[tuple[int, str]]] = {}
    configs: dict[tuple[str, str], list[int]] = {}
    last_config: dict[str, tuple[int, str | None]] = {}
    for offset in sorted(ref.records):
        if offset in ref.control:
            continue
        record = decode_record(ref.records[offset][1])
        if isinstance(record, TopicRecord) and record.name.startswith(prefix):
            topics.setdefault(record.name, []).append((offset, record.topic_id))
        elif (isinstance(record, ConfigRecord) and record.name == config_key
              and record.resource_name.startswith(prefix)):
            if record.value is not None:
                configs.setdefault((record.resource_name, record.value), []).append(offset)
            last_config[record.resource_name] = (offset, record.value)
    return CommittedIndex(ref.node_id, ref.committed_end, topics, configs, last_config,
                          disagreements)
