"""Closing every partition log of a broker at once (a clean shutdown), so that a SIGTERM with
thousands of partitions exits in a second, not after an fsync per file per log in turn.

Each log writes a producer snapshot if its tail since the last one is long
(broker/log/producer_snapshots.py), then its flush job is begun (what it wrote since its last
flush: data, metadata files, a recovery point to raise). Where syncfs is available
(broker/log/durability.py) one call per filesystem makes all of it durable, each job then
raises its log's recovery point in place without a sync of its own, and a second syncfs makes
those durable: two syncs for the whole broker. Elsewhere the jobs run in a thread pool, as
Kafka closes logs with `num.recovery.threads.per.data.dir` threads. Either way a job's data
is durable before its recovery point is raised, and the caller writes the clean-shutdown
marker only after this returned with no failure.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from broker.log import durability
from broker.log.log_files import PartitionFlushJob
from broker.log.partition_log import PartitionLog

logger = logging.getLogger(__name__)

# A producer snapshot at shutdown when a restart would otherwise replay this many batches: a
# header costs a few microseconds to replay, a new file about half a millisecond to create.
SHUTDOWN_SNAPSHOT_BATCHES = 512


def close_logs(logs: Sequence[PartitionLog], threads: int) -> list[tuple[PartitionLog, Exception]]:
    """Flush and close every log in `logs` (blocking); the logs whose flush or close failed,
    with the error (each log is closed either way)."""
    failed: list[tuple[PartitionLog, Exception]] = []
    jobs: list[tuple[PartitionLog, PartitionFlushJob]] = []
    for log in logs:
        try:
            log.snapshot_if_due(SHUTDOWN_SNAPSHOT_BATCHES)
            job = log.begin_flush()
        except Exception as exc:
            failed.append((log, exc))
            continue
        if job is not None:
            jobs.append((log, job))
    if jobs:
        try:
            _sync(jobs, threads)
        except OSError as exc:
            logger.error("syncing the logs at shutdown failed: %s", exc)
            for _, job in jobs:
                job.fail(exc)
    for log, job in jobs:
        try:
            log.complete_flush(job)
        except Exception as exc:
            failed.append((log, exc))
    for log in logs:
        try:
            log.close(flush=False)
        except Exception as exc:
            failed.append((log, exc))
    return failed


def _sync(jobs: list[tuple[PartitionLog, PartitionFlushJob]], threads: int) -> None:
    directories = _one_per_filesystem({os.path.dirname(log.directory) for log, _ in jobs})
    if durability.available():
        for _, job in jobs:  # the checkpoints the jobs write, synced with the rest
            _run(job.write_files)
        for directory in directories:
            durability.sync_filesystem(directory)
        for _, job in jobs:
            _run(job.run_synced)
        for directory in directories:
            durability.sync_filesystem(directory)
        return
    with ThreadPoolExecutor(max_workers=max(1, threads),
                            thread_name_prefix="log-close") as pool:
        for _ in pool.map(lambda job: _run(job.run), (job for _, job in jobs)):
            pass


def _run(run: Callable[[], None]) -> None:
    try:
        run()
    except Exception:  # the job keeps its error; complete_flush reports it
        pass


def _one_per_filesystem(directories: set[str]) -> list[str]:
    by_device: dict[int, str] = {}
    for directory in sorted(directories):
        by_device.setdefault(os.stat(directory).st_dev, directory)
    return list(by_device.values())
