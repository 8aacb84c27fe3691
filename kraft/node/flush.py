"""The node's log flushes: one flush job at a time (group commit: what the loop appended
meanwhile rides along), run in the node's log thread, then the core hears `on_log_flushed`.

A full disk stalls the flushes instead of stopping the node: nothing new counts as durable,
so the high watermark stops and no write is acknowledged, and the same job runs again until
space returns. Any other failed flush is fatal: the page cache can no longer be trusted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from prometheus_client import Histogram

from kraft.log.base import DurableLog, FlushJob

log = logging.getLogger(__name__)


class LogFlusher:
    def __init__(
        self,
        log_: DurableLog,
        run_job: Callable[[FlushJob], Awaitable[None]],
        fsync_duration: Histogram,
        flushed: Callable[[], None],
        fatal: Callable[[BaseException], None],
    ) -> None:
        """`run_job` runs a job in the node's log thread; `flushed` tells the core (through
        the node's guard); `fatal` stops the node."""
        self._log = log_
        self._run_job = run_job
        self._fsync_duration = fsync_duration
        self._flushed = flushed
        self._fatal = fatal
        self.wanted = asyncio.Event()  # set after every core step that may have appended
        self.disk_full = False  # flushes refused for want of space: nothing is acknowledged

    async def run(self) -> None:
        while True:
            await self.wanted.wait()
            self.wanted.clear()
            job = self._log.begin_flush()
            if job is None:
                continue
            started = time.perf_counter()
            try:
                await self._run_job(job)
            except OSError as exc:
                if not getattr(job, "retryable", False) or not await self._retry(job):
                    # The disk refused: nothing more may be acknowledged as durable.
                    log.critical("log flush failed: %s", exc)
                    self._fatal(exc)
                    return
            self._fsync_duration.observe(time.perf_counter() - started)
            self._log.complete_flush(job)
            self._flushed()

    async def _retry(self, job: FlushJob) -> bool:
        """A full disk: nothing new counts as durable, so the HW stops and no write is
        acknowledged; appends are refused. Run the same job again, backing off, until space
        returns (True) or a fatal error (False)."""
        self.disk_full = True
        log.error("the metadata log's disk is full; retrying the flush until space returns")
        delay = 0.05
        while True:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            try:
                await self._run_job(job)
            except OSError as exc:
                if getattr(job, "retryable", False):
                    continue
                log.critical("log flush failed while the disk was full: %s", exc)
                return False
            self.disk_full = False
            log.warning("disk space returned; the log is flushing again")
            return True
