"""LogCleaner: compaction of the partition logs whose cleanup.policy holds `compact` (Kafka's
LogCleaner and LogCleanerManager; the rewriting itself is broker/log/cleaner_core.py, the
crash-safe swap broker/log/cleaner_swap.py).

The cleaner picks the dirtiest logs (at most `log.cleaner.threads` at a time) and cleans each
in a worker thread, off the event loop, and again while some log is due; when none is, it
waits `log.cleaner.backoff.ms`:
* the cleanable range of a log ends at its active segment, at the segment holding the high
  watermark (nothing uncommitted is compacted) and at the first segment whose largest
  timestamp is younger than `min.compaction.lag.ms`;
* its dirty part starts at the cleaner checkpoint (`cleaner-offset-checkpoint` in each log
  dir, Kafka's file); a log is cleaned when dirty bytes / cleanable bytes reach
  `min.cleanable.dirty.ratio`, when its oldest dirty record is older than
  `max.compaction.lag.ms`, or when a tombstone or transaction marker it keeps passes its
  delete horizon;
* the offset map (key -> latest offset) is built over the dirty part, as many whole segments
  as `log.cleaner.dedupe.buffer.size` holds, and every segment from the log start up to where
  the map reaches is rewritten, small segments grouped up to `segment.bytes`; aborted
  transactions' records go, and a COMMIT/ABORT marker goes once no batch of its transaction is
  left and its delete horizon has passed (broker/log/cleaner_txn.py).
The swap happens on the event loop (PartitionLog.replace_segments) after a check that the
segments did not change meanwhile (retention, truncation); otherwise the cleaned files are
dropped and the next round starts over. A leader and its followers clean independently.

A log whose cleaning fails for any other reason (a corrupt batch, a compressed body that does
not decompress, an I/O error on segments that did not change, a dedupe buffer too small) is
marked uncleanable, as Kafka since KIP-346: logged once and skipped until the broker restarts
or the log is truncated or deleted, so that it does not stay the dirtiest log and starve the
others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.log import checkpoints
from broker.log.checkpoints import TopicPartition
from broker.log.cleaner_core import (
    CleanRules,
    DedupeBufferTooSmall,
    SegmentFile,
    build_offset_map,
    clean_group,
    group_segments,
    map_capacity,
)
from broker.log.cleaner_swap import cleaned_path, discard
from broker.log.cleaner_txn import CleanedTxns
from broker.log.config import NEVER
from broker.log.partition_log import PartitionLog
from kraft.log.base import CorruptRecordError
from kraft.log.segmented import SegmentView

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings, Kafka's defaults."""

    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728

    def __post_init__(self) -> None:
        if self.threads < 1 or self.backoff_ms < 0:
            raise ValueError("log.cleaner.threads must be at least 1 and "
                             "log.cleaner.backoff.ms not negative")
        if map_capacity(self.dedupe_buffer_size, self.threads) < 2:
            raise ValueError("log.cleaner.dedupe.buffer.size leaves no room for an offset map")


@dataclass(slots=True)
class CleanerStats:
    """What the cleaner did (for metrics and tests)."""

    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    last_clean_ms: int = -1  # wall clock of the last installed cleaning
    last_duration_ms: int = 0
    aborted: int = 0  # cleanings dropped because the log changed meanwhile
    markers_removed: int = 0  # transaction markers past their delete horizon


@dataclass(slots=True)
class CleanPlan:
    """What to clean in one log: the segments of its cleanable range (oldest first) and
    where its dirty part starts."""

    tp: TopicPartition
    log: PartitionLog
    segments: list[SegmentView]
    first_dirty: int
    dirty_ratio: float
    rules: CleanRules = field(repr=False, default_factory=lambda: CleanRules({}, 0, 0))


@dataclass(slots=True)
class _Cleaned:
    swaps: list[tuple[str, list[SegmentView]]]
    reached: int
    bytes_read: int
    bytes_written: int
    records_removed: int
    next_horizon_ms: int | None
    txns: CleanedTxns


Logs = Callable[[], Mapping[TopicPartition, PartitionLog]]
HighWatermarks = Callable[[], Mapping[TopicPartition, int]]


