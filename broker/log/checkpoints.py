"""Kafka's small text files in log directories, written atomically (temporary file, rename) and
read strictly: a damaged file is a CheckpointError naming the path and the line, never a guess.

`write_atomically` fsyncs the file and its directory by default (the per-log-dir checkpoints,
written in worker threads). A partition's own files (`partition.metadata`, the
`leader-epoch-checkpoint`) are written on the event loop with `durable=False` — temporary file
and rename, no fsync, so a process crash (kill -9) keeps them exactly and a power loss leaves
the old file or the new one, or (before any fsync) a damaged or missing file, which their
readers handle — and fsynced later by the LogManager's background round (`fsync_paths`); see
broker/log/partition_state.py for why that is enough.

* `leader-epoch-checkpoint` (per partition): `0`, the entry count, `epoch startOffset` lines.
* `partition.metadata` (per partition): `version: 0`, `topic_id: <id>`.
* `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
  `log-start-offset-checkpoint` (per log dir): `0`, the count, `topic partition offset` lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

from kraft.log._common import fsync_dir, read_file

VERSION = 0
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


class CheckpointError(Exception):
    """A checkpoint file that does not parse."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}, line {line}: {reason}")
        self.path = path
        self.line = line


def write_atomically(path: str, text: str, durable: bool = True) -> None:
    """Replace `path` with `text`: a crash leaves the old file or the new one. With `durable`
    the file and its directory are fsynced before it returns; without, nothing is (a power loss
    before a later `fsync_paths` may then leave the old file, the new one, or a damaged one)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        data = text.encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def fsync_paths(files: Iterable[str], directories: Iterable[str]) -> int:
    """fsync each file (one that is gone is skipped: renamed over or deleted since), then each
    directory, in order; return the number of fsyncs. Blocking: a worker thread's job."""
    syncs = 0
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        syncs += 1
    for directory in directories:
        fsync_dir(directory)
        syncs += 1
    return syncs


def _read_lines(path: str) -> list[str] | None:
    try:
        data = read_file(path)  # no file object: thousands of logs read these at start
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise CheckpointError(path, 1, f"not text: {exc}") from None


def _entries(path: str, lines: list[str], fields: int) -> list[list[str]]:
    """The entries of a `0 / count / lines` file, each split into `fields` parts."""
    if not lines or lines[0].strip() != str(VERSION):
        raise CheckpointError(path, 1, f"version {lines[0] if lines else '(empty)'!r}, "
                                       f"expected {VERSION}")
    if len(lines) < 2 or not lines[1].strip().isdigit():
        raise CheckpointError(path, 2, "missing the entry count")
    count = int(lines[1])
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(path, 2, f"count {count} but {len(body)} entries")
    entries = []
    for number, line in enumerate(body, start=3):
        parts = line.split()
        if len(parts) != fields or not all(_is_int(p) for p in parts[fields - 2 :]):
            raise CheckpointError(path, number, f"bad entry {line!r}")
        entries.append(parts)
    return entries


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


# -- leader epochs -------------------------------------------------------------------------------


def write_leader_epochs(
    directory: str, entries: Sequence[tuple[int, int]], durable: bool = True
) -> None:
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{epoch} {start}" for epoch, start in entries]
    write_atomically(os.path.join(directory, LEADER_EPOCH_FILE), "\n".join(lines) + "\n",
                     durable)


def read_leader_epochs(directory: str) -> list[tuple[int, int]] | None:
    """(epoch, start offset) pairs, None when there is no file."""
    path = os.path.join(directory, LEADER_EPOCH_FILE)
    lines = _read_lines(path)
    if lines is None:
        return None
    return [(int(epoch), int(start)) for epoch, start in _entries(path, lines, 2)]


# -- partition.metadata --------------------------------------------------------------------------


def write_partition_metadata(directory: str, topic_id: str, durable: bool = True) -> None:
    write_atomically(os.path.join(directory, PARTITION_METADATA_FILE),
                     f"version: {VERSION}\ntopic_id: {topic_id}\n", durable)


def read_partition_metadata(directory: str) -> str | None:
    """The topic id in the file, None when there is no file."""
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    lines = _read_lines(path)
    if lines is None:
        return None
    fields = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise CheckpointError(path, number, f"expected `name: value`, got {line!r}")
        fields[name.strip()] = value.strip()
    if fields.get("version") != str(VERSION):
        raise CheckpointError(path, 1, f"version {fields.get('version')!r}, expected {VERSION}")
    if not fields.get("topic_id"):
        raise CheckpointError(path, 2, "no topic_id")
    return fields["topic_id"]


# -- per log dir: offsets by topic partition ------------------------------------------------------


def write_offsets(path: str, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}"
              for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(path, "\n".join(lines) + "\n")


def read_offsets(path: str) -> dict[TopicPartition, int]:
    """The file's offsets; empty when there is no file."""
    lines = _read_lines(path)
    if lines is None:
        return {}
    return {(topic, int(partition)): int(offset)
            for topic, partition, offset in _entries(path, lines, 3)}
