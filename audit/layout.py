"""Where a node keeps its metadata log, and what the audit needs to know about it.

A node's `metadata.log.dir` holds `meta.properties` (node.id, cluster.id) and the partition
directory `__cluster_metadata-0/` with `%020d.log` segments, `%020d-%010d.checkpoint`
snapshots, `quorum-state` and (when the node writes it) `high-watermark`.

A directory is a local path (made absolute here, on the driver) or a URI read through
Spark's Hadoop FileSystem (audit/fs.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from audit.errors import LayoutError
from audit.fs import LOCAL, Files, files_for, resolve
from kraft.log.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    StorageError,
    read_meta_properties,
)
from kraft.log.snapshots import parse_snapshot_file_name
from kraft.properties import PropertiesError, parse_properties
from metadata.topics import METADATA_PARTITION_DIR

__all__ = ["HIGH_WATERMARK_FILE", "LayoutError", "LogFile", "NodeLog",
           "discover", "parse_node_map", "partition_dir"]

HIGH_WATERMARK_FILE = "high-watermark"
_SEGMENT = re.compile(r"(\d{20})\.log")  # kraft.log.segmented's segment names


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


def partition_dir(log_dir: str, files: Files = LOCAL) -> str:
    """The `__cluster_metadata-0` directory for a metadata.log.dir or that directory itself."""
    if not files.is_dir(log_dir):
        raise LayoutError(f"log directory {log_dir} does not exist or is not a directory")
    inner = files.join(log_dir, METADATA_PARTITION_DIR)
    if files.is_dir(inner):
        return inner
    if files.name(log_dir) == METADATA_PARTITION_DIR:
        return log_dir
    raise LayoutError(
        f"{log_dir} holds no {METADATA_PARTITION_DIR} directory: pass a node's metadata.log.dir"
    )


def node_id_of(log_dir: str, partition: str, files: Files = LOCAL) -> int | None:
    """node.id from meta.properties beside the partition directory, None without the file."""
    parent = files.parent(partition)
    try:
        if files is LOCAL:
            meta = read_meta_properties(parent)
        else:
            meta = _meta_properties(files, files.join(parent, META_PROPERTIES_FILE))
    except StorageError as exc:
        raise LayoutError(str(exc)) from None
    return None if meta is None else meta.node_id


def _meta_properties(files: Files, path: str) -> MetaProperties | None:
    """read_meta_properties for a file behind a URI, with the same errors."""
    data = files.read_bytes(path)
    if data is None:
        return None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
        props = parse_properties(text, path)
    except UnicodeDecodeError:
        raise StorageError(f"Cannot parse {path}: the file is not valid UTF-8.") from None
    except PropertiesError as err:
        raise StorageError(f"Cannot parse {path}: line {err.line}: {err.reason}.") from None
    return MetaProperties.from_properties(props, path)


def read_committed_end(partition: str, files: Files = LOCAL) -> int | None:
    """The node's `high-watermark` file (a lower bound of its committed end), None when it is
    missing or unreadable: unknown, never guessed."""
    try:
        data = files.read_bytes(files.join(partition, HIGH_WATERMARK_FILE))
    except (OSError, LayoutError):
        return None
    text = (data or b"").decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def discover(
    log_dir: str, node_id: int | None = None, committed_end: int | None = None,
    spark: Any = None,
) -> NodeLog:
    """The node log in `log_dir`; `node_id` and `committed_end` override what the files say.
    A local `log_dir` is made absolute; a URI is listed through `spark`'s Hadoop FileSystem
    (default: the active session's)."""
    log_dir = resolve(log_dir)
    files = files_for(log_dir, spark)
    partition = partition_dir(log_dir, files)
    if node_id is None:
        node_id = node_id_of(log_dir, partition, files)
    if node_id is None:
        raise LayoutError(
            f"{log_dir} has no meta.properties: give its node id (option nodeIds / --node-id)"
        )
    names = sorted(files.names(partition))
    found = sorted((int(m.group(1)), files.join(partition, name)) for name in names
                   if (m := _SEGMENT.fullmatch(name)))
    segments = tuple(
        LogFile(node_id, path, "segment", base,
                found[i + 1][0] if i + 1 < len(found) else None)
        for i, (base, path) in enumerate(found)
    )
    snapshots = []
    for name in names:
        snapshot_id = parse_snapshot_file_name(name)
        if snapshot_id is not None:
            snapshots.append(LogFile(node_id, files.join(partition, name), "snapshot",
                                     snapshot_id.offset, epoch=snapshot_id.epoch))
    if committed_end is None:
        committed_end = read_committed_end(partition, files)
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
