"""The chaos tool's injected faults, applied to the data plane too.

kraft.node.faults.FaultInjector drops Raft traffic to and from the node ids in the faults
directory's `blocked` file (and confirms each change) and gives `disk-full` and
`fsync-delay-ms` to the metadata log. A broker also replicates partition data from other
brokers and writes partition logs: this task gives the same blocked set to its replica
fetchers (no fetch to a blocked leader) and its replica manager (a blocked follower's fetch
counts for nothing), so a partition cuts both the metadata quorum and replication, and the
disk faults to every partition log (a full disk takes the log dir offline, which stops the
broker: server/broker_role.py). Test and chaos use only (`internal.test.faults.dir`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from broker.replica.fetcher import FetcherManager
from kraft.log.segmented import LogFaults
from kraft.node.faults import POLL_S, read_faults

log = logging.getLogger(__name__)


class DataPlaneFaults:
    def __init__(self, directory: str, fetchers: FetcherManager, log_faults: LogFaults) -> None:
        self.directory = directory
        self.fetchers = fetchers
        self.log_faults = log_faults
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.apply()
        self._task = asyncio.create_task(self._watch(), name="data-plane-faults")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def apply(self) -> None:
        state = read_faults(self.directory)
        blocked = state.blocked
        if blocked != self.fetchers.blocked:
            log.warning("injected data-plane partition: no replication to or from %s",
                        sorted(blocked) or "anyone (healed)")
            self.fetchers.blocked = blocked
        if state.disk_full != self.log_faults.disk_full:
            log.warning("injected fault: partition logs' disk %s",
                        "full" if state.disk_full else "has space again")
        self.log_faults.disk_full = state.disk_full
        self.log_faults.fsync_delay_s = state.fsync_delay_ms / 1000

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            with contextlib.suppress(OSError):
                self.apply()
