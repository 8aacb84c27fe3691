"""LogManager: every partition log under a broker's log.dirs (loaded by log_loader.py, closed
by log_closer.py), and the background work Kafka's LogManager schedules: flushes by policy,
the log-dir checkpoints, retention, the clean-shutdown marker.

Blocking work (fsync, checkpoint files) runs in worker threads, one hop per round for all the
logs that need it; everything that changes a log's view (appends, retention) stays on the event
loop. The per-directory checkpoint files are Kafka's (`replication-offset-checkpoint` every
`replica.high.watermark.checkpoint.interval.ms`, `recovery-point-offset-checkpoint` and
`log-start-offset-checkpoint` every `log.flush.offset.checkpoint.interval.ms`); a partition's
own recovery point, which recovery trusts, is kept in its directory by SegmentedLog.

Creating a log (`get_or_create`; many at once in a worker thread: log_creator.py) and assigning
a leader epoch sync nothing on the event loop (broker/log/partition_state.py says why that is
safe); the log tells the manager (`on_metadata_unsynced`) and the background round syncs them
in the worker thread, at most `METADATA_SYNC_CHUNK` logs per hop, after the logs whose flush is
due by policy or awaited (`wait_flushed`), so that a broker creating thousands of logs does not
delay an awaited flush behind all of their fsyncs.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from broker.log import checkpoints
from broker.log.checkpoints import TopicPartition
from broker.log.cleaner import CleanerConfig, LogCleaner
from broker.log.config import LogConfig
from broker.log.log_closer import close_logs
from broker.log.log_creator import LogCreator
from broker.log.log_files import PartitionFlushJob, remove_deleted
from broker.log.log_loader import LogLoader
from broker.log.partition_log import PartitionLog
from broker.log.partition_state import PartitionLogState
from kraft.log.base import FlushJob
from kraft.log.segmented import LogFaults

logger = logging.getLogger(__name__)

DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300_000
DEFAULT_HW_CHECKPOINT_INTERVAL_MS = 5_000
DEFAULT_RECOVERY_POINT_CHECKPOINT_INTERVAL_MS = 60_000
# How often flush.ms is looked at (Kafka: log.flush.scheduler.interval.ms).
DEFAULT_FLUSH_CHECK_INTERVAL_MS = 1_000
# Logs whose only unsynced files are metadata (new logs, new leader epochs) synced per hop.
METADATA_SYNC_CHUNK = 64

HighWatermarks = Callable[[], Mapping[TopicPartition, int]]
# Told once per log dir whose I/O failed: (the log dir, the error).
DirFailureHandler = Callable[[str, BaseException], None]


def _remove_all(paths: list[str]) -> None:
    for path in paths:
        remove_deleted(path)


class LogManager:
    """The partition logs of one broker, `<log.dir>/<topic>-<partition>`."""

    def __init__(
        self,
        log_dirs: Sequence[str],
        high_watermarks: HighWatermarks,
        *,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
        hw_checkpoint_interval_ms: int = DEFAULT_HW_CHECKPOINT_INTERVAL_MS,
        recovery_point_checkpoint_interval_ms: int = DEFAULT_RECOVERY_POINT_CHECKPOINT_INTERVAL_MS,
        flush_check_interval_ms: int = DEFAULT_FLUSH_CHECK_INTERVAL_MS,
        cleaner: CleanerConfig | None = None,
        recovery_threads_per_data_dir: int = 2,
        load: bool = True,
    ) -> None:
        """Open every partition directory found under `log_dirs` (broker/log/log_loader.py),
        `recovery_threads_per_data_dir` at a time per dir, now, or with `load=False` when the
        caller awaits `load_logs`. A damaged log is kept offline (`offline_partitions`)."""
        if not log_dirs:
            raise ValueError("log.dirs names no directory")
        self._dirs = [os.path.abspath(d) for d in log_dirs]
        self._high_watermarks = high_watermarks
        self._retention_interval_s = retention_check_interval_ms / 1000
        self._hw_interval_s = hw_checkpoint_interval_ms / 1000
        self._recovery_interval_s = recovery_point_checkpoint_interval_ms / 1000
        self._flush_check_interval_s = flush_check_interval_ms / 1000
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._counts: dict[str, int] = {}  # partitions per log dir (placing new logs)
        self._hw_checkpoints: dict[TopicPartition, int] = {}
        self._due: dict[TopicPartition, None] = {}
        # Logs with metadata files written without fsync (synced lazily, in chunks).
        self._unsynced: dict[TopicPartition, None] = {}
        self._flushing: set[TopicPartition] = set()
        self._doomed: list[PartitionLog] = []  # deleted while a flush job ran on them
        # Directories of deleted logs, renamed `...-delete`, removed by the background round.
        self._tombstones: list[str] = []
        self._inflight: asyncio.Future[None] | None = None  # the worker thread's flush round
        # Callers waiting for an offset to be fsynced: (offset, future) per partition.
        self._flush_waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[None]]]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        # Log dirs whose I/O failed (Kafka's LogDirFailureChannel): nothing in them is served.
        self.offline_dirs: dict[str, str] = {}
        self.on_dir_failure: DirFailureHandler | None = None
        # Shared by every log; injected by tests and the chaos tool only (a full disk, slow
        # fsyncs), as kraft.node.faults does for the metadata log.
        self.faults = LogFaults()
        # Compaction of `cleanup.policy=compact` logs (broker/log/cleaner.py).
        self.cleaner = LogCleaner(cleaner or CleanerConfig(), self._dirs, self._online_logs,
                                  high_watermarks, lambda tp: tp in self._flushing)
        self.cleaner.on_swapped = lambda tp: self._wake_flush_waiters(tp, self._logs.get(tp))
        self.cleaner.on_dir_failure = self.fail_dir
        self._threads = max(1, recovery_threads_per_data_dir)
        self._loader = LogLoader(self._dirs, self._threads, self._attach_loaded,
                                 lambda paths: self._tombstones.extend(paths))
        self._jobs_abandoned: list[tuple[TopicPartition, PartitionLog, PartitionFlushJob]] = []
        # New logs' placement, and many created at once off the loop (`creator.create`).
        self.creator = LogCreator(self._dirs, self._counts, self.offline_dirs,
                                   self._loader.damaged, self._logs.get, self.get_or_create,
                                   self._attach, self.fail_dir)
        if load:
            self._loader.load_now()

    # -- loading (broker/log/log_loader.py) ----------------------------------------------------

    async def load_logs(self) -> None:
        """Open every log off the event loop (LogLoader.load), attached as each opens."""
        await self._loader.load()

    @property
    def loading(self) -> LogLoader:
        """The start-up load: `remaining` logs, `progress()` (the recovery metrics)."""
        return self._loader

    @property
    def offline_partitions(self) -> dict[TopicPartition, str]:
        """Partitions whose log is damaged (kept offline until the broker restarts with the
        directory moved away), with what is wrong."""
        return {tp: str(damage) for tp, damage in self._loader.damaged.items()}

    def _attach_loaded(self, tp: TopicPartition, log: PartitionLog, hw: int | None) -> None:
        if tp in self._logs:
            log.close(flush=False)
            raise ValueError(f"{tp[0]}-{tp[1]} is in two log dirs: "
                             f"{self._logs[tp].directory} and {log.directory}")
        self._attach(tp, log)
        if hw is not None:
            self._hw_checkpoints[tp] = hw

    def _attach(self, tp: TopicPartition, log: PartitionLog) -> None:
        self._logs[tp] = log
        parent = os.path.dirname(log.directory)
        self._counts[parent] = self._counts.get(parent, 0) + 1
        log.on_flush_due = self._flush_due
        log.on_truncated = lambda log, end: self.cleaner.truncated((log.topic, log.partition), end)
        log.on_metadata_unsynced = self._metadata_unsynced
        log.use_faults(self.faults)
        if log.metadata_unsynced:
            self._metadata_unsynced(log)

    # -- the logs ----------------------------------------------------------------------------

    @property
    def log_dirs(self) -> list[str]:
        return list(self._dirs)

    def fail_dir(self, path: str, exc: BaseException) -> None:
        """An I/O error under `path` (a log dir or a file or log in one): the whole log dir
        is taken offline, as Kafka does, since nothing written to it since may be trusted.
        The handler hears of each dir once."""
        path = os.path.abspath(path)
        directory = max((d for d in self._dirs if path == d or path.startswith(d + os.sep)),
                        key=len, default=path)
        if directory in self.offline_dirs:
            return
        self.offline_dirs[directory] = str(exc)
        logger.critical("log directory %s failed: %s", directory, exc)
        if self.on_dir_failure is not None:
            self.on_dir_failure(directory, exc)

    def _online_logs(self) -> dict[TopicPartition, PartitionLog]:
        if not self.offline_dirs:
            return self._logs
        return {tp: log for tp, log in self._logs.items() if not self.is_offline(log)}

    def is_offline(self, log: PartitionLog) -> bool:
        return bool(self.offline_dirs) and os.path.dirname(log.directory) in self.offline_dirs

    def partition_offline(self, topic: str, partition: int) -> bool:
        """Whether this broker's log of the partition is damaged and kept offline."""
        return (topic, partition) in self._loader.damaged

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def get_or_create(
        self, topic: str, partition: int, topic_id: str, config: LogConfig
    ) -> PartitionLog:
        """The partition's log with `config`, created in the log dir holding the fewest
        partitions when there is none. A log left by a deleted topic of the same name (another
        topic id) is deleted first."""
        tp = (topic, partition)
        damage = self._loader.damaged.get(tp)
        if damage is not None:
            raise OSError(errno.EIO, str(damage))
        log = self._logs.get(tp)
        if log is not None and log.topic_id != topic_id:
            logger.warning("%s belongs to topic id %s, not %s: deleting it", log.directory,
                           log.topic_id, topic_id)
            self.delete(topic, partition)
            log = None
        if log is not None:
            if log.config != config:
                log.update_config(config)
            return log
        directory = self.creator.place()
        try:
            log = PartitionLog.open(os.path.join(directory, f"{topic}-{partition}"), topic_id,
                                    config)
        except OSError as exc:
            self.fail_dir(directory, exc)
            raise
        self._attach(tp, log)
        return log

    def delete(self, topic: str, partition: int) -> None:
        """Delete the partition's log and its directory (topic deletion deletes data)."""
        tp = (topic, partition)
        log = self._logs.pop(tp, None)
        if log is not None:
            parent = os.path.dirname(log.directory)
            self._counts[parent] = self._counts.get(parent, 1) - 1
        self._hw_checkpoints.pop(tp, None)
        self._due.pop(tp, None)
        self._unsynced.pop(tp, None)
        self.cleaner.forget(tp)
        self._wake_flush_waiters(tp, None, final=True)
        if log is None:
            return
        if tp in self._flushing:
            self._doomed.append(log)  # deleted once its flush job is back
            return
        self._tombstones.append(log.delete())
        if self._wake is not None:
            self._wake.set()

    def high_watermark_checkpoint(self, topic: str, partition: int) -> int | None:
        """The HW in replication-offset-checkpoint at start, clamped to the log's
        [start, end]; None when the file had none."""
        value = self._hw_checkpoints.get((topic, partition))
        log = self._logs.get((topic, partition))
        if value is None or log is None:
            return None
        return min(max(value, log.start_offset), log.end_offset)

    # -- background work ---------------------------------------------------------------------

    async def wait_flushed(self, topic: str, partition: int, offset: int) -> None:
        """Wait until every offset below `offset` is fsynced, i.e. the log's `flushed_offset`
        reaches `offset` (Kafka flushes an append that reaches flush.messages before it
        answers: call this when `flush_due` says so after an append). Returns at once when it
        already is, the manager is closed, or the log is gone; raises OSError (EIO) when the
        log is deleted or closed first or its flush fails. The flush is asked for here: the
        background task wakes at once and runs this log's job in its next hop, ahead of the
        lazy metadata syncs (no wait for the next flush check); a job already running that
        began before the append is followed by one more. Must be called with the manager
        started (`start`), or the wait lasts until `close`."""
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is None or log.flushed_offset >= offset or self._closed:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flush_waiters.setdefault(tp, []).append((offset, future))
        self._flush_due(log)
        await future

    def _wake_flush_waiters(
        self, tp: TopicPartition, log: PartitionLog | None, final: bool = False
    ) -> None:
        """Answer the waiters whose offset is flushed; with `final` (the log was deleted or
        closed) fail the others, since no flush will come."""
        waiters = self._flush_waiters.get(tp)
        if not waiters:
            return
        flushed = log.flushed_offset if log is not None else -1
        waiting = []
        for offset, future in waiters:
            if future.done():
                continue
            if flushed >= offset:
                future.set_result(None)
            elif final:
                future.set_exception(OSError(
                    errno.EIO, f"{tp[0]}-{tp[1]} was closed or deleted before offset "
                    f"{offset} was flushed"))
            else:
                waiting.append((offset, future))
        if waiting:
            self._flush_waiters[tp] = waiting
            self._due[tp] = None  # written after the job began: one more round
        else:
            del self._flush_waiters[tp]

    def _flush_due(self, log: PartitionLogState) -> None:
        self._due[(log.topic, log.partition)] = None
        if self._wake is not None:
            self._wake.set()

    def _metadata_unsynced(self, log: PartitionLogState) -> None:
        tp = (log.topic, log.partition)
        if tp in self._unsynced:
            return
        self._unsynced[tp] = None
        if self._wake is not None:
            self._wake.set()

    def start(self) -> None:
        """Start the background task on the running event loop."""
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        if self._due or self._unsynced:
            self._wake.set()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="log-manager")
        self.cleaner.start()

    async def _run(self) -> None:
        assert self._wake is not None
        now = time.monotonic()
        next_retention = now + self._retention_interval_s
        next_hw = now + self._hw_interval_s
        next_recovery = now + self._recovery_interval_s
        next_flush_check = now + self._flush_check_interval_s
        # The loop also ends on `_closed`: Python 3.11's wait_for may swallow a cancellation
        # that arrives as the event is set.
        while not self._closed:
            timeout = max(0.0, min(next_retention, next_hw, next_recovery, next_flush_check)
                          - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            if self._closed:
                return
            self._wake.clear()
            now = time.monotonic()
            try:
                if now >= next_flush_check:
                    next_flush_check = now + self._flush_check_interval_s
                    wall = _now_ms()
                    for tp, log in self._logs.items():
                        if log.flush_due(wall):
                            self._due[tp] = None
                if self._due or self._unsynced:
                    await self.flush_due_logs()
                if self._tombstones:
                    gone, self._tombstones = self._tombstones, []
                    await asyncio.to_thread(_remove_all, gone)
                if now >= next_retention:
                    next_retention = now + self._retention_interval_s
                    self.run_retention()
                failed: list[tuple[str, OSError]] = []
                if now >= next_hw:
                    next_hw = now + self._hw_interval_s
                    failed += await asyncio.to_thread(self.write_hw_checkpoints,
                                                      dict(self._high_watermarks()))
                if now >= next_recovery:
                    next_recovery = now + self._recovery_interval_s
                    failed += await asyncio.to_thread(self.write_offset_checkpoints,
                                                      self._offset_snapshot())
                for directory, exc in failed:
                    self.fail_dir(directory, exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("log manager background round failed; retrying next round")
                await asyncio.sleep(0.1)

    async def flush_due_logs(self) -> None:
        """Run the flush jobs of every log the policy marked or a waiter awaits, in one
        worker-thread hop; then those of up to METADATA_SYNC_CHUNK logs with only metadata to
        sync, in a second (the rest wait for the next round, which the task runs at once)."""
        due, self._due = self._due, {}
        for tp in due:
            self._unsynced.pop(tp, None)  # its job syncs the metadata too
        lazy: list[TopicPartition] = []
        for tp in self._unsynced:
            lazy.append(tp)
            if len(lazy) >= METADATA_SYNC_CHUNK:
                break
        for tp in lazy:
            del self._unsynced[tp]
        await self._flush_hop(list(due))
        await self._flush_hop(lazy)
        if (self._due or self._unsynced) and self._wake is not None:
            self._wake.set()
        for log in self._doomed:
            self._tombstones.append(log.delete())
        self._doomed = []

    async def _flush_hop(self, tps: list[TopicPartition]) -> None:
        jobs: list[tuple[TopicPartition, PartitionLog, PartitionFlushJob]] = []
        wall = _now_ms()
        for tp in tps:
            log = self._logs.get(tp)
            if log is None:
                continue
            if tp in self._flushing:  # a job of an abandoned round: once it is back
                self._due[tp] = None
                continue
            try:
                job = log.begin_flush(wall)
            except Exception as exc:
                logger.exception("cannot flush %s", log.directory)
                self._fail_flush_waiters(tp, exc)
                if isinstance(exc, OSError):
                    self.fail_dir(log.directory, exc)
                continue
            if job is not None:
                jobs.append((tp, log, job))
                self._flushing.add(tp)
        if not jobs:
            return
        work = asyncio.get_running_loop().run_in_executor(
            None, _run_jobs, [job for _, _, job in jobs])
        self._inflight = work
        # Cancelled meanwhile (close): the thread still finishes, and close() waits for it
        # and completes the jobs.
        self._jobs_abandoned = jobs
        await asyncio.shield(work)
        self._inflight = None
        self._jobs_abandoned = []
        for tp, log, job in jobs:
            self._flushing.discard(tp)
            try:
                log.complete_flush(job)
            except Exception as exc:
                logger.exception("flushing %s failed", log.directory)
                self._fail_flush_waiters(tp, exc)
                if isinstance(exc, OSError):
                    self.fail_dir(log.directory, exc)
                continue
            self._wake_flush_waiters(tp, self._logs.get(tp))

    def _fail_flush_waiters(self, tp: TopicPartition, exc: BaseException) -> None:
        """The log's flush failed: its waiters get the error (no later flush will come)."""
        for _, future in self._flush_waiters.pop(tp, []):
            if not future.done():
                future.set_exception(OSError(
                    errno.EIO, f"{tp[0]}-{tp[1]}: the flush failed: {exc}"))

    def run_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every log (Kafka's cleanupLogs); segments deleted."""
        now = _now_ms() if now_ms is None else now_ms
        hws = self._high_watermarks()
        deleted = 0
        for tp, log in list(self._logs.items()):
            hw = hws.get(tp)
            if hw is None:
                continue  # not a replica the replica manager runs (yet): nothing is committed
            try:
                deleted += log.delete_old_segments(now, hw)
            except OSError as exc:
                logger.error("retention of %s failed: %s", log.directory, exc)
                self.fail_dir(log.directory, exc)
        return deleted

    def _offset_snapshot(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        recovery = {tp: log.recovery_point for tp, log in self._logs.items()}
        starts = {tp: log.start_offset for tp, log in self._logs.items()}
        return recovery, starts

    def _by_dir(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[str, dict[TopicPartition, int]]:
        out: dict[str, dict[TopicPartition, int]] = {d: {} for d in self._dirs}
        for tp, value in offsets.items():
            log = self._logs.get(tp)
            if log is not None:
                out.setdefault(os.path.dirname(log.directory), {})[tp] = value
        return out

    def write_hw_checkpoints(
        self, high_watermarks: Mapping[TopicPartition, int]
    ) -> list[tuple[str, OSError]]:
        """replication-offset-checkpoint in every online log dir (blocking: a worker thread);
        returns the dirs whose write failed, for fail_dir on the event loop."""
        return self._write_checkpoints(checkpoints.REPLICATION_OFFSET_FILE, high_watermarks)

    def write_offset_checkpoints(
        self, snapshot: tuple[Mapping[TopicPartition, int], Mapping[TopicPartition, int]]
    ) -> list[tuple[str, OSError]]:
        """recovery-point-offset-checkpoint and log-start-offset-checkpoint (blocking)."""
        recovery, starts = snapshot
        return (self._write_checkpoints(checkpoints.RECOVERY_POINT_FILE, recovery)
                + self._write_checkpoints(checkpoints.LOG_START_OFFSET_FILE, starts))

    def _write_checkpoints(
        self, name: str, offsets: Mapping[TopicPartition, int]
    ) -> list[tuple[str, OSError]]:
        failed: list[tuple[str, OSError]] = []
        for directory, in_dir in self._by_dir(offsets).items():
            if directory in self.offline_dirs:
                continue
            try:
                checkpoints.write_offsets(os.path.join(directory, name), in_dir)
            except OSError as exc:
                failed.append((directory, exc))
        return failed

    async def close(self) -> None:
        """Stop the background task, make every log durable and close it (all at once:
        broker/log/log_closer.py), write the checkpoints and the clean-shutdown marker, which
        lets the next start skip recovery."""
        if self._closed:
            return
        self._closed = True
        started = time.monotonic()
        self._loader.abandon()
        await self.creator.wait()
        await self.cleaner.stop()
        if self._task is not None:
            if self._wake is not None:
                self._wake.set()
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._inflight is not None:
            await self._inflight  # a flush round whose task was cancelled
            self._inflight = None
            for tp, log, job in self._jobs_abandoned:
                self._flushing.discard(tp)
                with contextlib.suppress(Exception):  # close_logs syncs it again, or fails
                    log.complete_flush(job)
            self._jobs_abandoned = []
        hws = dict(self._high_watermarks())
        try:
            await asyncio.to_thread(self._close_blocking, hws)
        finally:
            for tp in list(self._flush_waiters):  # the close flushed what it could
                self._wake_flush_waiters(tp, self._logs.get(tp), final=True)
        logger.info("closed %d partition log(s) in %.2f s", len(self._logs),
                    time.monotonic() - started)

    def close_now(self) -> None:
        """close() for code without an event loop (tests, tools)."""
        if self._closed:
            return
        self._closed = True
        self._close_blocking(dict(self._high_watermarks()))

    def _close_blocking(self, hws: Mapping[TopicPartition, int]) -> None:
        failed = close_logs(list(self._logs.values()), self._threads * len(self._dirs))
        for log, exc in failed:
            if self.is_offline(log):  # expected: its dir failed; said once already
                logger.warning("closing %s (its log dir is offline): %s", log.directory, exc)
            else:
                logger.error("closing %s failed: %s", log.directory, exc)
        for log in self._doomed:
            self._tombstones.append(log.delete())
        self._doomed = []
        _remove_all(self._tombstones)
        self._tombstones = []
        unwritten = self.write_hw_checkpoints(hws)
        unwritten += self.write_offset_checkpoints(self._offset_snapshot())
        for directory, error in unwritten:
            logger.error("cannot write the checkpoints of %s: %s", directory, error)
        if failed:
            return
        # A dir whose I/O failed, not loaded in full, or with a damaged log must be
        # recovered at the next start.
        bad = set(self.offline_dirs) | {directory for directory, _ in unwritten}
        bad |= self._loader.unloaded
        bad |= {os.path.dirname(damage.path) for damage in self._loader.damaged.values()}
        for directory in self._dirs:
            if directory not in bad:
                checkpoints.write_atomically(
                    os.path.join(directory, checkpoints.CLEAN_SHUTDOWN_FILE), "")


def _run_jobs(jobs: Iterable[FlushJob]) -> None:
    synced_dirs: set[str] = set()  # every job was begun before this hop
    for job in jobs:
        if isinstance(job, PartitionFlushJob):
            job.synced_dirs = synced_dirs
        try:
            job.run()
        except Exception:  # the job keeps its error; complete_flush reports it
            pass


def _now_ms() -> int:
    return int(time.time() * 1000)
