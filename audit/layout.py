"""Where a node keeps its metadata log, and what the audit needs to know about it.

A node's `metadata.log.dir` holds `meta.properties` (node.id, cluster.id) and the partition
directory `__cluster_metadata-0/` with `%020d.log` segments, `%020d-%010d.checkpoint`
snapshots, `quorum-state` and (when the node writes it) `high-watermark`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kraft.log.segmented import list_segments
from kraft.log.snapshots import parse_snapshot_file_name
from kraft.server.meta_properties import StorageError, read_meta_properties

PARTITION_DIR = "__cluster_metadata-0"
HIGH_WATERMARK_FILE = "high-watermark"


class LayoutError(Exception):
    """Bad input: a directory that is not a node's metadata log. str() is one line."""


@dataclass(frozen=True)
class LogFile:
    """One segment or snapshot file. For a segment, `base_offset` is its first offset and
    `next_base` the next segment's (None for the last). For a snapshot, `base_offset` is the
    snapshot's end offset and `epoch` its epoch."""

    node_id: int
    path: str
    kind: str  # "segment" | "snapshot"
    base_offset: int
    next_base: int | None = None
    epoch: int = -1


@dataclass(frozen=True)
class NodeLog:
    node_id: int
    partition_dir: str
    segments: tuple[LogFile, ...]
    snapshots: tuple[LogFile, ...]
    committed_end: int | None  # exclusive; None = unknown


def partition_dir(log_dir: str) -> str:
    """The `__cluster_metadata-0` directory for a metadata.log.dir or that directory itself."""
    if not os.path.isdir(log_dir):
        raise LayoutError(f"log directory {log_dir} does not exist or is not a directory")
    inner = os.path.join(log_dir, PARTITION_DIR)
    if os.path.isdir(inner):
        return inner
    if os.path.basename(os.path.normpath(log_dir)) == PARTITION_DIR:
        return log_dir
    raise LayoutError(
        f"{log_dir} holds no {PARTITION_DIR} directory: pass a node's metadata.log.dir"
    )


def node_id_of(log_dir: str, partition: str) -> int | None:
    """node.id from meta.properties beside the partition directory, None without the file."""
    parent = os.path.dirname(os.path.normpath(partition))
    try:
        meta = read_meta_properties(parent)
    except StorageError as exc:
        raise LayoutError(str(exc)) from None
    return None if meta is None else meta.node_id


def read_committed_end(partition: str) -> int | None:
    """The node's `high-watermark` file (a lower bound of its committed end), None when it is
    missing or unreadable: unknown, never guessed."""
    try:
        with open(os.path.join(partition, HIGH_WATERMARK_FILE)) as file:
            text = file.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def discover(
    log_dir: str, node_id: int | None = None, committed_end: int | None = None
) -> NodeLog:
    """The node log in `log_dir`; `node_id` and `committed_end` override what the files say."""
    partition = partition_dir(log_dir)
    if node_id is None:
        node_id = node_id_of(log_dir, partition)
    if node_id is None:
        raise LayoutError(
            f"{log_dir} has no meta.properties: give its node id (option nodeIds / --node-id)"
        )
    found = list_segments(partition)
    segments = tuple(
        LogFile(node_id, path, "segment", base,
                found[i + 1][0] if i + 1 < len(found) else None)
        for i, (base, path) in enumerate(found)
    )
    snapshots = []
    for name in sorted(os.listdir(partition)):
        snapshot_id = parse_snapshot_file_name(name)
        if snapshot_id is not None:
            snapshots.append(LogFile(node_id, os.path.join(partition, name), "snapshot",
                                     snapshot_id.offset, epoch=snapshot_id.epoch))
    if committed_end is None:
        committed_end = read_committed_end(partition)
    return NodeLog(node_id, partition, segments, tuple(snapshots), committed_end)


def parse_node_map(text: str, what: str) -> dict[int, int]:
    """`1=100,2=120` -> {1: 100, 2: 120}; LayoutError naming `what` otherwise."""
    out: dict[int, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isdigit() or not value.strip().isdigit():
            raise LayoutError(f"bad {what} entry {item!r}: expected NODE=OFFSET")
        out[int(key)] = int(value)
    return out
