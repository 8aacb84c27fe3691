"""The chaos tool's injected network partition, applied to the data plane too.

kraft.node.faults.FaultInjector drops Raft traffic to and from the node ids in the faults
directory's `blocked` file (and confirms each change). A broker also replicates partition data
from other brokers: this task gives the same set to its replica fetchers (no fetch to a
blocked leader) and its replica manager (a blocked follower's fetch counts for nothing), so a
partition cuts both the metadata quorum and replication. Test and chaos use only
(`internal.test.faults.dir`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from broker.replica.fetcher import FetcherManager
from kraft.node.faults import POLL_S, read_faults

log = logging.getLogger(__name__)


class DataPlaneFaults:
    def __init__(self, directory: str, fetchers: FetcherManager) -> None:
        self.directory = directory
        self.fetchers = fetchers
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.apply()
        self._task = asyncio.create_task(self._watch(), name="data-plane-faults")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def apply(self) -> None:
        blocked = read_faults(self.directory).blocked
        if blocked != self.fetchers.blocked:
            log.warning("injected data-plane partition: no replication to or from %s",
                        sorted(blocked) or "anyone (healed)")
            self.fetchers.blocked = blocked

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            with contextlib.suppress(OSError):
                self.apply()
