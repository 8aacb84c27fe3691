"""Loading a broker's partition logs at start: Kafka's LogManager.loadLogs and LogLoader, with
`num.recovery.threads.per.data.dir` threads per log dir, off the event loop.

Per log dir, before any log in it is opened (`plan_dir`):
* After a clean shutdown (the `.kafka_cleanshutdown` marker: the last close flushed every
  log of the dir) the marker is removed, durably, before anything is written, and no log is
  recovered: its batches are indexed, not checked (broker/log/log_files.py). A crash from here
  on finds no marker, so the next start recovers.
* After a crash the whole filesystem is synced once (syncfs, broker/log/durability.py): what
  the crashed process left in the page cache becomes durable in one call, instead of an
  fdatasync of every segment and metadata file of every log. Each log then recovers from its
  recovery point: only batches at or past it are CRC-checked and a torn tail is cut. Where
  syncfs is unavailable each log syncs its own files, as before.
Then every partition directory is opened in the dir's thread pool (`open_partition`), in
chunks of up to OPEN_CHUNK logs per hand-off (a future, a wake-up of the event loop and a
switch of the GIL per log cost as much as a small log's open), each file read once. A log
whose files are damaged where they should not be (below its recovery point, a
partition.metadata that does not parse) is `Damaged`: the LogManager keeps that partition
offline and the broker serves the others (Kafka would fail the whole log dir).

`progress()` is the load's state for the recovery metrics (broker/log/recovery_metrics.py),
read from the scrape thread: logs left per dir (Kafka's remainingLogsToRecover), the segments
the logs being opened now check (remainingSegmentsToRecover, per log rather than per
segment), and the logs loaded.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from broker.log import checkpoints, durability
from broker.log.checkpoints import TopicPartition
from broker.log.config import LogConfig
from broker.log.log_files import DELETED_SUFFIX, never_synced, recovery_point
from broker.log.partition_log import PartitionLog, PartitionMetadataError, parse_partition_dir
from kraft.log._common import fsync_dir
from kraft.log.base import CorruptRecordError

logger = logging.getLogger(__name__)

METADATA_LOG_DIR = "__cluster_metadata-0"
# Logs opened per thread-pool hand-off (fewer when the dirs hold fewer per thread).
OPEN_CHUNK = 32


@dataclass
class DirPlan:
    """What a log dir holds and how its logs open."""

    directory: str
    clean: bool  # its clean-shutdown marker was there (and is gone now)
    synced: bool  # its files are durable: a clean shutdown, or a syncfs after a crash
    partitions: list[tuple[TopicPartition, str]] = field(default_factory=list)
    tombstones: list[str] = field(default_factory=list)  # deleted before a crash
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    start_offsets: dict[TopicPartition, int] = field(default_factory=dict)


class Damaged(Exception):
    """A partition log that cannot be opened as it is on disk (its partition goes offline)."""

    def __init__(self, tp: TopicPartition, path: str, reason: str) -> None:
        super().__init__(
            f"{path}: {reason}. The partition is offline on this broker; move the directory "
            "away and restart the broker to fetch it again from its leader")
        self.tp = tp
        self.path = path


def plan_dir(directory: str) -> DirPlan:
    """Read the dir's checkpoints and listing, remove its clean-shutdown marker durably, or
    sync it after a crash (module docstring). Blocking; OSError and CheckpointError fail the
    dir."""
    os.makedirs(directory, exist_ok=True)
    high_watermarks = checkpoints.read_offsets(
        os.path.join(directory, checkpoints.REPLICATION_OFFSET_FILE))
    start_offsets = checkpoints.read_offsets(
        os.path.join(directory, checkpoints.LOG_START_OFFSET_FILE))
    marker = os.path.join(directory, checkpoints.CLEAN_SHUTDOWN_FILE)
    clean = os.path.exists(marker)
    if clean:
        # Before the first write: a power loss after it must not bring the marker back.
        os.unlink(marker)
        fsync_dir(directory)
    synced = clean or durability.sync_filesystem(directory)
    plan = DirPlan(directory, clean, synced, high_watermarks=high_watermarks,
                   start_offsets=start_offsets)
    with os.scandir(directory) as scan:  # the entries' types come with the names: no stat
        listed = sorted((entry.name, entry.is_dir()) for entry in scan)
    for name, is_dir in listed:
        path = os.path.join(directory, name)
        if name.endswith(DELETED_SUFFIX) and is_dir:
            plan.tombstones.append(path)  # deleted before a crash: finish the job
            continue
        parsed = parse_partition_dir(name)
        if name == METADATA_LOG_DIR or parsed is None or not is_dir:
            continue
        plan.partitions.append((parsed, path))
    return plan


def open_partition(plan: DirPlan, tp: TopicPartition, path: str,
                   listing: list[str] | None = None) -> PartitionLog | None:
    """Open one partition directory of `plan` (blocking: a recovery thread), whose names are
    `listing` when the caller listed it. None for a directory to skip (never synced, no
    partition.metadata); Damaged for a log to keep offline; OSError fails the dir."""
    try:
        topic_id = checkpoints.read_partition_metadata(path)
    except checkpoints.CheckpointError as exc:
        if not never_synced(path):
            raise Damaged(tp, path, str(exc)) from exc
        # Created without fsync and a power loss came before the first flush job: nothing in
        # it was durable; get_or_create opens it again when asked.
        logger.warning("skipping %s: %s (the log was never synced)", path, exc)
        return None
    if topic_id is None:
        logger.warning("skipping %s: it has no partition.metadata", path)
        return None
    try:
        return PartitionLog.open(path, topic_id, LogConfig(), plan.start_offsets.get(tp),
                                 clean_shutdown=plan.clean, synced=plan.synced,
                                 metadata_read=True, listing=listing)
    except (CorruptRecordError, PartitionMetadataError, checkpoints.CheckpointError) as exc:
        raise Damaged(tp, path, str(exc)) from exc


def segments_to_recover(plan: DirPlan, path: str, names: list[str]) -> int:
    """The segments recovery checks in one log whose directory holds `names`: from the one
    holding its recovery point on (none after a clean shutdown). Segment files are named by
    their base offset."""
    if plan.clean:
        return 0
    bases = sorted(int(name[:-4]) for name in names
                   if name.endswith(".log") and name[:-4].isdigit())
    point = recovery_point(path)
    return sum(1 for i, base in enumerate(bases) if i + 1 == len(bases) or bases[i + 1] > point)


@dataclass(frozen=True)
class LoadProgress:
    remaining_logs: dict[str, int]  # per log dir
    remaining_segments: dict[str, int]  # per log dir, in the logs being opened now
    loaded_logs: int


# Told each log as it opens: (its partition, the log, the HW in the dir's checkpoint).
Attach = Callable[[TopicPartition, PartitionLog, "int | None"], None]


class _Abandoned:
    """A log not opened: the manager closed during the load."""


_ABANDONED = _Abandoned()
Outcome = PartitionLog | Damaged | None | _Abandoned


class LogLoader:
    """Loads the logs of every log dir with `threads` threads per dir and hands each to
    `attach` on the caller's thread (the event loop, for `load`)."""

    def __init__(self, directories: list[str], threads: int, attach: Attach,
                 tombstones: Callable[[list[str]], None]) -> None:
        self._directories = directories
        self._threads = threads
        self._attach = attach
        self._tombstones = tombstones
        self._abandoned = False
        self._left: dict[str, int] = {}  # per log dir, partition directories not opened
        self.remaining = 0  # partition directories found and not opened yet
        self.loaded = 0  # logs opened and attached
        # (log dir, partition) -> segments to check, while a recovery thread opens that log
        self._recovering: dict[tuple[str, TopicPartition], int] = {}
        # Dirs whose every log is not loaded (yet): no clean-shutdown marker at close.
        self.unloaded = set(directories)
        self.damaged: dict[TopicPartition, Damaged] = {}

    def progress(self) -> LoadProgress:
        segments: dict[str, int] = dict.fromkeys(self._directories, 0)
        for (directory, _), count in self._recovering.copy().items():  # copy: threads add
            segments[directory] += count
        return LoadProgress(self._left.copy(), segments, self.loaded)

    def abandon(self) -> None:
        """Open nothing more (the manager is closing)."""
        self._abandoned = True

    def load_now(self) -> None:
        """Load on this thread, waiting for the pool (tools, tests, the LogManager's
        constructor)."""
        with ThreadPoolExecutor(self._threads * len(self._directories),
                                "log-recovery") as pool:
            plans = list(pool.map(plan_dir, self._directories))
            self._planned(plans)
            for opened in pool.map(self._open_chunk, self._chunks(plans)):
                for item in opened:
                    self._loaded(*item)

    async def load(self) -> None:
        """Load off the event loop (Kafka's LogManager.startup); each log is attached as it
        opens. OSError or CheckpointError: a log dir cannot be read (the broker cannot
        start)."""
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(self._threads * len(self._directories), "log-recovery")
        try:
            plans = await asyncio.gather(*(loop.run_in_executor(pool, plan_dir, directory)
                                           for directory in self._directories))
            self._planned(plans)
            opens = [loop.run_in_executor(pool, self._open_chunk, chunk)
                     for chunk in self._chunks(plans)]
            for next_done in asyncio.as_completed(opens):  # one callback a chunk, not a scan
                for item in await next_done:
                    self._loaded(*item)
        finally:
            # Cancelled (a stop during the load): queued chunks are dropped; a running one
            # stops at its next log and closes what it opened, never attached, as if the
            # process had crashed there (its dir stays unloaded: no clean-shutdown marker).
            self._abandoned = True
            pool.shutdown(wait=False, cancel_futures=True)

    def _planned(self, plans: list[DirPlan]) -> None:
        for plan in plans:
            self._tombstones(plan.tombstones)
            self.remaining += len(plan.partitions)
            self._left[plan.directory] = len(plan.partitions)
            if not plan.partitions:
                self._dir_loaded(plan)

    def _chunks(self, plans: list[DirPlan]) -> list[list[tuple[DirPlan, TopicPartition, str]]]:
        """The partition directories in chunks of up to OPEN_CHUNK, at least one a thread."""
        work = [(plan, tp, path) for plan in plans for tp, path in plan.partitions]
        size = max(1, min(OPEN_CHUNK, -(-len(work) // (self._threads * len(plans) or 1))))
        return [work[start:start + size] for start in range(0, len(work), size)]

    def _open_chunk(self, chunk: list[tuple[DirPlan, TopicPartition, str]]
                    ) -> list[tuple[DirPlan, TopicPartition, str, Outcome]]:
        opened = [(*item, self._open(*item)) for item in chunk]
        if self._abandoned:  # the load stopped meanwhile: nothing of this chunk is attached
            for *_, outcome in opened:
                if isinstance(outcome, PartitionLog):
                    outcome.close(flush=False)
        return opened

    def _open(self, plan: DirPlan, tp: TopicPartition, path: str) -> Outcome:
        if self._abandoned:
            return _ABANDONED
        names = os.listdir(path)  # OSError fails the dir, as the open would
        key = (plan.directory, tp)
        self._recovering[key] = segments_to_recover(plan, path, names)
        try:
            return open_partition(plan, tp, path, names)
        except Damaged as exc:
            return exc
        finally:
            del self._recovering[key]

    def _loaded(self, plan: DirPlan, tp: TopicPartition, path: str, outcome: Outcome) -> None:
        if isinstance(outcome, _Abandoned):
            return
        self.remaining -= 1
        if isinstance(outcome, Damaged):
            logger.error("%s", outcome)
            self.damaged[tp] = outcome
        elif outcome is not None:  # None: skipped (never synced, or no partition.metadata)
            self._attach(tp, outcome, plan.high_watermarks.get(tp))
            self.loaded += 1
        self._left[plan.directory] -= 1
        if self._left[plan.directory] == 0:
            self._dir_loaded(plan)

    def _dir_loaded(self, plan: DirPlan) -> None:
        self.unloaded.discard(plan.directory)
        offline = sum(1 for tp, _ in plan.partitions if tp in self.damaged)
        logger.info("loaded %d partition log(s) from %s (%s shutdown)%s",
                    len(plan.partitions) - offline, plan.directory,
                    "clean" if plan.clean else "unclean",
                    f"; {offline} damaged, kept offline" if offline else "")
