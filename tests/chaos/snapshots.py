"""Snapshots against the committed log: the chaos topics and writer configs a node's snapshot
holds must be what the reference log holds below the snapshot's end offset."""

from __future__ import annotations

from pathlib import Path

from kraft.log.snapshots import parse_snapshot_file_name, read_snapshot_records
from metadata.records import ConfigRecord, Record, TopicRecord, decode_record
from tests.chaos.checks import Check
from tests.chaos.committed import PARTITION_DIR, NodeLog

State = tuple[dict[str, str], dict[str, str | None]]  # topics name -> id, topic -> value


def _apply(state: State, record: Record, prefix: str, config_key: str) -> None:
    topics, configs = state
    if isinstance(record, TopicRecord) and record.name.startswith(prefix):
        topics[record.name] = record.topic_id
    elif (isinstance(record, ConfigRecord) and record.name == config_key
          and record.resource_name.startswith(prefix)):
        configs[record.resource_name] = record.value


def _set(state: State) -> State:
    # A deleted key (None) is simply absent from an image.
    return state[0], {k: v for k, v in state[1].items() if v is not None}


def snapshot_state(path: Path, prefix: str, config_key: str) -> State:
    state: State = ({}, {})
    for data in read_snapshot_records(str(path)):
        _apply(state, decode_record(data), prefix, config_key)
    return _set(state)


def log_state(log: NodeLog, end: int, prefix: str, config_key: str) -> State:
    state: State = ({}, {})
    for offset in sorted(o for o in log.records if o < end and o not in log.control):
        _apply(state, decode_record(log.records[offset][1]), prefix, config_key)
    return _set(state)


def to_check(log_dirs: dict[int, Path], logs: dict[int, NodeLog], reference: NodeLog,
             prefix: str, config_key: str) -> Check:
    """The newest snapshot of every node, and the one at its log start when the log was
    replaced by a fetched snapshot."""
    problems, checked = [], 0
    for node_id, log_dir in sorted(log_dirs.items()):
        found = sorted((sid.offset, p) for p in (log_dir / PARTITION_DIR).glob("*.checkpoint")
                       if (sid := parse_snapshot_file_name(p.name)) is not None)
        chosen = {found[-1]} if found else set()
        chosen |= {f for f in found if f[0] == logs[node_id].start and f[0] > 0}
        for end, path in sorted(chosen):
            if end > reference.committed_end:
                continue  # beyond what the reference is known to hold committed
            checked += 1
            if snapshot_state(path, prefix, config_key) != log_state(reference, end, prefix,
                                                                     config_key):
                problems.append(f"node {node_id}'s snapshot {path.name} differs from the "
                                f"committed log of node {reference.node_id} below {end}")
    if problems:
        return Check("snapshots equal the committed log", False,
                     f"{len(problems)} problem(s); first: {problems[0]}", problems)
    return Check("snapshots equal the committed log", True,
                 f"{checked} snapshot(s) hold the chaos topics and configs the log holds "
                 "below their end offsets")
