"""Snapshots against the committed log: the chaos topics and configs a node's snapshot holds
must be exactly what the canonical committed log holds below the snapshot's end offset."""

from __future__ import annotations

from pathlib import Path

from kraft.log.base import CorruptRecordError
from kraft.log.snapshots import parse_snapshot_file_name, read_snapshot_records
from metadata.topics import METADATA_PARTITION_DIR
from tests.chaos.checks import Check
from tests.chaos.committed import ChaosState, CommittedIndex, state_of


def _differences(got: ChaosState, want: ChaosState) -> list[str]:
    out = [f"lacks topic {n}" for n in sorted(want.topics.keys() - got.topics.keys())]
    out += [f"holds topic {n}, not committed" for n in sorted(got.topics.keys() -
                                                               want.topics.keys())]
    out += [f"holds {n} as {got.topics[n]}, committed as {want.topics[n]}"
            for n in sorted(got.topics.keys() & want.topics.keys())
            if got.topics[n] != want.topics[n]]
    for key in sorted(want.configs.keys() | got.configs.keys()):
        if got.configs.get(key) != want.configs.get(key):
            out.append(f"holds {key[0]} {key[1]}={got.configs.get(key)}, committed "
                       f"{want.configs.get(key)}")
    return out


def to_check(log_dirs: dict[int, Path], index: CommittedIndex) -> Check:
    """The newest snapshot of every node, and the one its log starts at when a fetched
    snapshot replaced its log."""
    problems, checked, beyond = [], 0, 0
    prefix = index.prefix
    for node_id, log_dir in sorted(log_dirs.items()):
        partition = log_dir / METADATA_PARTITION_DIR
        found = sorted((sid.offset, p) for p in partition.glob("*.checkpoint")
                       if (sid := parse_snapshot_file_name(p.name)) is not None)
        chosen = {found[-1]} if found else set()
        log = index.nodes.get(node_id)
        if log is not None:
            chosen |= {f for f in found if f[0] == log.start and f[0] > 0}
        for end, path in sorted(chosen):
            if not index.covers(end):
                beyond += 1  # taken after the logs were read, or below every node's log
                continue
            checked += 1
            try:
                got = state_of(read_snapshot_records(str(path)), prefix)
            except (CorruptRecordError, OSError) as exc:
                problems.append(f"node {node_id}'s snapshot {path} cannot be read: {exc}")
                continue
            diff = _differences(got, index.state_below(end, prefix))
            if diff:
                problems.append(f"node {node_id}'s snapshot {path.name} differs from the "
                                f"committed log below {end}: " + "; ".join(diff[:3]))
    if problems:
        return Check("snapshots equal the committed log", False,
                     f"{len(problems)} problem(s); first: {problems[0]}", problems)
    return Check("snapshots equal the committed log", True,
                 f"{checked} snapshot(s) hold exactly the chaos topics and configs the log "
                 f"holds below their end offsets ({beyond} beyond the logs read, not compared)")