class LogCleaner:
    """Compacts the logs `logs()` returns; `busy(tp)` says a flush job holds the log."""

    def __init__(
        self, config: CleanerConfig, log_dirs: list[str], logs: Logs,
        high_watermarks: HighWatermarks, busy: Callable[[TopicPartition], bool],
    ) -> None:
        self.config = config
        self.stats = CleanerStats()
        self._dirs = log_dirs
        self._logs = logs
        self._high_watermarks = high_watermarks
        self._busy = busy
        self._checkpoints: dict[TopicPartition, int] = {}
        self._checkpoints_dirty = False  # changed since the file was last written
        self._write_lock = threading.Lock()
        self._horizons: dict[TopicPartition, int] = {}  # earliest tombstone horizon kept
        self._uncleanable: set[TopicPartition] = set()
        self._cleaning: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._inflight: list[asyncio.Future[_Cleaned | None]] = []
        # The log manager's: a swap reopened the log's files (its flush waiters may be
        # answered: reopening synced them), and an I/O error in a swap (the log dir failed).
        self.on_swapped: Callable[[TopicPartition], None] | None = None
        self.on_dir_failure: Callable[[str, BaseException], None] | None = None
        for directory in log_dirs:
            self._checkpoints.update(checkpoints.read_offsets(
                os.path.join(directory, CLEANER_CHECKPOINT_FILE)))

    # -- scheduling --------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None and self.config.enable:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="log-cleaner")

    def wake(self) -> None:
        """Look for work now instead of after the backoff (tests, tools)."""
        if self._wake is not None:
            self._wake.set()

    async def stop(self) -> None:
        """Stop the task; a cleaning thread in flight finishes, its files are dropped."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for future in self._inflight:
            with contextlib.suppress(Exception):
                cleaned = await future
                for path, _ in cleaned.swaps if cleaned is not None else ():
                    discard(path)
        self._inflight = []
        if self._checkpoints_dirty:
            await asyncio.to_thread(self.write_checkpoints)

    def truncated(self, tp: TopicPartition, end: int) -> None:
        """The log was cut to `end`: what is appended from there on is dirty (Kafka's
        LogCleanerManager.updateCheckpoints on truncation)."""
        offset = self._checkpoints.get(tp)
        if offset is not None and offset > end:
            self._checkpoints[tp] = end
            self._checkpoints_dirty = True
        self._uncleanable.discard(tp)  # what failed may be gone: try again

    def uncleanable(self) -> frozenset[TopicPartition]:
        """The logs a failure took out of cleaning (Kafka's uncleanable partitions)."""
        return frozenset(self._uncleanable)

    def forget(self, tp: TopicPartition) -> None:
        """The log is gone (deleted topic): forget its checkpoint."""
        self._checkpoints.pop(tp, None)
        self._horizons.pop(tp, None)
        self._uncleanable.discard(tp)

    async def _run(self) -> None:
        """As Kafka's CleanerThread: clean while some log is due, back off when none is."""
        assert self._wake is not None
        while True:
            self._wake.clear()
            cleaned = 0
            try:
                cleaned = await self.clean_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("log cleaner round failed; retrying after the backoff")
            if cleaned:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.backoff_ms / 1000)

    async def clean_round(self, now_ms: int | None = None) -> int:
        """Clean the dirtiest logs, `log.cleaner.threads` at a time; logs cleaned."""
        plans = self.plans(_now_ms() if now_ms is None else now_ms)
        plans = plans[: self.config.threads]
        if not plans:
            return 0
        results = await asyncio.gather(*(self._clean(plan) for plan in plans))
        return sum(results)

    def plans(self, now_ms: int) -> list[CleanPlan]:
        """The logs to clean now, dirtiest first (Kafka's grabFilthiestCompactedLog)."""
        hws = self._high_watermarks()
        out: list[CleanPlan] = []
        for tp, log in self._logs().items():
            if tp in self._cleaning or tp in self._uncleanable or not log.config.compact:
                continue
            hw = hws.get(tp)
            if hw is None:
                continue  # not a replica the replica manager runs: nothing is committed
            try:
                plan = self.plan(tp, log, hw, now_ms)
            except Exception as exc:  # one broken log must not stop the others' cleaning
                self._mark_uncleanable(tp, log, exc)
                continue
            if plan is not None:
                out.append(plan)
        out.sort(key=lambda plan: plan.dirty_ratio, reverse=True)
        return out

    def plan(
        self, tp: TopicPartition, log: PartitionLog, high_watermark: int, now_ms: int
    ) -> CleanPlan | None:
        """The log's cleanable range and whether it is due (module docstring), or None."""
        config = log.config
        views = log.segment_views()
        cleanable: list[SegmentView] = []
        # Never past the last stable offset: an open transaction's records may still abort.
        stable = log.last_stable_offset(high_watermark)
        for view in views[:-1]:  # never the active segment
            if view.end_offset > stable:
                break
            if config.min_compaction_lag_ms > 0:
                _, largest = log.segment_timestamps(view.base_offset)
                if now_ms - largest < config.min_compaction_lag_ms:
                    break
            cleanable.append(view)
        if not cleanable:
            return None
        first_dirty = self._checkpoints.get(tp, 0)
        if first_dirty > log.end_offset or first_dirty < cleanable[0].base_offset:
            first_dirty = cleanable[0].base_offset  # truncated, or below a deleted start
        clean = sum(v.size for v in cleanable if v.end_offset <= first_dirty)
        dirty_views = [v for v in cleanable if v.end_offset > first_dirty]
        dirty = sum(v.size for v in dirty_views)
        ratio = dirty / (clean + dirty) if clean + dirty else 0.0
        due = dirty > 0 and ratio >= config.min_cleanable_dirty_ratio
        if dirty_views and config.max_compaction_lag_ms < NEVER:
            first_ms, _ = log.segment_timestamps(dirty_views[0].base_offset)
            due = due or now_ms - first_ms > config.max_compaction_lag_ms
        horizon = self._horizons.get(tp)
        due = due or (horizon is not None and now_ms >= horizon)
        if not due:
            return None
        rules = CleanRules({}, now_ms, config.delete_retention_ms, log.producer_last_offsets())
        for txn in log.aborted_transactions(cleanable[0].base_offset, cleanable[-1].end_offset):
            rules.aborted.setdefault(txn.producer_id, []).append((txn.first_offset,
                                                                  txn.last_offset))
        return CleanPlan(tp, log, cleanable, first_dirty, ratio, rules)

    # -- one log -----------------------------------------------------------------------------

    async def _clean(self, plan: CleanPlan) -> int:
        tp = plan.tp
        self._cleaning.add(tp)
        started = time.monotonic()
        try:
            future = asyncio.get_running_loop().run_in_executor(
                None, self._clean_blocking, plan)
            self._inflight.append(future)
            try:
                cleaned = await asyncio.shield(future)
            except asyncio.CancelledError:
                raise  # stop() waits for the thread and drops its files
            except BaseException:
                self._inflight.remove(future)
                raise
            self._inflight.remove(future)
            if cleaned is None:
                return 0
            return await self._swap(plan, cleaned, started)
        except Exception as exc:
            if not isinstance(exc, DedupeBufferTooSmall) and self._changed(plan):
                # A segment deleted or cut meanwhile (retention, truncation): the next round
                # starts over from the log as it is then.
                self.stats.aborted += 1
                logger.warning("cleaning %s stopped: %s", plan.log.directory, exc)
            else:
                self._mark_uncleanable(tp, plan.log, exc)
            return 0
        finally:
            self._cleaning.discard(tp)

    def _changed(self, plan: CleanPlan) -> bool:
        """Whether the log is gone or reopened, or a segment of the plan changed."""
        log = self._logs().get(plan.tp)
        if log is not plan.log:
            return True
        try:
            current = set(log.segment_views())
        except Exception:
            return True  # closed
        return any(view not in current for view in plan.segments)

    def _mark_uncleanable(self, tp: TopicPartition, log: PartitionLog,
                          exc: BaseException) -> None:
        self._uncleanable.add(tp)
        logger.error("%s cannot be cleaned; it is not tried again until the broker restarts "
                     "or the log is truncated or deleted: %s", log.directory, exc,
                     exc_info=not isinstance(exc, DedupeBufferTooSmall))

    def _clean_blocking(self, plan: CleanPlan) -> _Cleaned | None:
        """The worker thread's part: the offset map, then each group into a `.cleaned` file."""
        files = [SegmentFile(v.base_offset, v.end_offset, v.size, v.path)
                 for v in plan.segments]
        capacity = map_capacity(self.config.dedupe_buffer_size, self.config.threads)
        rules = plan.rules
        offsets, reached = build_offset_map(files, plan.first_dirty, capacity, rules.aborted)
        rules.offsets = offsets
        chosen = [f for f in files if f.end <= reached]
        views = {v.base_offset: v for v in plan.segments}
        cleaned = _Cleaned([], reached, 0, 0, 0, None, rules.txns)
        directory = plan.log.directory
        try:
            for group in group_segments(chosen, plan.log.config.segment_bytes):
                out = cleaned_path(directory, group[0].base)
                result = clean_group(group, rules, out)
                cleaned.swaps.append((out, [views[f.base] for f in group]))
                cleaned.bytes_read += result.bytes_read
                cleaned.bytes_written += result.bytes_written
                cleaned.records_removed += result.records_removed
                if result.next_horizon_ms is not None and (
                        cleaned.next_horizon_ms is None
                        or result.next_horizon_ms < cleaned.next_horizon_ms):
                    cleaned.next_horizon_ms = result.next_horizon_ms
        except BaseException:
            for path, _ in cleaned.swaps:
                discard(path)
            raise
        return cleaned if cleaned.swaps else None

    async def _swap(self, plan: CleanPlan, cleaned: _Cleaned, started: float) -> int:
        tp = plan.tp
        log = self._logs().get(tp)
        try:
            while log is plan.log and self._busy(tp):
                await asyncio.sleep(0.01)  # a flush job holds the files: it is back soon
                log = self._logs().get(tp)
        except asyncio.CancelledError:
            for path, _ in cleaned.swaps:
                discard(path)
            raise
        try:
            if log is not plan.log:
                raise ValueError("the log was deleted or reopened")
            log.replace_segments(cleaned.swaps, cleaned.txns)
        except ValueError as exc:
            for path, _ in cleaned.swaps:
                discard(path)
            self.stats.aborted += 1
            logger.info("dropped a cleaning of %s: %s", plan.log.directory, exc)
            return 0
        except (OSError, CorruptRecordError) as exc:
            # The files of the log may be half swapped (recovery finishes the swap at the next
            # start) or its segments failed to open again: nothing in its log dir is to be
            # trusted, as for any failed write.
            logger.error("swapping cleaned segments into %s failed: %s", plan.log.directory,
                         exc)
            if self.on_dir_failure is not None:
                self.on_dir_failure(plan.log.directory, exc)
            raise
        if self.on_swapped is not None:
            self.on_swapped(tp)
        self._checkpoints[tp] = cleaned.reached
        self._checkpoints_dirty = True
        if cleaned.next_horizon_ms is None:
            self._horizons.pop(tp, None)
        else:
            self._horizons[tp] = cleaned.next_horizon_ms
        stats = self.stats
        stats.passes += 1
        stats.bytes_read += cleaned.bytes_read
        stats.bytes_written += cleaned.bytes_written
        stats.records_removed += cleaned.records_removed
        stats.markers_removed += cleaned.txns.markers_removed
        stats.last_clean_ms = _now_ms()
        stats.last_duration_ms = int((time.monotonic() - started) * 1000)
        logger.info("cleaned %s up to offset %d: %d -> %d bytes, %d record(s) removed",
                    log.directory, cleaned.reached, cleaned.bytes_read, cleaned.bytes_written,
                    cleaned.records_removed)
        await asyncio.to_thread(self.write_checkpoints)
        return 1

    def checkpoint(self, tp: TopicPartition) -> int | None:
        """The offset the log is clean up to, if it was ever cleaned."""
        return self._checkpoints.get(tp)

    def write_checkpoints(self) -> None:
        """cleaner-offset-checkpoint in every log dir (blocking; one writer at a time: a
        write from a cleaning and the one at stop may overlap)."""
        with self._write_lock:
            self._checkpoints_dirty = False
            logs = self._logs()
            by_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in self._dirs}
            for tp, offset in list(self._checkpoints.items()):
                log = logs.get(tp)
                if log is not None:
                    by_dir.setdefault(os.path.dirname(log.directory), {})[tp] = offset
            for directory, offsets in by_dir.items():
                checkpoints.write_offsets(os.path.join(directory, CLEANER_CHECKPOINT_FILE),
                                          offsets)


def _now_ms() -> int:
    return int(time.time() * 1000)
