"""The files of a partition directory below PartitionLog: opening its segments (with Kafka's
recovery, which checks batches only from the recovery point on), the flush job that syncs its
metadata files before its data, and the helpers for new, never-synced and deleted logs.

Recovery on open (Kafka's LogLoader): batches below the recovery point were fdatasynced
before the point was raised (kraft/log/recovery.py), so they are framed but not CRC-checked;
from the recovery point on every batch is checked and a torn tail is cut. After a clean
shutdown (the log dir's marker: the last close flushed every log) no batch is checked at all.
A frame below the recovery point that does not parse still stops the trusted walk, and the
strict scan from there refuses it as damage before the recovery point.
"""

from __future__ import annotations

import os
import shutil

from broker.log import checkpoints
from broker.log.config import LogConfig
from broker.log.log_state import LoadingFormat
from broker.records import KAFKA_FORMAT
from kraft.log._common import fsync_dir, read_file
from kraft.log.base import FlushJob
from kraft.log.recovery import RECOVERY_POINT_FILE, parse_recovery_point
from kraft.log.segmented import SegmentedLog, SegmentFlushJob

# Reads of recent data are served from memory; older data comes from the page cache.
CACHE_BYTES = 1 << 20
DELETED_SUFFIX = "-delete"
TRUST_ALL = 2**63 - 1  # a clean shutdown: every batch was flushed by the last close


def open_segments(directory: str, config: LogConfig, batch_format: LoadingFormat,
                  synced: bool = False, listing: list[str] | None = None) -> SegmentedLog:
    """The directory's SegmentedLog, recovered from its recovery point (module docstring)
    and indexed by `batch_format`; `synced`: the caller made the directory's files durable
    (SegmentedLog's docstring); `listing`: the directory's names, when the caller has them."""
    log = SegmentedLog(
        directory, segment_bytes=config.segment_bytes, cache_bytes=CACHE_BYTES,
        recovery_point_interval_ms=0, batch_format=batch_format, write_through=True,
        synced=synced, listing=listing,
    )
    batch_format.trusted_below = 0  # appends are checked in full
    return log


def plain_segments(directory: str, config: LogConfig) -> SegmentedLog:
    """The directory's SegmentedLog, every batch checked (a cleaner swap reopens with it)."""
    return SegmentedLog(
        directory, segment_bytes=config.segment_bytes, cache_bytes=CACHE_BYTES,
        recovery_point_interval_ms=0, batch_format=KAFKA_FORMAT, write_through=True,
    )


def recovery_point(directory: str) -> int:
    """The recovery point in the directory's file, 0 when there is none or it does not parse
    (SegmentedLog says so when it reads the file itself)."""
    try:
        with open(os.path.join(directory, RECOVERY_POINT_FILE), "rb") as file:
            value = parse_recovery_point(file.read(256))
    except OSError:
        return 0
    return value or 0


def read_recovery_state(directory: str) -> tuple[bool, int]:
    """(`never_synced`, `recovery_point`) of the directory from one read of its file (a
    broker opening thousands of logs asks both of each)."""
    try:
        raw = read_file(os.path.join(directory, RECOVERY_POINT_FILE), 256)
    except FileNotFoundError:
        return True, 0
    except OSError:
        return never_synced(directory), 0
    return raw == b"", parse_recovery_point(raw) or 0


class PartitionFlushJob:
    """A partition log's flush job: write the leader-epoch checkpoint when it lags (`epochs`:
    the log's directory and the entries when the job began), fsync the unsynced metadata files
    and directories, then run the segments' job (if any). `run` in any thread; back to
    `complete_flush`."""

    __slots__ = ("directories", "epochs", "error", "files", "segment_job", "synced_dirs",
                 "syncs")

    def __init__(
        self, files: list[str], directories: list[str], segment_job: FlushJob | None,
        epochs: tuple[str, list[tuple[int, int]]] | None = None,
    ) -> None:
        self.files = files
        self.directories = directories
        self.segment_job = segment_job
        self.epochs = epochs
        self.error: BaseException | None = None
        self.syncs = 0
        # Directories already fsynced after this job began (shared by the jobs of one worker
        # hop, all begun before it: a thousand new logs need one fsync of their log dir).
        self.synced_dirs: set[str] | None = None

    def write_files(self) -> None:
        """Write the files the job writes (the leader-epoch checkpoint), without fsync; once."""
        if self.epochs is not None:
            directory, entries = self.epochs
            self.epochs = None
            checkpoints.write_leader_epochs(directory, entries, durable=False)

    def run(self) -> None:
        done = self.synced_dirs
        directories = self.directories if done is None else [
            path for path in self.directories if path not in done]
        try:
            self.write_files()
            self.syncs += checkpoints.fsync_paths(self.files, directories)
            if done is not None:
                done.update(directories)
        except BaseException as exc:
            self.error = exc
            if isinstance(self.segment_job, SegmentFlushJob):
                # Its data must not be synced before the files that name it: the job fails
                # as a failed fsync does (the log cannot be trusted).
                self.segment_job.error = exc
            raise
        if self.segment_job is not None:
            self.segment_job.run()

    def fail(self, exc: BaseException) -> None:
        """The sync that was to make this job's files durable failed: the job failed as a
        failed fsync does."""
        self.error = self.error or exc
        if isinstance(self.segment_job, SegmentFlushJob):
            self.segment_job.error = self.segment_job.error or exc

    def run_synced(self) -> None:
        """`run` when the caller made every file of the log durable after the job began (a
        syncfs): nothing is fsynced here; the recovery point is raised without a sync, so the
        caller syncs the filesystem again before relying on it (SegmentFlushJob.run_synced)."""
        try:
            self.write_files()
        except BaseException as exc:
            self.fail(exc)
            raise
        if isinstance(self.segment_job, SegmentFlushJob):
            try:
                self.segment_job.run_synced()
            except BaseException as exc:
                self.error = exc
                raise
        elif self.segment_job is not None:
            self.segment_job.run()


def remove_deleted(path: str) -> None:
    """Remove a directory `PartitionLog.delete` renamed, and make the removal durable."""
    shutil.rmtree(path, ignore_errors=True)
    fsync_dir(os.path.dirname(path))


def never_synced(directory: str) -> bool:
    """Whether the directory has no recovery-point file, or an empty one: no flush job of the
    log ever ran (the first one fsyncs the file before any data)."""
    path = os.path.join(directory, RECOVERY_POINT_FILE)
    try:
        return os.stat(path).st_size == 0
    except FileNotFoundError:
        return True


def write_recovery_point_zero(directory: str) -> str:
    """SegmentedLog's recovery-point file holding 0 ("nothing here was ever durable"), without
    fsync; its path."""
    path = os.path.join(directory, RECOVERY_POINT_FILE)
    checkpoints.write_atomically(path, "0\n0\n", durable=False)  # kraft.log's format
    return path
