"""Opening a partition log (PartitionLog.open, broker/log/partition_log.py): a new
directory created with its files, an existing one recovered (Kafka's LogLoader for one log:
recovery from the recovery point, the producer state from its latest snapshot, the leader
epochs from the batches and the checkpoint file)."""

from __future__ import annotations

import logging
import os
from typing import TypeVar

from broker.log import checkpoints, cleaner_swap
from broker.log import producer_snapshots as snapshots
from broker.log.config import LogConfig
from broker.log.log_files import (
    TRUST_ALL,
    open_segments,
    read_recovery_state,
    write_recovery_point_zero,
)
from broker.log.log_state import LoadingFormat
from broker.log.partition_state import (
    PartitionLogState,
    PartitionMetadataError,
    _now_ms,
    parse_partition_dir,
)
from broker.log.producer_state import ProducerState
from kraft.log.recovery import RECOVERY_POINT_FILE

logger = logging.getLogger(__name__)

Log = TypeVar("Log", bound=PartitionLogState)


def open_log(
    log_class: type[Log],
    directory: str,
    topic_id: str,
    config: LogConfig,
    log_start_offset: int | None,
    now_ms: int | None,
    *,
    clean_shutdown: bool,
    synced: bool,
    metadata_read: bool,
    listing: list[str] | None = None,
) -> Log:
    """PartitionLog.open (its docstring), for `log_class`. Every file of an existing
    directory is read once (the listing, the recovery point: thousands of logs open at a
    broker's start)."""
    directory = os.path.abspath(directory)
    parsed = parse_partition_dir(os.path.basename(directory))
    if parsed is None:
        raise ValueError(f"{directory} is not named <topic>-<partition>")
    topic, partition = parsed
    unsynced_files: list[str] = []
    unsynced_dirs: list[str] = []
    # A directory the loader listed, or whose partition.metadata it read, exists.
    existed = listing is not None or metadata_read or os.path.isdir(directory)
    # The recovery-point file says both whether the log was ever synced and where recovery
    # starts; nothing below changes it before it is used (a new one holds 0).
    unsynced_ever, point = read_recovery_state(directory) if existed else (True, 0)
    if not existed:
        os.makedirs(directory)  # fsynced by the first flush job (partition_state.py)
        unsynced_dirs += [directory, os.path.dirname(directory)]
    try:
        stored = None if not existed else topic_id if metadata_read else (
            checkpoints.read_partition_metadata(directory))
    except checkpoints.CheckpointError as exc:
        if not unsynced_ever:
            raise PartitionMetadataError(str(exc)) from None
        # Written without fsync and never synced: a power loss damaged it.
        logger.warning("%s; the log was never synced: writing it again", exc)
        stored = None
    if stored is None:
        checkpoints.write_partition_metadata(directory, topic_id, durable=False)
        unsynced_files.append(os.path.join(directory, checkpoints.PARTITION_METADATA_FILE))
    elif stored != topic_id:
        raise PartitionMetadataError(
            f"{directory} holds topic id {stored}, not {topic_id}: a topic of the same "
            "name was deleted and created again; delete the directory to start over"
        )
    if not existed or unsynced_ever:
        # A new log, or one whose creation a power loss undid before any fsync: nothing in
        # it was ever durable (broker/log/partition_state.py). Without this file
        # SegmentedLog would write it durably, on this thread.
        unsynced_files.append(write_recovery_point_zero(directory))
    if existed and not synced:
        # What a crashed process left may still be only in the page cache (kill -9 keeps
        # it, a power loss later would not): the first flush job syncs it all again.
        unsynced_files = [os.path.join(directory, name) for name in (
            checkpoints.PARTITION_METADATA_FILE, RECOVERY_POINT_FILE,
            checkpoints.LEADER_EPOCH_FILE)]
        unsynced_dirs = [directory, os.path.dirname(directory)]
    elif existed and unsynced_files:
        unsynced_dirs = [directory]
    names = listing if listing is not None else os.listdir(directory) if existed else []
    if existed and cleaner_swap.recover(directory, names):  # a swap a crash interrupted
        names = os.listdir(directory)  # segments were replaced
    offsets = snapshots.list_snapshots(directory, names)
    found = snapshots.read_latest(directory, offsets, TRUST_ALL) if offsets else None
    producers = ProducerState()
    if found is not None:
        producers.restore(found[1])
    loading = LoadingFormat(TRUST_ALL if clean_shutdown else point, producers,
                            found[0] if found else 0, log_start_offset or 0)
    log = open_segments(directory, config, loading, synced, names)  # [] when new
    try:
        now = _now_ms() if now_ms is None else now_ms
        opened = log_class(directory, topic, partition, topic_id, config, log,
                           log_start_offset, now, new_directory=not existed, loaded=loading,
                           snapshot_offsets=offsets)
    except BaseException:
        log.close()
        raise
    opened._unsynced(unsynced_files, unsynced_dirs)
    return opened
