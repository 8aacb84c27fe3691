"""Fault injection for the chaos tool and tests, driven by files in one directory
(`internal.test.faults.dir`), so a harness can fault any node in any role without an RPC:

* `blocked`: comma-separated node ids; Raft traffic to and from them is dropped (a partition);
* `disk-full`: while it exists, the log's writes fail with ENOSPC;
* `fsync-delay-ms`: every group commit's fsync takes that much longer;
* `clock-offset-ms`: added to the wall clock the node stamps records with (a clock jump; the
  protocol's timers run on the monotonic clock and do not jump).

The injector polls the directory every 50 ms and applies what changed, logging each change.
"""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import suppress
from dataclasses import dataclass

from kraft.log.segmented import LogFaults
from kraft.node.raft_node import RaftNode

log = logging.getLogger(__name__)

POLL_S = 0.05


@dataclass(frozen=True)
class FaultState:
    blocked: frozenset[int] = frozenset()
    disk_full: bool = False
    fsync_delay_ms: int = 0
    clock_offset_ms: int = 0


def read_faults(directory: str) -> FaultState:
    """The faults the directory describes now; unreadable or malformed files count as absent."""

    def text(name: str) -> str | None:
        with suppress(OSError), open(os.path.join(directory, name), encoding="utf-8") as file:
            return file.read().strip()
        return None

    def integer(name: str) -> int:
        raw = text(name)
        try:
            return int(raw) if raw else 0
        except ValueError:
            return 0

    blocked_text = text("blocked") or ""
    blocked = frozenset(int(p) for p in blocked_text.split(",") if p.strip().lstrip("-").isdigit())
    return FaultState(
        blocked=blocked,
        disk_full=os.path.exists(os.path.join(directory, "disk-full")),
        fsync_delay_ms=integer("fsync-delay-ms"),
        clock_offset_ms=integer("clock-offset-ms"),
    )


class FaultInjector:
    def __init__(self, directory: str, node: RaftNode, log_faults: LogFaults) -> None:
        self.directory = directory
        self.node = node
        self.log_faults = log_faults
        self.state = FaultState()
        self._base_clock_offset: int | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        self.apply(read_faults(self.directory))
        self._task = asyncio.create_task(self._watch(), name="kraft-faults")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            state = read_faults(self.directory)
            if state != self.state:
                self.apply(state)

    def apply(self, state: FaultState) -> None:
        if state != self.state:
            log.warning("injected faults: %s", state)
        self.node.transport.blocked = state.blocked
        self.log_faults.disk_full = state.disk_full
        self.log_faults.fsync_delay_s = state.fsync_delay_ms / 1000
        core = self.node.core
        if core is not None:
            if self._base_clock_offset is None:
                self._base_clock_offset = core.wall_clock_offset_ms
            core.wall_clock_offset_ms = self._base_clock_offset + state.clock_offset_ms
        self.state = state
