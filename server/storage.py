"""The node's storage as a whole: every configured log directory formatted for one cluster and
this node (the checks `kraft-server` makes before it starts and `kraft-storage info` prints)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from kraft.log.meta_properties import (
    STORAGE_COMMAND,
    MetaProperties,
    StorageError,
    meta_properties_path,
    random_uuid,
    read_meta_properties,
    write_meta_properties,
)
from server.config import NodeConfig

# -- the storage as a whole ------------------------------------------------------------------


@dataclass(frozen=True)
class DirectoryStatus:
    """What one configured log directory holds. `error` is set when meta.properties exists
    but cannot be used; `meta` is None when the directory is not formatted."""

    path: str
    is_metadata_dir: bool
    exists: bool
    meta: MetaProperties | None = None
    error: str | None = None


def format_command(config: NodeConfig, cluster_id: str | None = None) -> str:
    """The command that formats this node's directories, for error messages."""
    if cluster_id is None:
        return f"{STORAGE_COMMAND} format -t <cluster-id> -c {config.source}"
    return f"{STORAGE_COMMAND} format -t {cluster_id} -c {config.source} --ignore-formatted"


def inspect_storage(config: NodeConfig) -> list[DirectoryStatus]:
    """The status of every directory the node needs (`config.storage_dirs`), in order."""
    metadata_dir = os.path.normpath(config.metadata_log_dir)
    statuses: list[DirectoryStatus] = []
    for path in config.storage_dirs:
        is_metadata = os.path.normpath(path) == metadata_dir
        exists = os.path.isdir(path)
        try:
            meta = read_meta_properties(path) if exists else None
        except StorageError as err:
            statuses.append(DirectoryStatus(path, is_metadata, exists, error=str(err)))
            continue
        statuses.append(DirectoryStatus(path, is_metadata, exists, meta))
    return statuses


def storage_problems(config: NodeConfig, statuses: list[DirectoryStatus]) -> list[str]:
    """Everything that stops the node from starting on these directories, most serious
    first: unreadable files, mismatched cluster ids, a node id that differs from the
    config, shared directory ids, then unformatted directories."""
    problems = [status.error for status in statuses if status.error is not None]
    formatted = [status for status in statuses if status.meta is not None]
    if formatted:
        first = formatted[0]
        assert first.meta is not None
        for status in formatted[1:]:
            assert status.meta is not None
            if status.meta.cluster_id != first.meta.cluster_id:
                problems.append(
                    f"Invalid cluster.id in {meta_properties_path(status.path)}: expected "
                    f"{first.meta.cluster_id} (as in {first.path}), but read "
                    f"{status.meta.cluster_id}. These directories were formatted for "
                    "different clusters; remove the wrong one from log.dirs or replace it "
                    "with an empty directory."
                )
        for status in formatted:
            assert status.meta is not None
            if status.meta.node_id != config.node_id:
                problems.append(
                    f"Stored node.id {status.meta.node_id} in "
                    f"{meta_properties_path(status.path)} doesn't match the configured node.id "
                    f"{config.node_id} in {config.source}. If you moved your data, make sure "
                    "your configured node id matches; if you intend to create a new node, "
                    "remove all data in its log directories."
                )
        seen: dict[str, str] = {}
        for status in formatted:
            assert status.meta is not None
            directory_id = status.meta.directory_id
            if directory_id is None:
                continue
            if directory_id in seen:
                problems.append(
                    f"The log directories {seen[directory_id]} and {status.path} have the same "
                    f"directory.id {directory_id} (was one copied from the other?): remove the "
                    f"directory.id line from {meta_properties_path(status.path)} and a new one "
                    "is generated at the next start."
                )
            seen[directory_id] = status.path
    known_cluster = formatted[0].meta.cluster_id if formatted and formatted[0].meta else None
    command = format_command(config, known_cluster)
    for status in statuses:
        if status.meta is None and status.error is None:
            problems.append(
                f'Log directory {status.path} is not formatted: run "{command}" first.'
            )
    return problems


def ensure_formatted(config: NodeConfig) -> str:
    """Check that every directory of the node is formatted for one cluster and this node;
    return the cluster id. Raises StorageError with the most serious problem. A formatted
    directory without `directory.id` gets a fresh one, as Kafka does at start-up."""
    statuses = inspect_storage(config)
    problems = storage_problems(config, statuses)
    if problems:
        raise StorageError(problems[0])
    cluster_id = ""
    for status in statuses:
        meta = status.meta
        assert meta is not None
        cluster_id = meta.cluster_id
        if meta.directory_id is None:
            write_meta_properties(
                status.path,
                MetaProperties(meta.cluster_id, meta.node_id, random_uuid(), meta.version),
            )
    return cluster_id
